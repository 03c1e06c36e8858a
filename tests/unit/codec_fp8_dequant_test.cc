// FP8 E4M3 -> bf16 expansion (codec/fp8_dequant.h): the element formula, the scale grids, NaN reporting.
#include <gtest/gtest.h>

#include "fp4forge/codec/nvfp4.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "fp4forge/codec/fp8_dequant.h"
#include "fp4forge/codec/half.h"

namespace fp4forge::fp8 {
namespace {

std::vector<std::byte> f32_bytes(const std::vector<float>& v) {
  std::vector<std::byte> b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

TEST(Fp8Dequant, E4m3Values) {
  EXPECT_EQ(nvfp4::e4m3_to_float(0x00), 0.0f);
  EXPECT_TRUE(std::signbit(nvfp4::e4m3_to_float(0x80)));
  EXPECT_EQ(nvfp4::e4m3_to_float(0x01), 0x1p-9f);  // smallest subnormal
  EXPECT_EQ(nvfp4::e4m3_to_float(0x08), 0x1p-6f);  // smallest normal
  EXPECT_EQ(nvfp4::e4m3_to_float(0x7E), 448.0f);
  EXPECT_EQ(nvfp4::e4m3_to_float(0xFE), -448.0f);
  EXPECT_TRUE(std::isnan(nvfp4::e4m3_to_float(0x7F)));
  EXPECT_TRUE(std::isnan(nvfp4::e4m3_to_float(0xFF)));
  EXPECT_EQ(nvfp4::e4m3_to_float(0x38), 1.0f);
}

TEST(Fp8Dequant, ElementIsFloat32ProductRoundedToBf16) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(1e-6f, 1e-1f);
  for (int i = 0; i < 2000; ++i) {
    const float s = u(rng);
    const auto code = static_cast<std::uint8_t>(rng() & 0xFF);
    if ((code & 0x7F) == 0x7F) continue;
    const float p = nvfp4::e4m3_to_float(code) * s;  // one float32 multiply
    EXPECT_EQ(dequant_bf16(code, s, DType::F32), half::float_to_bf16(p)) << int(code) << " " << s;
    // A BF16 scale: the product is exact in float32, so rounding once to bf16 is torch's bf16 multiply.
    const float sb = half::round_to_bf16(s);
    EXPECT_EQ(dequant_bf16(code, sb, DType::BF16), half::float_to_bf16(nvfp4::e4m3_to_float(code) * sb));
  }
}

TEST(Fp8Dequant, RangeMatchesTheElementFormulaForEveryCode) {
  // Every code (signed zeros, subnormals, 448, NaN) under scales that make products subnormal, overflow or
  // round at bf16 boundaries, through the vectorized run (F32 and BF16 scales) and the F16 path.
  std::vector<std::byte> codes(256);
  for (int c = 0; c < 256; ++c) codes[static_cast<std::size_t>(c)] = static_cast<std::byte>(c);
  for (DType sd : {DType::F32, DType::BF16, DType::F16})
    for (float s0 : {1.0f, 0x1p-130f, 3e36f, 1.0f / 3.0f, 0.0078125f, 1e-3f, 0.0f, -2.5f, INFINITY}) {
      const float s = sd == DType::BF16 ? half::round_to_bf16(s0) : sd == DType::F16 ? half::round_to_f16(s0) : s0;
      ScaleGrid g;
      g.layout = ScaleLayout::TENSOR;
      g.rows = 1;
      g.cols = 256;
      g.scale_dtype = sd;
      std::vector<std::byte> sb(4);
      if (sd == DType::F32) {
        std::memcpy(sb.data(), &s, 4);
      } else {
        const std::uint16_t b = sd == DType::BF16 ? half::float_to_bf16(s) : half::float_to_f16(s);
        std::memcpy(sb.data(), &b, 2);
      }
      for (const auto path : dequant_paths()) {
      SCOPED_TRACE(std::string(path));
      std::vector<std::uint16_t> out(256);
      const auto r = dequant_range_with(path, codes.data(), sb.data(), g, 0, 256, out.data());
      ASSERT_TRUE(r.has_value());
      const std::uint64_t bad = *r;
      std::uint64_t want_bad = kAllFinite;
      for (int c = 0; c < 256; ++c) {
        const auto code = static_cast<std::uint8_t>(c);
        const std::uint16_t want = dequant_bf16(code, s, sd);
        if (std::isnan(half::bf16_to_float(want))) {
          EXPECT_TRUE(std::isnan(half::bf16_to_float(out[static_cast<std::size_t>(c)]))) << c << " " << s;
        } else {
          EXPECT_EQ(out[static_cast<std::size_t>(c)], want) << "code " << c << " scale " << s;
        }
        float p = nvfp4::e4m3_to_float(code) * s;
        if (sd == DType::F16) p = half::round_to_f16(p);
        if (!std::isfinite(p) && want_bad == kAllFinite) want_bad = static_cast<std::uint64_t>(c);
      }
      EXPECT_EQ(bad, want_bad) << s;
      }
    }
}

TEST(Fp8Dequant, EveryPathWritesTheSameBitsOnLongRuns) {
  // Runs long enough for every vector width and its tail, block grids with partial blocks.
  ScaleGrid g;
  g.layout = ScaleLayout::BLOCK;
  g.rows = 37;
  g.cols = 1000;
  std::vector<float> sc(g.scales_per_matrix());
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(1e-6f, 2.0f);
  for (auto& v : sc) v = u(rng);
  const auto sb = f32_bytes(sc);
  std::vector<std::byte> codes(g.rows * g.cols);
  for (auto& c : codes) c = static_cast<std::byte>(rng() & 0xFF);
  std::vector<std::uint16_t> want(codes.size());
  const auto paths = dequant_paths();
  ASSERT_FALSE(paths.empty());
  EXPECT_EQ(std::string(paths.back()), nvfp4::best_path());  // one dispatch: the best target of every codec kernel
  const std::uint64_t want_bad = *dequant_range_with(paths.front(), codes.data(), sb.data(), g, 3, codes.size() - 3, want.data());
  for (const auto path : paths) {
    std::vector<std::uint16_t> got(codes.size());
    const auto bad = dequant_range_with(path, codes.data(), sb.data(), g, 3, codes.size() - 3, got.data());
    ASSERT_TRUE(bad.has_value()) << path;
    EXPECT_EQ(*bad, want_bad) << path;
    EXPECT_EQ(got, want) << path;
  }
  EXPECT_FALSE(dequant_range_with("no-such-path", codes.data(), sb.data(), g, 0, 1, want.data()).has_value());
}

TEST(Fp8Dequant, SelfcheckPassesOnEveryPath) {
  const auto checks = dequant_selfcheck();
  EXPECT_EQ(checks.size(), dequant_paths().size());
  for (const auto& c : checks) {
    EXPECT_EQ(c.mismatches, 0u) << c.path << ": " << c.first;
    EXPECT_EQ(c.elements, 1280u * 27u) << c.path;
  }
}

TEST(Fp8Dequant, F16ScaleRoundsToF16First) {
  // compressed-tensors multiplies in the scale's dtype: fl16(w * s), then casts to bf16. Some products
  // round differently that way than straight to bf16; the formula must take the double rounding.
  int differ = 0;
  for (int c = 1; c < 0x7F; ++c)
    for (std::uint16_t h = 0x1000; h < 0x3C00; h += 37) {
      const float s = half::f16_to_float(h);
      const float v = nvfp4::e4m3_to_float(static_cast<std::uint8_t>(c));
      const std::uint16_t want = half::float_to_bf16(half::round_to_f16(v * s));
      ASSERT_EQ(dequant_bf16(static_cast<std::uint8_t>(c), s, DType::F16), want);
      differ += want != half::float_to_bf16(v * s);
    }
  EXPECT_GT(differ, 0);
}

TEST(Fp8Dequant, BlockGridWithPartialBlocksAnyRange) {
  const std::uint64_t rows = 130, cols = 200;
  ScaleGrid g;
  g.layout = ScaleLayout::BLOCK;
  g.rows = rows;
  g.cols = cols;
  ASSERT_EQ(g.scale_rows(), 2u);
  ASSERT_EQ(g.scale_cols(), 2u);
  std::vector<float> sc{0.5f, 0.25f, 2.0f, 0.125f * 3};
  const auto scb = f32_bytes(sc);
  std::vector<std::byte> codes(rows * cols);
  std::mt19937 rng(3);
  for (auto& c : codes) {
    c = static_cast<std::byte>(rng() & 0xFF);
    if ((static_cast<unsigned>(c) & 0x7F) == 0x7F) c = std::byte{0x10};
  }
  // Ranges that start mid-row, cross rows and blocks, and the whole tensor.
  for (auto [b, n] : std::vector<std::pair<std::uint64_t, std::uint64_t>>{{0, rows * cols}, {127, 300}, {128 * 200 + 5, 390}}) {
    std::vector<std::uint16_t> out(n);
    ASSERT_EQ(dequant_range(codes.data(), scb.data(), g, b, n, out.data()), kAllFinite);
    for (std::uint64_t i = 0; i < n; ++i) {
      const std::uint64_t f = b + i, r = f / cols, c = f % cols;
      const float s = sc[(r / 128) * 2 + c / 128];
      ASSERT_EQ(out[i], half::float_to_bf16(nvfp4::e4m3_to_float(static_cast<std::uint8_t>(codes[f])) * s)) << f;
    }
  }
}

TEST(Fp8Dequant, ChannelAndTensorGridsOverLeadingDims) {
  ScaleGrid ch;
  ch.layout = ScaleLayout::CHANNEL;
  ch.rows = 3;
  ch.cols = 5;
  EXPECT_EQ(ch.scale_index(2 * 15 + 1 * 5 + 4), 2u * 3 + 1);
  ScaleGrid t;
  t.layout = ScaleLayout::TENSOR;
  t.rows = 3;
  t.cols = 5;
  EXPECT_EQ(t.scale_index(2 * 15 + 14), 2u);
  EXPECT_EQ(t.scales_per_matrix(), 1u);
  // Two matrices, one scale each, BF16 scales.
  std::vector<std::byte> codes(30, std::byte{0x38});  // 1.0
  std::vector<std::uint16_t> s{half::float_to_bf16(2.0f), half::float_to_bf16(0.5f)};
  std::vector<std::byte> sb(4);
  std::memcpy(sb.data(), s.data(), 4);
  t.scale_dtype = DType::BF16;
  std::vector<std::uint16_t> out(30);
  ASSERT_EQ(dequant_range(codes.data(), sb.data(), t, 0, 30, out.data()), kAllFinite);
  EXPECT_EQ(out[14], half::float_to_bf16(2.0f));
  EXPECT_EQ(out[15], half::float_to_bf16(0.5f));
}

TEST(Fp8Dequant, NanCodesAndNonFiniteProductsAreReported) {
  ScaleGrid g;
  g.layout = ScaleLayout::CHANNEL;
  g.rows = 2;
  g.cols = 4;
  std::vector<std::byte> codes(8, std::byte{0x38});
  auto sc = f32_bytes({1.0f, 1.0f});
  std::vector<std::uint16_t> out(8);
  codes[6] = std::byte{0xFF};
  EXPECT_EQ(dequant_range(codes.data(), sc.data(), g, 0, 8, out.data()), 6u);
  codes[6] = std::byte{0x38};
  sc = f32_bytes({1.0f, INFINITY});
  EXPECT_EQ(dequant_range(codes.data(), sc.data(), g, 0, 8, out.data()), 4u);
  sc = f32_bytes({3e38f, 1.0f});  // 448 * 3e38 overflows float32
  codes[1] = std::byte{0x7E};
  EXPECT_EQ(dequant_range(codes.data(), sc.data(), g, 0, 8, out.data()), 1u);  // 1.0 * 3e38 is finite
  EXPECT_EQ(dequant_range(codes.data(), sc.data(), g, 4, 4, out.data()), kAllFinite);
}

// E8M0 scales (DeepSeek-V4's scale_fmt ue8m0, MX blocks): byte b is 2^(b - 127), 0xFF NaN; F8_E8M0 and U8 alike.
TEST(Fp8Dequant, E8m0ScaleValues) {
  for (DType d : {DType::F8_E8M0, DType::U8}) {
    ASSERT_TRUE(is_e8m0_scale(d));
    for (int b = 0; b < 255; ++b) {
      const std::byte x = static_cast<std::byte>(b);
      EXPECT_EQ(scale_value(&x, 0, d), std::ldexp(1.0f, b - 127)) << b;
    }
    const std::byte nan{0xFF};
    EXPECT_TRUE(std::isnan(scale_value(&nan, 0, d)));
  }
  EXPECT_FALSE(is_e8m0_scale(DType::F32));
}

/** E2M1 magnitude from its bits, independently of the table: sign, 2 exponent bits (bias 1), 1 mantissa bit. */
float e2m1_from_bits(unsigned n) {
  const unsigned e = (n >> 1) & 3u, m = n & 1u;
  const float v = e == 0 ? 0.5f * static_cast<float>(m) : std::ldexp(1.0f + 0.5f * static_cast<float>(m), static_cast<int>(e) - 1);
  return (n & 8u) != 0 ? -v : v;
}

TEST(Fp8Dequant, PackedE2m1RangeIsLowNibbleFirstUnderE8m0Blocks) {
  // [3, 64] expanded (two 32-blocks per row), one E8M0 scale per block, every byte value, every scale byte.
  const std::uint64_t rows = 3, cols = 64;
  std::vector<std::byte> packed(rows * cols / 2);
  for (std::size_t i = 0; i < packed.size(); ++i) packed[i] = static_cast<std::byte>((i * 29 + 3) & 0xFF);
  for (int e0 = 0; e0 < 256; e0 += 5) {
    std::vector<std::byte> sc(rows * 2);
    for (std::size_t i = 0; i < sc.size(); ++i) sc[i] = static_cast<std::byte>((e0 + static_cast<int>(i) * 40) % 255);
    ScaleGrid g;
    g.layout = ScaleLayout::BLOCK;
    g.payload = Payload::E2M1;
    g.rows = rows;
    g.cols = cols;
    g.block_rows = 1;
    g.block_cols = 32;
    g.scale_dtype = DType::F8_E8M0;
    for (std::uint64_t begin : {0u, 1u, 31u, 33u}) {
      const std::uint64_t count = rows * cols - begin - (begin % 3);
      std::vector<std::uint16_t> got(count);
      ASSERT_EQ(dequant_range(packed.data(), sc.data(), g, begin, count, got.data()), kAllFinite);
      for (std::uint64_t i = 0; i < count; ++i) {
        const std::uint64_t at = begin + i, r = at / cols, c = at % cols;
        const auto byte = static_cast<unsigned>(packed[at / 2]);
        const unsigned nib = at % 2 == 0 ? byte & 15u : byte >> 4;
        const float s = std::ldexp(1.0f, static_cast<int>(sc[r * 2 + c / 32]) - 127);
        ASSERT_EQ(got[i], half::float_to_bf16(e2m1_from_bits(nib) * s)) << "element " << at << " scale byte " << int(sc[r * 2 + c / 32]);
        ASSERT_EQ(got[i], dequant_e2m1_bf16(static_cast<std::uint8_t>(nib), s));
      }
    }
  }
}

TEST(Fp8Dequant, PackedE2m1NanScaleAndOverflowAreReported) {
  std::vector<std::byte> packed(32, std::byte{0x77});  // 6.0 in both nibbles
  ScaleGrid g;
  g.layout = ScaleLayout::BLOCK;
  g.payload = Payload::E2M1;
  g.rows = 1;
  g.cols = 64;
  g.block_rows = 1;
  g.block_cols = 32;
  g.scale_dtype = DType::U8;
  std::vector<std::uint16_t> out(64);
  const std::byte ok_then_nan[2] = {std::byte{127}, std::byte{0xFF}};
  EXPECT_EQ(dequant_range(packed.data(), ok_then_nan, g, 0, 64, out.data()), 32u);
  const std::byte huge[2] = {std::byte{127}, std::byte{254}};  // 6 x 2^127 overflows float32
  EXPECT_EQ(dequant_range(packed.data(), huge, g, 0, 64, out.data()), 32u);
  const std::byte fine[2] = {std::byte{0}, std::byte{252}};  // 6 x 2^-127 (a bf16 subnormal) and 6 x 2^125
  EXPECT_EQ(dequant_range(packed.data(), fine, g, 0, 64, out.data()), kAllFinite);
  EXPECT_EQ(out[0], half::float_to_bf16(6.0f * 0x1p-127f));
  // Only some codes of a block overflow under its scale: the first such element is reported, from any start.
  std::vector<std::byte> mixed(32, std::byte{0x11});  // 0.5 x 2^127 is finite
  mixed[5] = std::byte{0x70};                          // element 10: 0, element 11: 6 x 2^127 = inf
  mixed[20] = std::byte{0x07};                         // element 40: inf (second block)
  const std::byte big[2] = {std::byte{254}, std::byte{254}};
  EXPECT_EQ(dequant_range(mixed.data(), big, g, 0, 64, out.data()), 11u);
  EXPECT_EQ(dequant_range(mixed.data(), big, g, 11, 53, out.data()), 11u);
  EXPECT_EQ(dequant_range(mixed.data(), big, g, 12, 52, out.data()), 40u);
  EXPECT_EQ(dequant_range(mixed.data(), big, g, 41, 23, out.data()), kAllFinite);
}

}  // namespace
}  // namespace fp4forge::fp8
