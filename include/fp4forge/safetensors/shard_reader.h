#pragma once
/** A memory-mapped, fully validated safetensors file. */
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "fp4forge/core/error.h"
#include "fp4forge/safetensors/header.h"

namespace fp4forge::st {

class ShardReader {
 public:
  /** mmaps `path` read-only and validates its header. IO for open/mmap failures, BAD_INPUT for format. */
  static Result<ShardReader> open(const std::filesystem::path& path);
  /** Validates an in-memory file (for fuzzing and tests); the reader owns the buffer. */
  static Result<ShardReader> from_buffer(std::vector<std::byte> bytes, std::string name);

  ShardReader(ShardReader&&) noexcept;
  ShardReader& operator=(ShardReader&&) noexcept;
  ~ShardReader();

  const Header& header() const noexcept;
  const std::string& path() const noexcept;  ///< path or buffer name
  std::uint64_t file_size() const noexcept;
  /** BAD_INPUT "changed during the run" when the file shrank under the mapping (a read hit a page
   * past its end: see MapGuard), or its size or mtime differ from when it was opened. Buffers: ok. */
  Status check_unchanged() const;
  /** Lookup by name; nullptr if absent. */
  const TensorInfo* find(std::string_view name) const noexcept;
  /** The tensor's raw bytes (little-endian, row-major). */
  std::span<const std::byte> data(const TensorInfo& t) const noexcept;
  /** Tells the kernel the tensor's pages are no longer needed (madvise DONTNEED); no-op for buffers. */
  void release(const TensorInfo& t) const noexcept;
  /** Asks the kernel to start reading the tensor's pages now (madvise WILLNEED): read-ahead for work that
   * touches it next; no-op for buffers. */
  void prefetch(const TensorInfo& t) const noexcept;

 private:
  struct Impl;
  explicit ShardReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace fp4forge::st
