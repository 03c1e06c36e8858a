// YAML read the way PyYAML's safe_load would accept it (util/yaml_strict.h).
#include "fp4forge/util/yaml_strict.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>

#include "fp4forge/util/regex.h"
#include "fp4forge/util/strings.h"

namespace fp4forge::util {
namespace {

constexpr std::string_view kCoreTag = "tag:yaml.org,2002:";

/** Whether PyYAML's reader takes code point `cp` (its NON_PRINTABLE set, inverted). */
bool pyyaml_printable(std::uint32_t cp) {
  return cp == 0x09 || cp == 0x0a || cp == 0x0d || (cp >= 0x20 && cp <= 0x7e) || cp == 0x85 ||
         (cp >= 0xa0 && cp <= 0xd7ff) || (cp >= 0xe000 && cp <= 0xfffd) || (cp >= 0x10000 && cp <= 0x10ffff);
}

/** The first character PyYAML's reader refuses: ill-formed UTF-8 or a character outside its printable set. */
Status check_characters(std::string_view text, std::string_view where, Errc errc) {
  const auto bad = find_utf8(text, [](std::uint32_t cp) { return !pyyaml_printable(cp); });
  if (!bad) return {};
  const auto [line, col] = line_column(text, bad->offset);
  if (bad->ill_formed)
    return make_error(errc, "{}: line {}, column {}: byte 0x{:02x} is not valid UTF-8; expected UTF-8 text (PyYAML "
                      "refuses it)",
                      where, line, col, bad->cp);
  return make_error(errc, "{}: line {}, column {}: character U+{:04X} is not allowed in YAML; expected tabs, line "
                    "breaks and printable characters only (PyYAML refuses it)",
                    where, line, col, bad->cp);
}

/** The line (1-based) of the `---` that starts the document whose content begins at `pos` (-1: the text's end). */
std::size_t document_line(std::string_view text, int pos) {
  std::size_t end = pos < 0 || static_cast<std::size_t>(pos) > text.size() ? text.size() : static_cast<std::size_t>(pos);
  for (std::size_t at = end; at-- > 0;) {
    if ((at == 0 || text[at - 1] == '\n') && text.substr(at).starts_with("---")) return line_column(text, at).first;
  }
  return line_column(text, end).first;
}

/** Whether `tag` is YAML's core tag `name` ("tag:yaml.org,2002:int"). */
bool is_core(const std::string& tag, std::string_view name) {
  return tag.size() == kCoreTag.size() + name.size() && tag.starts_with(kCoreTag) && tag.ends_with(name);
}

/** A core tag's short form ("!!int"), any other tag as written; cut and escaped for a message. */
std::string tag_text(const std::string& tag) {
  return printable(tag.starts_with(kCoreTag) ? "!!" + tag.substr(kCoreTag.size()) : tag, 80);
}

// PyYAML's implicit resolvers (YAML 1.1), whole-text matches.
const Regex& re_bool() {
  static const Regex r = *Regex::compile("yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF");
  return r;
}
const Regex& re_null() {
  static const Regex r = *Regex::compile("~|null|Null|NULL|");
  return r;
}
const Regex& re_int() {
  static const Regex r = *Regex::compile(
      "[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+");
  return r;
}
const Regex& re_float() {
  static const Regex r = *Regex::compile(
      "[-+]?(?:[0-9][0-9_]*)\\.[0-9_]*(?:[eE][-+][0-9]+)?|\\.[0-9_]+(?:[eE][-+][0-9]+)?|"
      "[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\\.[0-9_]*|[-+]?\\.(?:inf|Inf|INF)|\\.(?:nan|NaN|NAN)");
  return r;
}

/** `s` without '_' (PyYAML drops them from numbers), and its sign split off. */
std::pair<bool, std::string> sign_and_digits(std::string_view s) {
  std::string d;
  for (char c : s)
    if (c != '_') d += c;
  bool neg = false;
  if (!d.empty() && (d[0] == '-' || d[0] == '+')) {
    neg = d[0] == '-';
    d.erase(0, 1);
  }
  return {neg, d};
}

/** The key a canonical integer is compared by; nullopt beyond 64 bits (then the text is the key). */
std::optional<std::string> int_key(std::string_view s) {
  auto [neg, d] = sign_and_digits(s);
  std::uint64_t v = 0;
  const auto add = [&v](std::uint64_t base, std::uint64_t digit) {  // v = v * base + digit; false on overflow
    return !__builtin_mul_overflow(v, base, &v) && !__builtin_add_overflow(v, digit, &v);
  };
  const auto digit = [](char c) -> std::uint64_t {
    return c <= '9' ? static_cast<std::uint64_t>(c - '0') : static_cast<std::uint64_t>((c | 0x20) - 'a' + 10);
  };
  if (d.find(':') != std::string::npos) {  // sexagesimal: 1:20 is 80
    std::size_t p = 0;
    while (p <= d.size()) {
      const std::size_t q = std::min(d.find(':', p), d.size());
      const std::uint64_t part = std::strtoull(d.substr(p, q - p).c_str(), nullptr, 10);
      if (!add(60, part)) return std::nullopt;
      p = q + 1;
    }
  } else {
    const unsigned base = d.starts_with("0b") ? 2 : d.starts_with("0x") ? 16 : d.size() > 1 && d[0] == '0' ? 8 : 10;
    const std::size_t from = base == 2 || base == 16 ? 2 : base == 8 ? 1 : 0;
    for (std::size_t i = from; i < d.size(); ++i)
      if (!add(base, digit(d[i]))) return std::nullopt;
  }
  return fmt::format("int:{}{}", neg && v != 0 ? "-" : "", v);
}

/** The key a float is compared by: an integral value is its integer's key (Python: 31.0 == 31). Every `.nan` is one
 * key: PyYAML constructs each as its one shared NaN object, and a dict finds a key by identity first. */
std::optional<std::string> float_key(std::string_view s) {
  auto [neg, d] = sign_and_digits(s);
  d = ascii_lower(d);
  double v = 0;
  if (d == ".inf") {
    v = INFINITY;
  } else if (d == ".nan") {
    return std::string("float:nan");
  } else if (d.find(':') != std::string::npos) {
    std::size_t p = 0;
    while (p <= d.size()) {
      const std::size_t q = std::min(d.find(':', p), d.size());
      v = v * 60 + std::strtod(d.substr(p, q - p).c_str(), nullptr);
      p = q + 1;
    }
  } else {
    char* end = nullptr;
    v = std::strtod(d.c_str(), &end);
    if (d.empty() || end != d.c_str() + d.size() || std::isnan(v)) return std::nullopt;
  }
  if (neg) v = -v;
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1.8e19)
    return fmt::format("int:{}{}", v < 0 ? "-" : "", static_cast<std::uint64_t>(std::fabs(v)));
  return fmt::format("float:{}", v);
}

/** An event handler that keeps only where the last document started (its parse position). */
struct DocumentStart : YAML::EventHandler {
  int pos = -1;
  void OnDocumentStart(const YAML::Mark& m) override { pos = m.pos; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

/** Walks one document: keys, tags. Each anchored collection is checked once (aliases share the node). */
class Walker {
 public:
  Walker(std::string_view where, Errc errc) : where_(where), errc_(errc) {}

  Status check(const YAML::Node& root) {
    std::vector<YAML::Node> todo{root};
    while (!todo.empty()) {
      const YAML::Node n = todo.back();
      todo.pop_back();
      FP4FORGE_TRY(check_tag(n));
      if (!n.IsMap() && !n.IsSequence()) continue;
      if (!first_visit(n)) continue;
      if (n.IsSequence()) {
        for (const auto& e : n) todo.push_back(e);
        continue;
      }
      std::map<std::string, std::pair<std::string, int>> seen;  // key -> (its text, its line)
      for (auto it = n.begin(); it != n.end(); ++it) {
        const YAML::Node k = it->first;  // a copy: `it->` is a proxy, a reference to its member dangles
        if (k.IsMap() || k.IsSequence())
          return fail(k, "a {} used as a mapping key; expected a scalar key (PyYAML refuses an unhashable key)",
                      k.IsMap() ? "mapping" : "list");
        FP4FORGE_ASSIGN_OR_RETURN(const std::string key, key_of(k));
        const std::string text = k.IsScalar() ? k.Scalar() : std::string("null");  // yaml-cpp keeps no null's text
        if (key != "merge") {
          const auto [at, fresh] = seen.emplace(key, std::pair{text, k.Mark().line});
          if (!fresh)
            return fail(k, "duplicate key '{}' (first at line {}{}); expected each key once in a mapping (PyYAML "
                        "keeps the last, yaml-cpp the first: the readers would disagree)",
                        printable(text, 80), at->second.second + 1,
                        at->second.first == text ? std::string() : fmt::format(", as '{}'", printable(at->second.first, 80)));
        }
        todo.push_back(k);
        todo.push_back(it->second);
      }
    }
    return {};
  }

 private:
  template <typename... Args>
  Error fail(const YAML::Node& at, fmt::format_string<Args...> f, Args&&... args) const {
    const std::string what = fmt::format(f, std::forward<Args>(args)...);
    if (at.Mark().line < 0) return make_error(errc_, "{}: {}", where_, what);  // a node without a position
    return make_error(errc_, "{}: line {}: {}", where_, at.Mark().line + 1, what);
  }

  /** False when `n` (a collection) was walked before: an alias of it, or a cycle back to it. */
  bool first_visit(const YAML::Node& n) {
    if (n.Mark().pos < 0) return true;
    auto [it, fresh] = visited_.emplace(n.Mark().pos, std::vector<YAML::Node>{});
    for (const auto& v : it->second)
      if (v.is(n)) return false;
    it->second.push_back(n);
    return true;
  }

  /** A node's tag: untagged, or a core tag that fits the node. */
  Status check_tag(const YAML::Node& n) const {
    const std::string& tag = n.Tag();
    if (tag.empty() || tag == "?" || tag == "!") return {};
    const std::string_view core = tag.starts_with(kCoreTag) ? std::string_view(tag).substr(kCoreTag.size()) : "";
    static const std::map<std::string_view, int> kinds{  // 0 scalar, 1 sequence, 2 mapping
        {"str", 0},    {"int", 0},       {"float", 0}, {"bool", 0}, {"null", 0}, {"binary", 0}, {"timestamp", 0},
        {"merge", 0},  {"seq", 1},       {"omap", 1},  {"pairs", 1}, {"map", 2}, {"set", 2}};
    const auto k = kinds.find(core);
    if (core.empty() || k == kinds.end())
      return fail(n, "tag '{}' is not one PyYAML's safe_load constructs; expected untagged values or a core tag "
                  "(!!str, !!int, !!float, !!bool, !!null, !!seq, !!map, ...)",
                  tag_text(tag));
    const int kind = n.IsMap() ? 2 : n.IsSequence() ? 1 : 0;
    if (kind != k->second)
      return fail(n, "tag '{}' on a {}; expected it on a {}", tag_text(tag), kind == 2 ? "mapping" : kind == 1 ? "list" : "scalar",
                  k->second == 2 ? "mapping" : k->second == 1 ? "list" : "scalar");
    if (kind != 0) return {};
    const std::string s = n.IsScalar() ? n.Scalar() : std::string();
    const bool fits = core == "int"     ? re_int().full_match(s)
                      : core == "float" ? float_key(s).has_value() || re_int().full_match(s)
                      : core == "bool"  ? re_bool().full_match(s)
                                        : true;
    if (!fits)
      return fail(n, "'{}' is not a {} value; expected what PyYAML constructs for '{}'", printable(s, 80), core,
                  tag_text(tag));
    return {};
  }

  /** What a key is compared by, as PyYAML constructs it: a string, or a value of the implicit resolvers. */
  Result<std::string> key_of(const YAML::Node& k) {
    const std::string& tag = k.Tag();
    const std::string s = k.IsScalar() ? k.Scalar() : std::string();
    const bool plain = tag == "?" || tag.empty();
    if (!plain && (tag == "!" || is_core(tag, "str"))) return "str:" + s;
    if (!plain && !is_core(tag, "int") && !is_core(tag, "float") && !is_core(tag, "bool") && !is_core(tag, "null"))
      return "tag:" + tag + ":" + s;
    if (plain && s == "<<") return std::string("merge");
    if (k.IsNull() || (plain && re_null().full_match(s)) || is_core(tag, "null")) return std::string("null");
    if (re_bool().full_match(s)) {  // Python: True == 1, False == 0
      const char c = static_cast<char>(s[0] | 0x20);
      return std::string(c == 'y' || c == 't' || (c == 'o' && (s[1] | 0x20) == 'n') ? "int:1" : "int:0");
    }
    if (re_int().full_match(s))
      if (auto key = int_key(s)) return *key;
    if (re_float().full_match(s) || is_core(tag, "float"))
      if (auto key = float_key(s)) return *key;
    return "str:" + s;
  }

  std::string_view where_;
  Errc errc_;
  std::map<int, std::vector<YAML::Node>> visited_;  // a collection's parse position -> the collections there
};

}  // namespace

Result<YAML::Node> load_yaml_strict(std::string_view text, std::string_view where, Errc errc) {
  FP4FORGE_TRY(check_characters(text, where, errc));
  const std::string owned(text);
  YAML::Node doc;
  int second = -2;  // the parse position of a second document's start; -2: none
  try {
    doc = YAML::Load(owned);
    // A second document, asked of the event parser twice at most: yaml-cpp 0.7's LoadAll never ends on a stray
    // flow indicator (`, a: 1}`: every HandleNextDocument reports a document and consumes nothing).
    std::istringstream in(owned);
    YAML::Parser parser(in);
    DocumentStart start;
    if (parser.HandleNextDocument(start) && parser.HandleNextDocument(start)) second = start.pos;
  } catch (const YAML::Exception& e) {
    return make_error(errc, "{}: line {}, column {}: invalid YAML ({})", where, e.mark.line + 1, e.mark.column + 1,
                      printable(e.msg, 200));
  }
  if (second != -2)
    return make_error(errc, "{}: line {}: a second YAML document; expected one document (PyYAML's safe_load refuses "
                      "several, yaml-cpp would read the first only)",
                      where, document_line(text, second));
  Walker w(where, errc);
  try {
    FP4FORGE_TRY(w.check(doc));
  } catch (const YAML::Exception& e) {
    return make_error(errc, "{}: line {}, column {}: invalid YAML ({})", where, e.mark.line + 1, e.mark.column + 1,
                      printable(e.msg, 200));
  }
  return doc;
}

}  // namespace fp4forge::util
