#pragma once
/**
 * The one SVG writer of fp4forge's pictures (`verify --svg`, `plan --svg`): a canvas that records the extent of
 * everything drawn on it and sizes itself to that extent, so no text runs off the picture an operator shares.
 *
 * There are no font metrics here: text is set in a monospace font and its width estimated conservatively,
 * kSvgCharEm em per character cell (the common monospace faces advance 0.55-0.60 em: DejaVu Sans Mono, Menlo,
 * Liberation Mono, Courier New 0.60, Consolas 0.55), two cells for an East Asian wide character, four for a
 * byte xml_escape writes as `\xNN`. docs/svg.md describes the pictures and how the tests render them.
 */
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace fp4forge::util {

/** The width of one character cell, in em, that every estimate below uses (above every common monospace face). */
inline constexpr double kSvgCharEm = 0.62;
/** The font family every picture sets (monospace first, so the estimate above holds). */
inline constexpr std::string_view kSvgFontFamily = "DejaVu Sans Mono, Menlo, Consolas, Liberation Mono, monospace";

/** Character cells `s` takes in a monospace font (see the header). */
std::size_t text_cells(std::string_view s);
/** The estimated width in px of `s` at `font_px` (text_cells x kSvgCharEm x font_px). */
double text_width(std::string_view s, double font_px);
/** `s` cut to at most `max_cells` cells at a character boundary, ending in "…" when cut. */
std::string fit_cells(std::string_view s, std::size_t max_cells);
/** `s` broken into lines of at most `max_cells` cells, at spaces where it can, inside a word where it must. */
std::vector<std::string> wrap_cells(std::string_view s, std::size_t max_cells);

/**
 * An SVG document under construction. Coordinates are px; every element's estimated box extends the canvas,
 * and finish() writes `width`/`height`/`viewBox` to cover it plus a margin (never less than a minimum size).
 * Text and titles go through xml_escape; attributes are the caller's (numbers and colours it formats).
 */
class SvgCanvas {
 public:
  enum class Anchor { START, MIDDLE, END };

  explicit SvgCanvas(double font_px = 12) : font_px_(font_px) {}

  /** Text with its baseline at y; `font_px` 0 = the canvas's. `attrs` are extra attributes (` fill="#333"`). */
  void text(double x, double y, std::string_view s, std::string_view attrs = {}, double font_px = 0,
            Anchor anchor = Anchor::START, std::string_view title = {});
  /** A rectangle; `title` becomes its tooltip. The stroke, if any, is the caller's (counted half outside). */
  void rect(double x, double y, double w, double h, std::string_view attrs, std::string_view title = {},
            double stroke = 0);
  void line(double x1, double y1, double x2, double y2, std::string_view attrs);
  /** Any element the caller wrote (defs, patterns), with the box it may cover. */
  void raw(std::string_view element, double right = 0, double bottom = 0);
  /** `<g ATTRS>` ... `</g>`: groups (a legend is `<g id="legend">`, which the tests look for). */
  void open_group(std::string_view attrs);
  void close_group();
  /** Extends the canvas to cover (x, y) (space kept below or right of the last element). */
  void reserve(double x, double y);

  double font_px() const noexcept { return font_px_; }
  double right() const noexcept { return right_; }
  double bottom() const noexcept { return bottom_; }

  /** The whole document: root element sized to the content plus `margin`, a white background, the body. */
  std::string finish(double margin = 10, double min_width = 0, double min_height = 0) const;

 private:
  void extend(double right, double bottom);
  double font_px_;
  double right_ = 0, bottom_ = 0;
  std::string body_;
};

}  // namespace fp4forge::util
