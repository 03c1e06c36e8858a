// fp4forge synth: write a random-weight BF16 checkpoint with a real family layout (library: model/synth.h).
#include <cstdio>
#include <memory>
#include <string>

#include <fmt/format.h>

#include "commands.h"
#include "fp4forge/model/synth.h"
#include "render.h"

namespace fp4forge::cli {

namespace {
struct SynthOpts {
  std::string arch, size = "tiny", out;
  std::uint64_t seed = 0;
  bool force = false, json = false, no_progress = false;
};

int run_synth(const SynthOpts& o) {
  SynthOptions so;
  so.arch = o.arch;
  so.size = o.size;
  so.out = o.out;
  so.seed = o.seed;
  so.force = o.force;
  const auto bar = progress_bar(o.json, o.no_progress);
  so.progress = bar.get();
  auto rep = synth_checkpoint(so);
  if (!rep) return report_error(rep.error(), o.json);
  if (o.json) {
    print_json(to_json(*rep));
  } else {
    fmt::print("{}", to_text(*rep));
    std::fflush(stdout);
  }
  return 0;
}
}  // namespace

void add_synth(CLI::App& sub, Action& action) {
  auto opts = std::make_shared<SynthOpts>();
  std::string archs, sizes;
  for (auto a : synth_archs()) archs += (archs.empty() ? "" : ", ") + std::string(a);
  for (auto s : synth_sizes()) sizes += (sizes.empty() ? "" : ", ") + std::string(s);
  sub.add_option("--arch", opts->arch, "family layout: " + archs)->required();
  sub.add_option("--size", opts->size, "geometry: " + sizes + " (default tiny; 8b is ~16 GB)");
  sub.add_option("--out", opts->out, "output directory (must not exist or be empty, unless --force)")
      ->required();
  sub.add_option("--seed", opts->seed, "random seed (same seed, same bytes)");
  sub.add_flag("--force", opts->force, "write into a non-empty directory, replacing its checkpoint files");
  sub.add_flag("--no-progress", opts->no_progress, "never draw the progress bar");
  sub.add_flag("--json", opts->json, "print the result as JSON (schema: docs/cli/synth.md)");
  sub.footer(
      "Examples:\n"
      "  fp4forge synth --arch gemma4-moe --size tiny --out /tmp/g4moe --seed 7\n"
      "  fp4forge synth --arch qwen3_5-dense --size small --out /tmp/q35 --json\n"
      "  fp4forge synth --arch llama --size 8b --out /data/llama8b   # ~16 GB, streams");
  sub.callback([&action, opts] { action = [opts] { return run_synth(*opts); }; });
}

}  // namespace fp4forge::cli
