// Placement of seats on GPUs (KV-heavier seat to the roomier GPU; swapping the seats changes whether
// both fit), and --emit-compose output parsed back with yaml-cpp.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <regex>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "fp4forge/kvplan/compose.h"
#include "fp4forge/kvplan/gpu.h"
#include "fp4forge/kvplan/placement.h"
#include "fp4forge/kvplan/report.h"
#include "fp4forge/kvplan/seat.h"
#include "fp4forge/util/size.h"
#include "temp_dir.h"

namespace fp4forge::kvplan {
namespace {

namespace stdfs = std::filesystem;

using testutil::TempDir;

/** A config-only Llama-like folder: 32 layers, 8 kv heads of 128 -> 128 KiB of KV per token. */
stdfs::path write_llama_config(const stdfs::path& dir, const std::string& name) {
  const stdfs::path d = dir / name;
  stdfs::create_directories(d);
  const nlohmann::ordered_json cfg = {
      {"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"hidden_size", 4096},
      {"num_hidden_layers", 32}, {"num_attention_heads", 32}, {"num_key_value_heads", 8},
      {"intermediate_size", 14336}, {"vocab_size", 128256}, {"max_position_embeddings", 131072}};
  std::ofstream(d / "config.json") << cfg.dump(2);
  return d;
}

SeatModel seat(const std::string& spec) {
  auto a = parse_seat_arg(spec);
  EXPECT_TRUE(a.ok()) << (a.ok() ? "" : a.error().message);
  auto m = load_seat(*a, 6 * kGiB);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : m.error().message);
  return *m;
}

/** The seat as if its folder held weights, a tokenizer and a chat template: these config-only seats test the
 * stacks' YAML, not the refusal of a seat vLLM cannot start (kvplan_compose_test, AConfigOnlySeatIsRefused). */
SeatModel startable(SeatModel m) {
  m.serving.blockers.clear();
  return m;
}

GpuSpec gpu(const std::string& spec) {
  auto g = parse_gpu_arg(spec);
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : g.error().message);
  return *g;
}

std::size_t seat_index(const Plan& p, const std::string& name) {
  for (std::size_t i = 0; i < p.seats.size(); ++i)
    if (p.seats[i].arg.name == name) return i;
  ADD_FAILURE() << "no seat " << name;
  return 0;
}

std::string gpu_of(const Plan& p, const std::string& name) {
  const auto& pl = p.placements[seat_index(p, name)];
  return pl.gpus.empty() ? std::string() : p.gpus[pl.gpus.front()].gpu.id;
}

// big: 30 GiB weights + 6 GiB overhead + 16 GiB KV (131,072 tokens) = 52 GiB per GPU.
// small: 16 GiB + 6 GiB + 4 GiB KV (32,768 tokens) = 26 GiB.
// GPU 0: 96 GiB with 41 GiB held by another tenant (55 GiB free); GPU 1: 48 GiB. No driver reserve
// (reserved=0), so the torch totals are the round figures; each seat also holds its CUDA context
// (kCudaContextBytes, 0.5 GiB) beside its budget.
struct KvplanTwoSeats : ::testing::Test {
  TempDir tmp;
  stdfs::path big_dir = write_llama_config(tmp.path, "big");
  stdfs::path small_dir = write_llama_config(tmp.path, "small");
  std::vector<GpuSpec> gpus = {gpu("0=96GiB:used=41GiB:reserved=0"), gpu("1=48GiB:name=NVIDIA L40S:reserved=0")};
  std::string big(const std::string& extra = "") {
    return "big=" + big_dir.string() + ":weights=30GiB,max_model_len=131072" + extra;
  }
  std::string small(const std::string& extra = "") {
    return "small=" + small_dir.string() + ":weights=16GiB,max_model_len=32768" + extra;
  }
};

TEST_F(KvplanTwoSeats, KvHeavierSeatGoesToTheRoomierGpuAndBothFit) {
  // Listed small first: the order on the command line does not matter.
  auto plan = make_plan({seat(small()), seat(big())}, gpus);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_TRUE(plan->all_fit);
  EXPECT_FALSE(plan->searched);
  EXPECT_EQ(gpu_of(*plan, "big"), "0");
  EXPECT_EQ(gpu_of(*plan, "small"), "1");
  const auto& b = plan->placements[seat_index(*plan, "big")];
  EXPECT_EQ(b.demand.bytes_per_request, 16 * kGiB);
  EXPECT_EQ(b.need_bytes, 52 * kGiB);
  EXPECT_EQ(b.max_num_batched_tokens, 8192);  // 96 GiB, not an A100
  EXPECT_EQ(plan->placements[seat_index(*plan, "small")].max_num_batched_tokens, 2048);  // 48 GiB
  EXPECT_NE(b.reason.find("KV demand 1 of 2"), std::string::npos) << b.reason;
  // The chosen utilization stays inside the free memory and meets the target.
  EXPECT_LE(b.util * 96.0, 55.0 - 0.5 + 1e-9);  // its CUDA context must be free beside the budget
  EXPECT_GE(b.budget_bytes, 52 * kGiB);
  EXPECT_GE(b.max_concurrency, 1.0);
  EXPECT_GE(b.largest_max_model_len, 131072);
  EXPECT_NEAR(b.min_util, 52.0 / 96.0, 0.001);
  for (const auto& g : plan->gpus) {
    std::uint64_t sum = g.gpu.used_bytes + g.free_bytes;
    for (const auto& s : g.shares) {
      sum += s.budget + s.outside;
      EXPECT_EQ(s.weights + s.kv + s.overhead, s.budget);
      EXPECT_EQ(s.outside, kCudaContextBytes);
    }
    EXPECT_EQ(sum, g.gpu.torch_total());
  }
}

TEST_F(KvplanTwoSeats, SeatsSpreadOverGpusInsteadOfCrowdingOne) {
  // Two 96 GiB GPUs, one with 41 GiB held by another tenant: both seats fit on the empty one (78 GiB), but an
  // operator wants them apart; the KV-heavier seat takes the roomiest GPU, the other the empty one.
  auto plan = make_plan({seat(small()), seat(big())}, {gpu("0=96GiB:used=41GiB:reserved=0"), gpu("1=96GiB:reserved=0")});
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_TRUE(plan->all_fit);
  EXPECT_EQ(gpu_of(*plan, "big"), "1");
  EXPECT_EQ(gpu_of(*plan, "small"), "0");
  // Pinned seats still share when told to.
  auto pinned = make_plan({seat(small(",gpu=1")), seat(big(",gpu=1"))}, {gpu("0=96GiB:used=41GiB:reserved=0"), gpu("1=96GiB:reserved=0")});
  ASSERT_TRUE(pinned.ok());
  EXPECT_EQ(gpu_of(*pinned, "big"), "1");
  EXPECT_EQ(gpu_of(*pinned, "small"), "1");
}

TEST_F(KvplanTwoSeats, SwappingTheSeatsBreaksTheFit) {
  auto plan = make_plan({seat(big(",gpu=1")), seat(small(",gpu=0"))}, gpus);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_FALSE(plan->all_fit);
  const auto& b = plan->placements[seat_index(*plan, "big")];
  EXPECT_FALSE(b.fits);
  EXPECT_FALSE(b.placed);
  // 52 GiB + its context needed, 48 GiB on GPU 1 less its headroom (the default 1 GiB, issue 51 #3)
  EXPECT_EQ(b.short_by_bytes, 4 * kGiB + kCudaContextBytes + kDefaultHeadroom);
  EXPECT_NE(b.reason.find("short by 5.50 GiB"), std::string::npos) << b.reason;
  EXPECT_NE(b.reason.find("and its headroom of 1.00 GiB"), std::string::npos) << b.reason;
  // What would fit instead: a shorter context in the 48 GiB less the context, weights and overhead.
  EXPECT_GT(b.largest_max_model_len, 0);
  EXPECT_LT(b.largest_max_model_len, 131072);
  EXPECT_NE(b.reason.find("max_model_len=" + std::to_string(b.largest_max_model_len) + " would fit"), std::string::npos)
      << b.reason;
  EXPECT_TRUE(plan->placements[seat_index(*plan, "small")].fits);
  EXPECT_NE(to_text(*plan).find("NO, short by 5.50 GiB"), std::string::npos);
  const auto j = to_json(*plan);
  EXPECT_EQ(j["all_fit"], false);
  EXPECT_EQ(j["seats"][0]["placement"]["short_by_bytes"], 4 * kGiB + kCudaContextBytes + kDefaultHeadroom);
}

TEST_F(KvplanTwoSeats, ExplicitUtilizationBeyondFreeMemoryIsRefused) {
  auto plan = make_plan({seat(big(",gpu_memory_utilization=0.9"))}, {gpus[0]});
  ASSERT_TRUE(plan.ok());
  const auto& b = plan->placements[0];
  EXPECT_FALSE(b.fits);
  // 0.9 * 96 GiB = 86.4 GiB asked (rounded up, as vLLM >= 0.14) plus its CUDA context, 55 GiB free: vLLM's
  // start-up check refuses it, said first, with the largest utilization that passes.
  EXPECT_TRUE(b.startup_refused);
  EXPECT_NE(b.reason.find("vLLM will refuse at start-up on GPU 0"), std::string::npos) << b.reason;
  EXPECT_EQ(b.startup_free_bytes, 55 * kGiB - kCudaContextBytes);
  EXPECT_NEAR(b.startup_max_util, 0.567, 0.001);  // floor((55 GiB - 0.5 GiB) / 96 GiB, 0.001)
  EXPECT_NE(b.blocker.find("vLLM refuses at start-up"), std::string::npos);
  // The start-up check counts the headroom as free (above); the shortfall keeps it (the default 1 GiB).
  EXPECT_EQ(b.short_by_bytes, static_cast<std::uint64_t>(std::ceil(0.9 * static_cast<double>(96 * kGiB))) +
                                  kCudaContextBytes - 55 * kGiB + kDefaultHeadroom);
}

TEST_F(KvplanTwoSeats, TensorParallelSeatSpansGpus) {
  auto plan = make_plan({seat(big(",tp=2"))}, {gpu("0=48GiB"), gpu("1=48GiB")});
  ASSERT_TRUE(plan.ok());
  const auto& b = plan->placements[0];
  EXPECT_TRUE(b.fits);
  ASSERT_EQ(b.gpus.size(), 2u);
  EXPECT_EQ(plan->seats[0].weight_bytes_per_rank, 15 * kGiB);
  EXPECT_EQ(b.demand.bytes_per_request, 8 * kGiB);  // kv heads 8 -> 4 per rank
  EXPECT_EQ(plan->gpus[0].shares.size(), 1u);
  EXPECT_EQ(plan->gpus[1].shares.size(), 1u);
  auto one = make_plan({seat(big(",tp=2"))}, {gpu("0=96GiB")});
  ASSERT_TRUE(one.ok());
  EXPECT_FALSE(one->placements[0].fits);
  EXPECT_NE(one->placements[0].reason.find("needs 2 GPUs"), std::string::npos);
}

TEST(KvplanPlacement, SearchFindsWhatHeaviestFirstMisses) {
  TempDir tmp;
  // x: heavy KV (16 GiB) but light weights: 30 GiB in all. y: light KV (1 GiB), 45 GiB weights: 52 GiB.
  // Heaviest-first puts x on the roomier GPU A (60 GiB), leaving y nothing that fits; x on B works.
  const auto dx = write_llama_config(tmp.path, "x");
  const auto dy = write_llama_config(tmp.path, "y");
  auto plan = make_plan({seat("x=" + dx.string() + ":weights=8GiB,max_model_len=131072"),
                         seat("y=" + dy.string() + ":weights=45GiB,max_model_len=8192")},
                        {gpu("A=60GiB"), gpu("B=50GiB")});
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->all_fit);
  EXPECT_TRUE(plan->searched);
  EXPECT_EQ(gpu_of(*plan, "x"), "B");
  EXPECT_EQ(gpu_of(*plan, "y"), "A");
}

TEST(KvplanPlacement, ArgumentErrors) {
  EXPECT_EQ(parse_gpu_arg("0").error().code, Errc::USAGE);
  EXPECT_EQ(parse_gpu_arg("0=96GiB:used=100GiB").error().code, Errc::USAGE);
  EXPECT_EQ(parse_gpu_arg("0=96GiB:foo=1").error().code, Errc::USAGE);
  EXPECT_EQ(parse_gpu_arg("0=lots").error().code, Errc::USAGE);
  auto g = parse_gpu_arg("1=80GB:used=1.5GiB:name=NVIDIA A100-SXM4-80GB");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->total_bytes, 80'000'000'000u);
  EXPECT_EQ(g->used_bytes, kGiB + kGiB / 2);
  EXPECT_EQ(g->name, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(parse_seat_arg("x").error().code, Errc::USAGE);
  EXPECT_EQ(parse_seat_arg("x=/m:tp=0").error().code, Errc::USAGE);
  EXPECT_EQ(parse_seat_arg("x=/m:kv_cache_dtype=int3").error().code, Errc::USAGE);
  EXPECT_EQ(parse_seat_arg("x=/m:max_model_len=1,bogus=2").error().code, Errc::USAGE);
  EXPECT_NE(parse_seat_arg("x=/m:bogus=2").error().message.find("unknown key 'bogus'"), std::string::npos);
  EXPECT_EQ(parse_seat_arg("x=/m:tp=2,gpu=0").error().code, Errc::USAGE);  // pins 1 GPU for tp=2
  EXPECT_EQ(parse_seat_arg("x=/m:weights=1GiB,assume=nvfp4a16").error().code, Errc::USAGE);
  auto s = parse_seat_arg("chat=/data/a:b:max_model_len=4096,kv_cache_dtype=fp8,prefix_caching=off,gpu=0+1,tp=2");
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->dir, "/data/a:b");
  EXPECT_EQ(*s->max_model_len, 4096);
  EXPECT_FALSE(s->kv.prefix_caching);
  EXPECT_EQ(s->kv.tp, 2);
  EXPECT_EQ(s->kv.kv_cache_dtype, KvCacheDtype::FP8);
  EXPECT_EQ(s->gpus, (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(parse_seat_arg("plain=/data/x")->dir, "/data/x");
}

TEST(KvplanPlacement, NvidiaSmiCsv) {
  auto g = parse_nvidia_smi_csv("0, NVIDIA H200, 143771, 41000\n1, NVIDIA A100-SXM4-80GB, 81920, 0\n");
  ASSERT_TRUE(g.ok());
  ASSERT_EQ(g->size(), 2u);
  EXPECT_EQ((*g)[0].total_bytes, 143'771 * kMiB);
  EXPECT_EQ((*g)[0].used_bytes, 41'000 * kMiB);
  EXPECT_EQ((*g)[1].name, "NVIDIA A100-SXM4-80GB");
  EXPECT_FALSE(parse_nvidia_smi_csv("0, H200, [N/A], 3\n").ok());
  EXPECT_FALSE(parse_nvidia_smi_csv("").ok());
}

// ---- --emit-compose ----

// Issue 51 #3: a config-only seat (weights=) cannot start: the whole stack is refused, nothing written.
TEST_F(KvplanTwoSeats, AConfigOnlySeatIsRefused) {
  auto plan = make_plan({seat(big()), startable(seat(small()))}, gpus);
  ASSERT_TRUE(plan.ok());
  TempDir out;
  auto files = emit_compose(*plan, out.path, {});
  ASSERT_TRUE(files.ok()) << files.error().message;
  EXPECT_TRUE(files->files.empty());
  ASSERT_GE(files->refused.size(), 1u);
  EXPECT_EQ(files->refused[0].seat, "big");
  EXPECT_EQ(files->refused[0].blocker.kind, "config-only");
  EXPECT_TRUE(stdfs::is_empty(out.path));
}

TEST_F(KvplanTwoSeats, EmitComposeWritesValidYamlAndRefusesToOverwrite) {
  auto plan =
      make_plan({startable(seat(big(",kv_cache_dtype=fp8,port=9001"))), startable(seat(small(",mm=off")))}, gpus);
  ASSERT_TRUE(plan.ok());
  ASSERT_TRUE(plan->all_fit);
  TempDir out;
  auto files = emit_compose(*plan, out.path, {});
  ASSERT_TRUE(files.ok()) << files.error().message;
  EXPECT_EQ(files->files.size(), 5u);  // 2 x (compose + litellm) + combined litellm

  const YAML::Node c = YAML::LoadFile((out.path / "big" / "compose.yaml").string());
  const YAML::Node svc = c["services"]["big"];
  ASSERT_TRUE(svc.IsMap());
  EXPECT_EQ(svc["image"].as<std::string>(), "vllm/vllm-openai:v0.34.0");  // the planned release, never latest
  EXPECT_EQ(svc["restart"].as<std::string>(), "unless-stopped");
  EXPECT_EQ(svc["ports"][0].as<std::string>(), "9001:8000");
  EXPECT_EQ(svc["volumes"][0].as<std::string>(), big_dir.string() + ":/models/big:ro");
  const YAML::Node dev = svc["deploy"]["resources"]["reservations"]["devices"][0];
  EXPECT_EQ(dev["driver"].as<std::string>(), "nvidia");
  EXPECT_EQ(dev["device_ids"][0].as<std::string>(), "0");
  EXPECT_EQ(dev["capabilities"][0].as<std::string>(), "gpu");
  ASSERT_TRUE(svc["healthcheck"]["test"].IsSequence());
  std::vector<std::string> cmd;
  for (const auto& n : svc["command"]) cmd.push_back(n.as<std::string>());
  auto value_of = [&](const std::string& flag) {
    auto it = std::find(cmd.begin(), cmd.end(), flag);
    return (it == cmd.end() || it + 1 == cmd.end()) ? std::string("<missing>") : *(it + 1);
  };
  const auto& b = plan->placements[seat_index(*plan, "big")];
  EXPECT_EQ(value_of("--gpu-memory-utilization"), format_util(b.util));
  EXPECT_EQ(value_of("--max-model-len"), "131072");
  EXPECT_EQ(value_of("--kv-cache-dtype"), "fp8");
  EXPECT_EQ(value_of("--max-num-batched-tokens"), "8192");
  EXPECT_EQ(value_of("--tensor-parallel-size"), "1");
  EXPECT_EQ(value_of("--served-model-name"), "big");
  EXPECT_EQ(value_of("--model"), "/models/big");
  EXPECT_NE(std::find(cmd.begin(), cmd.end(), "--enable-prefix-caching"), cmd.end());

  const YAML::Node small_svc = YAML::LoadFile((out.path / "small" / "compose.yaml").string())["services"]["small"];
  EXPECT_EQ(small_svc["deploy"]["resources"]["reservations"]["devices"][0]["device_ids"][0].as<std::string>(), "1");
  EXPECT_EQ(small_svc["ports"][0].as<std::string>(), "8001:8000");  // base 8000 + seat index 1

  const YAML::Node l = YAML::LoadFile((out.path / "litellm.yaml").string());
  ASSERT_EQ(l["model_list"].size(), 2u);
  EXPECT_EQ(l["model_list"][0]["model_name"].as<std::string>(), "big");
  EXPECT_EQ(l["model_list"][0]["litellm_params"]["model"].as<std::string>(), "hosted_vllm/big");
  EXPECT_EQ(l["model_list"][0]["litellm_params"]["api_base"].as<std::string>(), "http://localhost:9001/v1");
  EXPECT_EQ(l["model_list"][1]["model_info"]["max_input_tokens"].as<int>(), 32768);
  EXPECT_EQ(YAML::LoadFile((out.path / "small" / "litellm.yaml").string())["model_list"].size(), 1u);

  // A second run refuses to overwrite and leaves the files as they were.
  std::ofstream(out.path / "small" / "compose.yaml") << "# edited by hand\n";
  auto again = emit_compose(*plan, out.path, {});
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code, Errc::USAGE);
  EXPECT_NE(again.error().message.find("--force"), std::string::npos);
  std::ifstream in(out.path / "small" / "compose.yaml");
  std::string first;
  std::getline(in, first);
  EXPECT_EQ(first, "# edited by hand");
  ComposeOptions force;
  force.force = true;
  ASSERT_TRUE(emit_compose(*plan, out.path, force).ok());
  EXPECT_TRUE(YAML::LoadFile((out.path / "small" / "compose.yaml").string())["services"].IsMap());
  for (const auto& e : stdfs::recursive_directory_iterator(out.path))
    EXPECT_EQ(e.path().extension(), e.is_directory() ? "" : ".yaml") << e.path();  // no .partial left
}

TEST_F(KvplanTwoSeats, EmitComposeSkipsSeatsThatDoNotFit) {
  auto plan = make_plan({startable(seat(big(",gpu=1"))), startable(seat(small(",gpu=0")))}, gpus);
  ASSERT_TRUE(plan.ok());
  TempDir out;
  auto files = emit_compose(*plan, out.path, {});
  ASSERT_TRUE(files.ok());
  EXPECT_EQ(files->skipped_seats, std::vector<std::string>{"big"});
  EXPECT_FALSE(stdfs::exists(out.path / "big"));
}

TEST_F(KvplanTwoSeats, SvgHasOneBarPerGpu) {
  auto plan = make_plan({seat(small()), seat(big())}, gpus);
  ASSERT_TRUE(plan.ok());
  const std::string svg = to_svg(*plan);
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find(">GPU 0 · 96.00 GiB<"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">GPU 1 · 48.00 GiB · NVIDIA L40S<"), std::string::npos);
  EXPECT_NE(svg.find("other tenants: 41.00 GiB"), std::string::npos);
  EXPECT_NE(svg.find("#2 big weights: 30.00 GiB"), std::string::npos) << svg;  // seats numbered in --seat order
  EXPECT_NE(svg.find("#1 small KV cache:"), std::string::npos);
  // Issue 55: every kind of segment the bars hold has its legend entry; each seat a span and a caption line.
  EXPECT_NE(svg.find("<g id=\"legend\">"), std::string::npos);
  for (const char* k : {"reserve", "others", "weights", "kv", "overhead", "outside", "free", "headroom"})
    EXPECT_NE(svg.find(std::string("data-legend=\"") + k + "\""), std::string::npos) << k;
  std::size_t spans = 0;
  for (std::size_t at = svg.find("class=\"seat-span\""); at != std::string::npos; at = svg.find("class=\"seat-span\"", at + 1))
    ++spans;
  EXPECT_EQ(spans, 2u);
  EXPECT_NE(svg.find("class=\"seat-caption\" fill=\"#333333\">#2 big: weights 30.00 GiB"), std::string::npos) << svg;
}

// Issue 16 (also found): a long GPU name no longer hides the total (id and total come first, then the whole name on
// the header line: the canvas grows to it), and seats that fit nowhere are listed under the bars instead of missing.
TEST_F(KvplanTwoSeats, SvgShowsTotalsAndUnplacedSeats) {
  std::vector<GpuSpec> g = {gpu("0=96GiB:name=NVIDIA RTX PRO 6000 Blackwell Workstation Edition")};
  auto plan = make_plan({seat(small()), seat(big(",tp=2"))}, g);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  const std::string svg = to_svg(*plan);
  EXPECT_NE(svg.find(">GPU 0 · 96.00 GiB · NVIDIA RTX PRO 6000 Blackwell Workstation Edition<"), std::string::npos)
      << svg;
  EXPECT_NE(svg.find(">not placed<"), std::string::npos) << svg;
  EXPECT_NE(svg.find("big: does not fit: tp=2 needs 2 GPUs, 1 given"), std::string::npos) << svg;
}

}  // namespace
}  // namespace fp4forge::kvplan

namespace fp4forge::kvplan {
namespace {
// Issue 16 (also found): the compose project name is valid for docker compose whatever the seat is
// called (^[a-z0-9][a-z0-9_-]*$), and seat keys take vLLM's hyphenated spelling.
TEST(KvplanCompose, ProjectNameIsValidForCompose) {
  EXPECT_EQ(compose_project_name("Qwen3.5-27B"), "fp4forge-qwen3-5-27b");
  EXPECT_EQ(compose_project_name("gemma_4.it"), "fp4forge-gemma_4-it");
  const std::regex valid("^[a-z0-9][a-z0-9_-]*$");
  for (const char* n : {"A", "x.y.z", "MiXeD-Case_9"}) EXPECT_TRUE(std::regex_match(compose_project_name(n), valid)) << n;
}

TEST(KvplanSeatArg, HyphenatedKeysAreAccepted) {
  auto a = parse_seat_arg("s=/models/m:max-model-len=4096,kv-cache-dtype=fp8,gpu-memory-utilization=0.8");
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_EQ(a->dir, "/models/m");
  EXPECT_EQ(a->max_model_len, 4096);
  EXPECT_EQ(a->kv.kv_cache_dtype, KvCacheDtype::FP8);
  ASSERT_TRUE(a->gpu_memory_utilization.has_value());
  EXPECT_DOUBLE_EQ(*a->gpu_memory_utilization, 0.8);
  auto twice = parse_seat_arg("s=/m:max-model-len=1,max_model_len=2");
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.error().message.find("given twice"), std::string::npos);
}

// The seat-key table is the one home of the keys: the parser takes each with a value of the kind the table
// names, the help lists each, and docs/cli/plan.md documents each.
TEST(KvplanSeatKeys, TheTableTheParserTheHelpAndTheDocsAgree) {
  const std::string recipe = std::string(FP4FORGE_TEST_DATA) + "/../../examples/recipes/nvfp4-experts-fp8-attention.yaml";
  const std::map<std::string_view, std::string_view> sample{{"recipe", recipe},
                                                            {"max_model_len", "128k"},
                                                            {"kv_cache_dtype", "fp8"},
                                                            {"gpu_memory_utilization", "0.5"},
                                                            {"max_num_batched_tokens", "8192"},
                                                            {"tp", "1"},
                                                            {"prefix_caching", "on"},
                                                            {"spec_tokens", "2"},
                                                            {"mm", "off"},
                                                            {"assume", "nvfp4a16"},
                                                            {"weights", "1GiB"},
                                                            {"overhead", "1GiB"},
                                                            {"concurrency", "2"},
                                                            {"gpu", "0"},
                                                            {"port", "8000"},
                                                            {"block_size", "16"},
                                                            {"mamba_ssm_dtype", "float32"},
                                                            {"mamba_cache_dtype", "bfloat16"},
                                                            {"hybrid_manager", "on"},
                                                            {"served_name", "m"},
                                                            {"vllm_version", "0.33"},
                                                            {"max_num_seqs", "64"},
                                                            {"enforce_eager", "on"},
                                                            {"dtype", "bfloat16"},
                                                            {"allow_long_max_model_len", "on"},
                                                            {"api_key_env", "SEAT_KEY"},
                                                            {"async_scheduling", "off"},
                                                            {"log", "seat.log"},
                                                            {"replaces", "old"},
                                                            {"frees", "10GiB"},
                                                            {"vllm_args", "--enable-chunked-prefill"}};
  std::ifstream in(std::string(FP4FORGE_TEST_DATA) + "/../../docs/cli/plan.md");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  ASSERT_FALSE(doc.empty());
  const std::string help = seat_keys_help();
  for (const SeatKey& k : kSeatKeys) {
    const auto it = sample.find(k.key);
    ASSERT_NE(it, sample.end()) << k.key << ": a key of the table without a sample value in this test";
    // weights= and assume= exclude each other; each alone.
    const auto r = parse_seat_arg(fmt::format("s=./m:{}={}", k.key, it->second));
    EXPECT_TRUE(r.ok()) << k.key << ": " << (r.ok() ? "" : r.error().message);
    EXPECT_NE(help.find(fmt::format("{}{}", k.key, k.values.empty() ? "" : "=")), std::string::npos) << k.key;
    EXPECT_NE(doc.find(fmt::format("`{}`", k.key)), std::string::npos) << k.key << " is not in docs/cli/plan.md";
  }
  EXPECT_EQ(sample.size(), std::size(kSeatKeys));
  const auto unknown = parse_seat_arg("s=./m:max_modle_len=1");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("allow_long_max_model_len"), std::string::npos) << unknown.error().message;
}

// weights= excludes a quantized size asked for in another way; the message names the key that was given.
TEST(SeatArg, WeightsExcludesAssumeAndRecipeAndSaysWhich) {
  const auto a = parse_seat_arg("s=./m:weights=10GiB:assume=nvfp4a16");
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.error().message.find("weights=SIZE and assume="), std::string::npos) << a.error().message;
  const std::string recipe = std::string(FP4FORGE_TEST_DATA) + "/../../examples/recipes/nvfp4-experts-fp8-attention.yaml";
  const auto r = parse_seat_arg(fmt::format("s=./m:weights=10GiB:recipe={}", recipe));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("weights=SIZE and recipe="), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace fp4forge::kvplan
