// The plan drawn as an SVG (kvplan/report.h `to_svg`; docs/cli/plan.md "The picture"): each GPU's memory as a
// stacked bar to one scale, every seat's span bracketed and numbered under it, its KV block labelled with the
// seat, one caption line per seat, a legend (`<g id="legend">`) of every kind of segment the bars can hold. The
// canvas (util/svg.h) grows to whatever the captions need.
#include <algorithm>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "fp4forge/kvplan/report.h"
#include "fp4forge/util/format.h"
#include "fp4forge/util/svg.h"

namespace fp4forge::kvplan {
namespace {

using util::SvgCanvas;
using Anchor = SvgCanvas::Anchor;

constexpr double kMargin = 12, kBarW = 760, kBarH = 34, kSegPx = 11;

/** One kind of segment: the class on each rect, the legend's words, its fill. */
struct SegKind {
  const char* id;
  const char* legend;
  const char* fill;
};
constexpr SegKind kReserve{"reserve", "driver reserve", "#616161"};
constexpr SegKind kOthers{"others", "other tenants", "#9e9e9e"};
constexpr SegKind kWeights{"weights", "seat weights", "#4e79a7"};
constexpr SegKind kKv{"kv", "seat KV cache", "#59a14f"};
constexpr SegKind kOverhead{"overhead", "seat overhead (in the budget)", "#f28e2b"};
constexpr SegKind kOutside{"outside", "beside the budget (CUDA context, NCCL)", "#b07aa1"};
constexpr SegKind kFree{"free", "free", "#f4f4f4"};
constexpr SegKind kHeadroom{"headroom", "headroom (kept free by placement)", "url(#headroom)"};
constexpr const SegKind* kKinds[] = {&kReserve, &kOthers, &kWeights, &kKv, &kOverhead, &kOutside, &kFree, &kHeadroom};

std::string seat_tag(std::size_t s) { return fmt::format("#{}", s + 1); }

/** Wrapped lines from y (baseline) at x; returns the next baseline. */
double lines(SvgCanvas& cv, double x, double y, std::string_view text, std::string_view attrs = {}) {
  const auto cells = static_cast<std::size_t>((kBarW + 220) / (util::kSvgCharEm * cv.font_px()));
  for (const auto& l : util::wrap_cells(text, cells)) {
    cv.text(x, y, l, attrs);
    y += 16;
  }
  return y;
}

double draw_legend(SvgCanvas& cv, double y) {
  cv.open_group(" id=\"legend\"");
  double x = kMargin;
  for (const SegKind* k : kKinds) {
    const double w = 22 + util::text_width(k->legend, 12) + 18;
    if (x > kMargin && x + w > kMargin + kBarW + 120) {  // wrap to the next row of the legend
      x = kMargin;
      y += 20;
    }
    cv.rect(x, y, 14, 14, fmt::format(" data-legend=\"{}\" fill=\"{}\" stroke=\"#555555\" stroke-width=\"0.5\"", k->id, k->fill),
            {}, 0.5);
    cv.text(x + 20, y + 11, k->legend);
    x += w;
  }
  cv.close_group();
  return y + 34;
}

/** One GPU: its header, its bar, the seats bracketed under it, a caption line per seat; returns the next y. */
double draw_gpu(SvgCanvas& cv, const Plan& plan, const GpuPlan& g, double scale, double y) {
  std::string header = fmt::format("GPU {} · {}", g.gpu.id, format_bytes(g.gpu.total_bytes));
  if (!g.gpu.name.empty()) header += " · " + g.gpu.name;
  const std::string shown = util::fit_cells(header, 100);  // the tooltip has it whole
  cv.text(kMargin, y, shown, " font-weight=\"bold\"", 0, Anchor::START, shown != header ? header : std::string());
  y += 8;
  const double top = y;
  double x = kMargin;
  auto seg = [&](std::uint64_t bytes, const SegKind& k, const std::string& title, const std::string& label) {
    const double w = static_cast<double>(bytes) * scale;
    if (w <= 0.0) return;
    cv.rect(x, top, w, kBarH, fmt::format(" class=\"seg-{}\" fill=\"{}\" stroke=\"#ffffff\" stroke-width=\"0.5\"", k.id, k.fill),
            title);
    if (!label.empty() && w >= util::text_width(label, kSegPx) + 6)
      cv.text(x + w / 2, top + kBarH / 2 + 4, label, " fill=\"#ffffff\"", kSegPx, Anchor::MIDDLE);
    x += w;
  };
  seg(g.gpu.reserved_bytes, kReserve, "driver reserve: " + format_bytes(g.gpu.reserved_bytes), "");
  seg(g.gpu.used_bytes, kOthers, "other tenants: " + format_bytes(g.gpu.used_bytes), "others");
  struct Span {
    std::size_t seat;
    double from, to;
  };
  std::vector<Span> spans;
  for (const auto& sh : g.shares) {
    const std::string& n = plan.seats[sh.seat].arg.name;
    const std::string tag = seat_tag(sh.seat);
    const double from = x;
    const double ww = static_cast<double>(sh.weights) * scale;
    seg(sh.weights, kWeights, tag + " " + n + " weights: " + format_bytes(sh.weights),
        ww >= util::text_width(tag + " " + n, kSegPx) + 6 ? tag + " " + n : tag);
    const double kw = static_cast<double>(sh.kv) * scale;
    seg(sh.kv, kKv, tag + " " + n + " KV cache: " + format_bytes(sh.kv),
        kw >= util::text_width("KV " + tag + " " + n, kSegPx) + 6 ? "KV " + tag + " " + n : "KV " + tag);
    seg(sh.overhead, kOverhead, tag + " " + n + " overhead: " + format_bytes(sh.overhead), "");
    if (sh.kv_margin > 0)
      seg(sh.kv_margin, kOverhead,
          tag + " " + n + " KV margin (budget kept from the blocks): " + format_bytes(sh.kv_margin), "");
    seg(sh.outside, kOutside, tag + " " + n + " beside the budget (CUDA context): " + format_bytes(sh.outside), "");
    spans.push_back({sh.seat, from, x});
  }
  const double free_x = x;
  const double free_w = static_cast<double>(g.free_bytes) * scale;
  cv.rect(x, top, free_w, kBarH, " class=\"seg-free\" fill=\"#f4f4f4\" stroke=\"#bbbbbb\" stroke-width=\"0.5\"",
          "free: " + format_bytes(g.free_bytes), 0.5);
  const double head_w = static_cast<double>(std::min(g.gpu.headroom_bytes, g.free_bytes)) * scale;
  if (head_w > 0)
    cv.rect(free_x + free_w - head_w, top, head_w, kBarH,
            " class=\"seg-headroom\" fill=\"url(#headroom)\" stroke=\"#bbbbbb\" stroke-width=\"0.5\"",
            "headroom kept free: " + format_bytes(g.gpu.headroom_bytes), 0.5);
  y = top + kBarH;
  // Each seat's span bracketed under the bar, with its number (and name where it fits).
  for (const Span& sp : spans) {
    cv.raw(fmt::format("<path class=\"seat-span\" d=\"M{0:.2f},{1:.2f} v5 H{2:.2f} v-5\" fill=\"none\" stroke=\"#333333\"/>",
                       sp.from + 1, y + 2, sp.to - 1),
           sp.to, y + 8);
    const std::string tag = seat_tag(sp.seat), full = tag + " " + plan.seats[sp.seat].arg.name;
    const std::string label = sp.to - sp.from >= util::text_width(full, kSegPx) + 4 ? full
                              : sp.to - sp.from >= util::text_width(tag, kSegPx) + 2 ? tag
                                                                                   : std::string();
    if (!label.empty()) cv.text((sp.from + sp.to) / 2, y + 19, label, " class=\"seat-label\"", kSegPx, Anchor::MIDDLE);
  }
  y += spans.empty() ? 18 : 38;
  std::string free_line = "free " + format_bytes(g.free_bytes);
  if (g.gpu.headroom_bytes > 0) free_line += ", of which headroom kept free " + format_bytes(g.gpu.headroom_bytes);
  if (g.gpu.used_bytes > 0) free_line += "; other tenants " + format_bytes(g.gpu.used_bytes);
  free_line += "; driver reserve " + format_bytes(g.gpu.reserved_bytes);
  y = lines(cv, kMargin, y, free_line, " fill=\"#333333\"");
  for (const auto& sh : g.shares) {
    const auto& p = plan.placements[sh.seat];
    y = lines(cv, kMargin, y,
              fmt::format("{} {}: weights {} · KV cache {} · overhead {}{} · beside the budget {} · "
                          "gpu_memory_utilization {}",
                          seat_tag(sh.seat), plan.seats[sh.seat].arg.name, format_bytes(sh.weights),
                          format_bytes(sh.kv), format_bytes(sh.overhead),
                          sh.kv_margin > 0 ? " · KV margin " + format_bytes(sh.kv_margin) : std::string(),
                          format_bytes(sh.outside), format_util(p.util)),
              " class=\"seat-caption\" fill=\"#333333\"");
  }
  return y + 18;
}

}  // namespace

std::string to_svg(const Plan& plan) {
  SvgCanvas cv(12);
  cv.raw("<defs><pattern id=\"headroom\" patternUnits=\"userSpaceOnUse\" width=\"6\" height=\"6\"><rect width=\"6\" "
         "height=\"6\" fill=\"#f4f4f4\"/><path d=\"M0,6 L6,0 M-1,1 L1,-1 M5,7 L7,5\" stroke=\"#7f7f7f\" "
         "stroke-width=\"1\"/></pattern></defs>");
  double y = 24;
  cv.text(kMargin, y, "fp4forge plan: GPU memory", " font-weight=\"bold\"", 15);
  y = lines(cv, kMargin, y + 20,
            "each bar is one GPU's memory, all to one scale; under it each seat's span, numbered as in the lines below "
            "the bar", " fill=\"#333333\"");
  y = draw_legend(cv, y - 8);
  std::uint64_t max_total = 1;
  for (const auto& g : plan.gpus) max_total = std::max(max_total, g.gpu.total_bytes);
  const double scale = kBarW / static_cast<double>(max_total);
  for (const auto& g : plan.gpus) y = draw_gpu(cv, plan, g, scale, y);
  bool any_unplaced = false;
  for (std::size_t s = 0; s < plan.placements.size(); ++s) {
    if (plan.placements[s].placed) continue;
    if (!any_unplaced) cv.text(kMargin, y, "not placed", " font-weight=\"bold\" fill=\"#b00020\"");
    any_unplaced = true;
    y = lines(cv, kMargin, y + 18,
              fmt::format("{} {}: {}", seat_tag(s), plan.seats[s].arg.name, plan.placements[s].reason),
              " fill=\"#b00020\"") - 18;
  }
  // A placed seat vLLM could not start is drawn as placed, and said in red under the bars (issue 55 tryout: it read
  // as a healthy seat).
  bool any_blocked = false;
  for (std::size_t s = 0; s < plan.placements.size(); ++s) {
    const SeatPlacement& p = plan.placements[s];
    if (!p.placed || !p.cannot_start) continue;
    std::string why = p.blocker;
    for (const StartBlocker& b : plan.seats[s].serving.blockers)
      if (!b.sized_only) why += (why.empty() ? "" : "; ") + b.reason + " (fix: " + b.fix + ")";
    if (!any_blocked)
      cv.text(kMargin, y + (any_unplaced ? 18 : 0), "cannot start", " font-weight=\"bold\" fill=\"#b00020\"");
    if (!any_blocked && any_unplaced) y += 18;
    any_blocked = true;
    y = lines(cv, kMargin, y + 18, fmt::format("{} {}: {}", seat_tag(s), plan.seats[s].arg.name, why),
              " fill=\"#b00020\"") -
        18;
  }
  cv.reserve(0, y);
  return cv.finish(kMargin);
}

}  // namespace fp4forge::kvplan
