// fp4forge doctor DIR [--fix] [--dry-run] [--mtp-from SRC] [--json]: config defects vs tensors, processor
// and tokenizer files; safe fixes with backups (library: doctor/doctor.h, quantize/mtp_splice.h).
#include <cstdio>
#include <string_view>
#include <cctype>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "commands.h"
#include "fp4forge/doctor/doctor.h"
#include "fp4forge/kvplan/vllm_version.h"
#include "fp4forge/util/strings.h"
#include "render.h"

namespace fp4forge::cli {

namespace {
struct DoctorOpts {
  std::string dir;
  std::string mtp_from;  ///< a checkpoint folder, taken like `dir`
  std::string tokenizer;  ///< vllm serve --tokenizer: a folder or a repo id
  bool fix = false;
  bool dry_run = false;
  bool json = false;
  bool strict = false;
  std::vector<std::string> allow;  ///< --allow KIND: warnings of these kinds do not fail --strict
  std::string vllm_version;        ///< --vllm-version: the release the checkpoint will be served on
  std::string transformers_version;  ///< --transformers-version: the transformers vLLM will read the config with
};

/** --transformers-version MAJOR.MINOR[.PATCH] (a leading 'v' allowed) as MAJOR * 1000 + MINOR; -1 when not given. */
Result<int> transformers_version_of(const std::string& v) {
  if (v.empty()) return -1;
  std::string_view t = v;
  if (t.front() == 'v' || t.front() == 'V') t.remove_prefix(1);
  int major = -1, minor = -1;
  const std::size_t dot = t.find('.');
  const auto number = [](std::string_view x) {
    return !x.empty() && x.size() <= 3 && x.find_first_not_of("0123456789") == std::string_view::npos
               ? std::stoi(std::string(x))
               : -1;
  };
  if (dot != std::string_view::npos) {
    major = number(t.substr(0, dot));
    std::string_view rest = t.substr(dot + 1);
    const std::size_t dot2 = rest.find('.');
    minor = number(rest.substr(0, dot2));
    if (dot2 != std::string_view::npos && number(rest.substr(dot2 + 1)) < 0) minor = -1;
  }
  if (major < 1 || minor < 0)
    return make_error(Errc::USAGE, "--transformers-version '{}': expected a transformers release MAJOR.MINOR or "
                      "MAJOR.MINOR.PATCH, e.g. 5.14 or 4.57.1", util::printable(v, 40));
  return major * 1000 + minor;
}

/** --vllm-version as the minor of vLLM 0.MINOR[.PATCH] (a leading 'v' allowed): the typed option the library takes. */
Result<int> vllm_minor_of(const std::string& v) {
  if (v.empty()) return -1;
  std::string_view t = v;
  if (t.front() == 'v' || t.front() == 'V') t.remove_prefix(1);
  int minor = -1;
  if (t.substr(0, 2) == "0.") {
    t.remove_prefix(2);
    std::size_t n = 0;
    while (n < t.size() && n < 4 && std::isdigit(static_cast<unsigned char>(t[n])) != 0) ++n;
    const bool rest_ok = n == t.size() || (t[n] == '.' && t.size() > n + 1 &&
                                           t.find_first_not_of("0123456789", n + 1) == std::string_view::npos);
    if (n > 0 && rest_ok) minor = std::stoi(std::string(t.substr(0, n)));
  }
  if (minor < 0)
    return make_error(Errc::USAGE, "--vllm-version '{}': expected a vLLM release 0.MINOR or 0.MINOR.PATCH, e.g. 0.26 "
                      "or v0.26.1", util::printable(v, 40));
  return minor;
}

int run_doctor_cmd(const DoctorOpts& o) {
  doctor::DoctorOptions opts;
  opts.fix = o.fix;
  opts.dry_run = o.dry_run;
  opts.tokenizer = o.tokenizer;
  opts.strict = o.strict;
  auto minor = vllm_minor_of(o.vllm_version);
  if (!minor) return report_error(minor.error(), o.json);
  opts.vllm_minor = *minor;
  // A release newer than any fp4forge has read is checked as the newest it has (plan refuses to guess its memory
  // rules; doctor's rules are "registered from": issue 55 tryout F, 0.40 passed without a word).
  if (const int newest = kvplan::newest_vllm_rules().minor; *minor > newest)
    note(
        fmt::format("--vllm-version {}: newer than the newest vLLM fp4forge has read (0.{}): doctor checks what must "
                    "be registered by then and takes a newer release to keep it (plan models 0.{} at most)",
                    util::printable(o.vllm_version, 40), newest, newest));
  auto tv = transformers_version_of(o.transformers_version);
  if (!tv) return report_error(tv.error(), o.json);
  opts.transformers_version = *tv;
  auto src = checkpoint_source(o.dir, o.json);
  if (!src) return report_error(src.error(), o.json);
  if (!o.mtp_from.empty()) {  // a folder or a repo id in the Hugging Face cache, like DIR
    auto from = checkpoint_source(o.mtp_from, o.json);
    if (!from) return report_error(from.error(), o.json);
    opts.mtp_from = from->path.string();
  }
  auto rep = doctor::run_doctor(src->path, opts);
  if (!rep) return report_error(rep.error(), o.json);
  (void)allow_warnings(rep->findings, o.allow);  // the first pass, as the report shows it
  for (const std::string& n : allow_warnings(rep->remaining, o.allow)) note(n);
  if (o.json) {
    auto j = doctor::to_json(*rep);
    j["hub"] = hf_cache::to_json(src->hub);
    print_json(with_schema(j, "doctor"));
  } else {
    print_report(doctor::to_text(*rep));
    std::fflush(stdout);
  }
  return doctor::exit_code(*rep);
}
}  // namespace

void add_doctor(CLI::App& sub, Action& action) {
  auto opts = std::make_shared<DoctorOpts>();
  sub.add_option("dir", opts->dir,
                 "checkpoint directory (config.json, safetensors, processor/tokenizer files), or a repo id "
                 "ORG/NAME[@REVISION] in the Hugging Face cache (checked only: --fix never writes into the cache)")
      ->required();
  sub.add_flag("--fix", opts->fix,
               "apply the automatic fixes (JSON files, and with --mtp-from one new MTP shard; each edited file "
               "backed up as FILE.bak-fp4forge-<time>)");
  sub.add_flag("--dry-run", opts->dry_run, "show the fixes as unified diffs without writing anything");
  sub.add_option("--mtp-from", opts->mtp_from,
                 "with --fix: copy the MTP tensors a re-save dropped (mtp.* / DeepSeek-GLM extra layers) from "
                 "this checkpoint folder, the original release, into DIR: unquantized, in a new "
                 "model-mtp.safetensors, index and ignore updated");
  sub.add_option("--tokenizer", opts->tokenizer,
                 "where vLLM will load the tokenizer and chat template from, as vllm serve --tokenizer takes it (a "
                 "folder, or ORG/NAME read from the Hugging Face cache); default: DIR itself, vLLM's default");
  sub.add_flag("--json", opts->json, "print the report as JSON (schema: docs/cli/doctor.md)");
  sub.add_flag("--strict", opts->strict, "a remaining warning fails too (exit 1), for CI gates");
  sub.add_option("--vllm-version", opts->vllm_version,
                 "the vLLM release the checkpoint will be served on (0.MINOR[.PATCH]): what that release cannot build "
                 "is an error, and --fix writes what makes it build (e.g. Gemma-4's flat global keys)");
  sub.add_option("--transformers-version", opts->transformers_version,
                 "the transformers release vLLM will read the config with (MAJOR.MINOR[.PATCH]): a config form it "
                 "cannot read is an error, and --fix writes what it reads (Gemma-4's flat global keys below 5.15)");
  sub.add_option("--allow", opts->allow,
                 "a warning kind this run accepts (repeatable): reported as info, so --strict passes it; an error is "
                 "never allowed");
  sub.footer(
      "Exit: 0 no error-severity finding remains (after fixes; with --strict no warning either), 1 errors\n"
      "remain, 2 usage, 3 bad input (also every --mtp-from refusal), 4 I/O.\n"
      "Examples:\n"
      "  fp4forge doctor ./gemma-4-31B-it\n"
      "  fp4forge doctor ./gemma-4-31B-it --dry-run        # what --fix would change, as diffs\n"
      "  fp4forge doctor ./my-finetune --tokenizer google/gemma-4-31B-it   # served with vllm --tokenizer\n"
      "  fp4forge doctor ./Qwen3.5-27B-NVFP4A16 --fix --json | jq '.remaining[].kind'\n"
      "  fp4forge doctor ./Qwen3.5-27B-NVFP4A16 --fix --mtp-from ./Qwen3.5-27B   # MTP back from the release");
  sub.callback([&action, opts] { action = [opts] { return run_doctor_cmd(*opts); }; });
}

}  // namespace fp4forge::cli
