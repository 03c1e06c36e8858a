// fp4forge quantize SRC DST: streaming quantization (library: quantize/plan.h, quantize/run.h; --mtp-from is
// QuantizeParams::mtp_from, quantize/mtp_splice.h). Option mapping, one call, print.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "commands.h"
#include "validators.h"
#include "interrupt.h"
#include "fp4forge/safetensors/checkpoint.h"
#include "fp4forge/quantize/plan.h"
#include "fp4forge/quantize/run.h"
#include "fp4forge/quantize/staging.h"
#include "fp4forge/util/size.h"
#include "fp4forge/util/thread_pool.h"
#include "render.h"

namespace fp4forge::cli {

namespace {
struct QuantizeOpts {
  std::string src, dst, max_memory = "2G";
  std::string mtp_from;  ///< a checkpoint folder, taken like `src`
  std::string tokenizer_from, processor_from;  ///< reference releases: folders or cached repo ids, taken like `src`
  bool no_preflight = false;
  std::vector<std::string> scheme_for;  ///< --scheme-for SELECTOR=SCHEME[:OBSERVER]
  std::string recipe;                   ///< --recipe FILE
  std::string scheme = "nvfp4a16", observer;  ///< --scheme / --observer as typed (parsed into `plan` once)
  bool scheme_given = false, observer_given = false, requantize_fp8 = false;
  quant::PlanOptions plan;
  unsigned jobs = 0;
  bool dry_run = false, resume = false, restart = false, json = false, verbose = false, no_progress = false;
};

// What an interrupted run leaves: the finished shards in staging (reusable with --resume), or a complete DST.
std::string interrupted_text(const char* sig, const std::filesystem::path& dst, std::size_t total_shards) {
  namespace stdfs = std::filesystem;
  std::error_code ec;
  const stdfs::path staging = quant::staging_path(dst);
  if (!stdfs::exists(staging, ec))
    return stdfs::exists(dst, ec) ? fmt::format("interrupted ({}) after the output was complete in {}", sig, dst.string())
                                   : fmt::format("interrupted ({}) before any output was written; nothing kept", sig);
  // The shards its manifest records: what --resume reuses (a shard renamed into place an instant before the signal
  // may have no record yet; tryout M-L3 saw "30 finished", then 29 resumed).
  const quant::StagedShards staged = quant::staged_shards(staging);
  // tryout M-L4: "0 of 43 shard(s) finished, kept ... --resume to reuse them"; Q-L2: the same with one shard
  // written but not recorded, which --resume rewrites: nothing either way.
  if (staged.recorded == 0)
    return fmt::format(
        "interrupted ({}) before any shard was {}: nothing to resume; the next run removes {} "
        "(it holds no shard --resume could reuse)",
        sig, staged.count == 0 ? "finished" : "recorded", staging.string());
  const std::size_t unrecorded = staged.count - staged.recorded;
  return fmt::format(
      "interrupted ({}): {} of {} shard(s) finished, kept in {}{}; run the same command again with "
      "--resume to reuse them (or --restart to start over)",
      sig, staged.recorded, total_shards, staging.string(),
      unrecorded == 0 ? std::string()
                      : fmt::format(" ({} more written but not yet recorded: --resume rewrites it)", unrecorded));
}

int run_quantize(const QuantizeOpts& o) {
  auto max_mem = parse_size(o.max_memory);
  if (!max_mem) return report_error(Error{Errc::USAGE, "--max-memory: " + max_mem.error().message, {}, {}}, o.json);
  // What was typed is checked before SRC is opened: a usage error (exit 2) is said as one, with its did-you-mean,
  // not after "cannot open checkpoint" (exit 4) for a command that could never run.
  // The scheme, observer and rules are parsed here, once: the library takes them typed.
  quant::QuantizeParams p;
  p.plan = o.plan;
  p.plan.fp8_passthrough = !o.requantize_fp8;
  auto scheme = parse_quant_scheme(o.scheme);
  if (!scheme) return report_error(scheme.error(), o.json);
  p.plan.scheme = *scheme;
  if (o.observer_given) {
    auto observer = parse_observer(o.observer);
    if (!observer) return report_error(observer.error(), o.json);
    p.plan.observer = *observer;
  }
  for (const auto& a : o.scheme_for) {
    auto r = quant::parse_scheme_for(a);
    if (!r) return report_error(r.error(), o.json);
    p.plan.scheme_for.push_back(std::move(*r));
  }
  auto src = checkpoint_source(o.src, o.json);
  if (!src) return report_error(src.error(), o.json);
  if (!o.recipe.empty()) {
    auto r = quant::read_recipe(o.recipe);
    if (!r) return report_error(r.error(), o.json);
    quant::apply_recipe(*r, p.plan, o.scheme_given, o.observer_given);
  }
  p.src = src->path;
  p.dst = o.dst;
  if (p.dst.empty() && !o.dry_run && src->hub) {  // quantize ORG/NAME: DST defaults to ./NAME-<preset>
    std::vector<QuantScheme> schemes{p.plan.scheme};  // the default, then each rule's: ./NAME-NVFP4A16-FP8_BLOCK
    for (const auto& r : p.plan.scheme_for) schemes.push_back(r.scheme);
    // A path fp4forge chose is reported absolute (one the user gave is echoed as given: docs/cli/README.md).
    p.dst = std::filesystem::absolute(quant::default_destination(src->hub->name(), schemes)).lexically_normal();
  }
  p.dry_run = o.dry_run;
  p.run.jobs = o.jobs;
  p.run.max_memory = *max_mem;
  p.run.resume = o.resume;
  p.run.restart = o.restart;
  if (o.resume && o.restart)
    return report_error(make_error(Errc::USAGE, "--resume and --restart contradict each other; pick one"), o.json);
  const auto bar = progress_bar(o.json, o.no_progress);
  p.run.progress = bar.get();
  std::size_t plan_warnings = 0;
  std::atomic<std::size_t> total_shards{0};
  // The preflight's warnings, said once: the plan repeats some in its own words (tryout P-L4: index-total-size twice).
  std::vector<std::string> preflight_said;
  // Ctrl-C / SIGTERM: one line saying what was kept and how to continue (the staging folder stays for --resume).
  std::optional<InterruptNotice> notice;
  if (!o.dry_run)
    notice.emplace([&](const char* sig) { return interrupted_text(sig, p.dst, total_shards.load()); }, o.json);
  p.on_plan = [&](const quant::QuantPlan& plan) {
    plan_warnings = plan.warnings.size();
    total_shards = plan.shards.size();
    if (!o.dry_run)
      for (const auto& w : plan.warnings)
        if (std::none_of(preflight_said.begin(), preflight_said.end(), [&w](const std::string& m) {
              return w.find(m) != std::string::npos || m.find(w) != std::string::npos;
            }))
          warn(w);
  };
  if (!o.mtp_from.empty()) {  // a folder or a repo id in the Hugging Face cache, like SRC
    auto from = checkpoint_source(o.mtp_from, o.json);
    if (!from) return report_error(from.error(), o.json);
    p.mtp_from = from->path;
  }
  // The serving files' references resolve like every checkpoint argument (a folder or a cached repo id).
  for (auto [arg, into] : {std::pair{&o.tokenizer_from, &p.preflight.tokenizer_from},
                           std::pair{&o.processor_from, &p.preflight.processor_from}}) {
    if (arg->empty()) continue;
    auto from = checkpoint_source(*arg, o.json);
    if (!from) return report_error(from.error(), o.json);
    *into = from->path;
  }
  p.preflight.checks = !o.no_preflight;
  std::optional<quant::Preflight> pre;
  p.on_preflight = [&](const quant::Preflight& r) {
    pre = r;
    for (const auto& f : r.findings)  // warnings never refuse: said before anything is written
      if (f.severity == Severity::WARNING) {
        warn(fmt::format("preflight: {}: {}", f.kind, f.message));
        preflight_said.push_back(f.message);
      }
    for (const auto& line : quant::refusal_lines(r)) error_line(line);
  };
  auto res = quant::quantize(p);
  if (!res) {
    if (!pre || !pre->refused()) return report_error(res.error(), o.json);
    error_line(res.error().describe());  // the refusal: one line per finding above, then what it means
    if (o.json) {
      nlohmann::ordered_json j;
      j["ok"] = false;
      j["error"] = error_json(res.error());
      j["preflight"] = quant::to_json(*pre);
      print_json(j);  // an error document (docs/errors.md), with the preflight's findings
    }
    return res.error().exit_code();
  }
  if (o.json) {
    auto j = quant::to_json(*res);
    j["source_hub"] = hf_cache::to_json(src->hub);
    print_json(with_schema(j, "quantize"));
    return 0;
  }
  if (res->summary)  // the run's own warnings (the plan's were printed before the run started)
    for (std::size_t i = plan_warnings; i < res->summary->warnings.size(); ++i) warn(res->summary->warnings[i]);
  print_report(quant::to_text(*res, o.verbose));
  std::fflush(stdout);
  return 0;
}
}  // namespace

void add_quantize(CLI::App& sub, Action& action) {
  auto o = std::make_shared<QuantizeOpts>();
  sub.add_option("src", o->src,
                 "source checkpoint directory (bf16/fp16/fp32 safetensors), or a repo id ORG/NAME[@REVISION] in "
                 "the Hugging Face cache")
      ->required();
  sub.add_option("dst", o->dst,
                 "output directory (must not exist; written atomically); for a repo id SRC it defaults to "
                 "./NAME-<scheme preset>, e.g. ./Qwen3-8B-NVFP4A16");
  CLI::Option* scheme_opt =
      sub.add_option("--scheme", o->scheme,
                     "quantization scheme: " + quant_scheme_names() +
                         " (presets such as FP8_BLOCK accepted; docs/schemes.md); with --scheme-for / --recipe: the "
                         "scheme of every module no rule selects")
          ->capture_default_str();
  sub.add_option("--scheme-for", o->scheme_for,
                 "SELECTOR=SCHEME[:OBSERVER]: modules the selector picks get this scheme, one config group per scheme "
                 "(repeatable, first match wins). SELECTOR: attention, dense_mlp, experts, shared_experts, "
                 "linear_attention, last_n_layers=K, first_n_layers=K, a module name or re:REGEX (docs/recipes.md)");
  sub.add_option("--recipe", o->recipe,
                 "YAML or JSON file of scheme rules (scheme, observer, rules: [{match, scheme, observer}], ignore); "
                 "--scheme-for rules come first, --scheme / --observer override its defaults (docs/recipes.md)");
  CLI::Option* observer_opt = sub.add_option("--observer", o->observer,
                 "how each group's range is chosen: mse, also expanded-mse (llm-compressor's recommended "
                 "nvfp4_expanded_mse search, not its generic 'mse'; the nvfp4a16 default), minmax (compressed-tensors' preset default; the default of the other schemes, "
                 "the only one of the fp8 schemes) or memoryless-mse (nvfp4a16, mxfp4a16, w4a16; "
                 "docs/schemes.md#observers)");
  sub.add_option("--ignore", o->plan.ignore, "keep this module unquantized: exact name or re:REGEX (repeatable)");
  sub.add_option("--force-quantize", o->plan.force_quantize,
                 "quantize a module the policy keeps: exact name (required for protected roles) or re:REGEX");
  add_expert_orientation(sub, o->plan.experts,
                         "fused 3-D experts whose shapes read both ways: out-in = [E, 2I, H] / [E, H, I], "
                         "in-out = [E, H, 2I] / [E, I, H]");
  sub.add_option("--mtp-from", o->mtp_from,
                 "SRC lacks its MTP tensors (a transformers re-save): splice them, unquantized, from this "
                 "checkpoint folder (the original release) into DST's model-mtp.safetensors, listed in ignore");
  sub.add_option("--tokenizer-from", o->tokenizer_from,
                 "REF: a reference release (folder or cached repo id ORG/NAME) whose tokenizer files the output takes "
                 "where SRC has none (or only its chat template, where SRC has a tokenizer but no template); checked "
                 "like doctor checks a tokenizer (vocabulary vs embeddings, truncation, max length)");
  sub.add_option("--processor-from", o->processor_from,
                 "REF: a reference release (folder or cached repo id) whose processor files (processor_config.json, "
                 "preprocessor_config.json, ...) a multimodal output takes where SRC lacks them; checked against "
                 "vision_config as doctor checks them");
  sub.add_flag("--no-preflight", o->no_preflight,
               "skip the preflight: doctor's checks on SRC, whose errors otherwise refuse the run (exit 3) before "
               "anything is written");
  sub.add_flag("--requantize-fp8", o->requantize_fp8,
               "FP8 source weights whose target is their own FP8 form (fp8-block from 128x128 blocks, fp8-dynamic from "
               "per-channel scales) are passed through, and packed FP4 ones going to nvfp4a16 cast, losslessly by "
               "default; re-encode them all from the bf16 expansion");
  sub.add_flag("--dry-run", o->dry_run, "print the plan and write nothing");
  sub.add_flag("--strict", o->plan.strict, "a weight whose shape does not fit its scheme (in_features a multiple of 16 for nvfp4a16, 32 for mxfp4a16, ...; docs/schemes.md) is an error instead of kept");
  sub.add_option("-j,--jobs", o->jobs,
                 "worker threads (default and 0: all cores, twice that with a searched observer; at most 1024)")
      ->check(in_range(0u, ThreadPool::kMaxThreads));
  sub.add_option("--max-memory", o->max_memory, "in-flight byte budget, e.g. 2G, 512M")->capture_default_str();
  sub.add_flag("--no-progress", o->no_progress, "no progress bar (drawn on stderr when it is a terminal)");
  sub.add_flag("--resume", o->resume, "reuse verified shards of an interrupted run into the same DST");
  sub.add_flag("--restart", o->restart, "discard the finished shards of an interrupted run and start over");
  sub.add_flag("-v,--verbose", o->verbose, "--dry-run: list every tensor's decision");
  sub.add_flag("--json", o->json, "print the summary (or the plan) as JSON (schema: docs/cli/quantize.md)");
  sub.footer(
      "Examples:\n"
      "  fp4forge quantize ./gemma-4-26B-A4B-it --dry-run\n"
      "  fp4forge quantize ./Qwen3.5-27B ./Qwen3.5-27B-NVFP4A16 -j 16 --max-memory 4G\n"
      "  fp4forge quantize Qwen/Qwen3-8B          # from the Hugging Face cache into ./Qwen3-8B-NVFP4A16\n"
      "  fp4forge quantize ./llama ./llama-nvfp4 --ignore re:.*layers\\.0\\..* --resume --json\n"
      "  fp4forge quantize ./glm ./glm-mixed --scheme nvfp4a16 --scheme-for attention=fp8-block\n"
      "  fp4forge quantize ./deepseek ./deepseek-mixed --recipe nvfp4-experts-fp8-attention.yaml");
  sub.callback([&action, o, scheme_opt, observer_opt] {
    o->scheme_given = scheme_opt->count() > 0;
    o->observer_given = observer_opt->count() > 0;
    action = [o] { return run_quantize(*o); };
  });
}

}  // namespace fp4forge::cli
