#pragma once
/**
 * A Hugging Face checkpoint directory: config.json (optional for some commands), one safetensors file
 * or several shards described by `*.safetensors.index.json`, and other files (tokenizer, processor...).
 *
 * open() validates: every shard header (ShardReader); the index and the shards agree both ways (each
 * listed tensor exists in the named shard; each shard tensor is listed, in exactly one shard); shard
 * names are plain file names inside the directory (no '/', no '..', not absolute; a symlink must not
 * resolve outside the directory, except into the `../../blobs/` folder of a Hugging Face hub cache
 * snapshot, `<repo>/snapshots/<rev>/`); no tensor name appears in two shards. A metadata.total_size
 * that is not the sum of tensor bytes (or not a non-negative integer) is a note, not an error:
 * transformers and vLLM never read it, and real uploads get it wrong. config.json and the index are parsed with
 * parse_json_bounded (duplicate keys are an error).
 * Without an index, every `*.safetensors` file in the directory is a shard; with one, a `*.safetensors` file it
 * does not name (Mistral's consolidated.safetensors, a leftover of an older export) is a note too: vLLM and
 * transformers load only the shards the index names, and it is neither a shard nor copied by quantize.
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
#include "fp4forge/core/finding_kinds.h"
#include "fp4forge/safetensors/shard_reader.h"

namespace fp4forge {

/** A tensor of the checkpoint: which shard holds it, and its header entry. */
struct TensorRef {
  std::string name;
  std::size_t shard = 0;              ///< index into Checkpoint::shards()
  const st::TensorInfo* info = nullptr;  ///< owned by the shard reader
};

/** Something the readers of checkpoints ignore: a finding of its kind's default severity for every command, never
 * a refusal. */
struct CheckpointNote {
  const FindingKind* kind;  ///< its registry row (core/finding_kinds.h): index-total-size, shard-not-in-index
  std::string message;      ///< one line, names the file
  std::string key;          ///< the file (and field) it is about
  std::string expected;     ///< what it should hold, where one value says it
  std::string hint;         ///< what the readers do with it
  std::string fix;          ///< doctor --fix's repair (empty: none)
};

struct CheckpointOptions {
  bool require_config = true;   ///< BAD_INPUT if config.json is missing
  bool require_weights = true;  ///< BAD_INPUT if no safetensors file exists
};

/** One tensor of an in-memory checkpoint: its bytes as they would sit in a safetensors file. */
struct MemoryTensor {
  std::string name;
  DType dtype = DType::BF16;
  std::vector<std::uint64_t> shape;
  std::vector<std::byte> bytes;  ///< numel x the dtype's size
};

class Checkpoint {
 public:
  static Result<Checkpoint> open(const std::filesystem::path& dir, CheckpointOptions opts = {});
  /**
   * The reader seam: a checkpoint held in memory, one shard ("model.safetensors", laid out as the shard
   * writer lays out a file and read back through the same header validation), no index, no other files.
   * Every command's logic reads it as it reads a folder (`dir()` is `label`), so rules get unit tests
   * without files. BAD_INPUT for a tensor whose bytes do not match its dtype and shape, or a duplicate name.
   */
  static Result<Checkpoint> from_memory(nlohmann::ordered_json config, std::vector<MemoryTensor> tensors,
                                        std::filesystem::path label = "memory");

  const std::filesystem::path& dir() const noexcept { return dir_; }
  bool has_config() const noexcept { return has_config_; }
  /** config.json, key order preserved. Empty object when absent. */
  const nlohmann::ordered_json& config() const noexcept { return config_; }
  /** The index file name (e.g. "model.safetensors.index.json"), if the checkpoint has one. */
  const std::optional<std::string>& index_file() const noexcept { return index_file_; }
  /** Shard file names (basenames): with an index, in order of first appearance when the weight_map
   *  is read in tensor-name order; without one, sorted. */
  const std::vector<std::string>& shard_names() const noexcept { return shard_names_; }
  const std::vector<st::ShardReader>& shards() const noexcept { return shards_; }
  /** Every tensor, sorted by name. */
  const std::vector<TensorRef>& tensors() const noexcept { return tensors_; }
  const TensorRef* find(std::string_view name) const noexcept;
  std::span<const std::byte> data(const TensorRef& t) const noexcept;
  /** The first shard that changed since open (ShardReader::check_unchanged); ok when none did. Call it
   * after reading and before using what was read: a shard truncated mid-read yields zeros, not data. */
  Status check_unchanged() const;
  /** Files in the directory that are not shards and not the index (config.json included), sorted. */
  const std::vector<std::string>& other_files() const noexcept { return other_files_; }
  /** "" when `file` (a name in the directory) is no symlink or resolves inside the checkpoint (the shard
   * confinement rule, Hugging Face cache blobs allowed), else why not (a file to refuse or skip). */
  std::string escapes(const std::string& file) const;
  /** Sum of tensor data bytes. */
  std::uint64_t total_tensor_bytes() const noexcept;
  /** What open() noticed and let pass (a stale metadata.total_size). */
  const std::vector<CheckpointNote>& notes() const noexcept { return notes_; }

 private:
  std::filesystem::path dir_;
  bool has_config_ = false;
  nlohmann::ordered_json config_ = nlohmann::ordered_json::object();
  std::optional<std::string> index_file_;
  std::vector<std::string> shard_names_;
  std::vector<st::ShardReader> shards_;
  std::vector<TensorRef> tensors_;
  std::vector<std::string> other_files_;
  std::vector<CheckpointNote> notes_;
};

/** True when `dir` holds a `*.safetensors` file or `model.safetensors.index.json`: a checkpoint's weights, whole or
 * broken, as opposed to a config-only folder (plan's weights= case). A folder that cannot be listed holds none. */
bool holds_weight_files(const std::filesystem::path& dir);

/** Parses JSON text with a size/depth bound (BAD_INPUT with line/column on syntax errors). */
Result<nlohmann::ordered_json> parse_json_bounded(std::string_view text, std::string_view source,
                                                  std::size_t max_depth = 64);

}  // namespace fp4forge
