#pragma once
/**
 * `fp4forge doctor`: finds config defects in a checkpoint directory (ours or third-party) before they
 * cost a quantization run or a serving seat, and fixes the ones that can be fixed safely.
 *
 * Every finding has a stable `kind` (a row of core/finding_kinds.h marked kInDoctor, documented in
 * docs/cli/doctor.md), a severity, evidence (config key, tensors, expected vs actual) and, when an
 * automatic fix exists, its description. The rules come from architectures.md (§3.1 shape invariants,
 * §3.2-3.5, §6) and failure-catalog.md (F-numbers in the kind table).
 *
 * Fixing (`fix = true`):
 * - only the fixes of kinds with `fixable` run; existing `.safetensors` files are never opened
 *   for writing; only config.json, tokenizer.json, preprocessor_config.json and the index can change,
 *   and with `mtp_from` one new shard `model-mtp.safetensors` can appear (quantize/mtp_splice.h);
 * - each fix re-proves its precondition on the file as it is on disk at fix time, and refuses
 *   (listed in DoctorReport::refused) when the proof fails;
 * - a changed file is first copied to `FILE.bak-fp4forge-YYYYMMDD-HHMMSS` (`-1`, `-2`, ... appended
 *   when that name exists), then written via fs::write_file_atomic; JSON files keep their formatting
 *   (json_edit.h); a unified diff of each change is reported;
 * - idempotent: a second run finds nothing left to fix and writes nothing;
 * - `dry_run = true` computes the same changes and diffs and writes nothing;
 * - `mtp_from` (with fix or dry_run): after the JSON fixes, splice_mtp() copies the MTP tensors of that
 *   checkpoint (the original release) into the target; it is checked (dry run) before any fix is
 *   written, and its refusals are errors of the run (BAD_INPUT), not entries of `refused`.
 */
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp4forge/core/error.h"
#include "fp4forge/core/finding.h"
#include "fp4forge/util/file_change.h"
#include "fp4forge/quantize/mtp_splice.h"

namespace fp4forge::doctor {

struct DoctorOptions {
  bool fix = false;      ///< apply the automatic fixes
  bool dry_run = false;  ///< with or without fix: compute changes and diffs, write nothing
  bool strict = false;   ///< a remaining warning fails too (exit 1)
  /** Backup timestamp "YYYYMMDD-HHMMSS"; empty: the local time now. */
  std::string timestamp;
  /** The original release to splice the MTP tensors from (quantize/mtp_splice.h); empty: none. Needs fix or
   * dry_run. */
  std::filesystem::path mtp_from;
  /** Where vLLM will load the tokenizer and chat template from (`vllm serve --tokenizer`): a folder, or a Hub
   * repo id (read from the Hugging Face cache when it is there). Empty: the model folder itself, vLLM's
   * default. A source that cannot be read here is a warning (`tokenizer-unchecked`), never a guess. */
  std::string tokenizer;
  /** --vllm-version 0.MINOR: the release the checkpoint will be served on (-1: not said); what it cannot build is an
   * error (DiagnoseOptions::vllm_minor). */
  int vllm_minor = -1;
  /** doctor --transformers-version MAJOR.MINOR as MAJOR * 1000 + MINOR (-1: not said): a config form that release
   * cannot read is an error (DiagnoseOptions::transformers_version). */
  int transformers_version = -1;
};

/** A fix that was due but refused because its precondition did not hold at fix time. */
struct RefusedFix {
  std::string kind;
  std::string reason;
};

struct DoctorReport {
  std::string dir;
  std::string family;        ///< family_name() of the checkpoint
  std::string architecture;  ///< architectures[0]
  bool quantized = false;
  bool fix = false, dry_run = false, strict = false;
  std::vector<Finding> findings;   ///< what the first pass found
  std::vector<FileChange> changes;
  std::vector<RefusedFix> refused;
  std::vector<Finding> remaining;  ///< after the fixes were written (== findings otherwise)
  std::optional<quant::MtpSpliceReport> mtp_splice;  ///< with mtp_from: what the splice did (its files are in changes)
};

/**
 * Checks `dir` and, with opts.fix, fixes it. Errors (not findings): BAD_INPUT for a missing or
 * malformed config.json / shard / index, IO for read or write failures, USAGE for --fix (without
 * dry_run) on a Hugging Face cache snapshot (hf_cache::snapshot_repo_dir): the cache is never written.
 */
Result<DoctorReport> run_doctor(const std::filesystem::path& dir, const DoctorOptions& opts = {});

/** The --json document (schema in docs/cli/doctor.md). */
nlohmann::ordered_json to_json(const DoctorReport& r);

/** Human-readable report (findings, diffs, summary line). */
std::string to_text(const DoctorReport& r);

/** 0 when no error-severity finding (with strict: no warning either) remains, else 1. */
int exit_code(const DoctorReport& r);

}  // namespace fp4forge::doctor
