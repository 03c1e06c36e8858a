#include "fp4forge/diagnose/diagnose.h"

#include <algorithm>

#include <fmt/format.h>

#include "checks.h"
#include "fp4forge/model/synth.h"

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
  ctx.vllm_minor = opts.vllm_minor;
  ctx.transformers_version = opts.transformers_version;
  FP4FORGE_ASSIGN_OR_RETURN(ctx.tokenizer_dir, tokenizer_source(ctx.dir, opts.tokenizer));
  if (ctx.tensors.empty()) {
    Finding f;
    f.kind = "no-weights";
    f.severity = Severity::INFO;
    f.message = "no *.safetensors in the directory: only config, processor and tokenizer files were checked";
    d->findings.push_back(std::move(f));
  }
  if (header_only_synth(*d->ckpt)) {
    Finding f;
    f.kind = "header-only-weights";
    f.severity = Severity::ERROR;
    f.message = "the shards were written by `synth --header-only` (safetensors metadata fp4forge_synth: header-only): "
                "their tensor data is sparse and reads as zeros, so vLLM would serve a model of zeros and quantize "
                "would write one; the config, shape and file checks below still hold for the layout";
    f.hint = "use it to size seats (fp4forge plan) and check layouts (inspect, doctor); for a checkpoint with values, "
             "synth without --header-only, or the release itself";
    d->findings.push_back(std::move(f));
  }
  for (const auto& n : d->ckpt->notes()) {
    Finding f;
    f.kind = n.kind;
    f.severity = Severity::WARNING;
    f.message = n.message;
    f.key = d->ckpt->index_file().value_or("") + ":metadata.total_size";
    f.expected = std::to_string(d->ckpt->total_tensor_bytes());
    f.hint = "transformers and vLLM do not read this field; a tool that trusts it (a download-size check, a "
             "mirror) is misled";
    f.fix = fmt::format("set metadata.total_size to {}", d->ckpt->total_tensor_bytes());
    d->findings.push_back(std::move(f));
  }
  auto found = run_checks(ctx);
  d->findings.insert(d->findings.end(), found.begin(), found.end());
  // Stable order: errors, warnings, info; check order within a severity.
  std::stable_sort(d->findings.begin(), d->findings.end(),
                   [](const Finding& a, const Finding& b) { return a.severity < b.severity; });
  return d;
}

}  // namespace fp4forge::doctor
