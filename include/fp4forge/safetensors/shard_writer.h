#pragma once
/**
 * Writing safetensors files the way the reference writer (safetensors 0.8.0 `prepare`) does:
 * tensors sorted by dtype descending in the Dtype declaration order, then name ascending (bytewise);
 * header = compact JSON (no spaces), `__metadata__` first if present, each entry
 * `"name":{"dtype":"…","shape":[…],"data_offsets":[a,b]}`, padded with 0x20 to a multiple of 8.
 */
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "fp4forge/core/error.h"
#include "fp4forge/safetensors/header.h"
#include "fp4forge/util/fs.h"

namespace fp4forge::st {

struct OutTensor {
  std::string name;
  DType dtype = DType::U8;
  std::vector<std::uint64_t> shape;
};

/** A fully planned file: every offset is final before the first data byte is written. */
struct ShardLayout {
  std::vector<TensorInfo> tensors;  ///< in file order, with data offsets
  std::string header_bytes;         ///< the 8-byte length + padded JSON, ready to write
  std::uint64_t file_size = 0;      ///< header_bytes.size() + data size
  const TensorInfo* find(std::string_view name) const noexcept;
};

/** Orders and lays out `tensors` (BAD_INPUT on duplicate names or size overflow). */
Result<ShardLayout> layout_shard(std::vector<OutTensor> tensors,
                                 const std::vector<std::pair<std::string, std::string>>& metadata = {});

/**
 * Streams one planned file to `final.partial`; commit() checks every data byte was written, fsyncs and
 * renames. Destroying an uncommitted writer removes the .partial. Data may be written in any order with
 * write_at (offsets relative to the data section); the bytes never depend on the order.
 */
class ShardWriter {
 public:
  static Result<ShardWriter> create(const std::filesystem::path& final_path, ShardLayout layout);
  ShardWriter(ShardWriter&&) noexcept = default;
  ShardWriter& operator=(ShardWriter&&) noexcept = default;

  const ShardLayout& layout() const noexcept { return layout_; }
  /** Writes the bytes of one tensor (must be exactly its size). Thread-safe (pwrite). */
  Status write_tensor(const TensorInfo& t, std::span<const std::byte> bytes);
  /** Writes part of the data section at `offset` (relative to the data section). Thread-safe. */
  Status write_at(std::uint64_t offset, std::span<const std::byte> bytes);
  /** Extends the file to its full size without writing data (a sparse data section that reads as zeros) and
   * counts it as written: the header-only checkpoints of `synth --header-only`. Call before any write_at. */
  Status leave_data_sparse();
  Status commit();
  void abort() noexcept;

 private:
  ShardWriter() = default;
  fs::AtomicFile file_;
  ShardLayout layout_;
  // Total data bytes written (checked at commit); heap-held so the writer stays movable.
  std::unique_ptr<std::atomic<std::uint64_t>> written_;
};

/** Convenience: lays out and writes a whole small file in one call (tests, synth of small tensors). */
Status write_safetensors(const std::filesystem::path& path,
                         const std::vector<std::pair<OutTensor, std::vector<std::byte>>>& tensors,
                         const std::vector<std::pair<std::string, std::string>>& metadata = {});

}  // namespace fp4forge::st
