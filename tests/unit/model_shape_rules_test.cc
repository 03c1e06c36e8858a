// model/shape_rules.h: the one home of the width formulas (attention, MLA, MLP / experts) that doctor's shape
// rules and verify's geometry check both use, and the rules themselves on a context built in memory.
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "fp4forge/model/shape_rules.h"

namespace fp4forge {
namespace {

using Json = nlohmann::ordered_json;
using P = std::pair<std::int64_t, std::int64_t>;

Json fixture_config(const std::string& name) {
  std::ifstream f(std::string(FP4FORGE_TEST_DATA) + "/" + name + "/config.json");
  return Json::parse(f);
}

TEST(ShapeRules, WidthFormulas) {
  // H 64, 4 heads of 16, 2 KV heads; an output-gated q is twice as tall.
  EXPECT_EQ(attention_shape(Role::ATTN_Q, 64, 4, 16, 2), P(64, 64));
  EXPECT_EQ(attention_shape(Role::ATTN_Q, 64, 4, 16, 2, 2), P(128, 64));
  EXPECT_EQ(attention_shape(Role::ATTN_K, 64, 4, 16, 2), P(32, 64));
  EXPECT_EQ(attention_shape(Role::ATTN_V, 64, 0, 16, 2), P(32, 64)) << "K/V need no query head count";
  EXPECT_EQ(attention_shape(Role::ATTN_O, 64, 4, 24, 2), P(64, 96));
  EXPECT_EQ(attention_shape(Role::ATTN_QKV, 64, 4, 16, 2), P(128, 64));
  EXPECT_EQ(attention_shape(Role::ATTN_Q, 64, 4, 0, 2), std::nullopt) << "unknown width: not checked";
  EXPECT_EQ(attention_shape(Role::MLP_UP, 64, 4, 16, 2), std::nullopt);
  EXPECT_EQ(mlp_shape(Role::MLP_GATE_UP, 64, 80), P(160, 64));
  EXPECT_EQ(mlp_shape(Role::EXPERT_DOWN, 64, 48), P(64, 48));
  EXPECT_EQ(mlp_shape(Role::SHARED_EXPERT_UP, 64, 112), P(112, 64));
  EXPECT_EQ(mlp_shape(Role::ATTN_Q, 64, 80), std::nullopt);
  ModelInfo m;
  m.hidden_size = 64;
  m.num_heads = 4;
  m.q_lora_rank = 24;
  m.kv_lora_rank = 32;
  m.qk_nope_head_dim = 16;
  m.qk_rope_head_dim = 8;
  m.v_head_dim = 16;
  EXPECT_EQ(mla_shape(Role::ATTN_Q_A, m), P(24, 64));
  EXPECT_EQ(mla_shape(Role::ATTN_Q_B, m), P(96, 24));
  EXPECT_EQ(mla_shape(Role::ATTN_KV_A, m), P(40, 64));
  EXPECT_EQ(mla_shape(Role::ATTN_KV_B, m), P(128, 32));
  EXPECT_EQ(mla_shape(Role::ATTN_O, m), P(64, 64));
}

// expected_linear_shape on real configs: a Gemma-4 full-attention layer uses the global head width, and the MLA
// and MoE widths of DeepSeek-V3 (the values are the fixtures' own tensor shapes).
TEST(ShapeRules, ExpectedShapesOfRealConfigs) {
  const Json g = fixture_config("gemma4-dense-mm");
  auto gi = read_model_info(g);
  ASSERT_TRUE(gi.ok()) << gi.error().describe();
  std::size_t full = 0;
  while (full < gi->layer_types.size() && gi->layer_types[full] != "full_attention") ++full;
  ASSERT_LT(full, gi->layer_types.size());
  TensorClass c;
  c.text_stack = true;
  c.layer = static_cast<std::int64_t>(full);
  c.layer_type = "full_attention";
  // The fixture's per_layer_config gives the full layer head_dim 64 and 1 KV head (32 and 2 on sliding layers).
  const std::int64_t H = gi->hidden_size, A = gi->num_heads;
  EXPECT_EQ(expected_linear_shape(*gi, text_config(g), Role::ATTN_Q, c), P(A * 64, H));
  EXPECT_EQ(expected_linear_shape(*gi, text_config(g), Role::ATTN_K, c), P(64, H));
  EXPECT_EQ(expected_linear_shape(*gi, text_config(g), Role::ATTN_O, c), P(H, A * 64));
  c.layer = 0;
  c.layer_type = gi->layer_types[0];
  EXPECT_EQ(expected_linear_shape(*gi, text_config(g), Role::ATTN_Q, c), P(A * 32, H));
  EXPECT_EQ(expected_linear_shape(*gi, text_config(g), Role::ATTN_K, c), P(2 * 32, H));

  const Json d = fixture_config("deepseek_v3");
  auto di = read_model_info(d);
  ASSERT_TRUE(di.ok());
  c.layer = 1;
  c.layer_type = "full_attention";
  EXPECT_EQ(expected_linear_shape(*di, d, Role::ATTN_KV_A, c), P(di->kv_lora_rank + di->qk_rope_head_dim, di->hidden_size));
  EXPECT_EQ(expected_linear_shape(*di, d, Role::EXPERT_DOWN, c), P(di->hidden_size, di->moe_intermediate_size));
  EXPECT_EQ(expected_linear_shape(*di, d, Role::ROUTER, c), std::nullopt);
}

// The rules over a context built in memory: a k_proj one head short is a config-shape-mismatch naming it.
TEST(ShapeRules, ContextInMemory) {
  ShapeContext ctx;
  ctx.config = fixture_config("llama");
  auto info = read_model_info(ctx.config);
  ASSERT_TRUE(info.ok());
  const std::int64_t H = info->hidden_size, d = info->head_dim > 0 ? info->head_dim : H / info->num_heads;
  const auto H64 = static_cast<std::uint64_t>(H);
  const auto kv_rows = static_cast<std::uint64_t>(info->num_kv_heads * d);
  ctx.tensors["model.embed_tokens.weight"] = {"BF16", {static_cast<std::uint64_t>(info->vocab_size), H64}};
  ctx.tensors["model.layers.0.self_attn.q_proj.weight"] = {"BF16", {static_cast<std::uint64_t>(info->num_heads * d), H64}};
  ctx.tensors["model.layers.0.self_attn.k_proj.weight"] = {"BF16", {kv_rows - static_cast<std::uint64_t>(d), H64}};
  ctx.tensors["model.layers.0.self_attn.v_proj.weight"] = {"BF16", {kv_rows, H64}};
  ASSERT_TRUE(init_shape_context(ctx).ok());
  EXPECT_EQ(ctx.layer_prefix, "model.layers.");
  FindingSink sink;
  check_config_shapes(ctx, sink);
  bool named = false;
  for (const auto& f : sink.take())
    for (const auto& t : f.tensors)
      named = named || (f.kind == "config-shape-mismatch" && t == "model.layers.0.self_attn.k_proj");
  EXPECT_TRUE(named);
}

}  // namespace
}  // namespace fp4forge
