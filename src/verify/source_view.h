#pragma once
// verify --against: the source of a quantized module as a 2-D weight (a plain `.weight`, one expert's part of a
// fused 3-D tensor, an FP8 weight expanded to bf16 on demand). Internal to the verify module.
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "verify/internal.h"

namespace fp4forge::verify_internal {

/** A 2-D source weight: a plain `.weight`, or one expert's part of a fused 3-D tensor. */
struct SourceView {
  const TensorRef* tensor = nullptr;
  std::string label;           // "name" or "name[e, rows a:b]"
  DType dtype = DType::BF16;
  std::uint64_t rows = 0, cols = 0;
  const std::byte* data = nullptr;  // contiguous row-major [rows, cols] (into the mmap, or `owned`)
  std::vector<std::byte> owned;     // transposed copy when the family layout needs it
  const Fp8Weight* fp8 = nullptr;   // an FP8 source weight: expanded to bf16 into `owned` by expand()
  MatrixSlice slice;                // the module's matrix inside `fp8`
};

/** Bytes of one element of a whole-byte dtype (the source dtypes). */
inline std::size_t elem_size(DType t) { return dtype_bits(t) / 8; }
/** Frees an expanded view. */
void unexpand(SourceView& v);
/** An FP8 source view's bf16 expansion, made just before its comparison (so memory holds one job's), in row
 * chunks on the pool; the first chunk's error in row order is the one reported, as a serial expansion would. */
Status expand(const Checkpoint& src, SourceView& v, ThreadPool& pool);
/** Resolves the source of quantized module `m` ([n, k]): a plain `.weight`, or one expert's part of a fused
 * 3-D tensor (model/experts.h decides the layout). Error text on failure; `undecided` is set when the
 * source's fused layout cannot be decided (a warning: the module could not be checked). */
std::optional<std::string> resolve_source(const Checkpoint& src, const Fp8Source* fp8,
                                          std::span<const ExpertBlock> blocks, const std::string& module,
                                          std::uint64_t n, std::uint64_t k, SourceView& out, bool& undecided);

}  // namespace fp4forge::verify_internal
