// The searched observers' golden vectors for `fp4forge selftest` (nvfp4_search.h): the built-in set and its
// runner, every case on every search path, byte for byte.
#include <algorithm>
#include <bit>
#include <cstring>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fp4forge/codec/nvfp4_search.h"

namespace fp4forge::detail_observers {
extern const unsigned char kBuiltinObserversJson[];
extern const std::size_t kBuiltinObserversJsonSize;
}  // namespace fp4forge::detail_observers

namespace fp4forge::nvfp4 {

Result<std::vector<ObserverGoldenSet>> builtin_observer_golden() {
  const std::string_view text{reinterpret_cast<const char*>(detail_observers::kBuiltinObserversJson),
                              detail_observers::kBuiltinObserversJsonSize};
  const auto doc = nlohmann::json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("observers") || !doc.at("observers").is_array())
    return make_error(Errc::INTERNAL, "built-in observer golden vectors: not the expected JSON document");
  std::vector<ObserverGoldenSet> out;
  for (const auto& o : doc.at("observers")) {
    if (!o.is_object() || !o.contains("observer") || !o.at("observer").is_string())
      return make_error(Errc::INTERNAL, "built-in observer golden vectors: an entry without \"observer\"");
    const auto obs = observer_from_config(o.at("observer").get<std::string>());
    if (!obs) return make_error(Errc::INTERNAL, "built-in observer golden vectors: unknown observer");
    FP4FORGE_ASSIGN_OR_RETURN(GoldenSet set, parse_golden(o.dump(), "built-in " + o.at("observer").get<std::string>()));
    out.push_back({*obs, std::move(set)});
  }
  return out;
}

namespace {

std::string first_diff(const std::vector<std::byte>& got, const std::vector<std::byte>& want, std::string_view what) {
  if (got.size() != want.size()) return fmt::format("{}: {} bytes, expected {}", what, got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i])
      return fmt::format("{} byte {}: 0x{:02x}, expected 0x{:02x}", what, i, static_cast<unsigned>(got[i]),
                         static_cast<unsigned>(want[i]));
  return {};
}

GoldenOutcome run_case(Observer observer, const GoldenCase& c, const std::string& path) {
  GoldenOutcome o;
  o.case_name = fmt::format("NVFP4A16+{}/{}", observer_config_name(observer), c.name);
  o.path = path;
  std::vector<std::string> names;
  for (std::size_t i = 0; i < c.members.size(); ++i) names.push_back(fmt::format("{}[{}]", c.name, i));
  const auto views = c.views();
  // Search on the named path, then encode with its maxima: the bytes of this path.
  const SearchSpec spec = *search_spec(observer);
  std::vector<std::vector<float>> maxima;
  float amax = 0.0f;
  for (std::size_t i = 0; i < views.size(); ++i) {
    auto m = searched_maxima(views[i], spec, names[i], path);
    if (!m.ok()) {
      o.detail = m.error().message;
      return o;
    }
    for (float v : *m) amax = std::max(amax, v);
    maxima.push_back(std::move(*m));
  }
  const float gs = global_scale(amax, c.dtype);
  for (std::size_t i = 0; i < views.size(); ++i) {
    const auto& m = c.members[i];
    if (std::bit_cast<std::uint32_t>(gs) != m.global_scale_bits) {
      o.detail = fmt::format("member {} weight_global_scale {:08x}, expected {:08x}", i, std::bit_cast<std::uint32_t>(gs),
                             m.global_scale_bits);
      return o;
    }
    std::vector<std::byte> packed(m.packed.size()), scale(m.scale.size());
    if (Status st = encode_rows_maxima(views[i], gs, maxima[i].data(), 0, views[i].rows, packed.data(), scale.data(),
                                       names[i]);
        !st) {
      o.detail = st.error().message;
      return o;
    }
    if (auto d = first_diff(scale, m.scale, fmt::format("member {} weight_scale", i)); !d.empty()) {
      o.detail = d;
      return o;
    }
    if (auto d = first_diff(packed, m.packed, fmt::format("member {} weight_packed", i)); !d.empty()) {
      o.detail = d;
      return o;
    }
  }
  o.pass = true;
  return o;
}

}  // namespace

void run_observer_golden(const std::vector<ObserverGoldenSet>& sets, GoldenReport& report) {
  const auto paths = search_paths();
  for (const auto& s : sets)
    for (const auto& c : s.set.cases)
      for (const auto& p : paths) {
        report.scheme_outcomes.push_back(run_case(s.observer, c, p));
        if (!report.scheme_outcomes.back().pass) ++report.scheme_failures;
      }
}

}  // namespace fp4forge::nvfp4
