#include "fp4forge/quantize/run.h"

#include <utility>

#include "fp4forge/model/synth.h"
#include "quantize/run_checked.h"

// `fp4forge quantize` from end to end (quantize/run.h's quantize()): options, destination, preflight, MTP proof,
// plan, then the runner (quantize/run.cc) with the serving files and the splice written before the commit.
namespace fp4forge::quant {

Result<QuantizeResult> quantize(const QuantizeParams& p) {
  FP4FORGE_TRY(check_run_options(p.run));  // a dry run refuses what the real run would
  if (!p.dry_run && p.dst.empty())
    return make_error(Errc::USAGE, "missing DST; give an output directory (or use --dry-run)");
  if (!p.dst.empty()) FP4FORGE_TRY(check_destination(p.src, p.dst));
  QuantizeResult out;
  // Preflight (issue 51): doctor's checks on SRC before any work; nothing is written when they find an error.
  FP4FORGE_ASSIGN_OR_RETURN(out.preflight, preflight(p.src, p.preflight));
  if (p.on_preflight) p.on_preflight(out.preflight);
  if (out.preflight.refused()) return refusal(out.preflight);
  RunOptions run = p.run;
  if (!out.preflight.serving.empty())  // the output's serving files, written with the rest before the rename
    run.before_commit = [&out, then = run.before_commit](const std::filesystem::path& staging) -> Status {
      FP4FORGE_TRY(write_serving_files(out.preflight, staging));
      return then ? then(staging) : Status{};
    };
  if (!p.mtp_from.empty()) {
    // Proven against SRC before any work (every refusal), then done on the staging folder before the commit
    // rename, so DST appears with its MTP or not at all.
    MtpSpliceOptions pre;
    pre.dry_run = true;
    FP4FORGE_ASSIGN_OR_RETURN(MtpSpliceReport proof, splice_mtp(p.src, p.mtp_from, pre));
    if (p.dry_run) out.mtp_splice = std::move(proof);
    run.before_commit = [&p, &out, then = run.before_commit](const std::filesystem::path& staging) -> Status {
      MtpSpliceOptions so;
      so.owned_target = true;
      FP4FORGE_ASSIGN_OR_RETURN(MtpSpliceReport done, splice_mtp(staging, p.mtp_from, so));
      done.target = p.dst.string();
      out.mtp_splice = std::move(done);
      return then ? then(staging) : Status{};
    };
  }
  FP4FORGE_ASSIGN_OR_RETURN(Checkpoint ck, Checkpoint::open(p.src));
  if (header_only_synth(ck))  // refused with --no-preflight too: the output would be a model of zeros
    return make_error(Errc::BAD_INPUT, "'{}' was written by `synth --header-only`: its tensor data reads as zeros, and "
                      "quantizing it would write a model of zeros; expected a checkpoint with values; hint: synth "
                      "without --header-only, or the release itself (a header-only checkpoint is for plan, inspect "
                      "and doctor)", p.src.string());
  PlanOptions plan_opts = p.plan;
  plan_opts.mtp_spliced = !p.mtp_from.empty();
  FP4FORGE_ASSIGN_OR_RETURN(out.plan, make_plan(ck, plan_opts));
  if (p.on_plan) p.on_plan(out.plan);
  if (p.dry_run) return out;
  FP4FORGE_ASSIGN_OR_RETURN(RunSummary sum, detail::run_checked(ck, out.plan, p.dst, run));
  out.summary = std::move(sum);
  return out;
}

}  // namespace fp4forge::quant
