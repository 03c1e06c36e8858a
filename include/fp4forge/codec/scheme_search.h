#pragma once
/**
 * Searched observers (codec/observer.h) for every scheme that takes one, through the scheme table
 * (SchemeTraits::search_rows): NVFP4A16 (nvfp4_search.h, its own fast paths) and the group schemes
 * MXFP4A16 (groups of 32, E8M0 scales) and W4A16 (groups of 128, INT4), whose search is here.
 *
 * llm-compressor's `_grid_search_eager` over compressed-tensors' `calculate_qparams` / `fake_quantize`
 * (observers/mse_quant.py; docs/schemes.md "Observers"), per group of G values in the weight dtype D:
 *   a = max|w|, m0 = flD(a * expand); for step i: m = flD(m0 * fl32(1 - i/grid)), s = the scheme's scale
 *   of a group whose max is m (W4A16 flD(m / 7.5), 0 -> finfo(D).eps; MXFP4 the E8M0 power of two),
 *   fq(w) = flD(dequant(quant(w, s))), err = flD(torch_cpu_sum(flD(|flD(fq(w) - w)|^norm_D)));
 *   keep m when err < best (strict); patience ends the whole tensor's search.
 * The sum is torch's CPU reduction (ATen cascade_sum) in its order on an AVX512 host: the order decides
 * ties of F32 errors, where upstream's CPU and CUDA runs differ (docs/schemes.md says which one matches).
 */
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "fp4forge/codec/nvfp4.h"
#include "fp4forge/codec/observer.h"
#include "fp4forge/codec/scheme.h"
#include "fp4forge/core/error.h"

namespace fp4forge {

class ThreadPool;

/**
 * torch.sum over the contiguous last dimension of a D tensor on the CPU, for n terms already rounded to D
 * (as float): ATen SumKernel.cpp `cascade_sum` with a float accumulator on a host whose ATen CPU capability
 * is AVX512 (16 float lanes; 32 BF16/F16 values per vector load, the two halves added lane by lane). Rows
 * shorter than one vector take `row_sum`'s scalar cascade (four interleaved partial sums).
 */
float torch_cpu_sum(const float* terms, std::size_t n, DType src) noexcept;

/** The search of W4A16 / MXFP4A16 (the table's search_rows of those rows): rows [r0, r1) of `w`, `steps`
 * steps; writes each group's searched max to group_max_out[(r1 - r0) * K/G] and ORs into `improved` the
 * steps at which some group improved. The encoder's refusals (dtype, K % G, NaN/Inf, MXFP4 scale overflow). */
Status w4a16_search_rows(const nvfp4::WeightView& w, const SearchSpec& spec, int steps, std::uint64_t r0,
                         std::uint64_t r1, float* group_max_out, StepMask* improved, std::string_view name);
Status mxfp4_search_rows(const nvfp4::WeightView& w, const SearchSpec& spec, int steps, std::uint64_t r0,
                         std::uint64_t r1, float* group_max_out, StepMask* improved, std::string_view name);

/**
 * The searched maxima of a whole tensor with scheme `s` (rows * K/search_cols values): its search_rows over
 * every row (split over `pool` when given), then again up to the early stop when patience ended upstream's
 * search before the last step. USAGE when the scheme takes no searched observer.
 */
Result<std::vector<float>> searched_group_maxima(QuantScheme s, const nvfp4::WeightView& w, const SearchSpec& spec,
                                                 std::string_view name, ThreadPool* pool = nullptr);

}  // namespace fp4forge
