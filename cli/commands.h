#pragma once
// The command table: one entry per subcommand. Each cmd_<name>.cc defines add_<name>(), which declares
// the subcommand's options on `sub` (and a footer with examples) and, when the subcommand is selected,
// stores the function to run in `action`. The function returns the process exit code.
#include <functional>

#include <CLI/CLI.hpp>

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

}  // namespace fp4forge::cli
