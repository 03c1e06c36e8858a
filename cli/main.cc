// fp4forge command-line entry point: one command table drives dispatch and help.
#include <algorithm>
#include <array>
#include <csignal>
#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.h"
#include "fp4forge/codec/nvfp4.h"
#include "fp4forge/util/did_you_mean.h"
#include "fp4forge/util/redact.h"
#include "fp4forge/util/strings.h"
#include "render.h"
#include "validators.h"

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
    {"gateway", "show / add / check / swap / rollback / retire LiteLLM aliases", fp4forge::cli::add_gateway},
    {"synth", "write a random-weight checkpoint with a real family layout", fp4forge::cli::add_synth},
    {"selftest", "run every scheme's and observer's built-in golden vectors through every compiled codec path",
     fp4forge::cli::add_selftest},
}};

constexpr const char* kExitCodes =
    "Exit codes: 0 ok, 1 check failed, 2 usage, 3 bad input, 4 I/O, 5 internal.";

/** The first option on the command line that `where` does not have ("" when none): the error, not the positional
 * CLI11 finds missing first (issue 55 tryout: `quantize --bogus` read "src is required"). */
std::string unknown_option(const CLI::App& where, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.size() < 2 || a[0] != '-' || a == "--") continue;
    const std::string name = a.substr(0, a.find('='));
    bool known = false;
    for (const CLI::Option* op : where.get_options()) known |= op->check_name(name);
    if (!known) return name;
  }
  return {};
}

/** " (did you mean 'NAME'?)" for the option whose name starts with `word` (`--api-key` for --api-key-env), else "". */
std::string option_prefix_hint(const std::string& word, const std::vector<std::string>& names) {
  const std::string key = word.substr(0, word.find('='));
  if (key.size() < 5) return {};
  for (const std::string& n : names)
    if (n.size() > key.size() && n.compare(0, key.size(), key) == 0) return fmt::format(" (did you mean '{}'?)", n);
  return {};
}

/** The words CLI11 did not expect, with the value of an option named like a secret masked: never echoed (issue 55
 * tryout F: `--api-key sk-...` printed the key in the error). */
void mask_secret_values(std::vector<std::string>& words) {
  for (std::size_t i = 0; i < words.size(); ++i) {
    std::string& w = words[i];
    if (w.empty() || w[0] != '-') continue;
    if (const auto eq = w.find('='); eq != std::string::npos) {
      if (fp4forge::util::is_secret_name(w.substr(0, eq))) w = w.substr(0, eq + 1) + "***";
    } else if (fp4forge::util::is_secret_name(w) && i + 1 < words.size() && !words[i + 1].empty() &&
               words[i + 1][0] != '-') {
      words[i + 1] = "***";
    }
  }
}

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
  fp4forge::cli::apply_argument_rules(app);  // no empty value, no NaN or infinity, for every option of every command (R4-B13, R4-B22)

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
    CLI::App* where = &app;  // the deepest (sub)command named on the line: its options are the candidates
    for (int i = 1; i < argc; ++i) {
      const std::string_view a = argv[i];
      if (a == "--json") json = true;
      if (cmd.empty()) {
        for (const auto& spec : kCommands)
          if (a == spec.name) {
            cmd = spec.name;
            where = app.get_subcommand(spec.name);
          }
      } else if (where != &app && where->get_parent() == &app) {
        for (CLI::App* s : where->get_subcommands({}))
          if (a == s->get_name()) {
            cmd += " " + s->get_name();
            where = s;
          }
      }
    }
    // A typo gets the nearest name: the first argument CLI11 did not expect, against the options of the command
    // it follows (or the command names).
    std::string hint;
    std::string what = e.what();
    std::vector<std::string> words;
    // A command with subcommands (gateway) says its own missing subcommand: the options belong to those.
    if (where != &app && where->get_subcommands({}).empty() && what.find("is required") != std::string::npos)
      if (std::string name = unknown_option(*where, argc, argv); !name.empty()) {
        what = fmt::format("unknown option '{}'", fp4forge::util::printable(name, 80));
        words.push_back(std::move(name));
      }
    if (!words.empty()) {
    } else if (const auto colon = what.find("not expected: "); colon != std::string::npos) {
      // "... not expected: b a quantise" (CLI11 lists them in reverse): every listed word is a candidate typo,
      // options first.
      const std::string list = what.substr(colon + 14);
      for (std::size_t p = 0; p < list.size();) {
        const std::size_t sp = std::min(list.find(' ', p), list.size());
        words.push_back(list.substr(p, sp - p));
        p = sp + 1;
      }
      // Said in the order typed (issue 55 tryout: "x /path quantise" for `quantise /path x`).
      std::reverse(words.begin(), words.end());
      mask_secret_values(words);
      what = fmt::format("{}{}", what.substr(0, colon + 14), fmt::join(words, " "));
      std::stable_partition(words.begin(), words.end(), [](const std::string& w) { return !w.empty() && w[0] == '-'; });
    } else if (where != &app && !where->get_subcommands({}).empty()) {
      // A command that takes a subcommand (gateway) reports "A subcommand is required" before extras.
      for (int i = 1; i < argc && words.empty(); ++i) {
        const std::string a = argv[i];
        if (a.empty() || a[0] == '-' || cmd.find(a) != std::string::npos) continue;
        words.push_back(a);
        // The word is the subcommand it did not know (it read "A subcommand is required" for `gateway swop`).
        what = fmt::format("unknown '{}' command '{}'", cmd, fp4forge::util::printable(a, 80));
      }
    }
    for (const std::string& word : words) {
      if (!hint.empty()) break;
      if (word.empty()) continue;
      std::vector<std::string> names;
      if (word[0] == '-') {
        for (const CLI::Option* op : where->get_options()) {
          for (const auto& n : op->get_lnames()) names.push_back("--" + n);
          for (const auto& n : op->get_snames()) names.push_back("-" + n);
        }
      } else if (where == &app) {
        for (const auto& spec : kCommands) names.emplace_back(spec.name);
      } else {
        for (CLI::App* s : where->get_subcommands({})) names.push_back(s->get_name());
      }
      hint = fp4forge::util::did_you_mean(word, names);
      if (hint.empty() && word[0] == '-') hint = option_prefix_hint(word, names);
      // A word that is no command and near none: said as one, with the list (it read "The following argument was
      // not expected: foo", issue 55 tryout).
      if (hint.empty() && where == &app && word[0] != '-' && words.size() == 1)
        what = fmt::format("unknown command '{}' (commands: {})", fp4forge::util::printable(word, 80),
                           fmt::join(names, ", "));
    }
    return fp4forge::cli::report_error(
        fp4forge::make_error(fp4forge::Errc::USAGE, "{}{}; run 'fp4forge {}--help'", what, hint,
                             cmd.empty() ? std::string() : cmd + " "),
        json);
  }
  if (help->parsed()) {
    if (help_topic.empty() || help_topic == "help") {  // `help help`: the help is the command list (issue 55)
      fmt::print("{}", app.get_formatter()->make_help(&app, "fp4forge", CLI::AppFormatMode::Normal));
      return 0;
    }
    for (const auto& spec : kCommands) {
      if (help_topic == spec.name) {
        fmt::print("{}", app.get_subcommand(spec.name)->help("fp4forge"));
        return 0;
      }
    }
    std::vector<std::string> names;
    for (const auto& spec : kCommands) names.emplace_back(spec.name);
    fmt::print(stderr, "fp4forge: error: unknown command '{}'{}; run 'fp4forge help' for the list\n",
               fp4forge::util::printable(help_topic, 80), fp4forge::util::did_you_mean(help_topic, names));
    return 2;
  }
  if (!action) {
    // No command: a usage error (help on stderr, exit 2); `fp4forge help` / `--help` print it on stdout, exit 0.
    if (app.get_subcommands().empty()) {
      fmt::print(stderr, "{}", app.help());
      return 2;
    }
    fmt::print("{}", app.help());
    return 0;
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
