// Public NVFP4 codec API: argument validation, R4 error reporting, path selection, decode and the
// fused-set helper. The arithmetic lives in nvfp4_ref.cc (scalar) and nvfp4_simd.cc (Highway).
#include "fp4forge/codec/nvfp4.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "codec/codec_paths.h"
#include "codec/nvfp4_internal.h"
#include "fp4forge/util/thread_pool.h"

namespace fp4forge::nvfp4 {
namespace {

using detail::Kernels;

const Kernels& scalar_kernels() {
  static const Kernels k{"scalar", &detail::ref_amax_bits, &detail::ref_encode, &detail::ref_encode_maxima};
  return k;
}

const Kernels& dispatched_kernels() {
  static const Kernels k{"", &detail::simd_amax_bits, &detail::simd_encode, &detail::simd_encode_maxima};
  return k;
}

Result<const Kernels*> find_path(std::string_view path) {
  if (path == "scalar") return &scalar_kernels();
  return codec_paths::find_simd(detail::simd_kernels(), path);
}
}  // namespace

Result<const Kernels*> detail::kernels_for(std::string_view path) {
  if (path.empty()) return &dispatched_kernels();
  return find_path(path);
}

namespace {

std::string value_text(float v) {
  if (std::isnan(v)) return "nan";
  return v < 0 ? "-inf" : "inf";
}

// Locates the first non-finite element of rows [r0, r1) (scalar scan) and builds the R4 error.
Error non_finite_error(const WeightView& w, std::uint64_t r0, std::uint64_t r1, std::string_view name) {
  const std::uint64_t n = (r1 - r0) * w.cols;
  const std::byte* base = w.data + r0 * w.cols * detail::elem_size(w.dtype);
  for (std::uint64_t i = 0; i < n; ++i) {
    const float v = detail::load_elem(base, w.dtype, i);
    if (!std::isfinite(v)) {
      Error e = make_error(Errc::BAD_INPUT,
                           "tensor '{}': non-finite value {} at row {}, column {}; NVFP4 refuses to "
                           "encode it (R4)",
                           name, value_text(v), r0 + i / w.cols, i % w.cols);
      e.tensor = std::string(name);
      return e;
    }
  }
  Error e = make_error(Errc::INTERNAL, "tensor '{}': a codec kernel reported a non-finite value in rows "
                       "[{}, {}) but none was found; this is a bug", name, r0, r1);
  e.tensor = std::string(name);
  return e;
}

using detail::tensor_error;

Status check_view(const WeightView& w, std::uint64_t r0, std::uint64_t r1, std::string_view name) {
  if (!is_source_dtype(w.dtype))
    return tensor_error(Errc::BAD_INPUT, name,
                        fmt::format("dtype {} cannot be NVFP4-encoded; expected BF16, F16 or F32",
                                    dtype_name(w.dtype)));
  if (r0 > r1 || r1 > w.rows)
    return tensor_error(Errc::BAD_INPUT, name,
                        fmt::format("row range [{}, {}) is outside the tensor's {} rows", r0, r1, w.rows));
  if (w.data == nullptr && w.rows * w.cols > 0)
    return tensor_error(Errc::BAD_INPUT, name, "no data (null pointer) for a non-empty tensor");
  return {};
}

Result<float> amax_impl(const Kernels& k, const WeightView& w, std::uint64_t r0, std::uint64_t r1,
                        std::string_view name) {
  FP4FORGE_TRY(check_view(w, r0, r1, name));
  if (r0 == r1 || w.cols == 0) return 0.0f;
  const std::uint32_t bits =
      k.amax_bits(w.data + r0 * w.cols * detail::elem_size(w.dtype), w.dtype, (r1 - r0) * w.cols);
  if (bits >= 0x7F800000u) return non_finite_error(w, r0, r1, name);
  return std::bit_cast<float>(bits);
}

Status encode_impl(const Kernels& k, const WeightView& w, float gs, std::uint64_t r0, std::uint64_t r1,
                   std::byte* packed_out, std::byte* scale_out, std::string_view name) {
  FP4FORGE_TRY(check_view(w, r0, r1, name));
  if (w.cols % kGroupSize != 0)
    return tensor_error(Errc::BAD_INPUT, name,
                        fmt::format("shape [{}, {}]: K = {} is not a multiple of 16 (K % 16 = {}); NVFP4 "
                                    "needs whole groups of 16 columns; leave this tensor unquantized",
                                    w.rows, w.cols, w.cols, w.cols % kGroupSize));
  if (!std::isfinite(gs) || !(gs > 0.0f))
    return tensor_error(Errc::BAD_INPUT, name,
                        fmt::format("global scale {} is invalid; expected a finite value > 0", gs));
  if (r0 == r1 || w.cols == 0) return {};
  if (packed_out == nullptr || scale_out == nullptr)
    return tensor_error(Errc::INTERNAL, name, "null output buffer passed to the NVFP4 encoder");
  const std::byte* src = w.data + r0 * w.cols * detail::elem_size(w.dtype);
  if (!k.encode(src, w.dtype, r1 - r0, w.cols, gs, packed_out, scale_out))
    return non_finite_error(w, r0, r1, name);
  return {};
}

}  // namespace

float e4m3_to_float(std::uint8_t code) noexcept {
  const int e = (code >> 3) & 15, m = code & 7;
  if (e == 15 && m == 7) return std::numeric_limits<float>::quiet_NaN();
  const float v = e == 0 ? static_cast<float>(m) * 0x1p-9f
                         : (1.0f + static_cast<float>(m) / 8.0f) * std::ldexp(1.0f, e - 7);
  return (code & 0x80) ? -v : v;
}

float fp4_to_float(std::uint8_t code) noexcept {
  static constexpr float kMag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float v = kMag[code & 7];
  return (code & 8) ? -v : v;
}

float global_scale(float amax_value, DType dtype) noexcept {
  return detail::ref_global_scale(amax_value, is_source_dtype(dtype) ? dtype : DType::F32);
}

std::uint8_t group_scale_code(float group_amax, DType dtype, float gs) noexcept {
  return detail::ref_group_scale_code(group_amax, is_source_dtype(dtype) ? dtype : DType::F32, gs);
}

Result<float> amax_rows(const WeightView& w, std::uint64_t r0, std::uint64_t r1, std::string_view name) {
  return amax_impl(dispatched_kernels(), w, r0, r1, name);
}

Result<float> amax(const WeightView& w, std::string_view name) { return amax_rows(w, 0, w.rows, name); }

Result<float> amax(const WeightView& w, std::string_view name, ThreadPool* pool) {
  if (pool == nullptr || pool->size() <= 1 || w.rows < 2) return amax(w, name);
  // Row ranges of about 1M elements (a fraction of a millisecond each), at least one per worker.
  const std::uint64_t per = rows_per_task(w.rows, w.cols, pool->size(), std::uint64_t{1} << 20);
  const std::size_t tasks = static_cast<std::size_t>((w.rows + per - 1) / per);
  std::vector<Result<float>> parts(tasks, 0.0f);
  parallel_for(*pool, tasks, [&](std::size_t k) {
    const std::uint64_t r0 = k * per;
    parts[k] = amax_rows(w, r0, std::min(w.rows, r0 + per), name);
  });
  // The first range in row order that fails holds the tensor's first non-finite element: its error is the
  // serial one.
  float a = 0.0f;
  for (auto& p : parts) {
    if (!p.ok()) return std::move(p).error();
    a = std::max(a, *p);
  }
  return a;
}

Result<float> amax_rows_with(std::string_view path, const WeightView& w, std::uint64_t r0,
                             std::uint64_t r1, std::string_view name) {
  FP4FORGE_ASSIGN_OR_RETURN(const Kernels* k, find_path(path));
  return amax_impl(*k, w, r0, r1, name);
}

Status encode_rows(const WeightView& w, float gs, std::uint64_t r0, std::uint64_t r1,
                   std::byte* packed_out, std::byte* scale_out, std::string_view name) {
  return encode_impl(dispatched_kernels(), w, gs, r0, r1, packed_out, scale_out, name);
}

Status encode_rows_with(std::string_view path, const WeightView& w, float gs, std::uint64_t r0,
                        std::uint64_t r1, std::byte* packed_out, std::byte* scale_out,
                        std::string_view name) {
  FP4FORGE_ASSIGN_OR_RETURN(const Kernels* k, find_path(path));
  return encode_impl(*k, w, gs, r0, r1, packed_out, scale_out, name);
}

void decode_rows(const std::byte* packed, const std::byte* scales, float gs, std::uint64_t rows,
                 std::uint64_t cols, float* out, std::string_view path) {
  const std::uint64_t groups = rows * (cols / kGroupSize);
  if (path != "scalar") {  // the Highway kernel, in blocks of groups (their effective scales computed here)
    constexpr std::uint64_t kBlock = 256;
    float eff[kBlock];
    for (std::uint64_t g0 = 0; g0 < groups; g0 += kBlock) {
      const std::uint64_t n = std::min(kBlock, groups - g0);
      for (std::uint64_t i = 0; i < n; ++i)
        eff[i] = e4m3_to_float(static_cast<std::uint8_t>(scales[g0 + i])) / gs;  // fl32(s / gs)
      detail::simd_decode_groups(packed + g0 * (kGroupSize / 2), eff, n, out + g0 * kGroupSize);
    }
    return;
  }
  for (std::uint64_t g = 0; g < groups; ++g) {
    const float eff = e4m3_to_float(static_cast<std::uint8_t>(scales[g])) / gs;  // fl32(s / gs)
    for (std::uint64_t j = 0; j < kGroupSize / 2; ++j) {
      const auto b = static_cast<std::uint8_t>(packed[g * (kGroupSize / 2) + j]);
      out[g * kGroupSize + 2 * j] = fp4_to_float(b & 0x0F) * eff;
      out[g * kGroupSize + 2 * j + 1] = fp4_to_float(static_cast<std::uint8_t>(b >> 4)) * eff;
    }
  }
}

std::vector<std::string> available_paths() { return codec_paths::names(detail::simd_kernels()); }

std::string best_path() { return codec_paths::best(detail::simd_kernels()); }

Result<EncodedSet> encode_fused(std::span<const WeightView> members, std::span<const std::string> names,
                                std::string_view path) {
  if (members.empty())
    return make_error(Errc::INTERNAL, "encode_fused: empty fused set; expected at least one member");
  if (names.size() != members.size())
    return make_error(Errc::INTERNAL, "encode_fused: {} names for {} members", names.size(), members.size());
  const Kernels* k = &dispatched_kernels();
  if (!path.empty()) {
    FP4FORGE_ASSIGN_OR_RETURN(k, find_path(path));
  }
  const DType dt = members[0].dtype;
  EncodedSet set;
  for (std::size_t i = 0; i < members.size(); ++i) {
    if (members[i].dtype != dt)
      return tensor_error(Errc::BAD_INPUT, names[i],
                          fmt::format("fused-set member has dtype {} but '{}' has {}; a fused set "
                                      "shares one source dtype",
                                      dtype_name(members[i].dtype), names[0], dtype_name(dt)));
    if (members[i].cols % kGroupSize != 0)  // refuse before any work, like the encoder would
      return tensor_error(Errc::BAD_INPUT, names[i],
                          fmt::format("shape [{}, {}]: K = {} is not a multiple of 16 (K % 16 = {}); "
                                      "NVFP4 needs whole groups of 16 columns; leave this tensor "
                                      "unquantized",
                                      members[i].rows, members[i].cols, members[i].cols,
                                      members[i].cols % kGroupSize));
    FP4FORGE_ASSIGN_OR_RETURN(float a, amax_impl(*k, members[i], 0, members[i].rows, names[i]));
    set.amax = std::max(set.amax, a);
  }
  set.global_scale = global_scale(set.amax, dt);
  FP4FORGE_TRY(detail::encode_members(members, set, [&](std::size_t i, const WeightView& w, std::byte* pk, std::byte* sc) {
    return encode_impl(*k, w, set.global_scale, 0, w.rows, pk, sc, names[i]);
  }));
  return set;
}

}  // namespace fp4forge::nvfp4
