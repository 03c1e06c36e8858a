// Text made safe for a terminal line (include/fp4forge/util/strings.h).
#include "fp4forge/util/strings.h"

#include <cstdint>

#include <fmt/format.h>

namespace fp4forge::util {

std::string printable(std::string_view s, std::size_t max_bytes) {
  // Keeps well-formed UTF-8; control bytes, DEL and ill-formed bytes become \xNN (one line, valid UTF-8).
  // A name from a hostile file can be megabytes long: only its first max_bytes bytes are shown (cut at a
  // character boundary), then "...(N bytes)", so an error message stays one readable line.
  std::string out;
  out.reserve(std::min(s.size(), max_bytes) + 24);
  auto esc = [&out](unsigned char c) { out += fmt::format("\\x{:02x}", c); };
  std::size_t i = 0;
  while (i < s.size()) {
    if (i >= max_bytes) {
      out += fmt::format("...({} bytes)", s.size());
      break;
    }
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

}  // namespace fp4forge::util
