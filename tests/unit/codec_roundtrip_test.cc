// Decode round trip, R4 / K % 16 refusals, global-scale edge cases (spec §2.2, §9) and the exact
// bf16/fp16 conversions of half.h.
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fp4forge/codec/half.h"
#include "fp4forge/codec/nvfp4.h"
#include "fp4forge/util/thread_pool.h"

namespace fp4forge::nvfp4 {
namespace {

float rd(float x, DType dt) {
  return dt == DType::BF16 ? half::round_to_bf16(x) : dt == DType::F16 ? half::round_to_f16(x) : x;
}

std::vector<std::byte> to_bytes(const std::vector<float>& v, DType dt) {
  std::vector<std::byte> out(v.size() * (dt == DType::F32 ? 4 : 2));
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (dt == DType::F32) {
      std::memcpy(out.data() + 4 * i, &v[i], 4);
    } else {
      const std::uint16_t b = dt == DType::BF16 ? half::float_to_bf16(v[i]) : half::float_to_f16(v[i]);
      std::memcpy(out.data() + 2 * i, &b, 2);
    }
  }
  return out;
}

// Half the E2M1 grid step around |q| (steps 0.5 below 2, 1 in [2, 4), 2 from 4 on; beyond 6 the
// clamp error of rounding the scale down is also covered by the last half step).
float half_step(float aq) { return aq < 2.0f ? 0.25f : aq < 4.0f ? 0.5f : 1.0f; }

class CodecRoundtrip : public ::testing::TestWithParam<DType> {};

TEST_P(CodecRoundtrip, DecodeErrorIsAtMostHalfAStepOfTheGroup) {
  const DType dt = GetParam();
  const std::uint64_t rows = 64, cols = 1024;
  std::mt19937 rng(7);
  std::vector<float> v(rows * cols);
  for (std::uint64_t r = 0; r < rows; ++r) {
    // Rows of very different magnitudes (normal E4M3 scales everywhere).
    const float sigma = std::ldexp(0.05f, static_cast<int>(r % 8) - 4);
    std::normal_distribution<float> nd(0.0f, sigma);
    for (std::uint64_t c = 0; c < cols; ++c) v[r * cols + c] = rd(nd(rng), dt);
  }
  const auto bytes = to_bytes(v, dt);
  const WeightView w{bytes.data(), dt, rows, cols};
  for (const std::string& path : available_paths()) {
    auto a = amax_rows_with(path, w, 0, rows, "w");
    ASSERT_TRUE(a.ok());
    const float gs = global_scale(*a, dt);
    std::vector<std::byte> pk(rows * cols / 2), sc(rows * cols / 16);
    ASSERT_TRUE(encode_rows_with(path, w, gs, 0, rows, pk.data(), sc.data(), "w").ok());
    std::vector<float> out(rows * cols);
    decode_rows(pk.data(), sc.data(), gs, rows, cols, out.data());
    std::size_t bad = 0;
    for (std::uint64_t i = 0; i < rows * cols; ++i) {
      const float s = e4m3_to_float(static_cast<std::uint8_t>(sc[i / 16]));
      ASSERT_GE(static_cast<std::uint8_t>(sc[i / 16]), 8) << "test data should give normal E4M3 scales";
      const float eff = s / gs;
      const float aq = std::fabs(v[i] / eff);
      const float err = std::fabs(out[i] - v[i]);
      if (err > half_step(aq) * eff * 1.000001f) {
        if (++bad < 5)
          ADD_FAILURE() << path << " element " << i << ": w " << v[i] << " decoded " << out[i] << " error "
                        << err << " > " << half_step(aq) * eff;
      }
    }
    EXPECT_EQ(bad, 0u) << path;
  }
}

TEST_P(CodecRoundtrip, RepresentableValuesRoundTripExactly) {
  const DType dt = GetParam();
  static constexpr float kGrid[] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  // gs = 64 (the global scale of amax 42 in bf16 and fp16) and E4M3 scales 2^k*{1, 1.125, ..., 1.875}:
  // every grid value times eff = s/gs is exact in the source dtype.
  const float gs = 64.0f;
  const std::uint64_t rows = 16, cols = 256;
  std::mt19937 rng(11);
  std::vector<float> v(rows * cols);
  for (std::uint64_t g = 0; g < rows * cols / 16; ++g) {
    const std::uint8_t code = static_cast<std::uint8_t>(0x38 + (g % 24));  // s in [1, 8)
    const float eff = e4m3_to_float(code) / gs;
    v[g * 16] = rd(6.0f * eff, dt) * ((g & 1) ? -1.0f : 1.0f);  // the group max picks this scale
    for (int k = 1; k < 16; ++k) v[g * 16 + k] = kGrid[rng() % 8] * eff * ((rng() & 1) ? -1.0f : 1.0f);
  }
  for (float x : v) ASSERT_EQ(rd(x, dt), x) << "test values must be exact in the dtype";
  const auto bytes = to_bytes(v, dt);
  const WeightView w{bytes.data(), dt, rows, cols};
  for (const std::string& path : available_paths()) {
    std::vector<std::byte> pk(rows * cols / 2), sc(rows * cols / 16);
    ASSERT_TRUE(encode_rows_with(path, w, gs, 0, rows, pk.data(), sc.data(), "w").ok());
    for (std::uint64_t g = 0; g < rows * cols / 16; ++g)
      ASSERT_EQ(static_cast<std::uint8_t>(sc[g]), 0x38 + (g % 24)) << path << " group " << g;
    std::vector<float> out(rows * cols);
    decode_rows(pk.data(), sc.data(), gs, rows, cols, out.data());
    for (std::uint64_t i = 0; i < rows * cols; ++i) {
      // -0.0 weights decode as +0 (code 0): compare values, and signs for non-zeros.
      ASSERT_EQ(out[i], v[i]) << path << " element " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CodecRoundtrip, ::testing::Values(DType::BF16, DType::F16, DType::F32),
                         [](const auto& p) { return std::string(dtype_name(p.param)); });

TEST(CodecRefusal, NonFiniteWeightsAreRefusedWithRowAndColumn) {
  struct Case {
    DType dt;
    float bad;
    const char* text;
  };
  const Case cases[] = {{DType::BF16, NAN, "nan"}, {DType::BF16, INFINITY, "inf"}, {DType::F16, -INFINITY, "-inf"},
                        {DType::F16, NAN, "nan"},  {DType::F32, INFINITY, "inf"},  {DType::F32, -NAN, "nan"}};
  for (const Case& c : cases) {
    std::vector<float> v(4 * 48, 0.01f);
    v[2 * 48 + 37] = c.bad;  // row 2, column 37
    const auto bytes = to_bytes(v, c.dt);
    const WeightView w{bytes.data(), c.dt, 4, 48};
    const std::string name = "model.layers.0.mlp.up_proj.weight";
    const std::string want = "tensor 'model.layers.0.mlp.up_proj.weight': non-finite value " + std::string(c.text) +
                             " at row 2, column 37; NVFP4 refuses to encode it (R4)";
    for (const std::string& path : available_paths()) {
      auto a = amax_rows_with(path, w, 0, 4, name);
      ASSERT_FALSE(a.ok()) << path;
      EXPECT_EQ(a.error().code, Errc::BAD_INPUT);
      EXPECT_EQ(a.error().message, want) << path;
      EXPECT_EQ(a.error().tensor, name);
      std::vector<std::byte> pk(4 * 24), sc(4 * 3);
      auto st = encode_rows_with(path, w, 1.0f, 0, 4, pk.data(), sc.data(), name);
      ASSERT_FALSE(st.ok()) << path;
      EXPECT_EQ(st.error().message, want) << path;
      // Row ranges without the bad row are fine; ranges with it name the absolute row.
      EXPECT_TRUE(amax_rows_with(path, w, 0, 2, name).ok()) << path;
      EXPECT_TRUE(encode_rows_with(path, w, 1.0f, 3, 4, pk.data(), sc.data(), name).ok()) << path;
      auto r = amax_rows_with(path, w, 2, 3, name);
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.error().message, want);
    }
    std::vector<WeightView> set{w};
    std::vector<std::string> names{name};
    auto e = encode_fused(set, names);
    ASSERT_FALSE(e.ok());
    EXPECT_EQ(e.error().message, want);
  }
}

TEST(CodecAmax, OnAPoolIsTheSerialAmaxAndError) {
  // 301 rows (no pool size divides them evenly) of mixed magnitudes; the largest in the last row.
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  std::vector<float> v(301 * 48);
  for (auto& x : v) x = nd(rng);
  v[300 * 48 + 47] = -3.5f;
  for (const DType dt : {DType::BF16, DType::F16, DType::F32}) {
    auto bytes = to_bytes(v, dt);
    const WeightView w{bytes.data(), dt, 301, 48};
    const auto serial = amax(w, "w");
    ASSERT_TRUE(serial.ok());
    EXPECT_EQ(*serial, 3.5f);
    EXPECT_EQ(*amax(w, "w", nullptr), *serial);
    for (unsigned threads : {1u, 2u, 3u, 7u, 16u}) {
      ThreadPool pool(threads);
      const auto a = amax(w, "w", &pool);
      ASSERT_TRUE(a.ok()) << threads;
      EXPECT_EQ(std::bit_cast<std::uint32_t>(*a), std::bit_cast<std::uint32_t>(*serial)) << threads;
    }
    // Two non-finite values in different ranges: the error names the first, as the serial amax does.
    std::vector<float> bad = v;
    bad[250 * 48 + 5] = NAN;
    bad[90 * 48 + 40] = INFINITY;
    bytes = to_bytes(bad, dt);
    const WeightView wb{bytes.data(), dt, 301, 48};
    const auto want = amax(wb, "model.layers.3.mlp.down_proj.weight");
    ASSERT_FALSE(want.ok());
    EXPECT_NE(want.error().message.find("at row 90, column 40"), std::string::npos) << want.error().message;
    for (unsigned threads : {2u, 3u, 7u, 16u}) {
      ThreadPool pool(threads);
      const auto a = amax(wb, "model.layers.3.mlp.down_proj.weight", &pool);
      ASSERT_FALSE(a.ok()) << threads;
      EXPECT_EQ(a.error().code, Errc::BAD_INPUT);
      EXPECT_EQ(a.error().message, want.error().message) << threads;
    }
  }
  // An empty tensor and a single row.
  ThreadPool pool(4);
  EXPECT_EQ(*amax(WeightView{nullptr, DType::BF16, 0, 48}, "w", &pool), 0.0f);
  const auto one = to_bytes(std::vector<float>(48, -0.25f), DType::BF16);
  EXPECT_EQ(*amax(WeightView{one.data(), DType::BF16, 1, 48}, "w", &pool), 0.25f);
}

TEST(CodecRefusal, KNotAMultipleOf16IsRefused) {
  std::vector<float> v(2 * 20, 0.5f);
  const auto bytes = to_bytes(v, DType::BF16);
  const WeightView w{bytes.data(), DType::BF16, 2, 20};
  std::vector<std::byte> pk(64), sc(64);
  for (const std::string& path : available_paths()) {
    auto st = encode_rows_with(path, w, 1.0f, 0, 2, pk.data(), sc.data(), "lm.small_proj.weight");
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error().code, Errc::BAD_INPUT);
    EXPECT_NE(st.error().message.find("tensor 'lm.small_proj.weight'"), std::string::npos) << st.error().message;
    EXPECT_NE(st.error().message.find("K = 20 is not a multiple of 16"), std::string::npos) << st.error().message;
  }
  std::vector<WeightView> set{w};
  std::vector<std::string> names{"lm.small_proj.weight"};
  EXPECT_FALSE(encode_fused(set, names).ok());
}

TEST(CodecRefusal, BadArguments) {
  std::vector<float> v(16, 1.0f);
  const auto bytes = to_bytes(v, DType::BF16);
  std::vector<std::byte> pk(8), sc(1);
  const WeightView i8{bytes.data(), DType::I8, 1, 16};
  EXPECT_EQ(encode_rows(i8, 1.0f, 0, 1, pk.data(), sc.data(), "t").error().code, Errc::BAD_INPUT);
  const WeightView w{bytes.data(), DType::BF16, 1, 16};
  EXPECT_EQ(encode_rows(w, 1.0f, 0, 2, pk.data(), sc.data(), "t").error().code, Errc::BAD_INPUT);
  EXPECT_EQ(encode_rows(w, NAN, 0, 1, pk.data(), sc.data(), "t").error().code, Errc::BAD_INPUT);
  EXPECT_EQ(encode_rows(w, 0.0f, 0, 1, pk.data(), sc.data(), "t").error().code, Errc::BAD_INPUT);
  EXPECT_EQ(encode_rows_with("NOPE", w, 1.0f, 0, 1, pk.data(), sc.data(), "t").error().code, Errc::USAGE);
  EXPECT_TRUE(encode_rows(w, 1.0f, 1, 1, nullptr, nullptr, "t").ok());  // empty range writes nothing
  std::vector<float> h(16, 1.0f);
  const auto f32 = to_bytes(h, DType::F32);
  std::vector<WeightView> mixed{w, WeightView{f32.data(), DType::F32, 1, 16}};
  std::vector<std::string> names{"a", "b"};
  EXPECT_EQ(encode_fused(mixed, names).error().code, Errc::BAD_INPUT);
}

TEST(CodecGlobalScale, EdgeCasesFromSpec) {
  // §2.2: reciprocal then multiply, in bf16.
  EXPECT_EQ(global_scale(0.10009765625f, DType::BF16), 26880.0f);
  // All-zero tensors and bf16 amax below 7.946e-36 overflow to 1.0.
  EXPECT_EQ(global_scale(0.0f, DType::BF16), 1.0f);
  EXPECT_EQ(global_scale(half::round_to_bf16(7.9e-36f), DType::BF16), 1.0f);
  EXPECT_EQ(global_scale(0x1p-130f, DType::BF16), 1.0f);  // bf16 subnormal
  EXPECT_NE(global_scale(half::round_to_bf16(8.0e-36f), DType::BF16), 1.0f);
  EXPECT_TRUE(std::isfinite(global_scale(half::round_to_bf16(8.0e-36f), DType::BF16)));
  // fp16: amax < 0.041046 overflows to 1.0.
  EXPECT_EQ(global_scale(half::round_to_f16(0.041f), DType::F16), 1.0f);
  EXPECT_EQ(global_scale(half::round_to_f16(0.001f), DType::F16), 1.0f);
  EXPECT_EQ(global_scale(0.0f, DType::F16), 1.0f);
  const float above = global_scale(half::round_to_f16(0.0411f), DType::F16);
  EXPECT_NE(above, 1.0f);
  EXPECT_LE(above, 65504.0f);
  EXPECT_EQ(half::round_to_f16(above), above);
  // fp32: the same formula in fp32; the tiny clamp 2^-126 makes r*2688 overflow.
  EXPECT_EQ(global_scale(0.0f, DType::F32), 1.0f);
  EXPECT_EQ(global_scale(1e-38f, DType::F32), 1.0f);
  EXPECT_EQ(global_scale(1.0f, DType::F32), 2688.0f);
  EXPECT_EQ(global_scale(0.5f, DType::F32), 5376.0f);
  // Large amax: gs < 1, rounded to bf16.
  const float big = global_scale(6000.0f, DType::BF16);
  EXPECT_LT(big, 1.0f);
  EXPECT_EQ(half::round_to_bf16(big), big);
  EXPECT_EQ(big, half::round_to_bf16(half::round_to_bf16(1.0f / 6000.0f) * 2688.0f));
  // NaN amax (never reached in fp4forge: R4 refuses first) follows nan_to_num -> 1.0.
  EXPECT_EQ(global_scale(NAN, DType::BF16), 1.0f);
}

TEST(CodecGroupScale, ClampZeroAndSubnormalScales) {
  // gs·flD(a/6) > 448 clamps to 448 (0x7E), never NaN.
  EXPECT_EQ(group_scale_code(0.10009765625f, DType::BF16, 26880.0f), 0x7E);
  EXPECT_EQ(group_scale_code(1e30f, DType::F32, 1.0f), 0x7E);
  // Zero and underflowing groups store 0.125 (0x20).
  EXPECT_EQ(group_scale_code(0.0f, DType::BF16, 2688.0f), kZeroScaleCode);
  EXPECT_EQ(group_scale_code(6.0f * 0x1p-11f, DType::F32, 1.0f), kZeroScaleCode);  // p = 2^-11 -> 0
  // E4M3 subnormals are kept (min 2^-9).
  EXPECT_EQ(group_scale_code(6.0f * 0x1p-9f, DType::F32, 1.0f), 0x01);
  EXPECT_EQ(group_scale_code(6.0f * 3 * 0x1p-9f, DType::F32, 1.0f), 0x03);
}

TEST(CodecTables, E4m3AndFp4Values) {
  EXPECT_EQ(e4m3_to_float(0x7E), 448.0f);
  EXPECT_EQ(e4m3_to_float(0x01), 0x1p-9f);
  EXPECT_EQ(e4m3_to_float(0x08), 0x1p-6f);
  EXPECT_EQ(e4m3_to_float(0x20), 0.125f);
  EXPECT_EQ(e4m3_to_float(0x7B), 352.0f);
  EXPECT_EQ(e4m3_to_float(0xB8), -1.0f);
  EXPECT_TRUE(std::isnan(e4m3_to_float(0x7F)));
  EXPECT_TRUE(std::isnan(e4m3_to_float(0xFF)));
  const float mags[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (int c = 0; c < 16; ++c) {
    EXPECT_EQ(std::fabs(fp4_to_float(static_cast<std::uint8_t>(c))), mags[c & 7]);
    EXPECT_EQ(std::signbit(fp4_to_float(static_cast<std::uint8_t>(c))), c >= 8);
  }
}

TEST(CodecHalf, Bf16AndF16ConversionsAreExactAndRne) {
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const auto h = static_cast<std::uint16_t>(b);
    // bf16: every non-NaN pattern round-trips.
    const float fb = half::bf16_to_float(h);
    if (!std::isnan(fb)) {
      ASSERT_EQ(half::float_to_bf16(fb), h);
    }
    // f16: value matches the definition; every non-NaN pattern round-trips.
    const float ff = half::f16_to_float(h);
    const int e = (h >> 10) & 31, m = h & 1023;
    if (e == 31) {
      ASSERT_TRUE(m ? std::isnan(ff) : std::isinf(ff));
      continue;
    }
    const double want = (e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25)) * ((h & 0x8000) ? -1 : 1);
    ASSERT_EQ(static_cast<double>(ff), want) << std::hex << b;
    ASSERT_EQ(half::float_to_f16(ff), h) << std::hex << b;
    // Ties to even: the midpoint to the next magnitude rounds to the even pattern.
    if ((h & 0x7FFF) < 0x7BFF) {
      const float next = half::f16_to_float(static_cast<std::uint16_t>(h + 1));
      const float mid = static_cast<float>((static_cast<double>(ff) + next) / 2);
      const std::uint16_t even = (h & 1) ? static_cast<std::uint16_t>(h + 1) : h;
      ASSERT_EQ(half::float_to_f16(mid), even) << std::hex << b;
    }
  }
  EXPECT_EQ(half::float_to_f16(65519.0f), 0x7BFF);
  EXPECT_EQ(half::float_to_f16(65520.0f), 0x7C00);  // overflow to inf
  EXPECT_EQ(half::float_to_bf16(1.00390625f), 0x3F80);  // tie -> even
  EXPECT_EQ(half::float_to_bf16(1.01171875f), 0x3F82);  // tie -> even (up)
  EXPECT_TRUE(std::isnan(half::bf16_to_float(half::float_to_bf16(NAN))));
}


// decode_rows' Highway kernel against the reference loop: every byte (two codes, both signs, every magnitude)
// under every E4M3 scale code (subnormals, the two NaN codes), for global scales of several magnitudes; the
// floats equal bit for bit (NaN where the reference gives NaN).
TEST(CodecDecode, TheKernelIsTheReferenceBitForBit) {
  const std::uint64_t cols = 16 * 16;  // 256 bytes per row: every byte value once per row
  const std::uint64_t rows = 256;      // every scale code: row r has code r in all its groups... and others
  std::vector<std::byte> packed(rows * cols / 2), scales(rows * cols / 16);
  for (std::uint64_t r = 0; r < rows; ++r) {
    for (std::uint64_t b = 0; b < cols / 2; ++b) packed[r * cols / 2 + b] = static_cast<std::byte>((b + r) & 0xFF);
    for (std::uint64_t g = 0; g < cols / 16; ++g) scales[r * cols / 16 + g] = static_cast<std::byte>((r + 37 * g) & 0xFF);
  }
  for (float gs : {1.0f, 448.0f * 6.0f / 0.02f, 0x1p-20f, 3.0e38f}) {
    std::vector<float> ref(rows * cols), got(rows * cols);
    decode_rows(packed.data(), scales.data(), gs, rows, cols, ref.data(), "scalar");
    decode_rows(packed.data(), scales.data(), gs, rows, cols, got.data());
    std::size_t bad = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
      const bool same = std::isnan(ref[i]) ? std::isnan(got[i])
                                           : std::bit_cast<std::uint32_t>(ref[i]) == std::bit_cast<std::uint32_t>(got[i]);
      if (!same && bad++ < 3) ADD_FAILURE() << "gs " << gs << " element " << i << ": " << got[i] << " vs " << ref[i];
    }
    EXPECT_EQ(bad, 0u) << gs;
  }
}

}  // namespace
}  // namespace fp4forge::nvfp4
