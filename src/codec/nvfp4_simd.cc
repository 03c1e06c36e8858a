// Highway kernels for the NVFP4 codec, compiled once per x86 target (AVX3_DL, AVX3, AVX2, SSE4, SSSE3,
// and the EMU128 baseline) and chosen at run time (HWY_EXPORT / HWY_DYNAMIC_DISPATCH). Every target
// produces the bytes of the scalar reference (nvfp4_ref.cc); the arithmetic follows spec §2 exactly:
// the group scale in the source dtype then fp32, E4M3 round-to-nearest-even, eff = fl32(s/gs) by IEEE
// division, q = fl32(w/eff) by IEEE division (never a multiply by a reciprocal), FP4 thresholds with
// the spec's tie rules, sign from q < 0.
//
// Layout of the encode: a row is processed in chunks of up to kChunkGroups groups (16 columns each,
// the chunk stays in L1). Pass 1 computes every group's max|w| as magnitude bits in the source domain
// (a transposing max-tree yields one vector of Lanes() group maxima); pass 2 computes the E4M3 codes
// and eff for Lanes() groups at a time; pass 3 divides, thresholds and packs the FP4 codes.

// All attainable targets (in particular the portable baseline next to SSE4/AVX2: EMU128, or SCALAR
// with GCC < 12.3 where Highway 1.0.3 considers EMU128 miscompiled), plus AVX3_DL
// (Ice Lake / Zen 4 and later), which Highway 1.0.3 only builds on request.
#ifndef HWY_COMPILE_ALL_ATTAINABLE
#define HWY_COMPILE_ALL_ATTAINABLE
#endif
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL
#endif

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "codec/nvfp4_simd.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "codec/nvfp4_internal.h"
#include "fp4forge/codec/half.h"

HWY_BEFORE_NAMESPACE();
namespace fp4forge::nvfp4::detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr std::size_t kGroup = 16;
constexpr std::size_t kChunkGroups = 256;  // 4096 columns per chunk

// Source dtype as a compile-time tag.
enum class Src { BF16, F16, F32 };

// Magnitude bits of N source elements in the source domain, widened to u32 lanes:
// bf16/f16 -> h & 0x7FFF, f32 -> bits & 0x7FFFFFFF. Monotone in |w|; NaN/Inf sort above all finite.
template <Src S, class DU>
HWY_INLINE hn::Vec<DU> LoadMagBits(DU du, const std::byte* p) {
  if constexpr (S == Src::F32) {
    const auto v = hn::LoadU(du, reinterpret_cast<const std::uint32_t*>(p));
    return hn::And(v, hn::Set(du, 0x7FFFFFFFu));
  } else {
    const hn::Rebind<std::uint16_t, DU> du16;
    const auto h = hn::LoadU(du16, reinterpret_cast<const std::uint16_t*>(p));
    return hn::And(hn::PromoteTo(du, h), hn::Set(du, 0x7FFFu));
  }
}

// float32 of binary16 bit patterns held in the low 16 bits of u32 lanes (finite values). The
// magnitude bits shifted into float32 position read as the value times 2^-112 (a float32 subnormal
// for a binary16 subnormal), so one exact multiply by 2^112 rescales both cases.
template <class DF>
HWY_INLINE hn::Vec<DF> F16BitsToF32(DF df, hn::Vec<hn::RebindToUnsigned<DF>> h) {
  const hn::RebindToUnsigned<DF> du;
  const auto mag = hn::BitCast(df, hn::ShiftLeft<13>(hn::And(h, hn::Set(du, 0x7FFFu))));
  const auto v = hn::Mul(mag, hn::Set(df, 0x1p112f));
  const auto sign = hn::ShiftLeft<16>(hn::And(h, hn::Set(du, 0x8000u)));
  return hn::BitCast(df, hn::Or(hn::BitCast(du, v), sign));
}

// The even and the odd elements of 2*Lanes(df) consecutive source elements, as float32: lane j of
// `even` is element 2j, lane j of `odd` element 2j+1 (so codes pack as even | odd << 4 lane-wise).
template <Src S, class DF>
HWY_INLINE void LoadEvenOdd(DF df, const std::byte* p, hn::Vec<DF>& even, hn::Vec<DF>& odd) {
  const hn::RebindToUnsigned<DF> du;
  if constexpr (S == Src::F32) {
    const float* f = reinterpret_cast<const float*>(p);
#if HWY_TARGET == HWY_SCALAR
    even = hn::LoadU(df, f);
    odd = hn::LoadU(df, f + 1);
#else
    const auto a = hn::LoadU(df, f);
    const auto b = hn::LoadU(df, f + hn::Lanes(df));
    even = hn::ConcatEven(df, b, a);
    odd = hn::ConcatOdd(df, b, a);
#endif
  } else {
    // One u32 lane holds a pair: element 2j in the low half, 2j+1 in the high half (little-endian).
    const auto x = hn::LoadU(du, reinterpret_cast<const std::uint32_t*>(p));
    if constexpr (S == Src::BF16) {
      even = hn::BitCast(df, hn::ShiftLeft<16>(x));
      odd = hn::BitCast(df, hn::And(x, hn::Set(du, 0xFFFF0000u)));
    } else {
      even = F16BitsToF32(df, hn::And(x, hn::Set(du, 0xFFFFu)));
      odd = F16BitsToF32(df, hn::ShiftRight<16>(x));
    }
  }
}

// Source-domain magnitude bits (finite) -> float32 value.
template <Src S, class DU>
HWY_INLINE hn::Vec<hn::Rebind<float, DU>> MagBitsToF32(DU du, hn::Vec<DU> m) {
  const hn::Rebind<float, DU> df;
  if constexpr (S == Src::F32) {
    return hn::BitCast(df, m);
  } else if constexpr (S == Src::BF16) {
    return hn::BitCast(df, hn::ShiftLeft<16>(m));
  } else {
    const hn::RebindToSigned<DU> di;
    const auto exp = hn::ShiftRight<10>(m);
    const auto man = hn::And(m, hn::Set(du, 0x3FFu));
    const auto normal = hn::Or(hn::ShiftLeft<23>(hn::Add(exp, hn::Set(du, 112u))), hn::ShiftLeft<13>(man));
    const auto sub = hn::Mul(hn::ConvertTo(df, hn::BitCast(di, man)), hn::Set(df, 0x1p-24f));
    return hn::IfThenElse(hn::RebindMask(df, hn::Eq(exp, hn::Zero(du))), sub, hn::BitCast(df, normal));
  }
}

// flD(x) for non-negative finite x (RNE); identity for F32.
template <Src S, class DF>
HWY_INLINE hn::Vec<DF> RoundToSrc(DF df, hn::Vec<DF> x) {
  const hn::RebindToUnsigned<DF> du;
  if constexpr (S == Src::F32) {
    return x;
  } else if constexpr (S == Src::BF16) {
    auto b = hn::BitCast(du, x);
    b = hn::Add(b, hn::Add(hn::Set(du, 0x7FFFu), hn::And(hn::ShiftRight<16>(b), hn::Set(du, 1u))));
    return hn::BitCast(df, hn::And(b, hn::Set(du, 0xFFFF0000u)));
  } else {
    // binary16: normal values keep 10 mantissa bits; below 2^-14 multiples of 2^-24 (ulp(0.5)).
    auto b = hn::BitCast(du, x);
    b = hn::Add(b, hn::Add(hn::Set(du, 0xFFFu), hn::And(hn::ShiftRight<13>(b), hn::Set(du, 1u))));
    const auto normal = hn::BitCast(df, hn::And(b, hn::Set(du, 0xFFFFE000u)));
    const auto half = hn::Set(df, 0.5f);
    const auto sub = hn::Sub(hn::Add(x, half), half);
    return hn::IfThenElse(hn::Ge(x, hn::Set(df, 0x1p-14f)), normal, sub);
  }
}

// Reduces kG vectors (one per group, lanes = partial maxima) to one vector whose lane g is the max of
// vector g: log2(N) levels of Max(ConcatEven, ConcatOdd) keep the group order.
template <class DU, std::size_t kN>
HWY_INLINE hn::Vec<DU> MaxTree(DU du, hn::Vec<DU> (&v)[kN]) {
#if HWY_TARGET != HWY_SCALAR
  for (std::size_t n = kN; n > 1; n /= 2) {
    for (std::size_t i = 0; i < n / 2; ++i)
      v[i] = hn::Max(hn::ConcatEven(du, v[2 * i + 1], v[2 * i]), hn::ConcatOdd(du, v[2 * i + 1], v[2 * i]));
  }
#else
  static_assert(kN == 1);
  (void)du;
#endif
  return v[0];
}

// Groups [0, ng) of a chunk starting at `src`: source-domain max magnitude bits into gmax[] (padded
// with zeros to a multiple of Lanes). Returns false if any group holds a NaN/Inf.
template <Src S>
HWY_INLINE bool GroupMaxima(const std::byte* src, std::size_t ng, std::uint32_t* gmax) {
  const hn::ScalableTag<std::uint32_t> du;
  constexpr std::size_t N = hn::MaxLanes(du);
  constexpr std::size_t kVecPerGroup = kGroup / N;
  constexpr std::size_t esz = S == Src::F32 ? 4 : 2;
  constexpr std::uint32_t kNonFinite = S == Src::F32 ? 0x7F800000u : S == Src::BF16 ? 0x7F80u : 0x7C00u;
  auto bad = hn::Zero(du);
  for (std::size_t g0 = 0; g0 < ng; g0 += N) {
    hn::Vec<decltype(du)> v[N];
    for (std::size_t j = 0; j < N; ++j) {
      if (g0 + j < ng) {
        const std::byte* p = src + (g0 + j) * kGroup * esz;
        auto m = LoadMagBits<S>(du, p);
        for (std::size_t k = 1; k < kVecPerGroup; ++k) m = hn::Max(m, LoadMagBits<S>(du, p + k * N * esz));
        v[j] = m;
      } else {
        v[j] = hn::Zero(du);
      }
    }
    const auto m = MaxTree(du, v);
    bad = hn::Max(bad, m);
    hn::StoreU(m, du, gmax + g0);
  }
  return hn::GetLane(hn::MaxOfLanes(du, bad)) < kNonFinite;
}

// Scales for groups [0, ng) (gmax padded to a multiple of Lanes): E4M3 codes into codes[], eff into
// eff[] (both padded likewise).
template <Src S>
HWY_INLINE void GroupScales(const std::uint32_t* gmax, std::size_t ng, float gs, std::uint8_t* codes,
                            float* eff) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<std::uint8_t, decltype(du)> du8;
  constexpr std::size_t N = hn::MaxLanes(df);
  const auto vgs = hn::Set(df, gs);
  for (std::size_t g0 = 0; g0 < ng; g0 += N) {
    const auto a = MagBitsToF32<S>(du, hn::LoadU(du, gmax + g0));       // group amax, exact in D
    const auto sD = RoundToSrc<S>(df, hn::Div(a, hn::Set(df, 6.0f)));   // flD(a / 6)
    const auto p = hn::Min(hn::Mul(vgs, sD), hn::Set(df, 448.0f));      // clamp(fl32(gs * sD), 448)
    // E4M3 RNE: normals (p >= 2^-6) keep 3 mantissa bits; subnormals are multiples of 2^-9 = ulp(2^14).
    auto pb = hn::BitCast(du, p);
    pb = hn::Add(pb, hn::Add(hn::Set(du, 0x7FFFFu), hn::And(hn::ShiftRight<20>(pb), hn::Set(du, 1u))));
    const auto s_norm = hn::BitCast(df, hn::And(pb, hn::Set(du, 0xFFF00000u)));
    const auto magic = hn::Set(df, 16384.0f);
    const auto s_sub = hn::Sub(hn::Add(p, magic), magic);
    const auto min_normal = hn::Set(df, 0x1p-6f);
    auto s = hn::IfThenElse(hn::Ge(p, min_normal), s_norm, s_sub);
    const auto code_norm = hn::Sub(hn::ShiftRight<20>(hn::BitCast(du, s)), hn::Set(du, 960u));
    const auto code_sub = hn::BitCast(du, hn::ConvertTo(di, hn::Mul(s, hn::Set(df, 512.0f))));
    auto code = hn::IfThenElse(hn::RebindMask(du, hn::Ge(s, min_normal)), code_norm, code_sub);
    const auto zero = hn::Eq(s, hn::Zero(df));                          // s == 0 -> 0.125, 0x20
    s = hn::IfThenElse(zero, hn::Set(df, 0.125f), s);
    code = hn::IfThenElse(hn::RebindMask(du, zero), hn::Set(du, 0x20u), code);
    hn::StoreU(hn::Div(s, vgs), df, eff + g0);                         // eff = fl32(s / gs)
    // DemoteTo (codes are 0..126), not TruncateTo: Highway 1.0.3's u32->u8 TruncateTo is wrong on
    // AVX3_DL (it permutes 32-bit lanes with a byte index table).
    hn::StoreU(hn::DemoteTo(du8, hn::BitCast(di, code)), du8, codes + g0);
  }
}

// FP4 codes of q = fl32(w / eff) (u32 lanes, values 0..15). The spec's thresholds (§2.4) are
// round-to-nearest-even onto the E2M1 grid {0, .5, 1, 1.5 | 2, 3 | 4, 6} after clamping to 6: the
// grid step is 0.5 below 2, 1 in [2, 4) and 2 from 4 on, and every tie goes to the even code. With
// m = min(|q|, 6) and e = max(exponent(m), 0), adding 2^(22+e) makes the IEEE addition round m to a
// multiple of its step (ties to even), and the low bits of the sum are r = m/step; the code is
// r + 2e. Equivalent to the eight comparison masks, tie for tie (checked against the scalar reference).
template <class DF>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> Fp4Codes(DF df, hn::Vec<DF> q) {
  const hn::RebindToUnsigned<DF> du;
  const auto m = hn::Min(hn::BitCast(df, hn::And(hn::BitCast(du, q), hn::Set(du, 0x7FFFFFFFu))),
                         hn::Set(df, 6.0f));
  const auto e = hn::Max(hn::ShiftRight<23>(hn::BitCast(du, m)), hn::Set(du, 127u));  // 127..129
  const auto magic = hn::ShiftLeft<23>(hn::Add(e, hn::Set(du, 22u)));             // 2^(22 + e-127)
  const auto sum = hn::BitCast(du, hn::Add(m, hn::BitCast(df, magic)));            // RNE to the step
  // code = (sum - magic) + 2 * (e - 127)
  const auto code = hn::Add(hn::Sub(sum, magic), hn::Sub(hn::Add(e, e), hn::Set(du, 254u)));
  // sign from q < 0 (a -0.0 quotient is not negative: code 0; a negative tiny quotient: code 8)
  const auto neg = hn::RebindMask(du, hn::Lt(q, hn::Zero(df)));
  return hn::IfThenElse(neg, hn::Or(code, hn::Set(du, 8u)), code);
}

// Quantizes 2*Lanes(df) consecutive elements (eff per lane) into Lanes(df) packed bytes, returned
// as u32 lanes holding 0..255 (lane j = code[2j] | code[2j+1] << 4: low nibble = even column).
template <Src S, class DF>
HWY_INLINE hn::Vec<hn::RebindToSigned<DF>> PairBytes(DF df, const std::byte* p, hn::Vec<DF> veff) {
  const hn::RebindToSigned<DF> di;
  hn::Vec<DF> even, odd;
  LoadEvenOdd<S>(df, p, even, odd);
  const auto ce = Fp4Codes(df, hn::Div(even, veff));  // q = fl32(w / eff): IEEE division
  const auto co = Fp4Codes(df, hn::Div(odd, veff));
  return hn::BitCast(di, hn::Or(ce, hn::ShiftLeft<4>(co)));
}

// Stores the Lanes(di) bytes of a PairBytes result.
template <class DI>
HWY_INLINE void StoreBytes(DI /* di */, hn::Vec<DI> bytes, std::uint8_t* out) {
  const hn::Rebind<std::uint8_t, DI> du8;
  hn::StoreU(hn::DemoteTo(du8, bytes), du8, out);
}

#if HWY_TARGET == HWY_AVX2
// 16 bytes from two PairBytes results (a first): two packs and one lane permute instead of two
// generic demotions.
HWY_INLINE void StoreBytes2(hn::Vec256<std::int32_t> a, hn::Vec256<std::int32_t> b, std::uint8_t* out) {
  const __m256i w = _mm256_packs_epi32(a.raw, b.raw);  // per 128-bit half: a0-3 b0-3 | a4-7 b4-7
  const __m256i by = _mm256_packus_epi16(w, w);
  const __m256i ord = _mm256_permutevar8x32_epi32(by, _mm256_setr_epi32(0, 4, 1, 5, 0, 4, 1, 5));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm256_castsi256_si128(ord));
}
#elif HWY_TARGET == HWY_SSE4 || HWY_TARGET == HWY_SSSE3
// 8 bytes from two PairBytes results (a first).
HWY_INLINE void StoreBytes2(hn::Vec128<std::int32_t> a, hn::Vec128<std::int32_t> b, std::uint8_t* out) {
  const __m128i w = _mm_packs_epi32(a.raw, b.raw);
  _mm_storel_epi64(reinterpret_cast<__m128i*>(out), _mm_packus_epi16(w, w));
}
#endif

template <Src S>
bool EncodeT(const std::byte* data, std::uint64_t rows, std::uint64_t cols, float gs, std::byte* packed,
             std::byte* scale) {
  const hn::ScalableTag<float> df;
  constexpr std::size_t N = hn::MaxLanes(df);
  constexpr std::size_t esz = S == Src::F32 ? 4 : 2;
  HWY_ALIGN std::uint32_t gmax[kChunkGroups];
  HWY_ALIGN float eff[kChunkGroups];
  HWY_ALIGN std::uint8_t codes[kChunkGroups];
  const std::uint64_t groups_per_row = cols / kGroup;
  for (std::uint64_t r = 0; r < rows; ++r) {
    for (std::uint64_t c0 = 0; c0 < groups_per_row; c0 += kChunkGroups) {
      const std::size_t ng = static_cast<std::size_t>(
          groups_per_row - c0 < kChunkGroups ? groups_per_row - c0 : kChunkGroups);
      const std::uint64_t gbase = r * groups_per_row + c0;  // first group index of the chunk
      const std::byte* src = data + gbase * kGroup * esz;
      if (!GroupMaxima<S>(src, ng, gmax)) return false;
      GroupScales<S>(gmax, ng, gs, codes, eff);
      std::memcpy(scale + gbase, codes, ng);
      std::uint8_t* out = reinterpret_cast<std::uint8_t*>(packed) + gbase * (kGroup / 2);
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
      // 2*Lanes = 32: one vector pair spans two groups.
      static_assert(2 * N == 2 * kGroup);
      const hn::RebindToSigned<decltype(df)> di;
      const hn::Half<decltype(df)> dh;
      const hn::RebindToSigned<decltype(dh)> dih;
      std::size_t g = 0;
      for (; g + 2 <= ng; g += 2) {
        const auto veff = hn::Combine(df, hn::Set(dh, eff[g + 1]), hn::Set(dh, eff[g]));
        StoreBytes(di, PairBytes<S>(df, src + g * kGroup * esz, veff), out + g * kGroup / 2);
      }
      if (g < ng)
        StoreBytes(dih, PairBytes<S>(dh, src + g * kGroup * esz, hn::Set(dh, eff[g])), out + g * kGroup / 2);
#elif HWY_TARGET == HWY_AVX2
      // 2*Lanes = 16: one vector pair per group; two groups per 16-byte store.
      static_assert(2 * N == kGroup);
      const hn::RebindToSigned<decltype(df)> di;
      std::size_t g = 0;
      for (; g + 2 <= ng; g += 2) {
        const auto a = PairBytes<S>(df, src + g * kGroup * esz, hn::Set(df, eff[g]));
        const auto b = PairBytes<S>(df, src + (g + 1) * kGroup * esz, hn::Set(df, eff[g + 1]));
        StoreBytes2(a, b, out + g * kGroup / 2);
      }
      if (g < ng) StoreBytes(di, PairBytes<S>(df, src + g * kGroup * esz, hn::Set(df, eff[g])), out + g * kGroup / 2);
#elif HWY_TARGET == HWY_SSE4 || HWY_TARGET == HWY_SSSE3
      // 2*Lanes = 8: two vector pairs per group, one 8-byte store.
      static_assert(4 * N == kGroup);
      for (std::size_t g = 0; g < ng; ++g) {
        const auto veff = hn::Set(df, eff[g]);
        const std::byte* p = src + g * kGroup * esz;
        StoreBytes2(PairBytes<S>(df, p, veff), PairBytes<S>(df, p + 2 * N * esz, veff), out + g * kGroup / 2);
      }
#else
      static_assert(2 * N <= kGroup);
      const hn::RebindToSigned<decltype(df)> di;
      for (std::size_t g = 0; g < ng; ++g) {
        const auto veff = hn::Set(df, eff[g]);
        for (std::size_t k = 0; k < kGroup; k += 2 * N)
          StoreBytes(di, PairBytes<S>(df, src + (g * kGroup + k) * esz, veff), out + (g * kGroup + k) / 2);
      }
#endif
    }
  }
  return true;
}

bool Encode(const std::byte* data, DType dt, std::uint64_t rows, std::uint64_t cols, float gs,
            std::byte* packed, std::byte* scale) {
  switch (dt) {
    case DType::BF16: return EncodeT<Src::BF16>(data, rows, cols, gs, packed, scale);
    case DType::F16: return EncodeT<Src::F16>(data, rows, cols, gs, packed, scale);
    default: return EncodeT<Src::F32>(data, rows, cols, gs, packed, scale);
  }
}

// Max magnitude bits over a contiguous range, in the source domain (u16 lanes for 16-bit sources).
template <typename T>
T AmaxDomain(const T* p, std::uint64_t count, T mask) {
  const hn::ScalableTag<T> d;
  const std::size_t N = hn::Lanes(d);
  const auto vmask = hn::Set(d, mask);
  auto m0 = hn::Zero(d), m1 = hn::Zero(d), m2 = hn::Zero(d), m3 = hn::Zero(d);
  std::uint64_t i = 0;
  for (; i + 4 * N <= count; i += 4 * N) {
    m0 = hn::Max(m0, hn::And(hn::LoadU(d, p + i), vmask));
    m1 = hn::Max(m1, hn::And(hn::LoadU(d, p + i + N), vmask));
    m2 = hn::Max(m2, hn::And(hn::LoadU(d, p + i + 2 * N), vmask));
    m3 = hn::Max(m3, hn::And(hn::LoadU(d, p + i + 3 * N), vmask));
  }
  for (; i + N <= count; i += N) m0 = hn::Max(m0, hn::And(hn::LoadU(d, p + i), vmask));
  T m = hn::GetLane(hn::MaxOfLanes(d, hn::Max(hn::Max(m0, m1), hn::Max(m2, m3))));
  for (; i < count; ++i) {
    const T v = static_cast<T>(p[i] & mask);
    if (v > m) m = v;
  }
  return m;
}

std::uint32_t AmaxBits(const std::byte* data, DType dt, std::uint64_t count) {
  if (dt == DType::F32) {
    std::uint32_t m = AmaxDomain<std::uint32_t>(reinterpret_cast<const std::uint32_t*>(data), count,
                                                0x7FFFFFFFu);
    return m;  // already float32 bits; >= 0x7F800000 means NaN/Inf
  }
  const std::uint16_t m =
      AmaxDomain<std::uint16_t>(reinterpret_cast<const std::uint16_t*>(data), count, std::uint16_t{0x7FFF});
  if (dt == DType::BF16) return static_cast<std::uint32_t>(m) << 16;
  if (m >= 0x7C00u) return 0x7FFFFFFFu;  // f16 NaN/Inf
  return std::bit_cast<std::uint32_t>(half::f16_to_float(m));
}

}  // namespace HWY_NAMESPACE
}  // namespace fp4forge::nvfp4::detail
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace fp4forge::nvfp4::detail {

HWY_EXPORT(AmaxBits);
HWY_EXPORT(Encode);

std::uint32_t simd_amax_bits(const std::byte* data, DType dt, std::uint64_t count) {
  return HWY_DYNAMIC_DISPATCH(AmaxBits)(data, dt, count);
}

bool simd_encode(const std::byte* data, DType dt, std::uint64_t rows, std::uint64_t cols, float gs,
                 std::byte* packed, std::byte* scale) {
  return HWY_DYNAMIC_DISPATCH(Encode)(data, dt, rows, cols, gs, packed, scale);
}

const std::vector<Kernels>& simd_kernels() {
  static const std::vector<Kernels> kernels = [] {
    std::vector<Kernels> v;
    const std::int64_t supported = hwy::SupportedTargets();
    const auto add = [&](std::int64_t target, AmaxBitsFn a, EncodeFn e) {
      if (supported & target) v.push_back(Kernels{hwy::TargetName(target), a, e});
    };
    // Best first (x86 target bits: lower = better).
#if HWY_TARGETS & HWY_AVX3_DL
    add(HWY_AVX3_DL, &N_AVX3_DL::AmaxBits, &N_AVX3_DL::Encode);
#endif
#if HWY_TARGETS & HWY_AVX3
    add(HWY_AVX3, &N_AVX3::AmaxBits, &N_AVX3::Encode);
#endif
#if HWY_TARGETS & HWY_AVX2
    add(HWY_AVX2, &N_AVX2::AmaxBits, &N_AVX2::Encode);
#endif
#if HWY_TARGETS & HWY_SSE4
    add(HWY_SSE4, &N_SSE4::AmaxBits, &N_SSE4::Encode);
#endif
#if HWY_TARGETS & HWY_SSSE3
    add(HWY_SSSE3, &N_SSSE3::AmaxBits, &N_SSSE3::Encode);
#endif
#if HWY_TARGETS & HWY_NEON
    add(HWY_NEON, &N_NEON::AmaxBits, &N_NEON::Encode);
#endif
#if HWY_TARGETS & HWY_EMU128
    add(HWY_EMU128, &N_EMU128::AmaxBits, &N_EMU128::Encode);
#endif
#if HWY_TARGETS & HWY_SCALAR
    add(HWY_SCALAR, &N_SCALAR::AmaxBits, &N_SCALAR::Encode);
#endif
    return v;
  }();
  return kernels;
}

}  // namespace fp4forge::nvfp4::detail
#endif  // HWY_ONCE
