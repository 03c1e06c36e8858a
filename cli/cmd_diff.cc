// fp4forge diff A B [--json] [--allow-class-mismatch]: structural comparison (library: verify/diff.h).
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "commands.h"
#include "fp4forge/safetensors/checkpoint.h"
#include "fp4forge/verify/diff.h"
#include "render.h"

namespace fp4forge::cli {

namespace {
struct DiffOpts {
  std::string a, b;
  bool json = false;
  bool all = false;
  DiffOptions lib;
};

int run_diff(const DiffOpts& o) {
  auto asrc = checkpoint_source(o.a, o.json);
  if (!asrc) return report_error(asrc.error(), o.json);
  auto bsrc = checkpoint_source(o.b, o.json);
  if (!bsrc) return report_error(bsrc.error(), o.json);
  auto a = Checkpoint::open(asrc->path);
  if (!a) return report_error(a.error(), o.json);
  auto b = Checkpoint::open(bsrc->path);
  if (!b) return report_error(b.error(), o.json);
  auto rep = diff_checkpoints(*a, *b, o.lib);
  if (!rep) return report_error(rep.error(), o.json);
  // The text report says the mismatch itself (its "!!" line); stderr carries it beside --json, and when stdout is not
  // the terminal (a log, a pipe: issue 55 tryout, exit 3 with nothing on stderr), so a terminal shows it once.
  const bool stdout_is_terminal = ::isatty(STDOUT_FILENO) == 1;
  if ((o.json || !stdout_is_terminal) && rep->refused) error_line(rep->class_message);
  else if (o.json && rep->class_mismatch) warn(rep->class_message);
  if (o.json) {
    auto j = to_json(*rep);
    j["a_hub"] = hf_cache::to_json(asrc->hub);
    j["b_hub"] = hf_cache::to_json(bsrc->hub);
    print_json(with_schema(j, "diff"));
  } else {
    print_report(to_text(*rep, o.all));
    std::fflush(stdout);
  }
  return exit_code(*rep);
}
}  // namespace

void add_diff(CLI::App& sub, Action& action) {
  auto opts = std::make_shared<DiffOpts>();
  sub.add_option("A", opts->a, "first checkpoint (typically the candidate): a folder or a cached repo id ORG/NAME[@REVISION]")
      ->required();
  sub.add_option("B", opts->b, "second checkpoint (typically a known-good control of the same class), folder or repo id")
      ->required();
  sub.add_flag("--json", opts->json, "print the comparison as JSON (schema: docs/cli/diff.md)");
  sub.add_flag("--allow-class-mismatch", opts->lib.allow_class_mismatch,
               "compare even when the architecture classes differ (dense/MoE/hybrid/multimodal, experts)");
  sub.add_flag("--all", opts->all, "list equal tensor families too");
  sub.add_flag("--values", opts->lib.compare_values,
               "also compare every tensor's bytes (two quantizations of different weights are structurally equal)");
  sub.footer(
      "Exit: 0 identical, 1 different, 3 refused (class mismatch) or bad input, 4 I/O.\n"
      "Examples:\n"
      "  fp4forge diff ./new-NVFP4A16 ./known-good-NVFP4A16\n"
      "  fp4forge diff ./q ./source --allow-class-mismatch --json | jq '.families[] | select(.differs)'\n"
      "  fp4forge diff ./q-run1 ./q-run2 --all\n"
      "  fp4forge diff ./q-run1 ./q-run2 --values   # same bytes, not only the same layout");
  sub.callback([&action, opts] { action = [opts] { return run_diff(*opts); }; });
}

}  // namespace fp4forge::cli
