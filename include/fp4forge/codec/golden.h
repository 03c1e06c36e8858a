#pragma once
/**
 * Golden NVFP4A16 vectors: loader and runner (what `fp4forge selftest` and the golden tests use).
 *
 * File schema (src/codec/nvfp4a16_golden.json):
 *   {"format", "encoding", "cases": [
 *     {"name", "dtype": "BF16"|"F16"|"F32", "note",
 *      "members":  [{"shape": [N, K], "weight": hex of LE source bytes, row-major}],
 *      "expected": [{"weight_packed": hex U8 [N, K/2], "weight_scale": hex F8_E4M3 [N, K/16],
 *                    "weight_global_scale": hex LE F32 [1]}]}]}
 * Each case is one fused set: all members share one global scale.
 */
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp4forge/codec/nvfp4.h"
#include "fp4forge/core/dtype.h"
#include "fp4forge/core/error.h"

namespace fp4forge::nvfp4 {

struct GoldenMember {
  std::uint64_t rows = 0, cols = 0;
  std::vector<std::byte> weight;        ///< source bytes, rows*cols*elem_size
  std::vector<std::byte> packed;        ///< expected weight_packed, rows*cols/2
  std::vector<std::byte> scale;         ///< expected weight_scale, rows*cols/16
  std::uint32_t global_scale_bits = 0;  ///< expected weight_global_scale as float32 bits
};

struct GoldenCase {
  std::string name;
  std::string note;
  DType dtype = DType::BF16;
  std::vector<GoldenMember> members;
  /** Views of the members' source weights (valid while the case lives). */
  std::vector<WeightView> views() const;
};

struct GoldenSet {
  std::string source;  ///< file path, or "built-in"
  std::vector<GoldenCase> cases;
};

/**
 * Parses and validates a golden file's text. Any schema violation (missing key, bad hex, unknown
 * dtype, sizes that do not match the shape, K % 16 != 0, no cases) is Errc::BAD_INPUT naming the
 * source, the case and the field.
 */
Result<GoldenSet> parse_golden(std::string_view json_text, std::string_view source);
/** load_golden_vectors (scheme_golden.h, the one loader) of a file that must hold NVFP4A16's vectors: Errc::IO when
 * it cannot be read, BAD_INPUT when it is malformed or holds another scheme. */
Result<GoldenSet> load_golden(const std::filesystem::path& path);
/** The vectors built into the binary (src/codec/nvfp4a16_golden.json at build time). */
std::string_view builtin_golden_json() noexcept;
Result<GoldenSet> builtin_golden();

/** One case run on one path. */
struct GoldenOutcome {
  std::string case_name;
  std::string path;
  bool pass = false;
  std::string detail;  ///< empty on pass; else the first mismatch or the encoder's error
};

/** What the report says of a case. */
struct GoldenCaseInfo {
  std::string name;
  DType dtype = DType::BF16;
  std::size_t members = 0;
};

struct GoldenReport {
  std::string source;
  std::string best_path;  ///< the path this CPU dispatches to
  std::vector<std::string> paths;
  std::vector<GoldenCaseInfo> cases;
  std::vector<GoldenOutcome> outcomes;  ///< case-major: outcomes[c * paths.size() + p]
  std::size_t failures = 0;
  /** The other schemes' cases (scheme_golden.h), case_name "PRESET/case", one outcome per case and path. */
  std::vector<GoldenOutcome> scheme_outcomes;
  std::size_t scheme_failures = 0;
  bool ok() const noexcept { return failures == 0 && scheme_failures == 0; }
};

/** Runs one case on one path (encode_fused) and compares every byte. */
GoldenOutcome run_golden_case(const GoldenCase& c, std::string_view path);
/** Runs every case on every path in `paths`. */
GoldenReport run_golden(const GoldenSet& set, std::span<const std::string> paths);

/** The `selftest --json` document (docs/cli/selftest.md). */
nlohmann::ordered_json to_json(const GoldenReport& r);
/** The case x path table, then PASS or FAIL with every mismatch. */
std::string to_text(const GoldenReport& r);
/** 0 all byte-exact, 1 a mismatch. */
int exit_code(const GoldenReport& r);

}  // namespace fp4forge::nvfp4
