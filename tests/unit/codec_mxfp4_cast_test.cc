// The closed-form MXFP4 -> NVFP4 cast (codec/mxfp4_cast.h): every representable block exponent, the range rule, and
// cast rows that dequantize (as compressed-tensors decodes NVFP4) to exactly the packed FP4 source's expansion.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "fp4forge/codec/fp8_dequant.h"
#include "fp4forge/codec/half.h"
#include "fp4forge/codec/mxfp4_cast.h"
#include "fp4forge/codec/nvfp4.h"

namespace fp4forge::mxcast {
namespace {

TEST(Mxfp4Cast, E4m3PowersOfTwoFromSubnormalToTheTop) {
  for (int t = -9; t <= 8; ++t) EXPECT_EQ(nvfp4::e4m3_to_float(e4m3_pow2(t)), std::ldexp(1.0f, t)) << t;
}

Range range_of(const std::vector<std::uint8_t>& bytes, DType d = DType::F8_E8M0) {
  Range r;
  add_scales(r, reinterpret_cast<const std::byte*>(bytes.data()), bytes.size(), d);
  return r;
}

TEST(Mxfp4Cast, ShiftHoldsSpansUpTo17AndRefusesWider) {
  Range ok = range_of({100, 117, 110});
  ASSERT_EQ(shift(ok), std::optional<int>(117 - 127 - 8));
  Range wide = range_of({100, 118});
  EXPECT_FALSE(shift(wide));
  EXPECT_NE(wide.why.find("span"), std::string::npos) << wide.why;
  Range nan = range_of({100, 0xFF});
  EXPECT_FALSE(shift(nan));
  EXPECT_NE(nan.why.find("NaN"), std::string::npos) << nan.why;
  // The global scale 2^-m must be a normal float32: k_max = -120 gives m = -128, 2^128 overflows.
  Range tiny = range_of({7, 7});
  EXPECT_FALSE(shift(tiny));
  Range top = range_of({254});
  ASSERT_TRUE(shift(top));
  EXPECT_EQ(global_scale(*shift(top)), std::ldexp(1.0f, -(127 - 8)));
}

TEST(Mxfp4Cast, F32ContainersMustHoldPowersOfTwo) {
  const std::vector<float> pow2{0.25f, 8.0f}, other{0.25f, 3.0f};
  Range a, b;
  add_scales(a, reinterpret_cast<const std::byte*>(pow2.data()), 2, DType::F32);
  add_scales(b, reinterpret_cast<const std::byte*>(other.data()), 2, DType::F32);
  ASSERT_TRUE(shift(a));
  EXPECT_EQ(a.kmin, -2);
  EXPECT_EQ(a.kmax, 3);
  EXPECT_FALSE(shift(b));
  EXPECT_NE(b.why.find("not a power of two"), std::string::npos) << b.why;
  Range c;
  add_scales(c, reinterpret_cast<const std::byte*>(pow2.data()), 2, DType::BF16);
  EXPECT_FALSE(shift(c));
}

TEST(Mxfp4Cast, CastRowsDequantizeToTheSourceExpansionExactly) {
  std::mt19937 rng(11);
  const std::uint64_t rows = 5, cols = 96;  // three 32-blocks a row: six NVFP4 16-blocks
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<std::byte> packed(rows * cols / 2), scales(rows * cols / 32);
    for (auto& b : packed) b = static_cast<std::byte>(rng() & 0xFF);
    const int base = 1 + static_cast<int>(rng() % 200);
    for (auto& s : scales) s = static_cast<std::byte>(base + static_cast<int>(rng() % 18));  // a span of 17 at most
    Range r;
    add_scales(r, scales.data(), scales.size(), DType::F8_E8M0);
    const auto m = shift(r);
    ASSERT_TRUE(m) << r.why;
    std::vector<std::byte> payload(rows * cols / 2), nv(rows * cols / 16);
    cast_rows(packed.data(), scales.data(), DType::F8_E8M0, rows, cols, Target::NVFP4, *m, payload.data(), nv.data());
    EXPECT_EQ(std::memcmp(payload.data(), packed.data(), payload.size()), 0);  // the codes are the source's
    std::vector<float> deq(rows * cols);
    nvfp4::decode_rows(payload.data(), nv.data(), global_scale(*m), rows, cols, deq.data());
    fp8::ScaleGrid g;
    g.layout = fp8::ScaleLayout::BLOCK;
    g.payload = fp8::Payload::E2M1;
    g.rows = rows;
    g.cols = cols;
    g.block_rows = 1;
    g.block_cols = 32;
    g.scale_dtype = DType::F8_E8M0;
    std::vector<std::uint16_t> want(rows * cols);
    ASSERT_EQ(fp8::dequant_range(packed.data(), scales.data(), g, 0, rows * cols, want.data()), fp8::kAllFinite);
    for (std::uint64_t i = 0; i < rows * cols; ++i)
      ASSERT_EQ(half::float_to_bf16(deq[i]), want[i]) << "trial " << trial << " element " << i;
  }
}

TEST(Mxfp4Cast, IntoMxfp4TheScaleBytesAreKept) {
  const std::vector<float> f32{0x1p-127f, 0x1p127f, 0.5f};
  Range r;
  add_scales(r, reinterpret_cast<const std::byte*>(f32.data()), f32.size(), DType::F32);
  ASSERT_EQ(shift(r, Target::MXFP4), std::optional<int>(0));
  const std::vector<float> sub{0x1p-130f};  // no E8M0 byte holds it
  Range s;
  add_scales(s, reinterpret_cast<const std::byte*>(sub.data()), 1, DType::F32);
  EXPECT_FALSE(shift(s, Target::MXFP4));
  std::vector<std::byte> packed(3 * 16, std::byte{0x5A}), out(packed.size()), sc(3);
  cast_rows(packed.data(), reinterpret_cast<const std::byte*>(f32.data()), DType::F32, 3, 32, Target::MXFP4, 0, out.data(),
            sc.data());
  EXPECT_EQ(out, packed);
  EXPECT_EQ(sc, (std::vector<std::byte>{std::byte{0}, std::byte{254}, std::byte{126}}));
}

}  // namespace
}  // namespace fp4forge::mxcast
