// The NVFP4A16 searched observers' Highway kernel for BF16 and F16 sources (nvfp4_search.h), one compilation
// per x86 target, chosen at run time. Lanes are groups: a block of Lanes(df) groups of 16 is transposed once
// (vector j holds element j of every group), then every step runs the reference's arithmetic on all lanes at
// once, so each lane sums its 16 powers in the reference's order (e0 + e1 + ... + e15). Where the caller needs
// no step mask (patience cannot stop the search), a block is searched pruned (SearchBlockRanges): every eighth
// step in full, a lower bound of the steps between two of them from their per-element records, the middle step
// of the ranges many lanes keep (splitting them), then only the (group, step) pairs the bounds cannot rule out
// run in full, packed into lanes.
// Per element and step: the fl32 quotient (on FMA targets a reciprocal and one FMA correction, which gives
// the correctly rounded quotient wherever it decides anything: DivideExactly below; IEEE division
// elsewhere) or, for scales in the usual range, exact threshold decisions; flD rounding (RoundMag, the shared
// helper), E2M1 round-to-nearest-even, the power looked up in the reference's own table. The only float
// product that feeds an add is the FMA correction, written as one; GCC would otherwise contract a product and
// an add into an FMA that rounds once.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>

#include "codec/nvfp4_search_internal.h"
#include "fp4forge/codec/observer.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "codec/nvfp4_search_simd.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/aligned_allocator.h>
#include <hwy/highway.h>

#include "codec/scheme_simd_inl.h"

HWY_BEFORE_NAMESPACE();
namespace fp4forge::scheme_simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// fl32(x / s) for x >= 0 and a normal finite s > 0 with r = fl32(1 / s): q0 = fl32(x * r) is within an ulp
// of the quotient, the remainder x - q0 * s is exact in one FMA, and q0 + rem * r rounds to the correctly
// rounded quotient (Markstein's correction). Exhaustively checked against IEEE division for every BF16 x
// and s whose quotient lies in [2^-3, 2^4) (tests/unit/codec_search_test.cc), the range where the search
// decides anything: a smaller quotient rounds to E2M1 0, a larger one is clamped to 6, either way.
template <class V>
HWY_INLINE V DivideExactly(V x, V s, V r) {
#if HWY_NATIVE_FMA
  const auto q0 = hn::Mul(x, r);
  const auto rem = hn::NegMulAdd(q0, s, x);  // x - q0 * s, exact
  return hn::MulAdd(rem, r, q0);
#else
  (void)r;
  return hn::Div(x, s);
#endif
}

// Exposed for the exhaustive test of DivideExactly: out[i] = the kernel's quotient of x[i] / s[i] (n a
// multiple of the lane count).
void SearchQuotients(const float* x, const float* s, std::size_t n, float* out) {
  const hn::ScalableTag<float> df;
  for (std::size_t i = 0; i < n; i += hn::Lanes(df)) {
    const auto sv = hn::LoadU(df, s + i);
    hn::StoreU(DivideExactly(hn::LoadU(df, x + i), sv, hn::Div(hn::Set(df, 1.0f), sv)), df, out + i);
  }
}

// F16 needs the hardware conversion (F16C: RNE, overflow to inf, subnormals); Highway's emulation on the
// SSE targets truncates, so there the F16 search takes the table path.
#undef FP4FORGE_SEARCH_F16
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2 && !defined(HWY_DISABLE_F16C)
#define FP4FORGE_SEARCH_F16 1
#else
#define FP4FORGE_SEARCH_F16 0
#endif

// flD(x) as float: BF16 by the shared integer RNE (inf and NaN stay), F16 by the hardware conversion.
template <Src S, class DF>
HWY_INLINE hn::Vec<DF> RoundD(DF df, hn::Vec<DF> x) {
  if constexpr (S == Src::BF16) {
    return RoundMag<Src::BF16>(df, x);
  } else {
#if FP4FORGE_SEARCH_F16
    const hn::Rebind<hwy::float16_t, DF> df16;
    return hn::PromoteTo(df, hn::DemoteTo(df16, x));
#else
    return x;  // not instantiated: the F16 kernel is only called where FP4FORGE_SEARCH_F16
#endif
  }
}

// The magnitude bits in D of flD(d) (the power table's index), as int32 lanes.
template <Src S, class DF>
HWY_INLINE hn::Vec<hn::RebindToSigned<DF>> MagIndex(DF df, hn::Vec<DF> d) {
  const hn::RebindToUnsigned<DF> du;
  const hn::RebindToSigned<DF> di;
  if constexpr (S == Src::BF16) {
    // RNE in the integer domain, sign dropped first (RNE is odd).
    const auto db = hn::BitCast(du, hn::Abs(d));
    return hn::BitCast(di, hn::ShiftRight<16>(hn::Add(db, hn::Add(hn::Set(du, 0x7FFFu), hn::And(hn::ShiftRight<16>(db), hn::Set(du, 1u))))));
  } else {
#if FP4FORGE_SEARCH_F16
    const hn::Rebind<hwy::float16_t, DF> df16;
    const hn::Rebind<std::uint16_t, DF> du16;
    const auto h = hn::BitCast(du16, hn::DemoteTo(df16, hn::Abs(d)));
    return hn::BitCast(di, hn::PromoteTo(du, h));
#else
    (void)df;
    return hn::BitCast(di, hn::BitCast(du, d));
#endif
  }
}

// A step's constants for SumByConsts, one vector of lanes, each a group under its own scale s (normal, in the
// range the threshold table holds for): the seven thresholds at tc[k * L] (args->thresholds: the exact bounds of
// the reference's decision for s = 1.m, shifted by s's exponent: every quantity in the chain scales exactly by
// powers of two in the normal range) and the seven nonzero dq = flD(q * s) at cc[k * L], computed once: s/2, s,
// 2s, 4s exactly, flD(1.5 s) and its doubles.
// Kept apart from the sum so that a caller can compute the next step's constants (their gathers) before it sums
// this one: the gathers' latency then overlaps the sums.
template <Src S, class DF>
HWY_INLINE void StepConsts(DF df, hn::Vec<DF> s, const nvfp4::detail::SearchArgs* args, std::int32_t* tc, float* cc) {
  constexpr int kMant = S == Src::BF16 ? 7 : 10;
  const hn::RebindToSigned<DF> di;
  const std::size_t L = hn::Lanes(df);
  const auto mant = hn::And(hn::ShiftRight<23 - kMant>(hn::BitCast(di, s)), hn::Set(di, (1 << kMant) - 1));
  if (args->threshold_deltas != nullptr) {
    // One gather of the seven two-bit corrections, each threshold from fl32(s * mid_k) truncated to D
    // (threshold_base: the exponent rides along).
    constexpr int kUlp = 23 - kMant;
    const auto dl = hn::GatherIndex(di, args->threshold_deltas, mant);
    const auto trunc = hn::Set(di, ~((1 << kUlp) - 1)), field = hn::Set(di, 3 << kUlp), bias = hn::Set(di, 2 << kUlp);
    for (int k = 0; k < 7; ++k) {
      const auto base = hn::And(hn::BitCast(di, hn::Mul(s, hn::Set(df, nvfp4::detail::kE2M1Midpoints[k]))), trunc);
      const auto delta = hn::And(hn::ShiftLeftSame(dl, kUlp - 2 * k), field);
      hn::Store(hn::Sub(hn::Add(base, delta), bias), di, tc + static_cast<std::size_t>(k) * L);
    }
  } else {
    const auto sb = hn::BitCast(di, s);
    const auto eoff = hn::Sub(hn::And(sb, hn::Set(di, 0x7F800000)), hn::Set(di, 127 << 23));
    for (int k = 0; k < 7; ++k)
      hn::Store(hn::Add(hn::GatherIndex(di, args->thresholds + (std::size_t{1} << kMant) * static_cast<std::size_t>(k), mant), eoff),
                di, tc + static_cast<std::size_t>(k) * L);
  }
  const auto d15 = RoundD<S>(df, hn::Mul(s, hn::Set(df, 1.5f)));
  const auto v05 = hn::Mul(s, hn::Set(df, 0.5f)), v2 = hn::Add(s, s), v4 = hn::Mul(s, hn::Set(df, 4.0f));
  const auto v3 = hn::Add(d15, d15), v6 = hn::Mul(d15, hn::Set(df, 4.0f));
  const hn::Vec<DF> cand[7] = {v05, s, d15, v2, v3, v4, v6};  // index order, k = 1..7
  for (int k = 0; k < 7; ++k) hn::Store(cand[k], df, cc + static_cast<std::size_t>(k) * L);
}

// Whether the search decides BF16 elements two at a time in 16-bit lanes (SumByConsts): BF16 values, thresholds
// and candidates are all values of BF16, so their top 16 bits order and select them exactly. Not on HWY_SCALAR
// (one lane), nor for F16 (an F16 value's float keeps bits below the top 16).
#undef FP4FORGE_SEARCH_PAIRS16
#if HWY_TARGET == HWY_SCALAR
#define FP4FORGE_SEARCH_PAIRS16 0
#else
#define FP4FORGE_SEARCH_PAIRS16 1
#endif
template <Src S>
inline constexpr bool kPairs16 = FP4FORGE_SEARCH_PAIRS16 && S == Src::BF16;

#if FP4FORGE_SEARCH_PAIRS16
// The top 16 bits of a's and b's lanes (BF16 values as floats: non-negative, so no saturation), in one vector of
// 16-bit lanes, in the order ReorderDemote2To gives and ZipLower / ZipUpper undo (a's lanes back by ZipLower).
template <class D16, class VI>
HWY_INLINE hn::Vec<D16> Pack16(D16 d16, VI a, VI b) {
  return hn::ReorderDemote2To(d16, hn::ShiftRight<16>(a), hn::ShiftRight<16>(b));
}
#endif

// One element per lane (as integer bits: 32-bit floats, or 16-bit BF16 tops) against its lane's seven increasing
// thresholds t[0..6]: the E2M1 index b = #{k : x > t_k} by binary search, three comparisons, with index b's
// candidate (c[b - 1], 0 for b = 0) narrowed down alongside. Returns the candidate; *b_out gets b where the caller
// asks (the records). Seven comparisons and a chain of seven selections cost about 1.5x as much on AVX-512, where
// comparisons into mask registers share one port.
template <class DI>
HWY_INLINE hn::Vec<DI> PickByThresholds(DI di, hn::Vec<DI> x, const hn::Vec<DI>* t, const hn::Vec<DI>* c,
                                        hn::Vec<DI>* b_out) {
  const auto m4 = hn::Gt(x, t[3]);  // b >= 4
  const auto lo_t = hn::IfThenElse(m4, t[4], t[0]), hi_t = hn::IfThenElse(m4, t[6], t[2]);
  const auto c0 = hn::IfThenElseZero(m4, c[3]), c1 = hn::IfThenElse(m4, c[4], c[0]);
  const auto c2 = hn::IfThenElse(m4, c[5], c[1]), c3 = hn::IfThenElse(m4, c[6], c[2]);
  const auto m2 = hn::Gt(x, hn::IfThenElse(m4, t[5], t[1]));  // b >= 4 + 2 or b >= 2
  const auto m1 = hn::Gt(x, hn::IfThenElse(m2, hi_t, lo_t));  // b's last bit
  if (b_out != nullptr)
    *b_out = hn::Or(hn::Or(hn::IfThenElseZero(m4, hn::Set(di, 4)), hn::IfThenElseZero(m2, hn::Set(di, 2))),
                    hn::IfThenElseZero(m1, hn::Set(di, 1)));
  return hn::IfThenElse(m1, hn::IfThenElse(m2, c3, c1), hn::IfThenElse(m2, c2, c0));
}

// The error sum of one vector of lanes under the constants StepConsts wrote: each element's E2M1 magnitude index
// b and its dq come from PickByThresholds. For BF16 (kPairs16) two elements are decided at once in 16-bit lanes,
// half the comparisons and selections; x16 holds them packed (Pack16 of elements 2i and 2i + 1 at x16[i * 2L]),
// or nullptr to pack them here.
// x_of(j) gives element j (|x|) of every lane's group; the powers are summed in the reference's order.
// With kExact (SearchArgs::exact_diff) the difference dq - |x| is a value of D, so the power table's index is its
// magnitude's top 16 bits; otherwise the difference is rounded to D first (MagIndex).
// With kRecord, element j's record goes to rec[j * L + lane]: the power's bits (a value of D: the low 13 bits of
// its float are zero) with P = b + [dq < |x|] in the low four (SearchBlockRanges reads them).
template <Src S, bool kRecord, bool kExact, class DF, class XOf>
HWY_INLINE hn::Vec<DF> SumByConsts(DF df, const std::int32_t* tc, const float* cc, const float* pow_table, XOf&& x_of,
                                   std::int32_t* rec = nullptr, const std::int16_t* x16 = nullptr) {
  const hn::RebindToSigned<DF> di;
  const hn::RebindToUnsigned<DF> du;
  const std::size_t L = hn::Lanes(df);
  hn::Vec<decltype(di)> t[7], cand[7];  // the candidates as bits: selected like the thresholds
  for (std::size_t k = 0; k < 7; ++k) {
    t[k] = hn::Load(di, tc + k * L);
    cand[k] = hn::BitCast(di, hn::Load(df, cc + k * L));
  }
  auto acc = hn::Zero(df);
  // Element j's power from dq (index b in b_bits' low bits, for the record).
  const auto add_term = [&](std::size_t j, hn::Vec<DF> x, hn::Vec<DF> dq, [[maybe_unused]] hn::Vec<decltype(di)> b_bits) {
    const auto diff = hn::Sub(dq, x);
    hn::Vec<decltype(di)> index;
    if constexpr (kExact) {
      index = hn::BitCast(di, hn::ShiftRight<16>(hn::BitCast(du, hn::Abs(diff))));
    } else {
      index = MagIndex<S>(df, diff);
    }
    const auto term = hn::GatherIndex(df, pow_table, index);
    if constexpr (kRecord) {
      // P = b + [dq < |x|]: diff's sign bit (dq = |x| gives +0 and a power of 0, which bounds nothing either way).
      hn::Store(hn::Add(hn::Or(hn::BitCast(di, term), b_bits), hn::BitCast(di, hn::ShiftRight<31>(hn::BitCast(du, diff)))),
                di, rec + j * L);
    }
    acc = hn::Add(acc, term);
  };
#if FP4FORGE_SEARCH_PAIRS16
  if constexpr (kPairs16<S>) {
    const hn::Repartition<std::int16_t, DF> d16;
    hn::Vec<decltype(d16)> t16[7], c16[7];
    for (std::size_t k = 0; k < 7; ++k) {
      t16[k] = Pack16(d16, t[k], t[k]);
      c16[k] = Pack16(d16, cand[k], cand[k]);
    }
    const auto z16 = hn::Zero(d16);
    for (std::size_t i = 0; i < 8; ++i) {
      const auto xa = x_of(2 * i), xb = x_of(2 * i + 1);
      const auto xh = x16 != nullptr ? hn::Load(d16, x16 + i * 2 * L) : Pack16(d16, hn::BitCast(di, xa), hn::BitCast(di, xb));
      auto b16 = z16;
      const auto dq = PickByThresholds(d16, xh, t16, c16, kRecord ? &b16 : nullptr);
      add_term(2 * i, xa, hn::BitCast(df, hn::ZipLower(di, z16, dq)), hn::ZipLower(di, b16, z16));
      add_term(2 * i + 1, xb, hn::BitCast(df, hn::ZipUpper(di, z16, dq)), hn::ZipUpper(di, b16, z16));
    }
  } else
#endif
  {
    (void)x16;
    for (std::size_t j = 0; j < 16; ++j) {
      const auto x = x_of(j);
      auto b = hn::Zero(di);
      const auto dq = PickByThresholds(di, hn::BitCast(di, x), t, cand, kRecord ? &b : nullptr);
      add_term(j, x, hn::BitCast(df, dq), b);
    }
  }
  return acc;
}

// Both at once, for a caller with nothing to overlap.
template <Src S, class DF, class XOf>
HWY_INLINE hn::Vec<DF> SumByThresholds(DF df, hn::Vec<DF> s, const nvfp4::detail::SearchArgs* args, XOf&& x_of,
                                       const std::int16_t* x16) {
  constexpr std::size_t kMax = hn::MaxLanes(df);
  HWY_ALIGN std::int32_t tc[7 * kMax];
  HWY_ALIGN float cc[7 * kMax];
  StepConsts<S>(df, s, args, tc, cc);
  return SumByConsts<S, false, false>(df, tc, cc, args->pow_table, x_of, nullptr, x16);
}

// One element's power flD(|flD(flD(q s) - |x|)|^norm) by the reference's own chain: the fl32 quotient (the
// corrected reciprocal r = fl32(1 / s) for a normal finite s, IEEE division with `divide`), clamp and flD, E2M1
// round-to-nearest-even as (y + C) - C with ulp(C) the grid's spacing (cast_to_fp4's inclusive/exclusive bounds
// are exactly its ties to even: 0.5 below 2, 1 below 4, 2 above), dq = flD(q * s), the power from the table.
template <Src S, class DF>
HWY_INLINE hn::Vec<DF> TermByDivision(DF df, hn::Vec<DF> x, hn::Vec<DF> s, hn::Vec<DF> r, bool divide,
                                      const float* table) {
  const auto z = divide ? hn::Div(x, s) : DivideExactly(x, s, r);  // fl32(|x| / s)
  const auto y = RoundD<S>(df, hn::Min(z, hn::Set(df, 6.0f)));      // clamp(flD(|x| / s), 6)
  const auto c = hn::IfThenElse(hn::Lt(y, hn::Set(df, 2.0f)), hn::Set(df, 0x1.8p22f),
                                hn::IfThenElse(hn::Lt(y, hn::Set(df, 4.0f)), hn::Set(df, 0x1.8p23f), hn::Set(df, 0x1.8p24f)));
  const auto q = hn::Sub(hn::Add(y, c), c);
  const auto dq = RoundD<S>(df, hn::Mul(q, s));  // flD(q * s)
  return hn::GatherIndex(df, table, MagIndex<S>(df, hn::Sub(dq, x)));
}

// Whether every lane of s lies in [lo, hi] (NaN lanes do not).
template <class DF>
HWY_INLINE bool AllWithin(DF df, hn::Vec<DF> s, float lo, float hi) {
  return hn::AllTrue(df, hn::And(hn::Ge(s, hn::Set(df, lo)), hn::Le(s, hn::Set(df, hi))));
}

// flD(m0 * p_i / 6) with 0 -> eps: step i's scale (the reference's shrinked_max_val / (bit_range / 2)).
template <Src S, class DF>
HWY_INLINE hn::Vec<DF> StepScale(DF df, hn::Vec<DF> m0, const nvfp4::detail::SearchArgs* args, int i) {
  const auto m = RoundD<S>(df, hn::Mul(m0, hn::Set(df, args->ps[i])));  // flD(m0 * p)
  const auto s = RoundD<S>(df, args->sixth_by_product ? hn::Mul(m, hn::Set(df, 1.0f / 6.0f))  // flD(m / 6)
                                                       : hn::Div(m, hn::Set(df, 6.0f)));
  return hn::IfThenElse(hn::Eq(s, hn::Zero(df)), hn::Set(df, args->eps), s);  // 0 -> eps
}

// The pruned search of one block, for a caller that needs only the best step of each group (no step mask):
// the same best step as every step run in full, with far fewer powers.
//
// Every kRangeStride-th step (and the last) runs in full for every group, recording each element's power t and
// P = k + [dq < |x|] (SumByConsts<kRecord>). E, the least of these errors, is one the group reaches. Between
// two recorded steps a and b, element j's power is at least min(t_a, t_b) wherever P_a = P_b, so the sum of those
// minima bounds from below the error of every step strictly between them (RangeBound); where the bound shows it
// above E, the steps of the range cannot be the group's best, nor tie with it, and are skipped. Where a quarter of
// the block's lanes or more keep a range, its middle step runs in full too, recorded, for every lane: it splits the
// range in two, each bounded by its own ends (tighter), and its error may lower E. The steps of the ranges then
// still kept run in full, as (group, step) pairs packed into lanes. Then the reference's strict-improvement scan
// over the errors run, the others counting as +inf: the first step of the least error.
//
// Why P_a = P_b bounds the element. Along the steps the scale only shrinks, so with k fixed dq = flD(v_k s) only
// shrinks and d = flD(dq - |x|) only falls: |d| falls while d >= 0 and rises once d < 0. When k steps up (to
// k + 1: the steps are at most 10 % apart, args->ranges, and E2M1's decision bounds at least 1/6 from the values
// they separate), d goes from < 0 (|x| is past v_k s) to > 0 (not yet at v_(k+1) s). So |d| has a minimum inside
// a range only where d crosses from >= 0 to < 0, and with sigma = [d >= 0] the number of such crossings is
// sigma_a + (k_b - k_a) - sigma_b = P_b - P_a. Without one, |d|'s least value over the range is at an end, and
// the power (flD of |d|, then the table, both non-decreasing: args->ranges) with it. (An end with d = 0 has power
// 0 and bounds nothing, whichever side of it sigma puts it.) This holds for any two recorded steps, so for the
// halves of a split range as for the whole.
//
// Why the bound prunes safely: the reference adds 16 terms t >= 0 in sequence, acc >= (sum t)(1 - u)^15 with
// u = 2^-24; the bound b adds at most 16 lower bounds in any order, b <= (sum t)(1 + u)^15. So acc >=
// b (1 - u)^15 / (1 + u)^15 > b (1 - 2^-18)(1 + u) >= fl32(b (1 - 2^-18)) (additions that land below float's
// normal range are exact, which only helps). A step is skipped when fl32(b (1 - 2^-18)) >= nextD(E), the next
// value of D above E; then acc >= nextD(E), flD(acc) >= nextD(E) > E.
//
// Returns false (nothing written) where a scale of the block lies outside the threshold table's range; the
// caller then runs the block in full.
constexpr int kRangeStride = 8;
// Record sets a block's pruned search may hold: its base steps and one middle step per range between them.
constexpr std::size_t RecordSets(int steps) { return 2 * (static_cast<std::size_t>(steps) / kRangeStride + 2); }

// RangeBound's sum of min(t_a, t_b) over the elements whose P agrees at both ends, per lane; ra and rb are two
// record sets (element j of every lane at r[j * L]).
template <class DF>
HWY_INLINE hn::Vec<DF> RangeBound(DF df, const std::int32_t* ra, const std::int32_t* rb) {
  const hn::RebindToSigned<DF> di;
  const std::size_t L = hn::Lanes(df);
  const auto low = hn::Set(di, 15), clear = hn::Set(di, ~15);
  auto lb = hn::Zero(df);
  for (std::size_t j = 0; j < 16; ++j) {
    const auto va = hn::Load(di, ra + j * L), vb = hn::Load(di, rb + j * L);
    const auto same = hn::Eq(hn::And(hn::Xor(va, vb), low), hn::Zero(di));
    lb = hn::Add(lb, hn::IfThenElseZero(hn::RebindMask(df, same), hn::BitCast(df, hn::And(hn::Min(va, vb), clear))));
  }
  return lb;
}

// The lane indices of an 8-bit mask's set bits, four bits each, lowest first (the rest 0).
constexpr std::array<std::uint32_t, 256> CompressNibbles() {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t m = 0; m < 256; ++m)
    for (std::uint32_t lane = 0, n = 0; lane < 8; ++lane)
      if ((m >> lane) & 1) t[m] |= lane << (4 * n++);
  return t;
}
static constexpr std::array<std::uint32_t, 256> kCompressNibbles = CompressNibbles();

// Stores the lanes of v that m selects at out[0..count) (out has room for a whole vector) and returns count.
// Branch-free: AVX-512's compress, elsewhere a permutation from kCompressNibbles (Highway 1.0.3's Compress for
// 8 lanes builds its 1 KB table on the stack at every call).
template <class DI>
HWY_INLINE std::size_t AppendSelected(DI di, hn::Vec<DI> v, hn::Mask<DI> m, std::int32_t* out) {
#if HWY_TARGET <= HWY_AVX3
  hn::StoreU(hn::Compress(v, m), di, out);
  return hn::CountTrue(di, m);
#else
  static_assert(hn::MaxLanes(DI()) <= 8, "8-bit masks");
  const hn::RebindToUnsigned<DI> du;
  std::uint8_t bits[8] = {};
  hn::StoreMaskBits(di, m, bits);
  const auto shifts = hn::ShiftLeft<2>(hn::Iota(du, 0));  // 4 * lane
  const auto idx = hn::And(hn::Set(du, kCompressNibbles[bits[0]]) >> shifts, hn::Set(du, 7u));
  hn::StoreU(hn::TableLookupLanes(v, hn::IndicesFromVec(di, hn::BitCast(di, idx))), di, out);
  return static_cast<std::size_t>(__builtin_popcount(bits[0]));
#endif
}

// nextD(E) per lane: the least value of D above E (+inf above max and for +inf; a NaN E, which finite sources
// never give, stays NaN, and then every step runs: no comparison with NaN prunes).
template <Src S, class DF>
HWY_INLINE hn::Vec<DF> NextUpD(DF df, hn::Vec<DF> e) {
  constexpr std::size_t kMax = hn::MaxLanes(df);
  HWY_ALIGN float ev[kMax];
  hn::Store(e, df, ev);
  for (std::size_t lane = 0; lane < hn::Lanes(df); ++lane) {
    if (std::isinf(ev[lane]) || std::isnan(ev[lane])) continue;
    if constexpr (S == Src::BF16) {
      ev[lane] = half::bf16_to_float(static_cast<std::uint16_t>(half::float_to_bf16(ev[lane]) + 1));
    } else {
      ev[lane] = half::f16_to_float(static_cast<std::uint16_t>(half::float_to_f16(ev[lane]) + 1));
    }
  }
  return hn::Load(df, ev);
}

template <Src S, bool kExact, class DF>
HWY_INLINE bool SearchBlockRanges(DF df, const float* xt, const std::int16_t* x16, hn::Vec<DF> m0,
                                  const nvfp4::detail::SearchArgs* args, float lo_s, float hi_s, float* st, float* errt,
                                  std::int32_t* recs, std::int32_t* pairs, float* out) {
  const hn::RebindToSigned<DF> di;
  constexpr std::size_t kMax = hn::MaxLanes(df);
  const std::size_t L = hn::Lanes(df);
  const int steps = args->steps;
  // The scale only shrinks along the steps (0 -> eps aside, which a block in range never meets): its two ends
  // decide whether the whole block is in the table's range.
  if (steps == 0 || !AllWithin(df, StepScale<S>(df, m0, args, 0), lo_s, hi_s) ||
      !AllWithin(df, StepScale<S>(df, m0, args, steps - 1), lo_s, hi_s))
    return false;
  const auto inf = hn::Set(df, std::numeric_limits<float>::infinity());
  for (int i = 0; i < steps; ++i) {
    hn::Store(StepScale<S>(df, m0, args, i), df, st + static_cast<std::size_t>(i) * L);
    hn::Store(inf, df, errt + static_cast<std::size_t>(i) * L);
  }
  const auto x_of = [&](std::size_t j) { return hn::Load(df, xt + j * L); };
  const auto rec = [&](std::size_t set) { return recs + set * 16 * L; };
  // Steps in full for every lane, recorded: run[n] into record set set0 + n, its error into errt, E per lane.
  // Each step's constants are computed one step ahead.
  HWY_ALIGN std::int32_t tc[2][7 * kMax];
  HWY_ALIGN float cc[2][7 * kMax];
  auto e = inf;
  const auto run_recorded = [&](const int* run, int n, std::size_t set0) {
    const auto consts_at = [&](int step, std::size_t slot) {
      StepConsts<S>(df, hn::Load(df, st + static_cast<std::size_t>(step) * L), args, tc[slot], cc[slot]);
    };
    if (n > 0) consts_at(run[0], 0);
    for (int q = 0; q < n; ++q) {
      const std::size_t slot = static_cast<std::size_t>(q) & 1;
      if (q + 1 < n) consts_at(run[q + 1], slot ^ 1);
      const auto err = RoundD<S>(df, hn::Abs(SumByConsts<S, true, kExact>(df, tc[slot], cc[slot], args->pow_table, x_of,
                                                                           rec(set0 + static_cast<std::size_t>(q)), x16)));
      hn::Store(err, df, errt + static_cast<std::size_t>(run[q]) * L);
      e = hn::Min(e, err);
    }
  };
  std::array<int, kMaxSearchSteps / kRangeStride + 2> base{}, mid{}, mids{};
  int nb = 0;
  for (int i = 0;; i += kRangeStride) {
    base[static_cast<std::size_t>(nb++)] = std::min(i, steps - 1);
    if (i >= steps - 1) break;
  }
  run_recorded(base.data(), nb, 0);
  // Level one: each range's bound under the base steps' E; a range a quarter of the lanes keep or more, and long
  // enough to split, has its middle step run (record set nb + q), which may lower E.
  const auto margin = hn::Set(df, 1.0f - 0x1p-18f);
  const auto kept = [&](hn::Vec<DF> lb, hn::Vec<DF> en) { return hn::Not(hn::Ge(hn::Mul(lb, margin), en)); };
  auto en = NextUpD<S>(df, e);
  HWY_ALIGN float lbs[(kMaxSearchSteps / kRangeStride + 2) * kMax];
  const std::size_t split_lanes = std::max<std::size_t>(1, L / 4);
  int nm = 0;
  for (int q = 0; q + 1 < nb; ++q) {
    const std::size_t uq = static_cast<std::size_t>(q);
    const int a = base[uq], b = base[uq + 1];
    mid[uq] = 0;
    if (b - a < 2) continue;
    const auto lb = RangeBound(df, rec(uq), rec(uq + 1));
    hn::Store(lb, df, lbs + uq * L);
    if (b - a >= 4 && hn::CountTrue(df, kept(lb, en)) >= split_lanes) {
      mid[uq] = (a + b) / 2;
      mids[static_cast<std::size_t>(nm++)] = mid[uq];
    }
  }
  if (nm > 0) {
    run_recorded(mids.data(), nm, static_cast<std::size_t>(nb));
    en = NextUpD<S>(df, e);
  }
  // Level two: the steps inside the ranges (or halves) no bound rules out, as flat indices i * L + lane.
  std::size_t np = 0;
  const auto collect = [&](int a, int b, hn::Mask<DF> keep) {
    if (b - a < 2 || hn::AllFalse(df, keep)) return;
    const auto keep_i = hn::RebindMask(di, keep);
    auto prev = hn::Load(df, st + static_cast<std::size_t>(a) * L);
    for (int i = a + 1; i < b; ++i) {
      // A step whose scale repeats the step before's has its error too, which cannot strictly improve on it.
      const auto cur = hn::Load(df, st + static_cast<std::size_t>(i) * L);
      const auto run = hn::And(keep_i, hn::RebindMask(di, hn::Ne(cur, prev)));
      prev = cur;
      const auto cells = hn::Add(hn::Iota(di, 0), hn::Set(di, i * static_cast<std::int32_t>(L)));
      np += AppendSelected(di, cells, run, pairs + np);
    }
  };
  for (int q = 0, m = 0; q + 1 < nb; ++q) {
    const std::size_t uq = static_cast<std::size_t>(q);
    const int a = base[uq], b = base[uq + 1];
    if (b - a < 2) continue;
    const auto whole = kept(hn::Load(df, lbs + uq * L), en);
    if (mid[uq] == 0) {
      collect(a, b, whole);
      continue;
    }
    const std::size_t sm = static_cast<std::size_t>(nb + m++);
    collect(a, mid[uq], hn::And(whole, kept(RangeBound(df, rec(uq), rec(sm)), en)));
    collect(mid[uq], b, hn::And(whole, kept(RangeBound(df, rec(sm), rec(uq + 1)), en)));
  }
  // The pairs in full, L at a time; each lane reads its group's elements by a lane permutation. Each vector's
  // constants are computed one vector ahead.
  if (np > 0)
    for (std::size_t t = 0; t < L; ++t) pairs[np + t] = pairs[0];  // padding: a pair run twice, written once
  HWY_ALIGN float pe[kMax];
  const auto pair_consts = [&](std::size_t p, std::size_t slot) {
    StepConsts<S>(df, hn::GatherIndex(df, st, hn::LoadU(di, pairs + p)), args, tc[slot], cc[slot]);
  };
  if (np > 0) pair_consts(0, 0);
  for (std::size_t p = 0, v = 0; p < np; p += L, ++v) {
    const std::size_t slot = v & 1;
    if (p + L < np) pair_consts(p + L, slot ^ 1);
    const auto idx = hn::IndicesFromVec(df, hn::And(hn::LoadU(di, pairs + p), hn::Set(di, static_cast<std::int32_t>(L - 1))));
    const auto acc = SumByConsts<S, false, kExact>(df, tc[slot], cc[slot], args->pow_table, [&](std::size_t j) {
      return hn::TableLookupLanes(hn::Load(df, xt + j * L), idx);
    });
    hn::Store(RoundD<S>(df, hn::Abs(acc)), df, pe);
    const std::size_t n = std::min(L, np - p);
    for (std::size_t t = 0; t < n; ++t) errt[static_cast<std::size_t>(pairs[p + t])] = pe[t];
  }
  // The reference's scan: best_error from finfo.max, strict improvement.
  auto best = hn::Set(df, args->max_d);
  auto besti = hn::Zero(di);
  for (int i = 0; i < steps; ++i) {
    const auto err = hn::Load(df, errt + static_cast<std::size_t>(i) * L);
    const auto imp = hn::Lt(err, best);
    best = hn::IfThenElse(imp, err, best);
    besti = hn::IfThenElse(hn::RebindMask(di, imp), hn::Set(di, i), besti);
  }
  hn::Store(RoundD<S>(df, hn::Mul(m0, hn::GatherIndex(df, args->ps, besti))), df, out);
  return true;
}

// A block's elements in pairs for SumByConsts (kPairs16): Pack16 of xt's rows 2i and 2i + 1 at x16[i * 2L].
template <class DF>
HWY_INLINE void PackBlock16(DF df, const float* xt, std::int16_t* x16) {
#if FP4FORGE_SEARCH_PAIRS16
  const hn::RebindToSigned<DF> di;
  const hn::Repartition<std::int16_t, DF> d16;
  const std::size_t L = hn::Lanes(df);
  for (std::size_t i = 0; i < 8; ++i)
    hn::Store(Pack16(d16, hn::BitCast(di, hn::Load(df, xt + 2 * i * L)), hn::BitCast(di, hn::Load(df, xt + (2 * i + 1) * L))), d16,
              x16 + i * 2 * L);
#else
  (void)df, (void)xt, (void)x16;
#endif
}

// Exposed for the test of the records (SearchPath::records): groups of BF16 magnitudes (as floats) at x[g * 16 + j]
// under scales s[g] (normal, in the threshold table's range; `groups` a multiple of 16), one step as the pruned
// search runs its recorded steps: element j's record at rec[g * 16 + j], the group's sum of powers at sums[g].
void SearchRecordsBf16(const float* x, const float* s, std::size_t groups, const nvfp4::detail::SearchArgs* args,
                       std::int32_t* rec, float* sums) {
  const hn::ScalableTag<float> df;
  constexpr std::size_t kMax = hn::MaxLanes(df);
  const std::size_t L = hn::Lanes(df);
  HWY_ALIGN float xt[16 * kMax];
  HWY_ALIGN std::int16_t x16[16 * kMax];
  HWY_ALIGN std::int32_t tc[7 * kMax];
  HWY_ALIGN float cc[7 * kMax];
  HWY_ALIGN std::int32_t rb[16 * kMax];
  HWY_ALIGN float sv[kMax];
  for (std::size_t g0 = 0; g0 < groups; g0 += L) {
    for (std::size_t lane = 0; lane < L; ++lane)
      for (std::size_t j = 0; j < 16; ++j) xt[j * L + lane] = x[(g0 + lane) * 16 + j];
    PackBlock16(df, xt, x16);
    StepConsts<Src::BF16>(df, hn::LoadU(df, s + g0), args, tc, cc);
    const auto x_of = [&](std::size_t j) { return hn::Load(df, xt + j * L); };
    hn::Store(args->exact_diff ? SumByConsts<Src::BF16, true, true>(df, tc, cc, args->pow_table, x_of, rb, x16)
                               : SumByConsts<Src::BF16, true, false>(df, tc, cc, args->pow_table, x_of, rb, x16),
              df, sv);
    for (std::size_t lane = 0; lane < L; ++lane) {
      sums[g0 + lane] = sv[lane];
      for (std::size_t j = 0; j < 16; ++j) rec[(g0 + lane) * 16 + j] = rb[j * L + lane];
    }
  }
}

template <Src S>
void SearchT(const std::uint16_t* src, std::uint64_t groups, const nvfp4::detail::SearchArgs* args,
             float* group_max, std::uint8_t* improved) {
  // The scales for which the threshold table holds (every threshold and every dq normal and finite in D once
  // shifted by the scale's exponent).
  const float lo_s = S == Src::BF16 ? 0x1p-100f : 0x1p-12f, hi_s = S == Src::BF16 ? 0x1p100f : 0x1p13f;
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  constexpr std::size_t kMax = hn::MaxLanes(df);
  const std::size_t L = hn::Lanes(df);
  HWY_ALIGN float xt[16 * kMax];  // xt[j * L + lane] = |x_j| of group `lane` of the block
  HWY_ALIGN std::int16_t x16[16 * kMax];  // with kPairs16: Pack16 of elements 2i and 2i + 1 at x16[i * 2L]
  HWY_ALIGN float out[kMax];
  const auto zero = hn::Zero(df);
  const auto expand = hn::Set(df, args->expand);
  // The pruned search's scratch, once per call: scales and errors per (step, lane), the pairs to run.
  const bool prune = !args->need_improved && args->thresholds != nullptr && args->ranges;
  const std::size_t cells = prune ? static_cast<std::size_t>(args->steps) * L : 0;
  const auto st = hwy::AllocateAligned<float>(cells + L);  // aligned: whole vectors load and store at i * L
  const auto errt = hwy::AllocateAligned<float>(cells + L);
  const auto pairs = hwy::AllocateAligned<std::int32_t>(cells + L);
  const auto recs = hwy::AllocateAligned<std::int32_t>(prune ? RecordSets(args->steps) * 16 * L : L);
  // Highway answers a failed allocation with null where new throws: throw as new does (util::run_guarded reports it).
  if (!st || !errt || !pairs || !recs) throw std::bad_alloc();
  for (std::uint64_t g0 = 0; g0 < groups; g0 += L) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(L, groups - g0));
    for (std::size_t lane = 0; lane < L; ++lane)
      for (std::size_t j = 0; j < 16; ++j) {
        const std::uint16_t b = lane < n ? static_cast<std::uint16_t>(src[(g0 + lane) * 16 + j] & 0x7FFF) : 0;
        xt[j * L + lane] = S == Src::BF16 ? half::bf16_to_float(b) : half::f16_to_float(b);
      }
    if constexpr (kPairs16<S>) PackBlock16(df, xt, x16);
    auto a = zero;
    for (std::size_t j = 0; j < 16; ++j) a = hn::Max(a, hn::Load(df, xt + j * L));
    const auto m0 = RoundD<S>(df, hn::Mul(a, expand));  // flD(a * expand)
    const bool pruned = prune && (S == Src::BF16 && args->exact_diff
                                      ? SearchBlockRanges<S, true>(df, xt, x16, m0, args, lo_s, hi_s, st.get(), errt.get(), recs.get(), pairs.get(), out)
                                      : SearchBlockRanges<S, false>(df, xt, x16, m0, args, lo_s, hi_s, st.get(), errt.get(), recs.get(), pairs.get(), out));
    if (pruned) {
      std::memcpy(group_max + g0, out, n * sizeof(float));
      continue;
    }
    auto best = hn::Set(df, args->max_d);
    auto besti = hn::Zero(di);
    for (int i = 0; i < args->steps; ++i) {
      const auto s = StepScale<S>(df, m0, args, i);
      hn::Vec<decltype(df)> acc;
      // The usual case, every scale of the block in the table's range: the threshold decisions.
      if (args->thresholds != nullptr && AllWithin(df, s, lo_s, hi_s)) {
        acc = SumByThresholds<S>(df, s, args, [&](std::size_t j) { return hn::Load(df, xt + j * L); }, x16);
      } else {
        // The corrected reciprocal quotient needs a normal, finite s; a step with another (a subnormal or an
        // infinite scale: groups of extreme magnitude) divides.
        const bool divide = !AllWithin(df, s, 0x1p-125f, 0x1p125f);
        const auto r = hn::Div(hn::Set(df, 1.0f), s);
        acc = zero;
        for (std::size_t j = 0; j < 16; ++j)
          acc = hn::Add(acc, TermByDivision<S>(df, hn::Load(df, xt + j * L), s, r, divide, args->pow_table));
      }
      const auto err = RoundD<S>(df, hn::Abs(acc));  // acc >= 0 (or NaN)
      const auto imp = hn::Lt(err, best);
      best = hn::IfThenElse(imp, err, best);
      besti = hn::IfThenElse(hn::RebindMask(di, imp), hn::Set(di, i), besti);
      if (!hn::AllFalse(df, imp)) improved[i] = 1;
    }
    // best_max_val: flD(m0 * p) of the best step (step 0, p = 1, when no step improved).
    const auto mb = RoundD<S>(df, hn::Mul(m0, hn::GatherIndex(df, args->ps, besti)));
    hn::Store(mb, df, out);
    std::memcpy(group_max + g0, out, n * sizeof(float));
  }
}

void SearchBf16(const std::uint16_t* src, std::uint64_t groups, const nvfp4::detail::SearchArgs* args,
                float* group_max, std::uint8_t* improved) {
  SearchT<Src::BF16>(src, groups, args, group_max, improved);
}

// Where the target has no exact F16 conversion this does nothing: SearchF16Native says so, and the caller
// takes the table path instead.
void SearchF16(const std::uint16_t* src, std::uint64_t groups, const nvfp4::detail::SearchArgs* args,
               float* group_max, std::uint8_t* improved) {
#if FP4FORGE_SEARCH_F16
  SearchT<Src::F16>(src, groups, args, group_max, improved);
#else
  (void)src, (void)groups, (void)args, (void)group_max, (void)improved;
#endif
}

bool SearchF16Native() { return FP4FORGE_SEARCH_F16 != 0; }

}  // namespace HWY_NAMESPACE
}  // namespace fp4forge::scheme_simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "codec/scheme_simd_table.h"

namespace fp4forge::scheme_simd {
namespace {
struct SearchEntry {
  std::int64_t target;
  nvfp4::detail::SearchKernel fn;
};
struct NativeEntry {
  std::int64_t target;
  bool (*fn)();
};
struct RecordsEntry {
  std::int64_t target;
  nvfp4::detail::RecordsKernel fn;
};
}  // namespace

HWY_EXPORT(SearchBf16);
HWY_EXPORT(SearchF16);
HWY_EXPORT(SearchF16Native);
HWY_EXPORT(SearchQuotients);

void search_bf16_dispatch(const std::uint16_t* src, std::uint64_t groups, const nvfp4::detail::SearchArgs* args,
                          float* group_max, std::uint8_t* improved) {
  HWY_DYNAMIC_DISPATCH(SearchBf16)(src, groups, args, group_max, improved);
}

void search_quotients(const float* x, const float* s, std::size_t n, float* out) {
  HWY_DYNAMIC_DISPATCH(SearchQuotients)(x, s, n, out);
}

void search_f16_dispatch(const std::uint16_t* src, std::uint64_t groups, const nvfp4::detail::SearchArgs* args,
                         float* group_max, std::uint8_t* improved) {
  HWY_DYNAMIC_DISPATCH(SearchF16)(src, groups, args, group_max, improved);
}

bool search_f16_native_dispatch() { return HWY_DYNAMIC_DISPATCH(SearchF16Native)(); }

std::vector<nvfp4::detail::SearchPath> search_bf16_paths() {
  const std::initializer_list<SearchEntry> bf16 = {FP4FORGE_SCHEME_TARGETS(SearchBf16)};
  const std::initializer_list<SearchEntry> f16 = {FP4FORGE_SCHEME_TARGETS(SearchF16)};
  const std::initializer_list<NativeEntry> native = {FP4FORGE_SCHEME_TARGETS(SearchF16Native)};
  const std::initializer_list<RecordsEntry> records = {FP4FORGE_SCHEME_TARGETS(SearchRecordsBf16)};
  std::vector<nvfp4::detail::SearchPath> out;
  const std::int64_t have = hwy::SupportedTargets();
  auto b = bf16.begin();
  auto f = f16.begin();
  auto n = native.begin();
  auto r = records.begin();
  for (; b != bf16.end(); ++b, ++f, ++n, ++r)
    if (have & b->target)
      out.push_back(nvfp4::detail::SearchPath{hwy::TargetName(b->target), b->fn, n->fn() ? f->fn : nullptr, r->fn});
  return out;
}

}  // namespace fp4forge::scheme_simd

namespace fp4forge::nvfp4::detail {

const std::vector<SearchPath>& search_simd_paths() {
  static const std::vector<SearchPath> paths = scheme_simd::search_bf16_paths();
  return paths;
}

void search_bf16_dispatched(const std::uint16_t* src, std::uint64_t groups, const SearchArgs* args,
                            float* group_max, std::uint8_t* improved) {
  scheme_simd::search_bf16_dispatch(src, groups, args, group_max, improved);
}

void search_f16_dispatched(const std::uint16_t* src, std::uint64_t groups, const SearchArgs* args, float* group_max,
                           std::uint8_t* improved) {
  scheme_simd::search_f16_dispatch(src, groups, args, group_max, improved);
}

bool search_f16_native() { return scheme_simd::search_f16_native_dispatch(); }

void search_quotients_dispatched(const float* x, const float* s, std::size_t n, float* out) {
  scheme_simd::search_quotients(x, s, n, out);
}

}  // namespace fp4forge::nvfp4::detail
#endif  // HWY_ONCE
