// Public W4A16 fast path (w4a16.h): row ranges on a named or the dispatched path. The arithmetic is in
// w4a16_ref.cc (the reference, path "scalar") and w4a16_simd.cc (Highway).
#include "codec/scheme_fast.h"
#include "fp4forge/codec/w4a16.h"

namespace fp4forge::w4a16 {
namespace {

int scalar_kernel(const std::byte* data, DType dt, std::uint64_t rows, std::uint64_t cols, std::byte* packed,
                  std::byte* scale) {
  return encode(nvfp4::WeightView{data, dt, rows, cols}, packed, scale, "").ok() ? scheme_fast::kOk
                                                                                 : scheme_fast::kNonFinite;
}

const scheme_fast::SchemeSpec& spec() {
  static const scheme_fast::SchemeSpec s{.preset = "W4A16",
                                         .k_multiple = kGroupSize,
                                         .k_name = "W4A16",
                                         .row_block = 1,
                                         .scalar = &scalar_kernel,
                                         .simd = &scheme_simd::w4a16_kernels,
                                         .dispatched = &scheme_simd::w4a16_dispatched,
                                         .overflow_error = nullptr};
  return s;
}

}  // namespace

Status encode_rows(const nvfp4::WeightView& w, std::uint64_t r0, std::uint64_t r1, std::byte* packed_out,
                   std::byte* scale_out, std::string_view name) {
  return scheme_fast::run_rows(spec(), spec().dispatched, w, r0, r1, packed_out, scale_out, name);
}

Status encode_rows_with(std::string_view path, const nvfp4::WeightView& w, std::uint64_t r0, std::uint64_t r1,
                        std::byte* packed_out, std::byte* scale_out, std::string_view name) {
  FP4FORGE_ASSIGN_OR_RETURN(scheme_fast::EncodeKernel k, scheme_fast::find_kernel(spec(), path));
  return scheme_fast::run_rows(spec(), k, w, r0, r1, packed_out, scale_out, name);
}

std::vector<std::string> available_paths() { return scheme_fast::path_names(spec()); }

std::string best_path() { return scheme_fast::best_path_name(spec()); }

}  // namespace fp4forge::w4a16
