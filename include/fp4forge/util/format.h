#pragma once
/** Human-readable numbers for text reports (plan, inspect, quantize). */
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace fp4forge {

/** "58.46 GiB", "84.00 MiB", "512 B": binary units, two decimals. */
std::string format_bytes(std::uint64_t bytes);

/** A tensor shape: "[2048, 1024]" (sep ", "), or as the file spells it "[2048,1024]" (sep ","). */
std::string format_shape(std::span<const std::uint64_t> shape, std::string_view sep = ", ");
/** The multi-index of row-major element `flat` of a tensor of `shape`, formatted as format_shape does ("[3, 7]";
 * "[]" for a scalar). */
std::string format_index(std::span<const std::uint64_t> shape, std::uint64_t flat);

/** 17366515712 -> "17,366,515,712". */
std::string format_count(std::uint64_t n);

/** The first `shown` items joined by ", ", then ", ... (N more)" for the rest: a list in a one-line message whose
 * length does not grow with the input ("a, b, c, ... (1,204 more)"). */
std::string format_list(std::span<const std::string> items, std::size_t shown = 8);

}  // namespace fp4forge
