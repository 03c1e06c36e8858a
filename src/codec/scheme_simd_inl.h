// Per-target Highway helpers shared by the SIMD encoders of MXFP4A16, FP8 (dynamic, block) and W4A16
// (mxfp4_simd.cc, fp8_simd.cc, w4a16_simd.cc; nvfp4_simd.cc takes Src and RoundMag from here too). Included
// once per target by each of those files after
// <hwy/foreach_target.h>, hence the Highway toggle guard instead of #pragma once.
//
// Every helper reproduces one step of the scalar references exactly (scheme_ref_internal.h,
// *_ref.cc): exact loads of BF16/F16/F32 to float32, flD (the RNE rounding of a float32 result to the
// weight dtype), the FP8 E4M3 RNE cast, the FP4 E2M1 code, and the max |w| of a run of elements in the
// source domain (with the NaN/Inf check). No helper contains a float multiply whose result feeds a
// float add: GCC contracts a*b+c into an FMA on the FMA targets (-ffp-contract=fast is its default),
// which would round differently from the reference.
//
// The kernels of the three files share this namespace: their own functions carry a per-scheme prefix
// (Mx4, Fp8, W4), since two templates of one name and signature in two files are one symbol to the
// linker (an ODR violation that silently runs one file's kernel for the other's).
#if defined(FP4FORGE_CODEC_SCHEME_SIMD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef FP4FORGE_CODEC_SCHEME_SIMD_INL_H_
#undef FP4FORGE_CODEC_SCHEME_SIMD_INL_H_
#else
#define FP4FORGE_CODEC_SCHEME_SIMD_INL_H_
#endif

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <bit>

#include "fp4forge/codec/half.h"
#include "fp4forge/core/dtype.h"

#include <hwy/cache_control.h>
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace fp4forge::scheme_simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Source dtype as a compile-time tag.
enum class Src { BF16, F16, F32 };

template <Src S>
inline constexpr std::size_t kEsz = S == Src::F32 ? 4 : 2;
// The raw bits of one source element.
template <Src S>
using RawT = std::conditional_t<S == Src::F32, std::uint32_t, std::uint16_t>;
template <Src S>
inline constexpr RawT<S> kMagMask = static_cast<RawT<S>>(S == Src::F32 ? 0x7FFFFFFFu : 0x7FFFu);
// Magnitude bits at or above this are NaN or Inf.
template <Src S>
inline constexpr RawT<S> kNonFinite =
    static_cast<RawT<S>>(S == Src::F32 ? 0x7F800000u : S == Src::BF16 ? 0x7F80u : 0x7C00u);

template <Src S>
inline constexpr DType kDt = S == Src::F32 ? DType::F32 : S == Src::BF16 ? DType::BF16 : DType::F16;

// The float value of finite magnitude bits m of the source dtype (exact).
template <Src S>
HWY_INLINE float MagToFloat(RawT<S> m) {
  if constexpr (S == Src::F32) {
    return std::bit_cast<float>(m);
  } else if constexpr (S == Src::BF16) {
    return half::bf16_to_float(m);
  } else {
    return half::f16_to_float(m);
  }
}

// Prefetch distance of the streaming passes (the hardware prefetcher stops at page boundaries).
constexpr std::size_t kPrefetchAhead = 4096;

// Max magnitude bits (bits & kMagMask, in the source domain: integer order is value order, NaN/Inf
// above every finite value) of n elements at p, folded into the vector accumulator acc.
template <Src S, class D>
HWY_INLINE void AccumulateMaxMag(D d, const std::byte* p, std::size_t n, hn::Vec<D>& acc) {
  using T = RawT<S>;
  const T* q = reinterpret_cast<const T*>(p);
  const std::size_t N = hn::Lanes(d);
  const auto mask = hn::Set(d, kMagMask<S>);
  std::size_t i = 0;
  if (n >= 2 * N) {
    auto a1 = hn::Zero(d);
    for (; i + 2 * N <= n; i += 2 * N) {
      acc = hn::Max(acc, hn::And(hn::LoadU(d, q + i), mask));
      a1 = hn::Max(a1, hn::And(hn::LoadU(d, q + i + N), mask));
    }
    acc = hn::Max(acc, a1);
  }
  for (; i + N <= n; i += N) acc = hn::Max(acc, hn::And(hn::LoadU(d, q + i), mask));
  if (i < n) {
    HWY_ALIGN T buf[hn::MaxLanes(d)] = {};
    std::memcpy(buf, q + i, (n - i) * sizeof(T));
    acc = hn::Max(acc, hn::And(hn::Load(d, buf), mask));
  }
}

// Max magnitude bits of n elements at p.
template <Src S>
HWY_INLINE RawT<S> MaxMag(const std::byte* p, std::size_t n) {
  const hn::ScalableTag<RawT<S>> d;
  auto acc = hn::Zero(d);
  AccumulateMaxMag<S>(d, p, n, acc);
  return hn::GetLane(hn::MaxOfLanes(d, acc));
}

// Lanes(df) source elements at p, widened to float32 (exact; any sign, subnormals included).
template <Src S, class DF>
HWY_INLINE hn::Vec<DF> LoadF32(DF df, const std::byte* p) {
  if constexpr (S == Src::F32) {
    return hn::LoadU(df, reinterpret_cast<const float*>(p));
  } else if constexpr (S == Src::BF16) {
    const hn::RebindToUnsigned<DF> du;
    const hn::Rebind<std::uint16_t, DF> du16;
    const auto h = hn::LoadU(du16, reinterpret_cast<const std::uint16_t*>(p));
    return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du, h)));
  } else {
    // F16C on AVX2 and up; Highway's exact integer emulation (subnormals included) below.
    const hn::Rebind<hwy::float16_t, DF> df16;
    return hn::PromoteTo(df, hn::LoadU(df16, reinterpret_cast<const hwy::float16_t*>(p)));
  }
}

// flD(x) for finite x >= 0 (RNE to the source dtype; identity for F32), as a float32 value.
template <Src S, class DF>
HWY_INLINE hn::Vec<DF> RoundMag(DF df, hn::Vec<DF> x) {
  const hn::RebindToUnsigned<DF> du;
  if constexpr (S == Src::F32) {
    return x;
  } else if constexpr (S == Src::BF16) {
    // half::float_to_bf16: add 0x7FFF plus the lowest kept bit, drop 16 bits (subnormals alike).
    auto b = hn::BitCast(du, x);
    b = hn::Add(b, hn::Add(hn::Set(du, 0x7FFFu), hn::And(hn::ShiftRight<16>(b), hn::Set(du, 1u))));
    return hn::BitCast(df, hn::And(b, hn::Set(du, 0xFFFF0000u)));
  } else {
    // half::float_to_f16: normal binary16 values keep 10 mantissa bits; below 2^-14 multiples of
    // 2^-24 = ulp(0.5), rounded by the float addition. (Callers guarantee x < 65520.)
    auto b = hn::BitCast(du, x);
    b = hn::Add(b, hn::Add(hn::Set(du, 0xFFFu), hn::And(hn::ShiftRight<13>(b), hn::Set(du, 1u))));
    const auto normal = hn::BitCast(df, hn::And(b, hn::Set(du, 0xFFFFE000u)));
    const auto half = hn::Set(df, 0.5f);
    const auto sub = hn::Sub(hn::Add(x, half), half);
    return hn::IfThenElse(hn::Ge(x, hn::Set(df, 0x1p-14f)), normal, sub);
  }
}

// The sign bit of each lane of x (as unsigned bits: 0 or 0x80000000).
template <class DF>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> SignBits(DF df, hn::Vec<DF> x) {
  const hn::RebindToUnsigned<DF> du;
  (void)df;
  return hn::And(hn::BitCast(du, x), hn::Set(du, 0x80000000u));
}

// float8_e4m3fn code (0..0x7E) of a finite x in [0, 448], RNE: x + m - m with m = 2^(e+20) rounds to
// 3 mantissa bits in x's binade e (m = 2^14 below 2^-6: multiples of the subnormal step 2^-9); the
// result times 2^-120 has the E4M3 bit pattern in float32 bits 20..26 (subnormal E4M3 values map to
// subnormal float32 values, exactly). Equals fp8::e4m3_rne (the reference's arg-min) on [0, 448].
template <class DF>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> E4m3Code(DF df, hn::Vec<DF> x) {
  const hn::RebindToUnsigned<DF> du;
  const hn::RebindToSigned<DF> di;
  const auto eb = hn::Max(hn::BitCast(di, hn::And(hn::BitCast(du, x), hn::Set(du, 0x7F800000u))),
                          hn::Set(di, 0x3C800000));  // 2^-6
  const auto m = hn::BitCast(df, hn::Add(eb, hn::Set(di, 20 << 23)));
  const auto r = hn::Sub(hn::Add(x, m), m);
  return hn::ShiftRight<20>(hn::BitCast(du, hn::Mul(r, hn::Set(df, 0x1p-120f))));
}

// FP4 E2M1 index (0..7) of a finite q >= 0 (already flD-rounded): nvfp4::detail::ref_fp4_code's
// thresholds (<= 0.25, < 0.75, <= 1.25, < 1.75, <= 2.5, < 3.5, <= 5.0; anything above 5 is 7).
template <class DF>
HWY_INLINE hn::Vec<hn::RebindToSigned<DF>> Fp4Index(DF df, hn::Vec<DF> q) {
  const hn::RebindToSigned<DF> di;
  // Count the thresholds passed: each passed one subtracts the all-ones mask (-1).
  auto n = hn::VecFromMask(di, hn::RebindMask(di, hn::Gt(q, hn::Set(df, 0.25f))));
  n = hn::Add(n, hn::VecFromMask(di, hn::RebindMask(di, hn::Ge(q, hn::Set(df, 0.75f)))));
  n = hn::Add(n, hn::VecFromMask(di, hn::RebindMask(di, hn::Gt(q, hn::Set(df, 1.25f)))));
  n = hn::Add(n, hn::VecFromMask(di, hn::RebindMask(di, hn::Ge(q, hn::Set(df, 1.75f)))));
  n = hn::Add(n, hn::VecFromMask(di, hn::RebindMask(di, hn::Gt(q, hn::Set(df, 2.5f)))));
  n = hn::Add(n, hn::VecFromMask(di, hn::RebindMask(di, hn::Ge(q, hn::Set(df, 3.5f)))));
  n = hn::Add(n, hn::VecFromMask(di, hn::RebindMask(di, hn::Gt(q, hn::Set(df, 5.0f)))));
  return hn::Neg(n);
}

#if HWY_TARGET != HWY_SCALAR
// Nibble packing: a = codes of elements 0..N-1, b = codes of N..2N-1 (values 0..15 in 32-bit lanes);
// stores N bytes, byte j = code[2j] | code[2j+1] << 4 (the low nibble is the even element).
template <class DI>
HWY_INLINE void StorePackedNibbles(DI di, hn::Vec<DI> a, hn::Vec<DI> b, std::uint8_t* out) {
  const hn::RebindToUnsigned<DI> du;
  const hn::Repartition<std::uint64_t, DI> d64;
  const hn::Rebind<std::uint8_t, DI> du8;
  const auto fold = [&](hn::Vec<DI> v) {  // per u64 lane: c_even | c_odd << 4 in the low byte
    const auto x = hn::BitCast(d64, v);
    return hn::BitCast(du, hn::And(hn::Or(x, hn::ShiftRight<28>(x)), hn::Set(d64, 0xFFu)));
  };
  const auto bytes = hn::ConcatEven(du, fold(b), fold(a));  // the low u32 of every u64, a's first
  hn::StoreU(hn::DemoteTo(du8, hn::BitCast(di, bytes)), du8, out);
}
#endif

// Nibble packing of n codes (n even) from 32-bit lanes stored in codes[] (the portable fallback).
HWY_INLINE void PackNibblesScalar(const std::int32_t* codes, std::size_t n, std::uint8_t* out) {
  for (std::size_t j = 0; j < n; j += 2)
    out[j / 2] = static_cast<std::uint8_t>(codes[j] | (codes[j + 1] << 4));
}

// Copies n (< Lanes) source elements into a zero-padded buffer of one full vector.
template <Src S, class DF>
HWY_INLINE void LoadTail(DF df, const std::byte* p, std::size_t n, std::byte* buf) {
  std::memset(buf, 0, hn::Lanes(df) * kEsz<S>);
  std::memcpy(buf, p, n * kEsz<S>);
}

HWY_INLINE void PrefetchRange(const std::byte* p, std::size_t bytes) {
  for (std::size_t j = 0; j < bytes; j += 64) hwy::Prefetch(p + j);
}

}  // namespace HWY_NAMESPACE
}  // namespace fp4forge::scheme_simd
HWY_AFTER_NAMESPACE();

#endif  // toggle guard
