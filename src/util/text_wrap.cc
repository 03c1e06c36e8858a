#include "fp4forge/util/text_wrap.h"

#include <algorithm>
#include <vector>

#include "fp4forge/util/svg.h"

namespace fp4forge::util {
namespace {

/** Runs of two or more spaces after the indent. */
std::size_t gaps(std::string_view line) {
  std::size_t n = 0;
  for (std::size_t at = line.find_first_not_of(' '); at != std::string_view::npos && at < line.size();) {
    const std::size_t gap = line.find("  ", at);
    if (gap == std::string_view::npos) break;
    ++n;
    at = line.find_first_not_of(' ', gap);
  }
  return n;
}

template <class WrapOne>
std::string each_line(std::string_view text, WrapOne wrap_one) {
  std::string out;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t nl = text.find('\n', at);
    const std::string_view line = text.substr(at, nl == std::string_view::npos ? std::string_view::npos : nl - at);
    out += line.empty() ? std::string("\n") : wrap_one(line);
    if (nl == std::string_view::npos) break;
    at = nl + 1;
  }
  return out;
}

}  // namespace

std::string wrap_line(std::string_view line, std::size_t width) {
  if (text_cells(line) <= width) return std::string(line) + "\n";
  const std::size_t lead = std::min(line.find_first_not_of(' '), line.size());
  std::size_t col = line.substr(lead).starts_with("note: ") ? lead + 6 : lead + 4;
  std::size_t head = lead;  // what the first line keeps before the wrapped text: the indent, or the label too
  if (const std::size_t gap = line.find("  ", lead); gap != std::string_view::npos && gap < 40) {
    head = col = std::min(line.find_first_not_of(' ', gap), line.size());
  }
  const std::size_t room = width > col + 20 ? width - col : 20;
  std::string out;
  const std::vector<std::string> pieces = wrap_cells(line.substr(head), room);
  for (std::size_t i = 0; i < pieces.size(); ++i)
    out += (i == 0 ? std::string(line.substr(0, head)) : std::string(col, ' ')) + pieces[i] + "\n";
  return out;
}

std::string wrap_text(std::string_view text, std::size_t width) {
  return each_line(text, [&](std::string_view line) { return wrap_line(line, width); });
}

std::string wrap_prose(std::string_view text, std::size_t width) {
  std::string out = each_line(text, [&](std::string_view line) {
    return gaps(line) >= 2 ? std::string(line) + "\n" : wrap_line(line, width);
  });
  if (!text.empty() && text.back() != '\n' && !out.empty()) out.pop_back();  // a report's last line as it was
  return out;
}

}  // namespace fp4forge::util
