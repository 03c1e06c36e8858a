// PLACEHOLDER: replaced by the 'verify' implementation. Until then the command reports "not built yet".
#include <fmt/format.h>

#include "commands.h"

namespace fp4forge::cli {

void add_verify(CLI::App& sub, Action& action) {
  sub.allow_extras();
  sub.callback([&action] {
    action = [] {
      fmt::print(stderr, "fp4forge: error: 'verify' is not available in this build\n");
      return 5;
    };
  });
}

}  // namespace fp4forge::cli
