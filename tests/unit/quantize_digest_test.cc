// The resume manifest's shard digest (XXH3-64). The hand-written hash it replaced collided on two
// 64-byte files differing only in bit 63 of words 0 and 4 (the sign bits of BF16/F32 data): a resumed
// run would have kept a wrong shard.
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "fp4forge/quantize/run.h"

namespace fp4forge::quant {
namespace {

std::filesystem::path write_words(const std::string& name, const std::uint64_t (&w)[8]) {
  const auto p = std::filesystem::temp_directory_path() / (name + "-" + std::to_string(::getpid()));
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(w), sizeof w);
  return p;
}

TEST(QuantizeDigest, SignBitFlipsInDifferentLanesDoNotCollide) {
  std::uint64_t a[8], b[8];
  for (int i = 0; i < 8; ++i) a[i] = b[i] = 0x0123456789abcdefULL * static_cast<std::uint64_t>(i + 1);
  b[0] ^= 1ULL << 63;
  b[4] ^= 1ULL << 63;
  const auto pa = write_words("digest-a", a), pb = write_words("digest-b", b);
  auto da = file_digest(pa), db = file_digest(pb), da2 = file_digest(pa);
  ASSERT_TRUE(da.ok() && db.ok() && da2.ok());
  EXPECT_NE(*da, *db);
  EXPECT_EQ(*da, *da2);
  // Every single-bit flip of a 64-byte file changes the digest.
  for (int bit = 0; bit < 512; ++bit) {
    std::uint64_t c[8];
    std::memcpy(c, a, sizeof a);
    c[bit / 64] ^= 1ULL << (bit % 64);
    const auto pc = write_words("digest-c", c);
    auto dc = file_digest(pc);
    ASSERT_TRUE(dc.ok());
    EXPECT_NE(*dc, *da) << "bit " << bit;
    std::filesystem::remove(pc);
  }
  std::filesystem::remove(pa);
  std::filesystem::remove(pb);
}

}  // namespace
}  // namespace fp4forge::quant
