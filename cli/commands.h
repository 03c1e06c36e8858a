#pragma once
// The command table: one entry per subcommand. Each cmd_<name>.cc defines add_<name>(), which declares
// the subcommand's options on `sub` (and a footer with examples) and, when the subcommand is selected,
// stores the function to run in `action`. The function returns the process exit code.
#include <functional>

#include <CLI/CLI.hpp>

#include "fp4forge/model/experts.h"

namespace fp4forge::cli {

using Action = std::function<int()>;

struct CommandSpec {
  const char* name;
  const char* summary;
  void (*add)(CLI::App& sub, Action& action);
};

void add_inspect(CLI::App& sub, Action& action);
void add_synth(CLI::App& sub, Action& action);
void add_doctor(CLI::App& sub, Action& action);
void add_quantize(CLI::App& sub, Action& action);
void add_verify(CLI::App& sub, Action& action);
void add_diff(CLI::App& sub, Action& action);
void add_plan(CLI::App& sub, Action& action);
void add_probe(CLI::App& sub, Action& action);
void add_gateway(CLI::App& sub, Action& action);
void add_selftest(CLI::App& sub, Action& action);

/** `--expert-orientation out-in|in-out` (quantize, verify): settles fused experts whose shapes read both
 * ways (model/experts.h); `what` is the option's help text. */
inline void add_expert_orientation(CLI::App& sub, ExpertLayoutOptions& opts, const std::string& what) {
  sub.add_option_function<std::string>(
         "--expert-orientation", [&opts](const std::string& v) { opts.orientation = parse_orientation(v); }, what)
      ->check(CLI::IsMember({"out-in", "in-out"}));
}

}  // namespace fp4forge::cli
