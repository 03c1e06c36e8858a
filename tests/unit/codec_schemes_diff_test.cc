// Randomized differential test of the fast encoders of MXFP4A16, FP8_DYNAMIC, FP8_BLOCK and W4A16:
// every path (each Highway target this CPU supports, and "scalar" through the row-range driver) must
// write the bytes of the scalar reference (mxfp4::encode, fp8::encode_channel / encode_block,
// w4a16::encode) and return its errors. Per scheme and dtype (BF16, F16, F32): groups of many kinds
// (normal values over many decades, ±0, all-zero groups, subnormals of the dtype, sparse groups with tiny
// negatives, huge values near the dtype's range, outliers), then values placed exactly on the
// quantizers' decision boundaries (and one ulp either side) of the scale the reference computed, every
// finite BF16/F16 bit pattern, odd shapes (partial FP8 blocks, K not a multiple of the vector width),
// row ranges encoded in pieces and on several threads, and the refusals (NaN/Inf, K, MXFP4 overflow,
// dtype, empty, row ranges).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <thread>
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

using nvfp4::WeightView;

constexpr std::uint64_t kSeed = 0x5EED'5C4E'0017ull;

std::uint64_t esz(DType dt) { return dt == DType::F32 ? 4 : 2; }

// ---- the four schemes behind one interface ------------------------------------------------------

using RefFn = Status (*)(const WeightView&, std::byte*, std::byte*, std::string_view);
using WithFn = Status (*)(std::string_view, const WeightView&, std::uint64_t, std::uint64_t, std::byte*, std::byte*,
                          std::string_view);

struct Scheme {
  const char* name;
  QuantScheme qs;
  std::uint64_t k_multiple;
  std::uint64_t row_block;
  RefFn ref;
  WithFn with;
  // Bytes of the codes / scales of `rows` rows (also the offset of row `rows` when rows is a multiple of
  // row_block).
  std::uint64_t codes_bytes(std::uint64_t rows, std::uint64_t cols) const {
    return qs == QuantScheme::FP8_DYNAMIC || qs == QuantScheme::FP8_BLOCK ? rows * cols : rows * cols / 2;
  }
  std::uint64_t scale_bytes(std::uint64_t rows, std::uint64_t cols, DType dt) const {
    switch (qs) {
      case QuantScheme::MXFP4A16: return mxfp4::scale_bytes(rows, cols);
      case QuantScheme::FP8_DYNAMIC: return fp8::channel_scale_bytes(rows, dt);
      case QuantScheme::FP8_BLOCK: return fp8::block_scale_bytes(rows, cols, dt);
      default: return w4a16::scale_bytes(rows, cols, dt);
    }
  }
  // Index of the scale of element (r, c): also the id of the group whose max sets it.
  std::uint64_t scale_index(std::uint64_t r, std::uint64_t c, std::uint64_t cols) const {
    switch (qs) {
      case QuantScheme::MXFP4A16: return r * (cols / 32) + c / 32;
      case QuantScheme::FP8_DYNAMIC: return r;
      case QuantScheme::FP8_BLOCK: return (r / 128) * fp8::block_scale_cols(cols) + c / 128;
      default: return r * (cols / 128) + c / 128;
    }
  }
  // The scale value s that weights are divided by, from the reference's output.
  float scale_value(const std::vector<std::byte>& scales, std::uint64_t i, DType dt) const {
    if (qs == QuantScheme::MXFP4A16) return std::ldexp(1.0f, static_cast<int>(scales[i]) - 127);
    if (dt == DType::F32) {
      float f;
      std::memcpy(&f, scales.data() + 4 * i, 4);
      return f;
    }
    std::uint16_t h;
    std::memcpy(&h, scales.data() + 2 * i, 2);
    return dt == DType::BF16 ? half::bf16_to_float(h) : half::f16_to_float(h);
  }
};

const Scheme kSchemes[] = {
    {"MXFP4A16", QuantScheme::MXFP4A16, 32, 1, &mxfp4::encode, &mxfp4::encode_rows_with},
    {"FP8_DYNAMIC", QuantScheme::FP8_DYNAMIC, 1, 1, &fp8::encode_channel, &fp8::encode_channel_rows_with},
    {"FP8_BLOCK", QuantScheme::FP8_BLOCK, 1, 128, &fp8::encode_block, &fp8::encode_block_rows_with},
    {"W4A16", QuantScheme::W4A16, 128, 1, &w4a16::encode, &w4a16::encode_rows_with},
};

// The quantizer's decision boundaries (where the code of flD(w / s) changes) and grid points, in units
// of s, non-negative.
std::vector<float> boundaries(QuantScheme s) {
  std::vector<float> out;
  if (s == QuantScheme::MXFP4A16) {
    out = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  } else if (s == QuantScheme::W4A16) {
    for (int k = 0; k <= 8; ++k) {
      out.push_back(static_cast<float>(k));
      out.push_back(static_cast<float>(k) + 0.5f);
    }
  } else {  // E4M3: every finite value and every midpoint up to 448
    std::vector<float> v;
    for (int c = 0; c < 0x7F; ++c) v.push_back(nvfp4::e4m3_to_float(static_cast<std::uint8_t>(c)));
    for (std::size_t i = 0; i + 1 < v.size(); ++i) {
      out.push_back(v[i]);
      out.push_back((v[i] + v[i + 1]) / 2);
    }
    out.push_back(448.0f);
  }
  return out;
}

// ---- tensors ------------------------------------------------------------------------------------

struct Tensor {
  std::string name;
  DType dt = DType::BF16;
  std::uint64_t rows = 0, cols = 0;
  std::vector<std::byte> bytes;
  WeightView view() const { return {bytes.data(), dt, rows, cols}; }
  float get(std::uint64_t i) const {
    if (dt == DType::F32) {
      float f;
      std::memcpy(&f, bytes.data() + 4 * i, 4);
      return f;
    }
    std::uint16_t h;
    std::memcpy(&h, bytes.data() + 2 * i, 2);
    return dt == DType::BF16 ? half::bf16_to_float(h) : half::f16_to_float(h);
  }
  void set(std::uint64_t i, float v) {
    if (dt == DType::F32) {
      std::memcpy(bytes.data() + 4 * i, &v, 4);
      return;
    }
    const std::uint16_t h = dt == DType::BF16 ? half::float_to_bf16(v) : half::float_to_f16(v);
    std::memcpy(bytes.data() + 2 * i, &h, 2);
  }
};

class Gen {
 public:
  Gen(DType dt, std::uint64_t seed) : dt_(dt), rng_(seed) {}

  float max_finite() const { return dt_ == DType::F16 ? 65504.0f : dt_ == DType::BF16 ? 0x1.FEp127f : 0x1.FFFFFEp127f; }
  float min_normal() const { return dt_ == DType::F16 ? 0x1p-14f : 0x1p-126f; }
  float min_subnormal() const { return dt_ == DType::F16 ? 0x1p-24f : dt_ == DType::BF16 ? 0x1p-133f : 0x1p-149f; }
  // Largest |w| every scheme encodes (MXFP4 refuses a group max whose power of two overflows).
  float safe_max() const { return dt_ == DType::F16 ? 57000.0f : 0x1.6p127f; }

  float rd(float x) const {
    float r = dt_ == DType::BF16 ? half::round_to_bf16(x) : dt_ == DType::F16 ? half::round_to_f16(x) : x;
    if (!std::isfinite(r) || std::fabs(r) > safe_max()) r = std::copysign(safe_max(), x);
    return r;
  }
  float nudge(float x, bool up) const {
    if (dt_ == DType::F32) return std::nextafter(x, up ? std::copysign(INFINITY, x) : 0.0f);
    std::uint16_t b = dt_ == DType::BF16 ? half::float_to_bf16(x) : half::float_to_f16(x);
    const std::uint16_t mag = b & 0x7FFF;
    if (up && mag < (dt_ == DType::BF16 ? 0x7F7F : 0x7BFF)) ++b;
    if (!up && mag > 0) --b;
    return dt_ == DType::BF16 ? half::bf16_to_float(b) : half::f16_to_float(b);
  }
  Tensor make(std::string name, std::uint64_t rows, std::uint64_t cols) const {
    Tensor t{std::move(name), dt_, rows, cols, {}};
    t.bytes.resize(rows * cols * esz(dt_));
    return t;
  }
  double uni(double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng_); }
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  float normal(float sigma) { return std::normal_distribution<float>(0.0f, sigma)(rng_); }
  float sign() { return pick(2) ? 1.0f : -1.0f; }
  std::mt19937_64& rng() { return rng_; }
  DType dt() const { return dt_; }

 private:
  DType dt_;
  std::mt19937_64 rng_;
};

// Segments of 32 elements of many kinds around a per-tensor magnitude S (and a per-row factor, so the
// per-row and per-block scales vary too).
Tensor mixed_tensor(Gen& g, std::uint64_t rows, std::uint64_t cols, float S, const std::string& name) {
  Tensor t = g.make(name, rows, cols);
  const bool huge = S >= (g.dt() == DType::F16 ? 1000.0f : 1e30f);
  for (std::uint64_t r = 0; r < rows; ++r) {
    const float row_s = S * static_cast<float>(std::pow(10.0, g.uni(-2, 0)));
    for (std::uint64_t c0 = 0; c0 < cols; c0 += 32) {
      const int kind = g.pick(100);
      const float sigma = row_s * static_cast<float>(std::pow(10.0, g.uni(-3, 0)));
      for (std::uint64_t c = c0; c < std::min(cols, c0 + 32); ++c) {
        float x;
        if (kind < 35) {
          x = g.normal(sigma);
        } else if (kind < 43) {  // all zero, mixed signs
          x = g.sign() * 0.0f;
        } else if (kind < 51) {  // tiny relative to the rest: scales near the dtype's underflow
          x = g.normal(g.min_normal() * static_cast<float>(std::pow(10.0, g.uni(-1, 4))));
        } else if (kind < 59) {  // subnormals of the dtype and ±0
          x = g.sign() * static_cast<float>(g.uni(0, 1)) * g.min_normal();
        } else if (kind < 67) {  // sparse: ±0, tiny negatives, a few values
          const int k = g.pick(8);
          x = k < 4   ? g.sign() * 0.0f
              : k < 6 ? -g.min_subnormal() * static_cast<float>(1 + g.pick(50))
                      : g.normal(sigma);
        } else if (kind < 77) {  // uniform with an outlier
          x = static_cast<float>(g.uni(-1, 1)) * sigma * (g.pick(16) == 0 ? 100.0f : 1.0f);
        } else if (kind < 85 && huge) {  // huge for the dtype
          x = g.sign() * g.safe_max() * static_cast<float>(g.uni(0.001, 1.0));
        } else if (kind < 90) {  // exact small integers times a power of two
          x = g.sign() * static_cast<float>(g.pick(16)) * std::ldexp(1.0f, g.pick(20) - 10);
        } else {
          x = g.normal(sigma);
        }
        t.set(r * cols + c, g.rd(x));
      }
    }
  }
  return t;
}

// Every finite bit pattern of BF16 / F16 (safe for MXFP4), shuffled, repeated to fill the tensor.
Tensor every_pattern_tensor(Gen& g, std::uint64_t rows, std::uint64_t cols, const std::string& name) {
  Tensor t = g.make(name, rows, cols);
  std::vector<std::uint32_t> pats;
  if (g.dt() == DType::F32) {
    while (pats.size() < 65536) {
      const auto u = static_cast<std::uint32_t>(g.rng()());
      if ((u & 0x7F800000u) != 0x7F800000u && std::fabs(std::bit_cast<float>(u)) <= g.safe_max()) pats.push_back(u);
    }
  } else {
    for (std::uint32_t u = 0; u < 65536; ++u) {
      const auto h = static_cast<std::uint16_t>(u);
      const float v = g.dt() == DType::BF16 ? half::bf16_to_float(h) : half::f16_to_float(h);
      if (std::isfinite(v) && std::fabs(v) <= g.safe_max()) pats.push_back(u);
    }
  }
  std::shuffle(pats.begin(), pats.end(), g.rng());
  for (std::uint64_t i = 0; i < rows * cols; ++i) {
    const std::uint32_t u = pats[i % pats.size()];
    if (g.dt() == DType::F32) {
      std::memcpy(t.bytes.data() + 4 * i, &u, 4);
    } else {
      const auto h = static_cast<std::uint16_t>(u);
      std::memcpy(t.bytes.data() + 2 * i, &h, 2);
    }
  }
  return t;
}

// Group maxima B * 2^k (B = 448 for FP8, 7.5 for W4A16, 6 for MXFP4) so that the scales are powers of two
// and values on the decision boundaries are exact in every dtype (F32 included); the rest below the max.
Tensor nice_tensor(const Scheme& sc, Gen& g, std::uint64_t rows, std::uint64_t cols, const std::string& name) {
  Tensor t = g.make(name, rows, cols);
  const float B = sc.qs == QuantScheme::W4A16 ? 7.5f : sc.qs == QuantScheme::MXFP4A16 ? 6.0f : 448.0f;
  const int klo = g.dt() == DType::F16 ? -8 : -20, khi = g.dt() == DType::F16 ? 5 : 20;
  std::vector<int> k(sc.scale_bytes(rows, cols, DType::F32) + 1, 0);
  std::vector<char> seen(k.size(), 0);
  for (auto& v : k) v = klo + g.pick(khi - klo + 1);
  for (std::uint64_t r = 0; r < rows; ++r)
    for (std::uint64_t c = 0; c < cols; ++c) {
      const std::uint64_t gi = sc.scale_index(r, c, cols);
      const float m = std::ldexp(B, k[gi]);
      float w = std::fabs(g.normal(m / 3)) > m ? std::copysign(m, g.sign()) : g.rd(g.normal(m / 3));
      if (!seen[gi]) w = g.sign() * m;
      seen[gi] = 1;
      t.set(r * cols + c, std::fabs(w) > m ? std::copysign(m, w) : w);
    }
  return t;
}

// Quotient the reference quantizes: flD(fl32(w / s)).
float quotient(float w, float s, DType dt) {
  const float q = w / s;
  return dt == DType::BF16 ? half::round_to_bf16(q) : dt == DType::F16 ? half::round_to_f16(q) : q;
}

struct Counts {
  std::uint64_t values = 0, tensors = 0, exact_ties = 0, eps_scales = 0, neg_zero_codes = 0, clamped = 0;
  std::uint64_t f16_underflow_groups = 0, subnormal_inputs = 0, zero_groups = 0;
};

struct Reference {
  std::vector<std::byte> codes, scales;
};

Reference run_reference(const Scheme& sc, const Tensor& t) {
  Reference ref{std::vector<std::byte>(sc.codes_bytes(t.rows, t.cols)),
                std::vector<std::byte>(sc.scale_bytes(t.rows, t.cols, t.dt))};
  const Status st = sc.ref(t.view(), ref.codes.data(), ref.scales.data(), t.name);
  EXPECT_TRUE(st.ok()) << sc.name << " " << t.name << ": " << st.error().message;
  return ref;
}

// Overwrites a fraction of the elements with values on (or one ulp from) a decision boundary of the scale
// the reference chose for their group, never above the group's max (so the scales stay).
void place_ties(const Scheme& sc, Gen& g, Tensor& t, double fraction) {
  const Reference ref = run_reference(sc, t);
  std::vector<float> gmax(ref.scales.size() / (sc.qs == QuantScheme::MXFP4A16 ? 1 : esz(t.dt)), 0.0f);
  for (std::uint64_t r = 0; r < t.rows; ++r)
    for (std::uint64_t c = 0; c < t.cols; ++c) {
      float& m = gmax[sc.scale_index(r, c, t.cols)];
      m = std::max(m, std::fabs(t.get(r * t.cols + c)));
    }
  const std::vector<float> b = boundaries(sc.qs);
  for (std::uint64_t r = 0; r < t.rows; ++r)
    for (std::uint64_t c = 0; c < t.cols; ++c) {
      if (g.uni(0, 1) >= fraction) continue;
      const std::uint64_t gi = sc.scale_index(r, c, t.cols);
      const float s = sc.scale_value(ref.scales, gi, t.dt);
      float w = g.rd(g.sign() * b[static_cast<std::size_t>(g.pick(static_cast<int>(b.size())))] * s);
      const int n = g.pick(4);
      if (n == 1) w = g.nudge(w, true);
      if (n == 2) w = g.nudge(w, false);
      if (std::isfinite(w) && std::fabs(w) <= gmax[gi]) t.set(r * t.cols + c, w);
    }
}

void count(const Scheme& sc, const Tensor& t, const Reference& ref, Counts& n) {
  ++n.tensors;
  n.values += t.rows * t.cols;
  const std::vector<float> b = boundaries(sc.qs);
  std::vector<float> gmax(sc.qs == QuantScheme::MXFP4A16 ? ref.scales.size() : ref.scales.size() / esz(t.dt), 0.0f);
  for (std::uint64_t r = 0; r < t.rows; ++r)
    for (std::uint64_t c = 0; c < t.cols; ++c) {
      const float w = t.get(r * t.cols + c);
      const std::uint64_t gi = sc.scale_index(r, c, t.cols);
      gmax[gi] = std::max(gmax[gi], std::fabs(w));
      n.subnormal_inputs += w != 0.0f && std::fabs(w) < (t.dt == DType::F16 ? 0x1p-14f : 0x1p-126f);
      const float q = std::fabs(quotient(w, sc.scale_value(ref.scales, gi, t.dt), t.dt));
      // Exact ties only: the halves between codes (grid points are not ties).
      if (sc.qs == QuantScheme::W4A16) {
        n.exact_ties += q != std::floor(q) && q * 2 == std::floor(q * 2);
      } else if (sc.qs == QuantScheme::MXFP4A16) {
        for (int i = 0; i < 7; ++i) n.exact_ties += q == b[static_cast<std::size_t>(i)];
      } else {
        for (std::size_t i = 1; i < b.size(); i += 2) n.exact_ties += q == b[i];
      }
    }
  for (std::size_t gi = 0; gi < gmax.size(); ++gi) {
    n.zero_groups += gmax[gi] == 0.0f;
    if (sc.qs == QuantScheme::MXFP4A16) {
      n.f16_underflow_groups += t.dt == DType::F16 && static_cast<int>(ref.scales[gi]) == 127 && gmax[gi] < 0x1p-10f;
    } else {
      const float s = sc.scale_value(ref.scales, gi, t.dt);
      n.eps_scales += s == (t.dt == DType::BF16 ? 0x1p-7f : t.dt == DType::F16 ? 0x1p-10f : 0x1p-23f) && gmax[gi] < s;
    }
  }
  for (std::byte x : ref.codes) {
    const auto v = static_cast<std::uint8_t>(x);
    if (sc.qs == QuantScheme::FP8_DYNAMIC || sc.qs == QuantScheme::FP8_BLOCK) {
      n.neg_zero_codes += v == 0x80;
      n.clamped += (v & 0x7F) == 0x7E;
    } else if (sc.qs == QuantScheme::MXFP4A16) {
      n.neg_zero_codes += (v & 0x0F) == 8;
      n.neg_zero_codes += (v >> 4) == 8;
    } else {
      n.clamped += (v & 0x0F) == 0 || (v >> 4) == 0;  // q = -8
    }
  }
}

// Every path against the reference: the whole tensor, then three row ranges at their offsets.
void check_tensor(const Scheme& sc, const Tensor& t, const std::vector<std::string>& paths, Counts& n) {
  const Reference ref = run_reference(sc, t);
  count(sc, t, ref, n);
  const WeightView w = t.view();
  const std::uint64_t rb = sc.row_block;
  std::uint64_t r1 = (t.rows / 3) / rb * rb, r2 = (t.rows - t.rows / 4) / rb * rb;
  r2 = std::max(r1, r2);
  for (const std::string& p : paths) {
    for (int split = 0; split < 2; ++split) {
      std::vector<std::byte> codes(ref.codes.size(), std::byte{0x5A}), scales(ref.scales.size(), std::byte{0x5A});
      std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges{{0, t.rows}};
      if (split) ranges = {{0, r1}, {r1, r2}, {r2, t.rows}};
      for (auto [b, e] : ranges) {
        const Status st = sc.with(p, w, b, e, codes.data() + sc.codes_bytes(b, t.cols),
                                  scales.data() + sc.scale_bytes(b, t.cols, t.dt), t.name);
        ASSERT_TRUE(st.ok()) << sc.name << " " << p << " " << t.name << ": " << st.error().message;
      }
      const auto mc = std::mismatch(ref.codes.begin(), ref.codes.end(), codes.begin());
      if (mc.first != ref.codes.end()) {
        const std::size_t i = static_cast<std::size_t>(mc.first - ref.codes.begin());
        const std::uint64_t per_row = sc.codes_bytes(1, t.cols);
        const std::uint64_t r = i / per_row, c = (i % per_row) * (t.cols / per_row);
        ADD_FAILURE() << sc.name << " " << p << (split ? " (row ranges) " : " ") << t.name << " ("
                      << dtype_name(t.dt) << " [" << t.rows << ", " << t.cols << "]): codes differ at byte " << i
                      << " (row " << r << ", column " << c << ", w = " << t.get(r * t.cols + c) << "): reference 0x"
                      << std::hex << static_cast<unsigned>(ref.codes[i]) << ", got 0x" << static_cast<unsigned>(codes[i]);
        return;
      }
      const auto ms = std::mismatch(ref.scales.begin(), ref.scales.end(), scales.begin());
      if (ms.first != ref.scales.end()) {
        const std::size_t i = static_cast<std::size_t>(ms.first - ref.scales.begin());
        ADD_FAILURE() << sc.name << " " << p << (split ? " (row ranges) " : " ") << t.name << " ("
                      << dtype_name(t.dt) << "): scales differ at byte " << i << ": reference 0x" << std::hex
                      << static_cast<unsigned>(ref.scales[i]) << ", got 0x" << static_cast<unsigned>(scales[i]);
        return;
      }
    }
  }
}

struct Param {
  const Scheme* scheme;
  DType dt;
};
void PrintTo(const Param& p, std::ostream* os) { *os << p.scheme->name << " " << dtype_name(p.dt); }

class CodecSchemesDiff : public ::testing::TestWithParam<Param> {};

TEST_P(CodecSchemesDiff, EveryPathMatchesTheReference) {
  const Scheme& sc = *GetParam().scheme;
  const DType dt = GetParam().dt;
  const std::vector<std::string> paths = encode_paths(sc.qs);
  ASSERT_GE(paths.size(), 2u);
  EXPECT_EQ(paths, nvfp4::available_paths());
  Gen g(dt, kSeed + static_cast<std::uint64_t>(dt) * 7919 + static_cast<std::uint64_t>(sc.qs));
  Counts n;
  const bool fp8 = sc.k_multiple == 1;
  // FP8's reference rounds by an arg-min over all 127 codes: fewer values keep the test quick.
  const std::uint64_t kbig = sc.qs == QuantScheme::MXFP4A16 ? 4128 : 4096;
  const std::vector<float> mags = dt == DType::F16 ? std::vector<float>{1.0f, 0.01f, 30.0f, 3000.0f, 2e-4f}
                                                   : std::vector<float>{1.0f, 1e-3f, 1e3f, 1e-30f, 1e36f};
  int id = 0;
  const auto name = [&](const char* kind) { return std::string(kind) + std::to_string(id++); };
  for (float S : mags) {
    Tensor t = mixed_tensor(g, fp8 ? 40 : 96, kbig, S, name("mixed"));
    check_tensor(sc, t, paths, n);
    place_ties(sc, g, t, 0.5);
    t.name = name("ties");
    check_tensor(sc, t, paths, n);
  }
  for (int k = 0; k < 2; ++k) {
    Tensor t = nice_tensor(sc, g, fp8 ? 130 : 128, fp8 ? 1000 : 1024, name("nice"));
    place_ties(sc, g, t, 0.7);
    check_tensor(sc, t, paths, n);
  }
  // Odd shapes: partial FP8 blocks in both directions, K not a multiple of any vector width.
  const std::vector<std::pair<std::uint64_t, std::uint64_t>> shapes =
      fp8 ? std::vector<std::pair<std::uint64_t, std::uint64_t>>{{300, 200}, {130, 129}, {1, 1}, {127, 257},
                                                                 {256, 384}, {3, 4099}, {129, 17}, {200, 136}}
          : std::vector<std::pair<std::uint64_t, std::uint64_t>>{{7, sc.k_multiple}, {129, 3 * sc.k_multiple},
                                                                 {1, 33 * sc.k_multiple}, {300, 2 * sc.k_multiple}};
  for (auto [r, c] : shapes) {
    Tensor t = mixed_tensor(g, r, c, 1.0f, name("shape"));
    place_ties(sc, g, t, 0.3);
    check_tensor(sc, t, paths, n);
  }
  check_tensor(sc, every_pattern_tensor(g, fp8 ? 64 : 256, fp8 ? 1024 : 512, name("patterns")), paths, n);
  {  // one whole-tensor-wide scale per row / block: rows of all patterns
    Tensor t = every_pattern_tensor(g, 2, 32768, name("patternrows"));
    if (!fp8) check_tensor(sc, t, paths, n);
  }
  {  // all zero, ±0 (25 FP8 blocks, partial ones included)
    Tensor z = g.make(name("zeros"), 520, 640);
    for (std::uint64_t i = 0; i < z.rows * z.cols; ++i) z.set(i, g.sign() * 0.0f);
    check_tensor(sc, z, paths, n);
  }
  std::printf("%s %s: %llu values in %llu tensors x %zu paths; %llu exact ties, %llu eps scales, %llu F16 "
              "underflow groups, %llu -0 codes, %llu clamped, %llu zero groups, %llu subnormal inputs\n",
              sc.name, std::string(dtype_name(dt)).c_str(), static_cast<unsigned long long>(n.values),
              static_cast<unsigned long long>(n.tensors), paths.size(), static_cast<unsigned long long>(n.exact_ties),
              static_cast<unsigned long long>(n.eps_scales), static_cast<unsigned long long>(n.f16_underflow_groups),
              static_cast<unsigned long long>(n.neg_zero_codes), static_cast<unsigned long long>(n.clamped),
              static_cast<unsigned long long>(n.zero_groups), static_cast<unsigned long long>(n.subnormal_inputs));
  // The mix holds what the test claims to cover.
  EXPECT_GE(n.exact_ties, 10'000u);
  EXPECT_GE(n.neg_zero_codes + (sc.qs == QuantScheme::W4A16 ? 1000u : 0u), 1'000u);
  EXPECT_GE(n.zero_groups, 10u);
  EXPECT_GE(n.subnormal_inputs, 10'000u);
  if (sc.qs != QuantScheme::MXFP4A16) {
    EXPECT_GE(n.eps_scales, 1u);
    EXPECT_GE(n.clamped, 100u);
  }
  if (sc.qs == QuantScheme::MXFP4A16 && dt == DType::F16) {
    EXPECT_GE(n.f16_underflow_groups, 100u);
  }
}

std::vector<Param> all_params() {
  std::vector<Param> out;
  for (const Scheme& s : kSchemes)
    for (DType dt : {DType::BF16, DType::F16, DType::F32}) out.push_back({&s, dt});
  return out;
}

INSTANTIATE_TEST_SUITE_P(SchemesDtypes, CodecSchemesDiff, ::testing::ValuesIn(all_params()),
                         [](const auto& p) {
                           std::string n = std::string(p.param.scheme->name) + "_" + std::string(dtype_name(p.param.dt));
                           n.erase(std::remove(n.begin(), n.end(), '_'), n.end());
                           return n;
                         });

// ---- errors -------------------------------------------------------------------------------------

// Runs the reference and every path on the whole tensor: the same code and message everywhere.
void expect_same_error(const Scheme& sc, const WeightView& w, const std::string& what) {
  std::vector<std::byte> c(std::max<std::uint64_t>(1, sc.codes_bytes(w.rows, w.cols) + 64)),
      s(std::max<std::uint64_t>(1, sc.scale_bytes(w.rows, w.cols, DType::F32) + 64));
  const Status ref = sc.ref(w, c.data(), s.data(), "model.w");
  ASSERT_FALSE(ref.ok()) << sc.name << " " << what;
  for (const std::string& p : encode_paths(sc.qs)) {
    const Status st = sc.with(p, w, 0, w.rows, c.data(), s.data(), "model.w");
    ASSERT_FALSE(st.ok()) << sc.name << " " << p << " " << what << ": accepted";
    EXPECT_EQ(st.error().code, ref.error().code) << sc.name << " " << p << " " << what;
    EXPECT_EQ(st.error().message, ref.error().message) << sc.name << " " << p << " " << what;
    EXPECT_EQ(st.error().tensor, ref.error().tensor) << sc.name << " " << p << " " << what;
  }
}

TEST(CodecSchemesDiffErrors, NonFiniteValuesAreRefusedAsTheReferenceDoes) {
  for (const Scheme& sc : kSchemes)
    for (DType dt : {DType::BF16, DType::F16, DType::F32}) {
      Gen g(dt, kSeed + 1);
      const std::uint64_t rows = 260, cols = 256;
      const float bad[] = {NAN, INFINITY, -INFINITY};
      for (float v : bad)
        for (std::uint64_t at : {std::uint64_t{0}, std::uint64_t{255}, rows * cols / 2 + 77, rows * cols - 1}) {
          Tensor t = mixed_tensor(g, rows, cols, 1.0f, "t");
          t.set(at, v);
          if (at > 300) t.set(at + (at + 1000 < rows * cols ? 1000 : 0), -v);  // a second one later: the first is named
          expect_same_error(sc, t.view(), std::string(dtype_name(dt)) + " non-finite at " + std::to_string(at));
          // Row ranges name the row in the whole tensor.
          const std::uint64_t r = at / cols;
          const std::uint64_t b = r / 128 * 128, e = std::min(rows, b + 128);
          std::vector<std::byte> c(sc.codes_bytes(rows, cols)), s(sc.scale_bytes(rows, cols, dt));
          for (const std::string& p : encode_paths(sc.qs)) {
            const Status st = sc.with(p, t.view(), b, e, c.data(), s.data(), "t");
            ASSERT_FALSE(st.ok()) << sc.name << " " << p;
            EXPECT_NE(st.error().message.find("at row " + std::to_string(r) + ", column " + std::to_string(at % cols)),
                      std::string::npos)
                << sc.name << " " << p << ": " << st.error().message;
            // A range without it encodes.
            if (b >= 128) {
              EXPECT_TRUE(sc.with(p, t.view(), 0, 128, c.data(), s.data(), "t").ok()) << sc.name << " " << p;
            }
          }
        }
    }
}

TEST(CodecSchemesDiffErrors, ShapeDtypeAndRangeErrorsAsTheReference) {
  for (const Scheme& sc : kSchemes) {
    Gen g(DType::BF16, kSeed + 2);
    if (sc.k_multiple > 1) {  // K not a multiple; with a NaN the NaN is reported first, as upstream order goes
      Tensor t = mixed_tensor(g, 16, sc.k_multiple + 16, 1.0f, "t");
      expect_same_error(sc, t.view(), "K");
      t.set(40, NAN);
      expect_same_error(sc, t.view(), "K and NaN");
      Tensor s = mixed_tensor(g, 16, sc.k_multiple / 2, 1.0f, "t");
      expect_same_error(sc, s.view(), "K below one group");
    }
    Tensor t = mixed_tensor(g, 130, 256, 1.0f, "t");
    WeightView w = t.view();
    w.dtype = DType::I8;
    expect_same_error(sc, w, "dtype");
    w = t.view();
    w.rows = 0;
    expect_same_error(sc, w, "empty");
    w = t.view();
    w.data = nullptr;
    expect_same_error(sc, w, "null");
    // Null outputs: INTERNAL, as the reference.
    for (const std::string& p : encode_paths(sc.qs)) {
      const Status ref = sc.ref(t.view(), nullptr, nullptr, "t");
      const Status st = sc.with(p, t.view(), 0, t.rows, nullptr, nullptr, "t");
      ASSERT_FALSE(st.ok());
      EXPECT_EQ(st.error().code, ref.error().code);
      EXPECT_EQ(st.error().message, ref.error().message);
      // Ranges outside the tensor, or (FP8_BLOCK) off the 128-row strips.
      std::vector<std::byte> c(sc.codes_bytes(130, 256)), s(sc.scale_bytes(130, 256, DType::BF16));
      EXPECT_EQ(sc.with(p, t.view(), 10, 131, c.data(), s.data(), "t").error().code, Errc::BAD_INPUT);
      EXPECT_EQ(sc.with(p, t.view(), 20, 10, c.data(), s.data(), "t").error().code, Errc::BAD_INPUT);
      EXPECT_TRUE(sc.with(p, t.view(), 128, 128, nullptr, nullptr, "t").ok());  // empty range: nothing to do
      const Status mid = sc.with(p, t.view(), 64, 130, c.data(), s.data(), "t");
      EXPECT_EQ(mid.ok(), sc.row_block == 1) << sc.name << " " << p << ": " << (mid.ok() ? "" : mid.error().message);
      EXPECT_TRUE(sc.with(p, t.view(), 128, 130, c.data(), s.data(), "t").ok()) << sc.name << " " << p;
    }
  }
}

TEST(CodecSchemesDiffErrors, Mxfp4OverflowIsRefusedAndANaNAnywhereIsReportedFirst) {
  const Scheme& sc = kSchemes[0];
  for (DType dt : {DType::BF16, DType::F16, DType::F32}) {
    Gen g(dt, kSeed + 3);
    Tensor t = mixed_tensor(g, 8, 256, 1.0f, "t");
    // The smallest value whose power of two overflows: 57344 (F16), 1.75 * 2^127 (BF16, F32).
    const float big = dt == DType::F16 ? 57344.0f : 0x1.Cp127f;
    t.set(3 * 256 + 70, -big);
    expect_same_error(sc, t.view(), std::string(dtype_name(dt)) + " overflow");
    t.set(5 * 256 + 1, g.nudge(big, false));  // just below: encodable
    t.set(3 * 256 + 70, 1.0f);
    std::vector<std::byte> c(sc.codes_bytes(8, 256)), s(sc.scale_bytes(8, 256, dt)), c2(c.size()), s2(s.size());
    ASSERT_TRUE(mxfp4::encode(t.view(), c.data(), s.data(), "t").ok());
    for (const std::string& p : encode_paths(sc.qs)) {
      ASSERT_TRUE(mxfp4::encode_rows_with(p, t.view(), 0, 8, c2.data(), s2.data(), "t").ok()) << p;
      EXPECT_EQ(c, c2) << p;
      EXPECT_EQ(s, s2) << p;
    }
    t.set(3 * 256 + 70, big);
    t.set(7 * 256 + 255, NAN);  // after the overflowing group: the reference scans for NaN first
    expect_same_error(sc, t.view(), std::string(dtype_name(dt)) + " overflow then NaN");
  }
}

TEST(CodecSchemesDiff, RowRangesOnSeveralThreadsMatchTheReference) {
  for (const Scheme& sc : kSchemes) {
    Gen g(DType::BF16, kSeed + 4);
    Tensor t = mixed_tensor(g, 1000, 1024, 1.0f, "t");
    const Reference ref = run_reference(sc, t);
    std::vector<std::byte> codes(ref.codes.size()), scales(ref.scales.size());
    std::vector<std::thread> pool;
    std::vector<int> ok(8, 0);
    for (std::uint64_t i = 0; i < 8; ++i)
      pool.emplace_back([&, i] {
        const std::uint64_t b = std::min<std::uint64_t>(1000, i * 128), e = std::min<std::uint64_t>(1000, b + 128);
        ok[i] = sc.with("", t.view(), b, e, codes.data() + sc.codes_bytes(b, 1024),
                        scales.data() + sc.scale_bytes(b, 1024, DType::BF16), "t")
                    .ok();
      });
    for (auto& th : pool) th.join();
    EXPECT_EQ(std::count(ok.begin(), ok.end(), 1), 8) << sc.name;
    EXPECT_TRUE(codes == ref.codes) << sc.name;
    EXPECT_TRUE(scales == ref.scales) << sc.name;
  }
}

}  // namespace
}  // namespace fp4forge
