#include "fp4forge/core/finding.h"

#include <algorithm>

namespace fp4forge {

std::string_view severity_name(Severity s) noexcept {
  switch (s) {
    case Severity::ERROR: return "error";
    case Severity::WARNING: return "warning";
    case Severity::INFO: return "info";
  }
  return "error";
}

nlohmann::ordered_json to_json(const Finding& f) {
  nlohmann::ordered_json j;
  j["kind"] = f.kind;
  j["severity"] = severity_name(f.severity);
  j["message"] = f.message;
  j["tensors"] = f.tensors;
  j["key"] = f.key.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(f.key);
  j["expected"] = f.expected.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(f.expected);
  j["actual"] = f.actual.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(f.actual);
  j["hint"] = f.hint.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(f.hint);
  j["fix"] = f.fix ? nlohmann::ordered_json(*f.fix) : nlohmann::ordered_json(nullptr);
  return j;
}

bool fails(const std::vector<Finding>& findings, bool strict) noexcept {
  for (const auto& f : findings)
    if (f.severity == Severity::ERROR || (strict && f.severity == Severity::WARNING)) return true;
  return false;
}

bool has_errors(const std::vector<Finding>& findings) noexcept {
  return std::any_of(findings.begin(), findings.end(),
                     [](const Finding& f) { return f.severity == Severity::ERROR; });
}

}  // namespace fp4forge
