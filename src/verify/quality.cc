#include "fp4forge/verify/quality.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>

#include <fmt/format.h>

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
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}


// A color between white and `to` (r, g, b) at t in [0, 1].
std::string shade(double t, int r, int g, int b) {
  t = std::clamp(t, 0.0, 1.0);
  auto mix = [&](int c) { return static_cast<int>(std::lround(255.0 + (c - 255.0) * t)); };
  return fmt::format("#{:02x}{:02x}{:02x}", mix(r), mix(g), mix(b));
}

}  // namespace

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
  std::map<std::string, std::size_t> row_of;
  std::vector<std::map<int, QualityCell>> cells;
  for (const TensorError& e : stats.per_tensor) {
    if (!std::isfinite(e.rel_rms) || !std::isfinite(e.minmax_rel_rms)) continue;
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
    add(r.total, e);
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
  auto errors = [](J& j, const QualityCell& c) {  // the three numbers every level reports
    j["rel_rms"] = c.rel_rms;
    j["minmax_rel_rms"] = c.minmax_rel_rms;
    j["gain"] = c.gain();
  };
  J j;
  j["observer"] = r.observer;
  errors(j, r.total);
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
  std::string out =
      fmt::format("  quality by module kind (observer {}; rel RMS vs source, min-max's, gain):\n", esc(r.observer));
  for (const auto& row : r.rows) {
    const QualityCell* worst = nullptr;
    for (const auto& c : row.cells)
      if (!worst || c.rel_rms > worst->rel_rms) worst = &c;
    out += fmt::format("    {:<{}}  {:.4f}  {:.4f}  {:+6.1f}%", esc(row.kind), w, row.total.rel_rms, row.total.minmax_rel_rms,
                       100.0 * row.total.gain());
    if (worst && worst->layer >= 0 && row.cells.size() > 1) out += fmt::format("  worst layer {} ({:.4f})", worst->layer, worst->rel_rms);
    out += "\n";
  }
  for (const auto& o : r.outliers) out += "    outlier: " + esc(o) + "\n";
  return out;
}

std::string to_svg(const QualityReport& r) {
  int layers = 0;
  std::size_t label = 10;
  for (const auto& row : r.rows) {
    label = std::max(label, row.kind.size());
    for (const auto& c : row.cells) layers = std::max(layers, c.layer + 1);
  }
  layers = std::max(layers, 1);
  const int cw = std::clamp(900 / layers, 4, 24), strip = 12, gap = 10, left = static_cast<int>(label) * 7 + 20, top = 48;
  const int width = left + layers * cw + 20;
  const int height = top + static_cast<int>(r.rows.size()) * (2 * strip + gap) + 60;
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"monospace\" font-size=\"11\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"10\" y=\"18\" font-size=\"13\">fp4forge verify: error vs source by module kind and layer (observer {})</text>\n"
      "<text x=\"10\" y=\"34\">rel RMS {:.4f}, min-max would give {:.4f} (gain {:+.1f}%); upper strip: error against the "
      "kind's median (red: above, outlined: outlier); lower strip: gain over min-max (green)</text>\n",
      width, height, util::xml_escape(r.observer), r.total.rel_rms, r.total.minmax_rel_rms, 100.0 * r.total.gain());
  int y = top;
  for (const auto& row : r.rows) {
    std::vector<double> v;
    for (const auto& c : row.cells) v.push_back(c.rel_rms);
    const double med = median(v);
    s += fmt::format("<text x=\"10\" y=\"{}\">{}</text>\n", y + strip + 4, util::xml_escape(row.kind));
    for (const auto& c : row.cells) {
      const int x = left + std::max(c.layer, 0) * cw;
      const double ratio = med > 0 ? c.rel_rms / med : 1.0;
      const std::string tip = fmt::format("{} layer {}: rel RMS {:.4f}, min-max {:.4f}, gain {:+.1f}%{}", row.kind, c.layer,
                                          c.rel_rms, c.minmax_rel_rms, 100.0 * c.gain(), c.outlier ? " (outlier)" : "");
      s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"{}><title>{}</title></rect>\n", x, y,
                       cw - 1, strip, shade((ratio - 1.0) / (kOutlierFactor - 1.0), 214, 39, 40),
                       c.outlier ? " stroke=\"black\" stroke-width=\"1.5\"" : "", util::xml_escape(tip));
      const double g = c.gain();
      s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>{}</title></rect>\n", x,
                       y + strip, cw - 1, strip, g >= 0 ? shade(g / 0.3, 44, 160, 44) : shade(-g / 0.1, 255, 127, 14),
                       util::xml_escape(tip));
    }
    y += 2 * strip + gap;
  }
  for (int l = 0; l < layers; l += std::max(1, layers / 16))
    s += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", left + l * cw, y + 12, l);
  s += fmt::format("<text x=\"{}\" y=\"{}\">layer</text>\n</svg>\n", left, y + 28);
  return s;
}

}  // namespace fp4forge
