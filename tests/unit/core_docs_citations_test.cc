// Every citation of the project's contract documents resolves inside the repository (issue 15).
//
// Sources, headers and the CLI cite docs/nvfp4a16-format.md (§N.N sections, rules Rn, Appendix A),
// docs/failure-catalog.md (entries Fn, groups A..H), docs/architectures.md (§N.N: checkpoint layouts,
// invariants, KV-cache formulas) and docs/registry.md (§N: the architecture registry). This test reads
// every .cc/.h under src/, include/, cli/ and every .md under docs/ plus README.md, and checks:
// - no file points outside the repository (into the workplace's spec folder beside the checkout);
// - each `§X` following a document name is a heading of that document (`## §3`, `### §3.2`), for
//   nvfp4a16-format.md, architectures.md and registry.md alike;
// - each catalogue number is a `### Fn` heading of docs/failure-catalog.md: those following the
//   document's name, and the bare ones in comments and string literals (C++) or prose (Markdown);
// - each rule id Rn is a `### Rn` heading of docs/nvfp4a16-format.md.
//
// A bare F-number is told from a dtype name (F4, F8_E4M3, F16, F32, BF16, ...) by its group: a run of
// F-numbers joined by ", ", "-", "/", " and ", " or ". A token followed by `_` or glued to a letter is
// never one. A group counts when one of its numbers is not a dtype width (4, 6, 8, 16, 32, 64), or when
// it is a single token in parentheses, "(F16)". Every catalogue entry that shares its number with a
// dtype (F4, F6, F8, F16, F32) exists, so this never hides a wrong citation; only F64 would be missed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace fp4forge {
namespace {

namespace stdfs = std::filesystem;

constexpr char kEnd = '\x01';                 // ends a citation span: a string literal or block comment boundary
constexpr std::string_view kSection = "\xC2\xA7";  // "§" in UTF-8
constexpr std::string_view kEnDash = "\xE2\x80\x93";

struct Source {
  std::string rel;    // path relative to the repository root
  std::string text;   // the file
  std::string prose;  // same length as text: C++ code blanked (comments and literals kept); Markdown as is
};

/** `prefix` followed by a number: "F31", "§3" (GCC 12 warns falsely on `"F" + std::to_string(n)`). */
std::string marker(std::string_view prefix, int n) {
  std::string m(prefix);
  m += std::to_string(n);
  return m;
}

bool ident(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }
bool digit(char c) { return c >= '0' && c <= '9'; }

std::string slurp(const stdfs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/** Keeps comments and the contents of string literals; blanks code, comment markers and char literals. */
std::string cpp_prose(const std::string& t) {
  std::string out(t.size(), ' ');
  enum class St { CODE, LINE, BLOCK, STR, CHR, RAW } st = St::CODE;
  std::string raw_end;
  bool line_start = false;  // inside a block comment, only whitespace so far on this line
  const std::size_t n = t.size();
  auto next = [&](std::size_t i) { return i + 1 < n ? t[i + 1] : '\0'; };
  for (std::size_t i = 0; i < n;) {
    const char c = t[i];
    if (c == '\n') {
      out[i] = '\n';
      if (st == St::LINE || st == St::STR || st == St::CHR) st = St::CODE;
      line_start = st == St::BLOCK;
      ++i;
      continue;
    }
    switch (st) {
      case St::CODE:
        if (c == '/' && next(i) == '/') {
          st = St::LINE;
          i += 2;
        } else if (c == '/' && next(i) == '*') {
          st = St::BLOCK;
          out[i] = kEnd;
          line_start = false;
          i += 2;
        } else if (c == 'R' && next(i) == '"' && (i == 0 || !ident(t[i - 1]))) {
          const std::size_t open = t.find('(', i + 2);
          if (open == std::string::npos) return out;
          raw_end = ")" + t.substr(i + 2, open - i - 2) + "\"";
          out[i] = kEnd;
          st = St::RAW;
          i = open + 1;
        } else if (c == '"') {
          out[i] = kEnd;
          st = St::STR;
          ++i;
        } else if (c == '\'') {
          // A digit separator (1'000'000) sits between two digits; anything else opens a char literal.
          const bool separator = i > 0 && std::isxdigit(static_cast<unsigned char>(t[i - 1])) != 0 &&
                                 std::isxdigit(static_cast<unsigned char>(next(i))) != 0;
          if (!separator) st = St::CHR;
          ++i;
        } else {
          ++i;
        }
        break;
      case St::LINE:
        out[i] = c;
        ++i;
        break;
      case St::BLOCK:
        if (c == '*' && next(i) == '/') {
          out[i] = kEnd;
          st = St::CODE;
          i += 2;
          break;
        }
        if (line_start && (c == ' ' || c == '\t')) {
          ++i;
          break;
        }
        if (line_start && c == '*') {  // the " * " margin of a doc comment
          line_start = false;
          ++i;
          break;
        }
        line_start = false;
        out[i] = c;
        ++i;
        break;
      case St::STR:
        if (c == '\\') {
          if (i + 1 < n && t[i + 1] != '\n') out[i + 1] = t[i + 1];
          i += 2;
        } else if (c == '"') {
          out[i] = kEnd;
          st = St::CODE;
          ++i;
        } else {
          out[i] = c;
          ++i;
        }
        break;
      case St::CHR:
        if (c == '\\') {
          i += 2;
        } else {
          if (c == '\'') st = St::CODE;
          ++i;
        }
        break;
      case St::RAW:
        if (t.compare(i, raw_end.size(), raw_end) == 0) {
          out[i] = kEnd;
          st = St::CODE;
          i += raw_end.size();
        } else {
          out[i] = c;
          ++i;
        }
        break;
    }
  }
  return out;
}

const std::vector<Source>& sources() {
  static const std::vector<Source> all = [] {
    const stdfs::path root = stdfs::path(FP4FORGE_TEST_DATA "/../..").lexically_normal();
    std::vector<Source> v;
    auto add = [&](const stdfs::path& p, bool cpp) {
      Source s;
      s.rel = p.lexically_relative(root).generic_string();
      s.text = slurp(p);
      s.prose = cpp ? cpp_prose(s.text) : s.text;
      v.push_back(std::move(s));
    };
    for (const char* dir : {"src", "include", "cli", "docs"}) {
      const bool md = std::string_view(dir) == "docs";
      for (const auto& e : stdfs::recursive_directory_iterator(root / dir)) {
        if (!e.is_regular_file()) continue;
        const std::string ext = e.path().extension().string();
        if (md ? ext == ".md" : (ext == ".cc" || ext == ".h")) add(e.path(), !md);
      }
    }
    add(root / "README.md", false);
    std::sort(v.begin(), v.end(), [](const Source& a, const Source& b) { return a.rel < b.rel; });
    return v;
  }();
  return all;
}

const Source& doc(std::string_view rel) {
  for (const Source& s : sources())
    if (s.rel == rel) return s;
  static const Source none;
  ADD_FAILURE() << rel << " is missing";
  return none;
}

bool is_cpp(const Source& s) { return !s.rel.ends_with(".md"); }

std::string where(const Source& s, std::size_t pos) {
  const auto line = 1 + std::count(s.text.begin(), s.text.begin() + static_cast<std::ptrdiff_t>(pos), '\n');
  return s.rel + ":" + std::to_string(line);
}

/**
 * The markers of a document's headings, outside fenced code: the first word after the `#`s ("§3.2",
 * "F31", "R1"), a group letter without its dot ("## D." -> "D"), or "Appendix A".
 */
std::set<std::string> heading_markers(const Source& s) {
  std::set<std::string> m;
  std::istringstream in(s.text);
  bool fenced = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("```", 0) == 0) fenced = !fenced;
    if (fenced || line.empty() || line[0] != '#') continue;
    std::size_t p = line.find_first_not_of('#');
    p = line.find_first_not_of(' ', p);
    if (p == std::string::npos) continue;
    std::size_t e = line.find(' ', p);
    std::string word = line.substr(p, e == std::string::npos ? std::string::npos : e - p);
    if (word.size() == 2 && std::isupper(static_cast<unsigned char>(word[0])) != 0 && word[1] == '.') word.pop_back();
    if (word == "Appendix" && e != std::string::npos) {
      const std::size_t e2 = line.find(' ', e + 1);
      word += ' ';
      word += line.substr(e + 1, e2 == std::string::npos ? std::string::npos : e2 - e - 1);
    }
    m.insert(word);
  }
  return m;
}

/** The citation that follows a document name at `p`: a parenthesis, or the text up to where it ends. */
std::string_view citation_span(std::string_view s, std::size_t p) {
  if (p < s.size() && s[p] == '`') ++p;
  while (p < s.size() && (s[p] == ' ' || s[p] == '\t')) ++p;
  const std::size_t limit = std::min(s.size(), p + 200);
  if (p < s.size() && s[p] == '(') {
    int depth = 0;
    for (std::size_t k = p; k < limit; ++k) {
      if (s[k] == '(') ++depth;
      if ((s[k] == ')' && --depth == 0) || s[k] == kEnd) return s.substr(p + 1, k - p - 1);
    }
    return s.substr(p + 1, limit - p - 1);
  }
  std::size_t k = p;
  for (; k < limit; ++k) {
    const char c = s[k];
    if (c == ';' || c == ')' || c == '(' || c == ':' || c == kEnd) break;
    if (c == '.' && (k + 1 == s.size() || std::isspace(static_cast<unsigned char>(s[k + 1])) != 0)) break;
    if (s.compare(k, 3, ".md") == 0) break;  // the next document's citation
    if (c == '\n') {
      const std::size_t q = s.find_first_not_of(" \t", k + 1);
      if (q == std::string_view::npos || s[q] == '\n') break;  // a blank line
    }
  }
  return s.substr(p, k - p);
}

/** Parses `\d+(\.\d+)*` at `p`; returns its end, or `p` if there is no number. */
std::size_t parse_number(std::string_view s, std::size_t p) {
  std::size_t k = p;
  while (k < s.size() && digit(s[k])) ++k;
  if (k == p) return p;
  while (k + 1 < s.size() && s[k] == '.' && digit(s[k + 1])) {
    ++k;
    while (k < s.size() && digit(s[k])) ++k;
  }
  return k;
}

/** `prefix` + a..b: every member when only the last component differs, else the two ends. */
void add_range(const std::string& prefix, const std::string& a, const std::string& b, std::vector<std::string>& out) {
  const std::size_t da = a.rfind('.'), db = b.rfind('.');
  const std::string pa = da == std::string::npos ? "" : a.substr(0, da + 1);
  const std::string pb = db == std::string::npos ? "" : b.substr(0, db + 1);
  if (pa == pb) {
    const int lo = std::stoi(a.substr(pa.size())), hi = std::stoi(b.substr(pb.size()));
    if (lo <= hi && hi - lo <= 60) {
      for (int i = lo; i <= hi; ++i) out.push_back(prefix + pa + std::to_string(i));
      return;
    }
  }
  out.push_back(prefix + a);
  out.push_back(prefix + b);
}

/** Length of a range dash ("-" or "–") at `k`, else 0. */
std::size_t dash_at(std::string_view s, std::size_t k) {
  if (k < s.size() && s[k] == '-') return 1;
  if (s.compare(k, kEnDash.size(), kEnDash) == 0) return kEnDash.size();
  return 0;
}

/** The sections of a span: §N.N, ranges (§3-§5, §3.2-3.5), "Appendix X", a leading bare "5.3". */
std::vector<std::string> cited_sections(std::string_view span) {
  std::vector<std::string> out;
  const std::size_t first = span.find_first_not_of(" \t");
  if (first != std::string_view::npos && digit(span[first])) {
    const std::size_t e = parse_number(span, first);
    const std::string num(span.substr(first, e - first));
    if (num.find('.') != std::string::npos) out.push_back("§" + num);
  }
  for (std::size_t p = span.find(kSection); p != std::string_view::npos; p = span.find(kSection, p)) {
    const std::size_t a0 = p + kSection.size(), a1 = parse_number(span, a0);
    p = a1;
    if (a1 == a0) continue;
    const std::string a(span.substr(a0, a1 - a0));
    if (std::size_t k = a1, d = dash_at(span, a1); d != 0) {
      k += d;
      if (span.compare(k, kSection.size(), kSection) == 0) k += kSection.size();
      const std::size_t b1 = parse_number(span, k);
      if (b1 != k) {
        add_range("§", a, std::string(span.substr(k, b1 - k)), out);
        p = b1;
        continue;
      }
    }
    out.push_back("§" + a);
  }
  for (std::size_t p = span.find("Appendix "); p != std::string_view::npos; p = span.find("Appendix ", p + 1))
    if (p + 9 < span.size() && std::isupper(static_cast<unsigned char>(span[p + 9])) != 0)
      out.push_back(std::string("Appendix ").append(1, span[p + 9]));
  return out;
}

struct Token {
  std::size_t pos, end;
  int num;
};

/** Tokens `<letter><1-2 digits>` standing alone (no identifier character either side, no leading 0). */
std::vector<Token> id_tokens(std::string_view s, char letter) {
  std::vector<Token> v;
  for (std::size_t i = s.find(letter); i != std::string_view::npos; i = s.find(letter, i + 1)) {
    if (i > 0 && ident(s[i - 1])) continue;
    std::size_t k = i + 1;
    while (k < s.size() && digit(s[k]) && k - i <= 2) ++k;
    if (k == i + 1 || s[i + 1] == '0' || (k < s.size() && ident(s[k]))) continue;
    v.push_back({i, k, std::stoi(std::string(s.substr(i + 1, k - i - 1)))});
  }
  return v;
}

/** The separator joining two tokens of a group; ranges are joined by a dash. */
enum class Join { NONE, LIST, RANGE };
Join join_between(std::string_view gap) {
  if (gap == "-" || gap == kEnDash) return Join::RANGE;
  for (std::string_view sep : {", ", ",", "/", " and ", ", and ", " or ", ", or "})
    if (gap == sep) return Join::LIST;
  return Join::NONE;
}

struct Group {
  std::size_t pos;
  std::vector<int> nums;  // ranges expanded
  bool dtype_like;        // every number is a dtype width
  bool parenthesised;     // a single token in "( )"
};

std::vector<Group> id_groups(std::string_view s, char letter) {
  const std::vector<Token> toks = id_tokens(s, letter);
  std::vector<Group> groups;
  auto dtype_width = [](int n) { return n == 4 || n == 6 || n == 8 || n == 16 || n == 32 || n == 64; };
  for (std::size_t i = 0; i < toks.size(); ++i) {
    const Join join = i == 0 ? Join::NONE : join_between(s.substr(toks[i - 1].end, toks[i].pos - toks[i - 1].end));
    if (join == Join::NONE) groups.push_back(Group{toks[i].pos, {}, true, false});
    Group& g = groups.back();
    if (join == Join::RANGE && g.nums.back() < toks[i].num && toks[i].num - g.nums.back() <= 60) {
      for (int n = g.nums.back() + 1; n <= toks[i].num; ++n) g.nums.push_back(n);
    } else {
      g.nums.push_back(toks[i].num);
    }
    if (!dtype_width(toks[i].num)) g.dtype_like = false;
    g.parenthesised = join == Join::NONE && toks[i].pos > 0 && s[toks[i].pos - 1] == '(' && toks[i].end < s.size() &&
                      s[toks[i].end] == ')';
  }
  return groups;
}

/** Every occurrence of a document's file name in the prose of a source, with its citation span. */
template <typename F>
void for_each_citation(std::string_view name, F&& f) {
  for (const Source& s : sources()) {
    const std::string_view prose = s.prose;
    for (std::size_t p = prose.find(name); p != std::string_view::npos; p = prose.find(name, p + 1)) {
      if (p > 0 && (ident(prose[p - 1]) || prose[p - 1] == '-')) continue;  // a longer file name
      f(s, p, citation_span(prose, p + name.size()));
    }
  }
}

TEST(DocsCitations, NothingPointsOutsideTheRepository) {
  // The forbidden paths are assembled here so that this file does not contain them itself.
  const std::string shared = std::string("sha") + "red";
  const std::string outside[] = {shared + "/spec", std::string("..") + "/" + shared};
  for (const Source& s : sources())
    for (const std::string& bad : outside)
      for (std::size_t p = s.text.find(bad); p != std::string::npos; p = s.text.find(bad, p + 1))
        ADD_FAILURE() << where(s, p) << ": mentions '" << bad << "'; cite docs/ instead";
}

TEST(DocsCitations, ContractDocumentsHaveTheirNumberedHeadings) {
  const auto fmt = heading_markers(doc("docs/nvfp4a16-format.md"));
  for (int i = 0; i <= 10; ++i) EXPECT_TRUE(fmt.count(marker("§", i))) << "§" << i;
  for (int i = 1; i <= 5; ++i) EXPECT_TRUE(fmt.count(marker("R", i))) << "R" << i;
  EXPECT_TRUE(fmt.count("Appendix A"));
  const auto cat = heading_markers(doc("docs/failure-catalog.md"));
  for (int i = 1; i <= 44; ++i) EXPECT_TRUE(cat.count(marker("F", i))) << "F" << i;
  for (char g = 'A'; g <= 'H'; ++g) EXPECT_TRUE(cat.count(std::string(1, g))) << "group " << g;
  // docs/architectures.md: §0 sources, §1 config keys .. §7 open questions, with their subsections.
  const auto arch = heading_markers(doc("docs/architectures.md"));
  const int subsections[] = {0, 5, 7, 5, 6, 3, 2, 0};  // §N.1 .. §N.k
  for (int i = 0; i <= 7; ++i) {
    EXPECT_TRUE(arch.count(marker("§", i))) << "architectures.md §" << i;
    for (int k = 1; k <= subsections[i]; ++k) {
      std::string sub = marker("§", i);
      sub += '.';
      sub += std::to_string(k);
      EXPECT_TRUE(arch.count(sub)) << "architectures.md " << sub;
    }
  }
  const auto reg = heading_markers(doc("docs/registry.md"));
  for (int i = 1; i <= 7; ++i) EXPECT_TRUE(reg.count(marker("§", i))) << "registry.md §" << i;
}

TEST(DocsCitations, SectionCitationsResolve) {
  const auto fmt = heading_markers(doc("docs/nvfp4a16-format.md"));
  int checked = 0;
  for (const char* name : {"nvfp4a16-format.md", "architectures.md", "registry.md"}) {
    const std::string rel = std::string("docs/") + name;
    const auto headings = heading_markers(doc(rel));
    int of_this = 0;
    for_each_citation(name, [&](const Source& s, std::size_t p, std::string_view span) {
      for (const std::string& sec : cited_sections(span)) {
        ++checked;
        ++of_this;
        EXPECT_TRUE(headings.count(sec)) << where(s, p) << ": " << name << " " << sec << " is not a heading of "
                                         << rel;
      }
    });
    EXPECT_GT(of_this, 0) << "no section citation of " << rel << " found; is the scanner broken?";
  }
  EXPECT_GT(checked, 20) << "the citation scanner found too little; is it broken?";
}

TEST(DocsCitations, CatalogueNumbersResolve) {
  const auto cat = heading_markers(doc("docs/failure-catalog.md"));
  int checked = 0;
  auto check = [&](const Source& s, std::size_t pos, int n, std::string_view how) {
    ++checked;
    EXPECT_TRUE(cat.count(marker("F", n)))
        << where(s, pos) << ": " << how << " F" << n << " is not an entry of docs/failure-catalog.md";
  };
  // After the document's name: every F-number, and group letters ("section D and E").
  for_each_citation("failure-catalog.md", [&](const Source& s, std::size_t p, std::string_view span) {
    for (const Group& g : id_groups(span, 'F'))
      for (int n : g.nums) check(s, p, n, "failure-catalog.md");
    for (std::string_view word : {"section ", "sections "})
      for (std::size_t k = span.find(word); k != std::string_view::npos; k = span.find(word, k + 1)) {
        std::size_t q = k + word.size();
        while (q < span.size() && std::isupper(static_cast<unsigned char>(span[q])) != 0 &&
               (q + 1 == span.size() || !ident(span[q + 1]))) {
          ++checked;
          EXPECT_TRUE(cat.count(std::string(1, span[q])))
              << where(s, p) << ": failure-catalog.md section " << span[q] << " is not a group heading";
          ++q;
          for (std::string_view sep : {" and ", ", ", "/"})
            if (span.compare(q, sep.size(), sep) == 0) {
              q += sep.size();
              break;
            }
        }
      }
  });
  // Bare F-numbers in comments and string literals (C++) and in Markdown prose.
  for (const Source& s : sources()) {
    for (const Group& g : id_groups(s.prose, 'F')) {
      if (g.dtype_like && !g.parenthesised) continue;  // a dtype name such as F32, F16 or F4
      for (int n : g.nums) check(s, g.pos, n, is_cpp(s) ? "catalogue reference" : "catalogue reference (docs)");
    }
  }
  EXPECT_GT(checked, 100) << "the citation scanner found too little; is it broken?";
}

TEST(DocsCitations, RuleIdsResolve) {
  const auto fmt = heading_markers(doc("docs/nvfp4a16-format.md"));
  int checked = 0;
  for (const Source& s : sources())
    for (const Group& g : id_groups(s.prose, 'R'))
      for (int n : g.nums) {
        ++checked;
        EXPECT_TRUE(fmt.count(marker("R", n)))
            << where(s, g.pos) << ": rule R" << n << " is not a rule of docs/nvfp4a16-format.md";
      }
  EXPECT_GT(checked, 20) << "the citation scanner found too little; is it broken?";
}

// The scanner's own rules, on small inputs.
TEST(DocsCitations, ScannerRules) {
  const std::string code =
      "int x = DType::F32;  // see (F5, F9-F11) and F32\n"
      "const char* s = \"R1 (F8)\"; char c = '\"'; long n = 1'000; auto r = R\"x(F7)x\";";
  const std::string prose = cpp_prose(code);
  ASSERT_EQ(prose.size(), code.size());
  EXPECT_EQ(prose.find("DType"), std::string::npos);
  EXPECT_EQ(prose.find("1'000"), std::string::npos);
  EXPECT_NE(prose.find("(F5, F9-F11)"), std::string::npos);
  EXPECT_NE(prose.find("R1 (F8)"), std::string::npos);
  std::vector<int> cited;
  for (const Group& g : id_groups(prose, 'F'))
    if (!g.dtype_like || g.parenthesised) cited.insert(cited.end(), g.nums.begin(), g.nums.end());
  EXPECT_EQ(cited, (std::vector<int>{5, 9, 10, 11, 8, 7}));

  const std::vector<Group> dtypes = id_groups("BF16, F8_E4M3, 0x7F, F4/F6, F16 or F32", 'F');
  ASSERT_EQ(dtypes.size(), 1u);  // BF16, F8_E4M3 and 0x7F are no tokens; "F4/F6, F16 or F32" is one group
  EXPECT_TRUE(dtypes[0].dtype_like);
  EXPECT_FALSE(dtypes[0].parenthesised);

  EXPECT_EQ(cited_sections(citation_span("(x.md §3-§5, §10; y.md §2)", 5)),
            (std::vector<std::string>{"§3", "§4", "§5", "§10"}));
  EXPECT_EQ(cited_sections(citation_span("x.md (§3 shape invariants,\n §3.2-3.4, §6) and §9", 4)),
            (std::vector<std::string>{"§3", "§3.2", "§3.3", "§3.4", "§6"}));
  EXPECT_EQ(cited_sections(citation_span("x.md 5.3)", 4)), (std::vector<std::string>{"§5.3"}));
  EXPECT_EQ(cited_sections(citation_span("x.md §2 and Appendix A, more", 4)),
            (std::vector<std::string>{"§2", "Appendix A"}));
  EXPECT_TRUE(cited_sections(citation_span("x.md. Then §4", 4)).empty());
}

}  // namespace
}  // namespace fp4forge
