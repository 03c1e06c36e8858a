#pragma once
/**
 * A finding of doctor / verify / diff: data, not an error. `kind` is a stable id, a row of the one registry
 * (core/finding_kinds.h); findings are built from that row and collected by core/finding_sink.h. Severity decides
 * the exit code (any ERROR -> 1).
 */
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace fp4forge {

enum class Severity { ERROR, WARNING, INFO };
std::string_view severity_name(Severity s) noexcept;  ///< "error", "warning", "info"

struct Finding {
  std::string kind;                  ///< stable id, kebab-case
  Severity severity = Severity::ERROR;
  std::string message;               ///< one line: what, where, expected vs actual
  std::vector<std::string> tensors;  ///< tensors involved (may be truncated with a count in message)
  std::string key;                   ///< config key / file involved, if any
  std::string expected, actual;      ///< evidence, as text
  std::string hint;                  ///< how to fix / what it means
  std::optional<std::string> fix;    ///< description of the automatic fix, if one exists
};

nlohmann::ordered_json to_json(const Finding& f);
/** True when any finding has ERROR severity. */
bool has_errors(const std::vector<Finding>& findings) noexcept;
/** True when any finding fails a run: an error, or with `strict` (doctor/verify --strict) a warning. */
bool fails(const std::vector<Finding>& findings, bool strict) noexcept;

}  // namespace fp4forge
