// Calibration from the seat's log (log=FILE, --from-log), the re-derived sliding-window reserve, vLLM 0.34,
// sensitivity, unified-memory GPUs, replacement seats and the checked arithmetic of R4-B9.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "fp4forge/kvplan/placement.h"
#include "fp4forge/kvplan/planner.h"
#include "fp4forge/kvplan/report.h"
#include "fp4forge/kvplan/seat.h"
#include "fp4forge/util/checked.h"
#include "fp4forge/util/size.h"
#include "test_util.h"

namespace fp4forge::kvplan {
namespace {

namespace stdfs = std::filesystem;
const std::string kLogs = std::string(FP4FORGE_TEST_DATA) + "/plan/logs/";
const std::string kGemma2 = kLogs + "gemma-2-9b";
const std::string kH100 = "0=81559MiB:name=NVIDIA H100 80GB HBM3";

double gib(std::uint64_t b) { return static_cast<double>(b) / static_cast<double>(kGiB); }

Result<Plan> plan_of(const std::vector<std::string>& seat_args, const std::vector<std::string>& gpu_args) {
  std::vector<SeatModel> seats;
  for (const auto& s : seat_args) {
    FP4FORGE_ASSIGN_OR_RETURN(SeatArg a, parse_seat_arg(s));
    FP4FORGE_ASSIGN_OR_RETURN(SeatModel m, load_seat(a, std::nullopt));
    seats.push_back(std::move(m));
  }
  std::vector<GpuSpec> gpus;
  for (const auto& g : gpu_args) {
    FP4FORGE_ASSIGN_OR_RETURN(GpuSpec spec, parse_gpu_arg(g));
    gpus.push_back(std::move(spec));
  }
  return make_plan(std::move(seats), std::move(gpus));
}

// The 0.19 log: its own settings come from the log's args and lines; plan reproduces the logged pool.
TEST(KvplanCalibration, LogReproducesItsPoolAt019) {
  auto plan = plan_of({fmt::format("g={}:log={}v0.19-gemma-2-9b-h100.log", kGemma2, kLogs)}, {kH100});
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  const SeatModel& m = plan->seats[0];
  const SeatPlacement& p = plan->placements[0];
  EXPECT_EQ(m.rules.version, "0.19.0");        // the log's version
  EXPECT_EQ(m.max_model_len, 8192);             // the log's args
  EXPECT_FALSE(m.arg.kv.prefix_caching);
  EXPECT_TRUE(m.weights_from_log);
  ASSERT_TRUE(p.calibration && p.calibration->measured);
  EXPECT_DOUBLE_EQ(p.util, 0.95);
  EXPECT_NEAR(gib(p.available_kv_bytes), 54.12, 1e-6);          // the pool, as logged
  EXPECT_NEAR(static_cast<double>(p.num_blocks), 21110.0, 2.0);  // "num_gpu_blocks is: 21110" (0.005 GiB rounding)
  EXPECT_NEAR(static_cast<double>(p.kv_cache_tokens), 168880.0, 168880.0 * 0.001);
  EXPECT_NEAR(p.max_concurrency, 20.60, 0.01);
  // The measured overhead is util x total - weights - KV: 75.23 - 17.22 - 54.12 = 3.89 GiB (the log's own
  // profile peak 3.65 + non-torch 0.25 GiB, graphs beside the budget at 0.19).
  EXPECT_NEAR(gib(p.calibration->measured_bytes), 3.89, 0.01);
  EXPECT_TRUE(p.calibration->reestimated.empty());
  EXPECT_FALSE(p.calibration->rows.empty());
}

// The overhead line says "measured" only for the measurement itself; carried to other rules (0.34 moves CUDA graphs
// into the budget), it names the measurement and the carrying (tryout L-L6).
TEST(KvplanCalibration, AnOverheadCarriedToOtherRulesIsNotCalledMeasured) {
  auto same = plan_of({fmt::format("g={}:log={}v0.19-gemma-2-9b-h100.log", kGemma2, kLogs)}, {kH100});
  ASSERT_TRUE(same.ok()) << same.error().message;
  ASSERT_EQ(same->placements[0].overhead_bytes, same->placements[0].calibration->measured_bytes);
  EXPECT_NE(to_text(*same).find("(measured by the seat's log; the estimate is"), std::string::npos) << to_text(*same);
  auto newer =
      plan_of({fmt::format("g={}:log={}v0.19-gemma-2-9b-h100.log,vllm_version=0.34", kGemma2, kLogs)}, {kH100});
  ASSERT_TRUE(newer.ok()) << newer.error().message;
  const SeatPlacement& p = newer->placements[0];
  ASSERT_TRUE(p.calibration && p.calibration->measured);
  ASSERT_NE(p.overhead_bytes, p.calibration->measured_bytes);
  const std::string text = to_text(*newer);
  EXPECT_EQ(text.find("(measured by the seat's log"), std::string::npos) << text;
  EXPECT_NE(text.find("(the seat's log measured " + format_bytes(p.calibration->measured_bytes) +
                      ", carried to these settings and rules below"),
            std::string::npos)
      << text;
}

// At another utilization the measured overhead carries: the pool moves by exactly the budget's difference.
TEST(KvplanCalibration, LogCarriesToAnotherUtilizationAndLength) {
  auto at = plan_of({fmt::format("g={}:log={}v0.19-gemma-2-9b-h100.log,gpu_memory_utilization=0.85,max_model_len=4096",
                                 kGemma2, kLogs)},
                    {kH100});
  ASSERT_TRUE(at.ok()) << at.error().message;
  const SeatPlacement& p = at->placements[0];
  ASSERT_TRUE(p.calibration && p.calibration->measured);
  EXPECT_EQ(at->seats[0].max_model_len, 4096);
  EXPECT_NEAR(gib(p.overhead_bytes), gib(p.calibration->measured_bytes), 1e-9);  // nothing re-estimated
  EXPECT_NEAR(gib(p.available_kv_bytes), 54.12 - 0.10 * 79.19, 0.001);
  // A different max_num_seqs is a term it cannot carry: the sampler moves by its estimate, and is named.
  auto seqs = plan_of({fmt::format("g={}:log={}v0.19-gemma-2-9b-h100.log,max_num_seqs=64", kGemma2, kLogs)}, {kH100});
  ASSERT_TRUE(seqs.ok()) << seqs.error().message;
  const auto& c = *seqs->placements[0].calibration;
  ASSERT_FALSE(c.reestimated.empty());
  EXPECT_NE(c.reestimated.front().find("max_num_seqs 1024 -> 64"), std::string::npos) << c.reestimated.front();
  EXPECT_LT(seqs->placements[0].overhead_bytes, c.measured_bytes);
}

TEST(KvplanCalibration, FromLogRecoversTheSeat) {
  // A copy of the log whose model arg names the local config folder.
  const stdfs::path dir = stdfs::path(::testing::TempDir()) / fmt::format("fp4forge-fromlog-{}", ::getpid());
  stdfs::create_directories(dir);
  std::string text = testutil::slurp(kLogs + "v0.19-gemma-2-9b-h100.log");
  for (std::size_t at = 0; (at = text.find("'model': 'google/gemma-2-9b-it'", at)) != std::string::npos;)
    text.replace(at, 31, "'model': '" + kGemma2 + "'");
  std::ofstream(dir / "seat.log") << text;
  PlanParams params;
  params.from_log = (dir / "seat.log").string();
  auto r = plan_seats(params);  // no --gpu: the card the log describes
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->plan.gpus.size(), 1u);
  EXPECT_NEAR(gib(r->plan.gpus[0].gpu.torch_total()), 79.19, 1e-9);
  const SeatPlacement& p = r->plan.placements[0];
  EXPECT_EQ(r->plan.seats[0].arg.name, "gemma-2-9b");
  EXPECT_NEAR(gib(p.available_kv_bytes), 54.12, 0.006);  // the total is the log's 79.19 GiB (two decimals)
  EXPECT_NEAR(p.max_concurrency, 20.60, 0.02);
  stdfs::remove_all(dir);
  // The log's model is a path of its container: said so, with the fix.
  params.from_log = kLogs + "v0.19-gemma-2-9b-h100.log";
  auto bad = plan_seats(params);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("log="), std::string::npos) << bad.error().message;
}

TEST(KvplanCalibration, LogWithoutTheNeededLinesNamesTheGaps) {
  auto plan = plan_of({fmt::format("g={}:log={}v0.27.1-graph-estimate.log,weights=17GiB,max_model_len=8192", kGemma2,
                                   kLogs)},
                      {kH100});
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  const auto& c = plan->placements[0].calibration;
  ASSERT_TRUE(c);
  std::string gaps;
  for (const auto& g : c->gaps) gaps += g + "\n";
  EXPECT_NE(gaps.find("Model loading took"), std::string::npos) << gaps;
  EXPECT_NE(gaps.find("no GPU total"), std::string::npos) << gaps;
  EXPECT_NE(gaps.find("no modelled vLLM version"), std::string::npos) << gaps;  // the excerpt has no version line
}

// The late-2026 summary ("consumed memory (weights + non-torch)", two ranks): the log prints no separate weights,
// so the seat gives them; the pool is the log's whatever they are (util x total - weights - measured overhead).
// The log's model (Qwen3.8-27B) has no config here: tokens are not compared, only the pool's bytes.
TEST(KvplanCalibration, ConsumedSummaryFormatReproducesThePoolBytes) {
  const std::string cfg = std::string(FP4FORGE_TEST_DATA) + "/../../examples/plan/qwen3.6-27b";
  for (const char* w : {"14GiB", "15GiB"}) {
    auto plan = plan_of({fmt::format("q={}:weights={},tp=2,max_model_len=131072,log={}v0.2x-consumed-summary-tp2.log",
                                     cfg, w, kLogs)},
                        {"0=23.56GiB:torch_total=23.56GiB", "1=23.56GiB:torch_total=23.56GiB"});
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    const SeatPlacement& p = plan->placements[0];
    ASSERT_TRUE(p.calibration && p.calibration->measured) << w;
    EXPECT_DOUBLE_EQ(p.util, 0.92);
    EXPECT_NEAR(gib(p.available_kv_bytes), 4.76, 1e-6) << w;
  }
}

// vLLM's SlidingWindowSpec reserve, re-derived: W - 1 + max_concurrent_batches x max_num_batched_tokens, with 2
// batches under async scheduling from 0.26 (#47728), 1 without it and before 0.26.
TEST(KvplanCalibration, SlidingWindowReserveFollowsAsyncScheduling) {
  const auto r025 = *vllm_rules("0.25"), r026 = *vllm_rules("0.26"), r034 = *vllm_rules("0.34");
  EXPECT_EQ(sliding_in_flight_tokens(r025, 8192, true), 8192);
  EXPECT_EQ(sliding_in_flight_tokens(r026, 8192, true), 16384);
  EXPECT_EQ(sliding_in_flight_tokens(r026, 8192, false), 8192);
  EXPECT_EQ(sliding_in_flight_tokens(r034, 2048, true), 4096);
  auto on = plan_of({fmt::format("g={}:weights=17GiB,max_model_len=8192,vllm_version=0.28", kGemma2)}, {kH100});
  auto off = plan_of({fmt::format("g={}:weights=17GiB,max_model_len=8192,vllm_version=0.28,async_scheduling=off", kGemma2)},
                     {kH100});
  ASSERT_TRUE(on.ok() && off.ok());
  EXPECT_EQ(on->placements[0].demand.in_flight_tokens, 16384);
  EXPECT_EQ(off->placements[0].demand.in_flight_tokens, 8192);
}

TEST(KvplanCalibration, SensitivityNamesTheFlagTermsAndTheirRange) {
  auto plan = plan_of({fmt::format("g={}:weights=17GiB,max_model_len=8192", kGemma2)}, {kH100});
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  const Sensitivity& s = plan->placements[0].sensitivity;
  ASSERT_TRUE(s.computed);
  std::vector<std::string> keys;
  for (const auto& t : s.terms) keys.push_back(t.key);
  for (const char* k : {"max_num_seqs", "max_num_batched_tokens", "enforce_eager", "async_scheduling"})
    EXPECT_NE(std::find(keys.begin(), keys.end(), k), keys.end()) << k;
  EXPECT_LE(s.min_concurrency, plan->placements[0].max_concurrency);
  EXPECT_GE(s.max_concurrency, plan->placements[0].max_concurrency);
  EXPECT_LT(s.min_concurrency, s.max_concurrency);
  // The sampler at max_num_seqs=1 weighs less than at the default 1024, and the concurrency is higher.
  const auto& seqs = s.terms.front();
  EXPECT_EQ(seqs.key, "max_num_seqs");
  EXPECT_TRUE(seqs.assumed_default);
  EXPECT_GT(seqs.values.front().max_concurrency, seqs.values.back().max_concurrency);
}

TEST(KvplanCalibration, Version034IsModelledAndNewerRefusedWithTheNearest) {
  auto r = vllm_rules("0.34");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->kv_from_free_memory);
  EXPECT_FALSE(vllm_rules("0.33")->kv_from_free_memory);
  auto newer = vllm_rules("0.35");
  ASSERT_FALSE(newer.ok());
  EXPECT_NE(newer.error().message.find("nearest modelled version is 0.34"), std::string::npos) << newer.error().message;
  // On Model Runner V2, 0.34 keeps a margin of the memory free after warm-up: it binds near a full card.
  auto full = plan_of({fmt::format("g={}:weights=17GiB,max_model_len=8192,gpu_memory_utilization=0.99,vllm_version=0.34",
                                   kGemma2)},
                      {kH100 + ":headroom=0"});
  ASSERT_TRUE(full.ok()) << full.error().message;
  EXPECT_GT(full->placements[0].kv_margin_bytes, 0u);
  // The sensitivity rows of the planned flags say the planned concurrency, margin and all (issue 55 tryout I: the
  // rows were taken before the margin).
  for (const auto& t : full->placements[0].sensitivity.terms)
    for (const auto& v : t.values) {
      if (v.planned) {
        EXPECT_NEAR(v.max_concurrency, full->placements[0].max_concurrency, 1e-9) << t.key;
      }
    }
  auto old = plan_of({fmt::format("g={}:weights=17GiB,max_model_len=8192,gpu_memory_utilization=0.99,vllm_version=0.33",
                                  kGemma2)},
                     {kH100 + ":headroom=0"});
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(old->placements[0].kv_margin_bytes, 0u);
}

TEST(KvplanCalibration, UnifiedMemoryUsesTheFreeFigureAtStartUp) {
  auto g = parse_gpu_arg("spark=119.7GiB:name=NVIDIA GB10:unified:free=60GiB");
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_TRUE(g->unified);
  EXPECT_EQ(g->reserved_bytes, 0u);
  EXPECT_EQ(g->torch_free(), 60 * kGiB);
  EXPECT_EQ(parse_gpu_arg("0=80GiB:free=90GiB").error().code, Errc::USAGE);
  // util 0.6 of 119.7 GiB asks 71.8 GiB, more than the 60 GiB free: vLLM refuses, and plan says so.
  auto plan = plan_of({fmt::format("g={}:weights=17GiB,max_model_len=8192,gpu_memory_utilization=0.6", kGemma2)},
                      {"spark=119.7GiB:name=NVIDIA GB10:unified:free=60GiB"});
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_FALSE(plan->placements[0].fits);
  EXPECT_TRUE(plan->placements[0].startup_refused);
  auto fits = plan_of({fmt::format("g={}:weights=17GiB,max_model_len=8192,gpu_memory_utilization=0.45", kGemma2)},
                      {"spark=119.7GiB:name=NVIDIA GB10:unified:free=60GiB"});
  ASSERT_TRUE(fits.ok());
  EXPECT_TRUE(fits->placements[0].fits) << fits->placements[0].reason;
}

TEST(KvplanCalibration, ASeatThatReplacesAnotherSeesTheCardAfterItStops) {
  // GPU 0 holds 60 GiB of others, the old seat (util 0.5 of 79.19 GiB + its context) among them.
  const std::string gpu = kH100 + ":used=60GiB";
  auto without = plan_of({fmt::format("new={}:weights=17GiB,max_model_len=8192,gpu_memory_utilization=0.5,gpu=0", kGemma2)},
                         {gpu});
  ASSERT_TRUE(without.ok());
  EXPECT_FALSE(without->placements[0].fits);
  auto with = plan_of({fmt::format("old={}:weights=17GiB,max_model_len=8192,gpu_memory_utilization=0.5,gpu=0", kGemma2),
                       fmt::format("new={}:weights=17GiB,max_model_len=8192,gpu_memory_utilization=0.5,gpu=0,replaces=old",
                                   kGemma2)},
                      {gpu});
  ASSERT_TRUE(with.ok()) << with.error().message;
  EXPECT_EQ(with->placements[0].replaced_by, "new");
  EXPECT_FALSE(with->placements[0].placed);
  EXPECT_TRUE(with->placements[1].fits) << with->placements[1].reason;
  EXPECT_GT(with->placements[1].freed_bytes, 39 * kGiB);
  EXPECT_TRUE(with->all_fit);
  // The stopping seat is not sized: its report says it stops, with no zero overhead, KV or serving lines.
  const std::string text = to_text(*with);
  const std::string old_part = text.substr(0, text.find("seat new"));
  EXPECT_NE(old_part.find("stops for seat 'new' (replaces=)"), std::string::npos) << old_part;
  for (const char* absent : {"overhead", "per request", "smallest utilization", "serving", "note:"})
    EXPECT_EQ(old_part.find(absent), std::string::npos) << absent << "\n" << old_part;
  EXPECT_NE(text.find("stops for new"), std::string::npos) << text;
  auto frees = plan_of({fmt::format("new={}:weights=17GiB,max_model_len=8192,gpu_memory_utilization=0.5,gpu=0,frees=45GiB",
                                    kGemma2)},
                       {gpu});
  ASSERT_TRUE(frees.ok()) << frees.error().message;
  EXPECT_TRUE(frees->placements[0].fits);
  // Wrong uses are usage errors.
  EXPECT_EQ(plan_of({fmt::format("new={}:weights=17GiB,replaces=ghost", kGemma2)}, {gpu}).error().code, Errc::USAGE);
  EXPECT_EQ(plan_of({fmt::format("new={}:weights=17GiB,frees=1GiB", kGemma2)}, {gpu}).error().code, Errc::USAGE);
  EXPECT_EQ(plan_of({fmt::format("new={}:weights=17GiB,frees=61GiB,gpu=0", kGemma2)}, {gpu}).error().code, Errc::USAGE);
}

// R4-B9: sizes never wrap; absurd lengths are refused or do not fit with their true size.
TEST(KvplanCalibration, CheckedArithmeticNeverWraps) {
  EXPECT_EQ(util::sat_mul(1ull << 40, 1ull << 30), util::kSaturated);
  EXPECT_EQ(util::sat_add(util::kSaturated, 1), util::kSaturated);
  EXPECT_EQ(util::sat_mul({3, 5, 7}), 105u);
  EXPECT_EQ(util::sat_from_double(1e30), util::kSaturated);
  for (const char* key : {"max_model_len=4611686018427387904", "max_num_batched_tokens=72057594037927936",
                          "max_num_seqs=4294967296"}) {
    auto a = parse_seat_arg(fmt::format("a={}:{},allow_long_max_model_len=on", kGemma2, key));
    ASSERT_FALSE(a.ok()) << key;
    EXPECT_EQ(a.error().code, Errc::USAGE);
  }
  auto plan = plan_of({fmt::format("a={}:weights=1GiB,max_model_len=1T,allow_long_max_model_len=on", kGemma2)}, {kH100});
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  const SeatPlacement& p = plan->placements[0];
  EXPECT_FALSE(p.fits);
  EXPECT_GT(p.demand.blocks_per_request, 0);
  EXPECT_GT(p.demand.bytes_per_request, 1ull << 50);  // the true size, not a wrapped one
  auto huge_batch = plan_of({fmt::format("a={}:weights=1GiB,max_num_batched_tokens=1T", kGemma2)}, {kH100});
  ASSERT_TRUE(huge_batch.ok());
  EXPECT_FALSE(huge_batch->placements[0].fits);
  EXPECT_GT(huge_batch->placements[0].terms.activation, 1ull << 50);
}

}  // namespace
}  // namespace fp4forge::kvplan
