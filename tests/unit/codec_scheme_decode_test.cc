// decode_linear_rows (codec/scheme.h), the dequantization verify --against compares with the source: per
// scheme and source dtype, every element within the scheme's rounding bound of its source, row ranges equal
// to slices of the whole, NVFP4A16 equal to nvfp4::decode_rows, NaN codes and scales decode to NaN.
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fp4forge/codec/fp8.h"
#include "fp4forge/codec/half.h"
#include "fp4forge/codec/mxfp4.h"
#include "fp4forge/codec/nvfp4.h"
#include "fp4forge/codec/scheme.h"
#include "fp4forge/codec/w4a16.h"

namespace fp4forge {
namespace {

struct Weights {
  DType dtype;
  std::uint64_t rows, cols;
  std::vector<std::byte> bytes;
  std::vector<float> values;  // the stored values, exactly
  nvfp4::WeightView view() const { return {bytes.data(), dtype, rows, cols}; }
};

Weights gaussian(DType t, std::uint64_t rows, std::uint64_t cols, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  Weights w{t, rows, cols, {}, {}};
  const std::size_t es = t == DType::F32 ? 4 : 2;
  w.bytes.resize(rows * cols * es);
  for (std::uint64_t i = 0; i < rows * cols; ++i) {
    float v = nd(rng) * (i % 97 == 0 ? 4.0f : 1.0f);  // a few outliers per row
    if (t == DType::BF16) {
      const std::uint16_t h = half::float_to_bf16(v);
      std::memcpy(w.bytes.data() + 2 * i, &h, 2);
      v = half::bf16_to_float(h);
    } else if (t == DType::F16) {
      const std::uint16_t h = half::float_to_f16(v);
      std::memcpy(w.bytes.data() + 2 * i, &h, 2);
      v = half::f16_to_float(h);
    } else {
      std::memcpy(w.bytes.data() + 4 * i, &v, 4);
    }
    w.values.push_back(v);
  }
  return w;
}

float scale_value(const EncodedTensor& s, std::uint64_t i) {
  if (s.dtype == DType::F32) {
    float f;
    std::memcpy(&f, s.bytes.data() + 4 * i, 4);
    return f;
  }
  std::uint16_t h;
  std::memcpy(&h, s.bytes.data() + 2 * i, 2);
  return s.dtype == DType::BF16 ? half::bf16_to_float(h) : half::f16_to_float(h);
}

LinearData data_of(const std::vector<EncodedTensor>& enc, QuantScheme s) {
  LinearData d{enc[0].bytes.data(), enc[1].bytes.data(), enc[1].dtype, 1.0f};
  if (s == QuantScheme::NVFP4A16) std::memcpy(&d.global_scale, enc[2].bytes.data(), 4);
  return d;
}

/** The largest |deq - w| the scheme's rounding allows for element (r, c) of W. */
double bound(QuantScheme s, const std::vector<EncodedTensor>& enc, const Weights& w, std::uint64_t r,
             std::uint64_t c) {
  const double v = std::fabs(w.values[r * w.cols + c]);
  switch (s) {
    case QuantScheme::FP8_DYNAMIC:
    case QuantScheme::FP8_BLOCK: {
      const std::uint64_t i = s == QuantScheme::FP8_DYNAMIC
                                  ? r
                                  : (r / fp8::kBlock) * fp8::block_scale_cols(w.cols) + c / fp8::kBlock;
      const double sc = scale_value(enc[1], i);
      return 0.0625 * v * 1.01 + sc * 0x1p-9 * 1.01;  // half an E4M3 step (3 mantissa bits), subnormals 2^-9
    }
    case QuantScheme::W4A16:
      // half a step; the scale's own rounding (flD(amax / 7.5)) lets |w / s| pass 7.5 by a hair
      return 0.53 * scale_value(enc[1], r * w4a16::scale_cols(w.cols) + c / w4a16::kGroupSize);
    case QuantScheme::MXFP4A16: {
      const std::uint8_t e = static_cast<std::uint8_t>(enc[1].bytes[r * mxfp4::scale_cols(w.cols) + c / 32]);
      return 1.0 * std::ldexp(1.0, static_cast<int>(e) - 127) * 1.01;  // a whole E2M1 step (6 -> clamp)
    }
    case QuantScheme::NVFP4A16: return 1e30;
  }
  return 0;
}

class SchemeDecode : public ::testing::TestWithParam<std::tuple<QuantScheme, DType>> {};

TEST_P(SchemeDecode, EveryElementWithinTheRoundingBoundAndRangesMatch) {
  const auto [s, t] = GetParam();
  const Weights w = gaussian(t, 300, 256, 7);  // 300 rows: a partial 128-row block under FP8_BLOCK
  auto enc = encode_linear(s, w.view(), "w");
  ASSERT_TRUE(enc.ok()) << enc.error().message;
  const LinearData d = data_of(*enc, s);
  std::vector<float> all(w.rows * w.cols);
  decode_linear_rows(s, d, w.rows, w.cols, 0, w.rows, all.data());
  double err2 = 0, ref2 = 0;
  for (std::uint64_t r = 0; r < w.rows; ++r)
    for (std::uint64_t c = 0; c < w.cols; ++c) {
      const double x = w.values[r * w.cols + c], y = all[r * w.cols + c];
      err2 += (x - y) * (x - y);
      ref2 += x * x;
      if (s != QuantScheme::NVFP4A16) {
        ASSERT_LE(std::fabs(x - y), bound(s, *enc, w, r, c)) << r << "," << c;
      }
    }
  const double rel = std::sqrt(err2 / ref2);
  EXPECT_GT(rel, 0.0);
  EXPECT_LT(rel, weight_bits(s) == 8 ? 0.05 : 0.3);
  // A row range is the same as the slice of the whole (offsets into payload and scales, blocks by row).
  for (auto [r0, r1] : {std::pair<std::uint64_t, std::uint64_t>{128, 256}, {256, 300}, {1, 2}}) {
    if (s == QuantScheme::FP8_BLOCK && r0 % 128 != 0) continue;
    std::vector<float> part((r1 - r0) * w.cols);
    decode_linear_rows(s, d, w.rows, w.cols, r0, r1, part.data());
    EXPECT_EQ(0, std::memcmp(part.data(), all.data() + r0 * w.cols, part.size() * 4)) << r0;
  }
  if (s == QuantScheme::NVFP4A16) {
    std::vector<float> ref(w.rows * w.cols);
    nvfp4::decode_rows((*enc)[0].bytes.data(), (*enc)[1].bytes.data(), d.global_scale, w.rows, w.cols, ref.data());
    EXPECT_EQ(0, std::memcmp(ref.data(), all.data(), ref.size() * 4));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Schemes, SchemeDecode,
    ::testing::Combine(::testing::Values(QuantScheme::NVFP4A16, QuantScheme::MXFP4A16, QuantScheme::FP8_DYNAMIC,
                                         QuantScheme::FP8_BLOCK, QuantScheme::W4A16),
                       ::testing::Values(DType::BF16, DType::F16, DType::F32)),
    [](const ::testing::TestParamInfo<std::tuple<QuantScheme, DType>>& p) {
      std::string n(quant_scheme_preset(std::get<0>(p.param)));
      n += "_";
      n += dtype_name(std::get<1>(p.param));
      return n;
    });

TEST(SchemeDecode, NanCodesAndScalesDecodeToNan) {
  const Weights w = gaussian(DType::BF16, 4, 128, 3);
  auto fp8 = encode_linear(QuantScheme::FP8_DYNAMIC, w.view(), "w");
  ASSERT_TRUE(fp8.ok());
  (*fp8)[0].bytes[5] = std::byte{0x7F};
  std::vector<float> out(4 * 128);
  decode_linear_rows(QuantScheme::FP8_DYNAMIC, data_of(*fp8, QuantScheme::FP8_DYNAMIC), 4, 128, 0, 4, out.data());
  EXPECT_TRUE(std::isnan(out[5]));
  EXPECT_FALSE(std::isnan(out[6]));
  auto mx = encode_linear(QuantScheme::MXFP4A16, w.view(), "w");
  ASSERT_TRUE(mx.ok());
  (*mx)[1].bytes[1] = std::byte{0xFF};  // row 0, columns 32..63
  decode_linear_rows(QuantScheme::MXFP4A16, data_of(*mx, QuantScheme::MXFP4A16), 4, 128, 0, 4, out.data());
  for (int c = 32; c < 64; ++c) EXPECT_TRUE(std::isnan(out[c])) << c;
  EXPECT_FALSE(std::isnan(out[31]));
  EXPECT_FALSE(std::isnan(out[64]));
}

}  // namespace
}  // namespace fp4forge
