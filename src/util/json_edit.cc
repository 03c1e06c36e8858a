#include "fp4forge/util/json_edit.h"

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "fp4forge/util/strings.h"

namespace fp4forge {

using Json = nlohmann::ordered_json;

// ---------------------------------------------------------------------------------------------------
// Tree. A node is either an unexpanded source span, an expanded container (members with the original
// whitespace around them), or a fresh value created by an edit.

struct JsonDocument::Node {
  enum Kind : std::uint8_t { SCALAR, OBJECT, ARRAY };
  Kind kind = SCALAR;
  std::size_t begin = 0, end = 0;  // source span (not meaningful for fresh nodes)
  bool fresh = false;              // created by an edit: emitted from `value`
  Json value;                      // fresh only
  bool expanded = false;           // container children parsed
  bool dirty = false;              // container changed: emitted member by member

  struct Member {
    std::string key;          // decoded (objects only)
    std::string key_raw;      // lexeme with quotes (objects only; empty for fresh members)
    std::string sep;          // original text between the previous value and this item (with ',')
    std::string pre_colon, post_colon;
    bool original = true;     // came from the source
    bool was_first = false;   // was the first item in the source
    std::unique_ptr<Node> node;
  };
  std::vector<Member> items;
  bool had_items = false;     // source container was non-empty
  std::string open_ws;        // source: after the bracket, before the first item (non-empty source)
  std::string close_ws;       // source: after the last item, before the bracket (or the empty inside)
};

namespace {

using Node = JsonDocument::Node;

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::size_t skip_ws(std::string_view t, std::size_t p) {
  while (p < t.size() && is_ws(t[p])) ++p;
  return p;
}

/** Decodes a validated string lexeme (with quotes) to UTF-8 (below). */
std::string decode_string(std::string_view lex);

struct Scanner {
  std::string_view t;
  std::string_view source;
  std::optional<Error> err;

  Error fail(std::size_t pos, std::string_view what) {
    const auto [line, col] = util::line_column(t, pos);
    Error e = make_error(Errc::BAD_INPUT, "{}: invalid JSON at line {}, column {}: {}; hint: the file "
                         "must be strict JSON (RFC 8259)", source, line, col, what);
    e.file = std::string(source);
    if (!err) err = e;
    return e;
  }

  /** Scans a string literal starting at t[p] == '"'; returns the index after the closing quote. */
  std::optional<std::size_t> string(std::size_t p) {
    if (p >= t.size() || t[p] != '"') {
      fail(p, "expected '\"'");
      return std::nullopt;
    }
    ++p;
    while (p < t.size()) {
      const auto c = static_cast<unsigned char>(t[p]);
      if (c == '"') return p + 1;
      if (c < 0x20) {
        fail(p, "control character in string");
        return std::nullopt;
      }
      if (c == '\\') {
        if (p + 1 >= t.size()) break;
        const char e = t[p + 1];
        if (e == 'u') {
          for (int k = 0; k < 4; ++k) {
            if (p + 2 + k >= t.size() || !std::isxdigit(static_cast<unsigned char>(t[p + 2 + k]))) {
              fail(p, "bad \\u escape");
              return std::nullopt;
            }
          }
          p += 6;
          continue;
        }
        if (std::string_view("\"\\/bfnrt").find(e) == std::string_view::npos) {
          fail(p, "bad escape");
          return std::nullopt;
        }
        p += 2;
        continue;
      }
      ++p;
    }
    fail(p, "unterminated string");
    return std::nullopt;
  }

  std::optional<std::size_t> number(std::size_t p) {
    const std::size_t start = p;
    auto digit = [&](std::size_t i) { return i < t.size() && t[i] >= '0' && t[i] <= '9'; };
    if (p < t.size() && t[p] == '-') ++p;
    if (!digit(p)) {
      fail(start, "invalid value");
      return std::nullopt;
    }
    if (t[p] == '0') {
      ++p;
    } else {
      while (digit(p)) ++p;
    }
    if (p < t.size() && t[p] == '.') {
      ++p;
      if (!digit(p)) {
        fail(p, "digit expected after '.'");
        return std::nullopt;
      }
      while (digit(p)) ++p;
    }
    if (p < t.size() && (t[p] == 'e' || t[p] == 'E')) {
      ++p;
      if (p < t.size() && (t[p] == '+' || t[p] == '-')) ++p;
      if (!digit(p)) {
        fail(p, "digit expected in exponent");
        return std::nullopt;
      }
      while (digit(p)) ++p;
    }
    return p;
  }

  /** Validates the value starting at t[p] (no leading whitespace); returns its end. */
  std::optional<std::size_t> value(std::size_t p, int depth) {
    if (depth > 512) {
      fail(p, "nesting deeper than 512 levels");
      return std::nullopt;
    }
    if (p >= t.size()) {
      fail(p, "unexpected end of input");
      return std::nullopt;
    }
    const char c = t[p];
    if (c == '"') return string(p);
    if (c == '{' || c == '[') {
      const char close = c == '{' ? '}' : ']';
      p = skip_ws(t, p + 1);
      if (p < t.size() && t[p] == close) return p + 1;
      std::set<std::string> keys;  // an object's keys, decoded: a duplicate is refused
      for (;;) {
        if (c == '{') {
          auto k = string(p);
          if (!k) return std::nullopt;
          if (!keys.insert(decode_string(t.substr(p, *k - p))).second) {
            // Readers disagree on which duplicate wins (Python's json: the last; serde: an error); fp4forge
            // refuses a duplicate key in every JSON file it reads (safetensors/checkpoint.h).
            fail(p, fmt::format("duplicate key {}", t.substr(p, std::min<std::size_t>(*k - p, 200))));
            return std::nullopt;
          }
          p = skip_ws(t, *k);
          if (p >= t.size() || t[p] != ':') {
            fail(p, "expected ':'");
            return std::nullopt;
          }
          p = skip_ws(t, p + 1);
        }
        auto v = value(p, depth + 1);
        if (!v) return std::nullopt;
        p = skip_ws(t, *v);
        if (p < t.size() && t[p] == ',') {
          p = skip_ws(t, p + 1);
          continue;
        }
        if (p < t.size() && t[p] == close) return p + 1;
        fail(p, fmt::format("expected ',' or '{}'", close));
        return std::nullopt;
      }
    }
    for (std::string_view lit : {"true", "false", "null"}) {
      if (t.substr(p, lit.size()) == lit) return p + lit.size();
    }
    return number(p);
  }
};

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

/** Decodes a validated string lexeme (with quotes) to UTF-8. */
std::string decode_string(std::string_view lex) {
  std::string out;
  lex = lex.substr(1, lex.size() - 2);
  for (std::size_t i = 0; i < lex.size(); ++i) {
    if (lex[i] != '\\') {
      out += lex[i];
      continue;
    }
    const char e = lex[++i];
    switch (e) {
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'u': {
        auto hex4 = [&](std::size_t at) {
          return static_cast<std::uint32_t>(std::stoul(std::string(lex.substr(at, 4)), nullptr, 16));
        };
        std::uint32_t cp = hex4(i + 1);
        i += 4;
        if (cp >= 0xD800 && cp < 0xDC00 && i + 6 < lex.size() + 0 && lex[i + 1] == '\\' &&
            lex[i + 2] == 'u') {
          const std::uint32_t lo = hex4(i + 3);
          if (lo >= 0xDC00 && lo < 0xE000) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            i += 6;
          }
        }
        append_utf8(out, cp);
        break;
      }
      default: out += e; break;  // " \ /
    }
  }
  return out;
}

/** Expands a container node: parses its direct members (values stay unexpanded spans). */
void expand(Node& n, std::string_view t) {
  if (n.expanded || n.fresh || n.kind == Node::SCALAR) return;
  n.expanded = true;
  const char close = n.kind == Node::OBJECT ? '}' : ']';
  std::size_t p = n.begin + 1;
  std::size_t q = skip_ws(t, p);
  if (t[q] == close) {
    n.close_ws = std::string(t.substr(p, q - p));
    return;
  }
  n.had_items = true;
  n.open_ws = std::string(t.substr(p, q - p));
  Scanner sc{t, "", std::nullopt};
  std::string sep;
  bool first = true;
  for (;;) {
    Node::Member m;
    m.sep = std::move(sep);
    m.was_first = first;
    first = false;
    if (n.kind == Node::OBJECT) {
      const std::size_t kend = *sc.string(q);
      m.key_raw = std::string(t.substr(q, kend - q));
      m.key = decode_string(m.key_raw);
      std::size_t c = skip_ws(t, kend);
      m.pre_colon = std::string(t.substr(kend, c - kend));
      std::size_t v = skip_ws(t, c + 1);
      m.post_colon = std::string(t.substr(c + 1, v - c - 1));
      q = v;
    }
    auto child = std::make_unique<Node>();
    child->begin = q;
    child->end = *sc.value(q, 0);
    child->kind = t[q] == '{' ? Node::OBJECT : t[q] == '[' ? Node::ARRAY : Node::SCALAR;
    const std::size_t vend = child->end;
    m.node = std::move(child);
    n.items.push_back(std::move(m));
    std::size_t r = skip_ws(t, vend);
    if (t[r] == close) {
      n.close_ws = std::string(t.substr(vend, r - vend));
      return;
    }
    // t[r] == ','
    q = skip_ws(t, r + 1);
    sep = std::string(t.substr(vend, q - vend));
  }
}

std::string indent_after_newline(const std::string& ws) {
  const auto nl = ws.rfind('\n');
  return nl == std::string::npos ? std::string() : ws.substr(nl + 1);
}

bool keys_sorted(const Node& n) {
  for (std::size_t i = 1; i < n.items.size(); ++i)
    if (n.items[i - 1].key > n.items[i].key) return false;
  return true;
}

void emit(const Node& n, std::string_view t, const JsonStyle& st, const std::string& ind, std::string& out);

/** Emits a dirty (or re-styled) container. */
void emit_container(const Node& n, std::string_view t, const JsonStyle& st, const std::string& ind,
                    std::string& out) {
  const bool obj = n.kind == Node::OBJECT;
  out += obj ? '{' : '[';
  if (n.items.empty()) {
    if (!n.had_items) out += n.close_ws;
    out += obj ? '}' : ']';
    return;
  }
  // Member indentation and separators: from the source where it has them, else from the style.
  std::string mind = ind + st.indent;
  std::string open_prefix, canon_sep, close_sfx;
  if (n.had_items) {
    open_prefix = n.open_ws;
    close_sfx = n.close_ws;
    if (n.open_ws.find('\n') != std::string::npos) mind = indent_after_newline(n.open_ws);
  } else {
    open_prefix = st.multiline() ? "\n" + mind : "";
    close_sfx = st.multiline() ? "\n" + ind : "";
  }
  for (const auto& m : n.items) {
    if (m.original && !m.was_first) {
      canon_sep = m.sep;
      break;
    }
  }
  if (canon_sep.empty()) canon_sep = st.multiline() ? ",\n" + mind : st.item_sep;
  for (std::size_t i = 0; i < n.items.size(); ++i) {
    const auto& m = n.items[i];
    if (i == 0)
      out += open_prefix;
    else
      out += (m.original && !m.was_first) ? m.sep : canon_sep;
    if (obj) {
      if (m.original) {
        out += m.key_raw;
        out += m.pre_colon;
        out += ':';
        out += m.post_colon;
      } else {
        out += encode_json_string(m.key, st.ensure_ascii, st.upper_hex);
        out += st.key_sep;
      }
    }
    emit(*m.node, t, st, mind, out);
  }
  out += close_sfx;
  out += obj ? '}' : ']';
}

void emit(const Node& n, std::string_view t, const JsonStyle& st, const std::string& ind, std::string& out) {
  if (n.fresh) {
    out += dump_json_styled(n.value, st, ind);
    return;
  }
  if (!n.dirty) {
    out.append(t.substr(n.begin, n.end - n.begin));
    return;
  }
  emit_container(n, t, st, ind, out);
}

/** Re-serializes a source span in `st` (whitespace regenerated, scalar lexemes verbatim). */
void emit_styled_span(std::string_view t, std::size_t b, const JsonStyle& st, const std::string& ind,
                      std::string& out) {
  const char c = t[b];
  Scanner sc{t, "", std::nullopt};
  if (c != '{' && c != '[') {
    out.append(t.substr(b, *sc.value(b, 0) - b));
    return;
  }
  const bool obj = c == '{';
  const char close = obj ? '}' : ']';
  std::size_t p = skip_ws(t, b + 1);
  out += c;
  if (t[p] == close) {
    out += close;
    return;
  }
  const std::string mind = ind + st.indent;
  bool first = true;
  for (;;) {
    if (!first) out += st.multiline() ? "," : st.item_sep;
    first = false;
    if (st.multiline()) out += "\n" + mind;
    if (obj) {
      const std::size_t kend = *sc.string(p);
      out.append(t.substr(p, kend - p));
      out += st.key_sep;
      p = skip_ws(t, skip_ws(t, kend) + 1);
    }
    const std::size_t vend = *sc.value(p, 0);
    emit_styled_span(t, p, st, mind, out);
    p = skip_ws(t, vend);
    if (t[p] == close) break;
    p = skip_ws(t, p + 1);
  }
  if (st.multiline()) out += "\n" + ind;
  out += close;
}

void emit_styled(const Node& n, std::string_view t, const JsonStyle& st, const std::string& ind,
                 std::string& out) {
  if (n.fresh) {
    out += dump_json_styled(n.value, st, ind);
  } else if (!n.dirty) {
    emit_styled_span(t, n.begin, st, ind, out);
  } else {
    // A dirty container: regenerate around its members.
    const bool obj = n.kind == Node::OBJECT;
    out += obj ? '{' : '[';
    if (n.items.empty()) {
      out += obj ? '}' : ']';
      return;
    }
    const std::string mind = ind + st.indent;
    for (std::size_t i = 0; i < n.items.size(); ++i) {
      if (i > 0) out += st.multiline() ? "," : st.item_sep;
      if (st.multiline()) out += "\n" + mind;
      const auto& m = n.items[i];
      if (obj) {
        out += m.original ? m.key_raw : encode_json_string(m.key, st.ensure_ascii, st.upper_hex);
        out += st.key_sep;
      }
      emit_styled(*m.node, t, st, mind, out);
    }
    if (st.multiline()) out += "\n" + ind;
    out += obj ? '}' : ']';
  }
}

std::string node_text(const Node& n, std::string_view t, const JsonStyle& st) {
  std::string out;
  emit(n, t, st, {}, out);
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------

JsonStyle detect_json_style(std::string_view t) {
  JsonStyle st;
  st.trailing_newline = !t.empty() && t.back() == '\n';
  // Walk the text outside strings once: first newline-indent inside the root, first separators.
  bool in_str = false, saw_nonascii_raw = false, saw_nonascii_esc = false, saw_lower = false,
       saw_upper = false, found_indent = false, found_comma = false, found_colon = false;
  int depth = 0;
  for (std::size_t i = 0; i < t.size(); ++i) {
    const char c = t[i];
    if (in_str) {
      if (static_cast<unsigned char>(c) >= 0x80) saw_nonascii_raw = true;
      if (c == '\\') {
        if (i + 1 < t.size() && t[i + 1] == 'u' && i + 5 < t.size()) {
          const std::string_view hex = t.substr(i + 2, 4);
          const auto cp = std::strtoul(std::string(hex).c_str(), nullptr, 16);
          if (cp >= 0x80) saw_nonascii_esc = true;
          for (char h : hex) {
            if (h >= 'a' && h <= 'f') saw_lower = true;
            if (h >= 'A' && h <= 'F') saw_upper = true;
          }
        }
        ++i;
      } else if (c == '"') {
        in_str = false;
      }
      continue;
    }
    switch (c) {
      case '"': in_str = true; break;
      case '{':
      case '[': {
        ++depth;
        if (!found_indent) {
          std::size_t j = i + 1;
          while (j < t.size() && (t[j] == ' ' || t[j] == '\t' || t[j] == '\r')) ++j;
          if (j < t.size() && t[j] == '\n') {
            std::size_t k = j + 1;
            while (k < t.size() && (t[k] == ' ' || t[k] == '\t')) ++k;
            if (k < t.size() && t[k] != '}' && t[k] != ']') {
              // indentation of this member line divided by its depth gives the unit
              const std::string lead(t.substr(j + 1, k - j - 1));
              const std::size_t per = depth > 0 ? lead.size() / static_cast<std::size_t>(depth) : 0;
              if (per > 0 && lead.size() % static_cast<std::size_t>(depth) == 0) {
                st.indent = lead.substr(0, per);
                found_indent = true;
              }
            }
          }
        }
        break;
      }
      case '}':
      case ']': --depth; break;
      case ',':
        if (!found_comma) {
          found_comma = true;
          st.item_sep = (i + 1 < t.size() && t[i + 1] == ' ') ? ", " : ",";
        }
        break;
      case ':':
        if (!found_colon) {
          found_colon = true;
          st.key_sep = (i + 1 < t.size() && t[i + 1] == ' ') ? ": " : ":";
        }
        break;
      default: break;
    }
  }
  if (saw_nonascii_raw && !saw_nonascii_esc) st.ensure_ascii = false;
  st.upper_hex = saw_upper && !saw_lower;
  return st;
}

std::string encode_json_string(std::string_view s, bool ensure_ascii, bool upper_hex) {
  std::string out = "\"";
  auto hex = [&](std::uint32_t u) {
    out += upper_hex ? fmt::format("\\u{:04X}", u) : fmt::format("\\u{:04x}", u);
  };
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    if (c < 0x20) {
      hex(c);
      continue;
    }
    if (c < 0x80 || !ensure_ascii) {
      out += static_cast<char>(c);
      continue;
    }
    // Decode one UTF-8 sequence (invalid bytes are written as U+FFFD).
    std::uint32_t cp = 0xFFFD;
    int len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (len > 1 && i + static_cast<std::size_t>(len) <= s.size()) {
      cp = c & (0xFF >> (len + 1));
      for (int k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
      i += static_cast<std::size_t>(len - 1);
    }
    if (cp >= 0x10000) {
      cp -= 0x10000;
      hex(0xD800 + (cp >> 10));
      hex(0xDC00 + (cp & 0x3FF));
    } else {
      hex(cp);
    }
  }
  out += '"';
  return out;
}

std::string dump_json_styled(const Json& v, const JsonStyle& st, const std::string& base_indent) {
  std::string out;
  if (v.is_object() || v.is_array()) {
    const bool obj = v.is_object();
    out += obj ? '{' : '[';
    if (v.empty()) {
      out += obj ? '}' : ']';
      return out;
    }
    const std::string mind = base_indent + st.indent;
    bool first = true;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!first) out += st.multiline() ? "," : st.item_sep;
      first = false;
      if (st.multiline()) out += "\n" + mind;
      if (obj) {
        out += encode_json_string(it.key(), st.ensure_ascii, st.upper_hex);
        out += st.key_sep;
      }
      out += dump_json_styled(*it, st, mind);
    }
    if (st.multiline()) out += "\n" + base_indent;
    out += obj ? '}' : ']';
    return out;
  }
  if (v.is_string()) return encode_json_string(v.get_ref<const std::string&>(), st.ensure_ascii, st.upper_hex);
  if (v.is_number_float()) {
    const double d = v.get<double>();
    std::string s = Json(d).dump();
    return s;
  }
  return v.dump();
}

// ---------------------------------------------------------------------------------------------------

JsonDocument::JsonDocument() = default;
JsonDocument::JsonDocument(JsonDocument&&) noexcept = default;
JsonDocument& JsonDocument::operator=(JsonDocument&&) noexcept = default;
JsonDocument::~JsonDocument() = default;

Result<JsonDocument> JsonDocument::parse(std::string text, std::string_view source) {
  JsonDocument d;
  d.text_ = std::move(text);
  d.source_ = std::string(source);
  std::string_view t = d.text_;
  Scanner sc{t, d.source_, std::nullopt};
  std::size_t p = skip_ws(t, 0);
  if (p >= t.size()) return sc.fail(p, "empty document");
  auto end = sc.value(p, 0);
  if (!end) return *sc.err;
  if (skip_ws(t, *end) != t.size()) return sc.fail(skip_ws(t, *end), "trailing characters after the value");
  d.lead_ = p;
  d.trail_ = *end;
  d.root_ = std::make_unique<Node>();
  d.root_->begin = p;
  d.root_->end = *end;
  d.root_->kind = t[p] == '{' ? Node::OBJECT : t[p] == '[' ? Node::ARRAY : Node::SCALAR;
  d.style_ = detect_json_style(t);
  return d;
}

namespace {

/** Walks `path` from `root`, expanding containers; returns the node or nullptr. If `parent_out` is
 * given, also returns the parent node and the member index. */
Node* walk(Node* root, std::string_view t, const JsonDocument::Path& path, Node** parent_out = nullptr,
           std::size_t* index_out = nullptr) {
  Node* cur = root;
  for (const auto& key : path) {
    if (cur->fresh) return nullptr;  // fresh values are addressed only as a whole
    if (cur->kind == Node::SCALAR) return nullptr;
    expand(*cur, t);
    Node* next = nullptr;
    std::size_t idx = 0;
    if (cur->kind == Node::OBJECT) {
      // Keys are unique (parse refuses a duplicate); searched from the end all the same.
      for (std::size_t i = cur->items.size(); i-- > 0;) {
        if (cur->items[i].key == key) {
          next = cur->items[i].node.get();
          idx = i;
          break;
        }
      }
    } else {
      char* e = nullptr;
      const unsigned long i = std::strtoul(key.c_str(), &e, 10);
      if (!key.empty() && *e == '\0' && i < cur->items.size()) {
        next = cur->items[i].node.get();
        idx = i;
      }
    }
    if (next == nullptr) return nullptr;
    if (parent_out != nullptr) *parent_out = cur;
    if (index_out != nullptr) *index_out = idx;
    cur = next;
  }
  return cur;
}

}  // namespace

bool JsonDocument::has(const Path& path) const {
  return walk(root_.get(), text_, path) != nullptr;
}

std::optional<std::string> JsonDocument::raw(const Path& path) const {
  const Node* n = walk(root_.get(), text_, path);
  if (n == nullptr) return std::nullopt;
  return node_text(*n, text_, style_);
}

std::optional<Json> JsonDocument::get(const Path& path) const {
  const Node* n = walk(root_.get(), text_, path);
  if (n == nullptr) return std::nullopt;
  if (n->fresh) return n->value;
  try {
    return Json::parse(node_text(*n, text_, style_));
  } catch (const std::exception&) {
    return std::nullopt;  // unreachable for validated text (nlohmann accepts all RFC 8259 JSON)
  }
}

Status JsonDocument::set(const Path& path, const Json& value) {
  if (path.empty()) return make_error(Errc::BAD_INPUT, "{}: cannot replace the document root", source_);
  Path parent_path(path.begin(), path.end() - 1);
  // Mark every container on the way as dirty.
  std::vector<Node*> chain{root_.get()};
  Node* parent = root_.get();
  for (const auto& k : parent_path) {
    Node* next = walk(parent, text_, {k});
    if (next == nullptr)
      return make_error(Errc::BAD_INPUT, "{}: cannot set '{}': parent '{}' is absent", source_,
                        fmt::join(path, "."), k);
    chain.push_back(next);
    parent = next;
  }
  if (parent->fresh || parent->kind != Node::OBJECT)
    return make_error(Errc::BAD_INPUT, "{}: cannot set '{}': the parent is not an object", source_,
                      fmt::join(path, "."));
  expand(*parent, text_);
  const std::string& key = path.back();
  auto it = std::find_if(parent->items.rbegin(), parent->items.rend(),
                         [&](const Node::Member& m) { return m.key == key; });
  if (it != parent->items.rend()) {
    auto cur = get(path);
    if (cur && nlohmann::json::parse(cur->dump()) == nlohmann::json::parse(value.dump())) return {};  // no change
    auto n = std::make_unique<Node>();
    n->fresh = true;
    n->value = value;
    it->node = std::move(n);
  } else {
    Node::Member m;
    m.key = key;
    m.original = false;
    m.node = std::make_unique<Node>();
    m.node->fresh = true;
    m.node->value = value;
    std::size_t pos = parent->items.size();
    if (parent->items.size() >= 2 && keys_sorted(*parent)) {
      pos = static_cast<std::size_t>(
          std::lower_bound(parent->items.begin(), parent->items.end(), key,
                           [](const Node::Member& a, const std::string& k) { return a.key < k; }) -
          parent->items.begin());
    }
    parent->items.insert(parent->items.begin() + static_cast<std::ptrdiff_t>(pos), std::move(m));
  }
  for (Node* n : chain) n->dirty = true;
  modified_ = true;
  return {};
}

bool JsonDocument::erase(const Path& path) {
  if (path.empty()) return false;
  Path parent_path(path.begin(), path.end() - 1);
  std::vector<Node*> chain{root_.get()};
  Node* parent = root_.get();
  for (const auto& k : parent_path) {
    Node* next = walk(parent, text_, {k});
    if (next == nullptr) return false;
    chain.push_back(next);
    parent = next;
  }
  if (parent->fresh || parent->kind != Node::OBJECT) return false;
  expand(*parent, text_);
  bool removed = false;
  for (std::size_t i = parent->items.size(); i-- > 0;) {
    if (parent->items[i].key == path.back()) {
      parent->items.erase(parent->items.begin() + static_cast<std::ptrdiff_t>(i));
      removed = true;
    }
  }
  if (!removed) return false;
  for (Node* n : chain) n->dirty = true;
  modified_ = true;
  return true;
}

std::string JsonDocument::dump() const {
  std::string out;
  out.reserve(text_.size() + 64);
  out.append(text_, 0, lead_);
  emit(*root_, text_, style_, {}, out);
  out.append(text_, trail_, std::string::npos);
  return out;
}

std::optional<std::string> JsonDocument::dump_styled(const Path& path) const {
  const Node* n = walk(root_.get(), text_, path);
  if (n == nullptr) return std::nullopt;
  std::string out;
  emit_styled(*n, text_, style_, {}, out);
  if (style_.trailing_newline) out += '\n';
  return out;
}

}  // namespace fp4forge
