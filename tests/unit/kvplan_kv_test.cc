// KV-cache sizing reproduces, to the byte, the worked examples of architectures.md §4.3-4.5, from
// configs written here from the spec's tables (§1.2, §1.3, §1.5).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "fp4forge/kvplan/kv_cache.h"
#include "fp4forge/util/size.h"
#include "fp4forge/model/model_info.h"

namespace fp4forge::kvplan {
namespace {

using Json = nlohmann::ordered_json;
constexpr std::int64_t k262K = 262144;

Json qwen35_27b() {  // §1.3, Qwen3.5-27B (dense), multimodal wrapper; layer_types from the interval
  Json text = {{"model_type", "qwen3_5_text"}, {"hidden_size", 5120}, {"num_hidden_layers", 64},
               {"full_attention_interval", 4}, {"num_attention_heads", 24}, {"num_key_value_heads", 4},
               {"head_dim", 256}, {"attn_output_gate", true}, {"linear_num_key_heads", 16},
               {"linear_num_value_heads", 48}, {"linear_key_head_dim", 128}, {"linear_value_head_dim", 128},
               {"linear_conv_kernel_dim", 4}, {"intermediate_size", 17408}, {"mtp_num_hidden_layers", 1},
               {"mamba_ssm_dtype", "float32"}, {"max_position_embeddings", 262144}, {"vocab_size", 248320},
               {"tie_word_embeddings", false}};
  return {{"architectures", {"Qwen3_5ForConditionalGeneration"}}, {"model_type", "qwen3_5"},
          {"text_config", text}, {"vision_config", {{"depth", 27}, {"hidden_size", 1152}}}};
}

Json qwen36_35b_a3b() {  // §1.3 MoE column; explicit layer_types (3 linear : 1 full)
  Json types = Json::array();
  for (int i = 0; i < 40; ++i) types.push_back((i + 1) % 4 == 0 ? "full_attention" : "linear_attention");
  Json text = {{"model_type", "qwen3_5_moe_text"}, {"hidden_size", 2048}, {"num_hidden_layers", 40},
               {"layer_types", types}, {"num_attention_heads", 16}, {"num_key_value_heads", 2},
               {"head_dim", 256}, {"linear_num_key_heads", 16}, {"linear_num_value_heads", 32},
               {"linear_key_head_dim", 128}, {"linear_value_head_dim", 128}, {"linear_conv_kernel_dim", 4},
               {"num_experts", 256}, {"num_experts_per_tok", 8}, {"moe_intermediate_size", 512},
               {"shared_expert_intermediate_size", 512}, {"mamba_ssm_dtype", "float32"},
               {"max_position_embeddings", 262144}, {"vocab_size", 248320}};
  return {{"architectures", {"Qwen3_5MoeForConditionalGeneration"}}, {"model_type", "qwen3_5_moe"},
          {"text_config", text}};
}

Json gemma4_types(int n) {
  Json types = Json::array();
  for (int i = 0; i < n; ++i) types.push_back((i + 1) % 6 == 0 ? "full_attention" : "sliding_attention");
  return types;
}

/** §1.2 Gemma-4 31B (flat globals, or the transformers >= 5.15 per_layer_config form). */
Json gemma4_31b(bool per_layer_config) {
  Json text = {{"model_type", "gemma4_text"}, {"hidden_size", 5376}, {"num_hidden_layers", 60},
               {"intermediate_size", 21504}, {"num_attention_heads", 32}, {"num_key_value_heads", 16},
               {"head_dim", 256}, {"attention_k_eq_v", true}, {"sliding_window", 1024},
               {"layer_types", gemma4_types(60)}, {"max_position_embeddings", 262144},
               {"vocab_size", 262144}, {"num_kv_shared_layers", 0}, {"tie_word_embeddings", true}};
  if (per_layer_config) {
    Json plc = Json::object();
    for (int i = 5; i < 60; i += 6) plc[std::to_string(i)] = {{"head_dim", 512}, {"num_key_value_heads", 4}};
    text["per_layer_config"] = plc;
  } else {
    text["global_head_dim"] = 512;
    text["num_global_key_value_heads"] = 4;
  }
  return {{"architectures", {"Gemma4ForConditionalGeneration"}}, {"model_type", "gemma4"},
          {"text_config", text}};
}

Json gemma4_26b_a4b() {
  Json text = {{"model_type", "gemma4_text"}, {"hidden_size", 2816}, {"num_hidden_layers", 30},
               {"intermediate_size", 2112}, {"num_attention_heads", 16}, {"num_key_value_heads", 8},
               {"head_dim", 256}, {"global_head_dim", 512}, {"num_global_key_value_heads", 2},
               {"attention_k_eq_v", true}, {"sliding_window", 1024}, {"layer_types", gemma4_types(30)},
               {"enable_moe_block", true}, {"num_experts", 128}, {"top_k_experts", 8},
               {"moe_intermediate_size", 704}, {"max_position_embeddings", 262144}, {"vocab_size", 262144}};
  return {{"architectures", {"Gemma4ForConditionalGeneration"}}, {"model_type", "gemma4"},
          {"text_config", text}};
}

Json flat(const char* arch, const char* type, int layers, int heads, int kv, int hidden, int head_dim) {
  Json c = {{"architectures", {arch}}, {"model_type", type}, {"hidden_size", hidden},
            {"num_hidden_layers", layers}, {"num_attention_heads", heads}, {"num_key_value_heads", kv},
            {"max_position_embeddings", 131072}, {"vocab_size", 151936}};
  if (head_dim > 0) c["head_dim"] = head_dim;
  return c;
}

KvLayout layout_of(const Json& cfg, const KvOptions& opts = {}) {
  auto info = read_model_info(cfg);
  EXPECT_TRUE(info.ok()) << (info.ok() ? "" : info.error().message);
  auto l = build_kv_layout(*info, cfg, opts);
  EXPECT_TRUE(l.ok()) << (l.ok() ? "" : l.error().message);
  return l.ok() ? *l : KvLayout{};
}

std::uint64_t per_request(const Json& cfg, const KvOptions& opts, std::int64_t len = k262K,
                          std::int64_t batched = 8192) {
  return kv_demand(layout_of(cfg, opts), len, batched).bytes_per_request;
}

// ---- Qwen3.5-27B-like (§4.4) ----

TEST(KvplanQwen35, Dense27bWithoutAndWithPrefixCaching) {
  KvOptions off;
  off.prefix_caching = false;
  const KvLayout l = layout_of(qwen35_27b(), off);
  EXPECT_EQ(l.mode, GroupingMode::HYBRID);
  EXPECT_EQ(l.state_bytes, 3'207'168u);
  EXPECT_EQ(l.attn_block_size, 784);
  EXPECT_EQ(l.page_bytes, 3'211'264u);
  EXPECT_EQ(l.group_size, 16);
  ASSERT_EQ(l.groups.size(), 4u);  // 1 attention group + 3 state groups
  EXPECT_EQ(l.growing_bytes_per_token, 65'536u);
  const KvDemand d = kv_demand(l, k262K, 8192);
  EXPECT_EQ(d.blocks_per_request, 338);
  EXPECT_EQ(d.bytes_per_request, 17'366'515'712u);

  KvOptions on;  // prefix caching: align mode, 2 state pages
  EXPECT_EQ(per_request(qwen35_27b(), on), 17'520'656'384u);
  EXPECT_EQ(kv_demand(layout_of(qwen35_27b(), on), k262K, 8192).blocks_per_request, 341);
}

TEST(KvplanQwen35, Fp8HalvesAttentionNotState) {
  KvOptions o;
  o.prefix_caching = false;
  o.kv_cache_dtype = KvCacheDtype::FP8;
  const KvLayout l = layout_of(qwen35_27b(), o);
  EXPECT_EQ(l.attn_block_size, 1568);
  const KvDemand d = kv_demand(l, k262K, 8192);
  EXPECT_EQ(d.blocks_per_request, 171);
  EXPECT_EQ(d.bytes_per_request, 8'786'018'304u);
}

TEST(KvplanQwen35, TensorParallel2HalvesEveryTerm) {
  KvOptions o;
  o.prefix_caching = false;
  o.tp = 2;
  EXPECT_EQ(per_request(qwen35_27b(), o), 17'366'515'712u / 2);
  const KvLayout l = layout_of(qwen35_27b(), o);
  EXPECT_EQ(l.attn_block_size, 784);
  EXPECT_EQ(l.layers.front().kind, LayerKind::STATE);
  EXPECT_EQ(l.layers.front().ssm_state_bytes, 24u * 128 * 128 * 4);
}

TEST(KvplanQwen35, MtpThreeSpeculativeTokens) {
  KvOptions o;
  o.prefix_caching = false;
  o.spec_tokens = 3;
  const KvLayout l = layout_of(qwen35_27b(), o);
  EXPECT_EQ(l.attn_block_size, 800);
  ASSERT_EQ(l.groups.front().kind, LayerKind::STATE);  // layer 0 is linear attention
  EXPECT_EQ(l.groups.front().state_pages, 4);
  const KvDemand d = kv_demand(l, k262K, 8192);
  // The MTP draft layer's attention joins the grouping: 17 full-attention layers, so groups of 17 and the 48
  // linear-attention layers in 3 groups (padded): 328 + 3 x 4 blocks of 17 pages (club-3090 #594's log, exact).
  EXPECT_EQ(l.group_size, 17);
  EXPECT_EQ(d.blocks_per_request, 328 + 3 * 4);
  EXPECT_EQ(d.bytes_per_request, 17ull * 3'276'800 * 340);
  EXPECT_EQ(format_bytes(d.bytes_per_request), "17.64 GiB");
  EXPECT_FALSE(l.notes.empty());
}

TEST(KvplanQwen35, Bf16StateDtype) {
  KvOptions o;
  o.prefix_caching = false;
  o.mamba_ssm_cache_dtype = StateDtype::BFLOAT16;
  const KvLayout l = layout_of(qwen35_27b(), o);
  EXPECT_EQ(l.state_bytes, 1'634'304u);
  EXPECT_EQ(l.attn_block_size, 400);
  const auto bytes = kv_demand(l, k262K, 8192).bytes_per_request;
  EXPECT_EQ(bytes, 16ull * 1'638'400 * (656 + 3));
  EXPECT_EQ(format_bytes(bytes), "16.09 GiB");
}

TEST(KvplanQwen35, StateDtypeFallsBackToModelDtypeWithoutConfigKey) {
  Json cfg = qwen35_27b();
  cfg["text_config"].erase("mamba_ssm_dtype");
  const KvLayout l = layout_of(cfg);
  EXPECT_EQ(l.ssm_dtype_bytes, 2);
  EXPECT_EQ(l.attn_block_size, 400);
}

TEST(KvplanQwen35, Qwen36MoE35bA3b) {
  KvOptions off;
  off.prefix_caching = false;
  const KvLayout l = layout_of(qwen36_35b_a3b(), off);
  EXPECT_EQ(l.state_bytes, 2'146'304u);
  EXPECT_EQ(l.attn_block_size, 1056);
  EXPECT_EQ(l.page_bytes, 2'162'688u);
  EXPECT_EQ(l.group_size, 10);
  EXPECT_EQ(kv_demand(l, k262K, 8192).bytes_per_request, 5'449'973'760u);
  EXPECT_EQ(per_request(qwen36_35b_a3b(), KvOptions{}), 5'514'854'400u);
}

TEST(KvplanQwen35, NaiveAllLayerFigureIsTheCommonMistake) {
  const KvLayout l = layout_of(qwen35_27b());
  EXPECT_EQ(l.naive_bytes_per_token, 65'536u);  // only attention layers have per-token KV
  EXPECT_EQ(l.layers.size(), 64u);
}

// ---- Gemma-4 (§4.3) ----

TEST(KvplanGemma4, Dense31bAtBatch8192) {
  const KvLayout l = layout_of(gemma4_31b(false));
  EXPECT_EQ(l.mode, GroupingMode::HYBRID);
  EXPECT_EQ(l.page_bytes, 262'144u);
  EXPECT_EQ(l.group_size, 10);
  ASSERT_EQ(l.groups.size(), 6u);  // 5 sliding groups + 1 full group
  int full_groups = 0;
  for (const auto& g : l.groups)
    if (g.kind == LayerKind::FULL) {
      ++full_groups;
      EXPECT_EQ(g.block_size, 32);
      EXPECT_EQ(g.layers.size(), 10u);
    } else {
      EXPECT_EQ(g.block_size, 16);
      EXPECT_EQ(g.window, 1024);
    }
  EXPECT_EQ(full_groups, 1);
  EXPECT_EQ(l.naive_bytes_per_token, 901'120u);
  EXPECT_EQ(l.growing_bytes_per_token, 81'920u);
  const KvDemand d = kv_demand(l, k262K, 8192);
  EXPECT_EQ(d.blocks_per_request, 11'077);
  EXPECT_EQ(d.bytes_per_request, 29'037'690'880u);
  EXPECT_EQ(format_bytes(d.bytes_per_request), "27.04 GiB");
}

TEST(KvplanGemma4, PerLayerConfigFormGivesTheSameNumbers) {
  EXPECT_EQ(per_request(gemma4_31b(true), {}), 29'037'690'880u);
}

TEST(KvplanGemma4, Fp8AndBatchVariants) {
  KvOptions fp8;
  fp8.kv_cache_dtype = KvCacheDtype::FP8;
  const KvLayout l8 = layout_of(gemma4_31b(false), fp8);
  EXPECT_EQ(l8.page_bytes, 131'072u);
  EXPECT_EQ(kv_demand(l8, k262K, 8192).bytes_per_request, 14'518'845'440u);
  EXPECT_EQ(format_bytes(per_request(gemma4_31b(false), {}, k262K, 2048)), "22.36 GiB");
  EXPECT_EQ(format_bytes(per_request(gemma4_31b(false), {}, k262K, 16384)), "33.29 GiB");
}

TEST(KvplanGemma4, TensorParallel2Halves) {
  KvOptions o;
  o.tp = 2;
  EXPECT_EQ(per_request(gemma4_31b(false), o), 29'037'690'880u / 2);
}

TEST(KvplanGemma4, HybridManagerDisabledStoresEveryToken) {
  KvOptions o;
  o.hybrid_kv_cache_manager = false;
  const KvLayout l = layout_of(gemma4_31b(false), o);
  EXPECT_EQ(l.mode, GroupingMode::UNIFORM_TYPE);
  EXPECT_EQ(kv_demand(l, k262K, 8192).bytes_per_request, 901'120ull * k262K);
}

TEST(KvplanGemma4, Moe26bA4b) {
  const KvLayout l = layout_of(gemma4_26b_a4b());
  EXPECT_EQ(l.group_size, 5);
  const KvDemand d = kv_demand(l, k262K, 8192);
  EXPECT_EQ(d.blocks_per_request, 11'077);
  EXPECT_EQ(d.bytes_per_request, 7'259'422'720u);
  KvOptions fp8;
  fp8.kv_cache_dtype = KvCacheDtype::FP8;
  EXPECT_EQ(format_bytes(per_request(gemma4_26b_a4b(), fp8)), "3.38 GiB");
}

TEST(KvplanGemma4, KvSharedLayersAllocateNothing) {
  // E2B-like: 35 layers (4 sliding : 1 full), the last 20 share KV; full layers head_dim 512.
  Json types = Json::array();
  for (int i = 0; i < 35; ++i) types.push_back((i + 1) % 5 == 0 ? "full_attention" : "sliding_attention");
  Json text = {{"model_type", "gemma4_text"}, {"hidden_size", 1536}, {"num_hidden_layers", 35},
               {"num_attention_heads", 8}, {"num_key_value_heads", 1}, {"head_dim", 256},
               {"global_head_dim", 512}, {"attention_k_eq_v", false}, {"sliding_window", 512},
               {"layer_types", types}, {"num_kv_shared_layers", 20}, {"max_position_embeddings", 131072}};
  const Json cfg = {{"model_type", "gemma4"}, {"text_config", text}};
  const KvLayout l = layout_of(cfg);
  EXPECT_EQ(l.kv_shared_layers.size(), 20u);
  EXPECT_EQ(l.layers.size(), 15u);  // 12 sliding + 3 full
  EXPECT_EQ(l.group_size, 3);
  EXPECT_EQ(l.page_bytes, 2u * 16 * 1 * 512 * 2);  // full page; sliding block doubled to 32
  EXPECT_EQ(l.growing_bytes_per_token, 3u * 2 * 512 * 2);
  const KvDemand d = kv_demand(l, 131072, 2048);
  // full: ceil(131072/16) = 8192; each of 4 sliding groups: ceil((511+2048)/32)+1 = 81.
  EXPECT_EQ(d.blocks_per_request, 8192 + 4 * 81);
  EXPECT_EQ(d.bytes_per_request, 3ull * 32768 * (8192 + 4 * 81));
}

// ---- Llama / Qwen3 / Qwen3-MoE: one group, block 16 (§4.4 contrast) ----

TEST(KvplanSingleGroup, PerTokenFigures) {
  const KvLayout llama = layout_of(flat("LlamaForCausalLM", "llama", 32, 32, 8, 4096, 0));  // d = H/A
  EXPECT_EQ(llama.mode, GroupingMode::UNIFORM);
  EXPECT_EQ(llama.group_size, 32);
  EXPECT_EQ(llama.growing_bytes_per_token, 128u * 1024);
  EXPECT_EQ(kv_demand(llama, 32768, 8192).bytes_per_request, 128ull * 1024 * 32768);

  const KvLayout q32 = layout_of(flat("Qwen3ForCausalLM", "qwen3", 64, 64, 8, 5120, 128));
  EXPECT_EQ(q32.growing_bytes_per_token, 256u * 1024);
  EXPECT_EQ(kv_demand(q32, 32768, 8192).bytes_per_request, 8ull * kGiB);
  EXPECT_EQ(kv_demand(q32, 100, 8192).bytes_per_request, 256ull * 1024 * 112);  // ceil to a block

  const KvLayout q30 = layout_of(flat("Qwen3MoeForCausalLM", "qwen3_moe", 48, 32, 4, 2048, 128));
  EXPECT_EQ(q30.growing_bytes_per_token, 96u * 1024);
  KvOptions tp8;
  tp8.tp = 8;  // 4 kv heads over 8 ranks: replicated, max(1, 4 // 8) = 1 head per rank
  EXPECT_EQ(layout_of(flat("Qwen3MoeForCausalLM", "qwen3_moe", 48, 32, 4, 2048, 128), tp8)
                .growing_bytes_per_token, 24u * 1024);
}

// ---- budget-dependent figures (§4.5 illustration: H200, util 0.9, 6 GiB overhead) ----

TEST(KvplanBudget, IllustrationNumBlocksAndConcurrency) {
  const std::uint64_t budget = 143'771ull * kMiB * 9 / 10;
  const std::uint64_t overhead = 6 * kGiB;
  // Gemma-4 31B: 31,273,086,512 bf16 parameters + 210 MiB of duplicated V.
  const std::uint64_t w31 = 31'273'086'512ull * 2 + 10ull * 2048 * 5376 * 2;
  const KvLayout g = layout_of(gemma4_31b(false));
  const std::uint64_t avail = budget - w31 - overhead;
  EXPECT_EQ(format_bytes(avail), "61.91 GiB");
  const std::int64_t nb = kv_num_blocks(g, avail);
  EXPECT_EQ(nb, 25'356);
  EXPECT_NEAR(kv_max_concurrency(kv_demand(g, k262K, 8192), nb), 2.29, 0.005);
  KvOptions fp8;
  fp8.kv_cache_dtype = KvCacheDtype::FP8;
  const KvLayout g8 = layout_of(gemma4_31b(false), fp8);
  EXPECT_EQ(kv_num_blocks(g8, avail), 50'712);
  EXPECT_NEAR(kv_max_concurrency(kv_demand(g8, k262K, 8192), 50'712), 4.58, 0.005);

  // Qwen3.5-27B (no MTP): 27,356,728,560 bf16 parameters; prefix caching off.
  KvOptions off;
  off.prefix_caching = false;
  const KvLayout q = layout_of(qwen35_27b(), off);
  const std::uint64_t aq = budget - 27'356'728'560ull * 2 - overhead;
  EXPECT_EQ(kv_num_blocks(q, aq), 1450);
  EXPECT_NEAR(kv_max_concurrency(kv_demand(q, k262K, 8192), 1450), 4.29, 0.005);
  off.kv_cache_dtype = KvCacheDtype::FP8;
  const KvLayout q8 = layout_of(qwen35_27b(), off);
  EXPECT_EQ(kv_num_blocks(q8, aq), 1450);
  EXPECT_NEAR(kv_max_concurrency(kv_demand(q8, k262K, 8192), 1450), 8.48, 0.005);
}

TEST(KvplanBudget, LargestMaxModelLenAndBytesForConcurrency) {
  const KvLayout g = layout_of(gemma4_31b(false));
  const KvDemand d = kv_demand(g, k262K, 8192);
  // Exactly the reservation fits 262,144; one byte less does not.
  EXPECT_EQ(largest_max_model_len(g, d.bytes_per_request, 8192, k262K), k262K);
  const std::int64_t l1 = largest_max_model_len(g, d.bytes_per_request - 1, 8192, k262K);
  EXPECT_LT(l1, k262K);
  EXPECT_EQ(l1, k262K - 32);  // one full-attention block (32 tokens) less
  EXPECT_LE(kv_demand(g, l1, 8192).bytes_per_request, d.bytes_per_request - 1);
  EXPECT_EQ(largest_max_model_len(g, 0, 8192, k262K), 0);
  EXPECT_EQ(kv_bytes_for_concurrency(g, d, 1.0), d.bytes_per_request);
  const std::uint64_t two = kv_bytes_for_concurrency(g, d, 2.0);
  EXPECT_EQ(two, 2 * d.bytes_per_request);
  EXPECT_GE(kv_max_concurrency(d, kv_num_blocks(g, two)), 2.0);
  EXPECT_LT(kv_max_concurrency(d, kv_num_blocks(g, two - 1)), 2.0);
}

TEST(KvplanBudget, DefaultMaxNumBatchedTokens) {
  EXPECT_EQ(default_max_num_batched_tokens(143'771ull * kMiB, "NVIDIA H200"), 8192);
  EXPECT_EQ(default_max_num_batched_tokens(80ull * kGiB, "NVIDIA A100-SXM4-80GB"), 2048);
  EXPECT_EQ(default_max_num_batched_tokens(48ull * kGiB, "NVIDIA L40S"), 2048);
  EXPECT_EQ(default_max_num_batched_tokens(70ull * kGiB, ""), 8192);
  EXPECT_EQ(default_max_num_batched_tokens(70ull * kGiB - 1, ""), 2048);
}

// ---- errors ----

TEST(KvplanErrors, RefusesWhatVllmRefuses) {
  auto info = read_model_info(qwen35_27b());
  ASSERT_TRUE(info.ok());
  KvOptions o;
  o.tp = 5;  // does not divide 24 heads
  auto r = build_kv_layout(*info, qwen35_27b(), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::BAD_INPUT);
  EXPECT_NE(r.error().message.find("tp = 5"), std::string::npos);
  // What would do (issue 55 tryout E-6): the sizes every layer takes, not only the one that refused.
  EXPECT_NE(r.error().message.find("; hint: tp=1, 2, 4 or 8 would do (the seat's tp= key)"), std::string::npos)
      << r.error().message;
  o = {};
  // The model and Mamba state dtypes likewise: parsed once, written back in vLLM's spelling.
  EXPECT_EQ(*parse_state_dtype("BF16"), StateDtype::BFLOAT16);
  EXPECT_EQ(*parse_state_dtype("half"), StateDtype::FLOAT16);
  EXPECT_EQ(state_dtype_name(*parse_state_dtype("fp32")), "float32");
  EXPECT_EQ(parse_state_dtype("int8").error().code, Errc::USAGE);
  EXPECT_EQ(parse_state_dtype("").error().code, Errc::USAGE);  // an absent config key is the caller's auto
  EXPECT_EQ(state_dtype_bytes(StateDtype::FLOAT32, 2), 4);
  EXPECT_EQ(state_dtype_bytes(StateDtype::AUTO, 4), 4);
  EXPECT_EQ(*parse_model_dtype("float"), ModelDtype::FLOAT32);
  EXPECT_EQ(model_dtype_name(*parse_model_dtype("HALF")), "float16");
  EXPECT_EQ(parse_model_dtype("fp8").error().code, Errc::USAGE);
  // A KV dtype is parsed where it is read: an unknown one never reaches the layout.
  EXPECT_EQ(parse_kv_cache_dtype("int3").error().code, Errc::USAGE);
  EXPECT_EQ(*parse_kv_cache_dtype("BF16"), KvCacheDtype::BF16);
  EXPECT_EQ(kv_cache_dtype_name(*parse_kv_cache_dtype("bf16")), "bfloat16");  // vLLM's spelling on the stack
  for (auto d : {KvCacheDtype::AUTO, KvCacheDtype::FP8_E5M2, KvCacheDtype::INT4_PER_TOKEN_HEAD})
    EXPECT_EQ(*parse_kv_cache_dtype(kv_cache_dtype_name(d)), d);
  o = {};
  o.hybrid_kv_cache_manager = false;
  EXPECT_FALSE(build_kv_layout(*info, qwen35_27b(), o).ok());
  Json bad = gemma4_31b(false);
  bad["text_config"].erase("sliding_window");
  auto bi = read_model_info(bad);
  ASSERT_TRUE(bi.ok());
  r = build_kv_layout(*bi, bad, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::BAD_INPUT);
  EXPECT_NE(r.error().message.find("sliding_window"), std::string::npos);
}

TEST(KvplanSize, ParsesAndFormats) {
  EXPECT_EQ(*parse_size("96GiB"), 96 * kGiB);
  EXPECT_EQ(*parse_size("41GB"), 41'000'000'000u);
  EXPECT_EQ(*parse_size("1.5TiB"), kTiB + kTiB / 2);
  EXPECT_EQ(*parse_size("1048576"), 1'048'576u);
  EXPECT_EQ(*parse_size("143771 MiB"), 143'771 * kMiB);
  EXPECT_EQ(*parse_size("0.5gib"), kGiB / 2);
  EXPECT_EQ(*parse_size("96G"), 96 * kGiB);  // one grammar: bare letters are binary (quantize --max-memory 2G)
  EXPECT_EQ(*parse_size("512m"), 512 * kMiB);
  EXPECT_EQ(*parse_size("2GB"), 2'000'000'000u);
  EXPECT_FALSE(parse_size("2X").ok());
  EXPECT_FALSE(parse_size("GiB").ok());
  EXPECT_FALSE(parse_size("-1GiB").ok());
  EXPECT_FALSE(parse_size("1.GiB").ok());
  EXPECT_FALSE(parse_size("99999999999999999999TiB").ok());
  EXPECT_EQ(parse_size("12XB").error().code, Errc::USAGE);
  // A handful of bytes or a fraction of one is a unit left out (issue 55 tryout: --headroom 2 was 2 B); 0 and an
  // explicit B stay; a negative size is said as one.
  EXPECT_NE(parse_size("2").error().message.find("it has no unit, so it would be 2 bytes; write the unit (2GiB"),
            std::string::npos) << parse_size("2").error().message;
  EXPECT_FALSE(parse_size("1.5").ok());
  EXPECT_FALSE(parse_size("1023").ok());
  EXPECT_EQ(*parse_size("1024"), 1024u);
  EXPECT_EQ(*parse_size("0"), 0u);
  EXPECT_EQ(*parse_size("2B"), 2u);
  EXPECT_NE(parse_size("-1G").error().message.find("never negative"), std::string::npos);
  EXPECT_EQ(format_count(17'366'515'712u), "17,366,515,712");
  EXPECT_EQ(format_count(999), "999");
  EXPECT_EQ(format_count(1000), "1,000");
  EXPECT_EQ(format_bytes(512), "512 B");
}

}  // namespace
}  // namespace fp4forge::kvplan

namespace fp4forge::kvplan {
namespace {

// DeepSeek-V3 geometry: MLA caches one latent of kv_lora_rank + qk_rope_head_dim (512 + 64) per token and
// layer, 2 bytes each in bf16: 1152 bytes x 61 layers; tensor parallelism does not split it.
TEST(KvplanMla, DeepSeekV3LatentPerLayer) {
  Json c = flat("DeepseekV3ForCausalLM", "deepseek_v3", 61, 128, 128, 7168, 0);
  c["kv_lora_rank"] = 512;
  c["qk_rope_head_dim"] = 64;
  c["qk_nope_head_dim"] = 128;
  c["v_head_dim"] = 128;
  c["q_lora_rank"] = 1536;
  const KvLayout l = layout_of(c);
  EXPECT_EQ(l.growing_bytes_per_token, 1152u * 61);
  KvOptions tp8;
  tp8.tp = 8;
  EXPECT_EQ(layout_of(c, tp8).growing_bytes_per_token, 1152u * 61);
}

// Granite-4 hybrid geometry (granite-4.0-h-small-like): Mamba-2 state per layer is the conv state
// (I + 2·G·N) x (d_conv - 1) plus the SSM state heads x d_head x N, as vLLM's mamba2_state_shape.
// KV heads as vLLM counts them: Falcon's and GPTBigCode's multi_query is one KV head (unless Falcon's
// new_decoder_architecture), GPT-2 names (n_layer, n_head, n_embd, n_positions) are read, and vLLM's order of
// the KV-head keys holds (ee92a6f, model_arch_config_convertor.py).
TEST(KvplanHeads, MultiQueryAndGpt2NamesAreReadAsVllmReadsThem) {
  Json falcon = {{"architectures", {"FalconForCausalLM"}}, {"model_type", "falcon"}, {"hidden_size", 512},
                 {"num_hidden_layers", 2}, {"num_attention_heads", 8}, {"num_kv_heads", 8}, {"multi_query", true},
                 {"new_decoder_architecture", false}, {"max_position_embeddings", 2048}};
  EXPECT_EQ(layout_of(falcon).growing_bytes_per_token, 2u * 2 * 1 * 64 * 2);  // layers x K,V x 1 head x 64 x bf16
  falcon["new_decoder_architecture"] = true;
  EXPECT_EQ(layout_of(falcon).growing_bytes_per_token, 2u * 2 * 8 * 64 * 2);
  Json bigcode = {{"architectures", {"GPTBigCodeForCausalLM"}}, {"model_type", "gpt_bigcode"}, {"n_embd", 512},
                  {"n_layer", 3}, {"n_head", 8}, {"n_positions", 8192}, {"multi_query", true},
                  {"num_key_value_heads", 2}};
  auto bi = read_model_info(bigcode);
  ASSERT_TRUE(bi.ok());
  EXPECT_EQ(bi->num_layers, 3);
  EXPECT_EQ(bi->hidden_size, 512);
  EXPECT_EQ(bi->num_heads, 8);
  EXPECT_EQ(bi->max_position_embeddings, 8192);
  EXPECT_EQ(layout_of(bigcode).growing_bytes_per_token, 3u * 2 * 1 * 64 * 2);
  Json glm = flat("ChatGLMModel", "chatglm", 2, 8, 0, 512, 64);
  glm.erase("num_key_value_heads");
  glm["multi_query_group_num"] = 2;
  EXPECT_EQ(layout_of(glm).growing_bytes_per_token, 2u * 2 * 2 * 64 * 2);
}

TEST(KvplanMamba, Granite4HybridStateBytes) {
  Json c = flat("GraniteMoeHybridForCausalLM", "granitemoehybrid", 4, 32, 8, 4096, 128);
  c["layer_types"] = {"linear_attention", "linear_attention", "linear_attention", "full_attention"};
  c["mamba_n_heads"] = 128;
  c["mamba_d_head"] = 64;
  c["mamba_d_state"] = 128;
  c["mamba_d_conv"] = 4;
  c["mamba_n_groups"] = 1;
  c["mamba_expand"] = 2;
  const KvLayout l = layout_of(c);
  const std::uint64_t conv = (8192 + 2 * 1 * 128) * 3 * 2, ssm = 128ull * 64 * 128 * 2;
  ASSERT_FALSE(l.layers.empty());
  EXPECT_EQ(l.layers[0].conv_state_bytes, conv);
  EXPECT_EQ(l.layers[0].ssm_state_bytes, ssm);
  EXPECT_EQ(l.growing_bytes_per_token, 2u * 8 * 128 * 2);  // the one attention layer
  // tp 2: groups padded to 2, every term halved.
  KvOptions tp2;
  tp2.tp = 2;
  const KvLayout l2 = layout_of(c, tp2);
  EXPECT_EQ(l2.layers[0].conv_state_bytes, (8192u + 2 * 2 * 128) / 2 * 3 * 2);
  EXPECT_EQ(l2.layers[0].ssm_state_bytes, ssm / 2);
}

// Hybrids the registry has no entry for (issue 55: Jamba was sized as 32 attention layers): each config's own
// layer pattern is read as transformers derives it, and plan refuses the state it has no formula for, naming the
// first such layer, instead of sizing every layer as attention.
TEST(KvplanHybrids, UnmodelledStateLayersAreRefusedNeverSizedAsAttention) {
  struct Case {
    const char* name;
    Json cfg;
    std::vector<std::string> types;  // the layer types read (4 layers)
    const char* refused;             // in the refusal
  };
  auto base = [](const char* type) { return flat("XForCausalLM", type, 4, 8, 2, 512, 64); };
  std::vector<Case> cases;
  {
    Json c = base("jamba");
    c["attn_layer_period"] = 2;
    c["attn_layer_offset"] = 1;
    c["mamba_d_state"] = 16;
    cases.push_back({"jamba", c, {"mamba", "full_attention", "mamba", "full_attention"}, "layer 0 of 4 (jamba) is 'mamba'"});
  }
  {
    Json c = base("bamba");
    c["attn_layer_indices"] = {2};
    cases.push_back({"bamba", c, {"mamba", "mamba", "full_attention", "mamba"}, "is 'mamba': a recurrent state (Mamba)"});
  }
  {
    Json c = base("nemotron_h");
    c["hybrid_override_pattern"] = "*M-E";
    cases.push_back({"nemotron_h", c, {"full_attention", "mamba", "mlp", "moe"}, "layer 1 of 4 (nemotron_h) is 'mamba'"});
  }
  {
    Json c = base("recurrent_gemma");
    c["block_types"] = {"recurrent", "recurrent", "attention"};
    cases.push_back({"recurrent_gemma", c, {"recurrent", "recurrent", "full_attention", "recurrent"},
                     "layer type 'recurrent' has no KV formula"});
  }
  {
    Json c = base("minimax");
    c["attn_type_list"] = {0, 0, 0, 1};
    cases.push_back({"minimax", c, {"linear_attention", "linear_attention", "linear_attention", "full_attention"},
                     "linear attention outside the GatedDeltaNet"});
  }
  {
    Json c = base("kimi_linear");
    c["linear_attn_config"] = {{"kda_layers", {1, 2, 3}}, {"full_attn_layers", {4}}};
    cases.push_back({"kimi_linear", c, {"linear_attention", "linear_attention", "linear_attention", "full_attention"},
                     "Kimi's KDA"});
  }
  {
    Json c = base("zamba2");
    c["layers_block_type"] = {"mamba", "hybrid", "mamba", "hybrid"};
    cases.push_back({"zamba2", c, {"mamba", "hybrid", "mamba", "hybrid"}, "is 'mamba'"});
  }
  {  // every layer runs Mamba beside attention, no layer list (Falcon-H1-like): inferred from its state keys
    Json c = base("falcon_h1");
    c["mamba_d_ssm"] = 1024;
    c["mamba_d_state"] = 128;
    cases.push_back({"falcon_h1", c, std::vector<std::string>(4, "attention+mamba"), "Mamba beside attention"});
  }
  {  // pure SSM: no attention heads at all
    Json c = {{"architectures", {"FalconMambaForCausalLM"}}, {"model_type", "falcon_mamba"}, {"hidden_size", 512},
              {"num_hidden_layers", 4}, {"state_size", 16}, {"conv_kernel", 4}, {"expand", 2},
              {"time_step_rank", 32}, {"vocab_size", 1000}};
    cases.push_back({"falcon_mamba", c, std::vector<std::string>(4, "mamba"), "a recurrent state (Mamba)"});
  }
  {
    Json c = {{"architectures", {"RwkvForCausalLM"}}, {"model_type", "rwkv"}, {"hidden_size", 512},
              {"num_hidden_layers", 4}, {"attention_hidden_size", 512}, {"rescale_every", 6}, {"vocab_size", 1000}};
    cases.push_back({"rwkv", c, std::vector<std::string>(4, "rwkv"), "a recurrent state (RWKV)"});
  }
  {  // Nemotron-H as transformers 5.x writes it: no num_hidden_layers, Mamba-2 layers named linear_attention
    Json c = {{"architectures", {"NemotronHForCausalLM"}}, {"model_type", "nemotron_h"}, {"hidden_size", 512},
              {"num_attention_heads", 8}, {"num_key_value_heads", 2}, {"head_dim", 64}, {"mamba_num_heads", 16},
              {"ssm_state_size", 128}, {"layers_block_type", {"linear_attention", "moe", "full_attention", "mlp"}}};
    cases.push_back({"nemotron_h 5.x", c, {"linear_attention", "moe", "full_attention", "mlp"},
                     "is 'linear_attention (Mamba)': a recurrent state (Mamba)"});
  }
  for (const auto& k : cases) {
    SCOPED_TRACE(k.name);
    auto info = read_model_info(k.cfg);
    ASSERT_TRUE(info.ok()) << info.error().message;
    EXPECT_EQ(info->layer_types, k.types);
    auto r = build_kv_layout(*info, k.cfg, {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, Errc::BAD_INPUT);
    EXPECT_NE(r.error().message.find(k.refused), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find("refuses the rest rather than guess; hint:"), std::string::npos);
  }
  // GatedDeltaNet's geometry in an unknown family (OLMo hybrid): sized by the GatedDeltaNet formula.
  {
    Json c = base("olmo_hybrid");
    c["layer_types"] = {"linear_attention", "full_attention", "linear_attention", "full_attention"};
    c.update({{"linear_num_key_heads", 2}, {"linear_num_value_heads", 4}, {"linear_key_head_dim", 16},
              {"linear_value_head_dim", 16}, {"linear_conv_kernel_dim", 4}});
    auto info = read_model_info(c);
    ASSERT_TRUE(info.ok());
    auto l = build_kv_layout(*info, c, {});
    ASSERT_TRUE(l.ok()) << l.error().message;
    EXPECT_TRUE(l->has_state_layers());
    EXPECT_EQ(l->layers[0].ssm_state_bytes, 4u * 16 * 16 * 2);  // value heads x dv x dk, bf16
  }
  // An unknown family with none of these keys is still plain attention (sized, with plan's note).
  const Json plain = base("some_new_llm");
  auto pi = read_model_info(plain);
  ASSERT_TRUE(pi.ok());
  EXPECT_EQ(pi->layer_types, std::vector<std::string>(4, "full_attention"));
  EXPECT_TRUE(build_kv_layout(*pi, plain, {}).ok());
}

}  // namespace
}  // namespace fp4forge::kvplan
