#pragma once
// Internal interface between fp8_dequant.cc (the public expansion API) and the per-target expansion loops of
// fp8_dequant_simd.cc (Highway's foreach_target and dynamic dispatch, like every codec kernel).
#include <cstdint>
#include <string>
#include <vector>

namespace fp4forge::fp8::detail {

/** e4m3(code) * s rounded to bf16 for `n` codes sharing one float32 scale; false when a result is not finite. */
using RunFn = bool (*)(const std::uint8_t* codes, std::uint64_t n, float s, std::uint16_t* out);

struct RunPath {
  std::string name;  ///< hwy::TargetName of the target: "AVX3_DL", "AVX2", ..., "EMU128"
  RunFn fn;
};

/** The Highway targets compiled in and supported by this CPU, worst first, best last. */
const std::vector<RunPath>& run_paths();

}  // namespace fp4forge::fp8::detail
