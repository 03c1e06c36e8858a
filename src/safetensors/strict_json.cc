#include "strict_json.h"

#include "fp4forge/util/strings.h"

#include <algorithm>
#include <optional>
#include <type_traits>
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

std::string strip_prefix(std::string_view what) {
  // "[json.exception.parse_error.101] parse error at line 1, column 2: ..." -> "parse error at ..."
  if (!what.empty() && what.front() == '[') {
    auto p = what.find("] ");
    if (p != std::string_view::npos) what.remove_prefix(p + 2);
  }
  return util::printable(what);
}

}  // namespace

namespace {
template <typename Json>
std::string brief_impl(const Json& v, std::size_t max) {
  std::string s = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (s.size() > max) {
    s.resize(max);
    s += "...";
  }
  return util::printable(s);
}
}  // namespace

std::string brief(const nlohmann::ordered_json& v, std::size_t max) { return brief_impl(v, max); }
std::string brief(const nlohmann::json& v, std::size_t max) { return brief_impl(v, max); }

namespace {

// SAX handler building the DOM itself: nlohmann's callback parser rescans the parent object after
// every nested value (quadratic for headers with many tensors); this stays linear.
template <typename Json>
class StrictSax {
 public:
  using number_integer_t = typename Json::number_integer_t;
  using number_unsigned_t = typename Json::number_unsigned_t;
  using number_float_t = typename Json::number_float_t;
  using string_t = typename Json::string_t;
  using binary_t = typename Json::binary_t;

  StrictSax(std::size_t max_depth, KeyOrder* order) : max_depth_(max_depth), order_(order) {}

  bool null() { return value(nullptr); }
  bool boolean(bool v) { return value(v); }
  bool number_integer(number_integer_t v) { return value(v); }
  bool number_unsigned(number_unsigned_t v) { return value(v); }
  bool number_float(number_float_t v, const string_t&) { return value(v); }
  bool string(string_t& v) { return value(std::move(v)); }
  bool binary(binary_t& v) { return value(Json::binary(std::move(v))); }

  bool start_object(std::size_t) { return open(true); }
  bool start_array(std::size_t) { return open(false); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(string_t& k) {
    Frame& top = frames_.back();
    if (!top.keys.insert(k).second) {
      JsonIssue is;
      is.kind = JsonIssue::Kind::DUPLICATE_KEY;
      for (std::size_t i = 1; i < frames_.size(); ++i) is.parent += "/" + frames_[i].name;
      is.key = k;
      is.depth = frames_.size();
      issue_ = std::move(is);
      return false;
    }
    if (order_ && frames_.size() == 2 && frames_[1].name == order_->object) order_->keys.push_back(k);
    top.last_key = k;
    if constexpr (std::is_same_v<Json, nlohmann::ordered_json>) {
      // ordered_json's operator[] searches its keys linearly: n keys cost n² (issue 27 #12, 500k keys took over
      // a minute). The key is new (checked above), so it is appended without a search.
      auto& obj = refs_.back()->template get_ref<typename Json::object_t&>();
      static_cast<typename Json::object_t::Container&>(obj).emplace_back(k, Json());
      slot_ = &obj.back().second;
    } else {
      slot_ = &(*refs_.back())[k];
    }
    return true;
  }

  template <typename Exception>
  bool parse_error(std::size_t, const std::string&, const Exception& ex) {
    JsonIssue is;
    is.kind = JsonIssue::Kind::SYNTAX;
    is.detail = strip_prefix(ex.what());
    issue_ = std::move(is);
    return false;
  }

  Json& root() { return root_; }
  const std::optional<JsonIssue>& issue() const { return issue_; }

 private:
  // Places a value where the parser is: root, next array element, or the slot of the last key.
  template <typename V>
  Json* place(V&& v) {
    if (refs_.empty()) {
      root_ = Json(std::forward<V>(v));
      return &root_;
    }
    Json* parent = refs_.back();
    if (parent->is_array()) {
      frames_.back().next_index++;
      parent->push_back(Json(std::forward<V>(v)));
      return &parent->back();
    }
    *slot_ = Json(std::forward<V>(v));
    return slot_;
  }
  template <typename V>
  bool value(V&& v) {
    place(std::forward<V>(v));
    return true;
  }
  bool open(bool is_object) {
    if (frames_.size() >= max_depth_) {
      JsonIssue is;
      is.kind = JsonIssue::Kind::DEPTH;
      issue_ = std::move(is);
      return false;
    }
    Frame f;
    f.is_object = is_object;
    if (!frames_.empty())
      f.name = frames_.back().is_object ? frames_.back().last_key
                                        : fmt::format("[{}]", frames_.back().next_index);
    Json* j = place(is_object ? Json::value_t::object : Json::value_t::array);
    refs_.push_back(j);
    frames_.push_back(std::move(f));
    return true;
  }
  bool close() {
    refs_.pop_back();
    frames_.pop_back();
    return true;
  }

  std::size_t max_depth_;
  KeyOrder* order_;
  Json root_;
  std::vector<Json*> refs_;
  std::vector<Frame> frames_;
  Json* slot_ = nullptr;
  std::optional<JsonIssue> issue_;
};

}  // namespace

template <typename Json>
std::variant<Json, JsonIssue> parse_strict(std::string_view text, std::size_t max_depth,
                                           KeyOrder* order) {
  // nlohmann's lexer takes a NUL byte for the end of input, so "{...}\0garbage" would parse. A raw NUL
  // is never valid JSON (not as whitespace, not inside a string).
  if (const auto nul = text.find('\0'); nul != std::string_view::npos) {
    JsonIssue is;
    is.kind = JsonIssue::Kind::SYNTAX;
    is.detail = fmt::format("NUL byte at offset {}; JSON text cannot contain one", nul);
    return is;
  }
  StrictSax<Json> sax(max_depth, order);
  bool ok = false;
  try {
    ok = Json::sax_parse(text.begin(), text.end(), &sax, nlohmann::detail::input_format_t::json,
                         /*strict=*/true, /*ignore_comments=*/false);
  } catch (const typename Json::exception& e) {
    JsonIssue is;
    is.kind = JsonIssue::Kind::SYNTAX;
    is.detail = strip_prefix(e.what());
    return is;
  }
  if (sax.issue()) return *sax.issue();
  if (!ok) {
    JsonIssue is;
    is.kind = JsonIssue::Kind::SYNTAX;
    is.detail = "parse error";
    return is;
  }
  return std::move(sax.root());
}

template std::variant<nlohmann::json, JsonIssue> parse_strict<nlohmann::json>(std::string_view,
                                                                            std::size_t, KeyOrder*);
template std::variant<nlohmann::ordered_json, JsonIssue> parse_strict<nlohmann::ordered_json>(
    std::string_view, std::size_t, KeyOrder*);

}  // namespace fp4forge::st::detail
