// The SVG canvas (util/svg.h): character cells, wrapping and cutting by cells, a canvas sized to what is drawn.
#include <gtest/gtest.h>

#include "fp4forge/util/svg.h"

namespace fp4forge::util {
namespace {

TEST(UtilSvg, CellsCountCharactersNotBytes) {
  EXPECT_EQ(text_cells("abc"), 3u);
  EXPECT_EQ(text_cells("GPU 0 · 96 GiB"), 14u);  // '·' is two bytes, one cell
  EXPECT_EQ(text_cells("≥−…"), 3u);
  EXPECT_EQ(text_cells("模型"), 4u);                    // East Asian wide: two cells each
  EXPECT_EQ(text_cells("a\x01" "b"), 6u);               // a control byte may be written as \x01: four cells
  EXPECT_EQ(text_cells("\xff\xfe"), 8u);                // ill-formed UTF-8: four cells a byte
  EXPECT_EQ(text_cells("\xe2\x82"), 8u);                // a truncated sequence too
  EXPECT_DOUBLE_EQ(text_width("abcd", 10), 4 * kSvgCharEm * 10);
}

TEST(UtilSvg, WrapBreaksAtSpacesAndInsideWordsOnlyWhenItMust) {
  EXPECT_EQ(wrap_cells("one two three four", 9), (std::vector<std::string>{"one two", "three", "four"}));
  EXPECT_EQ(wrap_cells("", 10), std::vector<std::string>{""});
  const auto lines = wrap_cells("a " + std::string(25, 'x') + " b", 10);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0], "a");
  EXPECT_EQ(lines[1], std::string(10, 'x'));
  EXPECT_EQ(lines[2], std::string(10, 'x'));
  EXPECT_EQ(lines[3], "xxxxx b");
}

TEST(UtilSvg, NoLineIsLongerThanAsked) {
  const std::string text = "seat a-very-long-seat-name-without-spaces-that-goes-on-and-on: weights 19.00 GiB · KV 模型模型 "
                           "cache 24.92 GiB";
  for (std::size_t n : {8u, 13u, 40u, 200u})
    for (const auto& l : wrap_cells(text, n)) EXPECT_LE(text_cells(l), n) << n << " '" << l << "'";
}

TEST(UtilSvg, FitCutsAtACharacterWithAnEllipsis) {
  EXPECT_EQ(fit_cells("short", 10), "short");
  EXPECT_EQ(fit_cells("abcdefghij", 5), "abcd…");
  EXPECT_EQ(fit_cells("··········", 4), "···…");  // never inside a character
  EXPECT_LE(text_cells(fit_cells("模型模型模型", 5)), 5u);
}

TEST(UtilSvg, TheCanvasCoversWhatIsDrawn) {
  SvgCanvas cv(12);
  cv.text(10, 20, "a caption of thirty characters");  // 30 cells: 223.2 px
  cv.rect(5, 40, 100, 30, " fill=\"#000000\"", "a <tip> & more");
  cv.text(300, 90, "end", {}, 0, SvgCanvas::Anchor::END);
  EXPECT_NEAR(cv.right(), 300, 1e-9);  // the end-anchored text reaches furthest; the caption ends at 233.2
  SvgCanvas one(12);
  one.text(10, 20, "a caption of thirty characters");
  EXPECT_NEAR(one.right(), 10 + 30 * kSvgCharEm * 12, 1e-9);
  EXPECT_NEAR(cv.bottom(), 90 + 0.3 * 12, 1e-9);
  const std::string svg = cv.finish(10);
  EXPECT_EQ(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"310\" height=\"104\" viewBox=\"0 0 310 104\"", 0), 0u)
      << svg;
  EXPECT_NE(svg.find("<title>a &lt;tip&gt; &amp; more</title>"), std::string::npos);
  EXPECT_NE(svg.find("text-anchor=\"end\""), std::string::npos);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
}

}  // namespace
}  // namespace fp4forge::util
