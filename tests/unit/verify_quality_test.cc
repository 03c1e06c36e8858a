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
  EXPECT_NEAR(r.rows[0].cells[1].vs_minmax(), 0.08 / 0.09 - 1.0, 1e-12);  // one figure, negative = lower error
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
  EXPECT_NE(svg.find("stroke=\"#000000\" stroke-width=\"2\"><title>mlp.experts.down_proj layer 3"), std::string::npos)
      << svg;  // the outlier is outlined
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
}

// Issue 55: one sign for the observer's effect in text, JSON and the picture ("error -x % vs min-max"); the
// reference error of the scheme beside it; min-max's own report still draws its errors.
TEST(VerifyQuality, OneSignEverywhereAndAReference) {
  VerifyStats st;
  st.scheme = "NVFP4A16";
  st.observer = "nvfp4_expanded_mse";
  for (int l = 0; l < 4; ++l) {
    TensorError e = te("model.layers." + std::to_string(l) + ".mlp.down_proj", 4, 0.082, 0.096);
    e.ref_rel_rms = 0.082;
    st.per_tensor.push_back(e);
  }
  const QualityReport r = quality_report(st);
  EXPECT_TRUE(r.minmax_compared);
  const double v = 0.082 / 0.096 - 1.0;  // -14.6 %
  const auto j = to_json(r);
  EXPECT_NEAR(j["error_vs_minmax"].get<double>(), v, 1e-12);
  EXPECT_NEAR(j["kinds"][0]["error_vs_minmax"].get<double>(), v, 1e-12);
  EXPECT_NEAR(j["gain"].get<double>(), -v, 1e-12);  // the 0.x field, the same figure negated
  EXPECT_NE(to_text(r).find("-14.6 %"), std::string::npos) << to_text(r);
  EXPECT_EQ(to_text(r).find("+14.6"), std::string::npos) << to_text(r);
  const std::string svg = to_svg(r);
  EXPECT_NE(svg.find("error -14.6 % vs min-max"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">-14.6 %<"), std::string::npos) << svg;
  EXPECT_EQ(svg.find("+14.6"), std::string::npos) << svg;
  // The reference: min-max on Gaussian weights, measured by the scheme's own encoder (docs/schemes.md quotes
  // 0.0962 on the synthesized random-init checkpoints).
  ASSERT_EQ(r.references.size(), 1u);
  EXPECT_EQ(r.references[0].scheme, QuantScheme::NVFP4A16);
  EXPECT_NEAR(r.references[0].gaussian_minmax_rel_rms, 0.096, 0.003);
  EXPECT_EQ(j["references"][0]["scheme"], "NVFP4A16");
  EXPECT_NE(svg.find("id=\"reference-0\""), std::string::npos);
  EXPECT_NE(svg.find("id=\"change-scale\""), std::string::npos);

  // The same weights under min-max: the error map is drawn (cells coloured, not blank), the change map is not.
  for (auto& e : st.per_tensor) e.ref_rel_rms = e.minmax_rel_rms = e.rel_rms = 0.096;
  st.observer = "memoryless_minmax";
  const QualityReport m = quality_report(st);
  EXPECT_FALSE(m.minmax_compared);
  const std::string msvg = to_svg(m);
  EXPECT_NE(msvg.find("class=\"cell-error\" fill=\"#"), std::string::npos);
  EXPECT_EQ(msvg.find("class=\"cell-error\" fill=\"#ffffff\""), std::string::npos);
  EXPECT_EQ(msvg.find("cell-change"), std::string::npos);
  EXPECT_EQ(msvg.find("change-scale"), std::string::npos);
  EXPECT_NE(msvg.find("its observer is min-max: nothing to compare"), std::string::npos);
  EXPECT_NE(msvg.find("a searched observer adds a map"), std::string::npos);  // NVFP4A16 takes one
}

// Every scheme has a finite reference below 1, ordered as their precision says (8-bit FP8 far below 4-bit).
TEST(VerifyQuality, GaussianReferencePerScheme) {
  for (QuantScheme s : kQuantSchemes) {
    const double v = gaussian_minmax_rel_rms(s);
    EXPECT_TRUE(v > 0 && v < 0.2) << quant_scheme_name(s) << " " << v;
    EXPECT_EQ(v, gaussian_minmax_rel_rms(s));  // measured once, the same figure after
  }
  EXPECT_LT(gaussian_minmax_rel_rms(QuantScheme::FP8_DYNAMIC), 0.5 * gaussian_minmax_rel_rms(QuantScheme::NVFP4A16));
}

// A kind with no module in a layer is hatched ("absent"), never drawn like a cell without a change.
TEST(VerifyQuality, AbsentCellsAreMarkedApart) {
  VerifyStats st;
  st.scheme = "NVFP4A16";
  st.per_tensor = {te("model.layers.0.self_attn.v_proj", 1, 0.08, 0.09), te("model.layers.0.self_attn.k_proj", 1, 0.08, 0.09),
                   te("model.layers.1.self_attn.k_proj", 1, 0.08, 0.09), te("lm_head", 1, 0.08, 0.09)};
  const std::string svg = to_svg(quality_report(st));
  EXPECT_NE(svg.find("class=\"cell-absent\" fill=\"url(#absent)\""), std::string::npos) << svg;
  EXPECT_NE(svg.find("self_attn.v_proj layer 1: no quantized module"), std::string::npos) << svg;
  EXPECT_NE(svg.find("lm_head outside any layer: rel RMS"), std::string::npos) << svg;  // its own column
  EXPECT_NE(svg.find(">none<"), std::string::npos) << svg;
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
