// fp4forge plan --seat NAME=DIR[:k=v,...]... --gpu ID=TOTAL[:used=SIZE]...: vLLM KV-cache sizing and GPU
// placement without a GPU (library: kvplan/*.h; schema: docs/cli/plan.md).
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "commands.h"
#include "fp4forge/kvplan/compose.h"
#include "fp4forge/kvplan/gpu.h"
#include "fp4forge/kvplan/placement.h"
#include "fp4forge/kvplan/report.h"
#include "fp4forge/util/size.h"
#include "fp4forge/util/fs.h"
#include "render.h"

namespace fp4forge::cli {

namespace {
struct PlanOpts {
  std::vector<std::string> seats, gpus;
  bool nvidia_smi = false, json = false, force = false;
  std::string overhead, svg, compose_dir;
  kvplan::ComposeOptions compose;
};

int run_plan(const PlanOpts& o) {
  using namespace kvplan;
  std::optional<std::uint64_t> overhead;
  if (!o.overhead.empty()) {
    auto s = parse_size(o.overhead);
    if (!s) return report_error(s.error(), o.json);
    overhead = *s;
  }
  std::vector<SeatArg> args;
  for (const auto& s : o.seats) {
    auto a = parse_seat_arg(s);
    if (!a) return report_error(a.error(), o.json);
    args.push_back(std::move(*a));
  }
  std::vector<GpuSpec> gpus;
  for (const auto& g : o.gpus) {
    auto r = parse_gpu_arg(g);
    if (!r) return report_error(r.error(), o.json);
    gpus.push_back(std::move(*r));
  }
  if (o.nvidia_smi) {
    auto r = query_nvidia_smi();
    if (!r) return report_error(r.error(), o.json);
    gpus.insert(gpus.end(), r->begin(), r->end());
  }
  std::vector<SeatModel> seats;
  for (const auto& a : args) {
    auto m = load_seat(a, overhead);
    if (!m) return report_error(m.error(), o.json);
    seats.push_back(std::move(*m));
  }
  auto plan = make_plan(std::move(seats), std::move(gpus));
  if (!plan) return report_error(plan.error(), o.json);

  nlohmann::ordered_json outputs = {{"svg", nullptr}, {"compose_files", nlohmann::ordered_json::array()},
                                    {"compose_skipped", nlohmann::ordered_json::array()}};
  if (!o.svg.empty()) {
    if (auto st = fs::write_file_atomic(o.svg, plan_to_svg(*plan)); !st) return report_error(st.error(), o.json);
    outputs["svg"] = o.svg;
  }
  if (!o.compose_dir.empty()) {
    ComposeOptions co = o.compose;
    co.force = o.force;
    auto files = emit_compose(*plan, o.compose_dir, co);
    if (!files) return report_error(files.error(), o.json);
    for (const auto& f : files->files) outputs["compose_files"].push_back(f.string());
    outputs["compose_skipped"] = files->skipped_seats;
    for (const auto& s : files->skipped_seats)
      warn(fmt::format("--emit-compose: seat '{}' does not fit, no stack written for it", s));
  }
  if (o.json) {
    auto j = plan_to_json(*plan);
    j["outputs"] = outputs;
    print_json(j);
  } else {
    fmt::print("{}", plan_to_text(*plan));
    if (!outputs["svg"].is_null()) fmt::print("wrote {}\n", o.svg);
    for (const auto& f : outputs["compose_files"]) fmt::print("wrote {}\n", f.get<std::string>());
    std::fflush(stdout);
  }
  return (!plan->gpus.empty() && !plan->all_fit) ? 1 : 0;
}
}  // namespace

void add_plan(CLI::App& sub, Action& action) {
  auto o = std::make_shared<PlanOpts>();
  sub.add_option("--seat", o->seats,
                 "NAME=DIR[:key=value,...] a vLLM seat; keys: max_model_len, kv_cache_dtype (auto|bf16|fp8), "
                 "gpu_memory_utilization, max_num_batched_tokens, tp, prefix_caching (on|off), spec_tokens, "
                 "mm (on|off), assume=nvfp4a16, weights=SIZE, overhead=SIZE, concurrency, gpu=ID[+ID], port, "
                 "block_size, mamba_ssm_dtype, mamba_cache_dtype, hybrid_manager (on|off), served_name")
      ->required()
      ->take_all();
  sub.add_option("--gpu", o->gpus, "ID=TOTAL[:used=SIZE][:name=NAME] a GPU, e.g. 0=96GiB:used=41GiB")->take_all();
  sub.add_flag("--gpus-from-nvidia-smi", o->nvidia_smi, "read the GPUs (total, used) from nvidia-smi");
  sub.add_option("--overhead", o->overhead,
                 "SIZE per seat and GPU for activations, non-torch memory and CUDA graphs "
                 "(default 6GiB; see docs/plan-overheads.md)");
  sub.add_flag("--json", o->json, "print the plan as JSON (schema: docs/cli/plan.md)");
  sub.add_option("--svg", o->svg, "FILE: draw each GPU's memory as stacked bars");
  sub.add_option("--emit-compose", o->compose_dir, "DIR: write a docker compose stack and LiteLLM entry per seat");
  sub.add_flag("--force", o->force, "with --emit-compose: overwrite existing files");
  sub.add_option("--image", o->compose.image, "with --emit-compose: vLLM OpenAI server image")
      ->capture_default_str();
  sub.add_option("--api-host", o->compose.api_host, "with --emit-compose: host in the LiteLLM api_base")
      ->capture_default_str();
  sub.footer(
      "Examples:\n"
      "  fp4forge plan --seat chat=./gemma-4-31B-it --gpu 0=96GiB:used=41GiB\n"
      "  fp4forge plan --seat big=./Qwen3.5-27B:max_model_len=131072,kv_cache_dtype=fp8 \\\n"
      "      --seat small=./cfg-only:weights=16GiB --gpu 0=80GiB --gpu 1=48GiB:name=L40S --svg gpus.svg\n"
      "  fp4forge plan --seat chat=./q:assume=nvfp4a16 --gpus-from-nvidia-smi --emit-compose ./deploy\n"
      "Exit codes: 0 every seat fits (or no GPU given), 1 a seat does not fit, 2 usage, 3 bad config, 4 I/O.");
  sub.callback([&action, o] { action = [o] { return run_plan(*o); }; });
}

}  // namespace fp4forge::cli
