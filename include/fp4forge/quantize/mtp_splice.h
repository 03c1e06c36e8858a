#pragma once
/**
 * Splicing multi-token-prediction (MTP) tensors back into a checkpoint that lost them (F8): a model
 * re-saved through plain transformers drops `mtp.*` (Qwen3-Next, Qwen3.5/3.6) or the extra decoder
 * layers `layers.[N, N + num_nextn_predict_layers)` (DeepSeek-V3, GLM-4.5). `doctor --fix --mtp-from SRC`
 * and `quantize --mtp-from SRC` both call splice_mtp().
 *
 * What it does, in order, refusing (nothing written) at the first step that fails:
 * 1. Opens the target and SRC as checkpoints. The target's family must store MTP (the registry's
 *    MtpForm) and its config must declare at least one MTP layer.
 * 2. SRC's config must describe the same model: architecture, family, hidden size, layer count,
 *    vocabulary, heads, widths, expert counts, MLA ranks and MTP layer count equal (BAD_INPUT naming
 *    every field that differs).
 * 3. SRC's MTP tensors (classify's Role::MTP, restricted to the declared layers) must exist, cover every
 *    declared layer, and be unquantized floating point (BF16 / F16 / F32); they are copied as they are.
 * 4. The target's own MTP tensors decide the case: none -> splice; exactly SRC's names with SRC's
 *    dtypes and shapes -> nothing to copy (idempotent), only a missing `ignore` entry or index entry is
 *    completed; a complete MTP of other names -> nothing to do; anything partial or conflicting -> refused.
 * 5. A quantized (compressed-tensors) target gets the MTP modules in `quantization_config.ignore`,
 *    computed by quantize's own planner on the MTP tensors (quant::make_plan), so the list equals what
 *    `quantize` writes when MTP is present: explicit names, merged in sorted order when the list is sorted.
 * 6. doctor's shape checks run on the checkpoint as it would be after the splice (config + tensor
 *    list); an error they find that the target did not already have refuses the splice.
 * 7. Writes, unless dry_run: named backups (util/backup.h) of config.json and the index; the MTP tensors,
 *    byte for byte, into one new shard `model-mtp.safetensors` (safetensors/shard_writer.h: `.partial`,
 *    fsync, rename); config.json and the index through fs::edit_file_atomic (a symbolic link is refused
 *    before anything is written). A target without an index gets `model.safetensors.index.json`.
 *
 * Order and crash safety: the shard is written and fsynced under its `.partial` name, then config.json
 * is replaced, then the shard is renamed into place, then the index is replaced (or created). The index
 * is the commit point for every loader that reads it (transformers, vLLM with an index): an unindexed
 * shard is invisible to them. A failure at any step restores what the earlier steps changed (config.json
 * from its original bytes, the new shard removed). After a crash, running the splice again completes it:
 * a leftover `model-mtp.safetensors` that is byte-identical to what it would write is adopted, any other
 * file of that name is refused. SRC is only read (and a SRC shard that changes during the copy fails it).
 */
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp4forge/core/error.h"
#include "fp4forge/util/file_change.h"

namespace fp4forge::quant {

/** The shard name the spliced MTP tensors get (as transformers and llm-compressor name it). */
inline constexpr const char* kMtpShardName = "model-mtp.safetensors";

struct MtpSpliceOptions {
  bool dry_run = false;  ///< check and plan everything, write nothing
  /** Backup timestamp "YYYYMMDD-HHMMSS"; empty: the local time now. */
  std::string timestamp;
  /**
   * The target is a folder fp4forge owns (quantize's staging folder): no backups are written, and a
   * `model-mtp.safetensors` outside the index (left by an interrupted earlier run) is replaced instead
   * of refused.
   */
  bool owned_target = false;
};

/** What splice_mtp did (or, in a dry run, would do). */
struct MtpSpliceReport {
  std::string target;
  std::string source;
  std::string family;    ///< family_name() of the target
  std::string form;      ///< "mtp.*" or "extra decoder layers"
  std::int64_t layers = 0;  ///< MTP layers the config declares
  /** "spliced", "completed" (tensors were there, ignore / index entries added), "already-present",
   * "own-mtp-present" (the target has a complete MTP of its own; nothing done). */
  std::string status;
  bool dry_run = false;
  std::string shard;              ///< the shard holding the MTP tensors ("" when own-mtp-present)
  std::uint64_t tensors = 0;      ///< MTP tensors copied (0 unless spliced)
  std::uint64_t bytes = 0;        ///< their data bytes
  std::uint64_t shard_bytes = 0;  ///< the new shard's file size (headers included)
  bool shard_adopted = false;     ///< a byte-identical leftover shard was reused, not rewritten
  std::vector<std::string> dtypes;        ///< the dtypes of the spliced tensors, sorted
  std::vector<std::string> ignore_added;  ///< entries added to quantization_config.ignore
  bool index_created = false;
  std::vector<FileChange> changes;  ///< config.json, the index and the shard, in write order
  std::vector<std::string> warnings;
  std::string message;  ///< one line: what happened
};

/**
 * Splices SRC's MTP tensors into `target` (see the file comment). BAD_INPUT for every refusal (family
 * without MTP, no MTP declared, config mismatch, SRC without or with incomplete / quantized MTP, a
 * partial or conflicting MTP in the target, a non-compressed-tensors quantization config, a symbolic
 * link or a foreign file where it would write, a shape rule the spliced tensors break), USAGE when SRC is
 * the target, IO for read and write failures.
 */
Result<MtpSpliceReport> splice_mtp(const std::filesystem::path& target, const std::filesystem::path& source,
                                   const MtpSpliceOptions& opts = {});

/** The `mtp_splice` object of doctor's and quantize's --json (docs/cli/doctor.md). */
nlohmann::ordered_json to_json(const MtpSpliceReport& r);
/** A few lines: status, shard, counts, ignore entries, backups, warnings. */
std::string to_text(const MtpSpliceReport& r);

}  // namespace fp4forge::quant
