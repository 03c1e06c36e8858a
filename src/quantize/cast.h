#pragma once
// The quantize run's lossless casts of packed FP4 source weights (codec/mxfp4_cast.h), apart from the runner: which
// scale groups cast, from their scales, and a cast unit's rows. Internal to the quantize module (quantize/run.cc).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fp4forge/core/error.h"
#include "fp4forge/quantize/plan.h"
#include "fp4forge/safetensors/checkpoint.h"
#include "fp4forge/util/thread_pool.h"

namespace fp4forge::quant::detail {

struct CastDecision {
  std::vector<std::optional<int>> shift;  ///< per scale group: the cast shift m of a group that casts, else nullopt
  std::uint64_t units = 0;                ///< units of the groups that cast
  std::vector<std::string> refused;       ///< groups with a packed FP4 member that do not cast: "<group>: <why>"
};

/** Which groups of `plan` cast (QuantPlan::lossless_casts; their scheme's SchemeTraits::e2m1_cast): every member a
 * whole 2-D packed FP4 weight whose scales shift() accepts. The scales are read on `pool`. */
CastDecision decide_casts(const Checkpoint& ck, const QuantPlan& plan, ThreadPool& pool);

/** Rows [r0, r1) of cast unit `u` under shift `m`: its payload bytes and scale bytes in the target scheme's layout
 * (rows * cols / 2 and rows * cols / group), and the scale bytes of one row. */
Status cast_unit_rows(const Checkpoint& ck, const QuantPlan& plan, const QuantUnit& u, int m, std::uint64_t r0,
                      std::uint64_t r1, std::vector<std::byte>& payload, std::vector<std::byte>& scale,
                      std::uint64_t& scale_row_bytes);

}  // namespace fp4forge::quant::detail
