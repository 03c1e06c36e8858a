#pragma once
/**
 * `fp4forge synth`: writes a random-weight BF16 checkpoint with the exact layout of a family
 * (config.json, tensor names and shapes, sharding + index, generation_config.json, and
 * processor_config.json with a nested image_processor for multimodal families).
 *
 * - Deterministic: the bytes of every tensor depend only on (seed, tensor name); values are
 *   normal-ish (Irwin-Hall of 4 uniforms), std 0.02, from a splitmix64 stream.
 * - Streaming: tensors are generated in fixed-size chunks straight into st::ShardWriter::write_at,
 *   so memory stays bounded (a few MiB) even for `--size 8b` (~15 GiB).
 * - `tiny` geometries copy the fixtures in tests/data (same names and shapes); `small` is ~100-300 MB;
 *   `8b` has Llama-3-8B-class geometry (llama: H 4096, 32 layers, 32 heads, 8 kv, I 14336, V 128256)
 *   with ~5 GB shards.
 * - `config`: any config.json of a synth family read back into the layout (27B, 235B, ...: the release's own
 *   widths, layers, experts, layer types and vision tower), with ~5 GB shards. A feature the layout does not
 *   write (Gemma-4 per-layer inputs, dense layers in a MoE) is refused by name, never approximated. The
 *   decoder-only families Mistral, Phi-3, Qwen2, Qwen3, Mixtral, Qwen2-MoE, DeepSeek-V2/V3 and GLM-4.5 MoE are
 *   laid out by one rule over their registry row (synth_decoder.cc; a 671B DeepSeek-V3 with its MTP layer) and
 *   keep the config as given (less its quantization_config: the weights are BF16).
 * - `header_only`: every shard is written as its header and a sparse data section (ftruncate: no data on disk,
 *   reads as zeros), so a 671B-class layout costs megabytes and seconds. Its safetensors metadata says so
 *   (`fp4forge_synth: header-only`). For inspect, doctor and plan; not for quantize or serving.
 */
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp4forge/core/error.h"
#include "fp4forge/util/progress_sink.h"

namespace fp4forge {

class Checkpoint;

/** The safetensors metadata pair a `--header-only` shard carries: fp4forge_synth = header-only. */
inline constexpr std::string_view kSynthMetadataKey = "fp4forge_synth";
inline constexpr std::string_view kSynthHeaderOnly = "header-only";
/** True when any shard of `ck` carries that pair: its tensor data reads as zeros (doctor's header-only-weights, an
 * error; plan's header-only blocker). */
bool header_only_synth(const Checkpoint& ck) noexcept;

/** Accepted --arch values: llama, qwen3-moe, gemma4-dense, gemma4-moe, qwen3_5-dense, qwen3_5-moe. */
std::span<const std::string_view> synth_archs() noexcept;
/** The family ids laid out by rule from a config alone (--config only): mistral, phi3, qwen2, qwen3, gemma3 (its
 * text class), qwen3_next, qwen3_5 (its text class), mixtral, qwen2_moe, deepseek_v2, deepseek_v3, glm4_moe. */
std::vector<std::string_view> synth_rule_families();
/** Accepted --size values: tiny, small, 8b. */
std::span<const std::string_view> synth_sizes() noexcept;

struct SynthOptions {
  std::string arch;
  std::string size = "tiny";
  std::filesystem::path out;
  std::uint64_t seed = 0;
  bool force = false;  ///< write into an existing non-empty directory (old checkpoint files are removed)
  ProgressSink* progress = nullptr;  ///< reports bytes written and shards (the CLI draws a bar)
  std::uint64_t max_shard_bytes = 0;  ///< 0: by size (tiny 256 KiB, small 64 MiB, 8b and config 5 GB)
  /** --config: the geometry of this config.json (size is then "config"; arch may be empty: read from it). */
  std::optional<nlohmann::ordered_json> config;
  std::string config_source;  ///< where `config` was read (reported)
  bool header_only = false;   ///< sparse data sections: headers only on disk (see above)
};

/** One planned tensor. */
struct SynthTensor {
  std::string name;
  std::vector<std::uint64_t> shape;
  std::string shard;  ///< shard file name
};

/** The planned checkpoint: everything decided before any byte is written. */
struct SynthPlan {
  std::string arch, size;
  nlohmann::json config;  ///< config.json (sorted keys, as transformers writes)
  nlohmann::json generation_config;
  nlohmann::json processor_config;   ///< null for text-only families
  std::vector<SynthTensor> tensors;  ///< in module order
  std::vector<std::string> shards;   ///< shard names, in order
  std::uint64_t total_params = 0, total_bytes = 0;
  std::vector<std::string> notes;  ///< what of a --config was not written as given (its quantization_config)
};

/** Plans a checkpoint (no I/O). USAGE for an unknown arch or size. */
Result<SynthPlan> plan_synth(std::string_view arch, std::string_view size, std::uint64_t max_shard_bytes = 0);
/** Plans a checkpoint at a config's own geometry (size "config"). `arch` empty: the config's family decides.
 * USAGE when `arch` disagrees with the config; BAD_INPUT for a family synth does not lay out or a config
 * feature its layout does not write. */
Result<SynthPlan> plan_synth_from_config(const nlohmann::ordered_json& config, std::string_view arch = {},
                                         std::uint64_t max_shard_bytes = 0);

struct SynthReport {
  std::filesystem::path out;
  std::string arch, size;
  std::uint64_t seed = 0;
  std::uint64_t num_tensors = 0, total_params = 0, total_bytes = 0;
  std::vector<std::string> shards;
  std::vector<std::string> files;  ///< every file written (basenames)
  double seconds = 0;
  bool header_only = false;
  std::string config_source;        ///< --config (empty for a built-in size)
  std::uint64_t bytes_on_disk = 0;  ///< what the shards take (headers only when header_only)
  std::vector<std::string> notes;   ///< SynthPlan::notes
};

/**
 * What an interrupted synth leaves behind, removed: taken before synth_checkpoint runs (it notes which folders of
 * OUT do not exist yet), `clean()` removes the files synth writes (shards, their `.partial` temporaries, index,
 * configs, tokenizer) from OUT and then the folders synth created, when empty. Anything else in OUT is kept, and so
 * is every such file OUT held before and still holds unchanged (a refused run leaves OUT as it was). Safe
 * to call from the CLI's interrupt watcher while synth runs. Returns how many files it removed.
 */
class SynthCleanup {
 public:
  static SynthCleanup before(const std::filesystem::path& out);
  std::size_t clean() const noexcept;
  /** The topmost folder synth will create ("" when OUT exists). */
  const std::filesystem::path& created() const noexcept { return top_created_; }

 private:
  std::filesystem::path out_, top_created_;
  /** The checkpoint files OUT held before (name, inode, size, mtime): clean() never removes one still as it was,
   * so a refused run (OUT not empty, a usage error) leaves a folder exactly as it found it. */
  struct Before {
    std::string name;
    std::uint64_t inode = 0, size = 0;
    std::int64_t mtime_ns = 0;
    bool operator==(const Before&) const = default;
  };
  std::vector<Before> before_;
};

/**
 * Plans and writes the checkpoint. Errors: USAGE (unknown arch/size), BAD_INPUT (--out exists and is not
 * an empty directory, without force), IO (mkdir / write / fsync / rename / not enough free space).
 */
Result<SynthReport> synth_checkpoint(const SynthOptions& opts);

/** Fills `out` with the BF16 values of tensor `name` starting at element `first` (for tests / tools). */
void synth_fill_bf16(std::uint64_t seed, std::string_view name, std::uint64_t first,
                     std::span<std::uint16_t> out);

nlohmann::ordered_json to_json(const SynthReport& r);
/** "wrote ARCH SIZE checkpoint to OUT: N tensors, ..." */
std::string to_text(const SynthReport& r);

}  // namespace fp4forge
