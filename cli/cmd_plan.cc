// fp4forge plan --seat NAME=DIR[:k=v,...]... --gpu ID=TOTAL[:used=SIZE]...: vLLM KV-cache sizing and GPU
// placement without a GPU (library: kvplan/*.h; schema: docs/cli/plan.md).
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "commands.h"
#include "fp4forge/kvplan/planner.h"
#include "fp4forge/util/fs.h"
#include "fp4forge/util/size.h"
#include "render.h"

namespace fp4forge::cli {

namespace {
struct PlanOpts {
  std::vector<std::string> seats, gpus;
  bool nvidia_smi = false, json = false, force = false;
  std::string overhead, headroom, svg, compose_dir, from_log;
  kvplan::ComposeOptions compose;
};

int run_plan(const PlanOpts& o) {
  kvplan::PlanParams p;
  p.seats = o.seats;
  p.gpus = o.gpus;
  p.gpus_from_nvidia_smi = o.nvidia_smi;
  p.from_log = o.from_log;
  if (o.seats.empty() && o.from_log.empty())
    return report_error(make_error(Errc::USAGE, "plan needs a seat: --seat NAME=DIR[:key=value,...] or --from-log "
                                   "FILE; hint: fp4forge plan --help"), o.json);
  if (!o.overhead.empty()) {
    auto s = parse_size(o.overhead);
    if (!s) return report_error(Error{Errc::USAGE, "--overhead: " + s.error().message, {}, {}}, o.json);
    p.overhead = *s;
  }
  if (!o.headroom.empty()) {
    auto s = parse_size(o.headroom);
    if (!s) return report_error(Error{Errc::USAGE, "--headroom: " + s.error().message, {}, {}}, o.json);
    p.headroom = *s;
  }
  if (!o.svg.empty())  // before the planning, as verify --svg does (issue 55)
    if (Status st = fs::check_user_file(o.svg); !st) return report_error(st.error(), o.json);
  p.svg = o.svg;
  p.compose_dir = o.compose_dir;
  p.compose = o.compose;
  p.compose.force = o.force;
  auto r = kvplan::plan_seats(p);
  if (!r) return report_error(r.error(), o.json);
  for (const auto& w : r->warnings) warn(w);
  for (const auto& e : kvplan::compose_refusal_lines(*r)) error_line(e);
  if (!o.json)  // seats read from the Hugging Face cache (their "hub" key with --json)
    for (const auto& m : r->plan.seats)
      if (m.hub) note(fmt::format("seat '{}': {}", m.arg.name, hf_cache::to_text(*m.hub)));
  if (o.json) {
    print_json(kvplan::to_json(*r));
  } else {
    print_report(kvplan::to_text(*r));  // wrapped on a terminal, one line per item piped (docs/cli/README.md)
  }
  return kvplan::exit_code(*r);
}
}  // namespace

void add_plan(CLI::App& sub, Action& action) {
  auto o = std::make_shared<PlanOpts>();
  sub.add_option("--seat", o->seats,
                 "NAME=DIR[:key=value,...] a vLLM seat (DIR: a folder, or a repo id ORG/NAME[@REVISION] in the "
                 "Hugging Face cache); keys: " + kvplan::seat_keys_help() + " (docs/cli/plan.md)")
      ->take_all();
  sub.add_option("--from-log", o->from_log,
                 "FILE: plan the seat a vLLM start-up log describes (its model, served name and non-default args), "
                 "calibrated by the log (seat key log=)");
  sub.add_option("--gpu", o->gpus, "ID=TOTAL[:used=SIZE][:name=NAME][:reserved=SIZE|:torch_total=SIZE][:headroom=SIZE][:unified][:free=SIZE] a GPU "
                 "(TOTAL with its unit: nvidia-smi's memory.total is MiB, e.g. 0=97887MiB or 0=96GiB:used=41GiB)")
      ->take_all();
  sub.add_flag("--gpus-from-nvidia-smi", o->nvidia_smi, "read the GPUs (total, used) from nvidia-smi");
  sub.add_option("--overhead", o->overhead,
                 "SIZE per seat and GPU for activations, non-torch memory and CUDA graphs "
                 "(replaces the estimate; see docs/plan-overheads.md)");
  sub.add_option("--headroom", o->headroom,
                 "SIZE of free memory kept on every GPU (default 1GiB; the GPU key headroom= beats it)");
  sub.add_flag("--json", o->json, "print the plan as JSON (schema: docs/cli/plan.md)");
  sub.add_option("--svg", o->svg, "FILE: draw each GPU's memory as stacked bars");
  sub.add_option("--emit-compose", o->compose_dir, "DIR: write a docker compose stack and LiteLLM entry per seat");
  sub.add_flag("--force", o->force, "with --emit-compose: overwrite existing files");
  sub.add_option("--image", o->compose.image,
                 "with --emit-compose: the vLLM OpenAI server image of every stack (default: IMAGE_REPO:vX.Y.Z of each "
                 "seat's vllm_version)");
  sub.add_option("--image-repo", o->compose.image_repo,
                 "with --emit-compose: the repository of the pinned images (a mirror of vllm/vllm-openai)")
      ->capture_default_str();
  sub.add_option("--api-host", o->compose.api_host, "with --emit-compose: host in the LiteLLM api_base")
      ->capture_default_str();
  sub.footer(
      "Examples:\n"
      "  fp4forge plan --seat chat=./gemma-4-31B-it --gpu 0=96GiB:used=41GiB\n"
      "  fp4forge plan --seat big=./Qwen3.5-27B:max_model_len=131072,kv_cache_dtype=fp8 \\\n"
      "      --seat small=./cfg-only:weights=16GiB --gpu 0=80GiB --gpu 1=48GiB:name=L40S --svg gpus.svg\n"
      "  fp4forge plan --seat chat=./q-nvfp4a16 --gpus-from-nvidia-smi --emit-compose ./deploy\n"
      "  fp4forge plan --seat chat=./gemma-4-31B-it:log=chat.log,gpu_memory_utilization=0.6 --gpu 0=97887MiB\n"
      "  fp4forge plan --from-log chat.log\n"
      "Exit codes: 0 every seat fits (or no GPU given), 1 a seat does not fit or --emit-compose refused a seat vLLM\n"
      "could not start, 2 usage, 3 bad config, 4 I/O.");
  sub.callback([&action, o] { action = [o] { return run_plan(*o); }; });
}

}  // namespace fp4forge::cli
