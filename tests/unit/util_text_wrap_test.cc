// The one prose wrapper of the text reports (issue 55): hanging indents, widths in cells, table rows kept whole.
#include "fp4forge/util/text_wrap.h"

#include <gtest/gtest.h>

namespace fp4forge::util {
namespace {

TEST(TextWrap, ALineWithinTheWidthIsKept) {
  EXPECT_EQ(wrap_line("  short line", 20), "  short line\n");
  EXPECT_EQ(wrap_text("a\n\nb", 20), "a\n\nb\n");
}

TEST(TextWrap, ContinuationsHangUnderTheTextOrTheValue) {
  // No label: four columns in from the indent (every piece as wide as a continuation's room, 30 - 6).
  EXPECT_EQ(wrap_line("  warning: one two three four five six seven eight nine ten", 30),
            "  warning: one two three\n      four five six seven\n      eight nine ten\n");
  // A label and its gap: under the value.
  EXPECT_EQ(wrap_line("  weights    one two three four five six seven eight", 30),
            "  weights    one two three four\n             five six seven eight\n");
  // A note: under the text after "note: ".
  EXPECT_EQ(wrap_line("note: alpha beta gamma delta epsilon zeta eta theta", 30),
            "note: alpha beta gamma\n      delta epsilon zeta eta\n      theta\n");
}

TEST(TextWrap, WidthIsInCellsAndAWordLongerThanTheLineIsCut) {
  // Six wide characters are 12 cells; two such words and a space, 25: over 20.
  const std::string wide = "\xe4\xb8\xad\xe4\xb8\xad\xe4\xb8\xad\xe4\xb8\xad\xe4\xb8\xad\xe4\xb8\xad";
  const std::string line = wrap_line(wide + " " + wide, 20);
  EXPECT_EQ(line, wide + "\n    " + wide + "\n");
  const std::string cut = wrap_line(std::string(50, 'x'), 30);
  EXPECT_EQ(cut.find('\n'), 26u);  // 30 less the 4-column continuation indent is the room a piece has
}

TEST(TextWrap, ProseWrapsAndTableRowsStayWhole) {
  const std::string row = "  kind      count   mean   max   " + std::string(40, 'y');
  const std::string prose = "  warning: " + std::string(10, 'a') + " " + std::string(10, 'b') + " " +
                            std::string(10, 'c') + " " + std::string(10, 'd');
  EXPECT_EQ(wrap_prose(row + "\n" + prose + "\n", 30),
            row + "\n  warning: aaaaaaaaaa\n      bbbbbbbbbb cccccccccc\n      dddddddddd\n");
  // A report's last line keeps having no newline.
  EXPECT_EQ(wrap_prose("x y", 30), "x y");
  EXPECT_EQ(wrap_prose("", 30), "");
}

}  // namespace
}  // namespace fp4forge::util
