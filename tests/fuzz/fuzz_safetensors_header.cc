// Fuzzes the safetensors header parser and the in-memory shard reader.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "fp4forge/safetensors/header.h"
#include "fp4forge/safetensors/shard_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto bytes = std::as_bytes(std::span<const std::uint8_t>(data, size));
  auto h = fp4forge::st::parse_header(bytes, "fuzz.safetensors");
  if (h.ok()) {
    // Every accepted header must describe in-range, contiguous data.
    std::uint64_t expect = 0;
    for (const auto& t : h->tensors) {
      if (t.begin != expect || t.end < t.begin) __builtin_trap();
      expect = t.end;
    }
    if (h->data_start() + expect != size) __builtin_trap();
  }
  // parse_header_prefix on exactly the header bytes must agree with parse_header on the whole file.
  if (size >= 8) {
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | data[i];
    if (n <= size - 8) {
      auto hp = fp4forge::st::parse_header_prefix(bytes.first(static_cast<std::size_t>(8 + n)), size,
                                                  "fuzz.safetensors");
      if (hp.ok() != h.ok()) __builtin_trap();
      if (hp.ok() && hp->tensors.size() != h->tensors.size()) __builtin_trap();
    }
  }
  std::vector<std::byte> copy(bytes.begin(), bytes.end());
  auto r = fp4forge::st::ShardReader::from_buffer(std::move(copy), "fuzz.safetensors");
  if (r.ok()) {
    for (const auto& t : r->header().tensors) {
      auto d = r->data(t);
      if (d.size() != t.nbytes()) __builtin_trap();
    }
  }
  return 0;
}
