#pragma once
/**
 * The quantization schemes fp4forge writes (QuantScheme; model/quant_config.h's Scheme is what vLLM detects
 * in a config) as one table: each scheme is one row of SchemeTraits (in the spirit of ggml's type_traits):
 * its names, compressed-tensors preset, format and QuantizationArgs, bits, the shape rule, the tensors it
 * writes per Linear [N, K], its encoder, decoder and paths, the observers it takes and how verify checks its
 * stored values. quantize, verify, diff, inspect and plan read the row; adding a scheme is adding a row.
 * The free functions below are the row's fields by name. The encoders are in nvfp4.h, mxfp4.h, fp8.h and
 * w4a16.h; their size helpers are the one source of the byte counts here.
 */
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <span>

#include "fp4forge/codec/mxfp4_cast.h"
#include "fp4forge/codec/nvfp4.h"
#include "fp4forge/codec/observer.h"

#include "fp4forge/core/dtype.h"
#include "fp4forge/core/error.h"

namespace fp4forge {

enum class QuantScheme { NVFP4A16, MXFP4A16, FP8_DYNAMIC, FP8_BLOCK, W4A16 };

inline constexpr QuantScheme kQuantSchemes[] = {QuantScheme::NVFP4A16, QuantScheme::MXFP4A16, QuantScheme::FP8_DYNAMIC, QuantScheme::FP8_BLOCK,
                                      QuantScheme::W4A16};

/** "nvfp4a16", "mxfp4a16", "fp8-dynamic", "fp8-block", "w4a16": the names options take. */
std::string_view quant_scheme_name(QuantScheme s) noexcept;
/** The compressed-tensors / llm-compressor preset: "NVFP4A16", "FP8_DYNAMIC", ... */
std::string_view quant_scheme_preset(QuantScheme s) noexcept;
/** The compressed-tensors format: "nvfp4-pack-quantized", "mxfp4-pack-quantized", "float-quantized",
 * "pack-quantized". */
std::string_view quant_scheme_format(QuantScheme s) noexcept;
/** Every scheme's option name, "nvfp4a16, mxfp4a16, ...", in table order (errors and help list them). */
std::string quant_scheme_names();

/** A scheme from its name or preset, case-insensitive, '-' and '_' alike. USAGE error listing the names. */
Result<QuantScheme> parse_quant_scheme(std::string_view text);
/** K (in_features) must be a multiple of this: 16, 32, 1 (FP8), 128 (W4A16 group). */
std::uint64_t k_multiple(QuantScheme s) noexcept;
/** Bits per stored weight value: 4 (NVFP4, MXFP4, INT4) or 8 (FP8). */
int weight_bits(QuantScheme s) noexcept;
/** True for NVFP4A16 only: a per-tensor F32 global scale, shared by the members of a fused set. */
bool has_global_scale(QuantScheme s) noexcept;

/** The kind of one tensor a scheme writes for a Linear (what the quantize runner produces for it). */
enum class LinearPart : std::uint8_t {
  PAYLOAD,       ///< the quantized values: `weight_packed` (4-bit schemes) or `weight` (FP8)
  SCALE,         ///< `weight_scale`
  GLOBAL_SCALE,  ///< `weight_global_scale` (NVFP4A16)
  SHAPE,         ///< `weight_shape` (W4A16)
};

/** Name suffix, dtype and shape of one tensor a scheme writes for a Linear [N, K]. */
struct LinearTensorSpec {
  LinearPart part = LinearPart::PAYLOAD;
  std::string_view suffix;  ///< "weight_packed", "weight", "weight_scale", "weight_global_scale", "weight_shape"
  DType dtype = DType::U8;
  std::vector<std::uint64_t> shape;
  std::uint64_t bytes() const noexcept;
};

/**
 * The tensors the scheme writes for one Linear [N, K] whose weight is stored in `src`, in the order
 * compressed-tensors saves them: the one statement of names, dtypes and shapes per scheme (quantize lays
 * them out, verify checks them, plan sizes them). FP8 and W4A16 scales are in the source dtype.
 */
std::vector<LinearTensorSpec> linear_tensors(QuantScheme s, std::uint64_t n, std::uint64_t k, DType src);

/** Bytes of the tensors the scheme writes for one Linear [N, K] stored in `src` (the sum over
 * linear_tensors; K a multiple of k_multiple). */
std::uint64_t linear_bytes(QuantScheme s, std::uint64_t n, std::uint64_t k, DType src) noexcept;

/** One tensor a scheme writes for a Linear, named by its suffix ("weight_packed", "weight_scale", ...). */
struct EncodedTensor {
  std::string suffix;
  DType dtype = DType::U8;
  std::vector<std::uint64_t> shape;
  std::vector<std::byte> bytes;  ///< little-endian, row-major
};

/**
 * The encode paths of a scheme: "scalar" (its reference encoder) first, then every Highway target compiled
 * in and supported by this CPU, best first (nvfp4::available_paths(), mxfp4::, fp8::, w4a16::; the same
 * names for every scheme). Every path writes the same bytes.
 */
std::vector<std::string> encode_paths(QuantScheme s);

/**
 * Encodes one Linear [N, K] with `s` (NVFP4A16: a set of one, its global scale from its own amax) on
 * `path`: empty = the best path (Highway runtime dispatch), "scalar" = the scheme's reference encoder,
 * or any name of encode_paths(s). The tensors come in the order compressed-tensors saves them.
 * BAD_INPUT for what the scheme refuses (K not a multiple of k_multiple, NaN/Inf, dtype), naming `name`;
 * USAGE for a path not in encode_paths(s).
 */
Result<std::vector<EncodedTensor>> encode_linear(QuantScheme s, const nvfp4::WeightView& w, std::string_view name,
                                                 std::string_view path = {});

/** What an encoder needs besides the weight: NVFP4A16's global scale and, with a searched observer, the
 * searched max of each group of the rows encoded (nullptr: each group's max|w|). Ignored by the others. */
struct RowsParams {
  float global_scale = 1.0f;
  const float* group_max = nullptr;
};

/**
 * encode_linear with a searched observer's maxima (`group_max`: w.rows * K/search_cols values) in place of each
 * group's max|w|, for the schemes without a global scale (MXFP4A16, W4A16; NVFP4A16's fused sets share one:
 * nvfp4::encode_fused_observed). weight_shape is left zero. INTERNAL for any other scheme.
 */
Result<std::vector<EncodedTensor>> encode_linear_maxima(QuantScheme s, const nvfp4::WeightView& w,
                                                        const float* group_max, std::string_view name);

/** How verify checks a scheme's stored scale bytes (and payload) without the source. */
enum class ValueCheck : std::uint8_t {
  E4M3_SCALES,   ///< F8_E4M3 scale bytes: NaN codes, negative scales (NVFP4A16)
  E8M0_SCALES,   ///< U8 E8M0 exponents: 0xFF NaN, 253/254 suspicious (MXFP4A16)
  FP8_PAYLOAD,   ///< F8_E4M3 weight codes (NaN 0x7F/0xFF) and float scales finite > 0 (FP8)
  FLOAT_SCALES,  ///< float scales finite > 0 (W4A16)
};

struct LinearData;

/** One scheme's row of the scheme table. */
struct SchemeTraits {
  QuantScheme scheme;
  std::string_view name;    ///< option name: "nvfp4a16", "fp8-block", ...
  std::string_view preset;  ///< compressed-tensors / llm-compressor preset: "NVFP4A16", "FP8_BLOCK", ...
  std::string_view format;  ///< compressed-tensors format: "nvfp4-pack-quantized", "float-quantized", ...
  std::string_view word;    ///< how messages name its payload: "NVFP4", "MXFP4A16", ...
  int bits;                 ///< bits per stored weight value
  std::uint64_t k_multiple;     ///< in_features the encoder takes must be a multiple of this (the group; FP8: 1)
  std::uint64_t shape_k;        ///< the quantize policy's rule: in_features a multiple of this (FP8_BLOCK: 128)
  std::uint64_t shape_n;        ///< ... and out_features of this, for vLLM to serve it (1: any)
  std::string_view shape_why;   ///< where the shape rule comes from (keep reasons)
  std::uint64_t row_block;      ///< encode row ranges start on a multiple of this (FP8_BLOCK: 128)
  bool block_scales;            ///< one scale per 128 x 128 block (vLLM's blockwise FP8 path)
  bool global_scale;            ///< a per-tensor F32 global scale shared by a fused set (NVFP4A16)
  ValueCheck value_check;
  /** compressed-tensors QuantizationArgs of the weights and, for a dynamic-activation preset, the inputs. */
  struct CtArgs {
    int num_bits = 0;
    std::string_view type, strategy;
    int group_size = 0;             ///< 0: null
    bool block128 = false;          ///< block_structure [128, 128]
    std::string_view scale_dtype;   ///< "" : null
    bool dynamic = false;
  };
  CtArgs weights;
  CtArgs input;                     ///< num_bits 0: no input_activations
  std::uint8_t observers;           ///< bit (1 << Observer) for each observer it takes
  Observer default_observer;
  std::vector<LinearTensorSpec> (*tensors)(std::uint64_t n, std::uint64_t k, DType src);
  /** Rows [r0, r1) on the best path into the rows' payload and scale (the row range's own bytes). */
  Status (*encode_rows)(const nvfp4::WeightView& w, const RowsParams& p, std::uint64_t r0, std::uint64_t r1,
                        std::byte* payload, std::byte* scale, std::string_view name);
  std::vector<std::string> (*paths)();
  /** One whole Linear on a named path into its tensors (encode_linear). */
  Status (*encode_linear)(const nvfp4::WeightView& w, std::string_view name, std::string_view path,
                          std::vector<EncodedTensor>& out);
  void (*decode_rows)(const LinearData& d, std::uint64_t k, std::uint64_t r0, std::uint64_t r1, float* out);
  /** Columns per searched group (the scale group: 16, 32, 128); 0 for a scheme that takes min-max only. */
  std::uint64_t search_cols;
  /** A searched observer's search of rows [r0, r1) (codec/scheme_search.h), `steps` steps; nullptr when
   * search_cols is 0. */
  Status (*search_rows)(const nvfp4::WeightView& w, const SearchSpec& spec, int steps, std::uint64_t r0,
                        std::uint64_t r1, float* group_max_out, StepMask* improved, std::string_view name);
  /** The FP8 source scale layouts this scheme holds without touching the payload: bit (1 << fp8::ScaleLayout)
   * (FP8_BLOCK: one scale per tensor, or 128 x 128 blocks; FP8_DYNAMIC: per tensor or per channel). 0: none. */
  std::uint8_t passthrough_layouts = 0;
  /** How a packed E2M1 (MXFP4) source goes into this scheme without re-encoding (codec/mxfp4_cast.h): NVFP4A16 folds
   * the E8M0 block scales into E4M3 ones under a power-of-two global scale, MXFP4A16 keeps them; NONE re-encodes. */
  mxcast::Target e2m1_cast = mxcast::Target::NONE;
};

/** The scheme table: one row per QuantScheme, in kQuantSchemes order. */
std::span<const SchemeTraits> scheme_table() noexcept;
/** The row of `s`. */
const SchemeTraits& scheme_traits(QuantScheme s) noexcept;

/** The stored tensors of one quantized Linear, as read from a checkpoint (layouts of linear_tensors). */
struct LinearData {
  const std::byte* payload = nullptr;  ///< `weight_packed` or FP8's `weight`
  const std::byte* scale = nullptr;    ///< `weight_scale`
  DType scale_dtype = DType::BF16;     ///< its dtype (FP8 and W4A16: BF16, F16 or F32 as stored)
  float global_scale = 1.0f;           ///< `weight_global_scale` (NVFP4A16 only)
};

/**
 * Dequantizes rows [r0, r1) of a Linear [n, k] stored in scheme `s` to float32 the way the
 * compressed-tensors decompressor does, value x scale (NVFP4A16 `E2M1(code) x fl32(s / gs)`; MXFP4
 * `E2M1(code) x 2^(e - 127)`; FP8 `E4M3(code) x s` of its row or 128 x 128 block; W4A16
 * `(nibble - 8) x s`), without the final cast to the model dtype. Writes (r1 - r0) * k floats to `out`.
 * NaN codes and NaN scales decode to NaN. The caller guarantees the layouts (verify checked them).
 */
void decode_linear_rows(QuantScheme s, const LinearData& d, std::uint64_t n, std::uint64_t k, std::uint64_t r0,
                        std::uint64_t r1, float* out);

}  // namespace fp4forge
