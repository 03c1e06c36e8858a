#pragma once
/**
 * The quality report of `verify --against` (docs/cli/verify.md "Quality report"): the error of what was
 * written against the source, per module kind and per layer, beside what min-max would have given, and
 * the change the config's observer made to it; layers whose error stands out of their kind are named.
 * A function of the per-tensor errors verify measured (VerifyStats::per_tensor) and of the scheme (its
 * reference error on Gaussian weights); rendered as JSON, text and an SVG (quality_svg.cc: a heat map per
 * module kind and layer, with its legend).
 *
 * One sign everywhere: the observer's effect is `error_vs_minmax` = rel / minmax - 1, negative when the
 * observer lowered the error ("error -14.8 % vs min-max"); JSON's older `gain` is the same figure negated.
 */
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp4forge/codec/scheme.h"
#include "fp4forge/verify/verify.h"

namespace fp4forge {

/** One module kind in one layer (or outside any layer: layer -1), parameter-weighted over its tensors. */
struct QualityCell {
  int layer = -1;
  std::uint64_t params = 0;
  double rel_rms = 0;         ///< what was written, vs the source
  double minmax_rel_rms = 0;  ///< min-max's encoding of the same source
  bool outlier = false;       ///< rel_rms above kOutlierFactor x the median of its kind
  /** A searched observer encoded some of its tensors (min-max's encoding differs from the reference): its
   * vs_minmax() says what the observer did. False when min-max is its tensors' observer: nothing to compare. */
  bool searched = false;
  /** Every tensor of it is exact (error 0 and min-max's 0: cast or passed through losslessly). */
  bool exact() const noexcept { return params > 0 && rel_rms == 0 && minmax_rel_rms == 0; }
  /** The observer's change of the error against min-max's: rel / minmax - 1, negative when it lowered the error
   * (0 when minmax is 0). The one figure text, JSON (`error_vs_minmax`) and the SVG show. */
  double vs_minmax() const noexcept { return minmax_rel_rms > 0 ? rel_rms / minmax_rel_rms - 1.0 : 0.0; }
  /** JSON's `gain` (schema 0.x): -vs_minmax(), the relative error removed. */
  double gain() const noexcept { return -vs_minmax(); }
};

/** One module kind ("self_attn.q_proj", "mlp.experts.down_proj", ...) across the layers, layer order. */
struct QualityRow {
  std::string kind;
  std::vector<QualityCell> cells;
  QualityCell total;  ///< the kind over every layer (layer -1)
};

/** What min-max's encoding of Gaussian weights gives a scheme: the yardstick the report shows beside the errors. */
struct QualityReference {
  QuantScheme scheme;
  double gaussian_minmax_rel_rms = 0;  ///< gaussian_minmax_rel_rms(scheme)
};

/** One config group's compared tensors (a mixed checkpoint's headline is one line per group, never one average). */
struct QualityGroup {
  std::string label;  ///< VerifyStats::groups' line: "group_0 NVFP4A16 (--scheme nvfp4a16), observer ..."
  QualityCell total;  ///< the group's tensors not reproduced exactly
  std::uint64_t exact_tensors = 0;  ///< the group's tensors of error 0 (left out of `total`)
};

struct QualityReport {
  std::string observer;  ///< the config's observer
  std::string scheme;    ///< the config's schemes, as verify spells them ("NVFP4A16", "NVFP4A16+FP8_BLOCK")
  /** The compared modules were also encoded by min-max (the config's observer is not min-max, so the two differ):
   * vs_minmax() says something. False under min-max, where the error is min-max's own. */
  bool minmax_compared = false;
  std::vector<QualityReference> references;  ///< one per scheme of `scheme` fp4forge knows
  std::vector<QualityRow> rows;  ///< kinds in the order their first tensor appears (module name order)
  QualityCell total;             ///< every compared tensor not reproduced exactly (an exact one's 0 is no measure)
  std::vector<QualityGroup> groups;  ///< per config group, file order (the picture's headline with two or more)
  std::uint64_t exact_tensors = 0;   ///< compared tensors of error 0 (cast or passed through losslessly)
  bool searchable = false;           ///< some scheme of `scheme` takes a searched observer (the picture's hint)
  double quantized_share = 0;        ///< VerifyStats::quantized_share()
  std::uint64_t total_params = 0;    ///< VerifyStats::total_params
  std::uint64_t kept_linear = 0;     ///< Linear-like weights kept unquantized (not drawn: no error to show)
  std::vector<std::string> outliers;  ///< "model.layers.7 mlp.down_proj: 0.121 (kind median 0.082)"
};

/** A layer's error above this many times its kind's median is an outlier. */
inline constexpr double kOutlierFactor = 1.25;

/**
 * The kind and layer of a module name: the layer is the number after the last "layers." / "blocks." /
 * "h." component before the leaf (-1 when none), the kind is what follows it with expert indices
 * dropped ("model.layers.3.mlp.experts.7.down_proj" -> {3, "mlp.experts.down_proj"}); names outside any
 * layer are their own kind ("lm_head").
 */
std::pair<int, std::string> module_kind(const std::string& module);

/**
 * The relative RMS error of min-max's encoding of Gaussian weights under `s` (its reference encoder, on a
 * fixed 256 x 2048 sample of N(0, 1) drawn from a seeded generator: the same figure on every machine;
 * measured once per process). A yardstick for a module's error, not a pass mark: weights whose groups
 * hold outliers sit above it.
 */
double gaussian_minmax_rel_rms(QuantScheme s);

/** The report of the tensors verify compared (empty rows without --against). */
QualityReport quality_report(const VerifyStats& stats);

nlohmann::ordered_json to_json(const QualityReport& r);
/** A table: one line per kind (error, min-max's, error vs min-max, worst layer), the reference, the outliers. */
std::string to_text(const QualityReport& r);
/**
 * The report as a picture (docs/cli/verify.md "The quality picture"): a heat map of the error per module kind
 * (rows) and layer (columns) on an absolute colour scale with the reference marked on it, and, when min-max was
 * compared, a second map of the error vs min-max; cells with no module hatched, outliers outlined; a legend
 * (`<g id="legend">`) with both scales. Sized to its content (util/svg.h). Self-contained SVG 1.1.
 */
std::string to_svg(const QualityReport& r);

}  // namespace fp4forge
