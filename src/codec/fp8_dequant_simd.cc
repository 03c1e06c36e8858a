// The FP8 -> bf16 expansion loop (fp8_dequant.h) compiled once per Highway target and chosen at run time, the
// same dispatch as every other codec kernel (scheme_simd_table.h): the loop is written as plain C++ with masks
// instead of branches, so each target's compilation vectorizes it for its own vector width.
#include <bit>
#include <cstdint>
#include <vector>

#include "codec/fp8_dequant_internal.h"

// The AVX-512 targets every codec kernel compiles (nvfp4_simd.cc says why AVX3_DL is asked for explicitly).
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "codec/fp8_dequant_simd.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep

#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace fp4forge::fp8_simd {
namespace HWY_NAMESPACE {

/** e4m3(code) * s rounded to bf16, for `n` codes sharing one float32 scale (F32 or BF16 scales): branch-free
 * integer decode (normal: exponent rebias 7 -> 127; subnormal: man * 2^-9; 0x7F / 0xFF: NaN). Returns false when a
 * result is NaN or infinite. Bit-identical to fp8::dequant_bf16. */
bool Run(const std::uint8_t* codes, std::uint64_t n, float s, std::uint16_t* out) {
  std::uint32_t bad = 0;
  for (std::uint64_t j = 0; j < n; ++j) {
    const std::uint32_t c = codes[j], mag = c & 0x7Fu, e = mag >> 3, m = mag & 7u;
    const std::uint32_t nb = ((e + 120u) << 23) | (m << 20);
    const std::uint32_t sb = std::bit_cast<std::uint32_t>(static_cast<float>(static_cast<std::int32_t>(m)) * 0x1p-9f);
    const std::uint32_t is_norm = 0u - static_cast<std::uint32_t>(e != 0);
    const std::uint32_t is_nan = 0u - static_cast<std::uint32_t>(mag == 0x7Fu);
    std::uint32_t vb = (nb & is_norm) | (sb & ~is_norm) | ((c & 0x80u) << 24);
    vb = (vb & ~is_nan) | (0x7FC00000u & is_nan);
    const std::uint32_t u = std::bit_cast<std::uint32_t>(std::bit_cast<float>(vb) * s);  // fl32(e4m3 * s)
    const std::uint32_t a = u & 0x7FFFFFFFu;
    bad |= static_cast<std::uint32_t>(a >= 0x7F800000u);
    const std::uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;  // bf16 RNE (half.h float_to_bf16)
    const std::uint32_t quiet = (u >> 16) | 0x0040u;
    const std::uint32_t nanm = 0u - static_cast<std::uint32_t>(a > 0x7F800000u);
    out[j] = static_cast<std::uint16_t>((quiet & nanm) | (rounded & ~nanm));
  }
  return bad == 0;
}

}  // namespace HWY_NAMESPACE
}  // namespace fp4forge::fp8_simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "codec/scheme_simd_table.h"

namespace fp4forge::fp8_simd {
namespace {
struct Entry {
  std::int64_t target;
  fp8::detail::RunFn fn;
};
}  // namespace
}  // namespace fp4forge::fp8_simd

namespace fp4forge::fp8::detail {

const std::vector<RunPath>& run_paths() {
  static const std::vector<RunPath> paths = [] {
    using namespace fp4forge::fp8_simd;  // NOLINT: the per-target namespaces the table names
    const std::initializer_list<fp8_simd::Entry> table = {FP4FORGE_SCHEME_TARGETS(Run)};
    std::vector<RunPath> v;
    const std::int64_t have = hwy::SupportedTargets();
    for (const auto& e : table)
      if (have & e.target) v.push_back({hwy::TargetName(e.target), e.fn});
    return std::vector<RunPath>(v.rbegin(), v.rend());  // worst first, best last
  }();
  return paths;
}

}  // namespace fp4forge::fp8::detail
#endif  // HWY_ONCE
