#pragma once
/**
 * Byte sizes on the command line and in reports.
 *
 * parse_size() accepts a plain byte count ("1048576"), decimal units (KB, MB, GB, TB: powers of 1000)
 * and binary units (KiB, MiB, GiB, TiB: powers of 1024), optionally with a fraction ("1.5TiB") and
 * spaces before the unit; the unit is case-insensitive except that the `i` marks binary. A bare
 * K/M/G/T is refused as ambiguous. The result is floored to whole bytes.
 */
#include <cstdint>
#include <string>
#include <string_view>

#include "fp4forge/error.h"
#include "fp4forge/util/format.h"  // format_bytes / format_count for reports

namespace fp4forge::kvplan {

inline constexpr std::uint64_t kKiB = 1024ull, kMiB = kKiB * 1024, kGiB = kMiB * 1024, kTiB = kGiB * 1024;

/** Parses a size (see above). USAGE errors name the text and the accepted forms. */
Result<std::uint64_t> parse_size(std::string_view text);

}  // namespace fp4forge::kvplan
