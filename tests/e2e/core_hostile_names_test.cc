// Issue 53, class 4 (round 4, R4-B5): untrusted text never reaches a terminal or an SVG raw. A checkpoint whose tensor
// names hold an ANSI escape sequence, a newline, a carriage return, DEL and other C0 bytes goes through every command's
// text report (inspect, quantize --dry-run and the run itself, verify with and without --against, diff, doctor); no
// output may hold a raw control byte but newline and tab, no name may forge a report line, the names must still be
// shown (escaped as `\xNN`), and `verify --svg` must write a well-formed XML document (checked by the small XML 1.0
// well-formedness reader below: no XML library is among the project's dependencies).
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "e2e/verify_test_util.h"
#include "fp4forge/util/strings.h"
#include "test_util.h"

namespace fp4forge {
namespace {

using namespace fp4forge::testutil;
namespace stdfs = std::filesystem;

// ---- a minimal XML 1.0 well-formedness reader (elements, attributes, text, comments, the XML declaration) ----------

/** The next UTF-8 character of `s` at `i` as a code point (advancing `i`), or -1 for ill-formed UTF-8. */
long next_cp(std::string_view s, std::size_t& i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return ++i, c;
  const int len = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c <= 0xdf ? 2 : 0;
  if (len == 0 || i + static_cast<std::size_t>(len) > s.size()) return -1;
  long cp = c & (0xff >> (len + 1));
  for (int k = 1; k < len; ++k) {
    const auto cc = static_cast<unsigned char>(s[i + static_cast<std::size_t>(k)]);
    if ((cc & 0xc0) != 0x80) return -1;
    cp = (cp << 6) | (cc & 0x3f);
  }
  i += static_cast<std::size_t>(len);
  return cp;
}

bool xml_char(long cp) {
  return cp == 0x9 || cp == 0xA || cp == 0xD || (cp >= 0x20 && cp <= 0xD7FF) || (cp >= 0xE000 && cp <= 0xFFFD) ||
         (cp >= 0x10000 && cp <= 0x10FFFF);
}

bool name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':' || c == '-' || c == '.';
}

/** "" when `doc` is a well-formed XML document, else what is wrong and where. */
std::string xml_problem(std::string_view doc) {
  for (std::size_t i = 0; i < doc.size();) {
    const std::size_t at = i;
    const long cp = next_cp(doc, i);
    if (cp < 0 || !xml_char(cp)) return fmt::format("byte {}: not an XML 1.0 character (0x{:02x})", at, doc[at] & 0xff);
  }
  std::vector<std::string> open;
  bool root_seen = false;
  auto reference = [&](std::size_t& i) -> std::string {  // at '&'
    const std::size_t semi = doc.find(';', i);
    if (semi == std::string_view::npos) return fmt::format("byte {}: '&' without ';'", i);
    const std::string_view ref = doc.substr(i + 1, semi - i - 1);
    const bool named = ref == "amp" || ref == "lt" || ref == "gt" || ref == "quot" || ref == "apos";
    bool numeric = ref.size() > 1 && ref[0] == '#';
    if (numeric) {
      const bool hex = ref[1] == 'x';
      const std::string_view digits = ref.substr(hex ? 2 : 1);
      numeric = !digits.empty() && digits.size() < 8;
      long v = 0;
      for (char c : digits) {
        if (!(hex ? std::isxdigit(static_cast<unsigned char>(c)) : std::isdigit(static_cast<unsigned char>(c)))) numeric = false;
        v = v * (hex ? 16 : 10) + (std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : (std::tolower(c) - 'a' + 10));
      }
      numeric = numeric && xml_char(v);
    }
    if (!named && !numeric) return fmt::format("byte {}: bad reference '&{};'", i, ref);
    i = semi + 1;
    return "";
  };
  std::size_t i = 0;
  if (doc.substr(0, 5) == "<?xml") {
    const std::size_t e = doc.find("?>");
    if (e == std::string_view::npos) return "unterminated XML declaration";
    i = e + 2;
  }
  while (i < doc.size()) {
    const char c = doc[i];
    if (c == '&') {
      if (auto p = reference(i); !p.empty()) return p;
      continue;
    }
    if (c == '>') return fmt::format("byte {}: '>' outside a tag", i);
    if (c != '<') {
      if (open.empty() && !std::isspace(static_cast<unsigned char>(c))) return fmt::format("byte {}: text outside the root", i);
      ++i;
      continue;
    }
    if (doc.substr(i, 4) == "<!--") {
      const std::size_t e = doc.find("-->", i + 4);
      if (e == std::string_view::npos) return "unterminated comment";
      i = e + 3;
      continue;
    }
    const bool closing = i + 1 < doc.size() && doc[i + 1] == '/';
    std::size_t j = i + (closing ? 2 : 1);
    const std::size_t n0 = j;
    while (j < doc.size() && name_char(doc[j])) ++j;
    const std::string name(doc.substr(n0, j - n0));
    if (name.empty()) return fmt::format("byte {}: a tag without a name", i);
    if (closing) {
      while (j < doc.size() && std::isspace(static_cast<unsigned char>(doc[j]))) ++j;
      if (j >= doc.size() || doc[j] != '>') return fmt::format("byte {}: bad closing tag", i);
      if (open.empty() || open.back() != name) return fmt::format("byte {}: </{}> closes nothing open", i, name);
      open.pop_back();
      i = j + 1;
      continue;
    }
    if (open.empty() && root_seen) return fmt::format("byte {}: a second root element", i);
    bool self_closed = false;
    for (;;) {  // attributes
      while (j < doc.size() && std::isspace(static_cast<unsigned char>(doc[j]))) ++j;
      if (j >= doc.size()) return "unterminated tag";
      if (doc[j] == '>') break;
      if (doc.substr(j, 2) == "/>") {
        self_closed = true;
        ++j;
        break;
      }
      const std::size_t a0 = j;
      while (j < doc.size() && name_char(doc[j])) ++j;
      if (j == a0 || j + 1 >= doc.size() || doc[j] != '=' || (doc[j + 1] != '"' && doc[j + 1] != '\''))
        return fmt::format("byte {}: bad attribute in <{}>", j, name);
      const char quote = doc[j + 1];
      j += 2;
      while (j < doc.size() && doc[j] != quote) {
        if (doc[j] == '<') return fmt::format("byte {}: '<' in an attribute value", j);
        if (doc[j] == '&') {
          if (auto p = reference(j); !p.empty()) return p;
        } else {
          ++j;
        }
      }
      if (j >= doc.size()) return "unterminated attribute value";
      ++j;
    }
    root_seen = true;
    if (!self_closed) open.push_back(name);
    i = j + 1;
  }
  if (!open.empty()) return fmt::format("<{}> is never closed", open.back());
  if (!root_seen) return "no root element";
  return "";
}

TEST(HostileNames, TheXmlCheckerItselfRefusesWhatParsersRefuse) {
  EXPECT_EQ(xml_problem("<svg a=\"1\"><title>x &amp; y &#13;</title><g/></svg>\n"), "");
  EXPECT_NE(xml_problem("<svg><title>\x1b[31m</title></svg>"), "");  // the round-4 SVG
  EXPECT_NE(xml_problem("<svg><title>a\x01</title></svg>"), "");
  EXPECT_NE(xml_problem("<svg><title>a & b</title></svg>"), "");
  EXPECT_NE(xml_problem("<svg><title>a</svg>"), "");
  EXPECT_NE(xml_problem("<svg a=\"<\"></svg>"), "");
  EXPECT_NE(xml_problem("<svg>\xff</svg>"), "");
  // xml_escape makes any name well-formed, the bytes above included.
  for (const std::string_view hostile : {std::string_view("\x1b[31mred\x1b[0m"), std::string_view("a\nb\rc\x7f\x01\x00", 8),
                                         std::string_view("</title><script>]]>&\"'"), std::string_view("\xff\xfe\xef\xbf\xbe")})
    EXPECT_EQ(xml_problem("<svg><title>" + util::xml_escape(hostile) + "</title><g a=\"" + util::xml_escape(hostile) +
                          "\"/></svg>"),
              "")
        << util::printable(hostile);
}

/** The bytes a terminal must never receive raw: every C0 control but newline and tab, and DEL. */
std::string raw_controls(std::string_view s) {
  std::string found;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) found += fmt::format(" 0x{:02x}@{}", c, i);
  }
  return found;
}

TEST(HostileNames, EveryTextReportEscapesNamesFromAFile) {
  TempDir tmp;
  const stdfs::path src = tmp.path / "src", qdir = tmp.path / "q", svg = tmp.path / "q.svg";
  stdfs::copy(kData + "/llama", src, stdfs::copy_options::recursive);
  // Two weights renamed, each with bytes a terminal or an SVG must not receive raw (one name a line forger).
  const std::string esc_mod = "model.layers.0.mlp.\x1b[31mred\x1b[0m", nl_mod = "model.layers.1.mlp.\nFORGED\r\x7f\x01\x1b]0;t\x07";
  vtest::rename_tensor(src, "model.layers.0.mlp.down_proj.weight", esc_mod + ".weight");
  vtest::rename_tensor(src, "model.layers.1.mlp.down_proj.weight", nl_mod + ".weight");
  std::string out, err;
  // Forced by name (single-quoted shell words carry every byte but NUL and the quote).
  const std::string force = "--force-quantize " + q(esc_mod) + " --force-quantize " + q(nl_mod);
  ASSERT_EQ(run_cli("quantize " + q(src) + " " + q(qdir) + " -j 2 --no-progress " + force, &out, &err), 0) << err;
  EXPECT_EQ(raw_controls(out + err), "") << "quantize";
  struct Command {
    std::string args;
    bool shows_names;  ///< the report lists the renamed tensors (so the escaped form must appear)
  };
  const std::vector<Command> commands{
      {"inspect " + q(src), true},
      {"inspect " + q(qdir), false},
      {"quantize " + q(src) + " --dry-run", true},
      {"quantize " + q(src) + " --dry-run --verbose " + force, true},
      {"verify " + q(qdir), false},
      {"verify " + q(qdir) + " --against " + q(src) + " --svg " + q(svg), true},
      {"diff " + q(qdir) + " " + q(kData + "/llama"), true},
      {"diff " + q(src) + " " + q(kData + "/llama") + " --values --all", true},
      {"doctor " + q(src), false},
      {"doctor " + q(qdir), false},
  };
  for (const Command& c : commands) {
    SCOPED_TRACE(c.args);
    const int rc = run_cli(c.args, &out, &err);
    EXPECT_LE(rc, 1) << err;
    EXPECT_EQ(raw_controls(out), "") << out;
    EXPECT_EQ(raw_controls(err), "") << err;
    for (const std::string& text : {out, err}) {
      std::size_t p = 0;
      for (;;) {
        EXPECT_NE(text.compare(p, 6, "FORGED"), 0) << "a name forged a line:\n" << text;
        p = text.find('\n', p);
        if (p == std::string::npos) break;
        ++p;
      }
    }
    if (c.shows_names) {
      EXPECT_NE((out + err).find("\\x1b[31mred\\x1b[0m"), std::string::npos) << out << err;
      EXPECT_NE((out + err).find("\\x0aFORGED\\x0d\\x7f\\x01\\x1b]0;t\\x07"), std::string::npos) << out << err;
    }
  }
  // The SVG: well-formed XML whatever the names hold, the names shown escaped in it.
  ASSERT_TRUE(stdfs::exists(svg));
  const std::string doc = slurp(svg);
  EXPECT_EQ(xml_problem(doc), "");
  EXPECT_NE(doc.find("\\x1b[31mred\\x1b[0m"), std::string::npos);
}

}  // namespace
}  // namespace fp4forge
