#include "fp4forge/diagnose/diagnose.h"

#include <algorithm>

#include <fmt/format.h>

#include "checks.h"
#include "fp4forge/model/synth.h"
#include "fp4forge/verify/verify.h"

namespace fp4forge::doctor {

Result<std::unique_ptr<Diagnosis>> diagnose(const std::filesystem::path& dir, const DiagnoseOptions& opts) {
  auto d = std::make_unique<Diagnosis>();
  CheckpointOptions co;
  co.require_config = true;
  co.require_weights = false;
  FP4FORGE_ASSIGN_OR_RETURN(Checkpoint ck, Checkpoint::open(dir, co));
  d->ckpt = std::make_unique<Checkpoint>(std::move(ck));
  Context& ctx = d->ctx;
  FP4FORGE_TRY(fill_context(ctx, *d->ckpt));
  ctx.tokenizer_from = opts.tokenizer;
  ctx.overlay = opts.overlay;
  ctx.as_source = opts.as_source;
  ctx.skip_structure = opts.skip_structure;
  ctx.vllm_minor = opts.vllm_minor;
  ctx.transformers_version = opts.transformers_version;
  FP4FORGE_ASSIGN_OR_RETURN(ctx.tokenizer_dir, tokenizer_source(ctx.dir, opts.tokenizer));
  FindingSink sink;
  if (ctx.tensors.empty())
    sink.add(finding_kind("no-weights"),
             {.message = "no *.safetensors in the directory: only config, processor and tokenizer files were checked"});
  if (header_only_synth(*d->ckpt))
    sink.add(finding_kind("header-only-weights"),
             {.message = "the shards were written by `synth --header-only` (safetensors metadata fp4forge_synth: "
                         "header-only): their tensor data is sparse and reads as zeros, so vLLM would serve a model "
                         "of zeros and quantize would write one (it refuses such a folder); doctor's config, shape and "
                         "file checks still hold for the layout",
              .hint = "use it to size seats (fp4forge plan) and check layouts (inspect, doctor); for a checkpoint "
                      "with values, synth without --header-only, or the release itself"});
  for (const auto& n : d->ckpt->notes())
    sink.add(*n.kind, {.message = n.message,
                       .key = n.key,
                       .expected = n.expected,
                       .hint = n.hint,
                       .fix = n.fix.empty() ? std::nullopt : std::optional<std::string>(n.fix)});
  run_checks(ctx, sink);
  // Errors, warnings, info; check order within a severity (the sink's order).
  d->findings = drop_shape_duplicates(sink.take());
  return d;
}

}  // namespace fp4forge::doctor
