// The quality report (verify/quality.h): kinds and layers from module names, parameter-weighted cells,
// gains, outliers against the kind's median, and the renderings.
#include <gtest/gtest.h>

#include "fp4forge/verify/quality.h"

namespace fp4forge {
namespace {

TensorError te(std::string module, std::uint64_t rows, double rel, double mm) {
  TensorError e;
  e.module = std::move(module);
  e.rows = rows;
  e.cols = 16;
  e.rel_rms = rel;
  e.ref_rel_rms = rel;
  e.minmax_rel_rms = mm;
  return e;
}

TEST(VerifyQuality, KindAndLayerComeFromTheModuleName) {
  EXPECT_EQ(module_kind("model.layers.3.mlp.experts.7.down_proj"), std::make_pair(3, std::string("mlp.experts.down_proj")));
  EXPECT_EQ(module_kind("model.language_model.layers.12.self_attn.q_proj"), std::make_pair(12, std::string("self_attn.q_proj")));
  EXPECT_EQ(module_kind("transformer.h.0.attn.c_attn"), std::make_pair(0, std::string("attn.c_attn")));
  EXPECT_EQ(module_kind("lm_head"), std::make_pair(-1, std::string("lm_head")));
  // The last layer index wins (a vision tower's blocks inside a layer-less prefix).
  EXPECT_EQ(module_kind("model.visual.blocks.4.attn.qkv"), std::make_pair(4, std::string("attn.qkv")));
}

TEST(VerifyQuality, CellsAreParameterWeightedAndOutliersNamed) {
  VerifyStats st;
  st.observer = "nvfp4_expanded_mse";
  // Two experts of layer 0 (weights 1 and 3), one per layer 1..3; layer 3 is far above the median.
  st.per_tensor = {te("model.layers.0.mlp.experts.0.down_proj", 1, 0.10, 0.12),
                   te("model.layers.0.mlp.experts.1.down_proj", 3, 0.06, 0.08),
                   te("model.layers.1.mlp.experts.0.down_proj", 1, 0.08, 0.09),
                   te("model.layers.2.mlp.experts.0.down_proj", 1, 0.08, 0.09),
                   te("model.layers.3.mlp.experts.0.down_proj", 1, 0.20, 0.20),
                   te("model.layers.0.self_attn.q_proj", 1, 0.05, 0.05)};
  const QualityReport r = quality_report(st);
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(r.rows[0].kind, "mlp.experts.down_proj");
  ASSERT_EQ(r.rows[0].cells.size(), 4u);
  EXPECT_EQ(r.rows[0].cells[0].layer, 0);
  EXPECT_DOUBLE_EQ(r.rows[0].cells[0].rel_rms, (0.10 + 3 * 0.06) / 4);
  EXPECT_DOUBLE_EQ(r.rows[0].cells[0].minmax_rel_rms, (0.12 + 3 * 0.08) / 4);
  EXPECT_NEAR(r.rows[0].cells[1].gain(), 1.0 - 0.08 / 0.09, 1e-12);
  EXPECT_TRUE(r.rows[0].cells[3].outlier);
  EXPECT_FALSE(r.rows[0].cells[1].outlier);
  ASSERT_EQ(r.outliers.size(), 1u);
  EXPECT_NE(r.outliers[0].find("layer 3 mlp.experts.down_proj"), std::string::npos) << r.outliers[0];
  EXPECT_EQ(r.rows[1].cells.size(), 1u);  // too few layers to call anything an outlier
  EXPECT_EQ(r.total.params, 8u * 16u);
  const auto j = to_json(r);
  EXPECT_EQ(j["observer"], "nvfp4_expanded_mse");
  EXPECT_EQ(j["kinds"][0]["layers"][3]["outlier"], true);
  EXPECT_NE(to_text(r).find("outlier: layer 3"), std::string::npos);
  const std::string svg = to_svg(r);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("stroke=\"black\""), std::string::npos);  // the outlier is outlined
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
}

TEST(VerifyQuality, NoComparedTensorsGiveAnEmptyReport) {
  VerifyStats st;
  const QualityReport r = quality_report(st);
  EXPECT_TRUE(r.rows.empty());
  EXPECT_EQ(to_text(r), "");
  EXPECT_NE(to_svg(r).find("</svg>"), std::string::npos);
}

}  // namespace
}  // namespace fp4forge
