// verify's structural rules on checkpoints held in memory (Checkpoint::from_memory, the reader seam): each
// rule's finding with its exact message, without a file on disk.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fp4forge/model/quant_config.h"
#include "fp4forge/model/structure.h"
#include "fp4forge/safetensors/checkpoint.h"
#include "fp4forge/verify/verify.h"
#include "matchers.h"

namespace fp4forge {
namespace {

using ojson = nlohmann::ordered_json;

// A one-layer llama whose widths tell the projections apart: H 64, heads 4 x 16 (kv 2), I 96.
ojson llama_config(bool quantized = true) {
  ojson c = {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"hidden_size", 64},
             {"num_hidden_layers", 1},   {"num_attention_heads", 4},       {"num_key_value_heads", 2},
             {"head_dim", 16},           {"intermediate_size", 96},       {"vocab_size", 128},
             {"torch_dtype", "bfloat16"}};
  if (quantized) c["quantization_config"] = ct_quant_config(QuantScheme::NVFP4A16, {"lm_head"});
  return c;
}

MemoryTensor zeros(std::string name, DType dt, std::vector<std::uint64_t> shape) {
  std::uint64_t n = 1;
  for (auto d : shape) n *= d;
  return {std::move(name), dt, shape, std::vector<std::byte>(n * dtype_bits(dt) / 8)};
}

// An NVFP4A16 module [N, K] as quantize writes it: payload, E4M3 group scales (1.0), global scale 1.0.
void add_nvfp4(std::vector<MemoryTensor>& ts, const std::string& module, std::uint64_t n, std::uint64_t k) {
  ts.push_back(zeros(module + ".weight_packed", DType::U8, {n, k / 2}));
  MemoryTensor sc = zeros(module + ".weight_scale", DType::F8_E4M3, {n, k / 16});
  std::fill(sc.bytes.begin(), sc.bytes.end(), std::byte{0x38});  // E4M3 1.0
  ts.push_back(std::move(sc));
  MemoryTensor gs = zeros(module + ".weight_global_scale", DType::F32, {1});
  const float one = 1.0f;
  std::memcpy(gs.bytes.data(), &one, 4);
  ts.push_back(std::move(gs));
}

// The whole one-layer model, every Linear quantized, the rest BF16.
std::vector<MemoryTensor> llama_tensors() {
  std::vector<MemoryTensor> ts;
  const std::string l = "model.layers.0.";
  add_nvfp4(ts, l + "self_attn.q_proj", 64, 64);
  add_nvfp4(ts, l + "self_attn.k_proj", 32, 64);
  add_nvfp4(ts, l + "self_attn.v_proj", 32, 64);
  add_nvfp4(ts, l + "self_attn.o_proj", 64, 64);
  add_nvfp4(ts, l + "mlp.gate_proj", 96, 64);
  add_nvfp4(ts, l + "mlp.up_proj", 96, 64);
  add_nvfp4(ts, l + "mlp.down_proj", 64, 96);
  ts.push_back(zeros(l + "input_layernorm.weight", DType::BF16, {64}));
  ts.push_back(zeros(l + "post_attention_layernorm.weight", DType::BF16, {64}));
  ts.push_back(zeros("model.embed_tokens.weight", DType::BF16, {128, 64}));
  ts.push_back(zeros("model.norm.weight", DType::BF16, {64}));
  ts.push_back(zeros("lm_head.weight", DType::BF16, {128, 64}));
  return ts;
}

std::vector<Finding> verify_memory(ojson config, std::vector<MemoryTensor> ts) {
  auto q = Checkpoint::from_memory(std::move(config), std::move(ts));
  EXPECT_TRUE(q.ok()) << (q.ok() ? "" : q.error().message);
  if (!q.ok()) return {};
  auto info = read_checkpoint_info(*q);
  EXPECT_TRUE(info.ok());
  if (!info.ok()) return {};
  VerifyStats st;
  return verify_structure(*q, *info, VerifyOptions{}, &st);
}

const Finding* find_kind(const std::vector<Finding>& fs, std::string_view kind) {
  auto it = std::find_if(fs.begin(), fs.end(), [&](const Finding& f) { return f.kind == kind; });
  return it == fs.end() ? nullptr : &*it;
}

std::string kinds(const std::vector<Finding>& fs) {
  std::string s;
  for (const auto& f : fs) s += f.kind + "(" + std::string(severity_name(f.severity)) + ") ";
  return s;
}

TEST(VerifyRules, TheInMemoryModelIsClean) {
  const auto fs = verify_memory(llama_config(), llama_tensors());
  for (const auto& f : fs) EXPECT_NE(f.severity, Severity::ERROR) << f.kind << ": " << f.message;
}

TEST(VerifyRules, AMissingScaleNamesTheModuleAndTheMember) {
  auto ts = llama_tensors();
  ts.erase(std::remove_if(ts.begin(), ts.end(),
                          [](const MemoryTensor& t) { return t.name == "model.layers.0.mlp.down_proj.weight_scale"; }),
           ts.end());
  const auto fs = verify_memory(llama_config(), ts);
  const Finding* f = find_kind(fs, "quantized-module-incomplete");
  ASSERT_NE(f, nullptr) << kinds(fs);
  EXPECT_EQ(f->severity, Severity::ERROR);
  EXPECT_EQ(f->message, "quantized module 'model.layers.0.mlp.down_proj': weight_scale is missing");
}

TEST(VerifyRules, APlainWeightBesideThePayloadIsALeftover) {
  auto ts = llama_tensors();
  ts.push_back(zeros("model.layers.0.mlp.up_proj.weight", DType::BF16, {96, 64}));
  const auto fs = verify_memory(llama_config(), ts);
  const Finding* f = find_kind(fs, "leftover-weight");
  ASSERT_NE(f, nullptr) << kinds(fs);
  EXPECT_EQ(f->message, "quantized module 'model.layers.0.mlp.up_proj' still has a plain 'weight' beside weight_packed");
  EXPECT_EQ(f->tensors, std::vector<std::string>{"model.layers.0.mlp.up_proj.weight"});
}

TEST(VerifyRules, NoQuantizationConfigIsAnError) {
  const auto fs = verify_memory(llama_config(false), llama_tensors());
  const Finding* f = find_kind(fs, "quant-config-missing");
  ASSERT_NE(f, nullptr) << kinds(fs);
  EXPECT_EQ(f->severity, Severity::ERROR);
  EXPECT_EQ(f->message, "config.json has no quantization_config: vLLM loads the checkpoint as unquantized and cannot "
                        "map weight_packed / weight_scale");
}

// Issue 30: a quantized module that no config group selects (here the MLP, with attention-only targets) has no
// scheme in vLLM: an error naming the modules; two groups that together select everything are clean.
TEST(VerifyRules, AQuantizedModuleNoGroupSelectsIsAnError) {
  ojson c = llama_config();
  ojson& groups = c["quantization_config"]["config_groups"];
  groups["group_0"]["targets"] = ojson::array({"re:.*self_attn\\."});
  auto fs = verify_memory(c, llama_tensors());
  const Finding* f = find_kind(fs, "quant-config-invalid");
  ASSERT_NE(f, nullptr) << kinds(fs);
  EXPECT_EQ(f->severity, Severity::ERROR);
  EXPECT_EQ(f->message,
            "3 quantized module(s) match no config group's targets (e.g. model.layers.0.mlp.down_proj, "
            "model.layers.0.mlp.gate_proj, model.layers.0.mlp.up_proj): vLLM has no scheme to load their packed "
            "weights with (docs/mixed-precision.md)");
  groups["group_1"] = groups["group_0"];
  groups["group_1"]["targets"] = ojson::array({"re:.*mlp\\."});
  fs = verify_memory(c, llama_tensors());
  EXPECT_EQ(find_kind(fs, "quant-config-invalid"), nullptr) << kinds(fs);
}

TEST(VerifyRules, AWrongGlobalScaleDtypeIsIncomplete) {
  auto ts = llama_tensors();
  for (auto& t : ts)
    if (t.name == "model.layers.0.self_attn.o_proj.weight_global_scale") t = zeros(t.name, DType::BF16, {1});
  const auto fs = verify_memory(llama_config(), ts);
  const Finding* f = find_kind(fs, "quantized-module-incomplete");
  ASSERT_NE(f, nullptr) << kinds(fs);
  EXPECT_EQ(f->message,
            "quantized module 'model.layers.0.self_attn.o_proj': weight_global_scale is BF16 [1], expected F32 [1]");
}

TEST(VerifyRules, InputGlobalScaleInAWeightOnlyCheckpoint) {
  auto ts = llama_tensors();
  ts.push_back(zeros("model.layers.0.mlp.gate_proj.input_global_scale", DType::F32, {1}));
  const auto fs = verify_memory(llama_config(), ts);
  const Finding* f = find_kind(fs, "input-global-scale-in-a16");
  ASSERT_NE(f, nullptr) << kinds(fs);
  EXPECT_EQ(f->message, "module 'model.layers.0.mlp.gate_proj' has input_global_scale, but NVFP4A16 is weight-only");
}

TEST(VerifyRules, NothingQuantizedIsAnError) {
  std::vector<MemoryTensor> ts;
  const std::string l = "model.layers.0.";
  for (const auto& [m, n, k] : std::vector<std::tuple<std::string, std::uint64_t, std::uint64_t>>{
           {"self_attn.q_proj", 64, 64}, {"self_attn.k_proj", 32, 64}, {"self_attn.v_proj", 32, 64},
           {"self_attn.o_proj", 64, 64}, {"mlp.gate_proj", 96, 64}, {"mlp.up_proj", 96, 64}, {"mlp.down_proj", 64, 96}})
    ts.push_back(zeros(l + m + ".weight", DType::BF16, {n, k}));
  ts.push_back(zeros("model.embed_tokens.weight", DType::BF16, {128, 64}));
  const auto fs = verify_memory(llama_config(), ts);
  const Finding* f = find_kind(fs, "nothing-quantized");
  ASSERT_NE(f, nullptr) << kinds(fs);
  EXPECT_EQ(f->severity, Severity::ERROR);
  // 30,720 in the seven projections and 8,192 in the embedding (a 2-D float weight of the text stack).
  EXPECT_EQ(f->message, "no Linear weight is quantized: the text stack's 38912 Linear parameters all stay in 16 bits, "
                        "so this checkpoint is its source with a quantization config");
}

TEST(VerifyRules, TheSeamRefusesBytesThatDoNotFitTheShape) {
  std::vector<MemoryTensor> ts{zeros("a", DType::BF16, {4})};
  ts[0].bytes.resize(7);
  auto q = Checkpoint::from_memory(llama_config(), ts);
  EXPECT_THAT(q, testutil::ResultIs(Errc::BAD_INPUT, "memory: tensor 'a' has 7 bytes, expected 8 for BF16 [4]"));
}

}  // namespace
}  // namespace fp4forge
