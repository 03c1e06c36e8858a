#pragma once
// The string helpers of the project (one home): trim, split, prefix/suffix tests, ASCII lower-casing.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
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

/** printable()'s cut for a whole line of a text report (a finding's message, a warning, a table cell): text
 * renderers write every string that holds file data (names, config values, messages that quote them) as
 * printable(s, kReportLine), so a newline in a name is `\x0a`, not a forged line (R4-B5). */
inline constexpr std::size_t kReportLine = 16384;

/**
 * A whole multi-line report made safe for a terminal (R4-B5): printable() line by line, keeping newlines and tabs
 * and no length cap. The CLI prints every text report through it, so a name a renderer forgot to escape can forge a
 * line at most, never reach the terminal as ESC, CR or another control byte. Renderers still escape each name from a
 * file with printable(), which also escapes a newline.
 */
std::string printable_text(std::string_view s);

/**
 * `s` as XML 1.0 character data or an attribute value (SVG text, titles): the five special characters escaped, CR as
 * `&#13;`, and every character XML 1.0 forbids (C0 controls other than tab and LF, DEL, U+FFFE/U+FFFF, ill-formed
 * UTF-8) written as `\xNN` text, as printable() writes it: the document stays well-formed whatever a name holds.
 */
std::string xml_escape(std::string_view s);

/** The 1-based line and byte column of offset `at` in `text` (a position for a parse error's message). */
std::pair<std::size_t, std::size_t> line_column(std::string_view text, std::size_t at);

/** Where find_utf8 stopped: the byte offset, and the character there (or the ill-formed byte). */
struct Utf8Stop {
  std::size_t offset = 0;
  std::uint32_t cp = 0;     ///< the code point, or the first byte of an ill-formed sequence
  bool ill_formed = false;  ///< not UTF-8 there (overlong, surrogate, beyond U+10FFFF, truncated)
};

/** The first ill-formed UTF-8 sequence of `s`, or the first character `stop(cp)` is true for; nullopt when neither
 * (the escapers' own decoder: util/yaml_strict.h checks YAML's characters with it). */
std::optional<Utf8Stop> find_utf8(std::string_view s, bool (*stop)(std::uint32_t cp));

/** The key an option value is matched by: ASCII lower case, '_' read as '-' ("FP8_BLOCK" == "fp8-block"). */
inline std::string option_key(std::string_view s) {
  std::string r = ascii_lower(s);
  for (char& c : r)
    if (c == '_') c = '-';
  return r;
}

}  // namespace fp4forge::util
