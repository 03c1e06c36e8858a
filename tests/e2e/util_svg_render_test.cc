// The pictures fp4forge draws (`verify --svg`, `plan --svg`; util/svg.h), rendered by a real SVG renderer
// (rsvg-convert, Debian's librsvg2-bin, installed by scripts/install-deps.sh) and checked as an operator sees them
// (issue 55): the XML is well-formed (librsvg refuses anything else), the PNG has the declared size, nothing is drawn
// outside the canvas, the legend draws something, no two texts overlap. docs/svg.md describes the method.
//
// Outside the canvas: the SVG is rendered twice on a canvas grown by kGrow px on every side, once with an opaque
// white frame over the grown border drawn first (under everything) and once drawn last (over everything). The two
// PNGs are byte-identical exactly when nothing was painted on the border: a text running off the right edge, a
// caption under the bottom, a stroke past the edge.
#include <gtest/gtest.h>

#include <cstdint>
#include <regex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "fp4forge/kvplan/report.h"
#include "fp4forge/util/strings.h"
#include "fp4forge/util/svg.h"
#include "fp4forge/verify/quality.h"
#include "test_util.h"

namespace fp4forge {
namespace {

using namespace testutil;

constexpr int kGrow = 64;

/** rsvg-convert on PATH, else "" (the tests then fail: CI installs it). */
std::string rsvg_convert() {
  const char* path = std::getenv("PATH");
  for (const auto& dir : util::split(path ? path : "", ':')) {
    const stdfs::path p = stdfs::path(std::string(dir)) / "rsvg-convert";
    if (!dir.empty() && ::access(p.c_str(), X_OK) == 0) return p.string();
  }
  return {};
}
#define REQUIRE_RENDERER()                                                                                      \
  ASSERT_FALSE(rsvg_convert().empty()) << "rsvg-convert not found on PATH: these tests render the SVGs; "      \
                                          "scripts/install-deps.sh installs it (Debian package librsvg2-bin)"

struct Rendered {
  int rc = -1;
  std::string png, err;
  stdfs::path file;
};

/** Renders `svg` to DIR/NAME.png at its own size. */
Rendered render(const std::string& svg, const stdfs::path& dir, const std::string& name) {
  const stdfs::path in = dir / (name + ".svg");
  Rendered r;
  r.file = dir / (name + ".png");
  { std::ofstream(in, std::ios::binary) << svg; }
  const std::string cmd = q(rsvg_convert()) + " " + q(in) + " -o " + q(r.file) + " 2>" + q(dir / (name + ".err"));
  const int st = std::system(cmd.c_str());
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
  r.png = slurp(r.file);
  r.err = slurp(dir / (name + ".err"));
  return r;
}

/** Width and height from a PNG's IHDR (0, 0 when it is not a PNG). */
std::pair<std::uint32_t, std::uint32_t> png_size(const std::string& png) {
  if (png.size() < 24 || png.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0 || png.compare(12, 4, "IHDR") != 0) return {0, 0};
  auto be32 = [&](std::size_t at) {
    std::uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(png[at + i]);
    return v;
  };
  return {be32(16), be32(20)};
}

/** The root element's declared size and where the root tag ends. */
struct Root {
  int w = 0, h = 0;
  std::size_t tag_end = 0;  ///< one past the '>' of <svg ...>
};
Root root_of(const std::string& svg) {
  Root r;
  std::smatch m;
  const std::regex re(R"re(^<svg [^>]*width="(\d+)" height="(\d+)" viewBox="0 0 (\d+) (\d+)"[^>]*>)re");
  if (!std::regex_search(svg, m, re)) return r;
  r.w = std::stoi(m[1]);
  r.h = std::stoi(m[2]);
  r.tag_end = static_cast<std::size_t>(m.length(0));
  return r;
}

/** `svg` on a canvas grown by kGrow on every side, with a white frame over the border, drawn first or last. */
std::string framed(const std::string& svg, const Root& root, bool frame_last) {
  const int W = root.w, H = root.h, g = kGrow;
  std::string tag = svg.substr(0, root.tag_end);
  tag = std::regex_replace(tag, std::regex(R"re(width="\d+" height="\d+" viewBox="[^"]*")re"),
                           fmt::format("width=\"{}\" height=\"{}\" viewBox=\"{} {} {} {}\"", W + 2 * g, H + 2 * g, -g,
                                       -g, W + 2 * g, H + 2 * g));
  const std::string frame = fmt::format(
      "<path d=\"M{0},{0} H{1} V{2} H{0} Z M0,0 V{3} H{4} V0 Z\" fill=\"#ffffff\" fill-rule=\"evenodd\"/>\n", -g,
      W + g, H + g, H, W);
  std::string body = svg.substr(root.tag_end);
  const std::size_t close = body.rfind("</svg>");
  if (frame_last) return tag + body.substr(0, close) + frame + body.substr(close);
  return tag + "\n" + frame + body;
}

/** "" when nothing of `svg` is drawn outside its canvas, else what is wrong (the PNGs are left in `dir`). */
std::string outside_canvas(const std::string& svg, const stdfs::path& dir, const std::string& name) {
  const Root root = root_of(svg);
  if (root.w <= 0 || root.h <= 0) return "no width/height/viewBox on the root element";
  const Rendered plain = render(svg, dir, name);
  if (plain.rc != 0) return "rsvg-convert refused it (not well-formed?): " + plain.err;
  const auto [pw, ph] = png_size(plain.png);
  if (pw != static_cast<std::uint32_t>(root.w) || ph != static_cast<std::uint32_t>(root.h))
    return fmt::format("rendered {}x{}, declared {}x{}", pw, ph, root.w, root.h);
  const Rendered under = render(framed(svg, root, false), dir, name + "-frame-under");
  const Rendered over = render(framed(svg, root, true), dir, name + "-frame-over");
  if (under.rc != 0 || over.rc != 0) return "rsvg-convert refused a framed copy: " + under.err + over.err;
  if (under.png != over.png)
    return fmt::format("something is drawn outside the {}x{} canvas: compare {} with {}", root.w, root.h,
                       under.file.string(), over.file.string());
  return {};
}

/** `svg` without the group `<g id="ID">` (and what it holds). */
std::string without_group(const std::string& svg, const std::string& id) {
  const std::size_t at = svg.find("<g id=\"" + id + "\">");
  if (at == std::string::npos) return svg;
  std::size_t pos = at + 1;
  int depth = 1;
  while (depth > 0) {
    const std::size_t open = svg.find("<g", pos), close = svg.find("</g>", pos);
    if (close == std::string::npos) return svg;
    if (open != std::string::npos && open < close) {
      ++depth;
      pos = open + 2;
    } else {
      --depth;
      pos = close + 4;
    }
  }
  return svg.substr(0, at) + svg.substr(pos);
}

/** "" when the legend group exists and draws something, else what is wrong. */
std::string legend_problem(const std::string& svg, const stdfs::path& dir, const std::string& name) {
  if (svg.find("<g id=\"legend\">") == std::string::npos) return "no <g id=\"legend\">";
  const Rendered with = render(svg, dir, name + "-legend");
  const Rendered without = render(without_group(svg, "legend"), dir, name + "-no-legend");
  if (with.rc != 0 || without.rc != 0) return "render failed: " + with.err + without.err;
  if (with.png == without.png) return "the legend draws nothing";
  return {};
}

std::string unescape(std::string s) {
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&apos;", "'"}, {"&amp;", "&"}}) {
    for (std::size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size()))
      s.replace(p, from.size(), to);
  }
  return s;
}

/** Pairs of <text> elements whose estimated boxes (util/svg.h's width estimate, 0.72 em above the baseline, 0.2 em
 * below) overlap: "" when none. */
std::string text_overlaps(const std::string& svg) {
  struct Box {
    double l, r, t, b;
    std::string s;
  };
  const double root_px = std::stod(std::regex_replace(svg.substr(0, svg.find('>')), std::regex(R"re(.* font-size="([\d.]+)".*)re"), "$1"));
  std::vector<Box> boxes;
  const std::regex re(R"re(<text x="([-\d.]+)" y="([-\d.]+)"([^>]*)>(?:<title>[^<]*</title>)?([^<]*)</text>)re");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator(); ++it) {
    const auto& m = *it;
    const std::string attrs = m[3], s = unescape(m[4]);
    std::smatch fm;
    const double px = std::regex_search(attrs, fm, std::regex(R"re(font-size="([\d.]+)")re")) ? std::stod(fm[1]) : root_px;
    const double x = std::stod(m[1]), y = std::stod(m[2]), w = util::text_width(s, px);
    const double l = attrs.find("text-anchor=\"middle\"") != std::string::npos ? x - w / 2
                     : attrs.find("text-anchor=\"end\"") != std::string::npos  ? x - w
                                                                               : x;
    boxes.push_back({l, l + w, y - 0.72 * px, y + 0.2 * px, s});
  }
  if (boxes.empty()) return "no text found";
  for (std::size_t i = 0; i < boxes.size(); ++i)
    for (std::size_t j = i + 1; j < boxes.size(); ++j) {
      const Box &a = boxes[i], &b = boxes[j];
      if (a.l < b.r && b.l < a.r && a.t < b.b && b.t < a.b && !a.s.empty() && !b.s.empty())
        return "'" + a.s + "' overlaps '" + b.s + "'";
    }
  return {};
}

/** Every check on one picture. With FP4FORGE_SVG_KEEP=DIR the picture's PNG is copied there, to look at. */
void expect_clean_picture(const std::string& svg, const stdfs::path& dir, const std::string& name) {
  SCOPED_TRACE(name);
  if (const char* keep = std::getenv("FP4FORGE_SVG_KEEP"); keep != nullptr && *keep != '\0') {
    const Rendered r = render(svg, dir, name + "-keep");
    std::error_code ec;
    stdfs::copy_file(r.file, stdfs::path(keep) / (name + ".png"), stdfs::copy_options::overwrite_existing, ec);
  }
  EXPECT_EQ(outside_canvas(svg, dir, name), "");
  EXPECT_EQ(legend_problem(svg, dir, name), "");
  EXPECT_EQ(text_overlaps(svg), "");
}

// The method itself: a text past the right edge, a caption under the bottom and a malformed document are caught; a
// legend that draws nothing too.
TEST(SvgRender, TheChecksCatchWhatTheyLookFor) {
  REQUIRE_RENDERER();
  TempDir t;
  util::SvgCanvas ok(12);
  ok.open_group(" id=\"legend\"");
  ok.rect(10, 10, 20, 20, " fill=\"#ff0000\"");
  ok.close_group();
  ok.text(10, 50, "a caption inside");
  const std::string good = ok.finish();
  EXPECT_EQ(outside_canvas(good, t.path, "good"), "");
  EXPECT_EQ(legend_problem(good, t.path, "good"), "");
  EXPECT_EQ(text_overlaps(good), "");
  std::string wide = good;  // a text drawn past the declared width
  wide.insert(wide.rfind("</svg>"), "<text x=\"" + std::to_string(root_of(good).w - 20) + "\" y=\"50\">runs off</text>");
  EXPECT_NE(outside_canvas(wide, t.path, "wide").find("outside"), std::string::npos);
  std::string low = good;
  low.insert(low.rfind("</svg>"), "<text x=\"10\" y=\"" + std::to_string(root_of(good).h + 8) + "\">below</text>");
  EXPECT_NE(outside_canvas(low, t.path, "low").find("outside"), std::string::npos);
  std::string bad = good;
  bad.insert(bad.rfind("</svg>"), "<text x=\"1\" y=\"1\">unclosed");
  EXPECT_NE(outside_canvas(bad, t.path, "bad").find("refused"), std::string::npos);
  std::string empty_legend = good;
  empty_legend.replace(empty_legend.find("fill=\"#ff0000\""), 14, "fill=\"none\"  ");
  EXPECT_EQ(legend_problem(empty_legend, t.path, "empty"), "the legend draws nothing");
  util::SvgCanvas two(12);
  two.text(10, 20, "first text");
  two.text(30, 24, "second");
  EXPECT_NE(text_overlaps(two.finish()), "");
}

// verify --svg on a quantized fixture, searched and min-max, as an operator shares them.
TEST(SvgRender, VerifyQualityPictures) {
  REQUIRE_RENDERER();
  TempDir t;
  const std::string src = kData + "/gemma4-moe-mm";
  std::string out, err;
  for (const char* observer : {"mse", "minmax"}) {
    SCOPED_TRACE(observer);
    const stdfs::path dst = t.path / observer, svg = t.path / (std::string(observer) + ".svg");
    ASSERT_EQ(run_cli("quantize " + q(src) + " " + q(dst) + " --observer " + observer + " -j 2", &out, &err), 0) << err;
    ASSERT_EQ(run_cli("verify " + q(dst) + " --against " + q(src) + " --svg " + q(svg), &out, &err), 0) << out << err;
    const std::string text = slurp(svg);
    expect_clean_picture(text, t.path, observer);
    EXPECT_NE(text.find("id=\"error-scale\""), std::string::npos);
    EXPECT_NE(text.find("id=\"reference-0\""), std::string::npos);
    EXPECT_NE(text.find("class=\"cell-error\""), std::string::npos);
    // The error vs min-max is drawn only where min-max was compared.
    EXPECT_EQ(text.find("id=\"change-scale\"") != std::string::npos, std::string(observer) == "mse") << observer;
  }
  // The text report says the same figure with the same sign as the picture.
  ASSERT_EQ(run_cli("verify " + q(t.path / "mse") + " --against " + q(src), &out, &err), 0);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(out, m, std::regex(R"re(error (-\d+\.\d) % vs min-max)re"))) << out;
  EXPECT_NE(slurp(t.path / "mse.svg").find("error " + m[1].str() + " % vs min-max"), std::string::npos);
}

// Issue 55 tryout: a mixed checkpoint's picture averaged the NVFP4 group's error with the FP8 group's and drew the FP8
// rows grey, the colour of "no gain"; exact (cast) experts pulled the headline down unsaid; a mostly-16-bit
// checkpoint's picture said nothing of the rest; the searched-observer hint was offered for FP8_DYNAMIC.
TEST(SvgRender, MixedExactAndMostlyKeptPicturesSayWhatTheyShow) {
  REQUIRE_RENDERER();
  TempDir t;
  std::string out, err;
  const std::string llama = kData + "/llama";
  ASSERT_EQ(run_cli("quantize " + q(llama) + " " + q(t.path / "mixed") + " --scheme nvfp4a16 --scheme-for "
                    "attention=fp8-block -j 2", &out, &err), 0) << err;
  ASSERT_EQ(run_cli("verify " + q(t.path / "mixed") + " --against " + q(llama) + " --svg " + q(t.path / "mixed.svg"),
                    &out, &err), 0) << out << err;
  const std::string mixed = slurp(t.path / "mixed.svg");
  expect_clean_picture(mixed, t.path, "mixed");
  EXPECT_NE(mixed.find(">group_0 "), std::string::npos) << "one headline line per config group";
  EXPECT_NE(mixed.find(">group_1 "), std::string::npos);
  EXPECT_NE(mixed.find("nothing to compare"), std::string::npos);  // the FP8_BLOCK group's line
  EXPECT_EQ(mixed.find("over every compared weight"), std::string::npos) << "no averaged headline";
  EXPECT_NE(mixed.find("class=\"cell-na\""), std::string::npos) << "FP8 cells are not applicable, not grey";
  EXPECT_NE(mixed.find("data-legend=\"na\""), std::string::npos);
  EXPECT_NE(mixed.find("quantized share"), std::string::npos);
  // A release whose packed FP4 experts are cast exactly: said apart, with the error without them.
  const std::string dsv4 = kData + "/fp8/dsv4-fp8-fp4";
  ASSERT_EQ(run_cli("quantize " + q(dsv4) + " " + q(t.path / "dsv4") + " -j 2", &out, &err), 0) << err;
  ASSERT_EQ(run_cli("verify " + q(t.path / "dsv4") + " --against " + q(dsv4) + " --svg " + q(t.path / "dsv4.svg"),
                    &out, &err), 0) << out << err;
  const std::string exact = slurp(t.path / "dsv4.svg");
  expect_clean_picture(exact, t.path, "dsv4");
  EXPECT_NE(exact.find("are exact (error 0: cast or passed through losslessly)"), std::string::npos);
  // FP8_DYNAMIC takes no searched observer: no hint that one would add a map; the kept share is said.
  ASSERT_EQ(run_cli("quantize " + q(llama) + " " + q(t.path / "fp8") + " --scheme fp8-dynamic --ignore 're:.*mlp\\.' "
                    "-j 2", &out, &err), 0) << err;
  ASSERT_EQ(run_cli("verify " + q(t.path / "fp8") + " --against " + q(llama) + " --svg " + q(t.path / "fp8.svg"),
                    &out, &err), 0) << out << err;
  const std::string fp8 = slurp(t.path / "fp8.svg");
  expect_clean_picture(fp8, t.path, "fp8");
  EXPECT_EQ(fp8.find("searched observer"), std::string::npos);
  EXPECT_NE(fp8.find("Linear-like weight(s) kept in 16 bits"), std::string::npos);
}

// A report with what fixtures do not have: a hundred layers, long and hostile kind names, a module outside any
// layer, absent cells, many outliers, two schemes.
TEST(SvgRender, VerifyQualityPictureAtTheEdges) {
  REQUIRE_RENDERER();
  TempDir t;
  VerifyStats st;
  st.scheme = "NVFP4A16+FP8_BLOCK";
  st.observer = "nvfp4_expanded_mse";
  auto add = [&](std::string module, double rel, double mm) {
    TensorError e;
    e.module = std::move(module);
    e.rows = 128;
    e.cols = 256;
    e.rel_rms = e.ref_rel_rms = rel;
    e.minmax_rel_rms = mm;
    st.per_tensor.push_back(e);
  };
  const std::string long_kind = "mlp.a_very_long_module_name_that_some_family_might_use_for_its_projection_<&\">";
  for (int l = 0; l < 100; ++l) {
    add("model.layers." + std::to_string(l) + ".self_attn.q_proj", l % 17 == 0 ? 0.9 : 0.08 + 0.0001 * l, 0.096);
    if (l % 3) add("model.layers." + std::to_string(l) + "." + long_kind, 0.09, 0.085);
  }
  add("lm_head", 0.02, 0.021);
  const QualityReport r = quality_report(st);
  ASSERT_GT(r.outliers.size(), 3u);
  const std::string svg = to_svg(r);
  expect_clean_picture(svg, t.path, "edges");
  EXPECT_NE(svg.find("class=\"cell-absent\""), std::string::npos);
  EXPECT_NE(svg.find("id=\"reference-1\""), std::string::npos);  // one marker per scheme
  EXPECT_NE(svg.find(">≥0.5<"), std::string::npos);  // 0.9 is beyond the scale (4x the reference): its end says so
  // A few layers: the cells carry their values.
  VerifyStats few = st;
  few.per_tensor.resize(4);
  expect_clean_picture(to_svg(quality_report(few)), t.path, "few");
  const std::string empty = to_svg(quality_report(VerifyStats{}));  // a note, nothing to explain in a legend
  EXPECT_EQ(outside_canvas(empty, t.path, "empty"), "");
  EXPECT_NE(empty.find("no quantized module was compared"), std::string::npos);
}

// plan --svg with two seats on one GPU (one with a long name), a seat that fits nowhere, a second GPU.
TEST(SvgRender, PlanPictures) {
  REQUIRE_RENDERER();
  TempDir t;
  const std::string llama = kData + "/llama";
  const stdfs::path svg = t.path / "plan.svg";
  std::string out, err;
  const int rc = run_cli("plan --seat chat=" + llama + ":weights=19GiB,max_model_len=4096,gpu_memory_utilization=0.5"
                         " --seat a-rather-long-seat-name-for-the-second-model-of-team-x=" + llama +
                         ":weights=17GiB,max_model_len=4096,gpu_memory_utilization=0.4"
                         " --seat big=" + llama + ":weights=19GiB,tp=4 --seat tiny=" + llama + ":gpu=1"
                         " --gpu '0=97887MiB:name=NVIDIA RTX PRO 6000 Blackwell Workstation Edition'"
                         " --gpu 1=48GiB:used=10GiB --svg " + q(svg),
                         &out, &err);
  ASSERT_EQ(rc, 1) << out << err;  // big does not fit
  const std::string text = slurp(svg);
  expect_clean_picture(text, t.path, "plan");
  // Every kind of segment drawn has its legend entry; every seat placed its span and caption.
  const std::regex seg(R"re(class="seg-([a-z]+)")re");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), seg);
       it != std::sregex_iterator(); ++it)
    EXPECT_NE(text.find("data-legend=\"" + (*it)[1].str() + "\""), std::string::npos) << (*it)[1];
  std::size_t spans = 0, captions = 0;
  for (std::size_t p = text.find("class=\"seat-span\""); p != std::string::npos; p = text.find("class=\"seat-span\"", p + 1)) ++spans;
  for (std::size_t p = text.find("class=\"seat-caption\""); p != std::string::npos; p = text.find("class=\"seat-caption\"", p + 1))
    ++captions;
  EXPECT_EQ(spans, 3u);
  EXPECT_GE(captions, 3u);
  EXPECT_NE(text.find(">KV #1 chat<"), std::string::npos) << text;  // a KV block says whose it is
  EXPECT_NE(text.find("#3 big: does not fit"), std::string::npos);
  // Six seats on one card: narrow segments, every caption still inside.
  std::string many;
  for (int s = 0; s < 6; ++s)
    many += " --seat s" + std::to_string(s) + "=" + llama + ":weights=4GiB,max_model_len=4096,gpu_memory_utilization=0.15";
  ASSERT_EQ(run_cli("plan" + many + " --gpu 0=96GiB --svg " + q(t.path / "many.svg"), &out, &err), 0) << out << err;
  expect_clean_picture(slurp(t.path / "many.svg"), t.path, "many");
}

// issue 55: an --svg path that cannot be written is refused before the work (exit 4 for a missing folder, 3 for a
// directory), not after the comparison.
TEST(SvgRender, AnUnwritablePathIsRefusedFirst) {
  TempDir t;
  std::string out, err;
  EXPECT_EQ(run_cli("verify " + kData + "/llama --against " + kData + "/llama --svg " + q(t.path / "no" / "q.svg"), &out,
                    &err),
            4);
  EXPECT_NE(err.find("its folder"), std::string::npos) << err;
  EXPECT_EQ(out.find("result:"), std::string::npos) << out;  // no comparison ran
  // --json's error names the file (issue 55 tryout: "file": null beside a message naming it).
  EXPECT_EQ(
      run_cli("verify " + kData + "/llama --against " + kData + "/llama --json --svg " + q(t.path / "no" / "q.svg"),
              &out, &err),
      4);
  EXPECT_EQ(nlohmann::json::parse(out)["error"]["file"], (t.path / "no" / "q.svg").string()) << out;
  EXPECT_EQ(run_cli("verify " + kData + "/llama --against " + kData + "/llama --svg " + q(t.path), &out, &err), 3);
  EXPECT_EQ(run_cli("plan --seat a=" + kData + "/llama --gpu 0=24GiB --svg " + q(t.path / "no" / "p.svg"), &out, &err), 4);
  EXPECT_FALSE(stdfs::exists(t.path / "no"));
}

}  // namespace
}  // namespace fp4forge
