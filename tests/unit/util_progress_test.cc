// Progress that tells the truth everywhere (issue 29): the bar never reaches the terminal's width (a redraw that
// wraps leaves lines behind), and off a terminal a status line appears at the interval, whole lines only.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "fp4forge/util/progress.h"

namespace fp4forge {
namespace {

std::string read_all(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) s.append(buf, n);
  return s;
}

TEST(Progress, RenderFitNeverReachesTheWidth) {
  const std::string detail = "model-00003-of-00017.safetensors";
  for (int cols = 10; cols <= 160; ++cols) {
    const std::string line = Progress::render_fit("quantize", 3ull << 30, 16ull << 30, 57, 291, 12.5, detail, cols);
    EXPECT_LT(line.size(), static_cast<std::size_t>(cols)) << cols << ": " << line;
    if (cols >= 140) {
      EXPECT_NE(line.find(detail), std::string::npos) << line;  // room: the whole line
    }
  }
  // At 60 columns the bar narrows before anything else goes.
  const std::string at60 = Progress::render_fit("quantize", 3ull << 30, 16ull << 30, 0, 0, 12.5, "", 60);
  EXPECT_NE(at60.find("ETA"), std::string::npos) << at60;
  EXPECT_EQ(Progress::render_fit("q", 1, 2, 0, 0, 1.0, "d", 0), Progress::render("q", 1, 2, 0, 0, 1.0, "d"));
}

// Narrow terminals (issue 55): fields go whole, never cut mid-word, in a stated order; the ETA goes last.
TEST(Progress, NarrowTerminalsDropWholeFieldsEtaLast) {
  const std::string detail = "model-00003-of-00017.safetensors";
  const std::string full = Progress::render("quantize", 3ull << 30, 16ull << 30, 57, 291, 12.5, detail, 8);
  auto words = [](const std::string& s) {
    std::vector<std::string> w;
    std::string cur;
    for (char c : s + " ") {
      if (c == ' ') {
        if (!cur.empty()) w.push_back(cur);
        cur.clear();
      } else {
        cur += c;
      }
    }
    return w;
  };
  const auto all = words(full);
  for (int cols = 1; cols <= 160; ++cols) {
    const std::string line = Progress::render_fit("quantize", 3ull << 30, 16ull << 30, 57, 291, 12.5, detail, cols);
    EXPECT_LT(line.size(), static_cast<std::size_t>(cols)) << cols;
    // Every word of the fitted line is a whole word of the full line, bar aside (it narrows).
    for (const auto& w : words(line)) {
      if (w.front() == '[') continue;
      EXPECT_NE(std::find(all.begin(), all.end(), w), all.end()) << cols << ": '" << w << "' in " << line;
    }
    // The ETA stays as long as "19% ETA 00:53" fits; then the percentage alone.
    if (cols > 14) {
      EXPECT_NE(line.find("ETA "), std::string::npos) << cols << ": " << line;
    }
    if (cols > 4) {
      EXPECT_NE(line.find("19%"), std::string::npos) << cols << ": " << line;
    }
  }
  // The order fields go in: the detail before the rate, the rate before the counts, the label before the ETA.
  EXPECT_EQ(Progress::render_fit("quantize", 3ull << 30, 16ull << 30, 57, 291, 12.5, detail, 60),
            "quantize [#.......]  19% 3.0 GiB/16.0 GiB 57/291 ETA 00:54");
  EXPECT_EQ(Progress::render_fit("quantize", 3ull << 30, 16ull << 30, 57, 291, 12.5, detail, 40),
            "quantize [#.......]  19% ETA 00:54");
  EXPECT_EQ(Progress::render_fit("quantize", 3ull << 30, 16ull << 30, 57, 291, 12.5, detail, 22), "19% ETA 00:54");
  EXPECT_EQ(Progress::render_fit("quantize", 3ull << 30, 16ull << 30, 57, 291, 12.5, detail, 14), "19% ETA 00:54");
  EXPECT_EQ(Progress::render_fit("quantize", 3ull << 30, 16ull << 30, 57, 291, 12.5, detail, 6), "19%");
  // The closing line: "done in" where the ETA was, fitted the same way.
  EXPECT_EQ(Progress::render_fit("quantize", 16ull << 30, 16ull << 30, 291, 291, 60, detail, 30, true),
            "quantize 100% done in 01:00");
}

TEST(Progress, BarRedrawsStayWithinColumns) {
  ::setenv("COLUMNS", "44", 1);  // the output is not a terminal: the width comes from $COLUMNS
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    Progress p("quantize", 1000, 10, Progress::Mode::ALWAYS, f);
    p.set_detail("model-00001-of-00002.safetensors");
    for (int i = 0; i < 5; ++i) {
      p.add(100, 1);
      std::this_thread::sleep_for(std::chrono::milliseconds(110));
    }
  }
  ::unsetenv("COLUMNS");
  const std::string out = read_all(f);
  std::fclose(f);
  ASSERT_FALSE(out.empty());
  std::size_t start = 0;
  int draws = 0;
  while (start < out.size()) {
    std::size_t end = out.find_first_of("\r\n", start + 1);
    if (end == std::string::npos) end = out.size();
    const std::string seg = out.substr(start, end - start);
    const std::string body = seg.empty() || (seg[0] != '\r' && seg[0] != '\n') ? seg : seg.substr(1);
    EXPECT_LT(body.size(), 44u) << "'" << body << "'";
    draws += body.empty() ? 0 : 1;
    start = end;
  }
  EXPECT_GE(draws, 2);
}

TEST(Progress, LinesModePrintsWholeStatusLinesAtTheInterval) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    Progress p("quantize", 1000, 4, Progress::Mode::LINES, f, 0.05);
    p.set_detail("model-00002-of-00004.safetensors");
    p.add(100, 1);  // before the first interval: nothing yet
    EXPECT_TRUE(read_all(f).empty());
    std::fseek(f, 0, SEEK_END);
    std::this_thread::sleep_for(std::chrono::milliseconds(80));
    p.add(400, 1);
    p.finish();
  }
  const std::string out = read_all(f);
  std::fclose(f);
  EXPECT_EQ(out.find('\r'), std::string::npos) << out;
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out.back(), '\n');
  EXPECT_NE(out.find("quantize ["), std::string::npos) << out;
  EXPECT_NE(out.find("50%"), std::string::npos) << out;
  EXPECT_NE(out.find("model-00002-of-00004.safetensors\n"), std::string::npos) << out;
  EXPECT_NE(out.find(" done in "), std::string::npos) << out;
}

TEST(Progress, LinesModeIsSilentForAJobShorterThanOneInterval) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    Progress p("verify", 1000, 4, Progress::Mode::LINES, f, 30.0);
    p.add(1000, 4);
    p.finish();
  }
  EXPECT_TRUE(read_all(f).empty());
  std::fclose(f);
}

}  // namespace
}  // namespace fp4forge
