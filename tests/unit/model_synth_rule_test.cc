// synth --config for the families laid out by one rule over their registry row (src/model/synth_decoder.cc):
// every fixture transformers 5.17 wrote (tests/data) comes back from its config tensor for tensor, or is refused by
// name, never laid out approximately; published parameter counts come back exactly at real geometry
// (DeepSeek-V3 671B with its MTP layer, Mixtral-8x7B), and the config is kept as given less what synth cannot honour.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fp4forge/model/synth.h"

namespace fs = std::filesystem;
using fp4forge::Errc;
using fp4forge::plan_synth_from_config;
using OJson = nlohmann::ordered_json;

namespace {

const fs::path kData = FP4FORGE_TEST_DATA;

OJson read_json(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return OJson::parse(ss.str());
}

// The ids synth lays out by rule, as synth itself lists them (the other six --arch layouts have their own test,
// model_synth_config_test): a family added to the rule is held to a real writer's fixture here without an edit.
// Built on first use (not at static initialization: the registry it reads is another file's static).
std::set<std::string> by_rule() {
  std::set<std::string> ids;
  for (std::string_view id : fp4forge::synth_rule_families()) ids.emplace(id);
  return ids;
}

TEST(SynthRule, TheRuleCoversTheFamiliesItNames) {
  for (const char* id : {"mistral", "phi3", "qwen2", "qwen3", "gemma3", "qwen3_next", "qwen3_5", "mixtral",
                         "qwen2_moe", "deepseek_v2", "deepseek_v3", "glm4_moe"})
    EXPECT_TRUE(by_rule().contains(id)) << id;
}

TEST(SynthRule, EveryFixtureComesBackExactlyOrIsRefusedByName) {
  const std::set<std::string> kByRule = by_rule();
  std::set<std::string> exact_ids;
  int refused = 0;
  for (const auto& e : fs::directory_iterator(kData)) {
    const fs::path listing = kData / (e.path().filename().string() + ".tensors.json");
    if (!e.is_directory() || !fs::exists(e.path() / "config.json") || !fs::exists(listing)) continue;
    const std::string fixture = e.path().filename().string();
    SCOPED_TRACE(fixture);
    auto plan = plan_synth_from_config(read_json(e.path() / "config.json"));
    if (!plan) {
      // A refusal names config.json and the reason, and is the operator's input, never an internal error.
      EXPECT_EQ(plan.error().code, Errc::BAD_INPUT) << plan.error().message;
      EXPECT_NE(plan.error().message.find("config.json"), std::string::npos) << plan.error().message;
      ++refused;
      continue;
    }
    if (!kByRule.contains(plan->arch)) continue;
    std::map<std::string, std::vector<std::uint64_t>> want, got;
    const OJson listed = read_json(listing);
    for (const auto& [name, v] : listed.items()) want[name] = v[2].get<std::vector<std::uint64_t>>();
    for (const auto& t : plan->tensors) EXPECT_TRUE(got.emplace(t.name, t.shape).second) << "twice: " << t.name;
    EXPECT_EQ(got, want);
    if (got == want) exact_ids.insert(plan->arch);
    // The MTP layers sit in their own file, as the fixture's writer put them.
    for (const auto& t : plan->tensors)
      if (t.name.find(".enorm.") != std::string::npos) {
        EXPECT_EQ(t.shard, "model-mtp.safetensors") << t.name;
      }
  }
  // Every family of the rule is confirmed by at least one of the real writer's fixtures.
  EXPECT_EQ(exact_ids, kByRule);
  EXPECT_GT(refused, 30);
}

TEST(SynthRule, TheV32IndexerAndMultimodalWrappersAreRefusedNotApproximated) {
  for (const auto& [fixture, needle] : std::vector<std::pair<std::string, std::string>>{
           {"deepseek_v32", "DeepSeek-V3.2 indexer"},    // the sparse-attention indexer is not laid out
           {"kimi_k25", "vision_config"},                // DeepSeek-V3 text stack inside a multimodal wrapper
           {"llava_onevision", "vision_config"},         // Qwen2 text stack inside LLaVA
           {"llava", "vision_config"},                   // Llama text stack inside LLaVA (the built-in llama layout)
           {"idefics3", "vision_config"}}) {
    SCOPED_TRACE(fixture);
    auto plan = plan_synth_from_config(read_json(kData / fixture / "config.json"));
    ASSERT_FALSE(plan.ok());
    EXPECT_EQ(plan.error().code, Errc::BAD_INPUT);
    EXPECT_NE(plan.error().message.find(needle), std::string::npos) << plan.error().message;
    EXPECT_NE(plan.error().message.find("fp4forge plan"), std::string::npos) << plan.error().message;
  }
  // A bias the family's attention does not carry, and a missing width, are named.
  OJson c = read_json(kData / "mistral" / "config.json");
  c["attention_bias"] = true;
  auto p = plan_synth_from_config(c);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("'attention_bias' is true"), std::string::npos) << p.error().message;
  c = read_json(kData / "deepseek_v3" / "config.json");
  c.erase("kv_lora_rank");
  p = plan_synth_from_config(c);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("'kv_lora_rank' is absent (or 0)"), std::string::npos) << p.error().message;
  // The built-in llama layout writes no biases: a boolean mlp_bias (it was read as an integer, so never) and
  // attention_bias are refused by name.
  for (const char* k : {"mlp_bias", "attention_bias"}) {
    OJson l = read_json(kData / "llama" / "config.json");
    l[k] = true;
    auto lp = plan_synth_from_config(l);
    ASSERT_FALSE(lp.ok()) << k;
    EXPECT_NE(lp.error().message.find("attention_bias / mlp_bias"), std::string::npos) << lp.error().message;
  }
  // --arch names the built-in layouts only: a rule family's config with --arch is a usage error.
  p = plan_synth_from_config(read_json(kData / "qwen2" / "config.json"), "llama");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().code, Errc::USAGE);
}

/** Every integer value of every object in `j` (text_config and vision_config included) written as a float. */
void integers_as_floats(OJson& j) {
  for (auto& [k, v] : j.items()) {
    if (v.is_number_integer()) v = static_cast<double>(v.get<std::int64_t>());
    if (v.is_object()) integers_as_floats(v);
  }
}

// One integer policy for config.json (util/json_get.h): a config whose integers are written as floats (`3.0`) is read
// alike by model info and the registry's MoE-layer rule (first_k_dense_replace, n_routed_experts, ...), so the
// layout is the same tensor for tensor.
TEST(SynthRule, IntegersWrittenAsFloatsAreReadAlikeByEveryReader) {
  for (const char* fixture : {"deepseek_v3", "glm4_moe", "qwen2_moe", "mixtral", "gemma4-dense-mm", "qwen3_5-moe-mm"}) {
    SCOPED_TRACE(fixture);
    const OJson c = read_json(kData / fixture / "config.json");
    OJson f = c;
    integers_as_floats(f);
    auto a = plan_synth_from_config(c), b = plan_synth_from_config(f);
    ASSERT_TRUE(a.ok()) << a.error().message;
    ASSERT_TRUE(b.ok()) << b.error().message;
    ASSERT_EQ(a->tensors.size(), b->tensors.size());
    for (std::size_t i = 0; i < a->tensors.size(); ++i) {
      EXPECT_EQ(a->tensors[i].name, b->tensors[i].name);
      EXPECT_EQ(a->tensors[i].shape, b->tensors[i].shape);
    }
  }
}

// DeepSeek-V3 as published (deepseek-ai/DeepSeek-V3 config.json, the keys that decide tensors): 671,026,419,200
// parameters in the main model (the "671B") and 13,463,426,304 in the MTP layer 61 (its own decoder layer, embedding,
// enorm/hnorm, eh_proj and shared head: the "14B"), counted by hand from the config in docs/cli/synth.md.
TEST(SynthRule, DeepSeekV3At671BWithItsMtpLayer) {
  OJson c = {{"architectures", {"DeepseekV3ForCausalLM"}}, {"model_type", "deepseek_v3"}, {"hidden_size", 7168},
             {"intermediate_size", 18432}, {"moe_intermediate_size", 2048}, {"num_hidden_layers", 61},
             {"num_attention_heads", 128}, {"num_key_value_heads", 128}, {"n_routed_experts", 256},
             {"n_shared_experts", 1}, {"num_experts_per_tok", 8}, {"first_k_dense_replace", 3},
             {"moe_layer_freq", 1}, {"q_lora_rank", 1536}, {"kv_lora_rank", 512}, {"qk_nope_head_dim", 128},
             {"qk_rope_head_dim", 64}, {"v_head_dim", 128}, {"vocab_size", 129280}, {"num_nextn_predict_layers", 1},
             {"tie_word_embeddings", false}, {"max_position_embeddings", 163840}, {"torch_dtype", "bfloat16"},
             {"quantization_config",
              {{"activation_scheme", "dynamic"}, {"fmt", "e4m3"}, {"quant_method", "fp8"},
               {"weight_block_size", {128, 128}}}}};
  auto p = plan_synth_from_config(c);
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->arch, "deepseek_v3");
  std::uint64_t main = 0, mtp = 0;
  for (const auto& t : p->tensors) {
    std::uint64_t n = 1;
    for (auto d : t.shape) n *= d;
    (t.name.starts_with("model.layers.61.") ? mtp : main) += n;
  }
  EXPECT_EQ(main, 671'026'419'200ULL);
  EXPECT_EQ(mtp, 13'463'426'304ULL);
  EXPECT_EQ(p->total_params, main + mtp);
  // 58 MoE layers of 256 experts, 3 dense layers, the MTP layer MoE too.
  EXPECT_EQ(std::count_if(p->tensors.begin(), p->tensors.end(),
                          [](const auto& t) { return t.name.ends_with(".e_score_correction_bias"); }),
            59);
  // The config is the release's, less its FP8 quantization_config (the weights are BF16), said in a note.
  EXPECT_FALSE(p->config.contains("quantization_config"));
  EXPECT_EQ(p->config["q_lora_rank"], 1536);
  ASSERT_EQ(p->notes.size(), 1u);
  EXPECT_NE(p->notes[0].find("quantization_config"), std::string::npos);
  // Shards of at most 5 GB, the MTP layer in its own file.
  EXPECT_EQ(p->shards.back(), "model-mtp.safetensors");
  EXPECT_GE(p->shards.size(), 2 * main / 5'000'000'000ULL);
}

// Mixtral-8x7B: 46,702,792,704 parameters (mistralai/Mixtral-8x7B-v0.1 as published).
TEST(SynthRule, Mixtral8x7BAsPublished) {
  const OJson c = {{"architectures", {"MixtralForCausalLM"}}, {"model_type", "mixtral"}, {"hidden_size", 4096},
                   {"intermediate_size", 14336}, {"num_hidden_layers", 32}, {"num_attention_heads", 32},
                   {"num_key_value_heads", 8}, {"num_local_experts", 8}, {"num_experts_per_tok", 2},
                   {"vocab_size", 32000}, {"tie_word_embeddings", false}};
  auto p = plan_synth_from_config(c);
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->total_params, 46'702'792'704ULL);
  EXPECT_TRUE(p->notes.empty());
}

}  // namespace
