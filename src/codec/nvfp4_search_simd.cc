// The NVFP4A16 searched observers' Highway kernel for BF16 sources (nvfp4_search.h), one compilation per
// x86 target, chosen at run time. Lanes are groups: a block of Lanes(df) groups of 16 is transposed once
// (vector j holds element j of every group), then every step runs the reference's arithmetic on all
// lanes at once, so each lane sums its 16 powers in the reference's order (e0 + e1 + ... + e15).
// Per element and step: fl32 division (IEEE, as the reference), flD rounding (RoundMag, the shared
// helper), E2M1 RNE as Round(y * 2^k) / 2^k (exact: power-of-two scaling; ties to even are
// cast_to_fp4's inclusive/exclusive bounds), the power looked up in the reference's own table.
// No float product feeds an add (GCC would contract it into an FMA that rounds once).
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

void SearchBf16(const std::uint16_t* src, std::uint64_t groups, const nvfp4::detail::SearchArgs* args,
                float* group_max, std::uint8_t* improved) {
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::RebindToUnsigned<decltype(df)> du;
  constexpr std::size_t kMax = hn::MaxLanes(df);
  const std::size_t L = hn::Lanes(df);
  HWY_ALIGN float xt[16 * kMax];  // xt[j * L + lane] = |x_j| of group `lane` of the block
  HWY_ALIGN float out[kMax];
  const auto six = hn::Set(df, 6.0f), two = hn::Set(df, 2.0f), four = hn::Set(df, 4.0f);
  const auto half = hn::Set(df, 0.5f), one = hn::Set(df, 1.0f), zero = hn::Zero(df);
  const auto eps = hn::Set(df, args->eps), expand = hn::Set(df, args->expand);
  const float* table = args->pow_table;
  for (std::uint64_t g0 = 0; g0 < groups; g0 += L) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(L, groups - g0));
    for (std::size_t lane = 0; lane < L; ++lane)
      for (std::size_t j = 0; j < 16; ++j) {
        const std::uint16_t b = lane < n ? static_cast<std::uint16_t>(src[(g0 + lane) * 16 + j] & 0x7FFF) : 0;
        xt[j * L + lane] = half::bf16_to_float(b);
      }
    auto a = zero;
    for (std::size_t j = 0; j < 16; ++j) a = hn::Max(a, hn::Load(df, xt + j * L));
    const auto m0 = RoundMag<Src::BF16>(df, hn::Mul(a, expand));  // flD(a * expand)
    auto best = hn::Set(df, args->max_d);
    auto besti = hn::Zero(di);
    for (int i = 0; i < args->steps; ++i) {
      const auto m = RoundMag<Src::BF16>(df, hn::Mul(m0, hn::Set(df, args->ps[i])));  // flD(m0 * p)
      auto s = RoundMag<Src::BF16>(df, hn::Div(m, six));                             // flD(m / 6)
      s = hn::IfThenElse(hn::Eq(s, zero), eps, s);                                   // 0 -> eps
      auto acc = zero;
      for (std::size_t j = 0; j < 16; ++j) {
        const auto x = hn::Load(df, xt + j * L);
        const auto y = RoundMag<Src::BF16>(df, hn::Min(hn::Div(x, s), six));  // clamp(flD(|x| / s), 6)
        // E2M1 RNE: spacing 0.5 below 2, 1 below 4, 2 above (cast_to_fp4's bounds are its ties to even).
        const auto lt2 = hn::Lt(y, two), lt4 = hn::Lt(y, four);
        const auto inv = hn::IfThenElse(lt2, two, hn::IfThenElse(lt4, one, half));
        const auto sp = hn::IfThenElse(lt2, half, hn::IfThenElse(lt4, one, two));
        const auto q = hn::Mul(hn::Round(hn::Mul(y, inv)), sp);
        const auto dq = RoundMag<Src::BF16>(df, hn::Mul(q, s));            // flD(q * s)
        const auto d = hn::Abs(RoundMag<Src::BF16>(df, hn::Sub(dq, x)));    // |flD(dq - |x|)|
        const auto idx = hn::BitCast(di, hn::ShiftRight<16>(hn::BitCast(du, d)));
        acc = hn::Add(acc, hn::GatherIndex(df, table, idx));                // + flD(|d|^norm)
      }
      const auto err = RoundMag<Src::BF16>(df, hn::Abs(acc));  // acc >= 0 (or NaN)
      const auto imp = hn::Lt(err, best);
      best = hn::IfThenElse(imp, err, best);
      besti = hn::IfThenElse(hn::RebindMask(di, imp), hn::Set(di, i), besti);
      if (!hn::AllFalse(df, imp)) improved[i] = 1;
    }
    // best_max_val: flD(m0 * p) of the best step (step 0, p = 1, when no step improved).
    const auto mb = RoundMag<Src::BF16>(df, hn::Mul(m0, hn::GatherIndex(df, args->ps, besti)));
    hn::Store(mb, df, out);
    std::memcpy(group_max + g0, out, n * sizeof(float));
  }
}

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
}  // namespace

HWY_EXPORT(SearchBf16);

void search_bf16_dispatch(const std::uint16_t* src, std::uint64_t groups, const nvfp4::detail::SearchArgs* args,
                          float* group_max, std::uint8_t* improved) {
  HWY_DYNAMIC_DISPATCH(SearchBf16)(src, groups, args, group_max, improved);
}

std::vector<nvfp4::detail::SearchPath> search_bf16_paths() {
  const std::initializer_list<SearchEntry> compiled = {FP4FORGE_SCHEME_TARGETS(SearchBf16)};
  std::vector<nvfp4::detail::SearchPath> out;
  const std::int64_t have = hwy::SupportedTargets();
  for (const SearchEntry& e : compiled)
    if (have & e.target) out.push_back(nvfp4::detail::SearchPath{hwy::TargetName(e.target), e.fn});
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

}  // namespace fp4forge::nvfp4::detail
#endif  // HWY_ONCE
