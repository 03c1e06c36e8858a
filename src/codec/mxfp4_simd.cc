// Highway kernels of the MXFP4A16 encoder (mxfp4.h), compiled once per x86 target and chosen at run
// time, like nvfp4_simd.cc. Every target writes the bytes of the scalar reference (mxfp4_ref.cc):
//   per group of 32: a = max |w| as magnitude bits in the source domain; round_to_power_2 is integer
//   arithmetic on those bits (add a quarter exponent step, keep the exponent field), and everything
//   else about the scale depends on that exponent field only, so it is one lookup in a table built
//   with the reference's own mxfp4::group_scale (scheme_fast::mxfp4_scale_table);
//   per weight: q = flD(|w| * (1 / s)) (s is a power of two whose reciprocal is exact, so the product
//   is the correctly rounded quotient the reference divides for), the E2M1 index from the reference's
//   thresholds, and the sign bit when w < 0 and q != 0; two codes per byte, low nibble first.
#ifndef HWY_COMPILE_ALL_ATTAINABLE
#define HWY_COMPILE_ALL_ATTAINABLE
#endif
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL
#endif

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "codec/scheme_fast.h"
#include "fp4forge/codec/mxfp4.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "codec/mxfp4_simd.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "codec/scheme_simd_inl.h"

HWY_BEFORE_NAMESPACE();
namespace fp4forge::scheme_simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr std::size_t kGroup = mxfp4::kGroupSize;

// round_to_power_2 on magnitude bits m: the exponent field of (m + a quarter step) (mxfp4_ref.cc).
template <Src S>
HWY_INLINE std::uint32_t Mx4Pow2Field(RawT<S> m) {
  const std::uint32_t b = m;
  if constexpr (S == Src::F32) {
    return ((b + (1u << 21)) & 0x7F800000u) >> 23;
  } else if constexpr (S == Src::BF16) {
    return ((b + (1u << 5)) & 0x7F80u) >> 7;
  } else {
    return ((b + (1u << 8)) & 0x7C00u) >> 10;
  }
}

// The codes (0..15 in 32-bit lanes) of Lanes(df) weights at p, for 1 / s = vinv.
template <Src S, class DF>
HWY_INLINE hn::Vec<hn::RebindToSigned<DF>> Mx4Codes(DF df, const std::byte* p, hn::Vec<DF> vinv) {
  const hn::RebindToSigned<DF> di;
  const auto x = LoadF32<S>(df, p);
  // |w| * (1/s), then a Min that changes nothing (|q| < 8) but keeps the product from being fused
  // into RoundMag's addition (F16) by FMA contraction.
  const auto q = RoundMag<S>(df, hn::Min(hn::Mul(hn::Abs(x), vinv), hn::Set(df, 16.0f)));
  const auto idx = Fp4Index(df, q);
  const auto sign8 = hn::BitCast(di, hn::ShiftRight<28>(SignBits(df, x)));  // 8 where w < 0
  return hn::Or(idx, hn::IfThenElseZero(hn::RebindMask(di, hn::Gt(q, hn::Zero(df))), sign8));
}

template <Src S>
int Mx4EncodeT(const std::byte* data, std::uint64_t rows, std::uint64_t cols, std::byte* packed, std::byte* scale) {
  const scheme_fast::MxScale* table = scheme_fast::mxfp4_scale_table(kDt<S>);
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  const std::size_t N = hn::Lanes(df);
  const std::uint64_t groups = rows * (cols / kGroup);
  auto* out = reinterpret_cast<std::uint8_t*>(packed);
  for (std::uint64_t g = 0; g < groups; ++g) {
    const std::byte* p = data + g * kGroup * kEsz<S>;
    const RawT<S> m = MaxMag<S>(p, kGroup);
    if (m >= kNonFinite<S>) return scheme_fast::kNonFinite;
    const scheme_fast::MxScale& e = table[Mx4Pow2Field<S>(m)];
    if (!e.ok) return scheme_fast::kOverflow;
    scale[g] = static_cast<std::byte>(e.code);
    const auto vinv = hn::Set(df, e.inv_scale);
    std::uint8_t* o = out + g * (kGroup / 2);
#if HWY_TARGET != HWY_SCALAR
    for (std::size_t j = 0; j < kGroup; j += 2 * N)
      StorePackedNibbles(di, Mx4Codes<S>(df, p + j * kEsz<S>, vinv), Mx4Codes<S>(df, p + (j + N) * kEsz<S>, vinv),
                         o + j / 2);
#else
    HWY_ALIGN std::int32_t codes[kGroup];
    for (std::size_t j = 0; j < kGroup; j += N) hn::Store(Mx4Codes<S>(df, p + j * kEsz<S>, vinv), di, codes + j);
    PackNibblesScalar(codes, kGroup, o);
#endif
  }
  return scheme_fast::kOk;
}

int Mxfp4Encode(const std::byte* data, DType dt, std::uint64_t rows, std::uint64_t cols, std::byte* packed,
                std::byte* scale) {
  switch (dt) {
    case DType::BF16: return Mx4EncodeT<Src::BF16>(data, rows, cols, packed, scale);
    case DType::F16: return Mx4EncodeT<Src::F16>(data, rows, cols, packed, scale);
    default: return Mx4EncodeT<Src::F32>(data, rows, cols, packed, scale);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace fp4forge::scheme_simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "codec/scheme_simd_table.h"

namespace fp4forge::scheme_simd {

HWY_EXPORT(Mxfp4Encode);

int mxfp4_dispatched(const std::byte* data, DType dt, std::uint64_t rows, std::uint64_t cols, std::byte* packed,
                     std::byte* scale) {
  return HWY_DYNAMIC_DISPATCH(Mxfp4Encode)(data, dt, rows, cols, packed, scale);
}

const std::vector<scheme_fast::PathKernel>& mxfp4_kernels() {
  static const std::vector<scheme_fast::PathKernel> k = scheme_fast::supported({FP4FORGE_SCHEME_TARGETS(Mxfp4Encode)});
  return k;
}

}  // namespace fp4forge::scheme_simd
#endif  // HWY_ONCE
