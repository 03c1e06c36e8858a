// quantization_config parsing, scheme detection and ignore matching (nvfp4a16-format.md §4, §8).
#include <gtest/gtest.h>

#include <fstream>
#include <functional>

#include "fp4forge/model/quant_config.h"

namespace fp4forge {
namespace {

using Json = nlohmann::ordered_json;

// The literal model_free NVFP4A16 config of nvfp4a16-format.md §4.1.
Json nvfp4a16_config() {
  return Json::parse(R"({
    "config_groups": {"NVFP4A16": {"format": "nvfp4-pack-quantized", "input_activations": null,
      "output_activations": null, "targets": ["Linear"],
      "weights": {"actorder": null, "block_structure": null, "dynamic": false, "group_size": 16,
        "num_bits": 4, "observer": "memoryless_minmax", "observer_kwargs": {},
        "scale_dtype": "torch.float8_e4m3fn", "strategy": "tensor_group", "symmetric": true,
        "type": "float", "zp_dtype": null}}},
    "format": "nvfp4-pack-quantized", "global_compression_ratio": null,
    "ignore": ["lm_head", "re:.*embed_tokens.*"], "kv_cache_scheme": null,
    "quant_method": "compressed-tensors", "quantization_status": "compressed",
    "transform_config": {}, "version": "0.18.0"})");
}

TEST(QuantConfig, ParsesModelFreeNvfp4a16) {
  auto r = parse_quant_config(nvfp4a16_config());
  ASSERT_TRUE(r.ok()) << r.error().message;
  const QuantConfig& c = *r;
  EXPECT_EQ(c.quant_method, "compressed-tensors");
  EXPECT_EQ(c.format, "nvfp4-pack-quantized");
  EXPECT_EQ(c.quantization_status, "compressed");
  EXPECT_EQ(c.version, "0.18.0");
  ASSERT_EQ(c.groups.size(), 1u);
  EXPECT_EQ(c.groups[0].name, "NVFP4A16");
  EXPECT_EQ(c.groups[0].targets, std::vector<std::string>{"Linear"});
  ASSERT_TRUE(c.groups[0].weights.has_value());
  EXPECT_EQ(c.groups[0].weights->num_bits, 4);
  EXPECT_EQ(c.groups[0].weights->group_size, 16);
  EXPECT_EQ(c.groups[0].weights->dynamic, "false");
  EXPECT_FALSE(c.groups[0].input_activations.has_value());
  EXPECT_EQ(c.ignore, (std::vector<std::string>{"lm_head", "re:.*embed_tokens.*"}));
  EXPECT_FALSE(c.kv_cache_scheme);
  EXPECT_FALSE(c.transform_config);
  auto s = detect_scheme(c.groups[0], c.format);
  EXPECT_EQ(s.scheme, Scheme::NVFP4A16);
  EXPECT_TRUE(nvfp4a16_mismatches(c.groups[0], c.format).empty());
}

TEST(QuantConfig, WrongTypesAreBadInputWithKeyPath) {
  struct Case {
    const char* patch_path;
    Json value;
    const char* expect_in_message;
  };
  const std::vector<Case> cases = {
      {"/config_groups/NVFP4A16/weights/num_bits", "4", "config_groups.NVFP4A16.weights.num_bits"},
      {"/config_groups/NVFP4A16/weights/symmetric", 1, "weights.symmetric"},
      {"/config_groups/NVFP4A16/weights/group_size", 16.5, "weights.group_size"},
      {"/config_groups/NVFP4A16/targets", 5, "config_groups.NVFP4A16.targets"},
      {"/config_groups/NVFP4A16/input_activations", "none", "input_activations"},
      {"/config_groups/NVFP4A16/weights/dynamic", 3, "weights.dynamic"},
      {"/ignore", "lm_head", "quantization_config.ignore"},
      {"/ignore/1", 7, "quantization_config.ignore[1]"},
      {"/format", Json::array(), "quantization_config.format"},
      {"/config_groups", Json::array(), "quantization_config.config_groups"},
  };
  for (const auto& c : cases) {
    Json j = nvfp4a16_config();
    j[Json::json_pointer(c.patch_path)] = c.value;
    auto r = parse_quant_config(j);
    ASSERT_FALSE(r.ok()) << c.patch_path;
    EXPECT_EQ(r.error().code, Errc::BAD_INPUT);
    EXPECT_NE(r.error().message.find(c.expect_in_message), std::string::npos) << r.error().message;
  }
  auto r = parse_quant_config(Json::array());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::BAD_INPUT);
}

TEST(QuantConfig, SchemeDetectionNamesOtherSchemes) {
  auto group = [](const char* w, const char* in, const char* format = "") {
    ConfigGroup g;
    g.name = "g";
    g.format = format;
    auto wr = parse_quant_config(Json{{"config_groups", {{"g", {{"weights", Json::parse(w)}}}}}});
    EXPECT_TRUE(wr.ok());
    g.weights = wr->groups[0].weights;
    if (in) {
      auto ir = parse_quant_config(Json{{"config_groups", {{"g", {{"weights", Json::parse(in)}}}}}});
      g.input_activations = ir->groups[0].weights;
    }
    return g;
  };
  const char* nv = R"({"num_bits":4,"type":"float","strategy":"tensor_group","group_size":16,"symmetric":true})";
  EXPECT_EQ(detect_scheme(group(nv, nullptr), "nvfp4-pack-quantized").scheme, Scheme::NVFP4A16);
  EXPECT_EQ(detect_scheme(group(nv, nv), "nvfp4-pack-quantized").scheme, Scheme::NVFP4);
  EXPECT_FALSE(nvfp4a16_mismatches(group(nv, nv), "nvfp4-pack-quantized").empty());
  const char* mx = R"({"num_bits":4,"type":"float","strategy":"group","group_size":32,"symmetric":true})";
  EXPECT_EQ(detect_scheme(group(mx, nullptr), "mxfp4-pack-quantized").scheme, Scheme::MXFP4A16);
  const char* fp8 = R"({"num_bits":8,"type":"float","strategy":"channel","symmetric":true})";
  const char* fp8in = R"({"num_bits":8,"type":"float","strategy":"token","dynamic":true,"symmetric":true})";
  EXPECT_EQ(detect_scheme(group(fp8, fp8in), "float-quantized").scheme, Scheme::FP8_W8A8);
  const char* w4 = R"({"num_bits":4,"type":"int","strategy":"group","group_size":128,"symmetric":true})";
  EXPECT_EQ(detect_scheme(group(w4, nullptr), "pack-quantized").scheme, Scheme::WNA16_INT);
  // NVFP4 weights but group 32: not NVFP4A16, and not silently called NVFP4A16.
  const char* odd = R"({"num_bits":4,"type":"float","strategy":"tensor_group","group_size":32,"symmetric":true})";
  EXPECT_NE(detect_scheme(group(odd, nullptr), "nvfp4-pack-quantized").scheme, Scheme::NVFP4A16);
  auto mm = nvfp4a16_mismatches(group(odd, nullptr), "nvfp4-pack-quantized");
  ASSERT_EQ(mm.size(), 1u);
  EXPECT_NE(mm[0].find("group_size is 32"), std::string::npos);
  // Something unknown stays unknown.
  const char* weird = R"({"num_bits":3,"type":"float","strategy":"tensor"})";
  EXPECT_EQ(detect_scheme(group(weird, nullptr), "").scheme, Scheme::UNKNOWN);
  ConfigGroup empty;
  EXPECT_EQ(detect_scheme(empty, "").scheme, Scheme::UNKNOWN);
}

TEST(QuantConfig, FormatMismatchIsReported) {
  auto c = parse_quant_config(nvfp4a16_config());
  ASSERT_TRUE(c.ok());
  ConfigGroup g = c->groups[0];
  g.format = "pack-quantized";
  auto mm = nvfp4a16_mismatches(g, "nvfp4-pack-quantized");
  ASSERT_EQ(mm.size(), 1u);
  EXPECT_NE(mm[0].find("pack-quantized"), std::string::npos);
}

TEST(IgnoreMatcher, ExactAndPythonReMatchSemantics) {
  auto m = IgnoreMatcher::compile({"lm_head", "re:.*router", "re:.*mlp.gate$", "re:model.visual.*"});
  ASSERT_TRUE(m.ok()) << m.error().message;
  // re.match is anchored at the start only: re:.*router matches ...router.proj (a full match would not).
  EXPECT_TRUE(m->matches("model.language_model.layers.0.router.proj"));
  EXPECT_EQ(m->first_match("model.language_model.layers.0.router.proj"), 1);
  // exact entries are exact
  EXPECT_TRUE(m->matches("lm_head"));
  EXPECT_FALSE(m->matches("model.lm_head"));
  EXPECT_FALSE(m->matches("lm_head.weight"));
  // `$` anchors the end: mlp.gate yes, mlp.gate_proj no
  EXPECT_TRUE(m->matches("model.layers.3.mlp.gate"));
  EXPECT_FALSE(m->matches("model.layers.3.mlp.gate_proj"));
  // anchored at the start: "re:model.visual.*" does not match a name with a prefix before it
  EXPECT_TRUE(m->matches("model.visual.blocks.0.attn.qkv"));
  EXPECT_FALSE(m->matches("x.model.visual.blocks.0.attn.qkv"));
  EXPECT_FALSE(m->matches("model.language_model.layers.0.self_attn.q_proj"));
}

TEST(IgnoreMatcher, PythonOnlySyntax) {
  auto ok = IgnoreMatcher::compile({R"(re:\Amodel\.(?P<x>visual)\..*\Z)", "re:(?:a|b)c"});
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_TRUE(ok->matches("model.visual.merger"));
  EXPECT_FALSE(ok->matches("amodel.visual.merger"));
  EXPECT_TRUE(ok->matches("bc"));
  // Inline flags mean in RE2 what they mean in Python's re.
  auto flags = IgnoreMatcher::compile({"lm_head", "re:(?i)LM_HEAD"});
  ASSERT_TRUE(flags.ok()) << flags.error().message;
  EXPECT_TRUE(flags->entry_matches(1, "lm_head"));
  // Lookaround and backreferences (Python accepts them) have no linear-time form: refused, naming the entry.
  for (const char* p : {"re:model(?=\\.layers)", "re:(a)\\1"}) {
    auto look = IgnoreMatcher::compile({"lm_head", p});
    ASSERT_FALSE(look.ok()) << p;
    EXPECT_EQ(look.error().code, Errc::BAD_INPUT);
    EXPECT_NE(look.error().message.find("ignore[1]"), std::string::npos) << look.error().message;
  }
  auto bad = IgnoreMatcher::compile({"re:([unclosed"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, Errc::BAD_INPUT);
}

// Issue 27 #2: a backtracking engine crashed on a ~45 KB name and hung on `(a+)+$`; RE2 is linear in the input.
TEST(IgnoreMatcher, HostilePatternsAndNamesEndInLinearTime) {
  auto m = IgnoreMatcher::compile({"re:(a+)+$", "re:(x|xx)+y", "re:.*(.*)*z"});
  ASSERT_TRUE(m.ok()) << m.error().message;
  const std::string as(200000, 'a');
  EXPECT_TRUE(m->matches(as));
  EXPECT_FALSE(m->matches(as + "b"));                    // exponential for a backtracking engine
  EXPECT_FALSE(m->matches(std::string(200000, 'x')));     // (x|xx)+y without the y
  EXPECT_FALSE(m->matches(std::string(1 << 20, '.')));    // a 1 MiB name: no recursion, no stack overflow
  EXPECT_TRUE(m->matches(std::string(100000, 'q') + "z"));
}

TEST(IgnoreMatcher, VllmFusedLayerRule) {
  auto m = IgnoreMatcher::compile({"model.layers.0.self_attn.q_proj", "re:.*self_attn.k_proj$"});
  ASSERT_TRUE(m.ok());
  // q and k ignored, v not: vLLM refuses the fused qkv_proj
  auto partial = vllm_should_ignore(*m, {"model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.k_proj",
                                         "model.layers.0.self_attn.v_proj"});
  ASSERT_FALSE(partial.ok());
  EXPECT_NE(partial.error().message.find("v_proj"), std::string::npos);
  auto none = vllm_should_ignore(*m, {"model.layers.1.mlp.gate_proj", "model.layers.1.mlp.up_proj"});
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(*none);
  auto all = vllm_should_ignore(*m, {"model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.k_proj"});
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(*all);
}

TEST(QuantConfig, FindsConfigUnderEitherKey) {
  Json cfg = {{"architectures", {"X"}}, {"compression_config", nvfp4a16_config()}};
  std::string key;
  const Json* qc = find_quant_config(cfg, &key);
  ASSERT_NE(qc, nullptr);
  EXPECT_EQ(key, "compression_config");
  EXPECT_EQ(find_quant_config(Json{{"quantization_config", nullptr}}), nullptr);
}

// The one lookup, in vLLM's order: quantization_config, compression_config, then a multimodal wrapper's
// text_config.quantization_config (vLLM PR #24131). A null is absent; another type is returned for the parse to
// refuse; the path is what an edit needs.
TEST(QuantConfig, OneLookupInVllmOrder) {
  Json cfg = {{"text_config", {{"quantization_config", nvfp4a16_config()}}}};
  std::string key;
  std::vector<std::string> path;
  const Json* qc = find_quant_config(cfg, &key, &path);
  ASSERT_NE(qc, nullptr);
  EXPECT_EQ(qc, &cfg["text_config"]["quantization_config"]);
  EXPECT_EQ(key, "text_config.quantization_config");
  EXPECT_EQ(path, (std::vector<std::string>{"text_config", "quantization_config"}));
  cfg["compression_config"] = nvfp4a16_config();  // the top level comes first
  EXPECT_EQ(find_quant_config(cfg, &key, &path), &cfg["compression_config"]);
  EXPECT_EQ(path, std::vector<std::string>{"compression_config"});
  cfg["quantization_config"] = nullptr;  // null: absent
  EXPECT_EQ(find_quant_config(cfg, &key), &cfg["compression_config"]);
  cfg["quantization_config"] = 5;  // a wrong type is found, for the typed parse to refuse (exit 3)
  EXPECT_EQ(find_quant_config(cfg, &key), &cfg["quantization_config"]);
  EXPECT_EQ(key, "quantization_config");
  EXPECT_FALSE(parse_quant_config(*find_quant_config(cfg), key).ok());
  EXPECT_EQ(find_quant_config(Json{{"text_config", 3}}), nullptr);
  EXPECT_EQ(find_quant_config(Json{{"text_config", {{"compression_config", nvfp4a16_config()}}}}), nullptr)
      << "vLLM's get_quant_config reads compression_config at the top level only";
}

// ct_quant_config equals what compressed-tensors 0.18 builds for each preset (upstream's group key is the
// preset name, fp4forge's group_0 as llm-compressor's oneshot writes it), keys in sorted order.
TEST(QuantConfig, WrittenConfigEqualsUpstreamPerScheme) {
  std::ifstream f(std::string(FP4FORGE_TEST_DATA) + "/golden/schemes/quantization_config.json");
  ASSERT_TRUE(f) << "tests/data/golden/schemes/quantization_config.json";
  const nlohmann::json all = nlohmann::json::parse(f);
  for (QuantScheme s : kQuantSchemes) {
    SCOPED_TRACE(std::string(quant_scheme_preset(s)));
    nlohmann::json up = all.at("schemes").at(std::string(quant_scheme_preset(s)));
    nlohmann::json groups = nlohmann::json::object();
    groups["group_0"] = up["config_groups"].begin().value();
    up["config_groups"] = groups;
    up["ignore"] = {"lm_head"};
    const Json mine = ct_quant_config(s, {"lm_head"});
    EXPECT_EQ(nlohmann::json::parse(mine.dump()), up);
    // Sorted keys at every level (transformers writes config.json with sort_keys).
    std::function<void(const Json&)> sorted = [&](const Json& j) {
      if (!j.is_object()) return;
      std::string prev;
      for (auto it = j.begin(); it != j.end(); ++it) {
        EXPECT_LT(prev, it.key());
        prev = it.key();
        sorted(it.value());
      }
    };
    sorted(mine);
    // Read back, it is named as the preset.
    auto qc = parse_quant_config(mine);
    ASSERT_TRUE(qc.ok()) << qc.error().message;
    ASSERT_EQ(qc->groups.size(), 1u);
    EXPECT_EQ(scheme_label(qc->groups[0], qc->format), quant_scheme_preset(s));
  }
}

}  // namespace
}  // namespace fp4forge

namespace fp4forge {
namespace {

ConfigGroup preset_group(QuantScheme s, std::string* format = nullptr) {
  auto qc = parse_quant_config(ct_quant_config(s, {}));
  EXPECT_TRUE(qc.ok());
  if (format) *format = qc->format;
  return qc->groups.front();
}

// Each preset is named as itself and matches itself field for field, and no other preset.
TEST(QuantConfig, QuantSchemeOfAndMismatchesPerPreset) {
  for (QuantScheme s : kQuantSchemes) {
    SCOPED_TRACE(std::string(quant_scheme_preset(s)));
    std::string format;
    const ConfigGroup g = preset_group(s, &format);
    auto qs = quant_scheme_of(g, format);
    ASSERT_TRUE(qs.ok()) << qs.error().message;
    EXPECT_EQ(*qs, s);
    EXPECT_TRUE(scheme_mismatches(s, g, format).empty());
    for (QuantScheme o : kQuantSchemes)
      if (o != s) {
        EXPECT_FALSE(scheme_mismatches(o, g, format).empty()) << quant_scheme_preset(o);
      }
  }
  EXPECT_TRUE(nvfp4a16_mismatches(preset_group(QuantScheme::NVFP4A16), "nvfp4-pack-quantized").empty());
}

TEST(QuantConfig, MismatchesNameTheFieldsVllmReads) {
  auto mism = [](QuantScheme s, const std::function<void(ConfigGroup&)>& edit) {
    std::string format;
    ConfigGroup g = preset_group(s, &format);
    edit(g);
    return scheme_mismatches(s, g, format);
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(mism(QuantScheme::FP8_BLOCK, [](ConfigGroup& g) { g.weights->block_structure = {64, 64}; }),
            V{"weights.block_structure is [64, 64], expected [128, 128]"});
  EXPECT_EQ(mism(QuantScheme::W4A16, [](ConfigGroup& g) { g.weights->group_size = 64; }),
            V{"weights.group_size is 64, expected 128"});
  EXPECT_EQ(mism(QuantScheme::W4A16, [](ConfigGroup& g) { g.weights->symmetric = false; }),
            V{"weights.symmetric is false, expected true"});
  EXPECT_EQ(mism(QuantScheme::FP8_DYNAMIC, [](ConfigGroup& g) { g.input_activations->dynamic = "false"; }),
            V{"input_activations.dynamic is false, expected true"});
  EXPECT_EQ(mism(QuantScheme::FP8_BLOCK, [](ConfigGroup& g) { g.input_activations->group_size = 64; }),
            V{"input_activations.group_size is 64, expected 128"});
  const auto no_input = mism(QuantScheme::FP8_DYNAMIC, [](ConfigGroup& g) { g.input_activations.reset(); });
  ASSERT_EQ(no_input.size(), 1u);
  EXPECT_NE(no_input[0].find("input_activations is null, expected float 8-bit token"), std::string::npos) << no_input[0];
  EXPECT_EQ(mism(QuantScheme::MXFP4A16, [](ConfigGroup& g) { g.format = "nvfp4-pack-quantized"; }),
            V{"format is \"nvfp4-pack-quantized\", expected \"mxfp4-pack-quantized\""});
  // Cosmetic fields are not compared; an absent `dynamic` is CT's default, false.
  EXPECT_TRUE(mism(QuantScheme::W4A16, [](ConfigGroup& g) {
                g.weights->observer = "minmax";
                g.weights->scale_dtype = "torch.bfloat16";
                g.weights->dynamic = "";
              }).empty());
}

TEST(QuantConfig, QuantSchemeOfRefusesWhatFp4forgeDoesNotWrite) {
  std::string format;
  ConfigGroup g = preset_group(QuantScheme::FP8_DYNAMIC, &format);
  g.input_activations->dynamic = "false";
  g.input_activations->strategy = "tensor";  // static FP8: named FP8, not a preset
  EXPECT_EQ(scheme_label(g, format), "FP8");
  auto r = quant_scheme_of(g, format);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("FP8"), std::string::npos) << r.error().message;
  ConfigGroup w4a4 = preset_group(QuantScheme::NVFP4A16, &format);
  w4a4.input_activations = w4a4.weights;
  EXPECT_FALSE(quant_scheme_of(w4a4, format).ok());
  // The labels of a config, as verify and diff print them.
  auto qc = parse_quant_config(ct_quant_config(QuantScheme::W4A16, {}));
  ASSERT_TRUE(qc.ok());
  EXPECT_EQ(scheme_labels(*qc), "W4A16");
  qc->groups.push_back(preset_group(QuantScheme::FP8_BLOCK));
  EXPECT_EQ(scheme_labels(*qc), "FP8_BLOCK+W4A16");
  EXPECT_EQ(scheme_labels(QuantConfig{}), "none");
}

}  // namespace
}  // namespace fp4forge

// vLLM's group choice in a mixed-precision config (vllm_group_of / vllm_moe_group_of): names before class names,
// file order among targets, fused layers through their shards, experts through expert 0's three projections.
namespace fp4forge {
namespace {

QuantConfig two_groups() {
  Json qc = Json::parse(R"({"quant_method": "compressed-tensors", "format": "mixed-precision", "config_groups": {
    "attn": {"targets": ["re:.*self_attn\\.(q|k|v|o)_proj$", "model.layers.0.mlp.down_proj"], "format": "float-quantized",
             "weights": {"num_bits": 8, "type": "float", "strategy": "block", "block_structure": [128, 128]}},
    "rest": {"targets": ["Linear"], "format": "nvfp4-pack-quantized",
             "weights": {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16}}}})");
  auto p = parse_quant_config(qc);
  EXPECT_TRUE(p.ok()) << p.error().describe();
  return *p;
}

TEST(QuantConfigMixed, NamesBeforeClassNamesFusedThroughShards) {
  const QuantConfig qc = two_groups();
  auto g = [&](std::string_view layer, std::string_view cls, std::vector<std::string> shards = {}) {
    auto m = vllm_group_of(qc, layer, cls, shards);
    EXPECT_TRUE(m.ok());
    return m.ok() ? m->group : -9;
  };
  EXPECT_EQ(g("model.layers.3.self_attn.o_proj", "RowParallelLinear"), 0) << "a name target before the class";
  EXPECT_EQ(g("model.layers.3.mlp.down_proj", "RowParallelLinear"), 1) << "Linear is a substring of the class";
  EXPECT_EQ(g("model.layers.0.mlp.down_proj", "RowParallelLinear"), 0) << "an exact name";
  // A fused qkv_proj is no name target and is a Linear class: the class step wins before the shards are asked
  // (why llm-compressor's examples target fused layers by every shard name and by the fused name).
  EXPECT_EQ(g("model.layers.3.self_attn.qkv_proj", "QKVParallelLinear",
              {"model.layers.3.self_attn.q_proj", "model.layers.3.self_attn.k_proj", "model.layers.3.self_attn.v_proj"}),
            1);
  // Without a Linear target, the shards decide: all must match, the first one's target is used.
  QuantConfig only_attn = qc;
  only_attn.groups.pop_back();
  auto fused = vllm_group_of(only_attn, "model.layers.3.self_attn.qkv_proj", "QKVParallelLinear",
                             {"model.layers.3.self_attn.q_proj", "model.layers.3.self_attn.k_proj",
                              "model.layers.3.self_attn.v_proj"});
  ASSERT_TRUE(fused.ok());
  EXPECT_EQ(fused->group, 0);
  EXPECT_EQ(fused->target, "re:.*self_attn\\.(q|k|v|o)_proj$");
  auto partial = vllm_group_of(only_attn, "model.layers.3.mlp.gate_up_proj", "MergedColumnParallelLinear",
                               {"model.layers.3.mlp.gate_proj", "model.layers.3.mlp.up_proj"});
  ASSERT_TRUE(partial.ok());
  EXPECT_EQ(partial->group, -1) << "no target: vLLM has no scheme for it";
  // A target named by two groups keeps its place and takes the later group.
  QuantConfig dup = qc;
  dup.groups[1].targets.push_back("model.layers.0.mlp.down_proj");
  EXPECT_EQ(vllm_group_of(dup, "model.layers.0.mlp.down_proj", "RowParallelLinear")->group, 1);
  // A target vLLM cannot compile is bad input.
  QuantConfig bad = qc;
  bad.groups[0].targets = {"re:(unclosed"};
  EXPECT_FALSE(vllm_group_of(bad, "x", "Linear").ok());
}

TEST(QuantConfigMixed, ExpertsThroughExpertZero) {
  const QuantConfig qc = two_groups();
  auto none = IgnoreMatcher::compile({});
  ASSERT_TRUE(none.ok());
  auto m = vllm_moe_group_of(qc, *none, "model.layers.3.mlp.experts");
  ASSERT_TRUE(m.ok()) << m.error().describe();
  EXPECT_EQ(m->group, 1) << "FusedMoE takes Linear's group";
  // One projection of expert 0 named by the attention group: vLLM refuses the mix.
  QuantConfig split = qc;
  split.groups[0].targets.push_back("model.layers.3.mlp.experts.0.down_proj");
  auto mixed = vllm_moe_group_of(split, *none, "model.layers.3.mlp.experts");
  ASSERT_FALSE(mixed.ok());
  EXPECT_EQ(mixed.error().code, Errc::CHECK_FAILED);
  EXPECT_NE(mixed.error().message.find("All MoE projections"), std::string::npos) << mixed.error().message;
  // All three ignored: no scheme (unquantized experts); one ignored: the mix again.
  auto all = IgnoreMatcher::compile({"re:.*experts"});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(vllm_moe_group_of(qc, *all, "model.layers.3.mlp.experts")->group, -1);
  auto one = IgnoreMatcher::compile({"re:.*experts\\.0\\.up_proj"});
  ASSERT_TRUE(one.ok());
  EXPECT_FALSE(vllm_moe_group_of(qc, *one, "model.layers.3.mlp.experts").ok());
}

}  // namespace
}  // namespace fp4forge
