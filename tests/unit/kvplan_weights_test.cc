// Weight bytes as vLLM loads them, from the fixtures' safetensors headers; expectations are derived
// independently from the NAME.tensors.json listings.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "fp4forge/safetensors/checkpoint.h"
#include "fp4forge/kvplan/weights.h"
#include "fp4forge/model/model_info.h"

namespace fp4forge::kvplan {
namespace {

const std::string kData = FP4FORGE_TEST_DATA;

nlohmann::json listing(const std::string& name) {
  std::ifstream in(kData + "/" + name + ".tensors.json");
  return nlohmann::json::parse(in);
}

std::uint64_t numel(const nlohmann::json& shape) {
  std::uint64_t n = 1;
  for (const auto& d : shape) n *= d.get<std::uint64_t>();
  return n;
}

struct Loaded {
  Checkpoint ck;
  ModelInfo info;
};

Loaded open(const std::string& name) {
  CheckpointOptions o;
  o.require_weights = false;
  auto ck = Checkpoint::open(kData + "/" + name, o);
  EXPECT_TRUE(ck.ok()) << (ck.ok() ? "" : ck.error().message);
  auto info = read_model_info(ck->config());
  EXPECT_TRUE(info.ok());
  return {std::move(*ck), std::move(*info)};
}

bool ends_with(const std::string& s, const std::string& p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

TEST(KvplanWeights, LlamaStoredAndNvfp4a16) {
  const auto l = listing("llama");  // every tensor is BF16
  std::uint64_t total = 0, linear_bf16 = 0, linear_fp4 = 0;
  for (const auto& [name, v] : l.items()) {
    const auto& shape = v[2];
    total += numel(shape) * 2;
    const bool linear = name.find(".layers.") != std::string::npos && ends_with(name, "_proj.weight");
    if (linear) {
      const std::uint64_t n = shape[0], k = shape[1];
      linear_bf16 += n * k * 2;
      linear_fp4 += n * k / 2 + n * k / 16 + 4;
    }
  }
  const Loaded m = open("llama");
  const WeightEstimate w = estimate_weights(m.ck, m.info, {});
  EXPECT_EQ(w.bytes, total);
  EXPECT_EQ(w.stored_bytes, total);
  EXPECT_EQ(w.duplicated_v_bytes, 0u);
  WeightOptions q;
  q.assume = QuantScheme::NVFP4A16;
  const WeightEstimate wq = estimate_weights(m.ck, m.info, q);
  EXPECT_EQ(wq.quantized_linears, 14u);  // 2 layers x (q, k, v, o, gate, up, down)
  EXPECT_EQ(wq.bytes, total - linear_bf16 + linear_fp4);  // embeddings and lm_head stay bf16
}

TEST(KvplanWeights, Gemma4KeqVDuplicatesFullLayerK) {
  const auto l = listing("gemma4-dense-mm");
  std::uint64_t total = 0, full_k = 0;
  for (const auto& [name, v] : l.items()) {
    total += numel(v[2]) * 2;
    if (name == "model.language_model.layers.5.self_attn.k_proj.weight") full_k = numel(v[2]) * 2;
  }
  ASSERT_GT(full_k, 0u);
  ASSERT_FALSE(l.contains("model.language_model.layers.5.self_attn.v_proj.weight"));
  const Loaded m = open("gemma4-dense-mm");
  const WeightEstimate w = estimate_weights(m.ck, m.info, {});
  EXPECT_EQ(w.duplicated_v_bytes, full_k);
  EXPECT_EQ(w.bytes, total + full_k);
}

TEST(KvplanWeights, Gemma4MoeFusedExpertsUnderNvfp4a16) {
  const auto l = listing("gemma4-moe-mm");
  std::uint64_t fused_bf16 = 0, fused_fp4 = 0;
  for (const auto& [name, v] : l.items()) {
    const auto& s = v[2];
    if (ends_with(name, "experts.gate_up_proj")) {
      fused_bf16 += numel(s) * 2;
      const std::uint64_t e = s[0], n = s[1], k = s[2];
      fused_fp4 += e * 2 * ((n / 2) * k / 2 + (n / 2) * k / 16 + 4);
    } else if (ends_with(name, "experts.down_proj")) {
      fused_bf16 += numel(s) * 2;
      const std::uint64_t e = s[0], n = s[1], k = s[2];
      fused_fp4 += e * (n * k / 2 + n * k / 16 + 4);
    }
  }
  ASSERT_GT(fused_bf16, 0u);
  const Loaded m = open("gemma4-moe-mm");
  const WeightEstimate w = estimate_weights(m.ck, m.info, {});
  WeightOptions q;
  q.assume = QuantScheme::NVFP4A16;
  const WeightEstimate wq = estimate_weights(m.ck, m.info, q);
  EXPECT_LT(wq.bytes, w.bytes);
  // The fused experts alone account for at least their own saving; routers and towers stay bf16.
  EXPECT_GE(w.bytes - wq.bytes, fused_bf16 - fused_fp4);
  EXPECT_EQ(w.bytes - wq.bytes, wq.quantized_saved_bytes);
}

TEST(KvplanWeights, QwenMtpOnlyWithSpeculativeDecoding) {
  const auto l = listing("qwen3_5-dense-mm");
  std::uint64_t total = 0, mtp = 0;
  for (const auto& [name, v] : l.items()) {
    total += numel(v[2]) * 2;
    if (name.rfind("mtp.", 0) == 0) mtp += numel(v[2]) * 2;
  }
  ASSERT_GT(mtp, 0u);
  const Loaded m = open("qwen3_5-dense-mm");
  const WeightEstimate off = estimate_weights(m.ck, m.info, {});
  EXPECT_EQ(off.mtp_bytes, mtp);
  EXPECT_EQ(off.bytes, total - mtp);
  WeightOptions on;
  on.include_mtp = true;
  EXPECT_EQ(estimate_weights(m.ck, m.info, on).bytes, total);
  // linear_attn stays bf16 under assume=nvfp4a16, MTP too.
  WeightOptions q;
  q.assume = QuantScheme::NVFP4A16;
  q.include_mtp = true;
  const WeightEstimate wq = estimate_weights(m.ck, m.info, q);
  std::uint64_t linear_attn = 0, quantizable = 0;
  for (const auto& [name, v] : l.items()) {
    if (name.find("linear_attn") != std::string::npos) linear_attn += numel(v[2]) * 2;
    const bool text = name.rfind("model.language_model.layers.", 0) == 0;
    if (text && (name.find("self_attn.") != std::string::npos || name.find("mlp.") != std::string::npos) &&
        ends_with(name, "_proj.weight"))
      ++quantizable;
  }
  EXPECT_GT(linear_attn, 0u);
  EXPECT_EQ(wq.quantized_linears, quantizable);
  EXPECT_EQ(linear_bytes(QuantScheme::NVFP4A16, 5120, 5120, DType::BF16), 5120ull * 5120 / 2 + 5120ull * 5120 / 16 + 4);
  // The other schemes, from their encoders' size helpers.
  EXPECT_EQ(linear_bytes(QuantScheme::MXFP4A16, 256, 256, DType::BF16), 256ull * 128 + 256ull * 8);
  EXPECT_EQ(linear_bytes(QuantScheme::FP8_DYNAMIC, 256, 256, DType::BF16), 256ull * 256 + 256ull * 2);
  EXPECT_EQ(linear_bytes(QuantScheme::FP8_BLOCK, 300, 200, DType::BF16), 300ull * 200 + 3ull * 2 * 2);
  EXPECT_EQ(linear_bytes(QuantScheme::W4A16, 256, 256, DType::F32), 256ull * 32 * 4 + 256ull * 2 * 4 + 16);
}

}  // namespace
}  // namespace fp4forge::kvplan
