// Scheme names and per-Linear output sizes (scheme.h), from the encoders' own size helpers.
#include "fp4forge/codec/scheme.h"

#include <cmath>
#include <cstring>
#include <span>
#include <string>

#include "codec/nvfp4_internal.h"
#include "fp4forge/codec/fp8.h"
#include "fp4forge/codec/fp8_dequant.h"
#include "fp4forge/codec/half.h"
#include "fp4forge/codec/mxfp4.h"
#include "fp4forge/codec/nvfp4.h"
#include "fp4forge/codec/nvfp4_search.h"
#include "fp4forge/codec/scheme_search.h"
#include "fp4forge/codec/w4a16.h"
#include "fp4forge/util/did_you_mean.h"
#include "fp4forge/util/strings.h"

namespace fp4forge {

namespace {

using P = LinearPart;

// ---- per-scheme functions of the table ------------------------------------------------------------

std::vector<LinearTensorSpec> nvfp4_tensors(std::uint64_t n, std::uint64_t k, DType) {
  return {{P::PAYLOAD, "weight_packed", DType::U8, {n, k / 2}},
          {P::SCALE, "weight_scale", DType::F8_E4M3, {n, k / nvfp4::kGroupSize}},
          {P::GLOBAL_SCALE, "weight_global_scale", DType::F32, {1}}};
}
std::vector<LinearTensorSpec> mxfp4_tensors(std::uint64_t n, std::uint64_t k, DType) {
  return {{P::PAYLOAD, "weight_packed", DType::U8, {n, k / 2}},
          {P::SCALE, "weight_scale", DType::U8, {n, mxfp4::scale_cols(k)}}};
}
std::vector<LinearTensorSpec> fp8_channel_tensors(std::uint64_t n, std::uint64_t k, DType src) {
  return {{P::PAYLOAD, "weight", DType::F8_E4M3, {n, k}}, {P::SCALE, "weight_scale", src, {n, 1}}};
}
std::vector<LinearTensorSpec> fp8_block_tensors(std::uint64_t n, std::uint64_t k, DType src) {
  return {{P::PAYLOAD, "weight", DType::F8_E4M3, {n, k}},
          {P::SCALE, "weight_scale", src, {fp8::block_scale_rows(n), fp8::block_scale_cols(k)}}};
}
std::vector<LinearTensorSpec> w4a16_tensors(std::uint64_t n, std::uint64_t k, DType src) {
  return {{P::PAYLOAD, "weight_packed", DType::I32, {n, w4a16::packed_cols(k)}},
          {P::SCALE, "weight_scale", src, {n, w4a16::scale_cols(k)}},
          {P::SHAPE, "weight_shape", DType::I64, {2}}};
}

Status nvfp4_rows(const nvfp4::WeightView& w, const RowsParams& p, std::uint64_t r0, std::uint64_t r1, std::byte* payload,
                  std::byte* scale, std::string_view name) {
  if (p.group_max != nullptr) return nvfp4::encode_rows_maxima(w, p.global_scale, p.group_max, r0, r1, payload, scale, name);
  return nvfp4::encode_rows(w, p.global_scale, r0, r1, payload, scale, name);
}
Status mxfp4_rows(const nvfp4::WeightView& w, const RowsParams& p, std::uint64_t r0, std::uint64_t r1, std::byte* payload,
                  std::byte* scale, std::string_view name) {
  if (p.group_max != nullptr) return mxfp4::encode_rows_maxima(w, p.group_max, r0, r1, payload, scale, name);
  return mxfp4::encode_rows(w, r0, r1, payload, scale, name);
}
Status fp8_channel_rows(const nvfp4::WeightView& w, const RowsParams&, std::uint64_t r0, std::uint64_t r1,
                        std::byte* payload, std::byte* scale, std::string_view name) {
  return fp8::encode_channel_rows(w, r0, r1, payload, scale, name);
}
Status fp8_block_rows(const nvfp4::WeightView& w, const RowsParams&, std::uint64_t r0, std::uint64_t r1,
                      std::byte* payload, std::byte* scale, std::string_view name) {
  return fp8::encode_block_rows(w, r0, r1, payload, scale, name);
}
Status w4a16_rows(const nvfp4::WeightView& w, const RowsParams& p, std::uint64_t r0, std::uint64_t r1, std::byte* payload,
                  std::byte* scale, std::string_view name) {
  if (p.group_max != nullptr) return w4a16::encode_rows_maxima(w, p.group_max, r0, r1, payload, scale, name);
  return w4a16::encode_rows(w, r0, r1, payload, scale, name);
}

Status nvfp4_search(const nvfp4::WeightView& w, const SearchSpec& spec, int steps, std::uint64_t r0, std::uint64_t r1,
                    float* group_max_out, StepMask* improved, std::string_view name) {
  return nvfp4::search_rows(w, spec, steps, r0, r1, group_max_out, improved, name);
}

// encode_linear per scheme: `path` empty = the best (dispatched) path, "scalar" = the reference, or a target.
Status nvfp4_linear(const nvfp4::WeightView& w, std::string_view name, std::string_view path,
                    std::vector<EncodedTensor>& out) {
  const std::string nm(name);
  FP4FORGE_ASSIGN_OR_RETURN(nvfp4::EncodedSet set, nvfp4::encode_fused(std::span(&w, 1), std::span(&nm, 1), path));
  out[0].bytes = std::move(set.members.front().packed);
  out[1].bytes = std::move(set.members.front().scale);
  std::memcpy(out[2].bytes.data(), &set.global_scale, 4);  // little-endian host
  return {};
}
// The schemes with a best-path row encoder and a named-path one (mxfp4.h, fp8.h, w4a16.h): the whole Linear.
using RowsFn = Status (*)(const nvfp4::WeightView&, std::uint64_t, std::uint64_t, std::byte*, std::byte*, std::string_view);
using RowsWithFn = Status (*)(std::string_view, const nvfp4::WeightView&, std::uint64_t, std::uint64_t, std::byte*,
                              std::byte*, std::string_view);
template <RowsFn kBest, RowsWithFn kWith>
Status rows_linear(const nvfp4::WeightView& w, std::string_view name, std::string_view path,
                   std::vector<EncodedTensor>& out) {
  return path.empty() ? kBest(w, 0, w.rows, out[0].bytes.data(), out[1].bytes.data(), name)
                      : kWith(path, w, 0, w.rows, out[0].bytes.data(), out[1].bytes.data(), name);
}
Status w4a16_linear(const nvfp4::WeightView& w, std::string_view name, std::string_view path,
                    std::vector<EncodedTensor>& out) {
  const auto dims = w4a16::weight_shape(w.rows, w.cols);
  std::memcpy(out[2].bytes.data(), dims.data(), w4a16::kShapeBytes);  // little-endian host
  return rows_linear<w4a16::encode_rows, w4a16::encode_rows_with>(w, name, path, out);
}

/** Element `i` of a BF16 / F16 / F32 scale tensor as float (anything else: NaN). */
float scale_at(const std::byte* p, DType t, std::uint64_t i) {
  return is_source_dtype(t) ? nvfp4::detail::load_elem(p, t, i) : std::nanf("");
}

std::uint8_t u8(const std::byte* p, std::uint64_t i) { return static_cast<std::uint8_t>(p[i]); }

void nvfp4_decode(const LinearData& d, std::uint64_t k, std::uint64_t r0, std::uint64_t r1, float* out) {
  nvfp4::decode_rows(d.payload + r0 * (k / 2), d.scale + r0 * (k / nvfp4::kGroupSize), d.global_scale, r1 - r0, k, out);
}
void mxfp4_decode(const LinearData& d, std::uint64_t k, std::uint64_t r0, std::uint64_t r1, float* out) {
  const std::uint64_t sc = mxfp4::scale_cols(k);
  for (std::uint64_t r = r0; r < r1; ++r)
    for (std::uint64_t c = 0; c < k; ++c) {
      const std::uint8_t b = u8(d.payload, r * (k / 2) + c / 2);
      const std::uint8_t e = u8(d.scale, r * sc + c / mxfp4::kGroupSize);
      const float scale = e == 0xFF ? std::nanf("") : std::ldexp(1.0f, static_cast<int>(e) - 127);
      *out++ = nvfp4::fp4_to_float(c % 2 ? b >> 4 : b & 0x0F) * scale;
    }
}
void fp8_decode(const LinearData& d, std::uint64_t k, std::uint64_t r0, std::uint64_t r1, float* out, bool block) {
  const std::uint64_t bc = fp8::block_scale_cols(k);
  for (std::uint64_t r = r0; r < r1; ++r)
    for (std::uint64_t c = 0; c < k; ++c) {
      const float scale = scale_at(d.scale, d.scale_dtype, block ? (r / fp8::kBlock) * bc + c / fp8::kBlock : r);
      *out++ = nvfp4::e4m3_to_float(u8(d.payload, r * k + c)) * scale;
    }
}
void fp8_channel_decode(const LinearData& d, std::uint64_t k, std::uint64_t r0, std::uint64_t r1, float* out) {
  fp8_decode(d, k, r0, r1, out, false);
}
void fp8_block_decode(const LinearData& d, std::uint64_t k, std::uint64_t r0, std::uint64_t r1, float* out) {
  fp8_decode(d, k, r0, r1, out, true);
}
void w4a16_decode(const LinearData& d, std::uint64_t k, std::uint64_t r0, std::uint64_t r1, float* out) {
  const std::uint64_t words = w4a16::packed_cols(k), sc = w4a16::scale_cols(k);
  for (std::uint64_t r = r0; r < r1; ++r)
    for (std::uint64_t c = 0; c < k; ++c) {
      std::uint32_t w;
      std::memcpy(&w, d.payload + 4 * (r * words + c / w4a16::kValuesPerWord), 4);
      const int q = static_cast<int>((w >> (4 * (c % w4a16::kValuesPerWord))) & 0xF) + w4a16::kQMin;
      *out++ = static_cast<float>(q) * scale_at(d.scale, d.scale_dtype, r * sc + c / w4a16::kGroupSize);
    }
}

// compressed-tensors QuantizationArgs of a row: bits, type, strategy, group size (0: null), block [128, 128],
// scale_dtype ("": null), dynamic.
constexpr SchemeTraits::CtArgs ct(int bits, std::string_view type, std::string_view strategy, int group, bool block128,
                                  std::string_view scale_dtype, bool dynamic) {
  SchemeTraits::CtArgs a;
  a.num_bits = bits;
  a.type = type;
  a.strategy = strategy;
  a.group_size = group;
  a.block128 = block128;
  a.scale_dtype = scale_dtype;
  a.dynamic = dynamic;
  return a;
}
constexpr SchemeTraits::CtArgs kNoArgs = ct(0, "", "", 0, false, "", false);

constexpr std::uint8_t bit(Observer o) { return static_cast<std::uint8_t>(1u << static_cast<unsigned>(o)); }
constexpr std::uint8_t kMinMaxOnly = bit(Observer::MINMAX);
constexpr std::uint8_t layouts(fp8::ScaleLayout a, fp8::ScaleLayout b) {
  return static_cast<std::uint8_t>((1u << static_cast<unsigned>(a)) | (1u << static_cast<unsigned>(b)));
}

// ---- the table ------------------------------------------------------------------------------------

const SchemeTraits kTable[] = {
    {.scheme = QuantScheme::NVFP4A16, .name = "nvfp4a16", .preset = "NVFP4A16", .format = "nvfp4-pack-quantized",
     .word = "NVFP4", .bits = 4, .k_multiple = nvfp4::kGroupSize, .shape_k = 16, .shape_n = 1,
     .shape_why = "NVFP4 groups are 16 columns", .row_block = 1, .block_scales = false, .global_scale = true,
     .value_check = ValueCheck::E4M3_SCALES,
     .weights = ct(4, "float", "tensor_group", 16, false, "torch.float8_e4m3fn", false), .input = kNoArgs,
     .observers = static_cast<std::uint8_t>(bit(Observer::MINMAX) | bit(Observer::NVFP4_EXPANDED_MSE) |
                                            bit(Observer::MEMORYLESS_MSE)),
     .default_observer = Observer::NVFP4_EXPANDED_MSE,
     .tensors = nvfp4_tensors, .encode_rows = nvfp4_rows, .paths = nvfp4::available_paths,
     .encode_linear = nvfp4_linear, .decode_rows = nvfp4_decode, .search_cols = nvfp4::kGroupSize,
     .search_rows = nvfp4_search, .e2m1_cast = mxcast::Target::NVFP4},
    {.scheme = QuantScheme::MXFP4A16, .name = "mxfp4a16", .preset = "MXFP4A16", .format = "mxfp4-pack-quantized",
     .word = "MXFP4A16", .bits = 4, .k_multiple = mxfp4::kGroupSize, .shape_k = 32, .shape_n = 1,
     .shape_why = "MXFP4 groups are 32 columns", .row_block = 1, .block_scales = false, .global_scale = false,
     .value_check = ValueCheck::E8M0_SCALES,
     .weights = ct(4, "float", "group", 32, false, "torch.uint8", false), .input = kNoArgs,
     .observers = static_cast<std::uint8_t>(bit(Observer::MINMAX) | bit(Observer::MEMORYLESS_MSE)),
     .default_observer = Observer::MINMAX,
     .tensors = mxfp4_tensors, .encode_rows = mxfp4_rows, .paths = mxfp4::available_paths,
     .encode_linear = rows_linear<mxfp4::encode_rows, mxfp4::encode_rows_with>, .decode_rows = mxfp4_decode,
     .search_cols = mxfp4::kGroupSize, .search_rows = mxfp4_search_rows, .e2m1_cast = mxcast::Target::MXFP4},
    {.scheme = QuantScheme::FP8_DYNAMIC, .name = "fp8-dynamic", .preset = "FP8_DYNAMIC", .format = "float-quantized",
     .word = "FP8_DYNAMIC", .bits = 8, .k_multiple = 1, .shape_k = 1, .shape_n = 1, .shape_why = "any shape", .row_block = 1,
     .block_scales = false, .global_scale = false, .value_check = ValueCheck::FP8_PAYLOAD,
     .weights = ct(8, "float", "channel", 0, false, "", false), .input = ct(8, "float", "token", 0, false, "", true),
     .observers = kMinMaxOnly, .default_observer = Observer::MINMAX,
     .tensors = fp8_channel_tensors, .encode_rows = fp8_channel_rows, .paths = fp8::available_paths,
     .encode_linear = rows_linear<fp8::encode_channel_rows, fp8::encode_channel_rows_with>, .decode_rows = fp8_channel_decode,
     .search_cols = 0, .search_rows = nullptr,
     .passthrough_layouts = layouts(fp8::ScaleLayout::TENSOR, fp8::ScaleLayout::CHANNEL)},
    {.scheme = QuantScheme::FP8_BLOCK, .name = "fp8-block", .preset = "FP8_BLOCK", .format = "float-quantized",
     .word = "FP8_BLOCK", .bits = 8, .k_multiple = 1, .shape_k = 128, .shape_n = 128,
     .shape_why = "vLLM serves block FP8 in whole 128 x 128 blocks", .row_block = fp8::kBlock, .block_scales = true, .global_scale = false,
     .value_check = ValueCheck::FP8_PAYLOAD,
     .weights = ct(8, "float", "block", 0, true, "", false), .input = ct(8, "float", "group", 128, false, "", true),
     .observers = kMinMaxOnly, .default_observer = Observer::MINMAX,
     .tensors = fp8_block_tensors, .encode_rows = fp8_block_rows, .paths = fp8::available_paths,
     .encode_linear = rows_linear<fp8::encode_block_rows, fp8::encode_block_rows_with>, .decode_rows = fp8_block_decode,
     .search_cols = 0, .search_rows = nullptr,
     .passthrough_layouts = layouts(fp8::ScaleLayout::TENSOR, fp8::ScaleLayout::BLOCK)},
    {.scheme = QuantScheme::W4A16, .name = "w4a16", .preset = "W4A16", .format = "pack-quantized", .word = "W4A16",
     .bits = 4, .k_multiple = w4a16::kGroupSize, .shape_k = 128, .shape_n = 1, .shape_why = "W4A16 groups are 128 columns",
     .row_block = 1, .block_scales = false, .global_scale = false, .value_check = ValueCheck::FLOAT_SCALES,
     .weights = ct(4, "int", "group", 128, false, "", false), .input = kNoArgs,
     .observers = static_cast<std::uint8_t>(bit(Observer::MINMAX) | bit(Observer::MEMORYLESS_MSE)),
     .default_observer = Observer::MINMAX,
     .tensors = w4a16_tensors, .encode_rows = w4a16_rows, .paths = w4a16::available_paths,
     .encode_linear = w4a16_linear, .decode_rows = w4a16_decode,
     .search_cols = w4a16::kGroupSize, .search_rows = w4a16_search_rows},
};

}  // namespace

std::span<const SchemeTraits> scheme_table() noexcept { return kTable; }

const SchemeTraits& scheme_traits(QuantScheme s) noexcept {
  for (const SchemeTraits& t : kTable)
    if (t.scheme == s) return t;
  return kTable[0];  // unreachable: every QuantScheme has a row (tested)
}

std::string_view quant_scheme_name(QuantScheme s) noexcept { return scheme_traits(s).name; }
std::string_view quant_scheme_preset(QuantScheme s) noexcept { return scheme_traits(s).preset; }
std::string_view quant_scheme_format(QuantScheme s) noexcept { return scheme_traits(s).format; }

std::string quant_scheme_names() {
  std::string names;
  for (const SchemeTraits& r : kTable) names += (names.empty() ? "" : ", ") + std::string(r.name);
  return names;
}

namespace {

/** Names operators type for a scheme fp4forge does not make, each with the nearest one it does and why (issue 55:
 * `nvfp4` got only the list). Keys are compared as util::option_key spells them. */
struct SchemeAlias {
  std::string_view typed;
  std::string_view suggest;
};
constexpr SchemeAlias kSchemeAliases[] = {
    {"nvfp4", "did you mean nvfp4a16 (NVFP4 weights, 16-bit activations)? NVFP4 W4A4 also quantizes activations, "
              "whose scales need calibration data, which fp4forge (data-free) does not take"},
    {"nvfp4a4", "NVFP4 W4A4 quantizes activations too, whose scales need calibration data, which fp4forge "
                "(data-free) does not take; nvfp4a16 is the same weights with 16-bit activations"},
    {"w4a4", "W4A4 quantizes activations too, whose scales need calibration data, which fp4forge (data-free) does "
             "not take; nvfp4a16 or w4a16 keep 16-bit activations"},
    {"fp4", "did you mean nvfp4a16 (NVFP4 weights, groups of 16) or mxfp4a16 (MXFP4, groups of 32)?"},
    {"mxfp4", "did you mean mxfp4a16 (MXFP4 weights, 16-bit activations)?"},
    {"fp8", "did you mean fp8-dynamic (per-channel weights, per-token activation scales at run time) or fp8-block "
            "(128x128 weight blocks)?"},
    {"w8a8", "did you mean fp8-dynamic (FP8 W8A8 with per-token activation scales at run time, no calibration)?"},
    {"fp8-static", "static FP8 activation scales need calibration data, which fp4forge (data-free) does not take; "
                   "fp8-dynamic computes them at run time"},
    {"int4", "did you mean w4a16 (INT4 weights, groups of 128, 16-bit activations)?"},
    {"gptq", "GPTQ needs calibration data, which fp4forge (data-free) does not take; w4a16 writes the same format "
             "from min-max or searched scales"},
    {"awq", "AWQ needs calibration data, which fp4forge (data-free) does not take; w4a16 writes the same format from "
            "min-max or searched scales"},
};

}  // namespace

Result<QuantScheme> parse_quant_scheme(std::string_view text) {
  const std::string t = util::option_key(text);
  for (const SchemeTraits& r : kTable)
    if (t == r.name || t == util::option_key(r.preset)) return r.scheme;
  for (const SchemeAlias& a : kSchemeAliases)
    if (t == util::option_key(a.typed))
      return make_error(Errc::USAGE, "unknown scheme '{}': {}{} expected one of: {}", text, a.suggest,
                        a.suggest.ends_with('?') ? "" : ";", quant_scheme_names());  // no "?;" (issue 55 tryout F)
  std::vector<std::string> known;
  for (const SchemeTraits& r : kTable) known.emplace_back(r.name);
  return make_error(Errc::USAGE, "unknown scheme '{}'{}; expected one of: {}", text, util::did_you_mean(t, known),
                    quant_scheme_names());
}

std::uint64_t k_multiple(QuantScheme s) noexcept { return scheme_traits(s).k_multiple; }
int weight_bits(QuantScheme s) noexcept { return scheme_traits(s).bits; }
bool has_global_scale(QuantScheme s) noexcept { return scheme_traits(s).global_scale; }

std::uint64_t LinearTensorSpec::bytes() const noexcept {
  std::uint64_t n = dtype_bits(dtype) / 8;
  for (auto d : shape) n *= d;
  return n;
}

std::vector<LinearTensorSpec> linear_tensors(QuantScheme s, std::uint64_t n, std::uint64_t k, DType src) {
  return scheme_traits(s).tensors(n, k, src);
}

std::uint64_t linear_bytes(QuantScheme s, std::uint64_t n, std::uint64_t k, DType src) noexcept {
  std::uint64_t total = 0;
  for (const auto& t : linear_tensors(s, n, k, src)) total += t.bytes();
  return total;
}

std::vector<std::string> encode_paths(QuantScheme s) { return scheme_traits(s).paths(); }

namespace {
// The tensors a scheme writes for a Linear shaped as `w`, zero-filled.
std::vector<EncodedTensor> linear_buffers(QuantScheme s, const nvfp4::WeightView& w) {
  std::vector<EncodedTensor> out;
  for (const auto& t : linear_tensors(s, w.rows, w.cols, w.dtype))
    out.push_back({std::string(t.suffix), t.dtype, t.shape, std::vector<std::byte>(static_cast<std::size_t>(t.bytes()))});
  return out;
}
}  // namespace

Result<std::vector<EncodedTensor>> encode_linear(QuantScheme s, const nvfp4::WeightView& w, std::string_view name,
                                                 std::string_view path) {
  std::vector<EncodedTensor> out = linear_buffers(s, w);
  FP4FORGE_TRY(scheme_traits(s).encode_linear(w, name, path, out));
  return out;
}

Result<std::vector<EncodedTensor>> encode_linear_maxima(QuantScheme s, const nvfp4::WeightView& w,
                                                        const float* group_max, std::string_view name) {
  const SchemeTraits& t = scheme_traits(s);
  if (t.global_scale || t.search_cols == 0)
    return make_error(Errc::INTERNAL, "encode_linear_maxima: scheme {} {}", t.name,
                      t.global_scale ? "shares a global scale over its fused set (nvfp4::encode_fused_observed)"
                                     : "takes no searched observer");
  std::vector<EncodedTensor> out = linear_buffers(s, w);
  FP4FORGE_TRY(t.encode_rows(w, RowsParams{1.0f, group_max}, 0, w.rows, out[0].bytes.data(), out[1].bytes.data(), name));
  return out;
}

void decode_linear_rows(QuantScheme s, const LinearData& d, std::uint64_t n, std::uint64_t k, std::uint64_t r0,
                        std::uint64_t r1, float* out) {
  (void)n;
  scheme_traits(s).decode_rows(d, k, r0, r1, out);
}

}  // namespace fp4forge
