#pragma once
/**
 * `fp4forge diff A B`: structural comparison of two checkpoints, typically a new quantization against
 * a known-good control (failure-catalog.md F2, F4, F8, F20, F28, F30, F35).
 *
 * - Architecture-class guard first: both sides are classified (dense / MoE / hybrid / multimodal and the
 *   expert count). A control of another class cannot show what the candidate lacks (F2: a dense control
 *   has no routers, so quantized routers never show up as a difference), so diff refuses unless
 *   `allow_class_mismatch`.
 * - Tensor families: names normalized over layer and expert indices (every all-digit name component
 *   becomes `*`), with count, dtype set and shape set per side; families only on one side.
 * - quantization_config after normalizing: scheme and weights arguments per group, and `ignore`
 *   expanded against each side's own modules (so `re:.*router` on one side and 30 explicit router names
 *   on the other compare equal), compared as families.
 * - config.json keys (quantization_config excluded) and the other files (tokenizer, processor, ...).
 */
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp4forge/safetensors/checkpoint.h"
#include "fp4forge/core/error.h"
#include "fp4forge/model/model_info.h"

namespace fp4forge {

/** `model.layers.12.experts.3.gate_proj.weight` -> `model.layers.*.experts.*.gate_proj.weight`. */
std::string family_of(std::string_view name);

struct DiffOptions {
  bool allow_class_mismatch = false;  ///< compare anyway when the architecture classes differ
  bool compare_files = true;          ///< compare config.json keys and the other files
  /** Also compare the bytes of every tensor both sides hold with one dtype and shape (two quantizations of
   * different weights are structurally identical); each differing family becomes a "values" item. */
  bool compare_values = false;
};

/** One tensor family on one side. */
struct FamilySide {
  std::uint64_t count = 0;
  std::vector<std::string> dtypes;  ///< sorted, unique
  std::vector<std::string> shapes;  ///< "[128, 64]", sorted, unique
};

struct FamilyRow {
  std::string family;
  FamilySide a, b;
  bool in_a = false, in_b = false;
  bool differs() const noexcept;
  /** "only in A", "only in B", "count", "dtype", "shape" (comma-joined), "" when equal. */
  std::string what() const;
};

/** One difference outside the tensor table (config key, quantization_config, file). */
struct DiffItem {
  std::string area;  ///< "quantization_config", "config", "file"
  std::string key;   ///< key path or file name
  std::string a, b;  ///< values as text ("(absent)" when missing)
};

struct DiffReport {
  std::string a_dir, b_dir;  ///< the two checkpoints, as opened
  ArchClass class_a, class_b;
  std::string family_a, family_b;  ///< model family names
  bool class_mismatch = false;
  bool refused = false;  ///< class mismatch without allow_class_mismatch: nothing else was compared
  std::string class_message;  ///< the loud message when the classes differ
  std::vector<FamilyRow> families;  ///< every family (equal ones too), sorted by family
  std::vector<DiffItem> items;
  std::uint64_t tensors_a = 0, tensors_b = 0;
  bool values_compared = false;           ///< compare_values was asked (and the classes allowed it)
  std::uint64_t values_same = 0;          ///< tensors with equal bytes on both sides
  std::uint64_t values_differ = 0;        ///< tensors (same name, dtype, shape) whose bytes differ
  /** The scheme of each side, spelled as verify spells it (scheme_labels: "NVFP4A16", "FP8_DYNAMIC", ...;
   * "none" without quantization_config, "invalid" when it does not parse). */
  std::string scheme_a, scheme_b;
  /** Backups fp4forge wrote (`*.bak-fp4forge-*`, `*.rollback-fp4forge-*`: doctor --fix, gateway) on either side: no
   * part of the checkpoint (quantize does not copy them), so not compared; named in the report. */
  std::vector<std::string> backups_skipped;
  bool scheme_mismatch() const noexcept { return scheme_a != scheme_b; }
  /** True when anything differs (class, a family, or an item). */
  bool differs() const noexcept;
};

/** Compares two opened checkpoints. BAD_INPUT only when a config cannot be read at all. */
Result<DiffReport> diff_checkpoints(const Checkpoint& a, const Checkpoint& b, const DiffOptions& opts = {});

/** `--json` document (docs/cli/diff.md). */
nlohmann::ordered_json to_json(const DiffReport& r);
/** Terminal table: class line first, then differing families, then items; `all` lists equal families. */
std::string to_text(const DiffReport& r, bool all = false);
/** 0 identical, 1 different, 3 refused (architecture classes differ: a control of another class proves
 * nothing; docs/cli/diff.md). */
int exit_code(const DiffReport& r);

}  // namespace fp4forge
