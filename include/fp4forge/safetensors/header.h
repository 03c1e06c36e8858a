#pragma once
/**
 * safetensors file layout (huggingface/safetensors, tensor.rs):
 *  1. 8-byte little-endian u64 `n`, the JSON header length (including padding);
 *  2. `n` bytes of JSON: an object mapping tensor name -> {"dtype","shape","data_offsets":[b,e]}, plus an
 *     optional "__metadata__" string->string map; the reference writer pads it with spaces to 8 bytes;
 *  3. the data section; offsets are relative to its start, tensors contiguous, no gaps or overlaps.
 *
 * parse_header() validates everything before any tensor byte is touched: length cap, JSON object root,
 * known dtypes, shape x dtype size == end - begin (overflow-checked), offsets sorted/contiguous from 0,
 * last end == data section size, unique names, __metadata__ string map. It touches no file system.
 */
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fp4forge/core/dtype.h"
#include "fp4forge/core/error.h"

namespace fp4forge::st {

/** Headers larger than this are refused (same cap as the reference reader). */
inline constexpr std::uint64_t kMaxHeaderSize = 100'000'000;

/** Elements of a tensor of this shape: the product of its dimensions (1 for a 0-d scalar). */
std::uint64_t shape_numel(std::span<const std::uint64_t> shape) noexcept;

struct TensorInfo {
  std::string name;
  DType dtype = DType::U8;
  std::vector<std::uint64_t> shape;
  std::uint64_t begin = 0;  ///< offset in the data section
  std::uint64_t end = 0;

  std::uint64_t nbytes() const noexcept { return end - begin; }
  std::uint64_t numel() const noexcept;  ///< product of shape (1 for a 0-d scalar)
};

struct Header {
  std::vector<TensorInfo> tensors;  ///< sorted by data offset (file order)
  std::vector<std::pair<std::string, std::string>> metadata;  ///< __metadata__, in file order
  std::uint64_t header_len = 0;  ///< n
  std::uint64_t data_start() const noexcept { return 8 + header_len; }
  std::uint64_t data_size() const noexcept { return tensors.empty() ? 0 : tensors.back().end; }
  /** Binary search by name is not possible (file order); this is a linear scan — use an index. */
  const TensorInfo* find(std::string_view name) const noexcept;
};

/**
 * Parses and validates the header of a safetensors file whose full contents are `file` (the buffer
 * may be an mmap of the file). `source` names the file in error messages. Errors are BAD_INPUT.
 */
Result<Header> parse_header(std::span<const std::byte> file, std::string_view source);

/**
 * Same, when only the first bytes are available: `prefix` holds at least 8 + n bytes, and `file_size`
 * is the size of the whole file (used for the data-section size check).
 */
Result<Header> parse_header_prefix(std::span<const std::byte> prefix, std::uint64_t file_size,
                                   std::string_view source);

}  // namespace fp4forge::st
