// The argument rules every command shares (validators.h).
#include "validators.h"

#include <cmath>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "fp4forge/util/strings.h"

namespace fp4forge::cli {

const CLI::Validator& non_empty() {
  static const CLI::Validator v(
      [](std::string& s) {
        return s.empty() ? std::string("an empty value; expected a value (an unset shell variable?)") : std::string();
      },
      "", "NON_EMPTY");
  return v;
}

const CLI::Validator& finite() {
  static const CLI::Validator v(
      [](std::string& s) {
        char* end = nullptr;
        const double d = std::strtod(s.c_str(), &end);
        if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(d))
          return fmt::format("'{}' is not a finite number; expected a finite number", util::printable(s, 40));
        return std::string();
      },
      "", "FINITE");
  return v;
}

CLI::Validator in_range(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& s) {
        char* end = nullptr;
        const double d = std::strtod(s.c_str(), &end);
        if (s.empty() || end != s.c_str() + s.size())
          return fmt::format("'{}' is not a number; expected {} to {}", util::printable(s, 40), lo, hi);
        if (!(d >= lo && d <= hi))
          return fmt::format("{} is out of range; expected {} to {}", util::printable(s, 40), lo, hi);
        return std::string();
      },
      fmt::format("in [{} - {}]", lo, hi), "RANGE");
}

void apply_argument_rules(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    if (opt->get_type_size_max() == 0) continue;  // a flag
    // transform() puts a validator first (it leaves the value as it is): ours speak before a Range does.
    const std::string type = opt->get_type_name();
    if (type.substr(0, type.find(':')) == "FLOAT") opt->transform(finite());
    opt->transform(non_empty());
  }
  for (CLI::App* sub : app.get_subcommands({})) apply_argument_rules(*sub);
}

}  // namespace fp4forge::cli
