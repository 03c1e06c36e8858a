// Highway kernels of the W4A16 encoder (w4a16.h), compiled once per x86 target and chosen at run time,
// like nvfp4_simd.cc. Every target writes the bytes of the scalar reference (w4a16_ref.cc):
//   per group of 128: a = max |w| (exact, source domain), s = flD(a / 7.5) (eps when 0): scalar, with
//   the reference's own helpers;
//   per weight, F32: q = flD(w / s) with the IEEE division, clamp(q,
//   -8, 7), round half to even, + 8; BF16/F16: no division, the number of bounds its magnitude bits
//   exceed (the reference's own decisions for this scale, scheme_fast::w4a16_bounds, cached per thread
//   over the 2^16 scale patterns), then 8 + min(c, 7) for w >= 0 and 8 - c for w < 0;
//   eight nibbles per int32 word, lowest column in the lowest nibble, which as little-endian bytes is
//   the same low-nibble-first byte packing as FP4.
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
#include "codec/scheme_ref_internal.h"
#include "fp4forge/codec/half.h"
#include "fp4forge/codec/w4a16.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "codec/w4a16_simd.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "codec/scheme_simd_inl.h"

HWY_BEFORE_NAMESPACE();
namespace fp4forge::scheme_simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr std::size_t kGroup = w4a16::kGroupSize;


// The stored values q + 8 (0..15 in 32-bit lanes) of Lanes(df) weights at p for the scale vs.
template <Src S, class DF>
HWY_INLINE hn::Vec<hn::RebindToSigned<DF>> W4Codes(DF df, const std::byte* p, hn::Vec<DF> vs) {
  const hn::RebindToSigned<DF> di;
  const hn::RebindToUnsigned<DF> du;
  const auto q = hn::Div(LoadF32<S>(df, p), vs);                                  // fl32(w / s)
  const auto qd = hn::BitCast(df, hn::Or(hn::BitCast(du, RoundMag<S>(df, hn::Abs(q))), SignBits(df, q)));  // flD
  const auto c = hn::Min(hn::Max(qd, hn::Set(df, static_cast<float>(w4a16::kQMin))),
                         hn::Set(df, static_cast<float>(w4a16::kQMax)));          // clamp(-8, 7)
  return hn::Add(hn::ConvertTo(di, hn::Round(c)), hn::Set(di, -w4a16::kQMin));  // round half even, + 8
}

#if HWY_TARGET != HWY_SCALAR
// BF16/F16: the stored values of Lanes(d16) weights at p from the scale's bounds (no division: c = the
// number of bounds |w| exceeds, then 8 + min(c, 7) or 8 - c), packed to Lanes/2 bytes at out.
template <class D16>
HWY_INLINE void W4PackBounds16(D16 d16, const std::int16_t* p, const hn::Vec<D16> (&t)[8], std::uint8_t* out) {
  const hn::Repartition<std::uint32_t, D16> du32;
  const hn::RebindToSigned<decltype(du32)> di32;
  const hn::Rebind<std::uint8_t, decltype(du32)> du8;
  const auto x = hn::LoadU(d16, p);
  const auto mag = hn::And(x, hn::Set(d16, std::int16_t{0x7FFF}));
  auto n = hn::VecFromMask(d16, hn::Gt(mag, t[0]));  // minus c
  for (std::size_t b = 1; b < 8; ++b) n = hn::Add(n, hn::VecFromMask(d16, hn::Gt(mag, t[b])));
  const auto eight = hn::Set(d16, std::int16_t{8});
  const auto pos = hn::Sub(eight, hn::Max(n, hn::Set(d16, std::int16_t{-7})));  // 8 + min(c, 7)
  const auto neg = hn::Add(eight, n);                                            // 8 - c
  const auto v = hn::IfThenElse(hn::Lt(x, hn::Zero(d16)), neg, pos);
  const auto u = hn::BitCast(du32, v);  // v_even | v_odd << 16
  const auto b = hn::And(hn::Or(u, hn::ShiftRight<12>(u)), hn::Set(du32, 0xFFu));
  hn::StoreU(hn::DemoteTo(du8, hn::BitCast(di32, b)), du8, out);
}
#endif

template <Src S>
int W4EncodeT(const std::byte* data, std::uint64_t rows, std::uint64_t cols, std::byte* packed, std::byte* scale) {
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  const std::size_t N = hn::Lanes(df);
  const std::uint64_t groups = rows * (cols / kGroup);
  const float half_range = static_cast<float>(w4a16::kQMax - w4a16::kQMin) / 2.0f;  // 7.5
  auto* out = reinterpret_cast<std::uint8_t*>(packed);
  for (std::uint64_t g = 0; g < groups; ++g) {
    const std::byte* p = data + g * kGroup * kEsz<S>;
    const RawT<S> m = MaxMag<S>(p, kGroup);
    if (m >= kNonFinite<S>) return scheme_fast::kNonFinite;
    float s = scheme_ref::round_d(MagToFloat<S>(m) / half_range, kDt<S>);
    if (s == 0.0f) s = scheme_ref::eps_d(kDt<S>);
    scheme_ref::store_elem(scale, kDt<S>, g, s);
    std::uint8_t* o = out + g * (kGroup / 2);
    if constexpr (S != Src::F32) {
      // The bounds of this scale (a per-thread cache over the 2^16 scale patterns).
      const std::uint16_t sb = S == Src::BF16 ? half::float_to_bf16(s) : half::float_to_f16(s);
      const std::int16_t* bounds = scheme_fast::w4a16_bounds(kDt<S>, sb);
      const auto* q = reinterpret_cast<const std::int16_t*>(p);
#if HWY_TARGET != HWY_SCALAR
      const hn::ScalableTag<std::int16_t> d16;
      const std::size_t N16 = hn::Lanes(d16);
      hn::Vec<decltype(d16)> t[8];
      for (std::size_t b = 0; b < 8; ++b) t[b] = hn::Set(d16, bounds[b]);
      for (std::size_t j = 0; j < kGroup; j += N16) W4PackBounds16(d16, q + j, t, o + j / 2);
#else
      HWY_ALIGN std::int32_t codes[kGroup];
      for (std::size_t j = 0; j < kGroup; ++j) {
        const int mag = q[j] & 0x7FFF;
        int c = 0;
        for (std::size_t b = 0; b < 8; ++b) c += mag > bounds[b];
        codes[j] = q[j] < 0 ? 8 - c : 8 + (c < 7 ? c : 7);
      }
      PackNibblesScalar(codes, kGroup, o);
#endif
      continue;
    }
    const auto vs = hn::Set(df, s);
#if HWY_TARGET != HWY_SCALAR
    for (std::size_t j = 0; j < kGroup; j += 2 * N)
      StorePackedNibbles(di, W4Codes<S>(df, p + j * kEsz<S>, vs), W4Codes<S>(df, p + (j + N) * kEsz<S>, vs), o + j / 2);
#else
    HWY_ALIGN std::int32_t codes[kGroup];
    for (std::size_t j = 0; j < kGroup; j += N) hn::Store(W4Codes<S>(df, p + j * kEsz<S>, vs), di, codes + j);
    PackNibblesScalar(codes, kGroup, o);
#endif
  }
  return scheme_fast::kOk;
}

int W4a16Encode(const std::byte* data, DType dt, std::uint64_t rows, std::uint64_t cols, std::byte* packed,
                std::byte* scale) {
  switch (dt) {
    case DType::BF16: return W4EncodeT<Src::BF16>(data, rows, cols, packed, scale);
    case DType::F16: return W4EncodeT<Src::F16>(data, rows, cols, packed, scale);
    default: return W4EncodeT<Src::F32>(data, rows, cols, packed, scale);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace fp4forge::scheme_simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "codec/scheme_simd_table.h"

namespace fp4forge::scheme_simd {

HWY_EXPORT(W4a16Encode);

int w4a16_dispatched(const std::byte* data, DType dt, std::uint64_t rows, std::uint64_t cols, std::byte* packed,
                     std::byte* scale) {
  return HWY_DYNAMIC_DISPATCH(W4a16Encode)(data, dt, rows, cols, packed, scale);
}

const std::vector<scheme_fast::PathKernel>& w4a16_kernels() {
  static const std::vector<scheme_fast::PathKernel> k = scheme_fast::supported({FP4FORGE_SCHEME_TARGETS(W4a16Encode)});
  return k;
}

}  // namespace fp4forge::scheme_simd
#endif  // HWY_ONCE
