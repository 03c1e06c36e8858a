// The plan drawn as an SVG (kvplan/report.h `to_svg`): each GPU's memory as a stacked bar.
#include "fp4forge/kvplan/report.h"

#include <algorithm>

#include "fp4forge/util/size.h"
#include "fp4forge/util/strings.h"

namespace fp4forge::kvplan {

std::string to_svg(const Plan& plan) {
  constexpr int kLeft = 170, kBarW = 760, kBarH = 34, kGap = 46, kTop = 70;
  std::vector<std::size_t> unplaced;  // seats that fit nowhere: listed under the bars, not left out
  for (std::size_t s = 0; s < plan.placements.size(); ++s)
    if (!plan.placements[s].placed) unplaced.push_back(s);
  const int height = kTop + static_cast<int>(plan.gpus.size()) * (kBarH + kGap) + 20 +
                     (unplaced.empty() ? 0 : 20 + 18 * static_cast<int>(unplaced.size()));
  const int width = kLeft + kBarW + 40;
  std::uint64_t max_total = 1;
  for (const auto& g : plan.gpus) max_total = std::max(max_total, g.gpu.total_bytes);
  const double scale = static_cast<double>(kBarW) / static_cast<double>(max_total);
  std::string o;
  o += fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
                   "font-family=\"sans-serif\" font-size=\"12\">\n", width, height, width, height);
  o += fmt::format("<rect width=\"{}\" height=\"{}\" fill=\"#ffffff\"/>\n", width, height);
  o += "<text x=\"10\" y=\"22\" font-size=\"15\" font-weight=\"bold\">fp4forge plan: GPU memory</text>\n";
  struct Legend {
    const char* name;
    const char* color;
  };
  constexpr Legend kLegend[] = {{"other tenants", "#9e9e9e"}, {"weights", "#4e79a7"}, {"KV cache", "#59a14f"},
                                {"overhead", "#f28e2b"}, {"free", "#f4f4f4"}};
  int lx = 10;
  for (const auto& lg : kLegend) {
    o += fmt::format("<rect x=\"{}\" y=\"34\" width=\"12\" height=\"12\" fill=\"{}\" stroke=\"#555555\" "
                     "stroke-width=\"0.5\"/><text x=\"{}\" y=\"45\">{}</text>\n", lx, lg.color, lx + 16, lg.name);
    lx += 40 + static_cast<int>(std::string_view(lg.name).size()) * 7;
  }
  int y = kTop;
  for (const auto& g : plan.gpus) {
    // Id and total on the first line (always visible), the name below it, cut to the label column (about
    // 24 characters at 12 px) with the full name as a tooltip.
    o += fmt::format("<text x=\"10\" y=\"{}\" font-weight=\"bold\">GPU {} · {}</text>\n", y + 14,
                     util::xml_escape(g.gpu.id), util::xml_escape(format_bytes(g.gpu.total_bytes)));
    if (!g.gpu.name.empty()) {
      const std::string shown = g.gpu.name.size() > 24 ? g.gpu.name.substr(0, 23) + "…" : g.gpu.name;
      o += fmt::format("<text x=\"10\" y=\"{}\"><title>{}</title>{}</text>\n", y + 29, util::xml_escape(g.gpu.name),
                       util::xml_escape(shown));
    }
    double x = kLeft;
    auto seg = [&](std::uint64_t bytes, const char* color, const std::string& title, const std::string& label) {
      const double w = static_cast<double>(bytes) * scale;
      if (w <= 0.0) return;
      o += fmt::format("<rect x=\"{:.2f}\" y=\"{}\" width=\"{:.2f}\" height=\"{}\" fill=\"{}\" stroke=\"#ffffff\" "
                       "stroke-width=\"0.5\"><title>{}</title></rect>\n", x, y, w, kBarH, color, util::xml_escape(title));
      if (!label.empty() && w > 7.0 * static_cast<double>(label.size()))
        o += fmt::format("<text x=\"{:.2f}\" y=\"{}\" fill=\"#ffffff\" text-anchor=\"middle\">{}</text>\n",
                         x + w / 2, y + kBarH / 2 + 4, util::xml_escape(label));
      x += w;
    };
    seg(g.gpu.reserved_bytes, "#616161", "driver reserve: " + format_bytes(g.gpu.reserved_bytes), "");
    seg(g.gpu.used_bytes, "#9e9e9e", "other tenants: " + format_bytes(g.gpu.used_bytes), "others");
    for (const auto& sh : g.shares) {
      const std::string& n = plan.seats[sh.seat].arg.name;
      seg(sh.weights, "#4e79a7", n + " weights: " + format_bytes(sh.weights), n);
      seg(sh.kv, "#59a14f", n + " KV cache: " + format_bytes(sh.kv), "KV");
      seg(sh.overhead, "#f28e2b", n + " overhead: " + format_bytes(sh.overhead), "");
      seg(sh.outside, "#b07aa1", n + " CUDA context (beside the budget): " + format_bytes(sh.outside), "");
    }
    const double free_w = static_cast<double>(g.free_bytes) * scale;
    o += fmt::format("<rect x=\"{:.2f}\" y=\"{}\" width=\"{:.2f}\" height=\"{}\" fill=\"#f4f4f4\" stroke=\"#bbbbbb\" "
                     "stroke-width=\"0.5\"><title>free: {}</title></rect>\n", x, y, free_w, kBarH,
                     util::xml_escape(format_bytes(g.free_bytes)));
    std::string caption = "free " + format_bytes(g.free_bytes);
    for (const auto& sh : g.shares)
      caption += " | " + plan.seats[sh.seat].arg.name + ": weights " + format_bytes(sh.weights) + ", KV " +
                 format_bytes(sh.kv) + ", overhead " + format_bytes(sh.overhead);
    o += fmt::format("<text x=\"{}\" y=\"{}\" fill=\"#333333\">{}</text>\n", kLeft, y + kBarH + 15,
                     util::xml_escape(caption));
    y += kBarH + kGap;
  }
  if (!unplaced.empty()) {
    o += fmt::format("<text x=\"10\" y=\"{}\" font-weight=\"bold\" fill=\"#b00020\">not placed</text>\n", y + 4);
    for (std::size_t s : unplaced) {
      y += 18;
      o += fmt::format("<text x=\"10\" y=\"{}\" fill=\"#b00020\">{}: {}</text>\n", y + 4,
                       util::xml_escape(plan.seats[s].arg.name), util::xml_escape(plan.placements[s].reason));
    }
  }
  o += "</svg>\n";
  return o;
}

}  // namespace fp4forge::kvplan
