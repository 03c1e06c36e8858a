#include "fp4forge/util/yaml_scalar.h"

#include "fp4forge/util/strings.h"

namespace fp4forge::util {

bool yaml_plain_safe(std::string_view s) noexcept {
  if (s.empty()) return false;  // an empty plain scalar is null
  const auto letter = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  // A leading digit, sign or dot can start a number, a date or .inf/.nan; any other mark is YAML syntax.
  if (!(letter(s.front()) || s.front() == '_' || s.front() == '/')) return false;
  for (char c : s)
    if (!(letter(c) || digit(c) || std::string_view("_./@+-:").find(c) != std::string_view::npos)) return false;
  if (s.back() == ':') return false;  // "key:" reads as a mapping key
  // The words the bool and null resolvers of YAML 1.1 / 1.2 (and the .inf/.nan spellings without their dot,
  // which some loaders take) match, in any case.
  static constexpr std::string_view kWords[] = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "nan", "inf"};
  const std::string lower = ascii_lower(s);
  for (std::string_view w : kWords)
    if (lower == w) return false;
  return true;
}

}  // namespace fp4forge::util
