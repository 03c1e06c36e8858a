#pragma once
// The string helpers of the project (one home): trim, split, prefix/suffix tests, ASCII lower-casing.
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace fp4forge::util {

/** s without leading and trailing spaces, tabs and carriage returns. */
inline std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

/** The pieces of s between separators (n separators give n + 1 pieces, empty ones included). */
inline std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t p = s.find(sep, start);
    out.push_back(s.substr(start, p == std::string_view::npos ? std::string_view::npos : p - start));
    if (p == std::string_view::npos) break;
    start = p + 1;
  }
  return out;
}

/** Prefix / suffix tests for any string-like argument (C++20 string_view members, one spelling). */
inline bool starts_with(std::string_view s, std::string_view prefix) { return s.starts_with(prefix); }
inline bool ends_with(std::string_view s, std::string_view suffix) { return s.ends_with(suffix); }

/** s with ASCII letters lower-cased (units, dtype names, schemes; never locale-dependent). */
inline std::string ascii_lower(std::string_view s) {
  std::string r(s);
  for (char& c : r)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return r;
}

/**
 * `s` safe for a one-line message on a terminal (issue 27 #14): control bytes (newlines included), DEL and
 * ill-formed UTF-8 (overlong forms, surrogates, beyond U+10FFFF) become `\xNN`; well-formed UTF-8 stays.
 * Input beyond `max_bytes` is cut at a character boundary and replaced by "...(N bytes)". Everything
 * fp4forge prints of untrusted text (names from hostile headers, errors, warnings, notes) goes through it.
 */
std::string printable(std::string_view s, std::size_t max_bytes = 256);

/** s with the five XML special characters escaped (SVG text and attributes). */
inline std::string xml_escape(std::string_view s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&apos;"; break;
      default: o += c;
    }
  }
  return o;
}

/** The key an option value is matched by: ASCII lower case, '_' read as '-' ("FP8_BLOCK" == "fp8-block"). */
inline std::string option_key(std::string_view s) {
  std::string r = ascii_lower(s);
  for (char& c : r)
    if (c == '_') c = '-';
  return r;
}

}  // namespace fp4forge::util
