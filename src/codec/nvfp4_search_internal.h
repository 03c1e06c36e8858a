#pragma once
// Internal interface between nvfp4_search.cc (the public search API, the reference and table paths) and
// the Highway search kernels of nvfp4_search_simd.cc (BF16 sources: the dtype of almost every release).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace fp4forge::nvfp4::detail {

/** What a search kernel needs besides the data: the per-step constants the reference computes. */
struct SearchArgs {
  int steps = 0;                      ///< steps to run
  float expand = 1.0f;                ///< fl32(expand)
  const float* ps = nullptr;          ///< ps[i] = fl32(1 - i / grid), `steps` entries
  float eps = 0.0f;                   ///< finfo(D).eps
  float max_d = 0.0f;                 ///< finfo(D).max
  const float* pow_table = nullptr;   ///< flD(|d|^norm_D) for every 15-bit magnitude of D (0x8000 entries)
};

/** Searches `groups` groups of 16 BF16 values at `src` (contiguous): writes each group's searched max
 * (flD(flD(a * expand) * ps[best step])) to group_max[groups] and sets improved[i] = 1 for every step i
 * at which some group improved. */
using SearchKernel = void (*)(const std::uint16_t* src, std::uint64_t groups, const SearchArgs* args,
                              float* group_max, std::uint8_t* improved);

struct SearchPath {
  std::string name;  ///< hwy::TargetName of the target
  SearchKernel fn;
};

/** The Highway targets of the BF16 search compiled in and supported by this CPU, best first. */
const std::vector<SearchPath>& search_simd_paths();
/** HWY_DYNAMIC_DISPATCH of the BF16 search. */
void search_bf16_dispatched(const std::uint16_t* src, std::uint64_t groups, const SearchArgs* args,
                            float* group_max, std::uint8_t* improved);

/** The dispatched kernel's quotient x[i] / s[i] (as the search computes it; n a multiple of 16): the
 * exhaustive test of its division. */
void search_quotients_dispatched(const float* x, const float* s, std::size_t n, float* out);

}  // namespace fp4forge::nvfp4::detail
