#include "fp4forge/util/size.h"

#include "fp4forge/util/strings.h"

#include <cctype>

namespace fp4forge {
namespace {

__extension__ typedef unsigned __int128 u128;  // exact fixed-point arithmetic for "1.5TiB"

Error size_error(std::string_view text, std::string_view why) {
  return make_error(Errc::USAGE,
                    "invalid size '{}': {}; expected bytes or a number with a unit, e.g. 2G or 96GiB "
                    "(binary), 41GB (decimal), 1.5TiB, 1048576",
                    text, why);
}

}  // namespace

Result<std::uint64_t> parse_size(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size() && text[i] == ' ') ++i;
  u128 whole = 0;
  u128 frac = 0, frac_den = 1;
  std::size_t digits = 0;
  for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i, ++digits) {
    whole = whole * 10 + static_cast<unsigned>(text[i] - '0');
    if (whole > (static_cast<u128>(1) << 80)) return size_error(text, "too large");
  }
  if (i < text.size() && text[i] == '.') {
    ++i;
    std::size_t fd = 0;
    for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i, ++fd) {
      if (fd < 18) {
        frac = frac * 10 + static_cast<unsigned>(text[i] - '0');
        frac_den *= 10;
      }
    }
    if (fd == 0) return size_error(text, "a digit must follow the decimal point");
    digits += fd;
  }
  if (digits == 0) return size_error(text, i < text.size() && text[i] == '-' ? "a size is never negative" : "no number");
  while (i < text.size() && text[i] == ' ') ++i;
  const std::string unit = util::ascii_lower(text.substr(i));
  // A bare number is bytes, but a fraction of a byte or a handful of bytes is a unit left out (issue 55 tryout:
  // --headroom 2 planned a headroom of 2 B, weights=60 a 60 B model); 0 needs no unit, "2B" says bytes.
  if (unit.empty() && (frac != 0 || frac_den > 1 || (whole > 0 && whole < 1024))) {
    const std::string n(text.substr(text.find_first_not_of(' ')));
    return size_error(text, fmt::format("it has no unit, so it would be {} bytes; write the unit ({}GiB, {}GB, {}MiB), "
                                        "or {}B if bytes are meant", n, n, n, n, n));
  }
  std::uint64_t mult = 0;
  if (unit.empty() || unit == "b") mult = 1;
  else if (unit == "kb") mult = 1000ull;
  else if (unit == "mb") mult = 1000ull * 1000;
  else if (unit == "gb") mult = 1000ull * 1000 * 1000;
  else if (unit == "tb") mult = 1000ull * 1000 * 1000 * 1000;
  else if (unit == "k" || unit == "kib") mult = kKiB;
  else if (unit == "m" || unit == "mib") mult = kMiB;
  else if (unit == "g" || unit == "gib") mult = kGiB;
  else if (unit == "t" || unit == "tib") mult = kTiB;
  else
    return size_error(text, fmt::format("unknown unit '{}'", text.substr(i)));
  const u128 v = whole * mult + frac * mult / frac_den;
  if (v > static_cast<u128>(UINT64_MAX)) return size_error(text, "too large");
  return static_cast<std::uint64_t>(v);
}

}  // namespace fp4forge
