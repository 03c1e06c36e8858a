// classify(), fused_sets(), read_model_info() and classify_arch() against the fixtures' tensor lists and
// name tables for the families without fixtures.
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fp4forge/model/arch_class.h"
#include "fp4forge/model/classify.h"
#include "fp4forge/model/model_info.h"
#include "fp4forge/model/structure.h"

using namespace fp4forge;
using Json = nlohmann::ordered_json;

namespace {

Json load(const std::string& rel) {
  std::ifstream f(std::string(FP4FORGE_TEST_DATA) + "/" + rel);
  EXPECT_TRUE(f.good()) << rel;
  return Json::parse(f);
}

struct Fixture {
  ModelInfo info;
  std::vector<std::pair<std::string, std::vector<std::uint64_t>>> tensors;
};

Fixture fixture(const std::string& name) {
  Fixture fx;
  auto info = read_model_info(load(name + "/config.json"));
  EXPECT_TRUE(info.ok());
  fx.info = info.value();
  const Json list = load(name + ".tensors.json");
  for (const auto& [k, v] : list.items()) fx.tensors.emplace_back(k, v[2].get<std::vector<std::uint64_t>>());
  return fx;
}

std::map<Role, int> role_counts(const Fixture& fx) {
  std::map<Role, int> m;
  for (const auto& [n, s] : fx.tensors) ++m[classify(n, s, fx.info).role];
  return m;
}

ModelInfo info_of(const char* json) {
  auto r = read_model_info(Json::parse(json));
  EXPECT_TRUE(r.ok());
  return r.ok() ? r.value() : ModelInfo{};
}

const char* kFixtures[] = {"gemma4-dense-mm", "gemma4-moe-mm", "qwen3_5-dense-mm", "llama"};

}  // namespace

TEST(ModelInfo, FixtureConfigs) {
  auto g = fixture("gemma4-moe-mm").info;
  EXPECT_EQ(g.family, Family::GEMMA4);
  EXPECT_TRUE(g.wrapper);
  EXPECT_EQ(g.text_prefix, "model.language_model.");
  EXPECT_EQ(g.architecture, "Gemma4ForConditionalGeneration");
  EXPECT_EQ(g.hidden_size, 128);
  EXPECT_EQ(g.num_layers, 6);
  EXPECT_EQ(g.num_experts, 8);
  EXPECT_EQ(g.experts_per_tok, 2);
  EXPECT_EQ(g.moe_intermediate_size, 64);
  EXPECT_TRUE(g.attention_k_eq_v);
  EXPECT_TRUE(g.has_per_layer_config);
  EXPECT_EQ(g.global_head_dim, 64);  // from per_layer_config["5"]
  EXPECT_EQ(g.num_global_kv_heads, 1);
  EXPECT_TRUE(g.tie_word_embeddings);
  EXPECT_TRUE(g.has_vision_config);
  EXPECT_FALSE(g.has_audio_config);  // "audio_config": null
  ASSERT_EQ(g.layer_types.size(), 6u);
  EXPECT_EQ(g.layer_types[5], "full_attention");
  EXPECT_EQ(g.layer_head_dim[5], 64);
  EXPECT_EQ(g.layer_kv_heads[5], 1);
  EXPECT_EQ(g.layer_head_dim[0], 32);
  EXPECT_EQ(g.layer_kv_heads[0], 2);

  auto q = fixture("qwen3_5-dense-mm").info;
  EXPECT_EQ(q.family, Family::QWEN3_5);
  EXPECT_EQ(q.mtp_num_hidden_layers, 1);
  EXPECT_TRUE(q.attn_output_gate);
  EXPECT_FALSE(q.tie_word_embeddings);
  EXPECT_EQ(q.linear_num_value_heads, 4);
  EXPECT_EQ(q.layer_head_dim[0], 0);  // linear attention
  EXPECT_EQ(q.layer_head_dim[3], 32);

  auto l = fixture("llama").info;
  EXPECT_EQ(l.family, Family::LLAMA);
  EXPECT_FALSE(l.wrapper);
  EXPECT_EQ(l.text_prefix, "model.");
  EXPECT_TRUE(l.layer_types_synthesized);
  EXPECT_EQ(l.layer_types, (std::vector<std::string>{"full_attention", "full_attention"}));
}

TEST(ModelInfo, FlatGemmaGlobalsAndSynthesizedTypes) {
  auto g =
      info_of(R"({"architectures":["Gemma4ForCausalLM"],"model_type":"gemma4_text","num_hidden_layers":12,
    "hidden_size":64,"num_attention_heads":4,"num_key_value_heads":4,"head_dim":16,"attention_k_eq_v":true,
    "global_head_dim":32,"num_global_key_value_heads":2})");
  EXPECT_EQ(g.family, Family::GEMMA4);
  EXPECT_EQ(g.text_prefix, "model.");
  EXPECT_EQ(g.global_head_dim, 32);
  EXPECT_EQ(g.num_global_kv_heads, 2);
  ASSERT_EQ(g.layer_types.size(), 12u);
  EXPECT_EQ(g.layer_types[5], "full_attention");
  EXPECT_EQ(g.layer_types[4], "sliding_attention");
  EXPECT_EQ(g.layer_types[11], "full_attention");
  EXPECT_EQ(g.layer_kv_heads[5], 2);
  EXPECT_EQ(g.layer_head_dim[5], 32);

  auto q = info_of(R"({"architectures":["Qwen3_5MoeForConditionalGeneration"],"model_type":"qwen3_5_moe",
    "tie_word_embeddings":true,
    "text_config":{"model_type":"qwen3_5_moe_text","num_hidden_layers":8,"full_attention_interval":4,
    "tie_word_embeddings":false,"num_experts":16,"num_experts_per_tok":4},"vision_config":{"depth":2}})");
  EXPECT_EQ(q.family, Family::QWEN3_5_MOE);
  EXPECT_FALSE(q.tie_word_embeddings);  // text level is authoritative
  EXPECT_EQ(q.layer_types,
            (std::vector<std::string>{"linear_attention", "linear_attention", "linear_attention",
                                      "full_attention", "linear_attention", "linear_attention",
                                      "linear_attention", "full_attention"}));
  EXPECT_EQ(q.num_experts, 16);
  EXPECT_EQ(q.experts_per_tok, 4);

  auto n = info_of(R"({"architectures":["Qwen3NextForCausalLM"],"model_type":"qwen3_next"})");
  EXPECT_EQ(n.family, Family::QWEN3_NEXT);
  auto m = info_of(R"({"architectures":["Qwen3MoeForCausalLM"],"model_type":"qwen3_moe"})");
  EXPECT_EQ(m.family, Family::QWEN3_MOE);
  auto d = info_of(R"({"architectures":["Qwen3ForCausalLM"],"model_type":"qwen3"})");
  EXPECT_EQ(d.family, Family::QWEN3);
  auto u = info_of(R"({"architectures":["StableLmForCausalLM"],"model_type":"stablelm","num_hidden_layers":2,
    "hidden_size":64,"num_attention_heads":4})");
  EXPECT_EQ(u.family, Family::UNKNOWN);
  EXPECT_EQ(u.head_dim, 16);
  EXPECT_EQ(u.num_kv_heads, 4);
}

TEST(ModelInfo, StructurallyImpossibleConfigsAreBadInput) {
  for (const char* bad :
       {R"([1,2])", R"({"text_config": 3})", R"({"layer_types": "full"})", R"({"layer_types": [1]})",
        R"({"num_hidden_layers": 100000000000})", R"({"model_type":"gemma4","per_layer_config":[1]})"}) {
    auto r = read_model_info(Json::parse(bad));
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code, Errc::BAD_INPUT) << bad;
  }
}

TEST(Classify, EveryFixtureTensorHasARole) {
  for (const char* name : kFixtures) {
    const Fixture fx = fixture(name);
    for (const auto& [n, s] : fx.tensors) {
      const TensorClass c = classify(n, s, fx.info);
      EXPECT_NE(c.role, Role::OTHER) << name << ": " << n;
      if (c.role == Role::MTP && n != "mtp.fc.weight") {
        EXPECT_NE(c.base_role, Role::OTHER) << n;
      }
    }
  }
}

TEST(Classify, FixtureRoleCounts) {
  auto g = role_counts(fixture("gemma4-moe-mm"));
  EXPECT_EQ(g[Role::ROUTER], 6);
  EXPECT_EQ(g[Role::EXPERT_GATE_UP_FUSED], 6);
  EXPECT_EQ(g[Role::EXPERT_DOWN_FUSED], 6);
  EXPECT_EQ(g[Role::ROUTER_AUX], 12);
  EXPECT_EQ(g[Role::ATTN_V], 5);  // the full layer has no v_proj (attention_k_eq_v)
  EXPECT_EQ(g[Role::ATTN_Q], 6);
  EXPECT_EQ(g[Role::SCALAR], 6);
  EXPECT_EQ(g[Role::PROJECTOR], 1);
  EXPECT_EQ(g[Role::EMBEDDING], 1);
  EXPECT_EQ(g[Role::LM_HEAD], 0);
  EXPECT_EQ(g[Role::VISION], 2 * 13 + 4);

  auto q = role_counts(fixture("qwen3_5-dense-mm"));
  EXPECT_EQ(q[Role::LINEAR_ATTN], 6 * 5);
  EXPECT_EQ(q[Role::LINEAR_ATTN_CONV], 6);
  EXPECT_EQ(q[Role::LINEAR_ATTN_PARAM], 12);
  EXPECT_EQ(q[Role::ATTN_Q], 2);
  EXPECT_EQ(q[Role::MTP], 15);
  EXPECT_EQ(q[Role::PROJECTOR], 6);
  EXPECT_EQ(q[Role::LM_HEAD], 1);
  EXPECT_EQ(q[Role::MLP_GATE], 8);

  auto l = role_counts(fixture("llama"));
  EXPECT_EQ(l[Role::ATTN_Q], 2);
  EXPECT_EQ(l[Role::NORM], 5);
  EXPECT_EQ(l[Role::LM_HEAD], 1);
  EXPECT_EQ(l[Role::EMBEDDING], 1);
}

TEST(Classify, LayerIndexAndType) {
  const Fixture fx = fixture("gemma4-dense-mm");
  auto c = classify("model.language_model.layers.5.self_attn.q_proj.weight",
                    std::vector<std::uint64_t>{256, 128}, fx.info);
  EXPECT_EQ(c.role, Role::ATTN_Q);
  EXPECT_EQ(c.layer, 5);
  EXPECT_EQ(c.layer_type, "full_attention");
  EXPECT_TRUE(c.text_stack);
  EXPECT_EQ(c.module, "model.language_model.layers.5.self_attn.q_proj");
  EXPECT_EQ(c.param, "weight");
  auto v = classify("model.vision_tower.encoder.layers.1.self_attn.q_proj.linear.weight",
                    std::vector<std::uint64_t>{64, 64}, fx.info);
  EXPECT_EQ(v.role, Role::VISION);
  EXPECT_FALSE(v.text_stack);
  EXPECT_EQ(v.layer, -1);
  auto q = fixture("qwen3_5-dense-mm");
  auto m = classify("mtp.layers.0.self_attn.q_proj.weight", std::vector<std::uint64_t>{256, 128}, q.info);
  EXPECT_EQ(m.role, Role::MTP);
  EXPECT_EQ(m.base_role, Role::ATTN_Q);
  EXPECT_EQ(m.layer, 0);
  EXPECT_FALSE(m.text_stack);
}

struct NameCase {
  const char* name;
  std::vector<std::uint64_t> shape;
  Role role;
  int layer;
  int expert;
};

TEST(Classify, FamiliesWithoutFixtures) {
  // Gemma-4 26B-style config, text-only flat and wrapper names both work.
  const ModelInfo g4 = info_of(R"({"architectures":["Gemma4ForConditionalGeneration"],"model_type":"gemma4",
    "text_config":{"model_type":"gemma4_text","num_hidden_layers":30,"hidden_size":2816,"num_experts":128,
    "enable_moe_block":true,"hidden_size_per_layer_input":256},"vision_config":{},"audio_config":{}})");
  const ModelInfo q35moe = info_of(R"({"architectures":["Qwen3_5MoeForConditionalGeneration"],
    "model_type":"qwen3_5_moe","text_config":{"model_type":"qwen3_5_moe_text","num_hidden_layers":40,
    "hidden_size":2048,"num_experts":256,"mtp_num_hidden_layers":1}})");
  const ModelInfo next = info_of(R"({"architectures":["Qwen3NextForCausalLM"],"model_type":"qwen3_next",
    "num_hidden_layers":48,"hidden_size":2048,"num_experts":512})");
  const ModelInfo q3moe = info_of(R"({"architectures":["Qwen3MoeForCausalLM"],"model_type":"qwen3_moe",
    "num_hidden_layers":48,"hidden_size":2048,"num_experts":128})");
  const ModelInfo q3 =
      info_of(R"({"architectures":["Qwen3ForCausalLM"],"model_type":"qwen3","num_hidden_layers":28})");
  const ModelInfo unknown =
      info_of(R"({"architectures":["FooForCausalLM"],"model_type":"foo","hidden_size":64,
    "num_experts":4})");

  const std::vector<std::pair<const ModelInfo*, NameCase>> cases = {
      {&g4,
       {"model.language_model.layers.3.experts.7.gate_proj.weight", {704, 2816}, Role::EXPERT_GATE, 3, 7}},
      {&g4,
       {"model.language_model.layers.3.experts.7.up_proj.weight_packed", {704, 1408}, Role::EXPERT_UP, 3, 7}},
      {&g4,
       {"model.language_model.layers.3.experts.7.down_proj.weight_scale",
        {2816, 44},
        Role::EXPERT_DOWN,
        3,
        7}},
      {&g4,
       {"model.language_model.layers.3.experts.7.gate_proj.weight_global_scale",
        {1},
        Role::EXPERT_GATE,
        3,
        7}},
      {&g4,
       {"model.language_model.layers.3.moe.gate_up_proj",
        {128, 1408, 2816},
        Role::EXPERT_GATE_UP_FUSED,
        3,
        -1}},
      {&g4, {"model.language_model.layers.3.moe.per_expert_scale", {128}, Role::ROUTER_AUX, 3, -1}},
      {&g4, {"model.layers.3.router.proj.weight", {128, 2816}, Role::ROUTER, 3, -1}},
      {&g4, {"model.language_model.embed_tokens_per_layer.weight", {262144, 7680}, Role::EMBEDDING, -1, -1}},
      {&g4, {"model.language_model.per_layer_model_projection.weight", {7680, 2816}, Role::PLE, -1, -1}},
      {&g4, {"model.language_model.per_layer_projection_norm.weight", {256}, Role::NORM, -1, -1}},
      {&g4, {"model.language_model.layers.2.per_layer_input_gate.weight", {256, 2816}, Role::PLE, 2, -1}},
      {&g4, {"model.language_model.layers.2.per_layer_projection.weight", {2816, 256}, Role::PLE, 2, -1}},
      {&g4, {"model.language_model.layers.2.post_per_layer_input_norm.weight", {2816}, Role::NORM, 2, -1}},
      {&g4,
       {"model.audio_tower.subsample_conv_projection.layer0.conv.weight",
        {128, 1, 3, 3},
        Role::AUDIO,
        -1,
        -1}},
      {&g4,
       {"model.audio_tower.conformer.0.feed_forward1.ffw_layer_1.linear.weight",
        {4096, 1024},
        Role::AUDIO,
        -1,
        -1}},
      {&g4, {"model.embed_audio.embedding_projection.weight", {2816, 1536}, Role::PROJECTOR, -1, -1}},
      {&g4,
       {"model.vision_tower.encoder.layers.0.self_attn.q_proj.linear.input_min", {}, Role::VISION, -1, -1}},
      {&q35moe, {"model.language_model.layers.0.mlp.gate.weight", {256, 2048}, Role::ROUTER, 0, -1}},
      {&q35moe,
       {"model.language_model.layers.0.mlp.shared_expert_gate.weight", {1, 2048}, Role::ROUTER, 0, -1}},
      {&q35moe,
       {"model.language_model.layers.0.mlp.shared_expert.gate_proj.weight",
        {512, 2048},
        Role::SHARED_EXPERT_GATE,
        0,
        -1}},
      {&q35moe,
       {"model.language_model.layers.0.mlp.shared_expert.up_proj.weight",
        {512, 2048},
        Role::SHARED_EXPERT_UP,
        0,
        -1}},
      {&q35moe,
       {"model.language_model.layers.0.mlp.shared_expert.down_proj.weight",
        {2048, 512},
        Role::SHARED_EXPERT_DOWN,
        0,
        -1}},
      {&q35moe,
       {"model.language_model.layers.0.mlp.experts.gate_up_proj",
        {256, 1024, 2048},
        Role::EXPERT_GATE_UP_FUSED,
        0,
        -1}},
      {&q35moe,
       {"model.language_model.layers.0.mlp.experts.down_proj",
        {256, 2048, 512},
        Role::EXPERT_DOWN_FUSED,
        0,
        -1}},
      {&q35moe,
       {"model.language_model.layers.1.mlp.experts.255.down_proj.weight",
        {2048, 512},
        Role::EXPERT_DOWN,
        1,
        255}},
      {&q35moe, {"mtp.layers.0.mlp.experts.3.gate_proj.weight", {512, 2048}, Role::MTP, 0, 3}},
      {&q35moe, {"mtp.fc.weight", {2048, 4096}, Role::MTP, -1, -1}},
      {&q35moe, {"model.visual.merger.linear_fc2.weight", {2048, 4608}, Role::PROJECTOR, -1, -1}},
      {&q35moe,
       {"model.visual.deepstack_merger_list.0.linear_fc1.weight", {4608, 4608}, Role::PROJECTOR, -1, -1}},
      {&q35moe, {"model.visual.blocks.0.attn.qkv.weight", {3456, 1152}, Role::VISION, -1, -1}},
      {&q35moe, {"lm_head.weight", {248320, 2048}, Role::LM_HEAD, -1, -1}},
      {&next, {"model.layers.0.linear_attn.in_proj_qkvz.weight", {12288, 2048}, Role::LINEAR_ATTN, 0, -1}},
      {&next, {"model.layers.0.linear_attn.in_proj_ba.weight", {64, 2048}, Role::LINEAR_ATTN, 0, -1}},
      {&next, {"model.layers.0.linear_attn.conv1d.weight", {8192, 1, 4}, Role::LINEAR_ATTN_CONV, 0, -1}},
      {&next, {"model.layers.0.linear_attn.A_log", {32}, Role::LINEAR_ATTN_PARAM, 0, -1}},
      {&next, {"model.layers.0.linear_attn.dt_bias", {32}, Role::LINEAR_ATTN_PARAM, 0, -1}},
      {&next, {"model.layers.0.linear_attn.norm.weight", {128}, Role::NORM, 0, -1}},
      {&next, {"model.layers.0.linear_attn.out_proj.weight", {2048, 4096}, Role::LINEAR_ATTN, 0, -1}},
      {&next, {"model.layers.3.mlp.experts.511.up_proj.weight", {512, 2048}, Role::EXPERT_UP, 3, 511}},
      {&next, {"model.layers.3.mlp.gate.weight", {512, 2048}, Role::ROUTER, 3, -1}},
      {&next, {"model.layers.3.mlp.shared_expert_gate.weight", {1, 2048}, Role::ROUTER, 3, -1}},
      {&next, {"mtp.layers.0.self_attn.o_proj.weight", {2048, 4096}, Role::MTP, 0, -1}},
      {&q3moe, {"model.layers.47.mlp.experts.127.gate_proj.weight", {768, 2048}, Role::EXPERT_GATE, 47, 127}},
      {&q3moe, {"model.layers.47.mlp.gate.weight", {128, 2048}, Role::ROUTER, 47, -1}},
      {&q3moe, {"model.layers.47.self_attn.q_norm.weight", {128}, Role::NORM, 47, -1}},
      {&q3, {"model.layers.1.self_attn.k_proj.weight", {1024, 1024}, Role::ATTN_K, 1, -1}},
      {&q3, {"model.layers.1.self_attn.k_proj.bias", {1024}, Role::ATTN_K, 1, -1}},
      {&q3, {"model.layers.1.self_attn.o_proj.weight_packed", {1024, 1024}, Role::ATTN_O, 1, -1}},
      {&q3, {"model.layers.1.self_attn.q_proj.input_global_scale", {1}, Role::ATTN_Q, 1, -1}},
      {&q3, {"model.layers.1.self_attn.k_scale", {}, Role::SCALAR, 1, -1}},
      {&q3, {"model.layers.1.mlp.down_proj.weight", {1024, 3072}, Role::MLP_DOWN, 1, -1}},
      {&q3, {"model.norm.weight", {1024}, Role::NORM, -1, -1}},
      // Unknown family: generic roles by name, structural router.
      {&unknown, {"model.layers.0.block_sparse_moe.gate.weight", {4, 64}, Role::ROUTER, 0, -1}},
      {&unknown, {"model.layers.0.block_sparse_moe.experts.2.w1.weight", {128, 64}, Role::EXPERT_GATE, 0, 2}},
      {&unknown, {"model.layers.0.block_sparse_moe.experts.2.w3.weight", {128, 64}, Role::EXPERT_UP, 0, 2}},
      {&unknown, {"model.layers.0.block_sparse_moe.experts.2.w2.weight", {64, 128}, Role::EXPERT_DOWN, 0, 2}},
      {&unknown, {"model.layers.0.foo.gate.weight", {4, 64}, Role::ROUTER, 0, -1}},  // [E, H] structurally
      {&unknown, {"model.layers.0.self_attn.q_a_proj.weight", {64, 64}, Role::ATTN_Q_A, 0, -1}},
      {&unknown, {"model.layers.0.self_attn.kv_a_proj_with_mqa.weight", {64, 64}, Role::ATTN_KV_A, 0, -1}},
      {&unknown, {"model.layers.0.self_attn.q_b_proj.weight", {64, 64}, Role::ATTN_Q_B, 0, -1}},
      {&unknown, {"model.layers.0.self_attn.kv_b_proj.weight", {64, 64}, Role::ATTN_KV_B, 0, -1}},
      {&unknown, {"model.layers.0.self_attn.qkv_proj.weight", {192, 64}, Role::ATTN_QKV, 0, -1}},
      {&unknown, {"model.layers.0.mlp.gate_up_proj.weight", {256, 64}, Role::MLP_GATE_UP, 0, -1}},
      {&unknown, {"model.layers.0.mamba.in_proj.weight", {304, 64}, Role::MAMBA, 0, -1}},
      {&unknown, {"model.layers.0.mamba.conv1d.weight", {304, 1, 4}, Role::LINEAR_ATTN_CONV, 0, -1}},
      {&unknown, {"model.layers.0.shared_mlp.input_linear.weight", {224, 64}, Role::SHARED_EXPERT_GATE_UP, 0, -1}},
      {&unknown, {"model.layers.0.block_sparse_moe.input_linear.weight", {4, 96, 64}, Role::EXPERT_GATE_UP_FUSED, 0, -1}},
      {&unknown, {"model.layers.0.block_sparse_moe.output_linear.weight", {4, 64, 48}, Role::EXPERT_DOWN_FUSED, 0, -1}},
      // Routing biases, attention sinks and fused experts' projection biases (gpt-oss, DeepSeek-V3, GLM, AFMoE,
      // Step, MiMo, DeepSeek-V4): roles of their own, never quantized, not "no known role".
      {&unknown, {"model.layers.1.mlp.gate.e_score_correction_bias", {4}, Role::ROUTER_AUX, 1, -1}},
      {&unknown, {"model.layers.1.mlp.experts.e_score_correction_bias", {4}, Role::ROUTER_AUX, 1, -1}},
      {&unknown, {"model.layers.1.block_sparse_moe.e_score_correction_bias", {4}, Role::ROUTER_AUX, 1, -1}},
      {&unknown, {"model.layers.1.mlp.expert_bias", {4}, Role::ROUTER_AUX, 1, -1}},
      {&unknown, {"model.layers.1.moe.router_bias", {4}, Role::ROUTER_AUX, 1, -1}},
      {&unknown, {"model.layers.0.self_attn.sinks", {8}, Role::ATTN_SINK, 0, -1}},
      {&unknown, {"model.layers.0.attn.attn_sink", {8}, Role::ATTN_SINK, 0, -1}},
      {&unknown, {"model.layers.0.self_attn.attention_sink_bias", {8}, Role::ATTN_SINK, 0, -1}},
      {&unknown, {"model.layers.0.mlp.sinks", {8}, Role::OTHER, 0, -1}},  // a sink outside attention: unknown
      {&unknown, {"model.layers.0.mlp.experts.gate_up_proj_bias", {4, 96}, Role::EXPERT_PROJ_BIAS, 0, -1}},
      {&unknown, {"model.layers.0.mlp.experts.down_proj_bias", {4, 64}, Role::EXPERT_PROJ_BIAS, 0, -1}},
      {&unknown, {"model.layers.0.mlp.experts.gate_up_proj", {4, 64, 96}, Role::EXPERT_GATE_UP_FUSED, 0, -1}},
      {&unknown, {"model.layers.0.mlp.experts.2.down_proj.bias", {64}, Role::EXPERT_DOWN, 0, 2}},
      {&unknown, {"model.layers.0.mlp.gate.wg.weight", {4, 64}, Role::ROUTER, 0, -1}},
      {&unknown, {"model.layers.0.input_layernorm.1.weight", {64}, Role::NORM, 0, -1}},
      {&unknown, {"image_newline", {64}, Role::PROJECTOR, -1, -1}},
      {&unknown, {"model.layers.0.mystery.weight", {64, 64}, Role::OTHER, 0, -1}},
      {&unknown, {"weird", {3}, Role::OTHER, -1, -1}},
      {&unknown, {"", {}, Role::OTHER, -1, -1}},
      {&unknown, {"....", {}, Role::OTHER, -1, -1}},
  };
  for (const auto& [info, c] : cases) {
    const TensorClass t = classify(c.name, c.shape, *info);
    EXPECT_EQ(role_name(t.role), role_name(c.role)) << c.name;
    EXPECT_EQ(t.layer, c.layer) << c.name;
    EXPECT_EQ(t.expert, c.expert) << c.name;
  }
  auto qp = classify("model.layers.1.self_attn.o_proj.weight_packed", std::vector<std::uint64_t>{8, 8}, q3);
  EXPECT_TRUE(qp.quant_param);
  EXPECT_EQ(qp.module, "model.layers.1.self_attn.o_proj");
  EXPECT_EQ(qp.param, "weight_packed");
  auto ml = classify("mtp.layers.0.mlp.experts.3.gate_proj.weight", std::vector<std::uint64_t>{8, 8}, q35moe);
  EXPECT_EQ(ml.base_role, Role::EXPERT_GATE);
}

TEST(Classify, DeepNamesDoNotCrash) {
  std::string deep = "model";
  for (int i = 0; i < 100; ++i) deep += ".x";
  deep += ".q_proj.weight";
  ModelInfo info;
  (void)classify(deep, std::vector<std::uint64_t>{4, 4}, info);
  SUCCEED();
}

TEST(FusedSets, Fixtures) {
  for (const char* name : kFixtures) {
    const Fixture fx = fixture(name);
    std::vector<std::string> mods;
    for (const auto& [n, s] : fx.tensors) {
      const TensorClass c = classify(n, s, fx.info);
      if (c.param == "weight" && s.size() == 2) mods.push_back(c.module);
    }
    const auto sets = fused_sets(mods, fx.info);
    std::map<std::string, int> kinds;
    for (const auto& s : sets) ++kinds[s.kind];
    if (std::string(name) == "gemma4-dense-mm" || std::string(name) == "gemma4-moe-mm") {
      EXPECT_EQ(kinds["qkv"], 5) << name;
      EXPECT_EQ(kinds["qk"], 1) << name;
      EXPECT_EQ(kinds["gate_up"], 6) << name;  // vision `.linear` modules form no sets
      for (const auto& s : sets)
        if (s.kind == "qk") {
          EXPECT_EQ(s.parent, "model.language_model.layers.5.self_attn");
          EXPECT_EQ(s.members, (std::vector<std::string>{"model.language_model.layers.5.self_attn.q_proj",
                                                         "model.language_model.layers.5.self_attn.k_proj"}));
        }
    } else if (std::string(name) == "qwen3_5-dense-mm") {
      EXPECT_EQ(kinds["qkv"], 3);  // 2 full layers + the MTP layer
      EXPECT_EQ(kinds["gate_up"], 9);
      EXPECT_EQ(kinds["qk"], 0);
    } else {
      EXPECT_EQ(kinds["qkv"], 2);
      EXPECT_EQ(kinds["gate_up"], 2);
    }
    for (std::size_t i = 1; i < sets.size(); ++i) EXPECT_LE(sets[i - 1].parent, sets[i].parent);
  }
}

TEST(FusedSets, ExpertsSharedExpertsAndMla) {
  const ModelInfo info = info_of(R"({"model_type":"qwen3_5_moe","num_hidden_layers":1})");
  const std::vector<std::string> mods = {
      "model.layers.0.mlp.experts.0.gate_proj",
      "model.layers.0.mlp.experts.0.up_proj",
      "model.layers.0.mlp.experts.0.down_proj",
      "model.layers.0.mlp.experts.1.gate_proj",
      "model.layers.0.mlp.experts.1.up_proj",
      "model.layers.0.mlp.experts.2.gate_proj",  // no up: no set
      "model.layers.0.mlp.shared_expert.gate_proj",
      "model.layers.0.mlp.shared_expert.up_proj",
      "model.layers.0.self_attn.q_a_proj",
      "model.layers.0.self_attn.kv_a_proj_with_mqa",
      "model.layers.1.attn.wq_a",
      "model.layers.1.attn.wkv_a_with_mqa",
      "model.layers.2.block_sparse_moe.experts.0.w1",
      "model.layers.2.block_sparse_moe.experts.0.w3",
      "model.layers.3.self_attn.q_proj",
      "model.layers.3.self_attn.k_proj",  // not gemma4: no qk set
  };
  const auto sets = fused_sets(mods, info);
  std::map<std::string, std::string> by_parent;
  for (const auto& s : sets) by_parent[s.parent] = s.kind;
  EXPECT_EQ(by_parent["model.layers.0.mlp.experts.0"], "gate_up");
  EXPECT_EQ(by_parent["model.layers.0.mlp.experts.1"], "gate_up");
  EXPECT_EQ(by_parent.count("model.layers.0.mlp.experts.2"), 0u);
  EXPECT_EQ(by_parent["model.layers.0.mlp.shared_expert"], "gate_up");
  EXPECT_EQ(by_parent["model.layers.0.self_attn"], "q_a_kv_a");
  EXPECT_EQ(by_parent["model.layers.1.attn"], "q_a_kv_a");
  EXPECT_EQ(by_parent["model.layers.2.block_sparse_moe.experts.0"], "w1_w3");
  EXPECT_EQ(by_parent.count("model.layers.3.self_attn"), 0u);
  EXPECT_EQ(sets.size(), 6u);
}

TEST(ArchClass, FixturesAndConfigFallback) {
  auto arch = [](const std::string& name) {
    const Fixture fx = fixture(name);
    std::vector<NamedShape> v;
    for (const auto& [n, s] : fx.tensors) v.push_back({n, s});
    return classify_arch(v, fx.info);
  };
  EXPECT_EQ(arch("gemma4-moe-mm").str(), "moe+multimodal");
  EXPECT_EQ(arch("gemma4-moe-mm").num_experts, 8);
  EXPECT_EQ(arch("gemma4-dense-mm").str(), "dense+multimodal");
  EXPECT_EQ(arch("qwen3_5-dense-mm").str(), "dense+hybrid+multimodal");
  EXPECT_EQ(arch("llama").str(), "dense");
  const ModelInfo q3moe = info_of(R"({"model_type":"qwen3_moe","num_experts":4})");
  EXPECT_EQ(classify_arch(std::span<const NamedShape>{}, q3moe).str(), "moe");
}

// ---- issue 26: structure first ----------------------------------------------------------------------

namespace {

Fixture read_structured(const std::string& name) {
  Fixture fx = fixture(name);
  std::vector<NamedShape> named;
  for (const auto& [n, s] : fx.tensors) named.push_back({n, s});
  read_structure_into(fx.info, named);
  return fx;
}

TensorClass role_of(const Fixture& fx, const std::string& name) {
  for (const auto& [n, s] : fx.tensors)
    if (n == name) return classify(n, s, fx.info);
  ADD_FAILURE() << name << " is not in the fixture";
  return {};
}

}  // namespace

// The text stack is read from the tensors, whatever its root: GPT-NeoX `gpt_neox.`, Nemotron-H `backbone.`,
// Idefics3 `model.text_model.`, LLaVA `language_model.model.`; towers under names no table lists (`vit.`).
TEST(Structure, TheTextStackIsWhereTheLayersAreWhateverItsRoot) {
  const std::map<std::string, std::string> roots{{"gpt_neox", "gpt_neox."},  {"nemotron_h", "backbone."},
                                                 {"idefics3", "model.text_model."}, {"llava", "language_model.model."},
                                                 {"falcon", "transformer."},  {"hunyuan_vl", "model."},
                                                 {"llama", "model."}};
  for (const auto& [fx_name, root] : roots) {
    const Fixture fx = read_structured(fx_name);
    EXPECT_EQ(fx.info.text_root, root) << fx_name;
    std::size_t text = 0;
    for (const auto& [n, s] : fx.tensors) {
      const TensorClass c = classify(n, s, fx.info);
      if (c.text_stack && c.layer >= 0) ++text;
    }
    EXPECT_GT(text, 10u) << fx_name;
  }
  const Fixture hv = read_structured("hunyuan_vl");
  EXPECT_EQ(role_of(hv, "vit.layers.0.self_attn.q_proj.weight").role, Role::VISION);
  EXPECT_EQ(hv.info.tower_roots, std::vector<std::string>{"vit."});
  const Fixture id = read_structured("idefics3");
  EXPECT_EQ(role_of(id, "model.vision_model.encoder.layers.0.self_attn.q_proj.weight").role, Role::VISION);
  EXPECT_EQ(role_of(id, "model.text_model.layers.1.self_attn.q_proj.weight").layer, 1);
}

// Names the transformers classes use that fp4forge once kept without a word.
TEST(Structure, NeoxFalconNemotronAndDeepseekV4NamesHaveRoles) {
  const Fixture nx = read_structured("gpt_neox");
  EXPECT_EQ(role_of(nx, "gpt_neox.layers.0.attention.query_key_value.weight").role, Role::ATTN_QKV);
  EXPECT_EQ(role_of(nx, "gpt_neox.layers.0.attention.dense.weight").role, Role::ATTN_O);
  EXPECT_EQ(role_of(nx, "gpt_neox.layers.0.mlp.dense_h_to_4h.weight").role, Role::MLP_UP);
  EXPECT_EQ(role_of(nx, "gpt_neox.layers.0.mlp.dense_4h_to_h.weight").role, Role::MLP_DOWN);
  EXPECT_EQ(role_of(nx, "gpt_neox.embed_in.weight").role, Role::EMBEDDING);
  EXPECT_EQ(role_of(nx, "embed_out.weight").role, Role::LM_HEAD);
  const Fixture fa = read_structured("falcon");
  EXPECT_EQ(role_of(fa, "transformer.h.0.self_attention.dense.weight").role, Role::ATTN_O);
  const Fixture nh = read_structured("nemotron_h");
  EXPECT_EQ(role_of(nh, "backbone.layers.1.mixer.experts.0.up_proj.weight").role, Role::EXPERT_UP);
  EXPECT_EQ(role_of(nh, "backbone.embeddings.weight").role, Role::EMBEDDING);
  const Fixture v4 = read_structured("deepseek_v4");
  EXPECT_EQ(role_of(v4, "head.weight").role, Role::LM_HEAD);
  const Fixture bc = read_structured("gpt_bigcode");
  EXPECT_EQ(role_of(bc, "transformer.wpe.weight").role, Role::EMBEDDING);
  // Step-3.x separate 3-D expert stacks under `moe`.
  ModelInfo info;
  const std::vector<std::uint64_t> s3{4, 48, 64};
  EXPECT_EQ(classify("model.layers.3.moe.gate_proj.weight", s3, info).role, Role::EXPERT_GATE);
  EXPECT_EQ(classify("model.layers.3.moe.up_proj.weight", s3, info).role, Role::EXPERT_UP);
  EXPECT_EQ(classify("model.layers.3.moe.down_proj.weight", std::vector<std::uint64_t>{4, 64, 48}, info).role,
            Role::EXPERT_DOWN_FUSED);
}

// Issue 26: the name-generic reading (structure read from the tensors, docs/registry.md §0) agrees with the
// registry's reading on every fixture of a family the registry knows: the same role, layer and text-stack
// membership for every tensor. Where the registry had no name for a prefix, only the generic reading finds
// the stack; there the registry reading is the one that was wrong (counted, never the other way round).
TEST(Structure, TheGenericReadingAgreesWithTheRegistryOnEveryKnownFamily) {
  std::size_t compared = 0;
  for (const auto& e : std::filesystem::directory_iterator(FP4FORGE_TEST_DATA)) {
    if (!e.is_directory() || !std::filesystem::exists(e.path() / "config.json")) continue;
    const std::string name = e.path().filename().string();
    Fixture plain = fixture(name);
    if (plain.info.family == Family::UNKNOWN) continue;
    const Fixture generic = read_structured(name);
    for (const auto& [n, s] : plain.tensors) {
      const TensorClass a = classify(n, s, plain.info), b = classify(n, s, generic.info);
      EXPECT_EQ(role_name(a.role), role_name(b.role)) << name << ": " << n;
      EXPECT_EQ(a.layer, b.layer) << name << ": " << n;
      EXPECT_EQ(a.text_stack, b.text_stack) << name << ": " << n;
      ++compared;
    }
  }
  EXPECT_GT(compared, 1000u);
}

// A family outside the registry (the config's names renamed) reads what the registry would add from the config
// and the tensors: decoder layers past num_hidden_layers with num_nextn_predict_layers are MTP layers stored
// DeepSeek-style (kept out of the text stack), and attention_k_eq_v fuses q and k where v_proj is absent.
TEST(Structure, AFamilyOutsideTheRegistryReadsMtpLayersAndKeyValueSharingFromConfigAndTensors) {
  auto renamed = [](const std::string& name) {
    Json cfg = load(name + "/config.json");
    cfg["model_type"] = "fp4forge_generic";
    cfg["architectures"] = Json::array({"Fp4forgeGenericForCausalLM"});
    if (cfg.contains("text_config")) cfg["text_config"]["model_type"] = "fp4forge_generic_text";
    Fixture fx;
    fx.info = read_model_info(cfg).value();
    EXPECT_EQ(fx.info.family, Family::UNKNOWN);
    const Json list = load(name + ".tensors.json");
    std::vector<NamedShape> named;
    for (const auto& [k, v] : list.items()) {
      fx.tensors.emplace_back(k, v[2].get<std::vector<std::uint64_t>>());
      named.push_back({k, fx.tensors.back().second});
    }
    read_structure_into(fx.info, named);
    return fx;
  };
  const Fixture ds = renamed("deepseek_v3");
  EXPECT_EQ(ds.info.mtp_form, MtpForm::EXTRA_LAYERS);
  EXPECT_EQ(ds.info.mtp_form, fixture("deepseek_v3").info.mtp_form);
  const TensorClass eh = role_of(ds, "model.layers.2.eh_proj.weight");
  EXPECT_EQ(eh.role, Role::MTP);
  EXPECT_FALSE(eh.text_stack);
  EXPECT_EQ(role_of(ds, "model.layers.1.self_attn.o_proj.weight").role, Role::ATTN_O);
  // Without the MTP count the extra layer is not called MTP (doctor reports it against num_hidden_layers).
  Json cfg = load("deepseek_v3/config.json");
  cfg["model_type"] = "fp4forge_generic";
  cfg["architectures"] = Json::array({"Fp4forgeGenericForCausalLM"});
  cfg["num_nextn_predict_layers"] = 0;
  ModelInfo none = read_model_info(cfg).value();
  std::vector<NamedShape> named;
  for (const auto& [n, s] : ds.tensors) named.push_back({n, s});
  read_structure_into(none, named);
  EXPECT_EQ(none.mtp_form, MtpForm::NONE);
  // Qwen3.5's mtp.* is read by name for every family; it is not the extra-layer form.
  EXPECT_EQ(renamed("qwen3_5-dense").info.mtp_form, MtpForm::NONE);

  const Fixture g4 = renamed("gemma4-moe-mm");
  std::vector<std::string> mods;
  for (const auto& [n, s] : g4.tensors)
    if (n.size() > 7 && n.ends_with("_proj.weight") && n.find("self_attn") != std::string::npos)
      mods.push_back(n.substr(0, n.size() - 7));
  bool qk = false;
  for (const auto& s : fused_sets(mods, g4.info)) qk = qk || s.kind == "qk";
  EXPECT_TRUE(qk) << "attention_k_eq_v: q and k share one global scale whatever the family";
}
