// fp4forge command-line entry point: one command table drives dispatch and help.
#include <array>
#include <csignal>
#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "commands.h"
#include "fp4forge/codec/nvfp4.h"
#include "render.h"

namespace {

using fp4forge::cli::CommandSpec;

constexpr std::array<CommandSpec, 10> kCommands{{
    {"inspect", "what is this checkpoint: family, class, roles, sizes", fp4forge::cli::add_inspect},
    {"doctor", "check config vs tensors, processor and tokenizer files; --fix with backups",
     fp4forge::cli::add_doctor},
    {"quantize", "streaming quantization to compressed-tensors: NVFP4A16 (default), MXFP4A16, FP8, W4A16",
     fp4forge::cli::add_quantize},
    {"verify", "prove a quantized checkpoint (structure, policy, values, error vs source)",
     fp4forge::cli::add_verify},
    {"diff", "compare two checkpoints of the same architecture class", fp4forge::cli::add_diff},
    {"plan", "vLLM KV-cache sizing and GPU placement, without a GPU", fp4forge::cli::add_plan},
    {"probe", "prove a served OpenAI-compatible endpoint", fp4forge::cli::add_probe},
    {"gateway", "show / swap / rollback / retire LiteLLM aliases", fp4forge::cli::add_gateway},
    {"synth", "write a random-weight checkpoint with a real family layout", fp4forge::cli::add_synth},
    {"selftest", "run every scheme's and observer's built-in golden vectors through every compiled codec path",
     fp4forge::cli::add_selftest},
}};

constexpr const char* kExitCodes =
    "Exit codes: 0 ok, 1 check failed, 2 usage, 3 bad input, 4 I/O, 5 internal.";

int run(int argc, char** argv) {
  CLI::App app{"fp4forge " FP4FORGE_VERSION
               " — make Hugging Face checkpoints ready to serve on vLLM as NVFP4A16 (or MXFP4A16, FP8, W4A16), "
               "and prove them.",
               "fp4forge"};
  // The version, the commit it was configured from, the build type and the codec path this CPU runs.
  app.set_version_flag("--version", std::string("fp4forge ") + FP4FORGE_VERSION + " (commit " FP4FORGE_COMMIT
                                        ", " FP4FORGE_BUILD_TYPE " build, codec path " +
                                        fp4forge::nvfp4::best_path() + ")");
  app.footer(std::string("Run 'fp4forge <command> --help' for a command's options and examples.\n") +
             kExitCodes);
  app.require_subcommand(0, 1);

  fp4forge::cli::Action action;
  for (const auto& spec : kCommands) {
    CLI::App* sub = app.add_subcommand(spec.name, spec.summary);
    spec.add(*sub, action);
  }
  std::string help_topic;
  CLI::App* help = app.add_subcommand("help", "show help for fp4forge or one command");
  help->add_option("command", help_topic, "command to describe");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // Parse errors follow the documented error format like every other error: one line
    // `fp4forge: error: ...` on stderr and, with --json, the error object on stdout; exit 2.
    std::string cmd;
    bool json = false;
    for (int i = 1; i < argc; ++i) {
      const std::string_view a = argv[i];
      if (a == "--json") json = true;
      if (cmd.empty())
        for (const auto& spec : kCommands)
          if (a == spec.name) cmd = spec.name;
    }
    return fp4forge::cli::report_error(
        fp4forge::make_error(fp4forge::Errc::USAGE, "{}; run 'fp4forge {}--help'", e.what(),
                             cmd.empty() ? std::string() : cmd + " "),
        json);
  }
  if (help->parsed()) {
    if (help_topic.empty()) {
      fmt::print("{}", app.get_formatter()->make_help(&app, "fp4forge", CLI::AppFormatMode::Normal));
      return 0;
    }
    for (const auto& spec : kCommands) {
      if (help_topic == spec.name) {
        fmt::print("{}", app.get_subcommand(spec.name)->help("fp4forge"));
        return 0;
      }
    }
    fmt::print(stderr, "fp4forge: error: unknown command '{}'; run 'fp4forge help' for the list\n",
               help_topic);
    return 2;
  }
  if (!action) {
    fmt::print("{}", app.help());
    return app.get_subcommands().empty() ? 2 : 0;
  }
  return action();
}

}  // namespace

int main(int argc, char** argv) {
  // Over `ulimit -f`, a write fails with EFBIG (exit 4, staging removed) instead of SIGXFSZ killing
  // the process and leaving its staging folder behind.
  std::signal(SIGXFSZ, SIG_IGN);
  try {
    return run(argc, argv);
  } catch (const std::bad_alloc&) {
    std::fputs("fp4forge: error: out of memory\n", stderr);
    return 5;
  } catch (const std::exception& e) {
    fmt::print(stderr, "fp4forge: internal error: {}\n", e.what());
    return 5;
  }
}
