#pragma once
// Private: strict JSON parsing shared by the header parser and Checkpoint (duplicate keys are an error,
// nesting depth is bounded, syntax errors carry nlohmann's line/column text).
#include <cstddef>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fp4forge/util/strings.h"

namespace fp4forge::st::detail {

using util::printable;  // the one home: util/strings.h

struct JsonIssue {
  enum class Kind { SYNTAX, DEPTH, DUPLICATE_KEY };
  Kind kind = Kind::SYNTAX;
  std::string detail;  ///< SYNTAX: nlohmann's text without the "[json.exception...]" prefix
  std::string parent;  ///< DUPLICATE_KEY: path of the object holding the key ("" for the root), e.g. "/a/b"
  std::string key;     ///< DUPLICATE_KEY: the repeated key
  std::size_t depth = 0;  ///< DUPLICATE_KEY: 1 for root keys
};

/** Records, in file order, the keys of the object found at top-level key `object`. */
struct KeyOrder {
  std::string object;
  std::vector<std::string> keys;
};

/**
 * Parses `text`; a value on success, the first problem otherwise. Never throws (bad_alloc aside).
 * Json is nlohmann::json (std::map objects: use it for large objects, ordered_json's inserts are
 * linear) or nlohmann::ordered_json (key order kept). `order`, if given, records one object's key order.
 */
template <typename Json>
std::variant<Json, JsonIssue> parse_strict(std::string_view text, std::size_t max_depth,
                                           KeyOrder* order = nullptr);

/** A JSON value shortened for messages (compact dump, at most `max` characters, then "..."). */
std::string brief(const nlohmann::ordered_json& v, std::size_t max = 40);
std::string brief(const nlohmann::json& v, std::size_t max = 40);

}  // namespace fp4forge::st::detail
