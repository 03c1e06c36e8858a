#include "fp4forge/verify/quality.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "fp4forge/codec/half.h"
#include "fp4forge/codec/observer.h"
#include "fp4forge/util/strings.h"

namespace fp4forge {
namespace {

bool is_number(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

// Adds one tensor's error, weighted by its parameters (the means are weighted like verify's).
void add(QualityCell& c, const TensorError& e) {
  const double w = static_cast<double>(e.rows) * static_cast<double>(e.cols);
  const double before = static_cast<double>(c.params);
  c.params += e.rows * e.cols;
  const double after = static_cast<double>(c.params);
  if (after <= 0) return;
  c.rel_rms = (c.rel_rms * before + e.rel_rms * w) / after;
  c.minmax_rel_rms = (c.minmax_rel_rms * before + e.minmax_rel_rms * w) / after;
  if (e.minmax_rel_rms != e.ref_rel_rms) c.searched = true;
}

// splitmix64: a fixed, portable sequence (std::normal_distribution's is implementation-defined).
std::uint64_t splitmix64(std::uint64_t& x) {
  std::uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double measure_gaussian_minmax(QuantScheme s) {
  constexpr std::uint64_t kRows = 256, kCols = 2048;  // multiples of every scheme's group and FP8_BLOCK's 128 rows
  std::vector<std::uint16_t> w(kRows * kCols);  // BF16, as checkpoints store their weights
  std::uint64_t state = 0x66703466'6f726765ULL;  // "fp4forge"
  for (std::size_t i = 0; i < w.size(); i += 2) {  // Box-Muller: two N(0, 1) values per pair of uniforms
    const double u1 = (static_cast<double>(splitmix64(state) >> 11) + 1.0) / 9007199254740993.0;  // (0, 1]
    const double u2 = static_cast<double>(splitmix64(state) >> 11) / 9007199254740992.0;
    const double r = std::sqrt(-2.0 * std::log(u1)), t = 2.0 * 3.14159265358979323846 * u2;
    w[i] = half::float_to_bf16(static_cast<float>(r * std::cos(t)));
    w[i + 1] = half::float_to_bf16(static_cast<float>(r * std::sin(t)));
  }
  const nvfp4::WeightView view{reinterpret_cast<const std::byte*>(w.data()), DType::BF16, kRows, kCols};
  auto enc = encode_linear(s, view, "gaussian reference", "scalar");
  if (!enc.ok() || enc->size() < 2) return std::numeric_limits<double>::quiet_NaN();
  const auto& t = *enc;
  float gs = 1.0f;
  if (has_global_scale(s) && t.size() > 2 && t[2].bytes.size() == 4) std::memcpy(&gs, t[2].bytes.data(), 4);
  std::vector<float> deq(w.size());
  decode_linear_rows(s, LinearData{t[0].bytes.data(), t[1].bytes.data(), t[1].dtype, gs}, kRows, kCols, 0, kRows,
                     deq.data());
  double err2 = 0, src2 = 0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    const double x = half::bf16_to_float(w[i]), d = static_cast<double>(deq[i]) - x;
    err2 += d * d;
    src2 += x * x;
  }
  return std::sqrt(err2 / src2);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}


}  // namespace

double gaussian_minmax_rel_rms(QuantScheme s) {
  constexpr std::size_t kN = std::size(kQuantSchemes);
  static std::once_flag once[kN];
  static double value[kN];
  const auto i = static_cast<std::size_t>(s);
  std::call_once(once[i], [&] { value[i] = measure_gaussian_minmax(s); });
  return value[i];
}

std::pair<int, std::string> module_kind(const std::string& module) {
  const auto parts = util::split(module, '.');
  int layer = -1;
  std::size_t from = 0;
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    const std::string_view p = parts[i];
    if ((p == "layers" || p == "blocks" || p == "h" || p == "layer") && is_number(parts[i + 1]) && i + 2 < parts.size()) {
      const std::string_view num = parts[i + 1];
      layer = num.size() > 6 ? -1 : std::stoi(std::string(num));
      from = i + 2;
    }
  }
  std::string kind;
  for (std::size_t i = from; i < parts.size(); ++i) {
    if (is_number(parts[i])) continue;  // expert indices
    if (!kind.empty()) kind += '.';
    kind += parts[i];
  }
  if (kind.empty()) kind = module;
  return {layer, kind};
}

QualityReport quality_report(const VerifyStats& stats) {
  QualityReport r;
  r.observer = stats.observer;
  r.scheme = stats.scheme;
  for (std::string_view label : util::split(stats.scheme, '+')) {
    auto sc = parse_quant_scheme(label);
    if (!sc.ok() || std::any_of(r.references.begin(), r.references.end(), [&](const auto& x) { return x.scheme == *sc; }))
      continue;
    const double ref = gaussian_minmax_rel_rms(*sc);
    if (std::isfinite(ref)) r.references.push_back({*sc, ref});
    if (check_observer(*sc, Observer::NVFP4_EXPANDED_MSE).ok() || check_observer(*sc, Observer::MEMORYLESS_MSE).ok())
      r.searchable = true;
  }
  r.quantized_share = stats.quantized_share();
  r.total_params = stats.total_params;
  r.kept_linear = stats.kept_linear;
  std::map<std::size_t, std::size_t> group_of;  // config group index -> r.groups
  std::map<std::string, std::size_t> row_of;
  std::vector<std::map<int, QualityCell>> cells;
  for (const TensorError& e : stats.per_tensor) {
    if (!std::isfinite(e.rel_rms) || !std::isfinite(e.minmax_rel_rms)) continue;
    if (e.minmax_rel_rms != e.ref_rel_rms) r.minmax_compared = true;  // the config's observer is not min-max
    const auto [layer, kind] = module_kind(e.module);
    auto [it, fresh] = row_of.try_emplace(kind, r.rows.size());
    if (fresh) {
      r.rows.push_back(QualityRow{kind, {}, {}});
      cells.emplace_back();
    }
    QualityCell& c = cells[it->second][layer];
    c.layer = layer;
    add(c, e);
    add(r.rows[it->second].total, e);
    auto [g, new_group] = group_of.try_emplace(e.group, r.groups.size());
    if (new_group)
      r.groups.push_back(
          {e.group < stats.groups.size() ? stats.groups[e.group] : fmt::format("group_{}", e.group), {}, 0});
    // The headline and the groups leave out the tensors that reproduce the source exactly, as verify's means do
    // (tryout N-M4: a lossless FP8 group's zeros halved the JSON headline).
    if (e.rel_rms == 0 && e.minmax_rel_rms == 0) {
      ++r.exact_tensors;
      ++r.groups[g->second].exact_tensors;
    } else {
      add(r.total, e);
      add(r.groups[g->second].total, e);
    }
  }
  for (std::size_t i = 0; i < r.rows.size(); ++i) {
    QualityRow& row = r.rows[i];
    for (auto& [layer, c] : cells[i]) row.cells.push_back(c);
    std::vector<double> v;
    for (const auto& c : row.cells) v.push_back(c.rel_rms);
    const double med = median(v);
    if (row.cells.size() < 3 || med <= 0) continue;
    for (auto& c : row.cells) {
      if (c.rel_rms <= kOutlierFactor * med) continue;
      c.outlier = true;
      r.outliers.push_back(fmt::format("layer {} {}: {:.4f} (kind median {:.4f})", c.layer, row.kind, c.rel_rms, med));
    }
  }
  return r;
}

nlohmann::ordered_json to_json(const QualityReport& r) {
  using J = nlohmann::ordered_json;
  auto errors = [](J& j, const QualityCell& c) {  // the numbers every level reports
    j["rel_rms"] = c.rel_rms;
    j["minmax_rel_rms"] = c.minmax_rel_rms;
    j["error_vs_minmax"] = c.vs_minmax();
    j["gain"] = c.gain();  // -error_vs_minmax, kept for readers of the 0.x schema
  };
  J j;
  j["observer"] = r.observer;
  j["scheme"] = r.scheme;
  j["minmax_compared"] = r.minmax_compared;
  J refs = J::array();
  for (const auto& x : r.references)
    refs.push_back({{"scheme", quant_scheme_preset(x.scheme)}, {"gaussian_minmax_rel_rms", x.gaussian_minmax_rel_rms}});
  j["references"] = std::move(refs);
  errors(j, r.total);
  J groups = J::array();  // per config group (a mixed checkpoint's numbers, never averaged)
  for (const auto& g : r.groups) {
    J x;
    x["group"] = g.label.substr(0, g.label.find(' '));
    errors(x, g.total);
    x["minmax_compared"] = g.total.searched;
    x["exact_tensors"] = g.exact_tensors;
    groups.push_back(std::move(x));
  }
  j["groups"] = std::move(groups);
  j["exact_tensors"] = r.exact_tensors;
  J kinds = J::array();
  for (const auto& row : r.rows) {
    J k;
    k["kind"] = row.kind;
    errors(k, row.total);
    J layers = J::array();
    for (const auto& c : row.cells) {
      J l;
      l["layer"] = c.layer < 0 ? J(nullptr) : J(c.layer);
      l["params"] = c.params;
      errors(l, c);
      l["outlier"] = c.outlier;
      layers.push_back(std::move(l));
    }
    k["layers"] = std::move(layers);
    kinds.push_back(std::move(k));
  }
  j["kinds"] = std::move(kinds);
  j["outliers"] = r.outliers;
  return j;
}

std::string to_text(const QualityReport& r) {
  if (r.rows.empty()) return {};
  const auto esc = [](std::string_view x) { return util::printable(x, util::kReportLine); };  // R4-B5
  std::size_t w = 4;
  for (const auto& row : r.rows) w = std::max(w, esc(row.kind).size());
  // Several schemes: their observers are paired with the scheme names in one order (tryout M-L5: the observers alone
  // read as listed in the reverse of the group lines above).
  const std::string by = r.scheme.find('+') != std::string::npos
                             ? fmt::format("schemes {} with observers {}", esc(r.scheme), esc(r.observer))
                             : fmt::format("observer {}", esc(r.observer));
  std::string out = fmt::format("  quality by module kind ({}; rel RMS vs source, min-max's, error vs min-max):\n", by);
  for (const auto& row : r.rows) {
    const QualityCell* worst = nullptr;
    for (const auto& c : row.cells)
      if (!worst || c.rel_rms > worst->rel_rms) worst = &c;
    // Nothing to compare (min-max is its observer, or an exact cast) is not "+0.0 %": said as the picture says it
    // (issue 55 tryout: an FP8_BLOCK row read "+0.0 %" where the SVG drew n/a).
    if (!row.total.searched || row.total.exact())
      out += fmt::format("    {:<{}}  {:.4f}  {:.4f}      n/a ({})", esc(row.kind), w, row.total.rel_rms,
                         row.total.minmax_rel_rms,
                         row.total.exact() ? "exact: cast or passed through losslessly" : "min-max is its observer");
    else
      out += fmt::format("    {:<{}}  {:.4f}  {:.4f}  {:+6.1f} %", esc(row.kind), w, row.total.rel_rms,
                         row.total.minmax_rel_rms, 100.0 * row.total.vs_minmax());
    // The layer's cell pools its modules (experts): said so, beside the worst-tensors list (issue 55 tryout K).
    if (worst && worst->layer >= 0 && row.cells.size() > 1)
      out += fmt::format("  worst layer {} ({:.4f} over the layer's modules)", worst->layer, worst->rel_rms);
    out += "\n";
  }
  for (const auto& x : r.references)
    out += fmt::format("    yardstick: min-max gives {:.4f} on Gaussian weights under {} (not a pass mark)\n",
                       x.gaussian_minmax_rel_rms, quant_scheme_preset(x.scheme));
  for (const auto& o : r.outliers) out += "    outlier: " + esc(o) + "\n";
  return out;
}

}  // namespace fp4forge
