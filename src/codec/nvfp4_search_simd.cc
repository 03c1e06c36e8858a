// The NVFP4A16 searched observers' Highway kernel for BF16 sources (nvfp4_search.h), one compilation per
// x86 target, chosen at run time. Lanes are groups: a block of Lanes(df) groups of 16 is transposed once
// (vector j holds element j of every group), then every step runs the reference's arithmetic on all
// lanes at once, so each lane sums its 16 powers in the reference's order (e0 + e1 + ... + e15).
// Per element and step: the fl32 quotient (on FMA targets a reciprocal and one FMA correction, which gives
// the correctly rounded quotient wherever it decides anything: DivideExactly below; IEEE division
// elsewhere), flD rounding (RoundMag, the shared helper), E2M1 round-to-nearest-even as (y + C) - C with
// ulp(C) the grid's spacing (cast_to_fp4's inclusive/exclusive bounds are exactly its ties to even), the
// power looked up in the reference's own table. The only float product that feeds an add is the FMA
// correction, written as one; GCC would otherwise contract a product and an add into an FMA that rounds once.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "codec/nvfp4_search_internal.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "codec/nvfp4_search_simd.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

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

template <Src S>
void SearchT(const std::uint16_t* src, std::uint64_t groups, const nvfp4::detail::SearchArgs* args,
             float* group_max, std::uint8_t* improved) {
  // The threshold table's mantissa bits, and the scales for which it holds (every threshold and every
  // dq normal and finite in D once shifted by the scale's exponent).
  constexpr int kMant = S == Src::BF16 ? 7 : 10;
  const float lo_s = S == Src::BF16 ? 0x1p-100f : 0x1p-12f, hi_s = S == Src::BF16 ? 0x1p100f : 0x1p13f;
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  constexpr std::size_t kMax = hn::MaxLanes(df);
  const std::size_t L = hn::Lanes(df);
  HWY_ALIGN float xt[16 * kMax];  // xt[j * L + lane] = |x_j| of group `lane` of the block
  HWY_ALIGN float out[kMax];
  const auto six = hn::Set(df, 6.0f), two = hn::Set(df, 2.0f), four = hn::Set(df, 4.0f);
  const auto zero = hn::Zero(df);
  // Adding C and subtracting it again rounds y >= 0 to a multiple of ulp(C): 0.5, 1 and 2.
  const auto c05 = hn::Set(df, 0x1.8p22f), c1 = hn::Set(df, 0x1.8p23f), c2 = hn::Set(df, 0x1.8p24f);
  const auto eps = hn::Set(df, args->eps), expand = hn::Set(df, args->expand);
  const float* table = args->pow_table;
  for (std::uint64_t g0 = 0; g0 < groups; g0 += L) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(L, groups - g0));
    for (std::size_t lane = 0; lane < L; ++lane)
      for (std::size_t j = 0; j < 16; ++j) {
        const std::uint16_t b = lane < n ? static_cast<std::uint16_t>(src[(g0 + lane) * 16 + j] & 0x7FFF) : 0;
        xt[j * L + lane] = S == Src::BF16 ? half::bf16_to_float(b) : half::f16_to_float(b);
      }
    auto a = zero;
    for (std::size_t j = 0; j < 16; ++j) a = hn::Max(a, hn::Load(df, xt + j * L));
    const auto m0 = RoundD<S>(df, hn::Mul(a, expand));  // flD(a * expand)
    auto best = hn::Set(df, args->max_d);
    auto besti = hn::Zero(di);
    for (int i = 0; i < args->steps; ++i) {
      const auto m = RoundD<S>(df, hn::Mul(m0, hn::Set(df, args->ps[i])));  // flD(m0 * p)
      auto s = RoundD<S>(df, hn::Div(m, six));                             // flD(m / 6)
      s = hn::IfThenElse(hn::Eq(s, zero), eps, s);                                   // 0 -> eps
      auto acc = zero;
      // The usual case: every scale of the block in [2^-100, 2^100]. Each element's E2M1 magnitude is decided
      // by comparing its bits with the seven thresholds of its group's scale (args->thresholds: the exact
      // bounds of the reference's decision for s = 1.m, shifted by s's exponent: every quantity in the chain
      // scales exactly by powers of two in the normal range), and dq = flD(q * s) is one of eight values
      // computed once per step: 0, s/2, s, 2s, 4s exactly, flD(1.5 s) and its doubles.
      if (args->thresholds != nullptr &&
          hn::AllTrue(df, hn::And(hn::Ge(s, hn::Set(df, lo_s)), hn::Le(s, hn::Set(df, hi_s))))) {
        const auto sb = hn::BitCast(di, s);
        const auto mant = hn::And(hn::ShiftRight<23 - kMant>(sb), hn::Set(di, (1 << kMant) - 1));
        const auto eoff = hn::Sub(hn::And(sb, hn::Set(di, 0x7F800000)), hn::Set(di, 127 << 23));
        hn::Vec<decltype(di)> t[7];
        for (int k = 0; k < 7; ++k)
          t[k] = hn::Add(hn::GatherIndex(di, args->thresholds + (std::size_t{1} << kMant) * static_cast<std::size_t>(k), mant), eoff);
        const auto d15 = RoundD<S>(df, hn::Mul(s, hn::Set(df, 1.5f)));
        const auto v05 = hn::Mul(s, hn::Set(df, 0.5f)), v2 = hn::Add(s, s), v4 = hn::Mul(s, four);
        const auto v3 = hn::Add(d15, d15), v6 = hn::Mul(d15, four);
        for (std::size_t j = 0; j < 16; ++j) {
          const auto x = hn::Load(df, xt + j * L);
          const auto xb = hn::BitCast(di, x);
          auto dq = zero;
          dq = hn::IfThenElse(hn::RebindMask(df, hn::Gt(xb, t[0])), v05, dq);
          dq = hn::IfThenElse(hn::RebindMask(df, hn::Gt(xb, t[1])), s, dq);
          dq = hn::IfThenElse(hn::RebindMask(df, hn::Gt(xb, t[2])), d15, dq);
          dq = hn::IfThenElse(hn::RebindMask(df, hn::Gt(xb, t[3])), v2, dq);
          dq = hn::IfThenElse(hn::RebindMask(df, hn::Gt(xb, t[4])), v3, dq);
          dq = hn::IfThenElse(hn::RebindMask(df, hn::Gt(xb, t[5])), v4, dq);
          dq = hn::IfThenElse(hn::RebindMask(df, hn::Gt(xb, t[6])), v6, dq);
          acc = hn::Add(acc, hn::GatherIndex(df, table, MagIndex<S>(df, hn::Sub(dq, x))));
        }
      } else {
      // The corrected reciprocal quotient needs a normal, finite s; a step with another (a subnormal or an
      // infinite scale: groups of extreme magnitude) divides.
      const bool divide = !hn::AllTrue(df, hn::And(hn::Ge(s, hn::Set(df, 0x1p-125f)), hn::Le(s, hn::Set(df, 0x1p125f))));
      const auto r = hn::Div(hn::Set(df, 1.0f), s);
      for (std::size_t j = 0; j < 16; ++j) {
        const auto x = hn::Load(df, xt + j * L);
        const auto z = divide ? hn::Div(x, s) : DivideExactly(x, s, r);            // fl32(|x| / s)
        const auto y = RoundD<S>(df, hn::Min(z, six));                    // clamp(flD(|x| / s), 6)
        // E2M1 RNE: spacing 0.5 below 2, 1 below 4, 2 above (cast_to_fp4's bounds are its ties to even),
        // as (y + C) - C with ulp(C) the spacing: the float addition rounds to nearest even.
        const auto c = hn::IfThenElse(hn::Lt(y, two), c05, hn::IfThenElse(hn::Lt(y, four), c1, c2));
        const auto q = hn::Sub(hn::Add(y, c), c);
        const auto dq = RoundD<S>(df, hn::Mul(q, s));  // flD(q * s)
        acc = hn::Add(acc, hn::GatherIndex(df, table, MagIndex<S>(df, hn::Sub(dq, x))));  // + flD(|flD(dq - |x|)|^norm)
      }
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
  std::vector<nvfp4::detail::SearchPath> out;
  const std::int64_t have = hwy::SupportedTargets();
  auto b = bf16.begin();
  auto f = f16.begin();
  auto n = native.begin();
  for (; b != bf16.end(); ++b, ++f, ++n)
    if (have & b->target)
      out.push_back(nvfp4::detail::SearchPath{hwy::TargetName(b->target), b->fn, n->fn() ? f->fn : nullptr});
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
