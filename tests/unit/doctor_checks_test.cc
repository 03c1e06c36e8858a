// doctor checks: for each kind, a fixture variant (edited copy of tests/data) that triggers it, and the
// clean fixtures that do not.
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>

#include <gtest/gtest.h>

#include "diagnose/checks.h"
#include "fp4forge/core/finding_kinds.h"
#include "fp4forge/doctor/doctor.h"
#include "unit/doctor_test_util.h"

namespace {

using doctor_test::Fixture;
using doctor_test::Json;
using fp4forge::Finding;
using fp4forge::Severity;
namespace dr = fp4forge::doctor;
using fp4forge::finding_kinds;
using fp4forge::kInDoctor;

/** Whether `id` is a row of the registry that docs/cli/doctor.md lists. */
bool in_doctor_table(std::string_view id) {
  const auto* k = fp4forge::find_finding_kind(id);
  return k != nullptr && (k->commands & kInDoctor) != 0;
}

dr::DoctorReport check(const Fixture& fx) {
  auto r = dr::run_doctor(fx.dir());
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().describe());
  if (!r.ok()) return {};
  // Every kind doctor emits for an unquantized checkpoint is in the documented registry.
  if (!r->quantized) {
    for (const auto& f : r->findings) {
      EXPECT_TRUE(in_doctor_table(f.kind)) << f.kind;
    }
  }
  return std::move(r).value();
}

const Finding* find(const dr::DoctorReport& r, std::string_view kind) {
  for (const auto& f : r.findings)
    if (f.kind == kind) return &f;
  return nullptr;
}

std::set<std::string> kinds(const dr::DoctorReport& r) {
  std::set<std::string> s;
  for (const auto& f : r.findings) s.insert(f.kind);
  return s;
}

std::string dump(const dr::DoctorReport& r) { return dr::to_text(r); }

#define EXPECT_KIND(rep, kind, sev)                                               \
  do {                                                                            \
    const auto& rep_ = (rep); /* keeps a temporary report alive while f_ points into it */ \
    const Finding* f_ = find(rep_, kind);                                         \
    ASSERT_NE(f_, nullptr) << "expected " << kind << " in:\n" << dump(rep_);      \
    EXPECT_EQ(f_->severity, sev) << f_->message;                                  \
  } while (0)
#define EXPECT_NO_KIND(rep, kind) EXPECT_EQ(find(rep, kind), nullptr) << dump(rep)

// --- clean fixtures ------------------------------------------------------------------------------------

TEST(DoctorChecks, CleanFixturesHaveNoErrorsAndOnlyExpectedNotes) {
  // gemma4 fixtures carry per_layer_config and no flat globals (transformers >= 5.15 form): that is valid
  // (info), and gemma4-missing-global-kv-fields must not fire. Multimodal fixtures ship
  // processor_config.json without preprocessor_config.json, as transformers 5 writes them: a warning. Every
  // fixture ships the tokenizer transformers saved (tests/data/tokenizer, scripts/add_tokenizer.sh).
  const std::map<std::string, std::set<std::string>> expected{
      {"gemma4-dense-mm", {"gemma4-per-layer-config-only", "missing-preprocessor-config"}},
      {"gemma4-moe-mm", {"gemma4-per-layer-config-only", "missing-preprocessor-config"}},
      {"qwen3_5-dense-mm", {"missing-preprocessor-config"}},
      {"llama", {}},
  };
  for (const auto& [name, want] : expected) {
    Fixture fx(name);
    auto r = check(fx);
    EXPECT_EQ(kinds(r), want) << name << ":\n" << dump(r);
    EXPECT_EQ(exit_code(r), 0) << name;
    EXPECT_FALSE(r.quantized);
  }
}

TEST(DoctorChecks, CleanWithPreprocessorConfigIsSilent) {
  for (const char* name : {"qwen3_5-dense-mm", "gemma4-dense-mm"}) {
    Fixture fx(name);
    Json pc = doctor_test::read_json(fx.path("processor_config.json"));
    doctor_test::write_json(fx.path("preprocessor_config.json"), pc["image_processor"]);
    auto r = check(fx);
    EXPECT_NO_KIND(r, "missing-preprocessor-config");
    EXPECT_NO_KIND(r, "processor-mismatch");
  }
}

// --- Gemma-4 global fields and per_layer_config ------------------------------------------------------

TEST(DoctorChecks, Gemma4MissingGlobalKvFieldsDerivedFromShapes) {
  for (const char* name : {"gemma4-dense-mm", "gemma4-moe-mm"}) {
    Fixture fx(name);
    fx.edit_config([](Json& c) { c["text_config"].erase("per_layer_config"); });
    auto r = check(fx);
    EXPECT_KIND(r, "gemma4-missing-global-kv-fields", Severity::ERROR);
    const Finding* f = find(r, "gemma4-missing-global-kv-fields");
    ASSERT_TRUE(f->fix.has_value()) << f->hint;
    EXPECT_EQ(f->expected, "global_head_dim = 64, num_global_key_value_heads = 1");
    EXPECT_NE(std::find(f->tensors.begin(), f->tensors.end(), "model.language_model.layers.5.self_attn.k_proj"),
              f->tensors.end());
    EXPECT_EQ(exit_code(r), 1);
    EXPECT_NO_KIND(r, "gemma4-per-layer-config-only");
  }
}

TEST(DoctorChecks, Gemma4MissingOnlyOneField) {
  Fixture fx("gemma4-dense-mm");
  fx.edit_config([](Json& c) {
    c["text_config"].erase("per_layer_config");
    c["text_config"]["global_head_dim"] = 64;
  });
  auto r = check(fx);
  const Finding* f = find(r, "gemma4-missing-global-kv-fields");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->expected, "num_global_key_value_heads = 1");
}

TEST(DoctorChecks, Gemma4MissingGlobalsNotDerivableHasNoFix) {
  // Mark a sliding layer as full: the "full" layers then disagree on the head dim (32 vs 64).
  Fixture fx("gemma4-dense-mm");
  fx.edit_config([](Json& c) {
    c["text_config"].erase("per_layer_config");
    c["text_config"]["layer_types"][2] = "full_attention";
  });
  auto r = check(fx);
  const Finding* f = find(r, "gemma4-missing-global-kv-fields");
  ASSERT_NE(f, nullptr);
  EXPECT_FALSE(f->fix.has_value());
  EXPECT_NE(f->hint.find("disagree"), std::string::npos) << f->hint;
}

TEST(DoctorChecks, FlatFieldsOnlyIsClean) {
  Fixture fx("gemma4-moe-mm");
  fx.edit_config([](Json& c) {
    c["text_config"].erase("per_layer_config");
    c["text_config"]["global_head_dim"] = 64;
    c["text_config"]["num_global_key_value_heads"] = 1;
  });
  auto r = check(fx);
  EXPECT_EQ(kinds(r), (std::set<std::string>{"missing-preprocessor-config"})) << dump(r);
}

// Issue 29: a folder with no tokenizer file is not servable as it is (vLLM's --tokenizer defaults to the model
// folder): an error, gone once one is there, or once doctor --tokenizer names where vLLM will read it from.
void remove_serving_files(const Fixture& fx) {
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja"})
    std::filesystem::remove(fx.path(f));
}

TEST(DoctorChecks, MissingTokenizerIsAnError) {
  Fixture fx("llama");
  remove_serving_files(fx);
  auto r = check(fx);
  EXPECT_KIND(r, "missing-tokenizer", Severity::ERROR);
  EXPECT_EQ(exit_code(r), 1);
  EXPECT_NE(find(r, "missing-tokenizer")->hint.find("--tokenizer SRC"), std::string::npos) << dump(r);
  std::ofstream(fx.path("tokenizer.json")) << R"({"version": "1.0", "truncation": null, "padding": null, "model": {}})";
  auto t = check(fx);
  EXPECT_NO_KIND(t, "missing-tokenizer");
  // A tokenizer without a chat template: the chat endpoint would refuse (a warning: base models need none).
  EXPECT_KIND(t, "missing-chat-template", Severity::WARNING);
  EXPECT_EQ(exit_code(t), 0);
  std::ofstream(fx.path("tokenizer_config.json")) << R"({"chat_template": ""})";  // empty: still none
  EXPECT_KIND(check(fx), "missing-chat-template", Severity::WARNING);
  std::ofstream(fx.path("tokenizer_config.json")) << R"({"chat_template": "{{ messages }}"})";
  EXPECT_NO_KIND(check(fx), "missing-chat-template");
  std::filesystem::remove(fx.path("tokenizer_config.json"));
  std::ofstream(fx.path("chat_template.jinja")) << "{{ messages }}";
  EXPECT_NO_KIND(check(fx), "missing-chat-template");
}

// Issue 51: a tokenizer that produces ids the embedding has no row for (vLLM looks a prompt id up in the
// [vocab_size, H] table). Fewer ids than rows is fine (the fixtures: 48 ids, vocab_size 512); ids the config names as
// its multimodal tokens are not counted; a multimodal model gets a warning (its placeholders may lie there).
TEST(DoctorChecks, TokenizerVocabularyAgainstTheEmbedding) {
  Fixture fx("llama");
  EXPECT_NO_KIND(check(fx), "tokenizer-vocab-size");
  fx.edit_json("tokenizer.json", [](Json& t) { t["added_tokens"].push_back({{"id", 512}, {"content", "<x>"}}); });
  EXPECT_KIND(check(fx), "tokenizer-vocab-size", Severity::ERROR);
  EXPECT_NE(find(check(fx), "tokenizer-vocab-size")->message.find("512 '<x>'"), std::string::npos);
  fx.edit_config([](Json& c) { c["image_token_index"] = 512; });
  EXPECT_NO_KIND(check(fx), "tokenizer-vocab-size");
  // A Unigram vocabulary is a list: its length is the id count.
  fx.edit_json("tokenizer.json", [](Json& t) {
    t["added_tokens"] = Json::array();
    t["model"] = {{"type", "Unigram"}, {"vocab", Json::array()}};
    for (int i = 0; i < 514; ++i) {
      std::string piece = "p";  // appended, not "p" + to_string: GCC 12's -Wrestrict misfires on the latter here
      piece += std::to_string(i);
      t["model"]["vocab"].push_back({piece, -1.0});
    }
  });
  EXPECT_KIND(check(fx), "tokenizer-vocab-size", Severity::ERROR);
  // added_tokens_decoder of tokenizer_config.json counts too.
  Fixture dec("llama");
  dec.edit_json("tokenizer_config.json", [](Json& c) { c["added_tokens_decoder"] = {{"600", {{"content", "<y>"}}}}; });
  EXPECT_KIND(check(dec), "tokenizer-vocab-size", Severity::ERROR);
  // A multimodal model: a warning.
  Fixture mm("gemma4-moe-mm");
  mm.edit_json("tokenizer.json", [](Json& t) { t["added_tokens"].push_back({{"id", 9000}, {"content", "<img>"}}); });
  EXPECT_KIND(check(mm), "tokenizer-vocab-size", Severity::WARNING);
}

// doctor --tokenizer: where `vllm serve --tokenizer` will read the tokenizer from. A folder is checked; a repo id
// in the Hugging Face cache is checked in its snapshot; one that is not there is a warning that says what was not
// checked; a name that is neither is a usage error. A finding there is never fixed (doctor writes DIR only).
TEST(DoctorChecks, TokenizerElsewhere) {
  Fixture fx("llama");
  Fixture tok("llama");  // a second folder that has the tokenizer files
  remove_serving_files(fx);
  dr::DoctorOptions o;
  o.tokenizer = tok.dir().string();
  auto r = dr::run_doctor(fx.dir(), o);
  ASSERT_TRUE(r.ok()) << r.error().describe();
  EXPECT_NO_KIND(*r, "missing-tokenizer");
  EXPECT_NO_KIND(*r, "missing-chat-template");
  EXPECT_EQ(dr::exit_code(*r), 0) << dump(*r);

  // The source has no tokenizer either: the error names it.
  remove_serving_files(tok);
  r = dr::run_doctor(fx.dir(), o);
  ASSERT_TRUE(r.ok());
  const Finding* f = find(*r, "missing-tokenizer");
  ASSERT_NE(f, nullptr) << dump(*r);
  EXPECT_EQ(f->severity, Severity::ERROR);
  EXPECT_NE(f->message.find(tok.dir().string()), std::string::npos) << f->message;

  // Truncation in a tokenizer elsewhere: reported, not fixable from here.
  std::ofstream(tok.path("tokenizer.json"))
      << R"({"version": "1.0", "truncation": {"max_length": 16}, "padding": null, "model": {}})";
  r = dr::run_doctor(fx.dir(), o);
  ASSERT_TRUE(r.ok());
  f = find(*r, "tokenizer-truncation");
  ASSERT_NE(f, nullptr) << dump(*r);
  EXPECT_FALSE(f->fix.has_value());

  // A repo id not in the cache: not checked, said so, no error.
  const auto cache = fx.dir().parent_path() / "hub";
  std::filesystem::create_directories(cache);
  ::setenv("HF_HUB_CACHE", cache.c_str(), 1);
  o.tokenizer = "some-org/some-model";
  r = dr::run_doctor(fx.dir(), o);
  ::unsetenv("HF_HUB_CACHE");
  ASSERT_TRUE(r.ok()) << r.error().describe();
  EXPECT_KIND(*r, "tokenizer-unchecked", Severity::WARNING);
  EXPECT_NO_KIND(*r, "missing-tokenizer");
  EXPECT_EQ(dr::exit_code(*r), 0);

  // Neither a folder nor a repo id; a file: usage errors, before anything is read.
  for (const std::string& bad : {(fx.dir() / "nope").string(), fx.path("config.json").string()}) {
    o.tokenizer = bad;
    r = dr::run_doctor(fx.dir(), o);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code, fp4forge::Errc::USAGE) << r.error().describe();
    EXPECT_NE(r.error().message.find(bad), std::string::npos) << r.error().message;
  }
}

TEST(DoctorChecks, PerLayerConfigRedundant) {
  Fixture fx("gemma4-dense-mm");
  fx.edit_config([](Json& c) {
    c["text_config"]["global_head_dim"] = 64;
    c["text_config"]["num_global_key_value_heads"] = 1;
  });
  auto r = check(fx);
  EXPECT_KIND(r, "per-layer-config-redundant", Severity::WARNING);
  EXPECT_TRUE(find(r, "per-layer-config-redundant")->fix.has_value());
  EXPECT_NO_KIND(r, "per-layer-config-conflict");
  EXPECT_EQ(exit_code(r), 0);
}

TEST(DoctorChecks, PerLayerConfigWithExtraOverrideIsNotRedundant) {
  Fixture fx("gemma4-dense-mm");
  fx.edit_config([](Json& c) {
    c["text_config"]["global_head_dim"] = 64;
    c["text_config"]["num_global_key_value_heads"] = 1;
    c["text_config"]["per_layer_config"]["5"]["sliding_window"] = 128;
  });
  auto r = check(fx);
  EXPECT_NO_KIND(r, "per-layer-config-redundant");
  EXPECT_NO_KIND(r, "per-layer-config-conflict");
}

TEST(DoctorChecks, PerLayerConfigConflict) {
  Fixture fx("gemma4-dense-mm");
  fx.edit_config([](Json& c) {
    c["text_config"]["global_head_dim"] = 128;  // per_layer_config says 64
    c["text_config"]["num_global_key_value_heads"] = 1;
  });
  auto r = check(fx);
  EXPECT_KIND(r, "per-layer-config-conflict", Severity::ERROR);
  const Finding* f = find(r, "per-layer-config-conflict");
  EXPECT_FALSE(f->fix.has_value());
  EXPECT_NE(f->hint.find("head dim 64"), std::string::npos) << f->hint;
  EXPECT_NO_KIND(r, "per-layer-config-redundant");
  // the flat reading also breaks the shape invariants (reported with its reading)
  EXPECT_KIND(r, "config-shape-mismatch", Severity::ERROR);
  EXPECT_EQ(exit_code(r), 1);
}

TEST(DoctorChecks, PerLayerConfigInvalidKeys) {
  Fixture fx("gemma4-dense-mm");
  fx.edit_config([](Json& c) { c["text_config"]["per_layer_config"]["2"] = {{"head_dim", 64}}; });
  auto r = check(fx);
  EXPECT_KIND(r, "per-layer-config-invalid", Severity::ERROR);
  Fixture fx2("gemma4-dense-mm");
  fx2.edit_config([](Json& c) { c["text_config"]["per_layer_config"]["9"] = {{"head_dim", 64}}; });
  EXPECT_KIND(check(fx2), "per-layer-config-invalid", Severity::ERROR);
}

TEST(DoctorChecks, Gemma4ActivationAndNullPle) {
  Fixture fx("gemma4-dense-mm");
  fx.edit_config([](Json& c) {
    c["text_config"]["hidden_activation"] = "gelu";
    c["text_config"]["hidden_size_per_layer_input"] = nullptr;
  });
  auto r = check(fx);
  EXPECT_KIND(r, "gemma4-activation", Severity::ERROR);
  EXPECT_KIND(r, "config-value-invalid", Severity::ERROR);
}

// --- config-shape-mismatch, by rule, every family --------------------------------------------------------

struct ShapeCase {
  const char* fixture;
  const char* what;
  std::function<void(Json&)> edit;
  const char* rule_substring;
};

TEST(DoctorChecks, ConfigShapeMismatchRules) {
  const std::vector<ShapeCase> cases{
      {"gemma4-dense-mm", "attention heads", [](Json& c) { Fixture::text(c)["num_attention_heads"] = 8; }, "q_proj"},
      {"gemma4-dense-mm", "kv heads", [](Json& c) { Fixture::text(c)["num_key_value_heads"] = 1; },
       "k_proj == [num_key_value_heads_i"},
      {"gemma4-dense-mm", "layer_types length",
       [](Json& c) { Fixture::text(c)["layer_types"].erase(Fixture::text(c)["layer_types"].begin()); },
       "len(layer_types)"},
      {"gemma4-dense-mm", "num_hidden_layers", [](Json& c) { Fixture::text(c)["num_hidden_layers"] = 5; },
       "len(layer_types)"},
      {"gemma4-dense-mm", "intermediate", [](Json& c) { Fixture::text(c)["intermediate_size"] = 512; },
       "mlp.gate_proj"},
      {"gemma4-dense-mm", "k_eq_v false", [](Json& c) { Fixture::text(c)["attention_k_eq_v"] = false; }, "v_proj"},
      {"gemma4-dense-mm", "untied without lm_head",
       [](Json& c) {
         c["tie_word_embeddings"] = false;
         Fixture::text(c)["tie_word_embeddings"] = false;
       },
       "lm_head"},
      {"gemma4-dense-mm", "vision hidden", [](Json& c) { c["vision_config"]["hidden_size"] = 32; }, "embed_vision"},
      {"gemma4-dense-mm", "ple", [](Json& c) { Fixture::text(c)["hidden_size_per_layer_input"] = 16; },
       "per-layer-embedding"},
      {"gemma4-moe-mm", "expert count", [](Json& c) { Fixture::text(c)["num_experts"] = 4; }, "router"},
      {"gemma4-moe-mm", "moe intermediate", [](Json& c) { Fixture::text(c)["moe_intermediate_size"] = 32; },
       "expert width"},
      {"deepseek_v3", "mla kv rank", [](Json& c) { c["kv_lora_rank"] = 16; }, "kv_a_proj_with_mqa"},
      {"deepseek_v3", "mla q rank", [](Json& c) { c["q_lora_rank"] = 48; }, "q_a_proj"},
      {"deepseek_v3", "moe width", [](Json& c) { c["moe_intermediate_size"] = 32; }, "experts.{e}.gate/up"},
      {"deepseek_v3", "dense layer count", [](Json& c) { c["first_k_dense_replace"] = 2; }, "routed experts only"},
      {"phi3", "kv heads", [](Json& c) { c["num_key_value_heads"] = 4; }, "qkv_proj"},
      {"phi3", "intermediate", [](Json& c) { c["intermediate_size"] = 96; }, "gate_up_proj"},
      {"llama4-mm", "expert width", [](Json& c) { Fixture::text(c)["intermediate_size"] = 32; }, "expert width"},
      {"llama4-mm", "expert count", [](Json& c) { Fixture::text(c)["num_local_experts"] = 8; }, "num_experts"},
      {"granitemoehybrid", "shared width", [](Json& c) { c["shared_intermediate_size"] = 96; },
       "shared_mlp.input_linear"},
      {"granitemoehybrid", "mamba layer", [](Json& c) { c["layer_types"][1] = "linear_attention"; }, "Mamba layer"},
      {"qwen3_vl_moe-hub", "expert count", [](Json& c) { Fixture::text(c)["num_local_experts"] = 8; }, "router"},
      {"mixtral", "expert width", [](Json& c) { c["intermediate_size"] = 32; }, "experts.{e}"},
      {"gemma4-moe-mm", "moe switched off", [](Json& c) { Fixture::text(c)["enable_moe_block"] = false; },
       "enable_moe_block"},
      {"qwen3_5-dense-mm", "linear value heads", [](Json& c) { Fixture::text(c)["linear_num_value_heads"] = 8; },
       "in_proj_z"},
      {"qwen3_5-dense-mm", "linear key dim", [](Json& c) { Fixture::text(c)["linear_key_head_dim"] = 16; },
       "in_proj_qkv"},
      {"qwen3_5-dense-mm", "conv kernel", [](Json& c) { Fixture::text(c)["linear_conv_kernel_dim"] = 3; }, "conv1d"},
      {"qwen3_5-dense-mm", "layer type presence",
       [](Json& c) { Fixture::text(c)["layer_types"][2] = "full_attention"; }, "self_attn"},
      {"qwen3_5-dense-mm", "output gate", [](Json& c) { Fixture::text(c)["attn_output_gate"] = false; }, "q_proj"},
      {"qwen3_5-dense-mm", "tied with lm_head",
       [](Json& c) {
         c["tie_word_embeddings"] = true;
         Fixture::text(c)["tie_word_embeddings"] = true;
       },
       "lm_head"},
      {"qwen3_5-dense-mm", "merger", [](Json& c) { c["vision_config"]["out_hidden_size"] = 64; }, "out_hidden_size"},
      {"qwen3_5-dense-mm", "interval", [](Json& c) { Fixture::text(c)["full_attention_interval"] = 3; },
       "full_attention_interval"},
      {"llama", "kv heads", [](Json& c) { c["num_key_value_heads"] = 4; }, "k_proj == [num_key_value_heads_i"},
      {"llama", "head dim", [](Json& c) { c["head_dim"] = 16; }, "q_proj"},
      {"llama", "missing layer", [](Json& c) { c["num_hidden_layers"] = 3; }, "every decoder layer"},
      {"llama", "extra layer", [](Json& c) { c["num_hidden_layers"] = 1; }, "index ≥ num_hidden_layers"},
      {"llama", "vocab", [](Json& c) { c["vocab_size"] = 1024; }, "embed_tokens"},
      {"llama", "tied with lm_head", [](Json& c) { c["tie_word_embeddings"] = true; }, "lm_head"},
  };
  for (const auto& tc : cases) {
    Fixture fx(tc.fixture);
    fx.edit_config(tc.edit);
    auto r = check(fx);
    bool hit = false;
    for (const auto& f : r.findings)
      if (f.kind == "config-shape-mismatch" && f.message.find(tc.rule_substring) != std::string::npos) hit = true;
    EXPECT_TRUE(hit) << tc.fixture << " / " << tc.what << ": no config-shape-mismatch mentioning '"
                     << tc.rule_substring << "' in:\n" << dump(r);
  }
}

TEST(DoctorChecks, ExpertLayoutTransposedAndMixed) {
  // The orientation comes from the shapes: Hub-orientation Qwen3-VL-MoE experts ([E, H, 2I] / [E, I, H])
  // are correct, not an error.
  EXPECT_EQ(exit_code(check(Fixture("qwen3_vl_moe-hub"))), 0);
  // Shapes that fit neither orientation are.
  Fixture fx("gemma4-moe-mm");
  const std::string down = "model.language_model.layers.0.experts.down_proj";  // [8, 128, 64] = [E, H, Im]
  fx.rewrite_shard(fx.shard_of(down), [&](Fixture::Tensors& ts) { ts[down].shape = {8, 64, 64}; });
  auto r = check(fx);
  EXPECT_KIND(r, "expert-layout", Severity::ERROR);
  EXPECT_NE(find(r, "expert-layout")->message.find("fit neither"), std::string::npos);

  Fixture fx2("gemma4-moe-mm");
  fx2.rewrite_shard("extra.safetensors", [](Fixture::Tensors& ts) {
    ts["model.language_model.layers.1.experts.0.gate_proj.weight"] = {"BF16", {64, 128}, {}};
  });
  auto r2 = check(fx2);
  EXPECT_KIND(r2, "expert-layout", Severity::ERROR);
  EXPECT_NE(find(r2, "expert-layout")->message.find("never both"), std::string::npos);
}

// --- architecture / layout -----------------------------------------------------------------------------

TEST(DoctorChecks, WrapperFlatMismatch) {
  Fixture g("gemma4-dense-mm");
  g.edit_config([](Json& c) { c["architectures"] = {"Gemma4ForCausalLM"}; });
  auto r = check(g);
  EXPECT_KIND(r, "wrapper-flat-mismatch", Severity::ERROR);
  EXPECT_NE(find(r, "wrapper-flat-mismatch")->message.find("transformers"), std::string::npos);
  EXPECT_NE(find(r, "wrapper-flat-mismatch")->message.find("vLLM"), std::string::npos);
  EXPECT_NO_KIND(r, "unknown-architecture");

  Fixture q("qwen3_5-dense-mm");
  q.edit_config([](Json& c) { c["architectures"] = {"Qwen3_5ForCausalLM"}; });
  auto rq = check(q);
  EXPECT_KIND(rq, "wrapper-flat-mismatch", Severity::ERROR);
  EXPECT_KIND(rq, "architecture-needs-recent-vllm", Severity::WARNING);

  Fixture l("llama");
  l.edit_config([](Json& c) {
    Json text = c;
    text.erase("architectures");
    c = Json{{"architectures", {"Gemma4ForConditionalGeneration"}}, {"model_type", "gemma4"}, {"text_config", text}};
    c["text_config"]["model_type"] = "gemma4_text";
  });
  EXPECT_KIND(check(l), "wrapper-flat-mismatch", Severity::ERROR);
}

TEST(DoctorChecks, UnknownArchitecture) {
  Fixture fx("llama");
  // A class the family's row does not list may be one vLLM registers (issue 26): a warning, never an error.
  fx.edit_config([](Json& c) { c["architectures"] = {"LlamaForCausalLMv2"}; });
  EXPECT_KIND(check(fx), "unknown-architecture", Severity::WARNING);
  Fixture mtp("qwen3_5-dense-mm");
  mtp.edit_config([](Json& c) { c["architectures"] = {"Qwen3_5MTP"}; });
  EXPECT_KIND(check(mtp), "unknown-architecture", Severity::ERROR);
  Fixture none("llama");
  none.edit_config([](Json& c) { c.erase("architectures"); });
  EXPECT_KIND(check(none), "unknown-architecture", Severity::WARNING);
  Fixture other("llama");
  other.edit_config([](Json& c) {
    c["architectures"] = {"StableLmForCausalLM"};
    c["model_type"] = "stablelm";
  });
  auto r = check(other);
  EXPECT_KIND(r, "unknown-architecture", Severity::WARNING);
  EXPECT_EQ(exit_code(r), 0);
}

// --- modalities, MTP ----------------------------------------------------------------------------------

TEST(DoctorChecks, DeclaredModalitiesWithoutWeights) {
  Fixture fx("gemma4-dense-mm");
  fx.edit_config([](Json& c) { c["audio_config"] = {{"model_type", "gemma4_audio"}, {"hidden_size", 64}}; });
  EXPECT_KIND(check(fx), "audio-declared-weightless", Severity::INFO);
  Fixture l("llama");
  l.edit_config([](Json& c) { c["vision_config"] = {{"hidden_size", 64}}; });
  EXPECT_KIND(check(l), "vision-declared-weightless", Severity::INFO);
  Fixture g("gemma4-dense-mm");
  g.remove_tensors("model.vision_tower.");
  g.remove_tensors("model.embed_vision.");
  EXPECT_KIND(check(g), "vision-declared-weightless", Severity::ERROR);
}

TEST(DoctorChecks, MtpDeclaredMissingAndPresentUndeclared) {
  Fixture fx("qwen3_5-dense-mm");
  fx.remove_tensors("mtp.");
  auto r = check(fx);
  EXPECT_KIND(r, "mtp-declared-missing", Severity::WARNING);
  EXPECT_FALSE(std::filesystem::exists(fx.path("model-mtp.safetensors")));
  Fixture u("qwen3_5-dense-mm");
  u.edit_config([](Json& c) { c["text_config"].erase("mtp_num_hidden_layers"); });
  auto ru = check(u);
  EXPECT_KIND(ru, "mtp-present-undeclared", Severity::WARNING);
  EXPECT_NO_KIND(ru, "mtp-declared-missing");
  Fixture two("qwen3_5-dense-mm");
  two.edit_config([](Json& c) { c["text_config"]["mtp_num_hidden_layers"] = 2; });
  EXPECT_KIND(check(two), "mtp-declared-missing", Severity::WARNING);
}

// --- processor and tokenizer files -------------------------------------------------------------------

TEST(DoctorChecks, ProcessorFiles) {
  Fixture missing("qwen3_5-dense-mm");
  std::filesystem::remove(missing.path("processor_config.json"));
  EXPECT_KIND(check(missing), "missing-processor", Severity::ERROR);

  Fixture pre("gemma4-dense-mm");
  auto r = check(pre);
  EXPECT_KIND(r, "missing-preprocessor-config", Severity::WARNING);
  EXPECT_TRUE(find(r, "missing-preprocessor-config")->fix.has_value());

  Fixture patch("gemma4-dense-mm");
  patch.edit_json("processor_config.json", [](Json& j) { j["image_processor"]["patch_size"] = 14; });
  EXPECT_KIND(check(patch), "processor-mismatch", Severity::ERROR);
  Fixture soft("gemma4-moe-mm");
  soft.edit_json("processor_config.json", [](Json& j) { j["image_processor"]["max_soft_tokens"] = 300; });
  EXPECT_KIND(check(soft), "processor-mismatch", Severity::ERROR);
  Fixture pool("gemma4-dense-mm");
  pool.edit_json("processor_config.json", [](Json& j) { j["image_processor"]["pooling_kernel_size"] = 2; });
  EXPECT_KIND(check(pool), "processor-mismatch", Severity::ERROR);
  Fixture merge("qwen3_5-dense-mm");
  merge.edit_json("processor_config.json", [](Json& j) { j["image_processor"]["merge_size"] = 3; });
  EXPECT_KIND(check(merge), "processor-mismatch", Severity::ERROR);
  Fixture huge("qwen3_5-dense-mm");
  huge.edit_json("processor_config.json", [](Json& j) { j["image_processor"]["size"]["longest_edge"] = 16777216; });
  auto rh = check(huge);
  EXPECT_KIND(rh, "processor-mismatch", Severity::ERROR);
  EXPECT_NE(find(rh, "processor-mismatch")->message.find("GiB"), std::string::npos);
  Fixture differ("qwen3_5-dense-mm");
  Json ip = doctor_test::read_json(differ.path("processor_config.json"))["image_processor"];
  ip["patch_size"] = 14;
  doctor_test::write_json(differ.path("preprocessor_config.json"), ip);
  auto rd = check(differ);
  bool patch_err = false, files_differ = false;
  for (const auto& f : rd.findings) {
    if (f.kind != "processor-mismatch" || f.key != "preprocessor_config.json") continue;
    if (f.severity == Severity::ERROR) patch_err = true;                  // patch 14 vs vision_config 16
    if (f.severity == Severity::WARNING) files_differ = f.actual.find("patch_size") != std::string::npos;
  }
  EXPECT_TRUE(patch_err) << dump(rd);
  EXPECT_TRUE(files_differ) << dump(rd);
}

TEST(DoctorChecks, TokenizerFiles) {
  Fixture fx("llama");
  doctor_test::write(fx.path("tokenizer.json"),
                     "{\n  \"version\": \"1.0\",\n  \"truncation\": {\n    \"direction\": \"Right\",\n    \"max_length\": 8,\n"
                     "    \"strategy\": \"LongestFirst\",\n    \"stride\": 0\n  },\n  \"padding\": null,\n  \"model\": {}\n}");
  auto r = check(fx);
  EXPECT_KIND(r, "tokenizer-truncation", Severity::WARNING);
  EXPECT_TRUE(find(r, "tokenizer-truncation")->fix.has_value());
  EXPECT_NE(find(r, "tokenizer-truncation")->message.find("max_length 8"), std::string::npos);

  Fixture pad("llama");
  doctor_test::write(pad.path("tokenizer.json"),
                     "{\"truncation\": null, \"padding\": {\"strategy\": \"BatchLongest\"}, \"model\": {}}");
  EXPECT_KIND(check(pad), "tokenizer-truncation", Severity::WARNING);

  Fixture clean("llama");
  doctor_test::write(clean.path("tokenizer.json"), "{\"truncation\": null, \"padding\": null, \"model\": {}}");
  doctor_test::write(clean.path("tokenizer_config.json"), "{\"model_max_length\": 1000000000000000019884624838656}");
  auto rc = check(clean);
  EXPECT_NO_KIND(rc, "tokenizer-truncation");
  EXPECT_NO_KIND(rc, "tokenizer-max-length");

  Fixture ml("llama");
  doctor_test::write(ml.path("tokenizer_config.json"), "{\"model_max_length\": 512, \"max_length\": 8192}");
  auto rm = check(ml);
  EXPECT_KIND(rm, "tokenizer-max-length", Severity::ERROR);
  EXPECT_EQ(exit_code(rm), 1);

  Fixture bad("llama");
  doctor_test::write(bad.path("tokenizer_config.json"), "{\"model_max_length\": ");
  EXPECT_KIND(check(bad), "invalid-json-file", Severity::ERROR);
}

// --- quantized checkpoints: ignore regexes ----------------------------------------------------------------

TEST(DoctorChecks, IgnoreRegexEvaluatedUnderReMatch) {
  Fixture fx("gemma4-moe-mm");
  fx.edit_config([](Json& c) {
    c["quantization_config"] = {
        {"quant_method", "compressed-tensors"},
        {"format", "nvfp4-pack-quantized"},
        {"config_groups",
         {{"group_0",
           {{"targets", {"Linear"}},
            {"weights",
             {{"num_bits", 4}, {"type", "float"}, {"strategy", "tensor_group"}, {"group_size", 16}, {"symmetric", true},
              {"dynamic", false}}},
            {"input_activations", nullptr}}}}},
        {"ignore", {"lm_head", "re:.*router", "re:.*vision_tower.*", "re:.*in_proj_qkv$", "model.nonexistent"}}};
  });
  auto r = dr::run_doctor(fx.dir());
  ASSERT_TRUE(r.ok()) << r.error().describe();
  EXPECT_TRUE(r->quantized);
  std::map<std::string, const Finding*> by_key;
  for (const auto& f : r->findings)
    if (f.kind == "ignore-regex" || f.kind == "ignore-unmatched") by_key[f.kind + "@" + f.key] = &f;
  // re:.*router matches router.proj etc. only as a prefix: a full-match engine would miss them (F23)
  const Finding* router = by_key["ignore-regex@quantization_config.ignore[1]"];
  ASSERT_NE(router, nullptr) << dump(*r);
  EXPECT_EQ(router->severity, Severity::WARNING);
  EXPECT_NE(std::find(router->tensors.begin(), router->tensors.end(), "model.language_model.layers.0.router.proj"),
            router->tensors.end());
  const Finding* vision = by_key["ignore-regex@quantization_config.ignore[2]"];
  ASSERT_NE(vision, nullptr);
  EXPECT_EQ(vision->severity, Severity::INFO);
  EXPECT_FALSE(vision->tensors.empty());
  // stale entries come from verify's structural checks (ignore-unmatched), not duplicated by doctor
  EXPECT_NE(by_key["ignore-unmatched@quantization_config.ignore[3]"], nullptr) << dump(*r);
  EXPECT_NE(by_key["ignore-unmatched@quantization_config.ignore[4]"], nullptr);
  EXPECT_EQ(by_key.count("ignore-unmatched@quantization_config.ignore[1]"), 0u);
  EXPECT_EQ(by_key.count("ignore-regex@quantization_config.ignore[4]"), 0u);  // not a re: entry
}

// --- the fix-time proofs ------------------------------------------------------------------------------

TEST(DoctorChecks, RedundancyProofRefusesWhenItDoesNotHold) {
  const std::vector<std::string> lt{"sliding_attention", "sliding_attention", "full_attention",
                                    "sliding_attention", "sliding_attention", "full_attention"};
  Json base = {{"text_config",
                {{"attention_k_eq_v", true},
                 {"global_head_dim", 64},
                 {"num_global_key_value_heads", 1},
                 {"per_layer_config",
                  {{"2", {{"head_dim", 64}, {"num_key_value_heads", 1}}},
                   {"5", {{"num_key_value_heads", 1}, {"head_dim", 64}}}}}}}};
  std::string why;
  EXPECT_TRUE(dr::prove_per_layer_config_redundant(base, lt, &why)) << why;
  struct Neg {
    const char* what;
    std::function<void(Json&)> edit;
    const char* reason;
  };
  const std::vector<Neg> negs{
      {"missing full layer", [](Json& c) { c["text_config"]["per_layer_config"].erase("5"); }, "keys"},
      {"extra sliding key", [](Json& c) { c["text_config"]["per_layer_config"]["1"] = {{"head_dim", 64}}; }, "keys"},
      {"different values",
       [](Json& c) { c["text_config"]["per_layer_config"]["5"]["head_dim"] = 128; }, "different override"},
      {"other override", [](Json& c) {
         c["text_config"]["per_layer_config"]["2"]["sliding_window"] = 8;
         c["text_config"]["per_layer_config"]["5"]["sliding_window"] = 8;
       }, "keys other than"},
      {"flat differs", [](Json& c) { c["text_config"]["global_head_dim"] = 32; }, "differs from global_head_dim"},
      {"flat kv absent", [](Json& c) { c["text_config"].erase("num_global_key_value_heads"); }, "absent"},
      {"no per_layer_config", [](Json& c) { c["text_config"].erase("per_layer_config"); }, "absent or empty"},
  };
  for (const auto& n : negs) {
    Json c = base;
    n.edit(c);
    why.clear();
    EXPECT_FALSE(dr::prove_per_layer_config_redundant(c, lt, &why)) << n.what;
    EXPECT_NE(why.find(n.reason), std::string::npos) << n.what << ": " << why;
  }
}

// --- other inputs --------------------------------------------------------------------------------------

TEST(DoctorChecks, ConfigOnlyDirectory) {
  Fixture fx("llama");
  for (const auto& e : std::filesystem::directory_iterator(fx.dir()))
    if (e.path().filename() != "config.json") std::filesystem::remove(e.path());
  auto r = check(fx);
  EXPECT_KIND(r, "no-weights", Severity::INFO);
  EXPECT_KIND(r, "missing-tokenizer", Severity::ERROR);  // the tokenizer went with the other files
  EXPECT_EQ(exit_code(r), 1);
}

TEST(DoctorChecks, MissingConfigIsBadInput) {
  Fixture fx("llama");
  std::filesystem::remove(fx.path("config.json"));
  auto r = dr::run_doctor(fx.dir());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, fp4forge::Errc::BAD_INPUT);
}

TEST(DoctorChecks, RegistryIsDocumented) {
  const std::string doc = doctor_test::read(std::filesystem::path(FP4FORGE_TEST_DATA) / "../../docs/cli/doctor.md");
  ASSERT_FALSE(doc.empty());
  std::set<std::string_view> ids;
  for (const auto& k : finding_kinds()) {
    if (!(k.commands & kInDoctor)) continue;
    EXPECT_TRUE(ids.insert(k.id).second) << "duplicate " << k.id;
    std::string needle(1, '`');
    needle.append(k.id);
    needle.push_back('`');
    EXPECT_NE(doc.find(needle), std::string::npos) << k.id << " is not in docs/cli/doctor.md";
  }
  for (const char* required :
       {"gemma4-missing-global-kv-fields", "per-layer-config-redundant", "per-layer-config-conflict",
        "config-shape-mismatch", "wrapper-flat-mismatch", "unknown-architecture", "missing-preprocessor-config",
        "processor-mismatch", "tokenizer-truncation", "tokenizer-max-length", "mtp-declared-missing",
        "mtp-present-undeclared", "gemma4-activation", "audio-declared-weightless", "expert-layout", "ignore-regex"})
    EXPECT_TRUE(in_doctor_table(required)) << required;
}

}  // namespace
