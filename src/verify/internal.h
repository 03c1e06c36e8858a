#pragma once
// What verify's rooms share (src/verify/): the module and layout records, the geometry
// the config states, the structural pass's state, and the small readers every room uses.
//   config.cc     the quantization config: groups, schemes, observers, ignore; foreign formats, FP8 releases
//   structure.cc  the structural pass: modules, targets, policy, coverage, fused
//                 sets, the N rule, vLLM's names, geometry (run_structure)
//   values.cc     scales and codes scanned for NaN/Inf, zeros and negatives (check_values)
//   against.cc    the source comparison: re-encode proof and errors (compare_against)
//   source_view.cc  a quantized module's source as a 2-D weight (source_view.h)
//   render.cc     text and JSON
//   verify.cc     the public entry points (verify.h)
// Internal to the verify module: nothing outside src/verify includes it.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "fp4forge/codec/fp8.h"
#include "fp4forge/codec/half.h"
#include "fp4forge/codec/nvfp4.h"
#include "fp4forge/codec/nvfp4_search.h"
#include "fp4forge/codec/scheme.h"
#include "fp4forge/codec/scheme_search.h"
#include "fp4forge/core/finding_sink.h"
#include "fp4forge/model/classify.h"
#include "fp4forge/model/experts.h"
#include "fp4forge/model/fp8_source.h"
#include "fp4forge/model/quant_config.h"
#include "fp4forge/model/scheme_policy.h"
#include "fp4forge/model/shape_rules.h"
#include "fp4forge/model/structure.h"
#include "fp4forge/model/tensor_names.h"
#include "fp4forge/model/tensor_param.h"
#include "fp4forge/model/tensor_role.h"
#include "fp4forge/util/format.h"
#include "fp4forge/util/json_get.h"
#include "fp4forge/util/strings.h"
#include "fp4forge/util/thread_pool.h"
#include "fp4forge/verify/diff.h"
#include "fp4forge/verify/quality.h"
#include "fp4forge/verify/verify.h"

namespace fp4forge::verify_internal {

using Json = nlohmann::ordered_json;

template <std::size_t N>
bool one_of(std::string_view s, const std::array<std::string_view, N>& set) {
  return std::find(set.begin(), set.end(), s) != set.end();
}
using util::ends_with;

// ---- findings: one sink for every room (core/finding_sink.h) -----------------------------------

using FindingSink = FindingSink;

// ---- modules -------------------------------------------------------------------------------------

struct Module {
  std::string name;
  std::map<std::string, const TensorRef*, std::less<>> params;  // by suffix: the leaf table's verify members (model/tensor_param.h)
  const TensorRef* payload = nullptr;   // the scheme's quantized values: weight_packed, or FP8's F8_E4M3 weight
  const TensorRef* scale = nullptr;     // weight_scale
  const TensorRef* gs = nullptr;        // weight_global_scale
  const TensorRef* shape = nullptr;     // weight_shape
  const TensorRef* weight = nullptr;    // a plain `weight` that is not the payload
  const TensorRef* input_gs = nullptr;  // input_global_scale
  std::vector<const TensorRef*> extras;  // parameters the scheme does not write
  std::uint64_t n = 0, k = 0;            // effective [N, K] of a quantized module
  bool valid = false;                    // every member present with the right dtype and shape
  std::size_t group = 0;                 // index into Structure::groups: the config group vLLM gives it
  TensorClass cls;
  bool quantized() const noexcept { return payload != nullptr; }
  /** The tensors of a quantized module (every parameter but a plain weight). */
  std::vector<const TensorRef*> members() const {
    std::vector<const TensorRef*> out;
    for (const auto& [suffix, t] : params)
      if (t != weight) out.push_back(t);
    return out;
  }
  const TensorRef* param(std::string_view suffix) const {
    auto it = params.find(suffix);
    return it == params.end() ? nullptr : it->second;
  }
};

/** What a scheme writes per Linear, read off linear_tensors (codec/scheme.h) once. */
struct Layout {
  QuantScheme qs = QuantScheme::NVFP4A16;
  std::string_view payload;             // "weight_packed" or "weight"
  DType payload_dtype = DType::U8;
  std::uint64_t per_payload_col = 1;    // K / columns of the payload
  std::vector<std::string_view> suffixes;  // every tensor it writes, in save order
  std::set<std::string_view> src_dtype;    // members stored in the weight's dtype (FP8, W4A16 scales)
  bool weight_only = true;              // input_activations null (A16)
  std::string word;                     // how messages name it: "NVFP4" (kept), else the preset

  /** A tensor of `suffix` follows the source dtype: any of BF16 / F16 / F32 is right. */
  bool follows_source(std::string_view suffix) const { return src_dtype.count(suffix) > 0; }
  /** "weight_packed U8 [N, K/2], weight_scale F8_E4M3 [N, K/16], ..." */
  std::string describe() const;
};


Layout layout_of(QuantScheme qs);
std::pair<std::string, std::string> split_name(std::string_view name);
std::optional<float> read_f32_scalar(const Checkpoint& q, const TensorRef* t);
std::uint32_t f32_bits(float f);
bool is_float_dtype(DType t);
/** Element `i` of a BF16/F16/F32/F64 buffer as double. */
double load_elem(const std::byte* p, DType t, std::uint64_t i);
/** load_elem of elements [i, i + n) into out, the dtype decided once (BF16, F16 and F32 exact in float). */
void load_floats(const std::byte* p, DType t, std::uint64_t i, std::uint64_t n, float* out);
std::string index_str(const std::vector<std::uint64_t>& shape, std::uint64_t flat);

// ---- geometry ------------------------------------------------------------------------------------

/** Whether config.json states the geometry of module `c` (verify's shape rules apply). */
bool geometry_stated(const TensorClass& c);

// ---- the structural pass -------------------------------------------------------------------------

/** One config group as verify checks its modules: the scheme's layout and the weights' observer. */
struct SchemeGroup {
  std::string name;  // the config group's name ("" for the default of a checkpoint without groups)
  bool preset = false;  // the group is one of the five presets (else checked as the closest one)
  Layout layout = layout_of(QuantScheme::NVFP4A16);  // the scheme the tensors are checked against
  // The weights' observer (codec/observer.h): the re-encode proof uses it. observer_known is false for a name
  // fp4forge cannot reproduce (observer_name says which).
  Observer observer = Observer::MINMAX;
  bool observer_known = true;
  std::string observer_name = "memoryless_minmax";
};

struct Structure {
  std::map<std::string, Module> modules;  // by module name
  std::optional<QuantConfig> qc;
  std::optional<IgnoreMatcher> ignore;
  std::optional<GroupMatcher> matcher;    // vLLM's group lookup over qc (absent when a target cannot compile)
  Scheme scheme = Scheme::UNKNOWN;
  /** Per config group in file order; one default entry when the config has none. A module is checked against
   * the group vLLM gives it (Module::group). */
  std::vector<SchemeGroup> groups{SchemeGroup{}};
  std::vector<FusedSet> sets;             // R1 + vLLM packed, over quantized and kept Linear-like modules
  std::set<std::string> kept_linear;      // unquantized modules with a 2-D float `weight`
  bool source_given = false;              // --against: the against room checks what needs the source (scale dtypes)
  bool unquantized = false;               // no quantization_config and no tensor a quantizer writes: a source
  std::set<std::string> shape_flagged;    // modules (and lm_head) check_geometry reported: the shape rules skip them

  /** The group vLLM applies to module `name` (by name, then as a Linear); the first group when none does
   * (check_targets reports that). */
  std::size_t group_index(std::string_view name) const {
    if (!matcher) return 0;
    const long g = matcher->match(name, "Linear").group;
    return g < 0 || static_cast<std::size_t>(g) >= groups.size() ? 0 : static_cast<std::size_t>(g);
  }
  const SchemeGroup& group_of(std::string_view name) const { return groups[group_index(name)]; }
  const SchemeGroup& group(const Module& m) const { return groups[m.group]; }
  const Layout& layout(const Module& m) const { return groups[m.group].layout; }
};

inline constexpr const char* kHintRequant = "re-run `fp4forge quantize` from the unquantized source";

/** doctor's config-vs-tensor shape rules on the quantized checkpoint, less the modules check_geometry reported
 * (config_rules.cc). */
void check_config_rules(const Checkpoint& q, const Structure& s, FindingSink& sink);

/** The structural pass: every check that reads the quantized checkpoint alone (structure.cc). */
void run_structure(const Checkpoint& q, const ModelInfo& info, const VerifyOptions& opts, Structure& s,
                   FindingSink& sink, VerifyStats& st);
/** The config groups' targets against the names vLLM looks a scheme up by: every quantized module covered, each
 * fused layer and experts block loaded with the group its tensors are written for, no `re:` target that selects
 * nothing (targets.cc). Runs after the fused sets are known (Structure::sets). */
void check_targets(const Structure& s, FindingSink& sink);
/** The quantization_config read into s.qc, s.groups, s.matcher and s.ignore, its findings, and the report's scheme
 * and observer lines (config.cc). */
void check_quant_config(const Checkpoint& q, Structure& s, FindingSink& sink, VerifyStats& st);
/** A checkpoint in a quantization format fp4forge neither reads nor writes: one finding; true when it is one. */
bool foreign_format(const Checkpoint& q, FindingSink& sink, bool as_warning);
/** An FP8 release read as a source (its findings); true when it is one and the scheme checks do not apply. */
bool fp8_release(const Checkpoint& q, const ModelInfo& info, FindingSink& sink, bool scan_values);
/** Scales and codes of every quantized module scanned (values.cc). */
void check_values(const Checkpoint& q, const Structure& s, FindingSink& sink, VerifyStats& st);
/** Every row's bytes against the reference encoding (compare_chunks, when the checkpoint's global scale is the
 * observer's own): rows that differ, those among them that differ by more than a rounding step, the first. */
struct RowCompare {
  std::uint64_t bad = 0, far = 0, first = std::numeric_limits<std::uint64_t>::max();
  bool codes = false, scales = false;  ///< which of the module's tensors hold a differing byte
};
/** Rows r0..r1 of an NVFP4 module (`packed`, `scales`, the module's) against the reference encoding of the same rows
 * (`pk`, `sc`, a chunk's), counted into `out` (reencode_findings.cc). */
void compare_row_bytes(const std::byte* packed, const std::byte* scales, const std::byte* pk, const std::byte* sc,
                       std::uint64_t r0, std::uint64_t r1, std::uint64_t k, RowCompare& out);
/** The findings of every row compared: codes-damaged (a few rows far off in an otherwise byte-identical module) or
 * reencode-mismatch (reencode_findings.cc). */
void report_row_compare(const Module& m, const std::string& observer, const RowCompare& rc, FindingSink& sink);
/** Differences between one stored member and its re-encoding, over the chunks compared so far. */
struct MemberDiff {
  std::string what;            // a dtype/shape difference (the bytes were not compared)
  std::uint64_t elements = 0;  // differing elements
  std::uint64_t first = 0;     // flat index of the first
};

/** compare_reencoded's findings (reencode_findings.cc). */
void report_reencoded(const Layout& L, const Module& m, const std::vector<LinearTensorSpec>& specs,
                      const std::vector<MemberDiff>& diffs, const std::vector<const TensorRef*>& stored,
                      std::vector<char>& row_bad, const TensorError& te, const VerifyOptions& opts, FindingSink& sink,
                      VerifyStats& st);
struct SourceView;  // source_view.h
/** A module's scale stored in another dtype than its source weight's (reencode_findings.cc). */
void report_scale_dtype(const Module& m, const TensorRef& scale, const SourceView& src, DType want, FindingSink& sink);

/** Every quantized module compared with its source weight, every kept tensor with its source (against.cc). */
void compare_against(const Checkpoint& q, const Checkpoint& src, const Fp8Source* fp8, const ModelInfo& info,
                     const Structure& s, const VerifyOptions& opts, FindingSink& sink, VerifyStats& st);

}  // namespace fp4forge::verify_internal
