#pragma once
/**
 * KV-cache bytes exactly as vLLM's v1 engine computes them, without a GPU (architectures.md §4).
 *
 * build_kv_layout() turns a config into per-layer KV specs (full attention, sliding window,
 * GatedDeltaNet/Mamba state; KV-shared layers allocate nothing), applies tensor parallelism the way
 * vLLM does (kv := max(1, kv // TP); Hk, Hv := / TP), raises the attention block size of hybrid
 * models so one page holds a state (§4.2), unifies page sizes and forms vLLM's groups. The layout
 * does not depend on max_model_len, max_num_batched_tokens or the memory budget; kv_demand() and the
 * functions after it do. All functions are pure.
 */
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp4forge/core/error.h"
#include "fp4forge/kvplan/vllm_version.h"
#include "fp4forge/model/model_info.h"

namespace fp4forge::kvplan {

/** A `--kv-cache-dtype` value, parsed once where its text is read (the seat key kv_cache_dtype=). */
enum class KvCacheDtype : std::uint8_t {
  AUTO, BF16, FP8, FP8_E4M3, FP8_E5M2,
  FP8_PER_TOKEN_HEAD, INT8_PER_TOKEN_HEAD, INT4_PER_TOKEN_HEAD,  ///< vLLM's Triton backend formats
};
/** From its vLLM spelling, case-insensitive (bf16 = bfloat16). USAGE error listing the values otherwise. */
Result<KvCacheDtype> parse_kv_cache_dtype(std::string_view text);
/** The vLLM spelling ("auto", "bfloat16", "fp8", "int4_per_token_head", ...): the stack's --kv-cache-dtype
 * argument and the plan's --json value. */
std::string_view kv_cache_dtype_name(KvCacheDtype d) noexcept;
/** Bytes per element: bf16 -> 2, the fp8 and per-token-head formats -> 1; auto -> `model_dtype_bytes` (2: vLLM
 * serves these models in bf16). */
int kv_cache_dtype_bytes(KvCacheDtype d, int model_dtype_bytes = 2) noexcept;
/** True for the per-token-head KV formats (fp8/int8/int4_per_token_head: vLLM's Triton backend). */
bool per_token_head(KvCacheDtype d) noexcept;
/** KV bytes of one token and one kv head (K and V): 2 * head_dim * dtype_bytes, or for the per-token-head
 * formats (vLLM's Triton backend, in vLLM since 0.20 - 0.24) 2 * head_dim + 8 (fp8/int8, two fp32 scales) and
 * head_dim + 8 (int4). */
std::uint64_t kv_head_token_bytes(KvCacheDtype d, std::int64_t head_dim, int dtype_bytes) noexcept;
/** `--dtype`: what vLLM serves the model in (kv_cache_dtype auto follows it); parsed once at the seat key. */
enum class ModelDtype : std::uint8_t { AUTO, BFLOAT16, FLOAT16, FLOAT32 };
/** auto, bfloat16, float16 (half), float32 (float), case-insensitive; USAGE otherwise. */
Result<ModelDtype> parse_model_dtype(std::string_view text);
/** vLLM's spelling: "auto", "bfloat16", "float16", "float32". */
std::string_view model_dtype_name(ModelDtype d) noexcept;
/** A Mamba state dtype (`--mamba-cache-dtype`, `--mamba-ssm-cache-dtype`, config.json `mamba_ssm_dtype`). */
enum class StateDtype : std::uint8_t { AUTO, FLOAT32, BFLOAT16, FLOAT16 };
/** auto, float32 (fp32), bfloat16 (bf16), float16 (fp16, half), case-insensitive; USAGE otherwise. */
Result<StateDtype> parse_state_dtype(std::string_view text);
/** vLLM's spelling: "auto", "float32", "bfloat16", "float16". */
std::string_view state_dtype_name(StateDtype d) noexcept;
/** Bytes of a state element: float32 4, bfloat16 / float16 2; auto -> `dflt`. */
int state_dtype_bytes(StateDtype d, int dflt) noexcept;

enum class LayerKind { FULL, SLIDING, STATE };
/** "full_attention", "sliding_window", "mamba_state". */
std::string_view layer_kind_name(LayerKind k) noexcept;

struct KvOptions {
  int tp = 1;                                  ///< tensor-parallel size
  KvCacheDtype kv_cache_dtype = KvCacheDtype::AUTO;  ///< --kv-cache-dtype
  ModelDtype dtype = ModelDtype::AUTO;         ///< --dtype: auto (bf16/fp16; vLLM casts fp32 checkpoints down),
                                               ///< bfloat16, float16 or float32 (what kv_cache_dtype auto follows)
  StateDtype mamba_cache_dtype = StateDtype::AUTO;  ///< --mamba-cache-dtype (conv state; auto = model dtype)
  /** --mamba-ssm-cache-dtype (recurrent state; auto = config mamba_ssm_dtype, else the conv dtype) */
  StateDtype mamba_ssm_cache_dtype = StateDtype::AUTO;
  bool prefix_caching = true;                  ///< state layers use "align" mode: 2 pages per request
  int spec_tokens = 0;                         ///< speculative tokens (MTP): extra conv rows and state pages
  std::int64_t block_size = 0;                 ///< --block-size; 0 = unset (16, or the hybrid alignment)
  std::int64_t kernel_block_alignment = 16;    ///< `a` of §4.2 (FlashAttention / FlashInfer on CUDA)
  bool hybrid_kv_cache_manager = true;         ///< false = --disable-hybrid-kv-cache-manager
};

/** The KV spec of one layer that allocates cache (per rank, after TP). */
struct LayerSpec {
  int layer = -1;
  LayerKind kind = LayerKind::FULL;
  std::int64_t kv_heads = 0;  ///< per rank
  std::int64_t head_dim = 0;
  std::int64_t window = 0;    ///< sliding window (0 for full / state)
  std::uint64_t conv_state_bytes = 0, ssm_state_bytes = 0;  ///< state layers, per rank
  std::int64_t block_size = 0;   ///< tokens per block after hybrid alignment and page unification
  std::uint64_t page_bytes = 0;  ///< bytes per block of this layer (state pages padded)
  std::uint64_t bytes_per_token = 0;  ///< attention: 2 * kv_heads * head_dim * dtype; 0 for state
};

/** vLLM's grouping outcome (§4.2 steps 1-3). */
enum class GroupingMode {
  NONE,          ///< attention-free: no KV cache
  UNIFORM,       ///< every layer spec equal: one group of all layers
  UNIFORM_TYPE,  ///< same type and block, different page sizes: one group, per-layer pages
  HYBRID,        ///< unified page size, groups of g layers sharing g memory pools
};
std::string_view grouping_mode_name(GroupingMode m) noexcept;  ///< "none", "uniform", ...

struct KvGroup {
  LayerKind kind = LayerKind::FULL;
  std::int64_t block_size = 0;
  std::int64_t window = 0;
  std::vector<int> layers;  ///< the real layers of the group (fewer than group_size when padded)
  int state_pages = 0;      ///< state groups: pages held per request (1 or 2, plus spec tokens)
};

struct KvLayout {
  std::vector<LayerSpec> layers;       ///< layers that allocate KV, in layer order
  std::vector<int> kv_shared_layers;   ///< layers that reuse another layer's KV (allocate nothing)
  int tp = 1;
  int kv_dtype_bytes = 2, conv_dtype_bytes = 2, ssm_dtype_bytes = 2;
  GroupingMode mode = GroupingMode::NONE;
  /** Bytes of one block across one pool: the unified per-layer page (UNIFORM, HYBRID) or the sum of
   * all layers' pages (UNIFORM_TYPE). */
  std::uint64_t page_bytes = 0;
  /** Layers per group = number of memory pools (g). 1 for UNIFORM_TYPE (its page is the sum). */
  std::int64_t group_size = 0;
  std::vector<KvGroup> groups;
  std::int64_t min_block_size = 0;   ///< smallest block size over the groups
  // Hybrid (attention + state) alignment, §4.2:
  std::uint64_t state_bytes = 0;         ///< unpadded state page (conv + recurrent), per rank
  std::uint64_t state_padding_bytes = 0; ///< padding added to reach the attention page
  std::int64_t attn_block_size = 0;      ///< attention block size vLLM chooses
  /** Bytes per token that grow with the sequence (full-attention layers; with the hybrid manager
   * disabled also the sliding ones). */
  std::uint64_t growing_bytes_per_token = 0;
  /** All attention layers as if none were windowed (the common naive figure). */
  std::uint64_t naive_bytes_per_token = 0;
  std::vector<std::string> notes;  ///< assumptions worth printing (e.g. the MTP layer's KV)
  /** True when some layer holds recurrent state (GatedDeltaNet / Mamba): a hybrid model. */
  bool has_state_layers() const noexcept {
    return std::any_of(layers.begin(), layers.end(), [](const LayerSpec& l) { return l.kind == LayerKind::STATE; });
  }
};

/**
 * Builds the layout from config.json (`config`) and its ModelInfo. BAD_INPUT for configs vLLM could
 * not serve this way (missing head geometry, TP not dividing heads, unsupported layer type, page sizes
 * that do not divide); USAGE for bad option values (dtype names, tp < 1).
 */
Result<KvLayout> build_kv_layout(const ModelInfo& info, const nlohmann::ordered_json& config,
                                 const KvOptions& opts);

/** What one request of max_model_len tokens reserves. `in_flight_tokens` is what a sliding-window layer
 * keeps beyond its window: max_num_batched_tokens, or twice that under async scheduling (vLLM >= 0.26,
 * VllmRules::sliding_in_flight_factor). */
struct KvDemand {
  std::int64_t max_model_len = 0;
  std::int64_t in_flight_tokens = 0;  ///< as passed to kv_demand (sliding layers keep W - 1 + this)
  std::vector<std::int64_t> blocks_per_group;  ///< ceil(group_max_bytes / page), per group
  std::int64_t blocks_per_request = 0;         ///< sum over groups
  std::uint64_t bytes_per_request = 0;         ///< g * page * blocks_per_request (§4.2 step 5)
};
KvDemand kv_demand(const KvLayout& layout, std::int64_t max_model_len, std::int64_t in_flight_tokens);

/** num_blocks = available // page // g (§4.2 step 4). */
std::int64_t kv_num_blocks(const KvLayout& layout, std::uint64_t available_bytes);
/** "Maximum concurrency for L tokens per request" = num_blocks / blocks_per_request. */
double kv_max_concurrency(const KvDemand& demand, std::int64_t num_blocks);
/** "GPU KV cache size: N tokens" = num_blocks // groups * min_block_size (not meaningful for hybrid). */
std::int64_t kv_cache_tokens(const KvLayout& layout, std::int64_t num_blocks);

/** The two lines vLLM logs after sizing the cache, as the given version computes them. */
struct KvReport {
  std::int64_t tokens = 0;       ///< "GPU KV cache size: N tokens"
  double max_concurrency = 0.0;  ///< "Maximum concurrency for L tokens per request: Cx"
};
/** <= 0.9.0: tokens = num_blocks * block_size, concurrency = tokens / L; 0.9.1 - 0.20: tokens =
 * kv_cache_tokens(), concurrency = kv_max_concurrency(); >= 0.21: tokens = int(concurrency * L). */
KvReport kv_report(const KvLayout& layout, const KvDemand& demand, std::int64_t num_blocks, const VllmRules& rules);
/** Smallest available KV memory whose num_blocks gives a concurrency >= target (target > 0). */
std::uint64_t kv_bytes_for_concurrency(const KvLayout& layout, const KvDemand& demand, double target);
/** Largest max_model_len in [1, upper] whose per-request reservation fits `available_bytes` (binary
 * search, as vLLM's auto max_model_len); 0 when not even one token fits. With `concurrency` above 1, the largest
 * for which that many requests fit (kv_bytes_for_concurrency: the length a seat planned for C requests can take;
 * issue 55 tryout: one request's length was offered to a seat of four). */
std::int64_t largest_max_model_len(const KvLayout& layout, std::uint64_t available_bytes, std::int64_t in_flight_tokens,
                                   std::int64_t upper, double concurrency = 1.0);

/** vLLM's "large GPU" rule for its scheduler defaults: >= 70 GiB and not an A100. */
bool vllm_large_gpu(std::uint64_t gpu_total_bytes, std::string_view gpu_name);
/** vLLM's API-server default: 8192 on GPUs with >= 70 GiB that are not A100s, else 2048. */
std::int64_t default_max_num_batched_tokens(std::uint64_t gpu_total_bytes, std::string_view gpu_name);

}  // namespace fp4forge::kvplan
