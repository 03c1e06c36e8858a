// Highway kernels for the NVFP4 codec, compiled once per x86 target (AVX3_DL, AVX3, AVX2, SSE4, SSSE3,
// and the EMU128 baseline) and chosen at run time (HWY_EXPORT / HWY_DYNAMIC_DISPATCH; the paths' target list
// from scheme_simd_table.h, the one every scheme's kernels are listed with). Every target
// produces the bytes of the scalar reference (nvfp4_ref.cc): the group scale follows spec §2.3 exactly
// (flD(a/6), fl32(gs*sD), clamp, E4M3 round-to-nearest-even, zero -> 0x20), and the FP4 code of each
// weight is the reference's decision on q = fl32(w / fl32(s/gs)), obtained without dividing: the
// per-thread ThresholdTable (nvfp4_thresholds.cc) holds, per scale code, the integer bounds on the
// source magnitude bits where that decision changes, found with the reference's own arithmetic.
//
// Layout of the encode: a row is processed in chunks of up to kChunkGroups groups (16 columns each,
// the chunk stays in L1). Pass 1 computes every group's max|w| as magnitude bits in the source domain
// (a transposing max-tree yields one vector of Lanes() group maxima); pass 2 computes the E4M3 codes
// for Lanes() groups at a time; pass 3 compares each group's magnitudes with its code's bounds (seven
// integer compares per vector of up to 16 lanes), adds the sign and packs the nibbles.

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
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <type_traits>
#include <vector>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "codec/nvfp4_simd.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include "codec/nvfp4_internal.h"
#include "codec/scheme_simd_inl.h"
#include "fp4forge/codec/half.h"

HWY_BEFORE_NAMESPACE();
namespace fp4forge::nvfp4::detail {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr std::size_t kGroup = 16;
constexpr std::size_t kChunkGroups = 256;  // 4096 columns per chunk
constexpr std::size_t kPrefetchAhead = 4096;  // bytes

// The passes read the source once, front to back: prefetch the cache lines `kPrefetchAhead` bytes
// beyond [p, p + bytes) (the hardware prefetcher stops at page boundaries).
HWY_INLINE void PrefetchAhead(const std::byte* p, std::size_t bytes) {
  for (std::size_t j = 0; j < bytes; j += 64) hwy::Prefetch(p + kPrefetchAhead + j);
}

// Source dtype as a compile-time tag, and flD (RNE to the source dtype): the shared per-target helpers of
// scheme_simd_inl.h (one copy for every scheme's kernels).
using scheme_simd::HWY_NAMESPACE::RoundMag;
using scheme_simd::HWY_NAMESPACE::Src;

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

#if HWY_TARGET == HWY_AVX2
// GroupMaxima for 16-bit sources on AVX2, without widening: one ymm holds a group's 16 magnitudes, and
// eight groups fold to one vector of eight maxima with in-lane shuffles (halves, then quads, then
// pairs) and one final lane permute, about half the instructions of the widening max tree. (The
// AVX-512 targets keep the 16-lane widening tree: no measurable gain there.)
HWY_INLINE bool GroupMaxima16Avx2(const std::byte* src, std::size_t ng, std::uint32_t* gmax,
                                  std::uint32_t non_finite) {
  const __m256i mag_mask = _mm256_set1_epi16(0x7FFF);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  __m256i bad = _mm256_setzero_si256();
  for (std::size_t g0 = 0; g0 < ng; g0 += 8) {
    PrefetchAhead(src + g0 * kGroup * 2, 8 * kGroup * 2);
    __m256i x[8];
    for (std::size_t j = 0; j < 8; ++j) {
      const auto* q = reinterpret_cast<const __m256i*>(src + (g0 + j) * kGroup * 2);
      x[j] = g0 + j < ng ? _mm256_and_si256(_mm256_loadu_si256(q), mag_mask) : _mm256_setzero_si256();
    }
    // [g(2i) 8 | g(2i+1) 8]: the two 128-bit halves of each group folded, two groups per vector.
    __m256i y[4];
    for (std::size_t i = 0; i < 4; ++i)
      y[i] = _mm256_max_epu16(_mm256_permute2x128_si256(x[2 * i], x[2 * i + 1], 0x20),
                              _mm256_permute2x128_si256(x[2 * i], x[2 * i + 1], 0x31));
    // [g0 4, g2 4 | g1 4, g3 4] and [g4 4, g6 4 | g5 4, g7 4]
    const __m256i z0 = _mm256_max_epu16(_mm256_unpacklo_epi64(y[0], y[1]), _mm256_unpackhi_epi64(y[0], y[1]));
    const __m256i z1 = _mm256_max_epu16(_mm256_unpacklo_epi64(y[2], y[3]), _mm256_unpackhi_epi64(y[2], y[3]));
    // dwords [g0, g2, g4, g6 | g1, g3, g5, g7], two u16 per group each
    const __m256i a = _mm256_shuffle_epi32(z0, _MM_SHUFFLE(3, 1, 2, 0));
    const __m256i b = _mm256_shuffle_epi32(z1, _MM_SHUFFLE(3, 1, 2, 0));
    const __m256i u = _mm256_max_epu16(_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b));
    // one u16 per group in the low half of its dword, then groups in order
    const __m256i m = _mm256_and_si256(_mm256_max_epu16(u, _mm256_srli_epi32(u, 16)), _mm256_set1_epi32(0xFFFF));
    const __m256i r = _mm256_permutevar8x32_epi32(m, order);
    bad = _mm256_max_epu32(bad, r);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(gmax + g0), r);
  }
  const __m256i ge = _mm256_cmpgt_epi32(bad, _mm256_set1_epi32(static_cast<int>(non_finite) - 1));
  return _mm256_testz_si256(ge, ge) != 0;
}
#endif

// Groups [0, ng) of a chunk starting at `src`: source-domain max magnitude bits into gmax[] (padded
// with zeros to a multiple of Lanes). Returns false if any group holds a NaN/Inf.
template <Src S>
HWY_INLINE bool GroupMaxima(const std::byte* src, std::size_t ng, std::uint32_t* gmax) {
  constexpr std::uint32_t kNonFinite = S == Src::F32 ? 0x7F800000u : S == Src::BF16 ? 0x7F80u : 0x7C00u;
#if HWY_TARGET == HWY_AVX2
  if constexpr (S != Src::F32) return GroupMaxima16Avx2(src, ng, gmax, kNonFinite);
#endif
  const hn::ScalableTag<std::uint32_t> du;
  constexpr std::size_t N = hn::MaxLanes(du);
  constexpr std::size_t kVecPerGroup = kGroup / N;
  constexpr std::size_t esz = S == Src::F32 ? 4 : 2;
  auto bad = hn::Zero(du);
  for (std::size_t g0 = 0; g0 < ng; g0 += N) {
    PrefetchAhead(src + g0 * kGroup * esz, N * kGroup * esz);
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

// Scales for groups [0, ng) (gmax padded to a multiple of Lanes): E4M3 codes into codes[] (padded
// likewise); the smallest and largest code of groups [0, ng) into lo, hi.
template <Src S>
HWY_INLINE void GroupScales(const std::uint32_t* gmax, std::size_t ng, float gs, std::uint8_t* codes,
                            std::uint8_t& lo, std::uint8_t& hi) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<std::uint8_t, decltype(du)> du8;
  constexpr std::size_t N = hn::MaxLanes(df);
  const auto vgs = hn::Set(df, gs);
  auto vlo = hn::Set(du, 0xFFu), vhi = hn::Zero(du);
  for (std::size_t g0 = 0; g0 < ng; g0 += N) {
    const auto a = MagBitsToF32<S>(du, hn::LoadU(du, gmax + g0));       // group amax, exact in D
    const auto sD = RoundMag<S>(df, hn::Div(a, hn::Set(df, 6.0f)));   // flD(a / 6)
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
    // DemoteTo (codes are 0..126), not TruncateTo: Highway 1.0.3's u32->u8 TruncateTo is wrong on
    // AVX3_DL (it permutes 32-bit lanes with a byte index table).
    hn::StoreU(hn::DemoteTo(du8, hn::BitCast(di, code)), du8, codes + g0);
    const auto live = hn::FirstN(du, ng - g0);  // padding lanes do not widen the range
    vlo = hn::Min(vlo, hn::IfThenElse(live, code, hn::Set(du, 0xFFu)));
    vhi = hn::Max(vhi, hn::IfThenElseZero(live, code));
  }
  lo = static_cast<std::uint8_t>(hn::GetLane(hn::MinOfLanes(du, vlo)));
  hi = static_cast<std::uint8_t>(hn::GetLane(hn::MaxOfLanes(du, vhi)));
}

// Lane type of the pass-3 comparisons: the source bits themselves (int16 for BF16/F16, int32 for
// F32). Magnitude bits are non-negative, so signed comparisons order them like the values.
template <Src S>
using LaneT = std::conditional_t<S == Src::F32, std::int32_t, std::int16_t>;

template <Src S>
HWY_INLINE const LaneT<S>* Thresholds(const ThresholdTable& tt, std::uint8_t code) {
  if constexpr (S == Src::F32) {
    return tt.entry32(code);
  } else {
    return tt.entry16(code);
  }
}

// FP4 codes (values 0..15 in the lanes) of the Lanes(d) source elements at p, for a group whose
// ThresholdTable entry is thr (no division: see ThresholdTable). The index is the number of
// boundaries the magnitude exceeds; the sign bit is set for w < 0 whose quotient is not zero.
template <Src S, class D>
HWY_INLINE hn::Vec<D> Codes(D d, const LaneT<S>* p, const LaneT<S>* thr) {
  using T = LaneT<S>;
  constexpr std::size_t kL = ThresholdTable::kLanes;
  const auto x = hn::LoadU(d, p);
  const auto mag = hn::And(x, hn::Set(d, static_cast<T>(S == Src::F32 ? 0x7FFFFFFF : 0x7FFF)));
  auto idx = hn::VecFromMask(d, hn::Gt(mag, hn::LoadU(d, thr)));  // 0 or -1
  for (std::size_t b = 1; b < 7; ++b) idx = hn::Add(idx, hn::VecFromMask(d, hn::Gt(mag, hn::LoadU(d, thr + b * kL))));
  const auto nonzero = hn::VecFromMask(d, hn::Gt(mag, hn::LoadU(d, thr + 7 * kL)));
  const auto neg = hn::And(nonzero, hn::ShiftRight<sizeof(T) * 8 - 1>(x));  // -1 where w < 0 and q != 0
  return hn::Or(hn::Neg(idx), hn::And(neg, hn::Set(d, T{8})));
}

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// The 16 codes of one group as int16 in element order.
template <Src S>
HWY_INLINE __m256i GroupCodes16(const LaneT<S>* p, const LaneT<S>* thr) {
  if constexpr (S != Src::F32) {
    // VEX compares into vectors on every 256-bit target, AVX-512 ones included: they issue on more
    // ports than the AVX-512 compares into mask registers (port 5 only on Intel cores).
    const auto ld = [](const std::int16_t* q) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)); };
    constexpr std::size_t kL = ThresholdTable::kLanes;
    const __m256i x = ld(p);
    const __m256i mag = _mm256_and_si256(x, _mm256_set1_epi16(0x7FFF));
    __m256i idx = _mm256_cmpgt_epi16(mag, ld(thr));  // minus the number of bounds exceeded
    for (std::size_t b = 1; b < 7; ++b) idx = _mm256_add_epi16(idx, _mm256_cmpgt_epi16(mag, ld(thr + b * kL)));
    const __m256i nonzero = _mm256_cmpgt_epi16(mag, ld(thr + 7 * kL));
    const __m256i sign8 = _mm256_and_si256(_mm256_and_si256(nonzero, _mm256_srai_epi16(x, 15)), _mm256_set1_epi16(8));
    return _mm256_sub_epi16(sign8, idx);  // 8 * sign + count (disjoint bits)
  } else {
#if HWY_TARGET == HWY_AVX2
    const hn::FixedTag<std::int32_t, 8> d;
    const __m256i w = _mm256_packs_epi32(Codes<S>(d, p, thr).raw, Codes<S>(d, p + 8, thr).raw);
    return _mm256_permute4x64_epi64(w, 0xD8);  // undo the per-128-bit-half interleave of packs
#else
    const hn::FixedTag<std::int32_t, 16> d;
    return _mm512_cvtepi32_epi16(Codes<S>(d, p, thr).raw);
#endif
  }
}

// Packed bytes of two groups (a first): byte j = code[2j] | code[2j+1] << 4 (one multiply-add per
// group), then two packs and one lane permute.
HWY_INLINE __m128i PackTwo(__m256i a, __m256i b) {
  const __m256i k = _mm256_set1_epi32(0x00100001);  // even element * 1 + odd element * 16
  const __m256i w = _mm256_packs_epi32(_mm256_madd_epi16(a, k), _mm256_madd_epi16(b, k));
  const __m256i by = _mm256_packus_epi16(w, w);  // per half: a0-3 b0-3 a0-3 b0-3 | a4-7 b4-7 ...
  const __m256i ord = _mm256_permutevar8x32_epi32(by, _mm256_setr_epi32(0, 4, 1, 5, 0, 4, 1, 5));
  return _mm256_castsi256_si128(ord);
}
#elif HWY_TARGET == HWY_SSE4 || HWY_TARGET == HWY_SSSE3
// The 8 packed bytes of one group.
template <Src S>
HWY_INLINE __m128i GroupBytes(const LaneT<S>* p, const LaneT<S>* thr) {
  __m128i lo, hi;  // int16 codes of elements 0..7 and 8..15
  if constexpr (S != Src::F32) {
    const hn::FixedTag<std::int16_t, 8> d;
    lo = Codes<S>(d, p, thr).raw;
    hi = Codes<S>(d, p + 8, thr).raw;
  } else {
    const hn::FixedTag<std::int32_t, 4> d;
    lo = _mm_packs_epi32(Codes<S>(d, p, thr).raw, Codes<S>(d, p + 4, thr).raw);
    hi = _mm_packs_epi32(Codes<S>(d, p + 8, thr).raw, Codes<S>(d, p + 12, thr).raw);
  }
  const __m128i k = _mm_set1_epi32(0x00100001);
  const __m128i w = _mm_packs_epi32(_mm_madd_epi16(lo, k), _mm_madd_epi16(hi, k));
  return _mm_packus_epi16(w, w);
}
#endif

// Pass 3 of a chunk: the packed FP4 bytes of groups [0, ng) whose scale codes are codes[].
template <Src S>
HWY_INLINE void PackGroups(const std::byte* src, std::size_t ng, const std::uint8_t* codes,
                           const ThresholdTable& tt, std::uint8_t* out) {
  const LaneT<S>* p = reinterpret_cast<const LaneT<S>*>(src);
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  std::size_t g = 0;
  for (; g + 2 <= ng; g += 2) {
    const __m256i a = GroupCodes16<S>(p + g * kGroup, Thresholds<S>(tt, codes[g]));
    const __m256i b = GroupCodes16<S>(p + (g + 1) * kGroup, Thresholds<S>(tt, codes[g + 1]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + g * kGroup / 2), PackTwo(a, b));
  }
  if (g < ng) {
    const __m256i a = GroupCodes16<S>(p + g * kGroup, Thresholds<S>(tt, codes[g]));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + g * kGroup / 2), PackTwo(a, a));
  }
#elif HWY_TARGET == HWY_SSE4 || HWY_TARGET == HWY_SSSE3
  for (std::size_t g = 0; g < ng; ++g)
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + g * kGroup / 2),
                     GroupBytes<S>(p + g * kGroup, Thresholds<S>(tt, codes[g])));
#else
  // Portable: codes of a group into a buffer, then pairs into bytes.
  const hn::CappedTag<LaneT<S>, kGroup> d;
  const std::size_t N = hn::Lanes(d);
  HWY_ALIGN LaneT<S> buf[kGroup];
  for (std::size_t g = 0; g < ng; ++g) {
    const LaneT<S>* thr = Thresholds<S>(tt, codes[g]);
    for (std::size_t k = 0; k < kGroup; k += N) hn::StoreU(Codes<S>(d, p + g * kGroup + k, thr), d, buf + k);
    for (std::size_t j = 0; j < kGroup / 2; ++j)
      out[g * kGroup / 2 + j] = static_cast<std::uint8_t>(buf[2 * j] | (buf[2 * j + 1] << 4));
  }
#endif
}

// The searched maxima of groups [0, ng) of a chunk as source-domain magnitude bits (GroupMaxima's form, padded
// with zeros); false when one is not a non-negative value of D (the caller then runs the reference).
template <Src S>
HWY_INLINE bool GivenMaxima(const float* group_max, std::size_t ng, std::uint32_t* gmax) {
  for (std::size_t i = 0; i < ng; ++i) {
    const float m = group_max[i];
    if (!(m >= 0.0f) || !std::isfinite(m)) return false;
    if constexpr (S == Src::F32) {
      gmax[i] = std::bit_cast<std::uint32_t>(m) & 0x7FFFFFFFu;
    } else {
      const std::uint16_t h = S == Src::BF16 ? half::float_to_bf16(m) : half::float_to_f16(m);
      if ((S == Src::BF16 ? half::bf16_to_float(h) : half::f16_to_float(h)) != m) return false;
      gmax[i] = h & 0x7FFFu;
    }
  }
  for (std::size_t i = ng; i < kChunkGroups; ++i) gmax[i] = 0;  // GroupScales reads whole vectors
  return true;
}

// With group_max == nullptr each group's scale comes from its max|w| (min-max); otherwise from group_max[]
// (searched maxima, values of D): the same scales and packing, so ref_encode_maxima's bytes (false when a
// maximum is not a value of D, and the caller runs the reference).
template <Src S>
bool EncodeT(const std::byte* data, std::uint64_t rows, std::uint64_t cols, float gs, const float* group_max,
             std::byte* packed, std::byte* scale) {
  constexpr std::size_t esz = S == Src::F32 ? 4 : 2;
  HWY_ALIGN std::uint32_t gmax[kChunkGroups];
  HWY_ALIGN std::uint8_t codes[kChunkGroups];
  constexpr DType kDt = S == Src::F32 ? DType::F32 : S == Src::BF16 ? DType::BF16 : DType::F16;
  ThresholdTable& tt = ThresholdTable::thread_table(kDt, gs);
  const std::uint64_t groups_per_row = cols / kGroup;
  for (std::uint64_t r = 0; r < rows; ++r) {
    for (std::uint64_t c0 = 0; c0 < groups_per_row; c0 += kChunkGroups) {
      const std::size_t ng = static_cast<std::size_t>(
          groups_per_row - c0 < kChunkGroups ? groups_per_row - c0 : kChunkGroups);
      const std::uint64_t gbase = r * groups_per_row + c0;  // first group index of the chunk
      const std::byte* src = data + gbase * kGroup * esz;
      if (group_max != nullptr ? !GivenMaxima<S>(group_max + gbase, ng, gmax) : !GroupMaxima<S>(src, ng, gmax))
        return false;
      std::uint8_t lo = 0, hi = 0;
      GroupScales<S>(gmax, ng, gs, codes, lo, hi);
      std::memcpy(scale + gbase, codes, ng);
      tt.ensure_range(lo, hi);
      PackGroups<S>(src, ng, codes, tt, reinterpret_cast<std::uint8_t*>(packed) + gbase * (kGroup / 2));
    }
  }
  return true;
}

bool EncodeMaxima(const std::byte* data, DType dt, std::uint64_t rows, std::uint64_t cols, float gs,
                  const float* group_max, std::byte* packed, std::byte* scale) {
  switch (dt) {
    case DType::BF16: return EncodeT<Src::BF16>(data, rows, cols, gs, group_max, packed, scale);
    case DType::F16: return EncodeT<Src::F16>(data, rows, cols, gs, group_max, packed, scale);
    default: return EncodeT<Src::F32>(data, rows, cols, gs, group_max, packed, scale);
  }
}

bool Encode(const std::byte* data, DType dt, std::uint64_t rows, std::uint64_t cols, float gs,
            std::byte* packed, std::byte* scale) {
  switch (dt) {
    case DType::BF16: return EncodeT<Src::BF16>(data, rows, cols, gs, nullptr, packed, scale);
    case DType::F16: return EncodeT<Src::F16>(data, rows, cols, gs, nullptr, packed, scale);
    default: return EncodeT<Src::F32>(data, rows, cols, gs, nullptr, packed, scale);
  }
}

// decode_rows: out = fp4_to_float(code) * eff per element, eff = fl32(e4m3(scale) / gs) per group (the one
// float product of the reference, so the same values bit for bit). Each group's 8 bytes are two 32-bit words;
// lane e takes nibble e of them (word e / 8, bits 4 (e % 8) ..), and the E2M1 value is built from its bits:
// magnitude codes 2..7 are 2^((m >> 1) - 1) x (1 + (m & 1) / 2), code 1 is 0.5, code 0 is 0, bit 3 the sign.
void DecodeGroups(const std::byte* packed, const float* eff, std::uint64_t groups, float* out) {
  const hn::CappedTag<float, kGroup> df;  // lanes divide the group (powers of two up to 16)
  const hn::RebindToUnsigned<decltype(df)> du;
  const std::size_t N = hn::Lanes(df);
  const auto fifteen = hn::Set(du, 15u), seven = hn::Set(du, 7u), one = hn::Set(du, 1u), two = hn::Set(du, 2u);
  for (std::uint64_t g = 0; g < groups; ++g) {
    std::uint32_t w[2];
    std::memcpy(w, packed + g * 8, 8);
    const auto e = hn::Set(df, eff[g]);
    for (std::size_t e0 = 0; e0 < kGroup; e0 += N) {
      const auto lane = hn::Iota(du, static_cast<std::uint32_t>(e0));  // element index
      const auto word = N <= 8 ? hn::Set(du, w[e0 / 8])
                               : hn::IfThenElse(hn::Lt(lane, hn::Set(du, 8u)), hn::Set(du, w[0]), hn::Set(du, w[1]));
      const auto shift = hn::And(hn::ShiftLeft<2>(lane), hn::Set(du, 31u));
      const auto code = hn::And(word >> shift, fifteen);
      const auto m = hn::And(code, seven);
      auto bits = hn::Or(hn::ShiftLeft<23>(hn::Add(hn::ShiftRight<1>(m), hn::Set(du, 126u))),
                         hn::ShiftLeft<22>(hn::And(m, one)));
      bits = hn::IfThenElse(hn::Lt(m, two), hn::IfThenElseZero(hn::Eq(m, one), hn::Set(du, 0x3F000000u)), bits);
      bits = hn::Or(bits, hn::ShiftLeft<31>(hn::ShiftRight<3>(code)));
      hn::StoreU(hn::Mul(hn::BitCast(df, bits), e), df, out + g * kGroup + e0);
    }
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
    PrefetchAhead(reinterpret_cast<const std::byte*>(p + i), 4 * N * sizeof(T));
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
#include "codec/scheme_simd_table.h"

namespace fp4forge::nvfp4::detail {

HWY_EXPORT(AmaxBits);
HWY_EXPORT(Encode);
HWY_EXPORT(EncodeMaxima);
HWY_EXPORT(DecodeGroups);

std::uint32_t simd_amax_bits(const std::byte* data, DType dt, std::uint64_t count) {
  return HWY_DYNAMIC_DISPATCH(AmaxBits)(data, dt, count);
}

bool simd_encode(const std::byte* data, DType dt, std::uint64_t rows, std::uint64_t cols, float gs,
                 std::byte* packed, std::byte* scale) {
  return HWY_DYNAMIC_DISPATCH(Encode)(data, dt, rows, cols, gs, packed, scale);
}

bool simd_encode_maxima(const std::byte* data, DType dt, std::uint64_t rows, std::uint64_t cols, float gs,
                        const float* group_max, std::byte* packed, std::byte* scale) {
  return HWY_DYNAMIC_DISPATCH(EncodeMaxima)(data, dt, rows, cols, gs, group_max, packed, scale);
}

void simd_decode_groups(const std::byte* packed, const float* eff, std::uint64_t groups, float* out) {
  HWY_DYNAMIC_DISPATCH(DecodeGroups)(packed, eff, groups, out);
}

/** One compiled target's kernel of one kind (FP4FORGE_SCHEME_TARGETS' entries: target bit, kernel). */
template <class Fn>
struct TargetEntry {
  std::int64_t target;
  Fn fn;
};

const std::vector<Kernels>& simd_kernels() {
  static const std::vector<Kernels> kernels = [] {
    // The compiled targets of each kernel, best first, from the table every scheme's kernels use
    // (scheme_simd_table.h); the three lists are in the same target order.
    const std::initializer_list<TargetEntry<AmaxBitsFn>> amax = {FP4FORGE_SCHEME_TARGETS(AmaxBits)};
    const std::initializer_list<TargetEntry<EncodeFn>> encode = {FP4FORGE_SCHEME_TARGETS(Encode)};
    const std::initializer_list<TargetEntry<EncodeMaximaFn>> maxima = {FP4FORGE_SCHEME_TARGETS(EncodeMaxima)};
    std::vector<Kernels> v;
    const std::int64_t supported = hwy::SupportedTargets();
    auto a = amax.begin();
    auto e = encode.begin();
    auto m = maxima.begin();
    for (; a != amax.end(); ++a, ++e, ++m)
      if (supported & a->target) v.push_back(Kernels{hwy::TargetName(a->target), a->fn, e->fn, m->fn});
    return v;
  }();
  return kernels;
}

}  // namespace fp4forge::nvfp4::detail
#endif  // HWY_ONCE
