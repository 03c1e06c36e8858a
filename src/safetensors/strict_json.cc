#include "strict_json.h"

#include <string>
#include <unordered_set>
#include <vector>

namespace fp4forge::st::detail {
namespace {

struct Frame {
  bool is_object = false;
  std::string name;  // how the parent refers to this container ("key" or "[i]")
  std::size_t next_index = 0;
  std::string last_key;
  std::unordered_set<std::string> keys;
};

struct Abort {
  JsonIssue issue;
};

std::string strip_prefix(std::string_view what) {
  // "[json.exception.parse_error.101] parse error at line 1, column 2: ..." -> "parse error at ..."
  if (!what.empty() && what.front() == '[') {
    auto p = what.find("] ");
    if (p != std::string_view::npos) what.remove_prefix(p + 2);
  }
  return printable(what);
}

}  // namespace

std::string printable(std::string_view s) {
  // Keeps well-formed UTF-8; control bytes, DEL and ill-formed bytes become \xNN (one line, valid UTF-8).
  std::string out;
  out.reserve(s.size());
  auto esc = [&out](unsigned char c) { out += fmt::format("\\x{:02x}", c); };
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f) {
        esc(c);
      } else {
        out += static_cast<char>(c);
      }
      ++i;
      continue;
    }
    std::size_t len = 0;
    std::uint32_t cp = 0;
    if (c >= 0xc2 && c <= 0xdf) {
      len = 2;
      cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3;
      cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4;
      cp = c & 0x07;
    }
    bool ok = len != 0 && i + len <= s.size();
    for (std::size_t k = 1; ok && k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) ok = false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    // Reject overlong forms, surrogates and code points beyond U+10FFFF.
    if (ok && ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
               (cp >= 0xd800 && cp <= 0xdfff)))
      ok = false;
    if (!ok) {
      esc(c);
      ++i;
      continue;
    }
    out.append(s.substr(i, len));
    i += len;
  }
  return out;
}

namespace {
template <typename Json>
std::string brief_impl(const Json& v, std::size_t max) {
  std::string s = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (s.size() > max) {
    s.resize(max);
    s += "...";
  }
  return printable(s);
}
}  // namespace

std::string brief(const nlohmann::ordered_json& v, std::size_t max) { return brief_impl(v, max); }
std::string brief(const nlohmann::json& v, std::size_t max) { return brief_impl(v, max); }

template <typename Json>
std::variant<Json, JsonIssue> parse_strict(std::string_view text, std::size_t max_depth,
                                           KeyOrder* order) {
  using json = Json;
  std::vector<Frame> stack;
  auto path_of = [&](std::size_t upto) {
    std::string p;
    for (std::size_t i = 1; i < upto && i < stack.size(); ++i) p += "/" + stack[i].name;
    return p;
  };
  auto child_name = [&]() -> std::string {
    if (stack.empty()) return {};
    Frame& top = stack.back();
    if (top.is_object) return top.last_key;
    return fmt::format("[{}]", top.next_index++);
  };
  typename json::parser_callback_t cb = [&](int depth, typename json::parse_event_t ev,
                                            json& parsed) -> bool {
    (void)depth;
    switch (ev) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start: {
        if (stack.size() >= max_depth) {
          JsonIssue is;
          is.kind = JsonIssue::Kind::DEPTH;
          throw Abort{std::move(is)};
        }
        Frame f;
        f.is_object = ev == json::parse_event_t::object_start;
        f.name = child_name();
        stack.push_back(std::move(f));
        break;
      }
      case json::parse_event_t::key: {
        Frame& top = stack.back();
        std::string k = parsed.template get<std::string>();
        if (!top.keys.insert(k).second) {
          JsonIssue is;
          is.kind = JsonIssue::Kind::DUPLICATE_KEY;
          is.parent = path_of(stack.size());
          is.key = std::move(k);
          is.depth = stack.size();
          throw Abort{std::move(is)};
        }
        if (order && stack.size() == 2 && stack[1].name == order->object) order->keys.push_back(k);
        top.last_key = std::move(k);
        break;
      }
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        if (!stack.empty()) stack.pop_back();
        break;
      case json::parse_event_t::value:
        if (!stack.empty() && !stack.back().is_object) stack.back().next_index++;
        break;
    }
    return true;
  };
  try {
    json j = json::parse(text.begin(), text.end(), cb, /*allow_exceptions=*/true,
                         /*ignore_comments=*/false);
    return j;
  } catch (Abort& a) {
    return std::move(a.issue);
  } catch (const typename json::exception& e) {
    JsonIssue is;
    is.kind = JsonIssue::Kind::SYNTAX;
    is.detail = strip_prefix(e.what());
    return is;
  }
}

template std::variant<nlohmann::json, JsonIssue> parse_strict<nlohmann::json>(std::string_view,
                                                                            std::size_t, KeyOrder*);
template std::variant<nlohmann::ordered_json, JsonIssue> parse_strict<nlohmann::ordered_json>(
    std::string_view, std::size_t, KeyOrder*);

}  // namespace fp4forge::st::detail
