// The vLLM start-up log reader (startup_log.h): every format in tests/data/plan/logs (each file names its
// source), prefixes, ANSI colours, units, thousands separators, ranks that differ, and what it never claims.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "fp4forge/kvplan/startup_log.h"
#include "fp4forge/util/size.h"

namespace fp4forge::kvplan {
namespace {

const std::string kLogs = std::string(FP4FORGE_TEST_DATA) + "/plan/logs/";

double gib(std::uint64_t b) { return static_cast<double>(b) / static_cast<double>(kGiB); }

TEST(KvplanStartupLog, Reads019FormatWithPrefixes) {
  auto r = read_startup_log(kLogs + "v0.19-gemma-2-9b-h100.log");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const StartupLog& l = *r;
  ASSERT_TRUE(l.version);
  EXPECT_EQ(l.version->value, "0.19.0");
  ASSERT_TRUE(l.args.is_object());
  EXPECT_EQ(l.args["max_model_len"], 8192);
  EXPECT_DOUBLE_EQ(l.args["gpu_memory_utilization"].get<double>(), 0.95);
  EXPECT_EQ(l.args["enable_prefix_caching"], false);
  ASSERT_TRUE(l.weights_bytes && l.available_kv_bytes && l.kv_cache_tokens && l.max_concurrency);
  EXPECT_NEAR(gib(l.weights_bytes->value), 17.22, 1e-9);
  EXPECT_NEAR(gib(l.available_kv_bytes->value), 54.12, 1e-9);
  EXPECT_EQ(l.kv_cache_tokens->value, 168880);
  EXPECT_DOUBLE_EQ(l.max_concurrency->value, 20.60);
  EXPECT_EQ(l.concurrency_tokens->value, 8192);
  ASSERT_TRUE(l.torch_total_bytes && l.free_at_start_bytes && l.requested_bytes && l.util);
  EXPECT_NEAR(gib(l.torch_total_bytes->value), 79.19, 1e-9);
  EXPECT_NEAR(gib(l.free_at_start_bytes->value), 78.68, 1e-9);
  EXPECT_DOUBLE_EQ(l.util->value, 0.95);
  EXPECT_NEAR(gib(l.activation_peak_bytes->value), 3.65, 1e-9);
  EXPECT_NEAR(gib(l.non_torch_bytes->value), 0.25, 1e-9);
  EXPECT_NEAR(gib(l.graph_estimate_bytes->value), 0.84, 1e-9);
  EXPECT_NEAR(gib(l.graph_captured_bytes->value), 1.09, 1e-9);
  EXPECT_EQ(l.kv_fit_bytes->value, 56783239680u);  // exact bytes
  EXPECT_EQ(l.num_gpu_blocks->value, 21110);
  EXPECT_EQ(l.batched->value, 8192);
  EXPECT_EQ(l.max_num_seqs->value, 1024);
  EXPECT_TRUE(l.async_scheduling->value);
  EXPECT_FALSE(l.refused);
  const LoggedOptions o = logged_options(l);
  EXPECT_EQ(o.model, "google/gemma-2-9b-it");
  EXPECT_NE(std::find(o.keys.begin(), o.keys.end(), "max_model_len=8192"), o.keys.end());
  EXPECT_NE(std::find(o.keys.begin(), o.keys.end(), "gpu_memory_utilization=0.95"), o.keys.end());
  EXPECT_NE(std::find(o.keys.begin(), o.keys.end(), "prefix_caching=off"), o.keys.end());
}

TEST(KvplanStartupLog, Reads027GraphEstimateLines) {
  auto r = read_startup_log(kLogs + "v0.27.1-graph-estimate.log");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_NEAR(gib(r->graph_estimate_bytes->value), 0.36, 1e-9);
  EXPECT_NEAR(gib(r->available_kv_bytes->value), 6.87, 1e-9);
  EXPECT_DOUBLE_EQ(r->util->value, 0.82);
  EXPECT_FALSE(r->weights_bytes);  // never invented: the excerpt has no "Model loading took"
  EXPECT_FALSE(r->torch_total_bytes);
}

TEST(KvplanStartupLog, ReadsTheConsumedMemorySummaryOfTwoRanks) {
  auto r = read_startup_log(kLogs + "v0.2x-consumed-summary-tp2.log");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_NEAR(gib(r->consumed_bytes->value), 15.25, 1e-9);
  EXPECT_NEAR(gib(r->activation_peak_bytes->value), 1.66, 1e-9);
  EXPECT_NEAR(gib(r->graph_captured_bytes->value), 0.14, 1e-9);
  EXPECT_NEAR(gib(r->available_kv_bytes->value), 4.76, 1e-9);
  // The two ranks print 23.15 and 23.14 GiB free: the tighter is kept and the difference named.
  EXPECT_NEAR(gib(r->free_at_start_bytes->value), 23.14, 1e-9);
  EXPECT_NEAR(gib(r->torch_total_bytes->value), 23.56, 1e-9);
  EXPECT_DOUBLE_EQ(r->util->value, 0.92);
  EXPECT_FALSE(r->notes.empty());
  EXPECT_EQ(r->kv_fit_bytes->value, 4803010376u);  // the smaller of the two ranks
  EXPECT_FALSE(r->weights_bytes);  // "consumed" is weights + non-torch: not split into a weights figure
}

TEST(KvplanStartupLog, Reads08ProfilingSummary) {
  auto r = read_startup_log(kLogs + "v0.8-profiling-summary.log");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_NEAR(gib(r->torch_total_bytes->value), 23.58, 1e-9);
  EXPECT_DOUBLE_EQ(r->util->value, 0.99);
  EXPECT_NEAR(gib(r->requested_bytes->value), 23.35, 1e-9);
  EXPECT_NEAR(gib(r->weights_bytes->value), 21.21, 1e-9);
  EXPECT_NEAR(gib(r->non_torch_bytes->value), 0.20, 1e-9);
  EXPECT_NEAR(gib(r->activation_peak_bytes->value), 0.37, 1e-9);
  EXPECT_NEAR(gib(r->available_kv_bytes->value), 1.57, 1e-9);
}

TEST(KvplanStartupLog, ReadsTheRefusal) {
  auto r = read_startup_log(kLogs + "refusal-l4.log");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->refused);
  EXPECT_EQ(r->refused_line, 3u);
  EXPECT_NEAR(gib(r->free_at_start_bytes->value), 1.53, 1e-9);
  EXPECT_NEAR(gib(r->torch_total_bytes->value), 22.05, 1e-9);
  EXPECT_NEAR(gib(r->requested_bytes->value), 19.84, 1e-9);
  EXPECT_DOUBLE_EQ(r->util->value, 0.9);
}

TEST(KvplanStartupLog, ToleratesColoursCrlfUnitsAndOldGbLabels) {
  const StartupLog l = parse_startup_log(
      "\x1b[1;36m(EngineCore_DP0 pid=123)\x1b[0;0m INFO 08-01 12:00:00 [gpu_worker.py:276] Available KV cache memory: "
      "1,024.5 MiB\r\n"
      "INFO 03-28 12:57:37 [gpu_model_runner.py:1186] Model loading took 13.1665 GB and 5.346817 seconds\r\n"
      "GPU KV cache size: 1,823,372 tokens\n"
      "(EngineCore pid=7476) INFO 07-25 13:42:38 [kv_cache_utils.py:2147] Maximum concurrency for 1,048,576 tokens per "
      "request: 1.74x\n"
      "INFO 05-26 21:34:14 [gpu_model_runner.py:6243] Graph capturing finished in 2 secs, took 0.11 GiB\n");
  EXPECT_EQ(l.available_kv_bytes->value, static_cast<std::uint64_t>(1024.5 * 1048576.0));
  // vLLM before 0.10 printed GiB figures labelled "GB": 13.1665 x 2^30.
  EXPECT_EQ(l.weights_bytes->value, static_cast<std::uint64_t>(std::round(13.1665 * 1073741824.0)));
  EXPECT_EQ(l.kv_cache_tokens->value, 1823372);
  EXPECT_EQ(l.concurrency_tokens->value, 1048576);
  EXPECT_DOUBLE_EQ(l.max_concurrency->value, 1.74);
  EXPECT_EQ(l.kv_cache_tokens->line, 3u);
}

TEST(KvplanStartupLog, ClaimsNothingItDidNotRead) {
  const StartupLog l = parse_startup_log("hello\nINFO something else\nKV cache memory maybe 3 GiB\n");
  EXPECT_TRUE(l.empty());
  const std::string dir = ::testing::TempDir();
  auto r = read_startup_log(kLogs + "gemma-2-9b/config.json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::BAD_INPUT);
  EXPECT_NE(r.error().message.find("no vLLM start-up line"), std::string::npos);
  auto missing = read_startup_log(dir + "/no-such.log");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, Errc::IO);
}

// A log cut short is said to be one, not read as a vLLM that prints less (issue 55 tryout: `head -c 3000`).
TEST(KvplanStartupLog, ALogCutShortIsSaidToBeOne) {
  auto whole = read_startup_log(kLogs + "v0.19-gemma-2-9b-h100.log");
  ASSERT_TRUE(whole.ok()) << whole.error().message;
  EXPECT_TRUE(whole->notes.empty()) << whole->notes.front();
  std::ostringstream buf;
  buf << std::ifstream(kLogs + "v0.19-gemma-2-9b-h100.log", std::ios::binary).rdbuf();
  const std::string text = buf.str();
  const std::string dir = ::testing::TempDir();
  const std::size_t loaded = text.find("Model loading took");
  ASSERT_NE(loaded, std::string::npos);
  // Cut mid-line, and cut at a line's end before any KV-cache line.
  const std::size_t eol = text.find('\n', loaded);
  for (const auto& [cut, want] : std::vector<std::pair<std::string, std::string>>{
           {text.substr(0, eol + 20), "the log ends mid-line (line "},
           {text.substr(0, eol + 1), "after the weights loaded and before any KV-cache line: cut?"}}) {
    const std::string path = dir + "/cut.log";
    std::ofstream(path, std::ios::binary | std::ios::trunc) << cut;
    auto r = read_startup_log(path);
    ASSERT_TRUE(r.ok()) << r.error().message;
    ASSERT_EQ(r->notes.size(), 1u) << cut.size();
    EXPECT_NE(r->notes[0].find(want), std::string::npos) << r->notes[0];
  }
  auto labelled = read_startup_log(dir + "/no-such.log", "--from-log ");
  ASSERT_FALSE(labelled.ok());
  EXPECT_EQ(labelled.error().message.rfind("--from-log " + dir + "/no-such.log: ", 0), 0u) << labelled.error().message;
}

TEST(KvplanStartupLog, PythonReprOfArgs) {
  auto j = parse_python_repr("{'model': '/m', 'served_model_name': ['chat'], 'speculative_config': {'method': 'mtp', "
                             "'num_speculative_tokens': 3}, 'max_model_len': '128k', 'enforce_eager': True, 'x': None, "
                             "'path': PosixPath('/a/b'), 'n': -1.5e3}");
  ASSERT_TRUE(j);
  EXPECT_EQ((*j)["served_model_name"][0], "chat");
  EXPECT_EQ((*j)["speculative_config"]["num_speculative_tokens"], 3);
  EXPECT_EQ((*j)["enforce_eager"], true);
  EXPECT_TRUE((*j)["x"].is_null());
  EXPECT_EQ((*j)["path"], "PosixPath('/a/b')");
  EXPECT_DOUBLE_EQ((*j)["n"].get<double>(), -1500.0);
  EXPECT_FALSE(parse_python_repr("{'cut off': "));
  StartupLog l;
  l.args = *j;
  const LoggedOptions o = logged_options(l);
  EXPECT_EQ(o.model, "/m");
  EXPECT_EQ(o.served_name, "chat");
  EXPECT_NE(std::find(o.keys.begin(), o.keys.end(), "spec_tokens=3"), o.keys.end());
  EXPECT_NE(std::find(o.keys.begin(), o.keys.end(), "max_model_len=128k"), o.keys.end());
  EXPECT_NE(std::find(o.ignored.begin(), o.ignored.end(), "path"), o.ignored.end());
}

}  // namespace
}  // namespace fp4forge::kvplan
