// Public MXFP4A16 fast path (mxfp4.h): row ranges on a named or the dispatched path, the group-scale
// table of the kernels, and the reference's overflow error. The arithmetic is in mxfp4_ref.cc (the
// reference, path "scalar") and mxfp4_simd.cc (Highway).
#include <array>
#include <bit>
#include <cmath>

#include "codec/scheme_fast.h"
#include "codec/scheme_ref_internal.h"
#include "fp4forge/codec/half.h"
#include "fp4forge/codec/mxfp4.h"

namespace fp4forge::mxfp4 {
namespace {

int scalar_kernel(const std::byte* data, DType dt, std::uint64_t rows, std::uint64_t cols, std::byte* packed,
                  std::byte* scale) {
  return encode(nvfp4::WeightView{data, dt, rows, cols}, packed, scale, "").ok() ? scheme_fast::kOk
                                                                                 : scheme_fast::kNonFinite;
}

// The reference's refusal of the first group of rows [r0, r1) whose scale overflows.
Error overflow_error(const nvfp4::WeightView& w, std::uint64_t r0, std::uint64_t r1, std::string_view name) {
  for (std::uint64_t r = r0; r < r1; ++r)
    for (std::uint64_t g = 0; g < scale_cols(w.cols); ++g) {
      float a = 0.0f;
      for (std::uint64_t k = 0; k < kGroupSize; ++k)
        a = std::max(a, std::fabs(scheme_ref::load_elem(w.data, w.dtype, r * w.cols + g * kGroupSize + k)));
      std::uint8_t e = 0;
      float s = 1.0f;
      if (!group_scale(a, w.dtype, &e, &s))
        return scheme_ref::tensor_error(
            name, fmt::format("row {}, group {} (columns {}..{}): max |w| = {} rounds to a power of two past the "
                              "largest finite {} value, so the E8M0 scale is undefined upstream; MXFP4 refuses it",
                              r, g, g * kGroupSize, g * kGroupSize + kGroupSize - 1, a, dtype_name(w.dtype)));
    }
  return Error{Errc::INTERNAL,
               fmt::format("tensor '{}': the MXFP4A16 encoder reported a scale overflow in rows [{}, {}) but none "
                           "was found; this is a bug",
                           name, r0, r1),
               {}, std::string(name)};
}

const scheme_fast::SchemeSpec& spec() {
  static const scheme_fast::SchemeSpec s{"MXFP4A16",       kGroupSize,
                                         1,                &scalar_kernel,
                                         &scheme_simd::mxfp4_kernels, &scheme_simd::mxfp4_dispatched,
                                         &overflow_error};
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

std::string best_path() {
  const auto& k = scheme_simd::mxfp4_kernels();
  return k.empty() ? std::string("scalar") : k.front().name;
}

}  // namespace fp4forge::mxfp4

namespace fp4forge::scheme_fast {

const MxScale* mxfp4_scale_table(DType dt) noexcept {
  // [BF16, F16, F32][exponent field of round_to_power_2's result]
  static const std::array<std::array<MxScale, 256>, 3> tables = [] {
    std::array<std::array<MxScale, 256>, 3> t{};
    const DType dts[3] = {DType::BF16, DType::F16, DType::F32};
    for (int d = 0; d < 3; ++d) {
      const int fields = dts[d] == DType::F16 ? 32 : 256;
      for (int e = 0; e < fields; ++e) {
        // The power of two (or 0, or inf) whose exponent field is e: round_to_power_2 gives it back.
        const float p2 = dts[d] == DType::F16 ? half::f16_to_float(static_cast<std::uint16_t>(e << 10))
                                              : std::bit_cast<float>(static_cast<std::uint32_t>(e) << 23);
        std::uint8_t code = 0;
        float s = 1.0f;
        MxScale& m = t[d][e];
        m.ok = mxfp4::group_scale(p2, dts[d], &code, &s);
        if (m.ok) {
          m.code = code;
          m.inv_scale = 1.0f / s;  // s is a power of two in [2^-127, 2^125]: exact
        }
      }
    }
    return t;
  }();
  return tables[dt == DType::BF16 ? 0 : dt == DType::F16 ? 1 : 2].data();
}

}  // namespace fp4forge::scheme_fast
