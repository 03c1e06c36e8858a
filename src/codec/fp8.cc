// Public FP8 fast paths (fp8.h): row ranges of FP8_DYNAMIC and FP8_BLOCK (128-row strips) on a named or
// the dispatched path. The arithmetic is in fp8_ref.cc (the references, path "scalar") and fp8_simd.cc
// (Highway).
#include "codec/scheme_fast.h"
#include "fp4forge/codec/fp8.h"

namespace fp4forge::fp8 {
namespace {

int scalar_channel(const std::byte* data, DType dt, std::uint64_t rows, std::uint64_t cols, std::byte* wout,
                   std::byte* sout) {
  return encode_channel(nvfp4::WeightView{data, dt, rows, cols}, wout, sout, "").ok() ? scheme_fast::kOk
                                                                                      : scheme_fast::kNonFinite;
}

int scalar_block(const std::byte* data, DType dt, std::uint64_t rows, std::uint64_t cols, std::byte* wout,
                 std::byte* sout) {
  return encode_block(nvfp4::WeightView{data, dt, rows, cols}, wout, sout, "").ok() ? scheme_fast::kOk
                                                                                    : scheme_fast::kNonFinite;
}

const scheme_fast::SchemeSpec& channel_spec() {
  static const scheme_fast::SchemeSpec s{.preset = "FP8_DYNAMIC",
                                         .k_multiple = 1,
                                         .k_name = "",
                                         .row_block = 1,
                                         .scalar = &scalar_channel,
                                         .simd = &scheme_simd::fp8_channel_kernels,
                                         .dispatched = &scheme_simd::fp8_channel_dispatched,
                                         .overflow_error = nullptr};
  return s;
}

const scheme_fast::SchemeSpec& block_spec() {
  static const scheme_fast::SchemeSpec s{.preset = "FP8_BLOCK",
                                         .k_multiple = 1,
                                         .k_name = "",
                                         .row_block = kBlock,
                                         .scalar = &scalar_block,
                                         .simd = &scheme_simd::fp8_block_kernels,
                                         .dispatched = &scheme_simd::fp8_block_dispatched,
                                         .overflow_error = nullptr};
  return s;
}

}  // namespace

Status encode_channel_rows(const nvfp4::WeightView& w, std::uint64_t r0, std::uint64_t r1, std::byte* weight_out,
                           std::byte* scale_out, std::string_view name) {
  return scheme_fast::run_rows(channel_spec(), channel_spec().dispatched, w, r0, r1, weight_out, scale_out, name);
}

Status encode_channel_rows_with(std::string_view path, const nvfp4::WeightView& w, std::uint64_t r0,
                                std::uint64_t r1, std::byte* weight_out, std::byte* scale_out,
                                std::string_view name) {
  FP4FORGE_ASSIGN_OR_RETURN(scheme_fast::EncodeKernel k, scheme_fast::find_kernel(channel_spec(), path));
  return scheme_fast::run_rows(channel_spec(), k, w, r0, r1, weight_out, scale_out, name);
}

Status encode_block_rows(const nvfp4::WeightView& w, std::uint64_t r0, std::uint64_t r1, std::byte* weight_out,
                         std::byte* scale_out, std::string_view name) {
  return scheme_fast::run_rows(block_spec(), block_spec().dispatched, w, r0, r1, weight_out, scale_out, name);
}

Status encode_block_rows_with(std::string_view path, const nvfp4::WeightView& w, std::uint64_t r0,
                              std::uint64_t r1, std::byte* weight_out, std::byte* scale_out, std::string_view name) {
  FP4FORGE_ASSIGN_OR_RETURN(scheme_fast::EncodeKernel k, scheme_fast::find_kernel(block_spec(), path));
  return scheme_fast::run_rows(block_spec(), k, w, r0, r1, weight_out, scale_out, name);
}

std::vector<std::string> available_paths() { return scheme_fast::path_names(channel_spec()); }

std::string best_path() { return scheme_fast::best_path_name(channel_spec()); }

}  // namespace fp4forge::fp8
