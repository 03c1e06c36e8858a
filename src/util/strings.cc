// Text made safe for a terminal line (include/fp4forge/util/strings.h).
#include "fp4forge/util/strings.h"

#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

namespace fp4forge::util {

namespace {

/** Walks `s` as UTF-8: `keep(cp, bytes)` for each well-formed character (overlong forms, surrogates and code points
 * beyond U+10FFFF are ill-formed), `bad(byte)` for each byte of an ill-formed sequence. The one decoder of the
 * escapers below. Stops (returning the offset) once `max_bytes` bytes have been consumed. */
template <class Keep, class Bad>
std::size_t walk_utf8(std::string_view s, std::size_t max_bytes, Keep keep, Bad bad) {
  std::size_t i = 0;
  while (i < s.size() && i < max_bytes) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      keep(static_cast<std::uint32_t>(c), s.substr(i, 1));
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
    if (ok && ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
               (cp >= 0xd800 && cp <= 0xdfff)))
      ok = false;
    if (!ok) {
      bad(c);
      ++i;
      continue;
    }
    keep(cp, s.substr(i, len));
    i += len;
  }
  return i;
}

void escape_byte(std::string& out, unsigned char c) { out += fmt::format("\\x{:02x}", c); }

}  // namespace

namespace {

/** printable() and printable_text(): controls, DEL and ill-formed bytes as \xNN; `lines` keeps newline and tab. */
std::string escape_controls(std::string_view s, std::size_t max_bytes, bool lines) {
  std::string out;
  out.reserve(std::min(s.size(), max_bytes) + 24);
  const std::size_t done = walk_utf8(
      s, max_bytes,
      [&](std::uint32_t cp, std::string_view bytes) {
        const bool kept_space = lines && (cp == '\n' || cp == '\t');
        if ((cp < 0x20 && !kept_space) || cp == 0x7f) escape_byte(out, static_cast<unsigned char>(cp));
        else out.append(bytes);
      },
      [&](unsigned char c) { escape_byte(out, c); });
  if (done < s.size()) out += fmt::format("...({} bytes)", s.size());
  return out;
}

}  // namespace

std::string printable(std::string_view s, std::size_t max_bytes) {
  // Keeps well-formed UTF-8; control bytes, DEL and ill-formed bytes become \xNN (one line, valid UTF-8).
  // A name from a hostile file can be megabytes long: only its first max_bytes bytes are shown (cut at a
  // character boundary), then "...(N bytes)", so an error message stays one readable line.
  return escape_controls(s, max_bytes, false);
}

std::string printable_text(std::string_view s) { return escape_controls(s, std::string_view::npos, true); }

std::string xml_escape(std::string_view s) {
  std::string o;
  o.reserve(s.size());
  walk_utf8(
      s, std::string_view::npos,
      [&](std::uint32_t cp, std::string_view bytes) {
        switch (cp) {
          case '&': o += "&amp;"; return;
          case '<': o += "&lt;"; return;
          case '>': o += "&gt;"; return;
          case '"': o += "&quot;"; return;
          case '\'': o += "&apos;"; return;
          case '\r': o += "&#13;"; return;  // a raw CR would be normalised away by an XML parser
          default: break;
        }
        // XML 1.0 Char: #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF] (surrogates are
        // ill-formed UTF-8 already). Anything else is shown as its bytes, as printable() shows them; DEL too.
        if ((cp < 0x20 && cp != '\t' && cp != '\n') || cp == 0x7f || cp == 0xfffe || cp == 0xffff) {
          for (char b : bytes) escape_byte(o, static_cast<unsigned char>(b));
          return;
        }
        o.append(bytes);
      },
      [&](unsigned char c) { escape_byte(o, c); });
  return o;
}

std::pair<std::size_t, std::size_t> line_column(std::string_view text, std::size_t at) {
  std::size_t line = 1, col = 1;
  for (std::size_t i = 0; i < at && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return {line, col};
}

std::optional<Utf8Stop> find_utf8(std::string_view s, bool (*stop)(std::uint32_t cp)) {
  std::optional<Utf8Stop> found;
  std::size_t at = 0;
  walk_utf8(
      s, s.size(),
      [&](std::uint32_t cp, std::string_view bytes) {
        if (!found && stop(cp)) found = Utf8Stop{at, cp, false};
        at += bytes.size();
      },
      [&](unsigned char c) {
        if (!found) found = Utf8Stop{at, c, true};
        ++at;
      });
  return found;
}

}  // namespace fp4forge::util
