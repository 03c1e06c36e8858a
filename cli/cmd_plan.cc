// PLACEHOLDER: replaced by the 'plan' implementation. Until then the command reports "not built yet".
#include <fmt/format.h>

#include "commands.h"

namespace fp4forge::cli {

void add_plan(CLI::App& sub, Action& action) {
  sub.allow_extras();
  sub.callback([&action] {
    action = [] {
      fmt::print(stderr, "fp4forge: error: 'plan' is not available in this build\n");
      return 5;
    };
  });
}

}  // namespace fp4forge::cli
