// plan against real vLLM startup logs (tests/data/plan/vllm-logs.json, each case with its source link):
// the budget terms reproduce "Available KV cache memory", "GPU KV cache size" and "Maximum concurrency"
// within 5 %; refused start-ups are refused for the same reason; printed KV memory gives the printed
// tokens and concurrency under the version's rules.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fp4forge/kvplan/budget.h"
#include "fp4forge/kvplan/gpu.h"
#include "fp4forge/kvplan/kv_cache.h"
#include "fp4forge/kvplan/placement.h"
#include "fp4forge/kvplan/seat.h"
#include "fp4forge/kvplan/vllm_version.h"
#include "fp4forge/util/size.h"

namespace fp4forge::kvplan {
namespace {

namespace stdfs = std::filesystem;
using Json = nlohmann::json;

constexpr double kTolerance = 0.05;  // the bar: concurrency and KV tokens within 5 %

Json table() {
  std::ifstream in(std::string(FP4FORGE_TEST_DATA) + "/plan/vllm-logs.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return Json::parse(ss.str());
}

stdfs::path write_config(const Json& c) {
  static int n = 0;
  const stdfs::path d = stdfs::temp_directory_path() /
                        fmt::format("fp4forge-vllm-logs-{}-{}", ::getpid(), n++);
  stdfs::remove_all(d);
  stdfs::create_directories(d);
  Json cfg = c["config"];
  cfg.erase("source");
  if (!cfg.contains("torch_dtype")) cfg["torch_dtype"] = "bfloat16";
  std::ofstream(d / "config.json") << cfg.dump(1);
  return d;
}

std::uint64_t gib(double g) { return static_cast<std::uint64_t>(g * static_cast<double>(kGiB)); }

void expect_within(double got, double want, double tol, const std::string& what) {
  EXPECT_LE(std::fabs(got - want), tol * std::fabs(want)) << what << ": plan " << got << ", vLLM printed " << want;
}

std::string num_or(const Json& j, const char* key, const std::string& dflt) {
  return j.contains(key) && !j[key].is_null() ? (j[key].is_string() ? j[key].get<std::string>() : j[key].dump()) : dflt;
}

TEST(KvplanVllmLogs, TableHasEnoughCasesOfEachKind) {
  const Json t = table();
  std::map<std::string, int> kinds;
  for (const auto& c : t["cases"]) {
    ++kinds[c["kind"].get<std::string>()];
    EXPECT_TRUE(c["source"].get<std::string>().rfind("https://", 0) == 0) << c["id"];
  }
  EXPECT_GE(kinds["budget"], 8);
  EXPECT_GE(kinds["startup"], 2);
  EXPECT_GE(kinds["layout"], 2);
}

TEST(KvplanVllmLogs, BudgetReproducesAvailableKvTokensAndConcurrency) {
  int ran = 0;
  const Json t = table();
  for (const auto& c : t["cases"]) {
    if (c["kind"] != "budget") continue;
    ++ran;
    SCOPED_TRACE(c["id"].get<std::string>());
    const Json& f = c["flags"];
    const Json& log = c["log"];
    const int tp = f["tensor_parallel_size"].get<int>();
    const stdfs::path dir = write_config(c);
    const std::string spec = fmt::format(
        "s={}:weights={},max_model_len={},tp={},kv_cache_dtype={},gpu_memory_utilization={},vllm_version={},dtype={}",
        dir.string(), gib(log["model_loading_gib"].get<double>()) * static_cast<std::uint64_t>(tp),  // per rank
        f["max_model_len"].get<int>(), tp,
        num_or(f, "kv_cache_dtype", "auto"), f["gpu_memory_utilization"].get<double>(),
        c["vllm_version"].get<std::string>(), num_or(f, "dtype", "auto"));
    auto arg = parse_seat_arg(spec);
    ASSERT_TRUE(arg.ok()) << arg.error().message;
    auto seat = load_seat(*arg, std::nullopt);
    ASSERT_TRUE(seat.ok()) << seat.error().message;
    std::vector<GpuSpec> gpus;
    for (int g = 0; g < tp; ++g) {
      auto spec_g = parse_gpu_arg(fmt::format("{}=81559MiB:torch_total={}GiB:name={}", g,
                                              c["gpu"]["torch_total_gib"].get<double>(),
                                              c["gpu"]["name"].get<std::string>()));
      ASSERT_TRUE(spec_g.ok()) << spec_g.error().message;
      gpus.push_back(*spec_g);
    }
    auto plan = make_plan({*seat}, gpus);
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    const SeatPlacement& p = plan->placements[0];
    ASSERT_TRUE(p.placed) << p.reason;
    expect_within(static_cast<double>(p.available_kv_bytes) / static_cast<double>(kGiB),
                  log["available_kv_gib"].get<double>(), kTolerance, "Available KV cache memory (GiB)");
    expect_within(static_cast<double>(p.kv_cache_tokens), log["kv_cache_tokens"].get<double>(), kTolerance,
                  "GPU KV cache size (tokens)");
    expect_within(p.max_concurrency, log["max_concurrency"].get<double>(), kTolerance, "Maximum concurrency");
    if (!log["cuda_graph_gib"].is_null()) {  // "Graph capturing finished in N secs, took X GiB"
      EXPECT_NEAR(static_cast<double>(p.terms.cuda_graphs) / static_cast<double>(kGiB), log["cuda_graph_gib"].get<double>(),
                  0.35);
    }
    if (std::getenv("FP4FORGE_SHOW_CALIBRATION"))
      fmt::print("{:<60} KV {:7.2f} / {:7.2f} GiB  tokens {:>9} / {:>9}  conc {:8.2f} / {:8.2f}\n",
                 c["id"].get<std::string>(), static_cast<double>(p.available_kv_bytes) / static_cast<double>(kGiB),
                 log["available_kv_gib"].get<double>(), p.kv_cache_tokens, log["kv_cache_tokens"].get<long>(),
                 p.max_concurrency, log["max_concurrency"].get<double>());
    stdfs::remove_all(dir);
  }
  EXPECT_GE(ran, 8);
}

TEST(KvplanVllmLogs, RefusedStartupsAreRefusedForTheSameReason) {
  int ran = 0;
  const Json t = table();
  for (const auto& c : t["cases"]) {
    if (c["kind"] != "startup") continue;
    ++ran;
    SCOPED_TRACE(c["id"].get<std::string>());
    const Json& s = c["startup"];
    // The printed free memory is measured after the seat's own CUDA context exists.
    const std::uint64_t total = gib(s["torch_total_gib"].get<double>());
    const std::uint64_t free_printed = gib(s["free_gib"].get<double>());
    const std::uint64_t used = total - std::min(total, free_printed + kCudaContextBytes);
    // headroom=0: the log is vLLM's own arithmetic, which knows no headroom (plan's shortfall adds it).
    auto g = parse_gpu_arg(fmt::format("0={}:torch_total={}:used={}:headroom=0", total, total, used));
    ASSERT_TRUE(g.ok()) << g.error().message;
    Json tiny = {{"config", {{"model_type", "llama"}, {"architectures", {"LlamaForCausalLM"}}, {"hidden_size", 64},
                             {"intermediate_size", 128}, {"num_hidden_layers", 2}, {"num_attention_heads", 2},
                             {"num_key_value_heads", 1}, {"vocab_size", 256}, {"max_position_embeddings", 1024}}}};
    const stdfs::path dir = write_config(tiny);
    auto arg = parse_seat_arg(fmt::format("s={}:weights=1MiB,gpu_memory_utilization={}", dir.string(),
                                          s["util"].get<double>()));
    ASSERT_TRUE(arg.ok()) << arg.error().message;
    auto seat = load_seat(*arg, std::nullopt);
    ASSERT_TRUE(seat.ok()) << seat.error().message;
    auto plan = make_plan({*seat}, {*g});
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    const SeatPlacement& p = plan->placements[0];
    EXPECT_FALSE(p.fits);
    // Reported as vLLM's own refusal, with the free memory it measures (after its CUDA context) as it prints it.
    EXPECT_TRUE(p.startup_refused) << p.reason;
    EXPECT_NE(p.reason.find("vLLM will refuse at start-up"), std::string::npos) << p.reason;
    EXPECT_NEAR(static_cast<double>(p.startup_free_bytes) / static_cast<double>(kGiB), s["free_gib"].get<double>(), 0.01);
    EXPECT_LT(p.startup_max_util, s["util"].get<double>());
    // short by requested - free, with requested = util x total as vLLM prints it (2 decimals).
    const double short_gib = static_cast<double>(p.short_by_bytes) / static_cast<double>(kGiB);
    EXPECT_NEAR(short_gib, s["requested_gib"].get<double>() - s["free_gib"].get<double>(), 0.02);
    stdfs::remove_all(dir);
  }
  EXPECT_GE(ran, 2);
}

// A case whose set-up plan does not model names why (not_modelled) and is counted apart, not compared.
bool not_modelled(const Json& c) { return c.contains("not_modelled") && c["not_modelled"].is_string(); }

// Hybrid (linear-attention / Mamba layers) or sliding-window: layer_types beyond full attention, a sliding
// window, or an interval of full-attention layers, in the config or its text_config.
bool hybrid_or_sliding(const Json& c) {
  for (const Json* cfg : {&c["config"], c["config"].contains("text_config") ? &c["config"]["text_config"] : nullptr}) {
    if (cfg == nullptr || !cfg->is_object()) continue;
    if (cfg->contains("sliding_window") && !(*cfg)["sliding_window"].is_null()) return true;
    if (cfg->contains("full_attention_interval") || cfg->contains("attention_chunk_size")) return true;
    if (cfg->contains("layer_types"))
      for (const auto& t : (*cfg)["layer_types"])
        if (t.is_string() && t.get<std::string>() != "full_attention") return true;
  }
  return false;
}

// The calibration set's coverage: at least 15 hybrid / sliding-window cases beside the dense ones, each
// compared or named as not modelled.
TEST(KvplanVllmLogs, TheSetCoversHybridAndSlidingModels) {
  int hybrid = 0, dense = 0, documented = 0;
  const Json t = table();
  for (const auto& c : t["cases"]) {
    (hybrid_or_sliding(c) ? hybrid : dense) += 1;
    if (not_modelled(c)) ++documented;
    EXPECT_TRUE(c.contains("source") && c["source"].is_string()) << c["id"];
  }
  EXPECT_GE(hybrid, 15);
  EXPECT_GE(dense, 15);
  EXPECT_LE(documented, 2);
}

TEST(KvplanVllmLogs, PrintedKvMemoryGivesPrintedTokensAndConcurrency) {
  int ran = 0;
  const Json t = table();
  for (const auto& c : t["cases"]) {
    if (c["kind"] != "layout" && c["kind"] != "tokens") continue;
    if (not_modelled(c)) continue;
    ++ran;
    SCOPED_TRACE(c["id"].get<std::string>());
    const Json& f = c["flags"];
    const Json& log = c["log"];
    const stdfs::path dir = write_config(c);
    // The flags the log shows: KV dtype, prefix caching (hybrid state pages), the batched tokens (sliding layers).
    std::string extra;
    if (f.contains("kv_cache_dtype") && f["kv_cache_dtype"].is_string()) extra += ",kv_cache_dtype=" + f["kv_cache_dtype"].get<std::string>();
    if (f.contains("enable_prefix_caching") && f["enable_prefix_caching"].is_boolean())
      extra += std::string(",prefix_caching=") + (f["enable_prefix_caching"].get<bool>() ? "on" : "off");
    if (f.contains("spec_tokens") && f["spec_tokens"].is_number_integer() && f["spec_tokens"].get<int>() > 0)
      extra += fmt::format(",spec_tokens={}", f["spec_tokens"].get<int>());
    const std::int64_t batched = f.contains("max_num_batched_tokens") && f["max_num_batched_tokens"].is_number_integer()
                                     ? f["max_num_batched_tokens"].get<std::int64_t>()
                                     : 8192;
    auto arg = parse_seat_arg(fmt::format("s={}:weights=1GiB,max_model_len={},tp={},vllm_version={}{}", dir.string(),
                                          f["max_model_len"].get<int>(), num_or(f, "tensor_parallel_size", "1"),
                                          c["vllm_version"].get<std::string>(), extra));
    ASSERT_TRUE(arg.ok()) << arg.error().message;
    auto seat = load_seat(*arg, std::nullopt);
    ASSERT_TRUE(seat.ok()) << seat.error().message;
    const KvDemand d = kv_demand(seat->layout, seat->max_model_len, batched * seat->rules.sliding_in_flight_factor);
    if (c["kind"] == "layout") {
      const std::int64_t blocks = kv_num_blocks(seat->layout, gib(log["available_kv_gib"].get<double>()));
      const KvReport r = kv_report(seat->layout, d, blocks, seat->rules);
      // The printed GiB has two decimals: 0.005 GiB of rounding at most.
      expect_within(static_cast<double>(r.tokens), log["kv_cache_tokens"].get<double>(), 0.01, "GPU KV cache size");
      if (!log["max_concurrency"].is_null())
        expect_within(r.max_concurrency, log["max_concurrency"].get<double>(), 0.01, "Maximum concurrency");
    } else {
      const std::int64_t blocks = log["kv_cache_tokens"].get<std::int64_t>() / seat->layout.min_block_size;
      const KvReport r = kv_report(seat->layout, d, blocks, seat->rules);
      EXPECT_EQ(r.tokens, log["kv_cache_tokens"].get<std::int64_t>());
      EXPECT_NEAR(r.max_concurrency, log["max_concurrency"].get<double>(), 0.005);
    }
    stdfs::remove_all(dir);
  }
  EXPECT_GE(ran, 3);
}

TEST(KvplanVllmLogs, ModelRunnerDecidesWhetherGraphsAreInTheBudget) {
  const auto r = [](const char* v) { return *vllm_rules(v); };
  // Dense, non-hybrid models run on Model Runner V2 from 0.25; its graph estimate is 0 until 0.29.
  EXPECT_TRUE(v2_model_runner(r("0.28"), "Gemma4ForConditionalGeneration", "gemma4_text", false, false));
  EXPECT_FALSE(graphs_in_budget(r("0.28"), true));
  EXPECT_TRUE(graphs_in_budget(r("0.29"), true));
  EXPECT_TRUE(graphs_in_budget(r("0.33"), true));
  // MoE and hybrid models stay on the V1 runner, whose estimate is in the budget from 0.21.
  EXPECT_FALSE(v2_model_runner(r("0.28"), "Gemma4ForConditionalGeneration", "gemma4_text", true, false));
  EXPECT_FALSE(v2_model_runner(r("0.28"), "Qwen3_5ForConditionalGeneration", "qwen3_5_text", false, true));
  EXPECT_TRUE(graphs_in_budget(r("0.28"), false));
  EXPECT_FALSE(graphs_in_budget(r("0.20"), false));
  // Listed MoE architectures run on V2; dense Qwen3 from 0.22, Llama from 0.23, others from 0.25.
  EXPECT_TRUE(v2_model_runner(r("0.28"), "DeepseekV2ForCausalLM", "deepseek_v2", true, false));
  EXPECT_TRUE(v2_model_runner(r("0.22"), "Qwen3ForCausalLM", "qwen3", false, false));
  EXPECT_FALSE(v2_model_runner(r("0.22"), "LlamaForCausalLM", "llama", false, false));
  EXPECT_TRUE(v2_model_runner(r("0.23"), "LlamaForCausalLM", "llama", false, false));
  EXPECT_FALSE(v2_model_runner(r("0.24"), "Gemma3ForCausalLM", "gemma3_text", false, false));
  EXPECT_FALSE(v2_model_runner(r("0.21"), "Qwen3ForCausalLM", "qwen3", false, false));
  // Capture sizes up to 1024 on SM100 GPUs from 0.28 (not the SM120 workstation cards).
  EXPECT_TRUE(sm100_family("NVIDIA B200"));
  EXPECT_FALSE(sm100_family("NVIDIA RTX PRO 6000 Blackwell Workstation Edition"));
  ProfileShape p;
  p.max_num_seqs = 1024;
  p.batched_tokens = 8192;
  p.sm100 = true;
  EXPECT_GT(cuda_graph_size_count(r("0.28"), p), cuda_graph_size_count(r("0.27"), p));
  p.sm100 = false;
  EXPECT_EQ(cuda_graph_size_count(r("0.28"), p), cuda_graph_size_count(r("0.27"), p));
}

TEST(KvplanVllmLogs, VersionRules) {
  auto old = vllm_rules("0.8.5");
  ASSERT_TRUE(old.ok());
  EXPECT_FALSE(old->startup_check);
  EXPECT_EQ(old->tokens, TokensReport::BLOCKS);
  EXPECT_DOUBLE_EQ(old->default_util, 0.90);
  auto mid = vllm_rules("v0.19.0");
  ASSERT_TRUE(mid.ok());
  EXPECT_EQ(mid->version, "0.19.0");
  EXPECT_FALSE(mid->cuda_graphs_in_budget);
  EXPECT_EQ(mid->tokens, TokensReport::PER_GROUP);
  auto newest = vllm_rules("newest");
  ASSERT_TRUE(newest.ok());
  EXPECT_EQ(newest->version, std::string(kNewestVllm));
  EXPECT_TRUE(newest->cuda_graphs_in_budget);
  EXPECT_EQ(newest->tokens, TokensReport::CONCURRENCY);
  EXPECT_EQ(newest->sliding_in_flight_factor, 2);
  EXPECT_DOUBLE_EQ(newest->default_util, 0.92);
  // Every seat starts from this record (SeatArg::vllm), read once; vllm_version= replaces it.
  EXPECT_EQ(newest_vllm_rules().version, newest->version);
  auto seat = parse_seat_arg("s=/m:vllm_version=0.19");
  ASSERT_TRUE(seat.ok());
  EXPECT_EQ(seat->vllm.version, "0.19");
  EXPECT_FALSE(seat->vllm.cuda_graphs_in_budget);
  EXPECT_EQ(parse_seat_arg("s=/m")->vllm.version, std::string(kNewestVllm));
  // 0.29 - 0.33: modelled (the rules of 0.28's code plus what their pull requests changed).
  for (const char* v : {"0.29", "0.30.1", "0.33", "v0.33.0", "0.34", "0.34.1"}) EXPECT_TRUE(vllm_rules(v).ok()) << v;
  EXPECT_FALSE(vllm_rules("0.27")->hybrid_prefix_caching);  // #50991: certain from 0.28
  EXPECT_TRUE(vllm_rules("0.28")->hybrid_prefix_caching);
  EXPECT_EQ(vllm_rules("0.25")->sliding_in_flight_factor, 1);
  EXPECT_EQ(vllm_rules("0.26")->sliding_in_flight_factor, 2);
  for (const char* bad : {"0.7", "0.35", "1.0", "x", "0.", "0.24.x"}) {
    SCOPED_TRACE(bad);
    auto r = vllm_rules(bad);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, Errc::USAGE);
  }
}

}  // namespace
}  // namespace fp4forge::kvplan

namespace fp4forge::kvplan {
namespace {

TEST(KvplanGpu, DriverReserveFromTheCardTableOrTheDefault) {
  std::string src;
  // H200: 143771 MiB by nvidia-smi, 139.72 GiB by torch.
  EXPECT_EQ(driver_reserved_bytes(143771 * kMiB, "NVIDIA H200", &src),
            143771 * kMiB - static_cast<std::uint64_t>(139.72 * static_cast<double>(kGiB)));
  EXPECT_NE(src.find("as measured on an NVIDIA H200 (nvidia-smi 143771 MiB, torch 139.72 GiB"), std::string::npos) << src;
  // The reference card is named as measured, not as the name typed (issue 55 tryout).
  driver_reserved_bytes(81920 * kMiB, "NVIDIA H100 80GB HBM3 PCIe Special Edition", &src);
  EXPECT_NE(src.find("as measured on an NVIDIA H100 80GB HBM3 (nvidia-smi 81559 MiB"), std::string::npos) << src;
  EXPECT_NE(src.find("the measured card of this name's chip and total ('NVIDIA H100 80GB HBM3 PCIe Special Edition' "
                     "itself is not measured"),
            std::string::npos)
      << src;
  // Issue 55 tryout E-5: a PCIe H100 is not the H100 HBM3 measured; the card's own name (with or without the
  // vendor word) is.
  driver_reserved_bytes(81559 * kMiB, "NVIDIA H100 PCIe", &src);
  EXPECT_NE(src.find("'NVIDIA H100 PCIe' itself is not measured"), std::string::npos) << src;
  driver_reserved_bytes(81559 * kMiB, "H100 80GB HBM3", &src);
  EXPECT_NE(src.find("the card this name and total match"), std::string::npos) << src;
  // The two A100s are told apart by their totals.
  EXPECT_LT(driver_reserved_bytes(40960 * kMiB, "NVIDIA A100-SXM4-40GB"),
            driver_reserved_bytes(81920 * kMiB, "NVIDIA A100-SXM4-80GB"));
  // "l4" must not match an L40S (48 GB): the total differs, so the default applies.
  EXPECT_EQ(driver_reserved_bytes(46068 * kMiB, "NVIDIA L40S", &src), kDefaultDriverReserve);
  EXPECT_EQ(src, "default estimate");
  EXPECT_EQ(card_total_hint(46068 * kMiB, "NVIDIA L40S"), "");  // no L4: "l4" is no word of it
  // A total near the card's but not its own is planned as given, and said; one further off gets the card's figure
  // (issue 55 tryout: 141GiB for an H200 "matched" silently; 80GB for an H100 "matched no card").
  driver_reserved_bytes(141 * kGiB, "NVIDIA H200", &src);
  EXPECT_NE(src.find("the card this name and total match; the total given is 613.00 MiB above its nvidia-smi figure "
                     "and is planned as given: write 143771MiB if this is that card"),
            std::string::npos)
      << src;
  EXPECT_EQ(card_total_hint(141 * kGiB, "NVIDIA H200"), "");
  EXPECT_NE(card_total_hint(80'000'000'000ull, "NVIDIA H100 80GB HBM3")
                .find("the total given is no measured card's: the name is that of an NVIDIA H100 80GB HBM3, whose "
                      "nvidia-smi total is 81559 MiB (79.65 GiB), not 74.51 GiB: write 81559MiB"),
            std::string::npos)
      << card_total_hint(80'000'000'000ull, "NVIDIA H100 80GB HBM3");
  EXPECT_NE(card_total_hint(70 * kGiB, "NVIDIA A100-SXM4-80GB").find("that of an NVIDIA A100-SXM4-80GB,"),
            std::string::npos);
  EXPECT_NE(card_total_hint(80'000'000'000ull, "NVIDIA H100 PCIe")
                .find("the measured card of this name's chip is an NVIDIA H100 80GB HBM3"),
            std::string::npos);
  // reserved= and torch_total= override the table; a reserve >= TOTAL is a usage error.
  auto g = parse_gpu_arg("0=143771MiB:name=NVIDIA H200:torch_total=139GiB");
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(g->torch_total(), 139 * kGiB);
  EXPECT_EQ(g->reserved_source, "torch_total given");
  EXPECT_EQ(parse_gpu_arg("0=8GiB:reserved=8GiB").error().code, Errc::USAGE);
  EXPECT_EQ(parse_gpu_arg("0=8GiB:reserved=1GiB:torch_total=7GiB").error().code, Errc::USAGE);
}

}  // namespace
}  // namespace fp4forge::kvplan
