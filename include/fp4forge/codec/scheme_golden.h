#pragma once
/**
 * Golden vectors of the schemes beside NVFP4A16 (MXFP4A16, FP8_DYNAMIC, FP8_BLOCK, W4A16): the bytes
 * compressed-tensors 0.18 writes, computed by its own functions on CPU (tests/data/golden/schemes/).
 * NVFP4A16's own vectors and runner are in golden.h.
 *
 * One scheme's file: {"scheme": PRESET, "cases": [{"name", "status": "ok" | "refused",
 *   "inputs": [{"dtype": "BF16"|"F16"|"F32", "shape": [N, K], "hex"}],
 *   "saved": [{"suffix", "dtype", "shape", "hex"}]}]}    ("saved" for "ok" cases; hex = LE bytes)
 * The built-in set (src/codec/schemes_golden.json, the smallest cases of each file) is
 * {"schemes": {PRESET: {"cases": [...]}, ...}}.
 */
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fp4forge/codec/golden.h"
#include "fp4forge/codec/scheme.h"

namespace fp4forge {

struct SchemeGoldenCase {
  std::string name;
  bool ok = false;             ///< false: upstream refuses the tensor
  EncodedTensor input;         ///< the Linear's weight [N, K]
  std::vector<EncodedTensor> saved;  ///< what upstream saves, in its order
  nvfp4::WeightView view() const { return {input.bytes.data(), input.dtype, input.shape.at(0), input.shape.at(1)}; }
  /** The saved tensor with this suffix, or nullptr. */
  const EncodedTensor* find(std::string_view suffix) const;
};

struct SchemeGoldenSet {
  QuantScheme scheme = QuantScheme::MXFP4A16;
  std::string source;
  std::vector<SchemeGoldenCase> cases;
};

/** Parses one scheme's file. BAD_INPUT naming the source, case and field on any schema violation. */
Result<SchemeGoldenSet> parse_scheme_golden(std::string_view json_text, std::string_view source);

/** A golden-vector file of any scheme, as the one loader read it: exactly one member is set. */
struct GoldenVectors {
  QuantScheme scheme = QuantScheme::NVFP4A16;
  std::optional<nvfp4::GoldenSet> nvfp4;  ///< NVFP4A16: its own schema (golden.h), the fused-set cases
  std::optional<SchemeGoldenSet> other;   ///< any other scheme: the schema above
};
/**
 * The one loader of golden files, keyed by the scheme the file holds: a top-level "scheme" names a scheme file
 * (above), none is NVFP4A16's schema (golden.h); each is then parsed by its own strict parser. IO when the file
 * cannot be read, BAD_INPUT naming the file otherwise. `fp4forge selftest --golden FILE` takes any of them.
 */
Result<GoldenVectors> load_golden_vectors(const std::filesystem::path& path);
/** load_golden_vectors of a file that must hold a scheme other than NVFP4A16 (BAD_INPUT naming it otherwise). */
Result<SchemeGoldenSet> load_scheme_golden(const std::filesystem::path& path);
/** The built-in sets, one per scheme beside NVFP4A16. */
Result<std::vector<SchemeGoldenSet>> builtin_scheme_golden();

/** Encodes one case with encode_linear on `path` (default: the scalar reference; any name of
 * encode_paths(s)) and compares every byte, dtype and shape; a refused case passes when the encoder
 * refuses it with BAD_INPUT. Outcome path: `path`. */
nvfp4::GoldenOutcome run_scheme_golden_case(QuantScheme s, const SchemeGoldenCase& c, std::string_view path = "scalar");
/** Runs every case of every set on each of `paths` into report.scheme_outcomes (counting scheme_failures). */
void run_scheme_golden(const std::vector<SchemeGoldenSet>& sets, nvfp4::GoldenReport& report,
                       const std::vector<std::string>& paths = {"scalar"});

}  // namespace fp4forge
