#pragma once
/**
 * The quality report of `verify --against` (docs/cli/verify.md "Quality report"): the error of what was
 * written against the source, per module kind and per layer, beside what min-max would have given, and
 * the gain of the config's observer over it; layers whose error stands out of their kind are named.
 * A pure function of the per-tensor errors verify measured (VerifyStats::per_tensor); rendered as JSON,
 * text and an SVG (a strip per module kind across the layers).
 */
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp4forge/verify/verify.h"

namespace fp4forge {

/** One module kind in one layer (or outside any layer: layer -1), parameter-weighted over its tensors. */
struct QualityCell {
  int layer = -1;
  std::uint64_t params = 0;
  double rel_rms = 0;         ///< what was written, vs the source
  double minmax_rel_rms = 0;  ///< min-max's encoding of the same source
  bool outlier = false;       ///< rel_rms above kOutlierFactor x the median of its kind
  /** Relative error removed by the observer: 1 - rel / minmax (0 when minmax is 0). */
  double gain() const noexcept { return minmax_rel_rms > 0 ? 1.0 - rel_rms / minmax_rel_rms : 0.0; }
};

/** One module kind ("self_attn.q_proj", "mlp.experts.down_proj", ...) across the layers, layer order. */
struct QualityRow {
  std::string kind;
  std::vector<QualityCell> cells;
  QualityCell total;  ///< the kind over every layer (layer -1)
};

struct QualityReport {
  std::string observer;  ///< the config's observer
  std::vector<QualityRow> rows;  ///< kinds in the order their first tensor appears (module name order)
  QualityCell total;             ///< every compared tensor
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

/** The report of the tensors verify compared (empty rows without --against). */
QualityReport quality_report(const VerifyStats& stats);

nlohmann::ordered_json to_json(const QualityReport& r);
/** A table: one line per kind (error, min-max's, gain, worst layer), then the outliers. */
std::string to_text(const QualityReport& r);
/** Strips per kind across layers: the error (shaded against the kind's median, outliers marked) above
 * the gain over min-max (green when the observer lowered the error). Self-contained SVG 1.1. */
std::string to_svg(const QualityReport& r);

}  // namespace fp4forge
