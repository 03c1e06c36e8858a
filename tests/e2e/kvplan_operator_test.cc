// Issue 55, `fp4forge plan` as an operator reads it: a port clash said as one and naming both seats, a recipe's
// output planned from its own weights, DeepSeek-V4's refusal with a hint, where the vLLM version comes from, one
// unit family, tables as wide as their content, the driver reserve said per GPU, one line per item when piped.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace {

namespace stdfs = std::filesystem;
using fp4forge::testutil::kData;
using fp4forge::testutil::q;
using fp4forge::testutil::run_cli;
using fp4forge::testutil::slurp;
using fp4forge::testutil::TempDir;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string l; std::getline(ss, l);) out.push_back(l);
  return out;
}

/** The lines of the table whose header line starts with `header` (up to the first line that is empty or starts
 * with "GPU N: driver reserve"). */
std::vector<std::string> table_of(const std::vector<std::string>& lines, const std::string& header) {
  std::vector<std::string> t;
  bool in = false;
  for (const auto& l : lines) {
    if (!in && l.rfind(header, 0) == 0) in = true;
    else if (in && (l.empty() || std::regex_search(l, std::regex("^GPU \\S+: driver reserve")))) break;
    if (in) t.push_back(l);
  }
  return t;
}

class KvplanOperator : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::string(FP4FORGE_CLI).empty()) GTEST_SKIP() << "CLI not built";
  }
  TempDir tmp_;
};

// Two seats on one host port: the clash is the reason, naming both seats, also when one port is the default
// 8000 + index (it went unnoticed), and --emit-compose writes nothing and says why (it said "no seat is placed on
// a GPU", exit 3, with no plan printed).
TEST_F(KvplanOperator, APortClashIsSaidAsOneNamingBothSeats) {
  const std::string seats = "--seat a=" + q(kData + "/llama") + " --seat b=" + q(kData + "/llama") + ":port=8000";
  std::string out, err;
  const std::string clash = "host port 8000 clash: seats 'a' (the default, 8000 + its index 0) and 'b' (port=8000) "
                            "both bind it; give each seat its own port=";
  EXPECT_EQ(run_cli("plan " + seats + " --gpu 0=80GiB --json", &out, &err), 1) << out << err;
  const auto j = nlohmann::json::parse(out);
  for (int s = 0; s < 2; ++s) EXPECT_EQ(j["seats"][s]["placement"]["blocker"], clash);
  EXPECT_EQ(run_cli("plan " + seats + " --gpu 0=80GiB", &out, &err), 1) << out << err;
  EXPECT_NE(std::regex_replace(out, std::regex("\\s+"), " ").find("seat 'b' cannot start: " + clash), std::string::npos)
      << out;
  const stdfs::path deploy = tmp_.path / "deploy";
  EXPECT_EQ(run_cli("plan " + seats + " --gpu 0=80GiB --emit-compose " + q(deploy), &out, &err), 1) << out << err;
  EXPECT_EQ(err.find("no seat is placed"), std::string::npos) << err;
  // A seat that cannot start refuses the whole set, as a serving blocker does (issue 55 tryout: the others' stacks
  // were written).
  EXPECT_NE(err.find("--emit-compose: seat 'a' cannot start: host port 8000 clash"), std::string::npos) << err;
  EXPECT_NE(out.find("NO START  cannot start: host port 8000 clash"), std::string::npos) << out;
  EXPECT_NE(err.find("nothing written: the stack of seat(s) 'a', 'b' could not start or serve"), std::string::npos)
      << err;
  EXPECT_NE(out.find("SEAT"), std::string::npos) << out;  // the plan is printed
  EXPECT_FALSE(stdfs::exists(deploy));
  // One seat vLLM refuses (max_model_len above the model's) beside one that starts: nothing written either.
  EXPECT_EQ(run_cli("plan --seat a=" + q(kData + "/llama") + " --seat b=" + q(kData + "/llama") +
                        ":port=8001,max_model_len=99999999 --gpu 0=80GiB --emit-compose " + q(deploy),
                    &out, &err),
            1)
      << out << err;
  EXPECT_NE(err.find("--emit-compose: seat 'b' cannot start: "), std::string::npos) << err;
  EXPECT_FALSE(stdfs::exists(deploy)) << err;
  {  // its largest length is the model's own limit, not the one vLLM refuses (issue 55 tryout)
    const std::int64_t own = nlohmann::json::parse(slurp(kData + "/llama/config.json"))["max_position_embeddings"];
    std::string jo;
    run_cli("plan --seat b=" + q(kData + "/llama") + ":max_model_len=99999999 --gpu 0=80GiB --json", &jo, &err);
    EXPECT_EQ(nlohmann::json::parse(jo)["seats"][0]["placement"]["largest_max_model_len"], own) << jo.substr(0, 600);
  }
  // Distinct ports (a's default 8000, b's own 8001, which is also its default): no clash, both stacks written.
  EXPECT_EQ(run_cli("plan --seat a=" + q(kData + "/llama") + " --seat b=" + q(kData + "/llama") +
                        ":port=8001 --gpu 0=80GiB --emit-compose " + q(deploy), &out, &err), 0)
      << out << err;
  EXPECT_TRUE(stdfs::exists(deploy / "b" / "compose.yaml"));
}

// A given utilization too large for the room: the range that fits is said, and its top is exact (issue 55 tryout:
// "short by" then a longer max_model_len offered, at a utilization that fits no length).
TEST_F(KvplanOperator, ATooLargeUtilizationSaysTheRangeThatFits) {
  const std::string seat = "--seat a=" + q(kData + "/llama") + ":gpu_memory_utilization=";
  std::string out, err;
  // 0.7 passes vLLM's start-up check on this card (it says its own range) but not the 1 GiB headroom kept free.
  EXPECT_EQ(run_cli("plan " + seat + "0.7 --gpu 0=4GiB --json", &out, &err), 1) << out << err;
  const std::string reason = nlohmann::json::parse(out)["seats"][0]["placement"]["reason"];
  std::smatch m;
  ASSERT_TRUE(std::regex_search(reason, m, std::regex("a utilization from (0\\.\\d+) to (0\\.\\d+) fits"))) << reason;
  EXPECT_NE(reason.find("beside the budget) on GPU 0"), std::string::npos) << reason;
  const double top = std::stod(m[2].str());
  EXPECT_EQ(run_cli("plan " + seat + fmt::format("{:.3f}", top) + " --gpu 0=4GiB", &out, &err), 0) << out << err;
  EXPECT_EQ(run_cli("plan " + seat + fmt::format("{:.3f}", top + 0.001) + " --gpu 0=4GiB", &out, &err), 1) << out;
  EXPECT_EQ(run_cli("plan " + seat + m[1].str() + " --gpu 0=4GiB", &out, &err), 0) << out << err;
}

// The largest max_model_len offered is one the seat fits at, for its concurrency=, and 16 tokens more do not (issue
// 55 tryout: one request's length offered to a seat of four, then refused; the KV margin of 0.34 left out).
TEST_F(KvplanOperator, TheLargestLengthOfferedFitsForTheSeatsConcurrency) {
  const std::string seat = "--seat a=" + q(kData + "/llama") + ":concurrency=2000";
  std::string out, err;
  EXPECT_EQ(run_cli("plan " + seat + " --gpu 0=6GiB --json", &out, &err), 1) << err;  // 2000 x 4096 does not fit
  const std::int64_t len = nlohmann::json::parse(out)["seats"][0]["placement"]["largest_max_model_len"];
  ASSERT_GT(len, 0) << out.substr(0, 400);
  ASSERT_LT(len, 4096);
  EXPECT_EQ(run_cli("plan " + seat + ",max_model_len=" + std::to_string(len) + " --gpu 0=6GiB", &out, &err), 0) << out;
  EXPECT_NE(out.find("(for 2000 requests, concurrency=)"), std::string::npos) << out;
  EXPECT_EQ(run_cli("plan " + seat + ",max_model_len=" + std::to_string(len + 16) + " --gpu 0=6GiB", &out, &err), 1)
      << out;
}

// A checkpoint quantized with a recipe (mixed FP8_BLOCK + NVFP4A16 groups) is planned from its own weights as
// stored: recipe= / assume= on it do not re-size it (they sized it as if its packed weights were a source) and
// --emit-compose serves it (it was refused as "assume=nvfp4a16"). recipe= on a source names recipe= in its refusal.
TEST_F(KvplanOperator, ARecipeOutputIsPlannedAsStoredAndARecipeSeatIsNamedAsOne) {
  const stdfs::path recipe = tmp_.path / "mixed.yaml";
  std::ofstream(recipe) << "scheme: nvfp4a16\nrules:\n  - match: attention\n    scheme: fp8-block\n";
  const stdfs::path out_dir = tmp_.path / "q";
  std::string out, err;
  ASSERT_EQ(run_cli("quantize " + q(kData + "/llama") + " " + q(out_dir) + " --recipe " + q(recipe), &out, &err), 0)
      << err;
  ASSERT_EQ(run_cli("plan --seat s=" + q(out_dir) + " --json", &out, &err), 0) << err;
  const auto plain = nlohmann::json::parse(out)["seats"][0]["weights"];
  EXPECT_EQ(plain["quantization"], "compressed-tensors FP8_BLOCK+NVFP4A16");
  EXPECT_EQ(plain["bytes"], plain["stored_bytes"]);
  const std::string keyed = "plan --seat 's=" + out_dir.string() + ":recipe=" + recipe.string() + "' --gpu 0=80GiB";
  ASSERT_EQ(run_cli(keyed + " --json", &out, &err), 0) << err;
  const auto j = nlohmann::json::parse(out)["seats"][0];
  EXPECT_EQ(j["weights"]["bytes"], plain["bytes"]);
  EXPECT_EQ(j["weights"]["source"], "safetensors");
  EXPECT_TRUE(j["options"]["recipe"].is_null());
  EXPECT_NE(j["notes"].dump().find("does not apply: DIR is already quantized (compressed-tensors FP8_BLOCK+NVFP4A16)"),
            std::string::npos)
      << j["notes"].dump();
  ASSERT_EQ(run_cli(keyed, &out, &err), 0) << err;
  EXPECT_NE(out.find("stored compressed-tensors FP8_BLOCK+NVFP4A16"), std::string::npos) << out;
  const stdfs::path deploy = tmp_.path / "deploy";
  EXPECT_EQ(run_cli(keyed + " --emit-compose " + q(deploy), &out, &err), 0) << err;
  EXPECT_TRUE(stdfs::exists(deploy / "s" / "compose.yaml"));
  // recipe= on the BF16 source: the refusal names recipe= and the quantize command that writes it.
  EXPECT_EQ(run_cli("plan --seat 's=" + kData + "/llama:recipe=" + recipe.string() + "' --gpu 0=80GiB --emit-compose " +
                        q(tmp_.path / "d2"), &out, &err), 2);
  EXPECT_NE(err.find("planned with recipe="), std::string::npos) << err;
  EXPECT_NE(err.find("--recipe " + recipe.string()), std::string::npos) << err;
  EXPECT_EQ(err.find("assume="), std::string::npos) << err;
}

// DeepSeek-V4's compressed attention has no KV formula: refused (never a false number), saying what and what to do.
TEST_F(KvplanOperator, DeepSeekV4IsRefusedWithWhatIsMissingAndAHint) {
  std::string out, err;
  EXPECT_EQ(run_cli("plan --seat d=" + q(kData + "/deepseek_v4") + " --gpu 0=80GiB", &out, &err), 3);
  EXPECT_NE(err.find("DeepSeek-V4's compressed attention"), std::string::npos) << err;
  EXPECT_NE(err.find("refuses the rest rather than guess; hint:"), std::string::npos) << err;
  // The file is named once, in front ("DIR/config.json: seat 'd': layer 0 ..."), not again in the message.
  EXPECT_NE(err.find("deepseek_v4/config.json: seat 'd': layer 0 of 2"), std::string::npos) << err;
  EXPECT_EQ(err.find("config.json"), err.rfind("config.json")) << err;
  EXPECT_EQ(run_cli("plan --seat l=" + q(kData + "/llama4-mm"), &out, &err), 3);
  EXPECT_NE(err.find("Llama-4's chunked local attention"), std::string::npos) << err;
  // Jamba (Mamba layers with an attention layer every attn_layer_period) was sized as 32 attention layers with a
  // note; a config-only folder sized by weights= is refused the same way, naming the first Mamba layer.
  stdfs::create_directories(tmp_.path / "jamba");
  std::ofstream(tmp_.path / "jamba" / "config.json")
      << R"({"architectures":["JambaForCausalLM"],"model_type":"jamba","hidden_size":4096,"num_hidden_layers":32,)"
         R"("num_attention_heads":32,"num_key_value_heads":8,"attn_layer_period":8,"attn_layer_offset":4,)"
         R"("mamba_d_state":16,"mamba_d_conv":4,"mamba_expand":2,"vocab_size":65536,"max_position_embeddings":262144})";
  EXPECT_EQ(run_cli("plan --seat j=" + q((tmp_.path / "jamba").string()) + ":weights=20GiB --gpu 0=80GiB", &out, &err),
            3);
  EXPECT_NE(err.find("layer 0 of 32 (jamba) is 'mamba': a recurrent state (Mamba)"), std::string::npos) << err;
  EXPECT_EQ(out.find("sized as plain attention layers"), std::string::npos) << out;
  // An unknown family whose config names sliding layers is said to be sized by that layout, not as plain attention.
  stdfs::create_directories(tmp_.path / "slide");
  std::ofstream(tmp_.path / "slide" / "config.json")
      << R"({"architectures":["Slide2ForCausalLM"],"model_type":"slide2","hidden_size":1024,"num_hidden_layers":4,)"
         R"("num_attention_heads":8,"num_key_value_heads":4,"head_dim":128,"sliding_window":4096,)"
         R"("layer_types":["sliding_attention","full_attention","sliding_attention","full_attention"],)"
         R"("vocab_size":32000,"max_position_embeddings":8192})";
  ASSERT_EQ(run_cli("plan --seat s=" + q((tmp_.path / "slide").string()) + ":weights=2GiB --gpu 0=80GiB", &out, &err),
            0)
      << err;
  EXPECT_NE(out.find("sized by its config's attention layout: 2 sliding-window and 2 full-attention layers"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("plain"), std::string::npos) << out;
}

// Every fixture, as plan reads it: sized (exit 0) or refused with what is not modelled (exit 3, "refuses the rest
// rather than guess"), never another error; a checkpoint inspect calls hybrid is never sized as attention alone
// (issue 55: Jamba was 32 attention layers), and the recurrent hybrids of the fixtures are refused.
TEST_F(KvplanOperator, EveryFixtureIsSizedByItsLayersOrRefusedAsUnmodelled) {
  std::set<std::string> refused;
  int sized = 0;
  for (const auto& e : stdfs::directory_iterator(kData)) {
    if (!stdfs::exists(e.path() / "config.json") || !stdfs::exists(e.path() / "model.safetensors.index.json")) continue;
    const std::string name = e.path().filename().string();
    SCOPED_TRACE(name);
    std::string out, err;
    const int rc = run_cli("plan --seat s=" + q(e.path().string()) + " --gpu 0=80GiB --json", &out, &err);
    if (rc == 3) {
      EXPECT_NE(err.find("refuses the rest rather than guess"), std::string::npos) << err;
      refused.insert(name);
      continue;
    }
    ASSERT_TRUE(rc == 0 || rc == 1) << err;
    ++sized;
    std::string iout, ierr;
    ASSERT_EQ(run_cli("inspect " + q(e.path().string()) + " --json", &iout, &ierr), 0) << ierr;
    if (!nlohmann::json::parse(iout)["class"]["hybrid"].get<bool>()) continue;
    bool state = false;
    const auto plan = nlohmann::json::parse(out);
    for (const auto& g : plan["seats"][0]["kv"]["groups"]) state = state || g["kind"] == "mamba_state";
    EXPECT_TRUE(state) << "a hybrid sized without a state group: " << out.substr(0, 300);
  }
  EXPECT_GT(sized, 40);
  for (const char* n : {"jamba", "falcon_h1", "nemotron_h", "minimax", "deepseek_v4", "llama4-mm"})
    EXPECT_TRUE(refused.count(n)) << n;
}

// The text report: the vLLM line says where the version comes from (it printed "vllm_version=;"), memory in binary
// units with no raw byte counts, tables as wide as their content (seat names over 16 characters and long GPU
// names pushed them out of line), the driver reserve per GPU with its source, one line per item when piped.
TEST_F(KvplanOperator, TheTextReportReadsInOneUnitWithAlignedTablesAndShortLines) {
  const std::string seat_name = "a-seat-name-longer-than-sixteen";
  const std::string gpu_name = "NVIDIA H200 NVL with a product name longer than the column";
  std::string out, err;
  ASSERT_EQ(run_cli("plan --seat " + seat_name + "=" + q(kData + "/llama") + " --seat g=" +
                        q(kData + "/gemma4-dense-mm") + " --gpu '0=143771MiB:name=" + gpu_name + "' --gpu 1=80GiB",
                    &out, &err), 0)
      << out << err;
  EXPECT_EQ(out.find("vllm_version=;"), std::string::npos) << out;
  EXPECT_NE(out.find("0.34 rules (the default, the newest modelled; vllm_version= sets it;"), std::string::npos) << out;
  EXPECT_FALSE(std::regex_search(out, std::regex("\\d,\\d{3} B\\b"))) << out;  // "(35,748,577,280 B)"
  EXPECT_EQ(out.find(" GB"), std::string::npos) << out;
  const auto lines = lines_of(out);
  // The summary: every row's second column starts where the header's GPU does, the last ends with FITS.
  const auto summary = table_of(lines, "SEAT ");
  ASSERT_EQ(summary.size(), 3u) << out;
  const std::size_t gpu_col = summary[0].find(" GPU ") + 1;
  for (std::size_t i = 1; i < summary.size(); ++i)
    EXPECT_EQ(summary[i].find_first_not_of(' ', summary[i].find(' ')), gpu_col) << summary[i];
  EXPECT_EQ(summary[1].rfind(seat_name, 0), 0u);
  // The GPU table: "SEATS ON IT" starts where each row's seat list does; memory in GiB.
  const auto gpus = table_of(lines, "GPU ");
  ASSERT_EQ(gpus.size(), 3u) << out;
  const std::size_t on_it = gpus[0].find("SEATS ON IT");
  // (the cut name ends in "…", one cell of three bytes: columns are counted in cells)
  const auto cells = [](const std::string& x) {
    return static_cast<std::size_t>(std::count_if(x.begin(), x.end(), [](char c) { return (c & 0xC0) != 0x80; }));
  };
  ASSERT_GE(gpus[1].size(), 2u);
  EXPECT_EQ(gpus[1].substr(gpus[1].size() - 3), "  g") << gpus[1];
  EXPECT_EQ(cells(gpus[1].substr(0, gpus[1].size() - 1)), on_it) << gpus[1];
  EXPECT_EQ(gpus[2].substr(on_it), seat_name);
  EXPECT_NE(gpus[1].find("140.40 GiB"), std::string::npos) << gpus[1];
  EXPECT_NE(gpus[0].find("RESERVE"), std::string::npos) << gpus[0];
  // The reserve each GPU's torch total leaves out, and where it comes from.
  EXPECT_NE(out.find("GPU 0: driver reserve 697.72 MiB, as measured on an NVIDIA"), std::string::npos) << out;
  EXPECT_NE(out.find("GPU 1: driver reserve 614.00 MiB, default estimate (614 MiB, at most a tenth of the total; no "
                     "name= to match a measured card"),
            std::string::npos)
      << out;
  // A small card's default is a tenth of its total, said with the rule (tryout Q-L3: 102.40 MiB against the docs'
  // 614 MiB, unexplained).
  std::string small, small_err;
  ASSERT_EQ(run_cli("plan --seat a=" + q(kData + "/llama") + " --gpu 0=4GiB", &small, &small_err), 0) << small;
  EXPECT_NE(small.find("GPU 0: driver reserve 409.60 MiB, default estimate (614 MiB, at most a tenth of the total;"),
            std::string::npos)
      << small;
  // Piped, each item is one line, for grep (docs/cli/README.md "Line width"; issue 55 tryout: plan wrapped at 100
  // columns into a log); on a terminal it is wrapped (tests/e2e/core_progress_pty_test.cc).
  const auto reserve = std::find_if(lines.begin(), lines.end(), [](const std::string& l) {
    return l.rfind("GPU 0: driver reserve", 0) == 0;
  });
  ASSERT_NE(reserve, lines.end()) << out;
  // (an H200 NVL shares the measured H200's chip and total, and is said not to be that card: issue 55 tryout E-5)
  EXPECT_NE(reserve->find("the measured card of this name's chip and total ('" + gpu_name + "' itself is not measured"),
            std::string::npos)
      << *reserve;
  // Given, and the log's, are said as such.
  ASSERT_EQ(run_cli("plan --seat s=" + q(kData + "/llama") + ":vllm_version=0.28", &out, &err), 0) << err;
  EXPECT_NE(out.find("0.28 rules (given: vllm_version=0.28;"), std::string::npos) << out;
}

}  // namespace

namespace fp4forge {
namespace {

// A seat beside one capped at vLLM's default utilization gets what the capped one leaves (issue 55 tryout G: it got
// 0.01, 53.6 MiB of KV, while 4.29 GiB stayed free on the GPU): the spare memory is shared in proportion to KV
// demand, and a capped seat's excess goes to the others.
TEST(KvplanSpare, ASeatBesideACappedOneTakesWhatItLeaves) {
  std::string out, err;
  ASSERT_EQ(fp4forge::testutil::run_cli(
                "plan --seat a=" + fp4forge::testutil::q(fp4forge::testutil::kData + "/qwen3_moe") +
                    ":tp=2,concurrency=64 --seat b=" + fp4forge::testutil::q(fp4forge::testutil::kData + "/llama") +
                    " --gpu 0=81559MiB --gpu 1=81559MiB --json",
                &out, &err),
            0)
      << err;
  const auto j = nlohmann::json::parse(out);
  const double ua = j["seats"][0]["placement"]["gpu_memory_utilization"].get<double>();
  const double ub = j["seats"][1]["placement"]["gpu_memory_utilization"].get<double>();
  EXPECT_NEAR(ua, 0.92, 1e-9);  // vLLM's default, the cap of a seat plan sizes
  EXPECT_GE(ub, 0.05) << out.substr(0, 400);
  // What stays free on the shared GPU is under a fiftieth of it: rounding to utilization steps, not a share
  // nobody took.
  for (const auto& g : j["gpus"]) {
    if (g["id"] == "0") {
      EXPECT_LT(g["free_bytes"].get<double>(), 0.02 * 81559.0 * 1048576.0) << g.dump();
    }
  }
}

// The picture's KV figure is the text's (the blocks'), the margin 0.34 keeps beside it drawn and said apart (issue 55
// tryout H: 52.55 GiB in the SVG, 51.88 GiB in the text).
TEST(KvplanSpare, ThePictureSaysTheKvTheTextSays) {
  fp4forge::testutil::TempDir t;
  std::string out, err;
  const std::string svg = (t.path / "p.svg").string();
  ASSERT_EQ(
      fp4forge::testutil::run_cli("plan --seat chat=" + fp4forge::testutil::q(fp4forge::testutil::kData + "/llama") +
                                      " --gpu 0=80GiB --svg " + fp4forge::testutil::q(svg),
                                  &out, &err),
      0)
      << err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex("KV memory +([0-9.]+ [KMGT]iB)"))) << out;
  const std::string picture = fp4forge::testutil::slurp(svg);
  EXPECT_NE(picture.find("KV cache " + m[1].str() + " "), std::string::npos) << m[1].str();
  if (out.find("KV margin") != std::string::npos || out.find("less a margin") != std::string::npos) {
    EXPECT_NE(picture.find("KV margin "), std::string::npos);
  }
}

}  // namespace
}  // namespace fp4forge
