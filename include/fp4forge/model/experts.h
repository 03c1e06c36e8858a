#pragma once
/**
 * Routed-expert storage: the one place that decides how a checkpoint stores its experts and how each
 * expert's gate / up / down matrix is found inside the stored tensors. quantize (splitting), verify
 * (finding the source of a per-expert module) and doctor (shape rules) all read it.
 *
 * Forms (docs/registry.md §3, "Expert storage"):
 * - per expert 2-D: `<key>.<e>.<gate|up|down>.weight` with any of the leaf names classify() knows
 *   (gate_proj/up_proj/down_proj, w1/w3/w2);
 * - fused 3-D: `<key>.gate_up_proj` + `<key>.down_proj` (or Granite's `input_linear` / `output_linear`),
 *   or three separate 3-D tensors `<key>.gate_proj` + `<key>.up_proj` + `<key>.down_proj` (Step-3.x),
 *   in either orientation: OUT_IN `[E, 2I, H]` / `[E, H, I]` (nn.Linear order) or IN_OUT `[E, H, 2I]` /
 *   `[E, I, H]`. The orientation comes from the shapes (gate_up and down together, against hidden_size),
 *   never from the family name; the 2·I outputs are concatenated (gate first) or interleaved (the
 *   family's GateUpOrder).
 */
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fp4forge/model/arch_class.h"
#include "fp4forge/model/model_info.h"
#include "fp4forge/model/tensor_role.h"

namespace fp4forge {

/** A [rows, cols] matrix inside a tensor: element (r, c) is element `offset + r·row_stride + c·col_stride`. */
struct MatrixSlice {
  std::uint64_t offset = 0, rows = 0, cols = 0, row_stride = 0, col_stride = 1;
  bool contiguous() const noexcept { return col_stride == 1 && (row_stride == cols || rows <= 1); }
  bool operator==(const MatrixSlice&) const = default;
};

/** Copies rows [r0, r1) of `s` (elements of `elem_bytes` bytes, counted from `base`) into `out`, row-major. */
void gather_rows(const std::byte* base, std::size_t elem_bytes, const MatrixSlice& s, std::uint64_t r0,
                 std::uint64_t r1, std::byte* out);

enum class ExpertStorage : std::uint8_t { PER_EXPERT, FUSED };
enum class FusedOrientation : std::uint8_t {
  OUT_IN,  ///< gate_up [E, 2I, H], down [E, H, I] (each expert an nn.Linear weight)
  IN_OUT,  ///< gate_up [E, H, 2I], down [E, I, H] (transposed: Llama-4, gpt-oss, Qwen3-VL-MoE Hub releases)
};
std::string_view orientation_name(FusedOrientation o) noexcept;  ///< "out-in", "in-out"
/** Parses "out-in" / "in-out"; nullopt otherwise. */
std::optional<FusedOrientation> parse_orientation(std::string_view s) noexcept;

/** One expert's gate, up or down matrix. */
struct ExpertPart {
  int expert = -1;
  Role role = Role::OTHER;  ///< EXPERT_GATE, EXPERT_UP or EXPERT_DOWN
  std::string module;       ///< per-expert module name: `<key>.<e>.gate_proj` (the output name for fused sources)
  std::string tensor;       ///< the stored tensor it lives in
  MatrixSlice slice;        ///< [out_features, in_features] inside `tensor` (fused or 2-D `.weight` only)
};

/** The routed experts of one layer (or of the MTP block). */
struct ExpertBlock {
  std::string key;  ///< module prefix of the experts, e.g. "model.layers.3.mlp.experts"
  ExpertStorage storage = ExpertStorage::PER_EXPERT;
  FusedOrientation orientation = FusedOrientation::OUT_IN;  ///< fused only
  GateUpOrder order = GateUpOrder::CONCATENATED;            ///< fused only
  std::string gate_up, down;  ///< fused tensor names ("" when absent)
  /** Fused 3-D gate and up stored as two tensors (`<key>.gate_proj [E, I, H]` + `<key>.up_proj`, as Step-3.x
   * writes them) instead of one gate_up; "" when absent. */
  std::string gate, up;
  /** The stored fused tensors of the block (gate_up or gate + up, then down), non-empty names only. */
  std::vector<std::string> stored() const;
  std::uint64_t num_experts = 0, hidden = 0, intermediate = 0;  ///< from the shapes (fused), 0 if unknown
  bool mtp = false;           ///< inside the MTP block
  std::vector<ExpertPart> parts;  ///< fused: E × {gate, up, down}; per expert: the matrices found
  /** Non-empty: the fused layout could not be decided (both or neither orientation fits); says why and
   * names the option that settles it. parts is then empty. */
  std::string problem;
  bool ambiguous = false;  ///< the problem is that both orientations fit (not that neither does)
};

/** What fp4forge assumes of a fused gate_up stack outside the registry (the registry row's gate_up_order
 * decides it inside): quantize splits by it and verify --against compares by it, so both say so
 * (`experts-order-assumed`). */
inline constexpr std::string_view kAssumedGateUpOrder =
    "concatenated halves (gate = the first I rows, up = the next I), transformers' layout for most families; a "
    "family that interleaves them (gpt-oss) needs its registry row";

struct ExpertLayoutOptions {
  /** Settles a fused orientation that the shapes leave ambiguous (`--expert-orientation`). */
  std::optional<FusedOrientation> orientation;
};

/**
 * Every expert block among `tensors` (unquantized or quantized checkpoints; a quantized per-expert
 * module counts by its `weight_packed`). Pure; sorted by key. Never fails: an undecidable fused
 * layout is reported in ExpertBlock::problem.
 */
std::vector<ExpertBlock> find_expert_blocks(std::span<const NamedShape> tensors, const ModelInfo& info,
                                            const ExpertLayoutOptions& opts = {});

/**
 * The experts of `b` that are incomplete: each expert must hold the same matrices as every other one, and
 * those must be gate + up + down (gated) or up + down (non-gated experts, e.g. Nemotron-H's relu² MLPs).
 * Sorted; empty when the block is complete.
 */
std::vector<int> incomplete_experts(const ExpertBlock& b);

/**
 * Removes from a per-expert block the parts of LongCat-Flash-style zero-computation experts (indices
 * num_experts .. num_experts + zero_experts - 1: computed as the identity, so whatever tensors a writer left for
 * them are no weights of the model) and returns their indices, sorted; empty (b untouched) when there are none.
 */
std::vector<int> drop_zero_experts(ExpertBlock& b, const ModelInfo& info);

/** The routed-experts key of a per-expert name: "<...>.experts" for "<...>.experts.<e>.<leaf>" (the last
 * ".experts." in it), "" for any other name. The one derivation of a block key from a name. */
std::string_view experts_key_of(std::string_view module) noexcept;

/** The block whose key prefixes `module` (`<key>.<e>.<proj>`), or nullptr. */
const ExpertBlock* block_of(std::span<const ExpertBlock> blocks, std::string_view module) noexcept;

/** The part named `module` in `blocks`, or nullptr. */
const ExpertPart* part_of(std::span<const ExpertBlock> blocks, std::string_view module) noexcept;

}  // namespace fp4forge
