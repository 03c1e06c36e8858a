#pragma once
/**
 * Byte sizes: the one grammar of every size option (quantize --max-memory, plan --gpu / overhead= /
 * used=, seat keys) and the unit constants.
 *
 * parse_size() accepts a plain byte count ("1048576") or a number with a unit, optionally with a
 * fraction ("1.5TiB") and spaces before the unit, case-insensitive:
 * - binary: K, M, G, T and KiB, MiB, GiB, TiB are powers of 1024 (`2G` == `2GiB` == 2^31 bytes, as in
 *   docker, ulimit and nvidia-smi's MiB);
 * - decimal: KB, MB, GB, TB are powers of 1000 (`41GB` == 41 x 10^9, as disk vendors and HF file sizes
 *   count).
 * A number without a unit is bytes when it is a whole number of at least 1024 (or 0); a smaller one, or one with a
 * fraction, is refused as a unit left out ("2" is not a headroom of 2 bytes); "2B" says bytes.
 * The result is floored to whole bytes. docs/cli/plan.md and docs/cli/quantize.md cite this grammar.
 */
#include <cstdint>
#include <string>
#include <string_view>

#include "fp4forge/core/error.h"
#include "fp4forge/util/format.h"  // format_bytes / format_count for reports

namespace fp4forge {

inline constexpr std::uint64_t kKiB = 1024ull, kMiB = kKiB * 1024, kGiB = kMiB * 1024, kTiB = kGiB * 1024;

/** Parses a size (see above). USAGE errors name the text and the accepted forms. */
Result<std::uint64_t> parse_size(std::string_view text);

}  // namespace fp4forge
