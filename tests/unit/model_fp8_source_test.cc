// FP8 source detection (model/fp8_source.h): dialects, scale layouts, what is dropped, and every refusal.
#include <gtest/gtest.h>

#include "fp4forge/model/fp8_source.h"

namespace fp4forge {
namespace {

using Json = nlohmann::ordered_json;
using T = Fp8TensorInfo;

Json native_config() {
  return Json::parse(R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
    "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                            "weight_block_size": [128, 128]}})");
}

Json ct_config(const std::string& strategy, const std::string& format = "float-quantized", int bits = 8,
               const std::string& type = "float") {
  Json w = {{"num_bits", bits}, {"type", type}, {"strategy", strategy}, {"symmetric", true}, {"dynamic", false}};
  if (strategy == "block") w["block_structure"] = {128, 128};
  Json c = {{"model_type", "qwen3"}};
  c["quantization_config"] = {{"quant_method", "compressed-tensors"}, {"format", format},
                              {"quantization_status", "compressed"},
                              {"config_groups", {{"group_0", {{"targets", {"Linear"}}, {"weights", w}, {"format", format}}}}},
                              {"ignore", {"lm_head"}}};
  return c;
}

Result<std::optional<Fp8Source>> detect(const Json& config, const std::vector<T>& ts, const Json* hfq = nullptr) {
  return detect_fp8_source(config, hfq, ts);
}

std::string error_of(const Json& config, const std::vector<T>& ts, const Json* hfq = nullptr) {
  auto r = detect(config, ts, hfq);
  if (r.ok()) return "(ok)";
  EXPECT_EQ(r.error().code, Errc::BAD_INPUT);
  return r.error().message;
}

TEST(Fp8Source, UnquantizedIsNone) {
  auto r = detect(Json{{"model_type", "qwen3"}}, {{"a.weight", DType::BF16, {4, 4}}, {"b.weight_scale", DType::F32, {1}}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->has_value());
}

TEST(Fp8Source, NativeBlocksWithPartialEdges) {
  auto r = detect(native_config(), {{"m.w.weight", DType::F8_E4M3, {300, 200}},
                                    {"m.w.weight_scale_inv", DType::F32, {3, 2}},
                                    {"m.norm.weight", DType::BF16, {200}}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_TRUE(r->has_value());
  const Fp8Source& s = **r;
  EXPECT_EQ(s.dialect, Fp8Dialect::NATIVE);
  ASSERT_EQ(s.weights.size(), 1u);
  const Fp8Weight& w = s.weights[0];
  EXPECT_EQ(w.scale, "m.w.weight_scale_inv");
  EXPECT_EQ(w.grid.layout, fp8::ScaleLayout::BLOCK);
  EXPECT_EQ(w.grid.rows, 300u);
  EXPECT_EQ(w.grid.cols, 200u);
  EXPECT_EQ(w.grid.scale_rows(), 3u);
  EXPECT_EQ(w.grid.scale_cols(), 2u);
  EXPECT_EQ(w.grid.scale_dtype, DType::F32);
  EXPECT_TRUE(s.consumed("m.w.weight_scale_inv"));
  EXPECT_FALSE(s.consumed("m.w.weight"));
  EXPECT_FALSE(s.consumed("m.norm.weight"));
  EXPECT_EQ(s.find("m.w.weight"), &s.weights[0]);
  EXPECT_EQ(s.find("m.norm.weight"), nullptr);
  EXPECT_NE(s.label.find("block 128x128 (F32)"), std::string::npos) << s.label;
  const Json j = fp8_source_json(s);
  EXPECT_EQ(j["dialect"], "fp8");
  EXPECT_EQ(j["fp8_weights"], 1);
  EXPECT_EQ(j["layouts"][0]["layout"], "block");
  EXPECT_EQ(j["layouts"][0]["block"], Json::array({128, 128}));
}

TEST(Fp8Source, FusedExpertsHaveOneGridPerMatrix) {
  auto r = detect(native_config(), {{"m.experts.gate_up_proj", DType::F8_E4M3, {4, 256, 192}},
                                    {"m.experts.gate_up_proj_scale_inv", DType::F32, {4, 2, 2}}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  const Fp8Weight& w = (*r)->weights.at(0);
  EXPECT_EQ(w.grid.layout, fp8::ScaleLayout::BLOCK);
  // Expert 3, row 130, column 129: block (1, 1) of matrix 3.
  EXPECT_EQ(w.grid.scale_index(3ull * 256 * 192 + 130 * 192 + 129), 3u * 4 + 1 * 2 + 1);
}

TEST(Fp8Source, SqueezedBlockScalesOfTransformersExperts) {
  // transformers 5.17 saves per-expert scales of its fused FP8 experts squeezed: [2, 1] -> [2], [1, 1] -> [].
  auto r = detect(native_config(), {{"e.0.gate_proj.weight", DType::F8_E4M3, {256, 128}},
                                    {"e.0.gate_proj.weight_scale_inv", DType::F32, {2}},
                                    {"e.0.down_proj.weight", DType::F8_E4M3, {128, 256}},
                                    {"e.0.down_proj.weight_scale_inv", DType::F32, {2}},
                                    {"e.1.down_proj.weight", DType::F8_E4M3, {128, 128}},
                                    {"e.1.down_proj.weight_scale_inv", DType::F32, {}}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  for (const auto& w : (*r)->weights) EXPECT_EQ(w.grid.layout, fp8::ScaleLayout::BLOCK) << w.tensor;
  EXPECT_EQ((*r)->find("e.0.down_proj.weight")->grid.scale_index(129), 1u);  // row 0, column 129: block (0, 1)
}

// Issue 27 #10: a block grid with its unit dimensions swapped ([1, 2] for a [256, 128] weight's [2, 1]) squeezes
// to the same [2] but reads the other orientation: refused, not accepted.
TEST(Fp8Source, SwappedUnitDimensionsOfABlockGridAreRefused) {
  const std::string e = error_of(native_config(), {{"m.weight", DType::F8_E4M3, {256, 128}},
                                                   {"m.weight_scale_inv", DType::F32, {1, 2}}});
  EXPECT_NE(e.find("[ceil(N/128), ceil(K/128)]"), std::string::npos) << e;
  auto ok = detect(native_config(), {{"m.weight", DType::F8_E4M3, {256, 128}}, {"m.weight_scale_inv", DType::F32, {2, 1}}});
  ASSERT_TRUE(ok.ok()) << ok.error().message;
}

TEST(Fp8Source, CompressedTensorsLayouts) {
  {
    auto r = detect(ct_config("channel"), {{"a.weight", DType::F8_E4M3, {64, 32}}, {"a.weight_scale", DType::BF16, {64, 1}},
                                           {"a.input_scale", DType::BF16, {1}}, {"lm_head.weight", DType::BF16, {10, 32}}});
    ASSERT_TRUE(r.ok()) << r.error().message;
    const Fp8Source& s = **r;
    EXPECT_EQ(s.dialect, Fp8Dialect::COMPRESSED_TENSORS);
    EXPECT_EQ(s.weights.at(0).grid.layout, fp8::ScaleLayout::CHANNEL);
    EXPECT_EQ(s.weights.at(0).grid.scale_dtype, DType::BF16);
    EXPECT_EQ(s.dropped, std::vector<std::string>{"a.input_scale"});
    EXPECT_TRUE(s.consumed("a.input_scale"));
  }
  {
    auto r = detect(ct_config("block"), {{"a.weight", DType::F8_E4M3, {256, 384}}, {"a.weight_scale", DType::F32, {2, 3}}});
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ((*r)->weights.at(0).grid.layout, fp8::ScaleLayout::BLOCK);
  }
  {
    auto r = detect(ct_config("tensor"), {{"a.weight", DType::F8_E4M3, {256, 384}}, {"a.weight_scale", DType::F32, {1}}});
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ((*r)->weights.at(0).grid.layout, fp8::ScaleLayout::TENSOR);
  }
}

TEST(Fp8Source, ModelOptFromHfQuantConfigAlone) {
  const Json hfq = Json::parse(R"({"producer": {"name": "modelopt", "version": "0.37.0"},
                                   "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}})");
  auto r = detect(Json{{"model_type", "llama"}},
                  {{"l.q_proj.weight", DType::F8_E4M3, {64, 32}}, {"l.q_proj.weight_scale", DType::F32, {}},
                   {"l.q_proj.input_scale", DType::F32, {}}, {"l.k_proj.k_scale", DType::F32, {}},
                   {"l.v_proj.v_scale", DType::F32, {}}},
                  &hfq);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const Fp8Source& s = **r;
  EXPECT_EQ(s.dialect, Fp8Dialect::MODELOPT);
  EXPECT_EQ(s.weights.at(0).grid.layout, fp8::ScaleLayout::TENSOR);
  EXPECT_EQ(s.dropped.size(), 3u);
  EXPECT_EQ(s.side_files, std::vector<std::string>{"hf_quant_config.json"});
}

TEST(Fp8Source, NoConfigReadByScaleNamesWithAWarning) {
  auto r = detect(Json{{"model_type", "qwen3"}},
                  {{"a.weight", DType::F8_E4M3, {128, 128}}, {"a.weight_scale_inv", DType::F32, {1, 1}}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ((*r)->dialect, Fp8Dialect::NATIVE);
  ASSERT_EQ((*r)->warnings.size(), 1u);
  EXPECT_NE((*r)->warnings[0].find("declares no quantization"), std::string::npos);
}

TEST(Fp8Source, MultimodalConfigUnderTextConfig) {
  Json c = Json::parse(R"({"model_type": "qwen3_vl", "text_config": {"quantization_config":
      {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]}}})");
  auto r = detect(c, {{"a.weight", DType::F8_E4M3, {256, 256}}, {"a.weight_scale_inv", DType::F32, {2, 2}}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ((*r)->weights.size(), 1u);
  const Json e = expanded_config(c);
  EXPECT_FALSE(e["text_config"].contains("quantization_config"));
  EXPECT_FALSE(expanded_config(native_config()).contains("quantization_config"));
  EXPECT_EQ(expanded_config(native_config())["model_type"], "qwen3");
}

struct Refusal {
  const char* name;
  Json config;
  std::vector<T> tensors;
  const char* says;
};

TEST(Fp8Source, Refusals) {
  const std::vector<T> fp8_ok{{"a.weight", DType::F8_E4M3, {256, 256}}, {"a.weight_scale_inv", DType::F32, {2, 2}}};
  auto method = [](const char* m) { return Json{{"quantization_config", {{"quant_method", m}}}}; };
  Json e5 = native_config();
  e5["quantization_config"]["fmt"] = "e5m2";
  const std::vector<Refusal> cases{
      {"nvfp4", ct_config("tensor_group", "nvfp4-pack-quantized", 4), {{"a.weight_packed", DType::U8, {4, 4}}}, "NVFP4"},
      {"mxfp4", ct_config("group", "mxfp4-pack-quantized", 4), {{"a.weight_packed", DType::U8, {4, 4}}}, "MXFP4"},
      {"int4", ct_config("group", "pack-quantized", 4, "int"), {{"a.weight_packed", DType::I32, {4, 4}}}, "INT4"},
      {"int8", ct_config("channel", "int-quantized", 8, "int"), {{"a.weight", DType::I8, {4, 4}}}, "INT8"},
      {"ct fp8 group", ct_config("group"), fp8_ok, "strategy 'group'"},
      {"gptq", method("gptq"), {}, "GPTQ"},
      {"awq", method("awq"), {}, "AWQ"},
      {"bitsandbytes", method("bitsandbytes"), {}, "bitsandbytes"},
      {"gpt-oss mxfp4", method("mxfp4"), {}, "MXFP4"},
      {"unknown method", method("shiny"), {}, "'shiny'"},
      {"no method", Json{{"quantization_config", Json::object()}}, {}, "no quant_method"},
      {"modelopt nvfp4", Json{{"quantization_config", {{"quant_method", "modelopt"}, {"quant_algo", "NVFP4"}}}}, {}, "ModelOpt NVFP4"},
      {"fmt e5m2", e5, fp8_ok, "e5m2"},
      {"e5m2 tensor", native_config(), {{"a.weight", DType::F8_E5M2, {4, 4}}}, "F8_E5M2"},
      {"no scale", native_config(), {{"a.weight", DType::F8_E4M3, {256, 256}}}, "a.weight_scale_inv"},
      {"scale shape", native_config(), {{"a.weight", DType::F8_E4M3, {256, 256}}, {"a.weight_scale_inv", DType::F32, {3, 2}}},
       "[ceil(N/128), ceil(K/128)]"},
      {"layout contradicts config", native_config(),
       {{"a.weight", DType::F8_E4M3, {256, 256}}, {"a.weight_scale_inv", DType::F32, {256, 1}}}, "per-channel"},
      {"scale dtype", native_config(), {{"a.weight", DType::F8_E4M3, {256, 256}}, {"a.weight_scale_inv", DType::I32, {2, 2}}},
       "I32"},
      {"orphan scale", native_config(),
       {fp8_ok[0], fp8_ok[1], {"b.weight", DType::BF16, {4, 4}}, {"b.weight_scale_inv", DType::F32, {1, 1}}},
       "belongs to no FP8 weight"},
      {"1-D fp8", native_config(), {{"a.bias", DType::F8_E4M3, {4}}}, "weight matrix"},
      {"declared, no fp8", native_config(), {{"a.weight", DType::BF16, {4, 4}}}, "no tensor is F8_E4M3"},
      {"status frozen", [] {
         Json c = ct_config("channel");
         c["quantization_config"]["quantization_status"] = "frozen";
         return c;
       }(), {{"a.weight", DType::F8_E4M3, {4, 4}}, {"a.weight_scale", DType::F32, {4, 1}}}, "quantization_status"},
  };
  for (const auto& c : cases) {
    const std::string msg = error_of(c.config, c.tensors);
    EXPECT_NE(msg.find(c.says), std::string::npos) << c.name << ": " << msg;
  }
}

// DeepSeek-V4 (issue 30): quant_method fp8 with scale_fmt ue8m0 (E8M0 scales, DeepSeek's own `X.scale` name), and
// routed experts as packed E2M1 (expert_dtype fp4): I8 [N, K/2] + an E8M0 scale per 32 elements of a row.
Json dsv4_config() {
  return Json::parse(R"({"architectures": ["DeepseekV4ForCausalLM"], "model_type": "deepseek_v4", "expert_dtype": "fp4",
    "quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8", "scale_fmt": "ue8m0",
                            "weight_block_size": [128, 128]}})");
}

// foreign_quantization: the formats fp4forge neither reads nor writes, named; its own output format, FP8 releases
// and unquantized configs are not foreign (their checks are their own).
TEST(Fp8Source, ForeignQuantizationIsNamedAndTheRestIsNot) {
  auto cfg = [](Json qc) {
    Json c = {{"architectures", {"LlamaForCausalLM"}}};
    if (!qc.is_null()) c["quantization_config"] = std::move(qc);
    return c;
  };
  const Json hfq_nvfp4 = {{"quantization", {{"quant_algo", "NVFP4"}}}};
  const Json hfq_fp8 = {{"quantization", {{"quant_algo", "FP8"}}}};
  auto named = [](const std::optional<std::string>& f, const std::string& part) {
    return f.has_value() && f->find(part) != std::string::npos;
  };
  EXPECT_TRUE(named(foreign_quantization(cfg({{"quant_method", "mxfp4"}}), nullptr), "gpt-oss"));
  EXPECT_TRUE(named(foreign_quantization(cfg({{"quant_method", "GPTQ"}}), nullptr), "GPTQ"));
  EXPECT_TRUE(named(foreign_quantization(cfg({{"quant_method", "new_method"}}), nullptr), "'new_method'"));
  EXPECT_TRUE(named(foreign_quantization(cfg({{"quant_method", "modelopt"}, {"quant_algo", "NVFP4"}}), nullptr), "NVFP4"));
  EXPECT_TRUE(named(foreign_quantization(cfg(nullptr), &hfq_nvfp4), "ModelOpt NVFP4"));
  EXPECT_TRUE(named(foreign_quantization(cfg({{"quant_method", "modelopt"}}), &hfq_nvfp4), "NVFP4"));
  EXPECT_FALSE(foreign_quantization(cfg(nullptr), nullptr).has_value());
  EXPECT_FALSE(foreign_quantization(cfg(nullptr), &hfq_fp8).has_value());
  EXPECT_FALSE(foreign_quantization(cfg({{"quant_method", "modelopt"}, {"quant_algo", "FP8"}}), nullptr).has_value());
  EXPECT_FALSE(foreign_quantization(cfg({{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}}), nullptr).has_value());
  EXPECT_FALSE(foreign_quantization(cfg({{"quant_method", "compressed-tensors"}}), nullptr).has_value());
}

TEST(Fp8Source, DeepSeekV4E8m0ScalesAndPackedFp4Experts) {
  auto r = detect(dsv4_config(), {{"l.attn.wq_a.weight", DType::F8_E4M3, {256, 384}},
                                  {"l.attn.wq_a.scale", DType::F8_E8M0, {2, 3}},
                                  {"l.ffn.experts.0.w1.weight", DType::I8, {256, 192}},
                                  {"l.ffn.experts.0.w1.weight_scale_inv", DType::F8_E8M0, {256, 12}},
                                  {"l.ffn.experts.0.w2.weight", DType::I8, {384, 128}},
                                  {"l.ffn.experts.0.w2.scale", DType::F32, {384, 8}},
                                  {"l.ffn.gate.tid2eid", DType::I64, {128, 2}},
                                  {"l.ffn.gate.weight", DType::BF16, {4, 384}}});
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_TRUE(r->has_value());
  const Fp8Source& s = **r;
  ASSERT_EQ(s.weights.size(), 3u);
  const Fp8Weight* a = s.find("l.attn.wq_a.weight");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->scale, "l.attn.wq_a.scale");
  EXPECT_EQ(a->grid.payload, fp8::Payload::E4M3);
  EXPECT_EQ(a->grid.scale_dtype, DType::F8_E8M0);
  EXPECT_EQ(a->shape, (std::vector<std::uint64_t>{256, 384}));
  const Fp8Weight* w1 = s.find("l.ffn.experts.0.w1.weight");
  ASSERT_NE(w1, nullptr);
  EXPECT_EQ(w1->grid.payload, fp8::Payload::E2M1);
  EXPECT_EQ(w1->shape, (std::vector<std::uint64_t>{256, 384}));  // two codes per byte
  EXPECT_EQ(w1->stored_shape, (std::vector<std::uint64_t>{256, 192}));
  EXPECT_EQ(w1->stored_dtype, DType::I8);
  EXPECT_EQ(w1->grid.layout, fp8::ScaleLayout::BLOCK);
  EXPECT_EQ(w1->grid.block_rows, 1u);
  EXPECT_EQ(w1->grid.block_cols, 32u);
  const Fp8Weight* w2 = s.find("l.ffn.experts.0.w2.weight");
  ASSERT_NE(w2, nullptr);
  EXPECT_EQ(w2->scale, "l.ffn.experts.0.w2.scale");
  EXPECT_EQ(w2->grid.scale_dtype, DType::F32);  // dsv4-flash-base: powers of two in a float32 container
  EXPECT_TRUE(s.consumed("l.attn.wq_a.scale"));
  EXPECT_TRUE(s.consumed("l.ffn.experts.0.w2.scale"));
  EXPECT_FALSE(s.consumed("l.ffn.gate.tid2eid"));
  EXPECT_NE(s.label.find("1 FP8 weights + 2 packed FP4"), std::string::npos) << s.label;
  EXPECT_NE(s.label.find("scale_fmt ue8m0"), std::string::npos) << s.label;
  const Json j = fp8_source_json(s);
  EXPECT_EQ(j["fp8_weights"], 1);
  EXPECT_EQ(j["fp4_weights"], 2);
  bool e2m1 = false;
  for (const auto& l : j["layouts"])
    if (l["payload"] == "e2m1") {
      e2m1 = true;
      EXPECT_EQ(l["block"], Json::array({1, 32}));
    }
  EXPECT_TRUE(e2m1) << j.dump();
  // The expansion's config describes bf16 experts.
  const Json e = expanded_config(dsv4_config());
  EXPECT_FALSE(e.contains("quantization_config"));
  EXPECT_FALSE(e.contains("expert_dtype"));
}

TEST(Fp8Source, Int8TensorsWithoutAnE8m0ScaleAreNotPayloads) {
  // An I8 tensor beside no scale, or beside an F32 scale where nothing declares E8M0, is left as it is.
  auto r = detect(native_config(), {{"a.weight", DType::F8_E4M3, {256, 256}}, {"a.weight_scale_inv", DType::F32, {2, 2}},
                                    {"b.idx", DType::I8, {4, 8}},
                                    {"c.weight", DType::I8, {4, 16}}, {"c.weight_scale_inv", DType::F32, {1, 1}}});
  ASSERT_FALSE(r.ok());  // c's F32 scale belongs to no FP8 weight: refused, not read as FP4
  EXPECT_NE(r.error().message.find("belongs to no FP8 weight"), std::string::npos) << r.error().message;
  auto r2 = detect(native_config(), {{"a.weight", DType::F8_E4M3, {256, 256}}, {"a.weight_scale_inv", DType::F32, {2, 2}},
                                     {"b.idx", DType::I8, {4, 8}}});
  ASSERT_TRUE(r2.ok()) << r2.error().message;
  EXPECT_EQ((*r2)->weights.size(), 1u);
}

TEST(Fp8Source, PackedFp4Refusals) {
  const std::vector<Refusal> cases{
      {"fp4 scale shape", dsv4_config(),
       {{"e.w1.weight", DType::I8, {256, 192}}, {"e.w1.scale", DType::F8_E8M0, {256, 6}}}, "one scale per 32"},
      {"fp4 in compressed-tensors", ct_config("channel"),
       {{"a.weight", DType::F8_E4M3, {4, 4}}, {"a.weight_scale", DType::F32, {4, 1}},
        {"e.w1.weight", DType::I8, {4, 16}}, {"e.w1.weight_scale_inv", DType::F8_E8M0, {4, 1}}},
       "packed FP4"},
      {"orphan e8m0 scale", dsv4_config(),
       {{"a.weight", DType::F8_E4M3, {256, 256}}, {"a.scale", DType::F8_E8M0, {2, 2}}, {"b.scale", DType::F8_E8M0, {1, 1}}},
       "belongs to no FP8 weight"},
      {"scale_fmt unknown", [] {
         Json c = dsv4_config();
         c["quantization_config"]["scale_fmt"] = "ue5m3";
         return c;
       }(), {}, "scale_fmt 'ue5m3'"},
      {"u8 scale not declared", native_config(),
       {{"a.weight", DType::F8_E4M3, {256, 256}}, {"a.weight_scale_inv", DType::U8, {2, 2}}}, "expected F32, BF16, F16 or F8_E8M0"},
  };
  for (const auto& c : cases) {
    const std::string msg = error_of(c.config, c.tensors);
    EXPECT_NE(msg.find(c.says), std::string::npos) << c.name << ": " << msg;
  }
}

}  // namespace
}  // namespace fp4forge
