// The quality report drawn (verify/quality.h to_svg; docs/cli/verify.md "The quality picture"): a heat map of
// the error per module kind and layer on an absolute scale with the reference marked, a second map of the error
// vs min-max when min-max was compared, hatched cells where a kind has no module, a legend with both scales.
#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "fp4forge/util/format.h"
#include "fp4forge/util/svg.h"
#include "fp4forge/verify/quality.h"

namespace fp4forge {
namespace {

using util::SvgCanvas;
using Anchor = SvgCanvas::Anchor;

struct Stop {
  double t;
  int r, g, b;
};
// The error: light amber (small) to dark brown (large), never white (a cell is never read as "nothing").
constexpr Stop kErrorRamp[] = {{0.0, 254, 227, 145}, {0.3, 254, 196, 79}, {0.55, 254, 153, 41},
                               {0.78, 217, 95, 14},  {1.0, 140, 45, 4}};
// The error vs min-max on [-kChangeSpan, +kChangeSpan]: green where the observer lowered it, grey for no change
// (still not white), red where it raised it.
constexpr Stop kChangeRamp[] = {{0.0, 26, 152, 80}, {0.25, 145, 207, 96}, {0.5, 217, 217, 217},
                                {0.75, 252, 141, 89}, {1.0, 215, 48, 39}};
constexpr double kChangeSpan = 0.30;

constexpr double kTitlePx = 15, kSmallPx = 10, kCellH = 18, kRowGap = 2, kMargin = 12;
constexpr std::size_t kKindCells = 40;  // a longer kind is cut (its tooltip has it whole)

template <std::size_t N>
std::array<int, 3> ramp(const Stop (&stops)[N], double t) {
  t = std::isfinite(t) ? std::clamp(t, 0.0, 1.0) : 1.0;
  std::size_t i = 1;
  while (i + 1 < N && stops[i].t < t) ++i;
  const Stop& a = stops[i - 1];
  const Stop& b = stops[i];
  const double u = b.t > a.t ? (t - a.t) / (b.t - a.t) : 0.0;
  auto mix = [u](int x, int y) { return static_cast<int>(std::lround(x + (y - x) * u)); };
  return {mix(a.r, b.r), mix(a.g, b.g), mix(a.b, b.b)};
}
std::string hex(const std::array<int, 3>& c) { return fmt::format("#{:02x}{:02x}{:02x}", c[0], c[1], c[2]); }
// Dark text on light cells, white on dark ones.
std::string ink(const std::array<int, 3>& c) {
  return 0.299 * c[0] + 0.587 * c[1] + 0.114 * c[2] < 140 ? "#ffffff" : "#000000";
}

template <std::size_t N>
std::string gradient(std::string_view id, const Stop (&stops)[N]) {
  std::string s = fmt::format("<linearGradient id=\"{}\" x1=\"0\" x2=\"1\" y1=\"0\" y2=\"0\">", id);
  for (const Stop& st : stops)
    s += fmt::format("<stop offset=\"{}\" stop-color=\"{}\"/>", st.t, hex({st.r, st.g, st.b}));
  return s + "</linearGradient>";
}

/** The smallest of 1, 2, 2.5, 5 x 10^k at or above x. */
double nice_ceil(double x) {
  if (!(x > 0) || !std::isfinite(x)) return 1.0;
  const double p = std::pow(10.0, std::floor(std::log10(x)));
  for (double f : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (f * p >= x * (1 - 1e-12)) return f * p;
  return 10 * p;
}

/** Where everything sits: the grid's columns (one per layer, one more for modules outside any layer). */
struct Grid {
  int layers = 0;
  bool outside = false;  ///< a column for modules outside any layer
  int columns = 0;
  double left = 0, cw = 0, width = 0;
  double top_error = 1;  ///< the error scale's end
  bool saturated = false;  ///< some error beyond it
  bool values = false;     ///< cells wide enough for their value
  double wrap_px = 0;      ///< text is wrapped to this width

  int column(int layer) const { return layer < 0 ? layers : layer; }
  double x(int layer) const { return left + column(layer) * cw; }
};

Grid make_grid(const QualityReport& r) {
  Grid g;
  std::size_t label = 12;
  double max_err = 0;
  for (const auto& row : r.rows) {
    label = std::max(label, std::min(util::text_cells(row.kind), kKindCells));
    for (const auto& c : row.cells) {
      if (c.layer < 0) g.outside = true;
      g.layers = std::max(g.layers, c.layer + 1);
      max_err = std::max(max_err, c.rel_rms);
    }
  }
  g.columns = g.layers + (g.outside ? 1 : 0);
  g.cw = std::clamp(std::floor(720.0 / std::max(g.columns, 1)), 8.0, 44.0);
  g.left = kMargin + static_cast<double>(label) * util::kSvgCharEm * 12 + 10;
  g.width = g.columns * g.cw;
  double ref = 0;
  for (const auto& x : r.references) ref = std::max(ref, x.gaussian_minmax_rel_rms);
  // The scale starts at 0 and reaches twice the reference (a cell at the reference sits mid-scale); a larger
  // error widens it up to 4x the reference, beyond which cells saturate and the scale's end reads ">=".
  const double want = ref > 0 ? std::max(2 * ref, std::min(max_err, 4 * ref)) : max_err;
  g.top_error = nice_ceil(want);
  g.saturated = max_err > g.top_error;
  g.values = g.cw >= util::text_width("0.000", kSmallPx) + 4;
  g.wrap_px = std::max(g.left + g.width + 90 - kMargin, 96 * util::kSvgCharEm * 12);
  return g;
}

/** Wrapped lines of text from y (baseline); returns the next baseline. */
double paragraph(SvgCanvas& cv, const Grid& g, double y, std::string_view text, std::string_view attrs = {}) {
  const auto cells = static_cast<std::size_t>(g.wrap_px / (util::kSvgCharEm * cv.font_px()));
  for (const auto& line : util::wrap_cells(text, cells)) {
    cv.text(kMargin, y, line, attrs);
    y += 16;
  }
  return y;
}

enum class Panel { ERROR, CHANGE };

std::string cell_title(const QualityRow& row, const QualityCell& c) {
  return fmt::format("{} {}: rel RMS {:.4f}, min-max {:.4f}, error {:+.1f} % vs min-max, {} parameters{}", row.kind,
                     c.layer < 0 ? std::string("outside any layer") : fmt::format("layer {}", c.layer), c.rel_rms,
                     c.minmax_rel_rms, 100.0 * c.vs_minmax(), c.params, c.outlier ? " (outlier)" : "");
}

/** One heat map: a row per kind, a column per layer; returns the y below its axis. */
double draw_map(SvgCanvas& cv, const QualityReport& r, const Grid& g, double y, Panel panel) {
  cv.text(kMargin, y, panel == Panel::ERROR
                          ? "relative RMS error vs the source, per module kind (rows) and layer (columns)"
                          : "error vs min-max's encoding of the same module (negative: the observer lowered it)",
          " font-weight=\"bold\"");
  y += 14;
  cv.text(g.left + g.width + 8, y, "all layers", {}, kSmallPx);
  y += 4;
  for (const auto& row : r.rows) {
    const std::string label = util::fit_cells(row.kind, kKindCells);
    cv.text(kMargin, y + kCellH - 5, label, {}, 0, Anchor::START, label != row.kind ? row.kind : std::string());
    std::vector<const QualityCell*> at(static_cast<std::size_t>(g.columns), nullptr);
    for (const auto& c : row.cells) at[static_cast<std::size_t>(g.column(c.layer))] = &c;
    for (int col = 0; col < g.columns; ++col) {
      const double x = g.left + col * g.cw;
      const QualityCell* c = at[static_cast<std::size_t>(col)];
      if (c == nullptr) {
        cv.rect(x, y, g.cw - 1, kCellH, " class=\"cell-absent\" fill=\"url(#absent)\" stroke=\"#bdbdbd\" stroke-width=\"0.5\"",
                fmt::format("{} {}: no quantized module", row.kind,
                            col == g.layers ? std::string("outside any layer") : fmt::format("layer {}", col)),
                0.5);
        continue;
      }
      // Nothing to compare against min-max (its own observer, or an exact cast): not "no gain" (issue 55 tryout).
      if (panel == Panel::CHANGE && (!c->searched || c->exact())) {
        cv.rect(x, y, g.cw - 1, kCellH, " class=\"cell-na\" fill=\"url(#na)\" stroke=\"#bdbdbd\" stroke-width=\"0.5\"",
                fmt::format("{} {}: {}", row.kind,
                            c->layer < 0 ? std::string("outside any layer") : fmt::format("layer {}", c->layer),
                            c->exact() ? "exact (error 0): cast or passed through losslessly"
                                       : "min-max is this module's observer: nothing to compare"),
                0.5);
        continue;
      }
      const double v = panel == Panel::ERROR ? c->rel_rms : c->vs_minmax();
      const auto color = panel == Panel::ERROR ? ramp(kErrorRamp, v / g.top_error)
                                               : ramp(kChangeRamp, (v + kChangeSpan) / (2 * kChangeSpan));
      const bool outline = panel == Panel::ERROR && c->outlier;
      cv.rect(x, y, g.cw - 1, kCellH,
              fmt::format(" class=\"{}\" fill=\"{}\"{}", panel == Panel::ERROR ? "cell-error" : "cell-change", hex(color),
                          outline ? " stroke=\"#000000\" stroke-width=\"2\"" : ""),
              cell_title(row, *c), outline ? 2 : 0);
      if (g.values)
        cv.text(x + (g.cw - 1) / 2, y + kCellH - 5,
                panel == Panel::ERROR ? fmt::format("{:.3f}", v) : fmt::format("{:+.1f}", 100.0 * v),
                fmt::format(" fill=\"{}\"", ink(color)), kSmallPx, Anchor::MIDDLE);
    }
    cv.text(g.left + g.width + 8, y + kCellH - 5,
            panel == Panel::ERROR ? fmt::format("{:.4f}", row.total.rel_rms)
            : (!row.total.searched || row.total.exact()) ? std::string("n/a")
                                                         : fmt::format("{:+.1f} %", 100.0 * row.total.vs_minmax()));
    y += kCellH + kRowGap;
  }
  // The layer axis: a number every `step` columns, as many as fit.
  int step = 1;
  const double need = util::text_width(std::to_string(std::max(g.layers - 1, 0)), kSmallPx) + 6;
  for (int s : {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000})
    if ((step = s) * g.cw >= need) break;
  for (int l = 0; l < g.layers; l += step)
    cv.text(g.x(l) + (g.cw - 1) / 2, y + 11, std::to_string(l), {}, kSmallPx, Anchor::MIDDLE);
  if (g.outside) cv.text(g.x(-1) + (g.cw - 1) / 2, y + 22, "none", {}, kSmallPx, Anchor::MIDDLE);
  cv.text(g.left - 6, y + 11, "layer", {}, kSmallPx, Anchor::END);
  return y + (g.outside ? 44 : 34);
}

/** A colour scale: a bar with its gradient, ticks and their values; returns the y below it. */
double draw_scale(SvgCanvas& cv, double y, std::string_view id, std::string_view ramp_id, std::string_view caption,
                  const std::vector<std::pair<double, std::string>>& ticks) {
  constexpr double kBarW = 300, kBarH = 12;
  const double x0 = kMargin + 200;
  cv.text(kMargin, y + 10, caption);
  cv.rect(x0, y, kBarW, kBarH, fmt::format(" id=\"{}\" fill=\"url(#{})\" stroke=\"#555555\" stroke-width=\"0.5\"", id, ramp_id),
          {}, 0.5);
  for (const auto& [t, label] : ticks) {
    cv.line(x0 + t * kBarW, y + kBarH, x0 + t * kBarW, y + kBarH + 4, " stroke=\"#333333\"");
    cv.text(x0 + t * kBarW, y + kBarH + 14, label, {}, kSmallPx, Anchor::MIDDLE);
  }
  return y + kBarH + 32;  // the next baseline, clear of the tick labels
}

double draw_legend(SvgCanvas& cv, const QualityReport& r, const Grid& g, double y) {
  cv.open_group(" id=\"legend\"");
  cv.text(kMargin, y, "legend", " font-weight=\"bold\"");
  y += 8;
  std::vector<std::pair<double, std::string>> ticks;
  for (int i = 0; i <= 4; ++i) {
    const double v = g.top_error * i / 4;
    ticks.push_back({i / 4.0, (i == 4 && g.saturated ? "≥" : "") + fmt::format("{:g}", std::round(v * 1e4) / 1e4)});
  }
  const double bar_y = y;
  y = draw_scale(cv, y, "error-scale", "error-ramp", "relative RMS error", ticks);
  // The reference: a numbered marker on the error scale per scheme, and a line saying what it is.
  double label_end = 0;  // numbers of markers close together move right, never onto each other
  for (std::size_t i = 0; i < r.references.size(); ++i) {
    const auto& ref = r.references[i];
    const double x = kMargin + 200 + 300 * std::min(ref.gaussian_minmax_rel_rms / g.top_error, 1.0);
    cv.raw(fmt::format("<path id=\"reference-{}\" d=\"M{:.2f},{:.2f} l-5,-7 h10 z\" fill=\"#000000\"/>", i, x, bar_y),
           x + 5, bar_y);
    cv.line(x, bar_y, x, bar_y + 12, " stroke=\"#000000\" stroke-width=\"1.5\"");
    const std::string num = std::to_string(i + 1);
    const double lx = std::max(x + 6, label_end + 2);
    cv.text(lx, bar_y - 1, num, {}, kSmallPx);
    label_end = lx + util::text_width(num, kSmallPx);
    y = paragraph(cv, g, y,
                  fmt::format("▼{} yardstick: min-max gives {:.4f} on Gaussian N(0, 1) weights under {} (fp4forge's "
                              "encoder on a fixed seeded sample): what well-behaved weights give, not a pass "
                              "mark; weights with outliers inside their groups sit above it",
                              i + 1, ref.gaussian_minmax_rel_rms, quant_scheme_preset(ref.scheme)));
  }
  y -= 4;
  cv.rect(kMargin, y, 24, 14, " fill=\"url(#absent)\" stroke=\"#bdbdbd\" stroke-width=\"0.5\"", {}, 0.5);
  cv.text(kMargin + 32, y + 11, "no quantized module of this kind in this layer (absent or kept unquantized)");
  y += 20;
  cv.rect(kMargin, y, 24, 14, " fill=\"" + hex(ramp(kErrorRamp, 0.4)) + "\" stroke=\"#000000\" stroke-width=\"2\"", {}, 2);
  cv.text(kMargin + 32, y + 11, fmt::format("outlier: a layer whose error is above {}x its kind's median", kOutlierFactor));
  y += 26;
  if (r.minmax_compared) {
    const bool any_na = std::any_of(r.rows.begin(), r.rows.end(), [](const QualityRow& row) {
      return std::any_of(row.cells.begin(), row.cells.end(), [](const QualityCell& c) { return !c.searched || c.exact(); });
    });
    if (any_na) {
      cv.rect(kMargin, y, 24, 14, " data-legend=\"na\" fill=\"url(#na)\" stroke=\"#bdbdbd\" stroke-width=\"0.5\"", {},
              0.5);
      cv.text(kMargin + 32, y + 11, "error vs min-max: not applicable (min-max is the module's observer, or it is exact)");
      y += 26;
    }
    y = draw_scale(cv, y, "change-scale", "change-ramp", "error vs min-max",
                   {{0.0, fmt::format("≤{:+.0f} %", -100 * kChangeSpan)},
                    {0.25, fmt::format("{:+.0f} %", -50 * kChangeSpan)},
                    {0.5, "0"},
                    {0.75, fmt::format("{:+.0f} %", 50 * kChangeSpan)},
                    {1.0, fmt::format("≥{:+.0f} %", 100 * kChangeSpan)}});
  }
  cv.close_group();
  return y + 6;
}

/** The error in words: one line per config group when there are several (an FP8 group's nothing is never averaged
 * with an NVFP4 group's gain), the exact tensors said apart, and what share of the model the picture covers
 * (issue 55 tryout: a mostly-16-bit checkpoint drew one neat row and no word of the rest). */
double headline(SvgCanvas& cv, const Grid& g, const QualityReport& r, double y) {
  auto said = [](const QualityCell& c) {
    return c.searched ? fmt::format("relative RMS error {:.4f}; min-max's encoding of the same weights gives {:.4f}: "
                                    "error {:+.1f} % vs min-max", c.rel_rms, c.minmax_rel_rms, 100.0 * c.vs_minmax())
                      : fmt::format("relative RMS error {:.4f} (its observer is min-max: nothing to compare)",
                                    c.rel_rms);
  };
  if (r.groups.size() > 1) {
    for (const auto& grp : r.groups)
      y = paragraph(cv, g, y,
                    grp.total.params == 0
                        ? fmt::format("{}: every tensor reproduces the source exactly (cast or passed through "
                                      "losslessly): no error to measure",
                                      grp.label)
                        : fmt::format("{}: {}", grp.label, said(grp.total)));
  } else {
    y = paragraph(cv, g, y,
                  fmt::format("{} over every compared weight (parameter-weighted){}", said(r.total),
                              !r.total.searched && r.searchable ? "; a searched observer adds a map of the error vs "
                                                                  "min-max"
                                                                : ""));
  }
  if (r.exact_tensors > 0)
    y = paragraph(cv, g, y,
                  fmt::format("{} tensor(s) are exact (error 0: cast or passed through losslessly), left "
                              "out of the error above: a zero is no measure of an encoding",
                              format_count(r.exact_tensors)));
  return paragraph(cv, g, y,
                   fmt::format("quantized share {:.1f} % of {} parameters; {} Linear-like weight(s) kept in 16 bits "
                               "(no error to draw: they are the source's own)",
                               100.0 * r.quantized_share, format_count(r.total_params), format_count(r.kept_linear)));
}

}  // namespace

std::string to_svg(const QualityReport& r) {
  SvgCanvas cv(12);
  const Grid g = make_grid(r);
  cv.raw("<defs>" + gradient("error-ramp", kErrorRamp) + gradient("change-ramp", kChangeRamp) +
         "<pattern id=\"absent\" patternUnits=\"userSpaceOnUse\" width=\"6\" height=\"6\"><rect width=\"6\" "
         "height=\"6\" fill=\"#ffffff\"/><path d=\"M0,6 L6,0 M-1,1 L1,-1 M5,7 L7,5\" stroke=\"#8c8c8c\" "
         "stroke-width=\"1\"/></pattern>"
         "<pattern id=\"na\" patternUnits=\"userSpaceOnUse\" width=\"6\" height=\"6\"><rect width=\"6\" "
         "height=\"6\" fill=\"#f2f2f2\"/><circle cx=\"3\" cy=\"3\" r=\"0.9\" fill=\"#9e9e9e\"/></pattern></defs>");
  double y = 24;
  cv.text(kMargin, y, "fp4forge verify: error of the written weights against the source", " font-weight=\"bold\"",
          kTitlePx);
  y += 22;
  if (r.rows.empty()) {
    paragraph(cv, g, y, "no quantized module was compared with a source: nothing to draw");
    return cv.finish(kMargin, 480);
  }
  y = paragraph(cv, g, y, fmt::format("scheme {}, observer {}", r.scheme.empty() ? "-" : r.scheme, r.observer));
  y = headline(cv, g, r, y);
  y += 14;
  y = draw_map(cv, r, g, y, Panel::ERROR);
  if (r.minmax_compared) y = draw_map(cv, r, g, y + 6, Panel::CHANGE);
  y = draw_legend(cv, r, g, y + 6);
  if (!r.outliers.empty()) {
    y = paragraph(cv, g, y + 8, fmt::format("outliers ({}):", r.outliers.size()), " font-weight=\"bold\"");
    constexpr std::size_t kShown = 20;
    for (std::size_t i = 0; i < std::min(kShown, r.outliers.size()); ++i) y = paragraph(cv, g, y, r.outliers[i]);
    if (r.outliers.size() > kShown)
      y = paragraph(cv, g, y, fmt::format("... and {} more (--json lists them all)", r.outliers.size() - kShown));
  }
  cv.reserve(0, y - 10);
  return cv.finish(kMargin);
}

}  // namespace fp4forge
