// Randomized differential test: every Highway path must produce the bytes of the scalar reference.
// Per dtype (BF16, F16, F32) more than 10^7 values, mixing normal values of many magnitudes, ±0,
// subnormals, exact FP4 ties and their neighbours, huge values, all-zero groups, groups whose E4M3
// scale underflows, tensors whose global scale overflows to 1.0, and sets where gs·s > 448 before the
// clamp. Row ranges are encoded in pieces to exercise the row-range API.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fp4forge/codec/half.h"
#include "fp4forge/codec/nvfp4.h"

namespace fp4forge::nvfp4 {
namespace {

constexpr std::uint64_t kSeed = 0x5EED'F4F0'0001ull;

struct Tensor {
  std::string name;
  std::uint64_t rows = 0, cols = 0;
  std::vector<std::byte> bytes;
};

class Gen {
 public:
  Gen(DType dt, std::uint64_t seed) : dt_(dt), rng_(seed) {}

  float max_finite() const { return dt_ == DType::F16 ? 65504.0f : dt_ == DType::BF16 ? 0x1.FEp127f : 0x1.FFFFFEp127f; }
  float min_normal() const { return dt_ == DType::F16 ? 0x1p-14f : 0x1p-126f; }
  float min_subnormal() const { return dt_ == DType::F16 ? 0x1p-24f : dt_ == DType::BF16 ? 0x1p-133f : 0x1p-149f; }

  // Rounds to the dtype (RNE) and keeps it finite.
  float rd(float x) const {
    float r = dt_ == DType::BF16 ? half::round_to_bf16(x) : dt_ == DType::F16 ? half::round_to_f16(x) : x;
    if (std::isinf(r)) r = std::copysign(max_finite(), r);
    return r;
  }
  // Next representable value away from / toward zero in the dtype.
  float nudge(float x, bool up) const {
    if (dt_ == DType::F32) return std::nextafter(x, up ? std::copysign(INFINITY, x) : 0.0f);
    std::uint16_t b = dt_ == DType::BF16 ? half::float_to_bf16(x) : half::float_to_f16(x);
    const std::uint16_t mag = b & 0x7FFF;
    if (up && mag < (dt_ == DType::BF16 ? 0x7F7F : 0x7BFF)) ++b;
    if (!up && mag > 0) --b;
    return dt_ == DType::BF16 ? half::bf16_to_float(b) : half::f16_to_float(b);
  }
  void store(Tensor& t, std::uint64_t i, float v) const {
    if (dt_ == DType::F32) {
      std::memcpy(t.bytes.data() + 4 * i, &v, 4);
    } else {
      const std::uint16_t b = dt_ == DType::BF16 ? half::float_to_bf16(v) : half::float_to_f16(v);
      std::memcpy(t.bytes.data() + 2 * i, &b, 2);
    }
  }
  Tensor make(std::string name, std::uint64_t rows, std::uint64_t cols) const {
    Tensor t{std::move(name), rows, cols, {}};
    t.bytes.resize(rows * cols * (dt_ == DType::F32 ? 4 : 2));
    return t;
  }
  double uni(double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng_); }
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  float normal(float sigma) { return std::normal_distribution<float>(0.0f, sigma)(rng_); }
  float sign() { return pick(2) ? 1.0f : -1.0f; }

  DType dt_;
  std::mt19937_64 rng_;
};

// Groups of many kinds, scaled by a per-tensor magnitude S.
Tensor mixed_tensor(Gen& g, std::uint64_t rows, std::uint64_t cols, float S, int id) {
  Tensor t = g.make("mixed" + std::to_string(id), rows, cols);
  static constexpr float kGrid[] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  float v[16];
  const bool huge = S >= (g.dt_ == DType::F16 ? 1000.0f : 1e20f);
  for (std::uint64_t grp = 0; grp < rows * cols / 16; ++grp) {
    const int kind = g.pick(100);
    const float sigma = S * static_cast<float>(std::pow(10.0, g.uni(-4, 0)));
    for (int k = 0; k < 16; ++k) {
      float x;
      if (kind < 36) {                  // normal values
        x = g.normal(sigma);
      } else if (kind < 44) {           // all-zero group, mixed ±0
        x = g.sign() * 0.0f;
      } else if (kind < 52) {           // tiny relative to the tensor: the E4M3 scale underflows
        x = g.normal(S * static_cast<float>(std::pow(10.0, g.uni(-9, -4))));
      } else if (kind < 60) {           // subnormals of the source dtype (and ±0)
        x = g.sign() * static_cast<float>(g.uni(0, 1)) * g.min_normal();
      } else if (kind < 68) {           // sparse: ±0, tiny negatives (code 0x8), one or two real values
        const int r = g.pick(8);
        x = r < 4 ? g.sign() * 0.0f : r < 6 ? -g.min_subnormal() * static_cast<float>(1 + g.pick(50))
                                            : g.normal(sigma);
      } else if (kind < 78) {           // multiples of the FP4 grid and of its midpoints
        const float m = g.pick(2) ? kGrid[g.pick(8)] : (kGrid[g.pick(7)] + kGrid[g.pick(7) + 1]) / 2;
        x = g.sign() * m * std::ldexp(1.0f, static_cast<int>(std::log2(std::max(sigma, 1e-30f))) - 2);
      } else if (kind < 88) {           // uniform with one outlier
        x = static_cast<float>(g.uni(-1, 1)) * sigma * (g.pick(16) == 0 ? 100.0f : 1.0f);
      } else if (huge) {                // huge values for the dtype (only in "huge" tensors)
        x = g.sign() * g.max_finite() * static_cast<float>(g.uni(0.001, 1.0));
      } else {
        x = g.normal(sigma);
      }
      v[k] = g.rd(x);
    }
    for (int k = 0; k < 16; ++k) g.store(t, grp * 16 + k, v[k]);
  }
  return t;
}

// Exact FP4 ties (q = w/eff exactly on a threshold) and their neighbours. The tensor amax A = 42·2^j
// gives gs = 64·2^-j for BF16/F16, so groups with max 6·2^k have s and eff powers of two.
Tensor tie_tensor(Gen& g, std::uint64_t rows, std::uint64_t cols, int j, int id, std::uint64_t* exact_ties) {
  Tensor t = g.make("ties" + std::to_string(id), rows, cols);
  static constexpr float kVals[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 0.5f, 1.0f, 1.5f,
                                    2.0f, 3.0f, 4.0f, 6.0f, 0.0f};
  const float A = g.rd(std::ldexp(42.0f, j));
  const float gs = global_scale(A, g.dt_);
  for (std::uint64_t grp = 0; grp < rows * cols / 16; ++grp) {
    float M = grp == 0 ? A
              : g.pick(2) ? g.rd(std::ldexp(6.0f, j - 2 - g.pick(12)))
                          : g.rd(A * static_cast<float>(g.uni(1e-4, 1.0)));
    const float eff = e4m3_to_float(group_scale_code(M, g.dt_, gs)) / gs;
    const int at = g.pick(16);
    for (int k = 0; k < 16; ++k) {
      float w = M * (k == at ? g.sign() : 0.0f);
      if (k != at) {
        w = g.rd(g.sign() * kVals[g.pick(15)] * eff);
        const int n = g.pick(4);
        if (n == 1) w = g.nudge(w, true);
        if (n == 2) w = g.nudge(w, false);
        if (std::fabs(w) > M) w = std::copysign(M, w);
        const float q = std::fabs(w / eff);
        for (int tv = 0; tv < 7; ++tv) *exact_ties += q == kVals[tv];
      }
      g.store(t, grp * 16 + k, w);
    }
  }
  return t;
}

// Every row holds ±A where gs·flD(A/6) > 448, so those groups' scale is clamped to 448 (0x7E).
Tensor clamp_tensor(Gen& g, std::uint64_t rows, std::uint64_t cols, int id) {
  Tensor t = g.make("clamp" + std::to_string(id), rows, cols);
  float A = 0.0f;
  for (int tries = 0; tries < 10000; ++tries) {
    const float cand = g.rd(static_cast<float>(std::pow(10.0, g.uni(-3, 3))));
    const float gs = global_scale(cand, g.dt_);
    const float sD = g.rd(cand / 6.0f);
    if (gs * sD > 448.0f) {
      A = cand;
      break;
    }
  }
  EXPECT_GT(A, 0.0f) << "no amax with gs*s > 448 found";
  for (std::uint64_t r = 0; r < rows; ++r) {
    const std::uint64_t at = static_cast<std::uint64_t>(g.pick(static_cast<int>(cols)));
    for (std::uint64_t c = 0; c < cols; ++c) {
      float w = c == at ? g.sign() * A : g.rd(g.normal(A / 4));
      if (std::fabs(w) > A) w = std::copysign(A, w);
      g.store(t, r * cols + c, w);
    }
  }
  return t;
}

struct Totals {
  std::uint64_t values = 0, clamped_groups = 0, zero_scale_groups = 0, neg_zero_codes = 0;
  std::uint64_t subnormal_scales = 0, gs_one = 0;
};

void check_tensor(const Tensor& t, DType dt, const std::vector<std::string>& paths, Totals& tot) {
  const WeightView w{t.bytes.data(), dt, t.rows, t.cols};
  auto ref_amax = amax_rows_with("scalar", w, 0, t.rows, t.name);
  ASSERT_TRUE(ref_amax.ok()) << ref_amax.error().message;
  const float gs = global_scale(*ref_amax, dt);
  tot.gs_one += gs == 1.0f;
  std::vector<std::byte> ref_p(t.rows * t.cols / 2), ref_s(t.rows * t.cols / 16);
  ASSERT_TRUE(encode_rows_with("scalar", w, gs, 0, t.rows, ref_p.data(), ref_s.data(), t.name).ok());
  tot.values += t.rows * t.cols;
  for (std::byte s : ref_s) {
    const auto c = static_cast<std::uint8_t>(s);
    tot.clamped_groups += c == 0x7E;
    tot.zero_scale_groups += c == kZeroScaleCode;
    tot.subnormal_scales += c > 0 && c < 8;
  }
  for (std::byte b : ref_p) {
    tot.neg_zero_codes += (static_cast<std::uint8_t>(b) & 0x0F) == 8;
    tot.neg_zero_codes += (static_cast<std::uint8_t>(b) >> 4) == 8;
  }
  for (const std::string& p : paths) {
    if (p == "scalar") continue;
    auto a = amax_rows_with(p, w, 0, t.rows, t.name);
    ASSERT_TRUE(a.ok()) << p << ": " << a.error().message;
    EXPECT_EQ(std::bit_cast<std::uint32_t>(*a), std::bit_cast<std::uint32_t>(*ref_amax)) << p << " " << t.name;
    std::vector<std::byte> pk(ref_p.size()), sc(ref_s.size());
    // Three row ranges, written at their offsets.
    const std::uint64_t r1 = t.rows / 3, r2 = t.rows - t.rows / 4;
    for (auto [b, e] : {std::pair{std::uint64_t{0}, r1}, std::pair{r1, r2}, std::pair{r2, t.rows}}) {
      ASSERT_TRUE(encode_rows_with(p, w, gs, b, e, pk.data() + b * t.cols / 2, sc.data() + b * t.cols / 16,
                                   t.name).ok());
    }
    const auto ms = std::mismatch(ref_s.begin(), ref_s.end(), sc.begin());
    if (ms.first != ref_s.end()) {
      const std::size_t i = static_cast<std::size_t>(ms.first - ref_s.begin());
      ADD_FAILURE() << p << " " << t.name << " (" << dtype_name(dt) << "): weight_scale differs at group " << i
                    << " (row " << i / (t.cols / 16) << ", group " << i % (t.cols / 16) << "): scalar 0x"
                    << std::hex << static_cast<unsigned>(ref_s[i]) << ", " << p << " 0x"
                    << static_cast<unsigned>(sc[i]);
      continue;
    }
    const auto mp = std::mismatch(ref_p.begin(), ref_p.end(), pk.begin());
    if (mp.first != ref_p.end()) {
      const std::size_t i = static_cast<std::size_t>(mp.first - ref_p.begin());
      ADD_FAILURE() << p << " " << t.name << " (" << dtype_name(dt) << "): weight_packed differs at byte " << i
                    << " (row " << i / (t.cols / 2) << ", columns " << 2 * (i % (t.cols / 2)) << "-"
                    << 2 * (i % (t.cols / 2)) + 1 << "): scalar 0x" << std::hex << static_cast<unsigned>(ref_p[i])
                    << ", " << p << " 0x" << static_cast<unsigned>(pk[i]) << ", gs " << gs;
    }
  }
}

class CodecDiff : public ::testing::TestWithParam<DType> {};

TEST_P(CodecDiff, EverySimdPathMatchesTheScalarReference) {
  const DType dt = GetParam();
  const std::vector<std::string> paths = available_paths();
  ASSERT_GE(paths.size(), 2u);
  Gen g(dt, kSeed + static_cast<std::uint64_t>(dt));
  Totals tot;
  std::uint64_t exact_ties = 0;
  const std::vector<float> scales = dt == DType::F16
      ? std::vector<float>{1.0f, 0.01f, 0.002f, 30.0f, 1000.0f, 5e-5f, 0.03f}
      : std::vector<float>{1.0f, 1e-3f, 1e3f, 1e-20f, 1e20f, 1e-39f, 1e36f};
  int id = 0;
  // 4112 columns = 257 groups: one full 256-group chunk plus a one-group tail.
  for (float S : scales) check_tensor(mixed_tensor(g, 250, 4112, S, id++), dt, paths, tot);
  for (float S : scales) check_tensor(mixed_tensor(g, 400, 1040, S, id++), dt, paths, tot);
  check_tensor(mixed_tensor(g, 2000, 48, 1.0f, id++), dt, paths, tot);
  check_tensor(mixed_tensor(g, 2000, 16, 0.5f, id++), dt, paths, tot);
  check_tensor(mixed_tensor(g, 3, 8192 + 16 * 7, 1.0f, id++), dt, paths, tot);
  for (int j = -6; j <= 6; j += 2) check_tensor(tie_tensor(g, 100, 1024, j, id++, &exact_ties), dt, paths, tot);
  for (int k = 0; k < 4; ++k) check_tensor(clamp_tensor(g, 250, 512, id++), dt, paths, tot);
  {  // all-zero tensor (gs = 1.0, scales 0x20) with ±0
    Tensor z = g.make("zeros", 64, 64);
    for (std::uint64_t i = 0; i < 64 * 64; ++i) g.store(z, i, g.sign() * 0.0f);
    check_tensor(z, dt, paths, tot);
  }
  RecordProperty("values", std::to_string(tot.values));
  std::printf("%s: %llu values; %llu exact ties, %llu clamped scales, %llu 0x20 scales, %llu subnormal scales, "
              "%llu -0 codes, %llu tensors with gs = 1\n",
              std::string(dtype_name(dt)).c_str(), static_cast<unsigned long long>(tot.values),
              static_cast<unsigned long long>(exact_ties), static_cast<unsigned long long>(tot.clamped_groups),
              static_cast<unsigned long long>(tot.zero_scale_groups),
              static_cast<unsigned long long>(tot.subnormal_scales),
              static_cast<unsigned long long>(tot.neg_zero_codes), static_cast<unsigned long long>(tot.gs_one));
  // The mix really contains what the test claims to cover.
  EXPECT_GE(tot.values, 10'000'000u);
  EXPECT_GE(exact_ties, 10'000u);
  EXPECT_GE(tot.clamped_groups, 1'000u);
  EXPECT_GE(tot.zero_scale_groups, 10'000u);
  EXPECT_GE(tot.subnormal_scales, 100u);
  EXPECT_GE(tot.neg_zero_codes, 1'000u);
  EXPECT_GE(tot.gs_one, 2u);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CodecDiff, ::testing::Values(DType::BF16, DType::F16, DType::F32),
                         [](const auto& p) { return std::string(dtype_name(p.param)); });

}  // namespace
}  // namespace fp4forge::nvfp4
