#pragma once
/**
 * quantize's preflight (issue 51): before any work, doctor's checks (diagnose/diagnose.h) run on the source with
 * the serving files the output will hold, and the serving files the output needs beyond the source's are decided.
 *
 * - **Refusal:** a doctor *error* (a wrapper architecture over flat text-only tensors, a Gemma-4 config missing
 *   its global-KV fields, a missing processor or tokenizer, a tokenizer whose ids the embedding has no row for,
 *   ...) refuses the run (BAD_INPUT, exit 3) before the staging folder or DST exists. Warnings never refuse.
 *   `checks = false` (quantize --no-preflight) is the escape hatch: the checks are not run.
 * - **Serving files** (`ServingChange`, written into the staging folder just before the commit rename):
 *   files taken from a reference release (`--tokenizer-from REF`, `--processor-from REF`: a folder, resolved by
 *   the caller like every checkpoint argument), only those the source lacks; and what doctor --fix would write
 *   into the output (diagnose/serving_fixes.h: `preprocessor_config.json` from `processor_config.json`'s
 *   image_processor, tokenizer.json's truncation / padding set to null). The source is never written.
 *
 * It reads config.json, the safetensors headers and the small JSON files beside them, never the weights.
 */
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp4forge/core/error.h"
#include "fp4forge/core/finding.h"

namespace fp4forge::quant {

/** A file the output holds that the source does not hold as it is. */
struct ServingChange {
  std::string file;                ///< its name in the output
  /** "taken" (copied from a reference release), "derived" (written from another file: preprocessor_config.json),
   * "fixed" (the source's file with doctor's fix applied). A taken file may carry a fix too (`kinds`). */
  std::string action;
  std::string from;                ///< the file it comes from (a reference's, or the source's)
  std::string option;              ///< "--tokenizer-from" / "--processor-from" for a taken file, else ""
  std::vector<std::string> kinds;  ///< doctor kinds whose fix it applies (`missing-preprocessor-config`, ...)
  std::string content;             ///< the bytes written; empty for a taken file copied as it is
  bool copy = false;               ///< true: `from` is copied byte for byte (content unused)
  std::string diff;                ///< unified diff against the file as it was (from /dev/null for a new one)
};

struct PreflightOptions {
  bool checks = true;                    ///< false: quantize --no-preflight (doctor's checks not run)
  std::filesystem::path tokenizer_from;  ///< a reference release's folder: its tokenizer files the source lacks
  std::filesystem::path processor_from;  ///< a reference release's folder: its processor files the source lacks
};

struct Preflight {
  bool ran = false;                   ///< doctor's checks ran (false with --no-preflight)
  /** The source is quantized (an FP8 or MXFP4 release): doctor's checks of serving it as it is do not apply, as
   * quantize re-encodes it; the report says so (it read "0 error(s)" beside doctor's errors on that source). */
  bool quantized_source = false;
  std::string source;
  std::string tokenizer_from, processor_from;  ///< as resolved ("" = none)
  /** doctor's findings on the source with the output's serving files, errors first; a finding whose fix the
   * output gets (`serving`) is not listed. */
  std::vector<Finding> findings;
  std::vector<ServingChange> serving;  ///< what the output gets beyond the source's files, in write order
  std::vector<std::string> notes;      ///< what a --*-from option did not take, and why

  bool refused() const noexcept { return has_errors(findings); }
};

/** The preflight of `src` (see above). Errors: BAD_INPUT for a reference that holds none of the files its option
 * takes, and what opening the source or a reference fails with. A refusal is not an error here: see refusal(). */
Result<Preflight> preflight(const std::filesystem::path& src, const PreflightOptions& opts);

/** With two or more error findings, one line each: what, where, the fix (`fp4forge doctor SRC --fix`,
 * `--processor-from REF`, ...), and that --no-preflight quantizes anyway. With one, none: refusal() names it, so a
 * bad source gets one line, as every bad input does. */
std::vector<std::string> refusal_lines(const Preflight& p);
/** The error a refused run returns (BAD_INPUT): the one error finding with its fix, or the count and kinds of the
 * errors (listed by refusal_lines), nothing written, --no-preflight. */
Error refusal(const Preflight& p);

/** Writes the serving changes into `dir` (quantize's staging folder), each atomically. */
Status write_serving_files(const Preflight& p, const std::filesystem::path& dir);

/** The `preflight` object of quantize --json (docs/cli/quantize.md). */
nlohmann::ordered_json to_json(const Preflight& p);
/** Its text: the warnings' count and kinds, and one line per serving change (`would` for a dry run). */
std::string to_text(const Preflight& p, bool dry_run);

}  // namespace fp4forge::quant
