#include "fp4forge/util/json_get.h"

#include <cmath>

namespace fp4forge {

std::optional<std::int64_t> int_of(const nlohmann::ordered_json& j, std::string_view key) noexcept {
  if (!j.is_object()) return std::nullopt;
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return std::nullopt;
  if (it->is_number_unsigned() && it->get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
    return std::nullopt;  // beyond int64: not a count any config means
  return it->get<std::int64_t>();
}

std::optional<std::int64_t> integral_of(const nlohmann::ordered_json& j, std::string_view key) noexcept {
  if (auto v = int_of(j, key)) return v;
  if (!j.is_object()) return std::nullopt;
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_float()) return std::nullopt;
  const double d = it->get<double>();
  if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e18) return static_cast<std::int64_t>(d);
  return std::nullopt;
}

std::optional<bool> opt_bool_of(const nlohmann::ordered_json& j, std::string_view key) noexcept {
  if (!j.is_object()) return std::nullopt;
  auto it = j.find(key);
  if (it == j.end() || !it->is_boolean()) return std::nullopt;
  return it->get<bool>();
}

std::string str_of(const nlohmann::ordered_json& j, std::string_view key) {
  if (!j.is_object()) return {};
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return {};
  return it->get<std::string>();
}

bool bool_of(const nlohmann::ordered_json& j, std::string_view key) noexcept {
  if (!j.is_object()) return false;
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

bool has_non_null(const nlohmann::ordered_json& j, std::string_view key) noexcept {
  if (!j.is_object()) return false;
  auto it = j.find(key);
  return it != j.end() && !it->is_null();
}

}  // namespace fp4forge
