// verify's entry points (verify.h); the checks live in the rooms listed in verify/internal.h.
#include "verify/internal.h"

#include <algorithm>

#include "fp4forge/model/serving_files.h"

namespace fp4forge {

using namespace verify_internal;

std::vector<Finding> verify_structure(const Checkpoint& q, const ModelInfo& info) {
  VerifyStats st;
  return verify_structure(q, info, VerifyOptions{}, &st);
}

std::vector<Finding> verify_structure(const Checkpoint& q, const ModelInfo& info, const VerifyOptions& opts,
                                      VerifyStats* stats) {
  VerifyStats local;
  VerifyStats& st = stats ? *stats : local;
  Structure s;
  FindingSink sink(opts.max_listed);
  run_structure(q, info, opts, s, sink, st);
  return sink.take();
}

Result<VerifyReport> verify_checkpoint(const Checkpoint& q, const Checkpoint* against, const VerifyOptions& opts) {
  FP4FORGE_ASSIGN_OR_RETURN(ModelInfo info, read_checkpoint_info(q));
  FP4FORGE_ASSIGN_OR_RETURN(const std::filesystem::path tokenizer_dir, tokenizer_source(q.dir(), opts.tokenizer));
  VerifyReport rep;
  rep.qdir = q.dir().string();
  rep.strict = opts.strict;
  rep.values_scanned = opts.scan_values;
  if (against) rep.against = against->dir().string();
  Structure s;
  FindingSink sink(opts.max_listed);
  for (const auto* ck : {&q, against})
    if (ck)
      for (const auto& n : ck->notes())
        sink.add(*n.kind, {.group = ck == &q ? "q" : "source",
                           .message = n.message,
                           .key = n.key,
                           .expected = n.expected,
                           .hint = n.fix.empty() ? n.hint : n.hint + "; 'fp4forge doctor --fix' rewrites it"});
  s.source_given = against != nullptr;
  run_structure(q, info, opts, s, sink, rep.stats);
  if (against) {
    // A source of another model first, loudly (as diff does): every comparison after it would be noise.
    FP4FORGE_ASSIGN_OR_RETURN(ModelInfo src_info, read_checkpoint_info(*against));
    const ArchClass qc = classify_arch(q, info), sc = classify_arch(*against, src_info);
    std::vector<std::string> diffs;
    if (info.family != src_info.family)
      diffs.push_back(fmt::format("family {} vs {}", family_name(info.family), family_name(src_info.family)));
    if (!(qc == sc)) diffs.push_back(fmt::format("class {} vs {}", qc.describe(), sc.describe()));
    if (info.hidden_size != src_info.hidden_size)
      diffs.push_back(fmt::format("hidden_size {} vs {}", info.hidden_size, src_info.hidden_size));
    if (info.num_layers != src_info.num_layers)
      diffs.push_back(fmt::format("num_hidden_layers {} vs {}", info.num_layers, src_info.num_layers));
    if (s.unquantized && find_quant_config(against->config()) != nullptr) {
      // verify SRC --against OUT: the two folders the wrong way round (it said "source is already quantized").
      sink.add(
          finding_kind("against-swapped"),
          {.group = "against",
           .message = fmt::format("the arguments look swapped: {} is not quantized and --against {} is; nothing was "
                                  "compared",
                                  q.dir().string(), against->dir().string()),
           .expected = "a quantized checkpoint, --against its unquantized source",
           .actual = "the reverse",
           .hint = fmt::format("fp4forge verify {} --against {}", against->dir().string(), q.dir().string())});
    } else if (!diffs.empty()) {
      sink.add(finding_kind("against-other-model"),
               {.group = "against",
                .message = fmt::format("--against is not the model this checkpoint was quantized from: {}; nothing was "
                                       "compared",
                                       fmt::join(diffs, ", ")),
                .expected = "the same model (family, class, hidden_size, layers)",
                .actual = fmt::format("{}", fmt::join(diffs, ", ")),
                .hint = "pass the unquantized checkpoint this one was made from"});
    } else {
      FP4FORGE_ASSIGN_OR_RETURN(std::optional<Fp8Source> fp8, read_fp8_source(*against));
      if (fp8) rep.against_format = fp8_source_json(*fp8);
      compare_against(q, *against, fp8 ? &*fp8 : nullptr, info, s, opts, sink, rep.stats);
    }
  }
  // A file truncated or rewritten while it was read gives zeros or mixed data: no verdict on that.
  FP4FORGE_TRY(q.check_unchanged());
  if (against) FP4FORGE_TRY(against->check_unchanged());
  // Servable means servable: the tokenizer and chat template vLLM reads beside the weights, as doctor checks them.
  check_serving_files(tokenizer_dir, opts.tokenizer, sink, nullptr, "verify");
  rep.findings = sink.take();
  return rep;
}

}  // namespace fp4forge
