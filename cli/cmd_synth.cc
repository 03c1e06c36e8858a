// fp4forge synth: write a random-weight BF16 checkpoint with a real family layout (library: model/synth.h).
#include <cstdio>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.h"
#include "fp4forge/safetensors/checkpoint.h"
#include "fp4forge/util/fs.h"
#include "fp4forge/util/hf_cache.h"
#include "fp4forge/util/strings.h"
#include "interrupt.h"
#include "fp4forge/model/synth.h"
#include "render.h"

namespace fp4forge::cli {

namespace {
struct SynthOpts {
  std::string arch, size = "tiny", out, config;
  std::uint64_t seed = 0;
  bool force = false, json = false, no_progress = false, header_only = false;
};

/** --config: a config.json file, a checkpoint folder, or a cached repo id (its config.json). */
Result<nlohmann::ordered_json> read_config_arg(const std::string& arg, std::string& source) {
  std::error_code ec;
  std::filesystem::path file = arg;
  // A name ending in .json is the file meant, found or not (issue 55 tryout: "cannot open 'x.json/config.json'").
  const bool named_file = file.extension() == ".json";
  if (!named_file && !std::filesystem::is_regular_file(file, ec)) {
    FP4FORGE_ASSIGN_OR_RETURN(hf_cache::Source src, hf_cache::resolve(arg));
    file = src.path / "config.json";
  }
  source = file.string();
  FP4FORGE_ASSIGN_OR_RETURN(std::string text, fs::read_file(file, 16u << 20));
  return parse_json_bounded(text, source);
}

int run_synth(const SynthOpts& o) {
  SynthOptions so;
  so.arch = o.arch;
  so.size = util::ascii_lower(o.size);  // "8B" is the 8b geometry (issue 55 tryout)
  so.out = o.out;
  so.seed = o.seed;
  so.force = o.force;
  so.header_only = o.header_only;
  if (o.arch.empty() && o.config.empty())
    return report_error(Error{Errc::USAGE, "synth needs --arch (a built-in layout) or --config (a real config's "
                              "geometry); hint: fp4forge synth --arch llama --out DIR", {}, {}}, o.json);
  if (!o.config.empty()) {
    auto cfg = read_config_arg(o.config, so.config_source);
    if (!cfg) return report_error(cfg.error(), o.json);
    so.config = std::move(*cfg);
  }
  // An interrupted synth leaves nothing: not the shard being written, not the folder it created.
  const SynthCleanup cleanup = SynthCleanup::before(o.out);
  InterruptNotice notice(
      [&cleanup, out = o.out](const char* sig) {
        fs::close_write_gate();  // the writers go on until the exit: none may create or rename a file after this
        const std::size_t n = cleanup.clean();
        return fmt::format(
            "interrupted ({}): removed the partial checkpoint ({} file(s)){}; nothing kept", sig, n,
            cleanup.created().empty() ? std::string() : fmt::format(" and the folder {} it created", out));
      },
      o.json);
  const auto bar = progress_bar(o.json, o.no_progress);
  so.progress = bar.get();
  auto rep = synth_checkpoint(so);
  if (!rep) {
    // A failed run (disk full, a write error) leaves nothing either.
    cleanup.clean();
    return report_error(rep.error(), o.json);
  }
  if (o.json) {
    print_json(to_json(*rep));
  } else {
    print_report(to_text(*rep));
  }
  return 0;
}
}  // namespace

void add_synth(CLI::App& sub, Action& action) {
  auto opts = std::make_shared<SynthOpts>();
  const std::string archs = fmt::format("{}", fmt::join(synth_archs(), ", "));
  const std::string sizes = fmt::format("{}", fmt::join(synth_sizes(), ", "));
  const std::string by_rule = fmt::format("{}", fmt::join(synth_rule_families(), ", "));
  sub.add_option("--arch", opts->arch, "family layout: " + archs + " (with --config: read from the config)");
  auto* size = sub.add_option("--size", opts->size, "geometry: " + sizes + " (default tiny; 8b is ~15 GiB)");
  sub.add_option("--config", opts->config,
                 "geometry of a real config.json (file, checkpoint folder or cached repo id): the model at its "
                 "own size, shards of at most 5 GB as transformers writes them")
      ->excludes(size);
  sub.add_flag("--header-only", opts->header_only,
               "write shard headers and sparse (zero) data: a 671B DeepSeek-V3 or 235B Qwen3-MoE layout in "
               "megabytes (the --arch families, and with --config also " + by_rule +
                   "), for inspect, doctor and plan (not for quantize)");
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
      "  fp4forge synth --arch llama --size 8b --out /data/llama8b   # ~15 GiB, streams\n"
      "  fp4forge synth --config Qwen/Qwen3-235B-A22B --header-only --out /tmp/q235   # real geometry, ~MBs\n"
      "Interrupted (Ctrl-C) or failed, synth removes what it wrote: no .partial, no empty folder.");
  sub.callback([&action, opts] { action = [opts] { return run_synth(*opts); }; });
}

}  // namespace fp4forge::cli
