#pragma once
/**
 * Executes a QuantPlan: streams the source shards through each unit's scheme codec (codec/scheme.h: NVFP4A16,
 * MXFP4A16, FP8_DYNAMIC, FP8_BLOCK, W4A16) into a staging folder next to the destination, then renames it
 * into place (atomic: an interrupted or failed run leaves no DST).
 *
 * - Staging: `<parent of DST>/.<DST name>.fp4forge-staging`, marked and locked (flock) for the run.
 * - One persistent thread pool (`jobs`, 0 = default_jobs()). Tasks are admitted against an in-flight byte
 *   budget (`max_memory`): source bytes a task touches plus the output it buffers. A fused set that
 *   does not fit one task is processed in row ranges after a first amax pass over all its members.
 * - Every output byte goes to its planned offset (ShardWriter::write_at), so output bytes do not depend
 *   on `jobs` or `max_memory`. Passthrough tensors are copied bit for bit. Source pages are released
 *   (madvise) as soon as a task is done with them.
 * - NaN/Inf in a quantized weight stops the run (R4) naming the tensor, row and column.
 * - Every non-safetensors file (tokenizer, processor, generation config, chat template, ...) is copied;
 *   config.json and the index are written from the plan; everything is fsynced before the rename.
 * - `resume`: shards completed by an interrupted run (recorded with their size and a 64-bit digest in
 *   a manifest inside the staging folder) are re-checked (header bytes, size, digest) and reused.
 * - Refuses: DST exists, DST == SRC, DST inside SRC. The source is never written; a source file whose
 *   size or mtime changes during the run fails it.
 */
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp4forge/safetensors/checkpoint.h"
#include "fp4forge/core/error.h"
#include "fp4forge/quantize/manifest.h"
#include "fp4forge/quantize/mtp_splice.h"
#include "fp4forge/quantize/plan.h"
#include "fp4forge/quantize/preflight.h"
#include "fp4forge/quantize/staging.h"
#include "fp4forge/util/progress_sink.h"

namespace fp4forge::quant {

inline constexpr std::uint64_t kDefaultMaxMemory = std::uint64_t{2} << 30;  ///< 2 GiB
inline constexpr std::uint64_t kMinMaxMemory = 4096;  ///< smallest accepted --max-memory

/** The worker count of a run without `-j`: default_workers (codec/observer.h) of whether the plan quantizes
 * anything under a searched observer. */
unsigned default_jobs(const QuantPlan& plan) noexcept;

struct RunOptions {
  unsigned jobs = 0;                          ///< worker threads; 0 = default_jobs(plan)
  std::uint64_t max_memory = kDefaultMaxMemory;  ///< in-flight byte budget
  bool resume = false;                        ///< reuse verified shards of an interrupted run
  bool restart = false;                       ///< discard an interrupted run's finished shards (else refused)
  ProgressSink* progress = nullptr;           ///< reports source bytes read and tensors written
  /** Runs on the staging folder once every shard, config.json and the index are written, before the
   * final rename (QuantizeParams::mtp_from splices the MTP tensors there, quantize/mtp_splice.h); an error
   * aborts the run like any other (staging removed, no DST). */
  std::function<Status(const std::filesystem::path& staging)> before_commit;
};

struct RunSummary {
  std::string source;
  std::string destination;
  std::string scheme;
  std::string observer;                ///< observer_option of the plan's observer: "minmax", "mse", ...
  unsigned jobs = 0;
  std::uint64_t max_memory = 0;
  std::vector<RoleCount> counts;       ///< per Role, copied from the plan
  std::vector<std::string> summary;    ///< the plan's per-role lines
  std::vector<std::string> warnings;
  std::uint64_t quantized_weights = 0;
  std::uint64_t kept_tensors = 0;
  std::uint64_t ignore_entries = 0;
  std::uint64_t bytes_in = 0;          ///< source tensor bytes
  std::uint64_t bytes_read = 0;        ///< source bytes this run read (= the progress bar's total)
  std::uint64_t bytes_out = 0;         ///< output shard file bytes (headers included)
  double bits_per_weight = 0.0;        ///< per quantized weight
  double seconds = 0.0;
  double gb_per_s = 0.0;               ///< bytes_in / seconds / 1e9
  std::uint64_t peak_rss_bytes = 0;    ///< getrusage ru_maxrss
  std::uint64_t peak_inflight_bytes = 0;  ///< highest byte budget in use
  std::size_t shards_written = 0;
  std::size_t shards_resumed = 0;
  std::size_t files_copied = 0;
  std::uint64_t cast_weights = 0;      ///< packed FP4 source weights cast losslessly (codec/mxfp4_cast.h)
  std::vector<std::string> cast_refused;  ///< fused sets of packed FP4 weights re-encoded instead, with why
};

/**
 * Why a top-level side file of the source is not copied into the output ("" = it is copied): fp4forge's
 * own backups (`*.bak-fp4forge-*`, `*.rollback-fp4forge-*`), unfinished temporaries (`*.partial`, `*.partial-XXXXXXXX`), and
 * weights or pickles of other formats (`pytorch_model.bin`, `*.pt`, `*.gguf`, ...). quantize warns
 * "not copied: ..." for each.
 */
std::string side_file_skip_reason(std::string_view name);

/** Runs `plan` (made from `src`) into `dst`. */
Result<RunSummary> run_plan(const Checkpoint& src, const QuantPlan& plan, const std::filesystem::path& dst,
                            const RunOptions& opts);

/**
 * Everything `fp4forge quantize` takes, in one struct (the llama.cpp `llama_model_quantize_params`
 * pattern): the CLI fills it from flags, a library user in code.
 */
struct QuantizeParams {
  std::filesystem::path src;
  std::filesystem::path dst;  ///< may be empty with dry_run
  PlanOptions plan;
  RunOptions run;
  bool dry_run = false;       ///< plan only: open, check and plan, write nothing
  /** The original release to splice the MTP tensors from when SRC lost them (quantize --mtp-from; a folder):
   * proven against SRC before anything is written (every refusal of quantize/mtp_splice.h), then done on the
   * staging folder before the commit rename, so DST appears with its MTP or not at all. Empty: none. */
  std::filesystem::path mtp_from;
  /** The preflight (quantize/preflight.h): doctor's checks on SRC before any work (an error refuses the run, nothing
   * written; `preflight.checks = false` is --no-preflight), and the serving files the output gets
   * (--tokenizer-from / --processor-from, doctor's serving-file fixes). */
  PreflightOptions preflight;
  /** Called once with the preflight, before a refusal and before anything is planned (the CLI prints it there). */
  std::function<void(const Preflight&)> on_preflight;
  /** Called once with the plan, before anything is written (the CLI prints its warnings there). */
  std::function<void(const QuantPlan&)> on_plan;
};

struct QuantizeResult {
  Preflight preflight;                ///< doctor's findings on SRC and the serving files the output gets
  QuantPlan plan;
  std::optional<RunSummary> summary;  ///< absent for a dry run
  std::optional<MtpSpliceReport> mtp_splice;  ///< with mtp_from: what the splice did (a dry run: would do)
};

/**
 * The whole `fp4forge quantize`, in this order: options (max_memory, DST given unless dry run), DST
 * (check_destination, once), the preflight (a doctor error refuses: refusal(), BAD_INPUT; a dry run too), the MTP
 * splice proven against SRC (with mtp_from), open SRC, plan, then (not dry run) run, the serving files and the
 * splice written into the staging folder just before the commit. Errors as run_plan and splice_mtp.
 */
Result<QuantizeResult> quantize(const QuantizeParams& params);

/** The --json summary object (docs/cli/quantize.md). */
nlohmann::ordered_json to_json(const RunSummary& s);
/** The summary lines and the "wrote DST: ..." totals (warnings are not part of it). */
std::string to_text(const RunSummary& s);
/** What `quantize` prints: the summary (to_json / to_text of it), or for a dry run
 * {"ok": true, "dry_run": true, "plan": ...} / the plan and "dry run: nothing written". */
nlohmann::ordered_json to_json(const QuantizeResult& r);
std::string to_text(const QuantizeResult& r, bool verbose = false);


}  // namespace fp4forge::quant
