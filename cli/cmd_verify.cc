// fp4forge verify QDIR [--against SRC] [--json]: prove a quantized checkpoint (library: verify/verify.h).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "commands.h"
#include "validators.h"
#include "fp4forge/diagnose/diagnose.h"
#include "fp4forge/safetensors/checkpoint.h"
#include "fp4forge/util/fs.h"
#include "fp4forge/verify/quality.h"
#include "fp4forge/verify/verify.h"
#include "fp4forge/util/thread_pool.h"
#include "render.h"

namespace fp4forge::cli {

namespace {
struct VerifyOpts {
  std::string qdir;
  std::string against;
  bool json = false;
  bool no_values = false;
  bool strict = false;
  std::vector<std::string> allow;  ///< --allow KIND: warnings of these kinds do not fail --strict
  bool no_progress = false;
  std::string svg;
  VerifyOptions lib;
};

/** The findings of the checks only doctor runs (config values, architecture, processor and tokenizer files; the kinds
 * docs/cli/verify.md does not list), added to verify's: the two commands never disagree about a folder (issue 55
 * tryout K: doctor warned about an architecture class, verify said OK). Errors first, the order kept within. */
Status add_doctor_findings(const std::filesystem::path& dir, const std::string& tokenizer, VerifyReport& rep) {
  doctor::DiagnoseOptions dopts;
  dopts.tokenizer = tokenizer;
  dopts.skip_structure = true;
  FP4FORGE_ASSIGN_OR_RETURN(std::unique_ptr<doctor::Diagnosis> d, doctor::diagnose(dir, dopts));
  bool added = false;
  for (Finding& f : d->findings) {
    const FindingKind* k = find_finding_kind(f.kind);
    if (k != nullptr && (k->commands & kInVerify) != 0) continue;  // verify's own kind: verify reported it
    f.fix.reset();                                                 // doctor --fix's repairs are doctor's to offer
    rep.findings.push_back(std::move(f));
    added = true;
  }
  if (added)
    std::stable_sort(rep.findings.begin(), rep.findings.end(),
                     [](const Finding& a, const Finding& b) { return a.severity < b.severity; });
  return {};
}

int run_verify(const VerifyOpts& o) {
  if (!o.svg.empty() && o.against.empty())
    return report_error(make_error(Errc::USAGE, "--svg draws the quality report of --against; give --against SRC"), o.json);
  if (!o.svg.empty())  // before the comparison, so that a path it cannot write does not lose the work (issue 55)
    if (Status st = fs::check_user_file(o.svg); !st) return report_error(st.error(), o.json);
  auto qsrc = checkpoint_source(o.qdir, o.json);
  if (!qsrc) return report_error(qsrc.error(), o.json);
  auto q = Checkpoint::open(qsrc->path);
  if (!q) return report_error(q.error(), o.json);
  std::optional<Checkpoint> src;
  std::optional<hf_cache::HubSnapshot> against_hub;
  if (!o.against.empty()) {
    auto asrc = checkpoint_source(o.against, o.json);
    if (!asrc) return report_error(asrc.error(), o.json);
    against_hub = asrc->hub;
    auto s = Checkpoint::open(asrc->path);
    if (!s) return report_error(s.error(), o.json);
    src.emplace(std::move(s).value());
  }
  VerifyOptions lib = o.lib;
  lib.scan_values = !o.no_values;
  lib.strict = o.strict;
  const auto bar = progress_bar(o.json, o.no_progress);
  lib.progress = bar.get();
  auto rep = verify_checkpoint(*q, src ? &*src : nullptr, lib);
  if (!rep) return report_error(rep.error(), o.json);
  if (Status st = add_doctor_findings(qsrc->path, o.lib.tokenizer, *rep); !st) return report_error(st.error(), o.json);
  for (const std::string& n : allow_warnings(rep->findings, o.allow)) note(n);
  if (!o.svg.empty())  // the quality report as strips per module kind (verify/quality.h)
    if (Status st = fs::write_user_file(o.svg, to_svg(quality_report(rep->stats))); !st)
      return report_error(st.error(), o.json);
  if (o.json) {
    auto j = to_json(*rep);
    j["hub"] = hf_cache::to_json(qsrc->hub);
    j["against_hub"] = hf_cache::to_json(against_hub);
    j["svg"] = o.svg.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(o.svg);
    print_json(with_schema(j, "verify"));
  } else {
    print_report(to_text(*rep));
    if (!o.svg.empty()) fmt::print("wrote {}\n", o.svg);
    std::fflush(stdout);
  }
  return exit_code(*rep);
}
}  // namespace

void add_verify(CLI::App& sub, Action& action) {
  auto opts = std::make_shared<VerifyOpts>();
  sub.add_option("QDIR", opts->qdir,
                 "quantized checkpoint directory (compressed-tensors NVFP4A16, MXFP4A16, FP8_DYNAMIC, FP8_BLOCK or "
                 "W4A16), or a repo id ORG/NAME[@REVISION] in the Hugging Face cache")
      ->required();
  sub.add_option("--against", opts->against,
                 "the unquantized source checkpoint (a folder or a cached repo id): dequantize and compare every "
                 "tensor, re-encode and byte-compare, bit-compare kept ones");
  sub.add_option("--tokenizer", opts->lib.tokenizer,
                 "where vLLM will load the tokenizer and chat template from, as vllm serve --tokenizer takes it (a "
                 "folder or a repo id in the Hugging Face cache); default: QDIR itself");
  sub.add_flag("--json", opts->json, "print the report as JSON (schema: docs/cli/verify.md)");
  sub.add_flag("--strict", opts->strict, "a warning fails too (exit 1), for CI gates");
  sub.add_option("--allow", opts->allow,
                 "a warning kind this run accepts (repeatable): reported as info, so --strict passes it (e.g. a "
                 "recipe output's quant-config-multi-group); an error is never allowed");
  sub.add_flag("--no-progress", opts->no_progress, "no progress bar for --against (drawn on a terminal)");
  sub.add_option("--outlier-factor", opts->lib.outlier_factor,
                 "error-outlier when a tensor's relative RMS error exceeds this many times the reference "
                 "encoding's")
      ->default_val(2.0)
      ->check(CLI::PositiveNumber);
  add_expert_orientation(sub, opts->lib.experts,
                         "with --against: how the source's fused 3-D experts are stored when their shapes "
                         "read both ways (out-in | in-out)");
  sub.add_option(
         "-j,--jobs", opts->lib.jobs,
         "--against: worker threads for the observer's search and the re-encode (default and 0: all cores, twice that "
         "with a searched observer)")
      ->check(in_range(0u, ThreadPool::kMaxThreads));
  sub.add_option("--svg", opts->svg,
                 "FILE: with --against, draw the quality report (error per module kind and layer, error vs min-max, legend)");
  sub.add_option("--worst", opts->lib.worst_n, "tensors listed as worst by error")->default_val(10);
  sub.add_option(
         "--reencode-rows", opts->lib.reencode_rows,
         "NVFP4A16 with a global scale not the observer's: rows per tensor re-encoded by the scalar reference codec "
         "(with the observer's own, every row is compared; 0: both off); other schemes re-encode every row")
      ->default_val(32);
  sub.add_flag("--no-values", opts->no_values,
               "skip the value scans (scale NaN bytes, global scales, NaN/Inf in kept tensors)");
  sub.footer(
      "Exit: 0 clean, 1 any error finding, 3 bad input, 4 I/O. Kind ids: docs/cli/verify.md.\n"
      "Examples:\n"
      "  fp4forge verify ./gemma-4-26B-A4B-NVFP4A16\n"
      "  fp4forge verify ./q --against ./gemma-4-26B-A4B-it\n"
      "  fp4forge verify ./third-party-nvfp4 --json | jq '.findings[] | select(.severity==\"error\")'");
  sub.callback([&action, opts] { action = [opts] { return run_verify(*opts); }; });
}

}  // namespace fp4forge::cli
