#pragma once
/**
 * The one prose wrapper of fp4forge's text reports (issue 55: lines ran to 326 columns). Every command's report
 * (plan's too) is wrapped at the terminal's width (at most kReportWidth)
 * when stdout is a terminal (cli::print_report), and kept one item per line when it is piped, so grep and logs see
 * whole lines. Widths are character cells (util::text_cells: a wide character is two).
 */
#include <cstddef>
#include <string>
#include <string_view>

namespace fp4forge::util {

/** The widest a report's prose line runs. */
inline constexpr std::size_t kReportWidth = 100;

/** `line` (no newline) wrapped at `width`, each piece ending in a newline: continuation lines start under the first
 * word of its value (after a label and its run of two or more spaces within the first 40 columns, e.g.
 * "  weights          "), else four columns in ("note: " lines: under the text after it). */
std::string wrap_line(std::string_view line, std::size_t width);

/** Every line of `text` through wrap_line. */
std::string wrap_text(std::string_view text, std::size_t width);

/** wrap_text for a whole report: a table row (two or more runs of two or more spaces after its indent) is left
 * whole, as its columns only line up unbroken. */
std::string wrap_prose(std::string_view text, std::size_t width);

}  // namespace fp4forge::util
