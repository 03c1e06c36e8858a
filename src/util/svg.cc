// The SVG canvas of fp4forge's pictures (include/fp4forge/util/svg.h).
#include "fp4forge/util/svg.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include <fmt/format.h>

#include "fp4forge/util/strings.h"

namespace fp4forge::util {
namespace {

// East Asian wide and fullwidth blocks and the emoji planes: two cells (a conservative superset).
bool is_wide(std::uint32_t cp) {
  return (cp >= 0x1100 && cp <= 0x115f) || (cp >= 0x2e80 && cp <= 0xa4cf) || (cp >= 0xac00 && cp <= 0xd7a3) ||
         (cp >= 0xf900 && cp <= 0xfaff) || (cp >= 0xfe30 && cp <= 0xfe4f) || (cp >= 0xff00 && cp <= 0xff60) ||
         (cp >= 0xffe0 && cp <= 0xffe6) || (cp >= 0x1f000 && cp <= 0x1faff) || (cp >= 0x20000 && cp <= 0x3fffd);
}

/** One character of `s` at `i`: its byte length and its cells (a byte that starts no well-formed UTF-8
 * character, or a control character, is one byte of four cells: xml_escape may write it as `\xNN`). */
std::pair<std::size_t, std::size_t> next_char(std::string_view s, std::size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return {1, c < 0x20 || c == 0x7f ? 4 : 1};
  const std::size_t len = c >= 0xf5 ? 0 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
  if (len == 0 || i + len > s.size()) return {1, 4};
  std::uint32_t cp = c & (0x7f >> len);
  for (std::size_t j = 1; j < len; ++j) {
    const auto cc = static_cast<unsigned char>(s[i + j]);
    if ((cc & 0xc0) != 0x80) return {1, 4};
    cp = (cp << 6) | (cc & 0x3f);
  }
  if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))
    return {1, 4};
  return {len, is_wide(cp) ? 2 : 1};
}

std::string fmt_px(double v) {
  std::string s = fmt::format("{:.2f}", v);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

}  // namespace

std::size_t text_cells(std::string_view s) {
  std::size_t cells = 0;
  for (std::size_t i = 0; i < s.size();) {
    const auto [len, n] = next_char(s, i);
    cells += n;
    i += len;
  }
  return cells;
}

double text_width(std::string_view s, double font_px) {
  return static_cast<double>(text_cells(s)) * kSvgCharEm * font_px;
}

std::string fit_cells(std::string_view s, std::size_t max_cells) {
  if (text_cells(s) <= max_cells) return std::string(s);
  std::size_t cells = 0, i = 0;
  while (i < s.size()) {
    const auto [len, n] = next_char(s, i);
    if (cells + n + 1 > max_cells) break;  // one cell for the ellipsis
    cells += n;
    i += len;
  }
  return std::string(s.substr(0, i)) + "…";
}

std::vector<std::string> wrap_cells(std::string_view s, std::size_t max_cells) {
  max_cells = std::max<std::size_t>(max_cells, 8);
  std::vector<std::string> lines;
  std::string line;
  std::size_t line_cells = 0;
  auto flush = [&] {
    while (!line.empty() && line.back() == ' ') line.pop_back();
    lines.push_back(std::move(line));
    line.clear();
    line_cells = 0;
  };
  std::size_t i = 0;
  while (i < s.size()) {
    // The next word (up to a space) and its cells.
    std::size_t j = i, cells = 0;
    while (j < s.size() && s[j] != ' ') {
      const auto [len, n] = next_char(s, j);
      cells += n;
      j += len;
    }
    const std::string_view word = s.substr(i, j - i);
    if (line_cells > 0 && line_cells + 1 + cells > max_cells) flush();
    if (cells > max_cells) {  // a word longer than a line: cut it where it must
      for (std::size_t k = 0; k < word.size();) {
        const auto [len, n] = next_char(word, k);
        if (line_cells + n > max_cells) flush();
        line.append(word.substr(k, len));
        line_cells += n;
        k += len;
      }
    } else {
      if (line_cells > 0) {
        line += ' ';
        ++line_cells;
      }
      line.append(word);
      line_cells += cells;
    }
    i = j;
    while (i < s.size() && s[i] == ' ') ++i;
  }
  if (!line.empty() || lines.empty()) flush();
  return lines;
}

void SvgCanvas::extend(double right, double bottom) {
  right_ = std::max(right_, right);
  bottom_ = std::max(bottom_, bottom);
}

void SvgCanvas::reserve(double x, double y) { extend(x, y); }

void SvgCanvas::text(double x, double y, std::string_view s, std::string_view attrs, double font_px, Anchor anchor,
                     std::string_view title) {
  const double px = font_px > 0 ? font_px : font_px_;
  const double w = text_width(s, px);
  const double left = anchor == Anchor::START ? x : anchor == Anchor::MIDDLE ? x - w / 2 : x - w;
  extend(left + w, y + 0.3 * px);  // descenders reach about 0.25 em below the baseline
  body_ += fmt::format("<text x=\"{}\" y=\"{}\"{}{}{}>", fmt_px(x), fmt_px(y),
                       px != font_px_ ? fmt::format(" font-size=\"{}\"", fmt_px(px)) : std::string(),
                       anchor == Anchor::MIDDLE ? " text-anchor=\"middle\""
                       : anchor == Anchor::END  ? " text-anchor=\"end\""
                                                : "",
                       attrs);
  if (!title.empty()) body_ += "<title>" + xml_escape(title) + "</title>";
  body_ += xml_escape(s) + "</text>\n";
}

void SvgCanvas::rect(double x, double y, double w, double h, std::string_view attrs, std::string_view title,
                     double stroke) {
  extend(x + w + stroke / 2, y + h + stroke / 2);
  body_ += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"{}", fmt_px(x), fmt_px(y), fmt_px(w),
                       fmt_px(h), attrs);
  body_ += title.empty() ? "/>\n" : "><title>" + xml_escape(title) + "</title></rect>\n";
}

void SvgCanvas::line(double x1, double y1, double x2, double y2, std::string_view attrs) {
  extend(std::max(x1, x2) + 1, std::max(y1, y2) + 1);
  body_ += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"{}/>\n", fmt_px(x1), fmt_px(y1), fmt_px(x2),
                       fmt_px(y2), attrs);
}

void SvgCanvas::raw(std::string_view element, double right, double bottom) {
  extend(right, bottom);
  body_ += element;
  if (!element.empty() && element.back() != '\n') body_ += '\n';
}

void SvgCanvas::open_group(std::string_view attrs) { body_ += fmt::format("<g{}>\n", attrs); }
void SvgCanvas::close_group() { body_ += "</g>\n"; }

std::string SvgCanvas::finish(double margin, double min_width, double min_height) const {
  const int w = static_cast<int>(std::ceil(std::max(right_ + margin, min_width)));
  const int h = static_cast<int>(std::ceil(std::max(bottom_ + margin, min_height)));
  return fmt::format(
             "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
             "font-family=\"{2}\" font-size=\"{3}\">\n<rect x=\"0\" y=\"0\" width=\"{0}\" height=\"{1}\" fill=\"#ffffff\"/>\n",
             w, h, kSvgFontFamily, fmt_px(font_px_)) +
         body_ + "</svg>\n";
}

}  // namespace fp4forge::util
