// fp4forge inspect DIR [--json]: what is this checkpoint (library: model/inspect.h).
#include <cstdio>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "commands.h"
#include "fp4forge/safetensors/checkpoint.h"
#include "fp4forge/model/inspect.h"
#include "render.h"

namespace fp4forge::cli {

namespace {
struct InspectOpts {
  std::string dir;
  bool json = false;
  bool families = false;
};

int run_inspect(const InspectOpts& o) {
  if (o.families) {
    if (o.json)
      print_json(with_schema(families_json(), "families"));
    else
      print_report(families_text());
    return 0;
  }
  if (o.dir.empty())
    return report_error(make_error(Errc::USAGE, "missing DIR; give a checkpoint directory (or --families)"), o.json);
  auto src = checkpoint_source(o.dir, o.json);
  if (!src) return report_error(src.error(), o.json);
  CheckpointOptions copts;
  copts.require_config = false;  // inspect still reports roles by name (and warns) without config.json
  auto ckpt = Checkpoint::open(src->path, copts);
  if (!ckpt) return report_error(ckpt.error(), o.json);
  auto rep = inspect_checkpoint(*ckpt);
  if (!rep) return report_error(rep.error(), o.json);
  if (o.json) {
    auto j = to_json(*rep);
    j["hub"] = hf_cache::to_json(src->hub);
    print_json(j);
  } else {
    print_report(to_text(*rep));
    std::fflush(stdout);
  }
  return 0;
}
}  // namespace

void add_inspect(CLI::App& sub, Action& action) {
  auto opts = std::make_shared<InspectOpts>();
  sub.add_option("dir", opts->dir,
                 "checkpoint directory (config.json + safetensors shards), or a Hugging Face repo id "
                 "ORG/NAME[@REVISION] read from the local cache");
  sub.add_flag("--families", opts->families, "list the families of the architecture registry and exit");
  sub.add_flag("--json", opts->json, "print the report as JSON (schema: docs/cli/inspect.md)");
  sub.footer(
      "Examples:\n"
      "  fp4forge inspect ./gemma-4-26B-A4B-it\n"
      "  fp4forge inspect ./Qwen3.5-27B --json | jq .roles\n"
      "  fp4forge inspect Qwen/Qwen3-8B            # the snapshot in the Hugging Face cache (offline)\n"
      "  fp4forge inspect --families\n"
      "  fp4forge synth --arch llama --size tiny --out /tmp/l && fp4forge inspect /tmp/l");
  sub.callback([&action, opts] { action = [opts] { return run_inspect(*opts); }; });
}

}  // namespace fp4forge::cli
