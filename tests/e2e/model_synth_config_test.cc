// `fp4forge synth --config` / `--header-only`: a real config's geometry read back into the family's layout (the
// transformers-written fixtures come back tensor for tensor; published parameter counts of 70B and 235B models
// come back exactly), header-only shards that take headers on disk and open, inspect and plan, and configs synth
// cannot lay out refused by name.
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <tuple>
#include <map>

#include <gtest/gtest.h>

#include "fp4forge/safetensors/checkpoint.h"
#include "fp4forge/model/synth.h"
#include "model_test_util.h"

using namespace fp4forge;
using namespace fp4forge::mtest;

namespace {

std::uint64_t numel(const Json& shape) {
  std::uint64_t n = 1;
  for (const auto& d : shape) n *= d.get<std::uint64_t>();
  return n;
}

Json synth_json(const std::string& args, int want_rc = 0) {
  std::string out, err;
  const int rc = run_cli("synth " + args + " --json", &out, &err);
  EXPECT_EQ(rc, want_rc) << args << "\n" << err << out;
  if (rc != 0) return Json::parse(out.empty() ? "{}" : out);
  return Json::parse(out);
}

/** What the shards take on disk (allocated blocks), not their length. */
std::uint64_t allocated(const stdfs::path& dir) {
  std::uint64_t n = 0;
  for (const auto& e : stdfs::directory_iterator(dir)) {
    struct stat st {};
    if (::stat(e.path().c_str(), &st) == 0) n += static_cast<std::uint64_t>(st.st_blocks) * 512;
  }
  return n;
}

// The fixtures are what transformers 5.17 writes for each family: synth at the fixture's config must write the
// same tensors with the same shapes (where synth's layout is the writer's), and the same parameter count always.
TEST(SynthConfig, TheWritersFixturesComeBackFromTheirConfigs) {
  struct Case {
    std::string fixture, arch;
    bool exact;  // false: synth writes the Hub release's fused expert tensors where the fixture has per-expert ones
  };
  const std::vector<Case> cases = {{"llama", "llama", true},
                                   {"qwen3_moe", "qwen3-moe", true},
                                   {"qwen3_moe-wide", "qwen3-moe", true},
                                   {"gemma4-dense-mm", "gemma4-dense", true},
                                   {"gemma4-moe-mm", "gemma4-moe", true},
                                   {"qwen3_5-dense-mm", "qwen3_5-dense", true},
                                   {"qwen3_5-moe-mm", "qwen3_5-moe", false},
                                   {"qwen3_5-moe-mm-wide", "qwen3_5-moe", false}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.fixture);
    TempDir t;
    const Json r = synth_json("--config " + q(kData + "/" + c.fixture + "/config.json") + " --out " + q(t.path / "o"));
    ASSERT_TRUE(r.value("ok", false));
    EXPECT_EQ(r["arch"], c.arch);
    EXPECT_EQ(r["size"], "config");
    EXPECT_EQ(r["config"], kData + "/" + c.fixture + "/config.json");
    const auto want = fixture_shapes(c.fixture);
    std::uint64_t want_params = 0;
    for (const auto& [n, s] : want) want_params += numel(s);
    EXPECT_EQ(r["params"].get<std::uint64_t>(), want_params);
    if (c.exact) {
      auto ck = Checkpoint::open(t.path / "o");
      ASSERT_TRUE(ck.ok());
      std::map<std::string, Json> got;
      for (const auto& tr : ck->tensors()) got[tr.name] = Json(tr.info->shape);
      EXPECT_EQ(got, want);
    }
    // Our own output is clean: doctor finds the written config consistent with the tensors.
    std::string out, err;
    EXPECT_EQ(run_cli("doctor " + q(t.path / "o") + " --json", &out, &err), 0) << out << err;
  }
}

// Published parameter counts: Llama-3.1-70B 70,553,706,496; Qwen3-235B-A22B 235,093,634,560 (their configs as on
// the Hub, trimmed to the keys that matter). Header-only: the data section is sparse.
TEST(SynthConfig, HeaderOnlyAtARealSizeTakesHeadersOnDisk) {
  const Json llama70 = {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"hidden_size", 8192},
                        {"intermediate_size", 28672}, {"num_hidden_layers", 80}, {"num_attention_heads", 64},
                        {"num_key_value_heads", 8}, {"vocab_size", 128256}, {"max_position_embeddings", 131072},
                        {"tie_word_embeddings", false}, {"attention_bias", false}, {"mlp_bias", false}};
  const Json qwen235 = {{"architectures", {"Qwen3MoeForCausalLM"}}, {"model_type", "qwen3_moe"},
                        {"hidden_size", 4096}, {"intermediate_size", 12288}, {"num_hidden_layers", 94},
                        {"num_attention_heads", 64}, {"num_key_value_heads", 4}, {"head_dim", 128},
                        {"num_experts", 128}, {"num_experts_per_tok", 8}, {"moe_intermediate_size", 1536},
                        {"decoder_sparse_step", 1}, {"mlp_only_layers", Json::array()}, {"vocab_size", 151936},
                        {"max_position_embeddings", 40960}, {"tie_word_embeddings", false}};
  for (const auto& [cfg, params, cls] : {std::tuple{llama70, 70553706496ULL, "dense"},
                                         std::tuple{qwen235, 235093634560ULL, "moe"}}) {
    SCOPED_TRACE(params);
    TempDir t;
    const stdfs::path file = t.path / "config.json";
    std::ofstream(file) << cfg.dump(2);
    const Json r = synth_json("--config " + q(file) + " --header-only --no-progress --out " + q(t.path / "o"));
    ASSERT_TRUE(r.value("ok", false));
    EXPECT_EQ(r["params"].get<std::uint64_t>(), params);
    EXPECT_EQ(r["bytes"].get<std::uint64_t>(), 2 * params);
    EXPECT_TRUE(r["header_only"].get<bool>());
    EXPECT_LT(r["bytes_on_disk"].get<std::uint64_t>(), 16u << 20);
    EXPECT_GE(r["shards"].size(), 2 * params / 5'000'000'000ULL);
    EXPECT_LT(allocated(t.path / "o"), 64u << 20) << "the data sections must be sparse";
    // It opens as a checkpoint of that size and inspects as its class.
    auto ck = Checkpoint::open(t.path / "o");
    ASSERT_TRUE(ck.ok()) << ck.error().describe();
    std::string out, err;
    ASSERT_EQ(run_cli("inspect " + q(t.path / "o") + " --json", &out, &err), 0) << err;
    EXPECT_EQ(Json::parse(out)["class"]["name"], cls);
    // The shards say what they are.
    const auto& meta = ck->shards().front().header().metadata;
    EXPECT_NE(std::find(meta.begin(), meta.end(), std::pair<std::string, std::string>{"fp4forge_synth", "header-only"}),
              meta.end());
  }
}

TEST(SynthConfig, WhatTheLayoutCannotWriteIsRefusedByName) {
  TempDir t;
  auto write = [&](const std::string& name, const Json& j) {
    const stdfs::path f = t.path / (name + ".json");
    std::ofstream(f) << j.dump(2);
    return q(f);
  };
  std::string out, err;
  // A .json name that is not there is the file meant (issue 55 tryout: "cannot open 'x.json/config.json'").
  EXPECT_EQ(run_cli("synth --config " + q(t.path / "none.json") + " --out " + q(t.path / "n"), &out, &err), 4) << err;
  EXPECT_NE(err.find((t.path / "none.json").string()), std::string::npos) << err;
  EXPECT_EQ(err.find("none.json/config.json"), std::string::npos) << err;
  // A family synth has no layout for.
  EXPECT_EQ(run_cli("synth --config " + q(kData + "/gpt_oss/config.json") + " --out " + q(t.path / "a"), &out, &err),
            3);
  EXPECT_NE(err.find("synth lays out llama, qwen3_moe, gemma4, qwen3_5 / qwen3_5_moe and mistral, phi3"),
            std::string::npos) << err;
  EXPECT_NE(err.find("fp4forge plan"), std::string::npos) << err;
  // A multimodal family's text config alone, where the rule has no text layout (Qwen3.5-MoE: no text-only fixture of
  // the real writer yet; Qwen3.5's dense text class is laid out by the rule, model_synth_rule_test).
  {
    Json text = Json::parse(slurp(kData + "/qwen3_5-moe-mm/config.json"))["text_config"];
    text["architectures"] = Json::array({"Qwen3_5MoeForCausalLM"});
    std::ofstream(t.path / "moe_text.json") << text.dump(2);
  }
  EXPECT_EQ(run_cli("synth --config " + q(t.path / "moe_text.json") + " --out " + q(t.path / "b"), &out, &err), 3);
  EXPECT_NE(err.find("no 'vision_config'"), std::string::npos) << err;
  // Gemma-4 features the layout does not write, each named.
  const Json g4 = Json::parse(slurp(kData + "/gemma4-dense-mm/config.json"));
  for (const auto& [key, value] : std::vector<std::pair<std::string, Json>>{
           {"hidden_size_per_layer_input", 256}, {"num_kv_shared_layers", 2}, {"use_double_wide_mlp", true}}) {
    Json c = g4;
    c["text_config"][key] = value;
    EXPECT_EQ(run_cli("synth --config " + write(key, c) + " --out " + q(t.path / "c"), &out, &err), 3) << key;
    EXPECT_NE(err.find("'" + key + "'"), std::string::npos) << err;
  }
  // Qwen3-MoE with dense layers.
  Json qm = Json::parse(slurp(kData + "/qwen3_moe/config.json"));
  qm["mlp_only_layers"] = {0};
  EXPECT_EQ(run_cli("synth --config " + write("qm", qm) + " --out " + q(t.path / "d"), &out, &err), 3);
  EXPECT_NE(err.find("'mlp_only_layers'"), std::string::npos) << err;
  // A width missing.
  Json ll = Json::parse(slurp(kData + "/llama/config.json"));
  ll.erase("intermediate_size");
  EXPECT_EQ(run_cli("synth --config " + write("ll", ll) + " --out " + q(t.path / "e"), &out, &err), 3);
  EXPECT_NE(err.find("'intermediate_size' is absent (or 0)"), std::string::npos) << err;
  // Not JSON.
  std::ofstream(t.path / "bad.json") << "{\"model_type\": ";
  EXPECT_EQ(run_cli("synth --config " + q(t.path / "bad.json") + " --out " + q(t.path / "f"), &out, &err), 3);
  // Usage: --arch against the config, --size with --config, neither --arch nor --config.
  EXPECT_EQ(run_cli("synth --arch llama --config " + q(kData + "/qwen3_moe/config.json") + " --out " + q(t.path / "g"),
                    &out, &err),
            2);
  EXPECT_NE(err.find("--arch llama does not match the config, which is a qwen3-moe checkpoint"), std::string::npos)
      << err;
  EXPECT_EQ(run_cli("synth --size small --config " + q(kData + "/llama/config.json") + " --out " + q(t.path / "h"),
                    &out, &err),
            2);
  EXPECT_EQ(run_cli("synth --out " + q(t.path / "i"), &out, &err), 2);
  EXPECT_NE(err.find("--arch"), std::string::npos) << err;
  // None of the refusals wrote anything.
  for (const char* d : {"a", "b", "c", "d", "e", "f", "g", "h", "i"}) EXPECT_FALSE(stdfs::exists(t.path / d)) << d;
}

// A folder (its config.json) is as good as the file.
TEST(SynthConfig, AFolderIsReadForItsConfig) {
  TempDir t;
  const Json r = synth_json("--config " + q(kData + "/gemma4-moe-mm") + " --header-only --out " + q(t.path / "o"));
  EXPECT_EQ(r["arch"], "gemma4-moe");
  EXPECT_EQ(r["config"], (stdfs::path(kData) / "gemma4-moe-mm" / "config.json").string());
}

// A header-only checkpoint reads as zeros: doctor says so as an error (its layout checks still run), quantize refuses
// it (with --no-preflight and --dry-run too) and writes nothing; inspect and plan read it as before.
TEST(SynthConfig, AHeaderOnlyCheckpointIsNeverQuantized) {
  TempDir t;
  const stdfs::path o = t.path / "o";
  synth_json("--arch llama --size TINY --header-only --no-progress --out " + q(o));  // any case (issue 55 tryout)
  std::string out, err;
  ASSERT_EQ(run_cli("doctor " + q(o) + " --json", &out, &err), 1) << out << err;
  const Json d = Json::parse(out);
  bool found = false;
  for (const auto& f : d["findings"])
    if (f["kind"] == "header-only-weights") {
      found = true;
      EXPECT_EQ(f["severity"], "error");
    }
  EXPECT_TRUE(found) << out;
  // verify's hint does not lead into quantize's refusal (issue 55 tryout).
  run_cli("verify " + q(o), &out, &err);
  EXPECT_NE(out.find("written by `synth --header-only` (they read as zeros)"), std::string::npos) << out;
  EXPECT_EQ(out.find("fp4forge quantize"), std::string::npos) << out;
  for (const char* extra : {"", " --no-preflight", " --dry-run"}) {
    SCOPED_TRACE(extra);
    const stdfs::path dst = t.path / "q";
    const std::string dst_arg = std::string(extra) == " --dry-run" ? "" : " " + q(dst);
    EXPECT_EQ(run_cli("quantize " + q(o) + dst_arg + extra, &out, &err), 3) << err;
    EXPECT_NE(err.find("header-only"), std::string::npos) << err;
    // No hint that leads into another refusal (issue 55 tryout: "--no-preflight quantizes anyway", "checks below").
    EXPECT_EQ(err.find("--no-preflight quantizes anyway"), std::string::npos) << err;
    EXPECT_EQ(err.find("checks below"), std::string::npos) << err;
    EXPECT_FALSE(stdfs::exists(dst));
  }
  // plan --emit-compose with assume= on it: said as header-only, not "quantize it first" (which quantize refuses).
  EXPECT_EQ(run_cli("plan --seat s=" + q(o) + ":assume=nvfp4a16 --gpu 0=80GiB --emit-compose " + q(t.path / "c"), &out,
                    &err), 2);
  EXPECT_NE(err.find("is a `synth --header-only` folder"), std::string::npos) << err;
  EXPECT_EQ(err.find("quantize it first"), std::string::npos) << err;
  EXPECT_EQ(run_cli("quantize " + q(o) + " " + q(t.path / "q") + " --no-preflight", &out, &err), 3);
  EXPECT_NE(err.find("quantizing it would write a model of zeros"), std::string::npos) << err;
  EXPECT_EQ(run_cli("inspect " + q(o), &out, &err), 0) << err;
  EXPECT_EQ(run_cli("plan --seat s=" + q(o) + " --gpu 0=80GiB", &out, &err), 0) << err;
}

// The families laid out by rule (synth_decoder.cc) at a real size: DeepSeek-V3 as published, header-only, is the
// 671B + 14B MTP checkpoint inspect, doctor and plan read as the release (doctor's only finding: header-only-weights),
// and each rule family's fixture written with values is a checkpoint doctor finds clean.
TEST(SynthConfig, RuleFamiliesAtRealSizeReadAsTheRelease) {
  TempDir t;
  const Json ds = {{"architectures", {"DeepseekV3ForCausalLM"}}, {"model_type", "deepseek_v3"},
                   {"hidden_size", 7168}, {"intermediate_size", 18432}, {"moe_intermediate_size", 2048},
                   {"num_hidden_layers", 61}, {"num_attention_heads", 128}, {"num_key_value_heads", 128},
                   {"n_routed_experts", 256}, {"n_shared_experts", 1}, {"num_experts_per_tok", 8},
                   {"first_k_dense_replace", 3}, {"q_lora_rank", 1536}, {"kv_lora_rank", 512},
                   {"qk_nope_head_dim", 128}, {"qk_rope_head_dim", 64}, {"v_head_dim", 128}, {"vocab_size", 129280},
                   {"num_nextn_predict_layers", 1}, {"tie_word_embeddings", false},
                   {"max_position_embeddings", 163840},
                   {"quantization_config", {{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}}}};
  std::ofstream(t.path / "ds.json") << ds.dump(2);
  const stdfs::path o = t.path / "ds";
  const Json r = synth_json("--config " + q(t.path / "ds.json") + " --header-only --no-progress --out " + q(o));
  ASSERT_TRUE(r.value("ok", false));
  EXPECT_EQ(r["arch"], "deepseek_v3");
  EXPECT_EQ(r["params"].get<std::uint64_t>(), 684'489'845'504ULL);
  ASSERT_EQ(r["notes"].size(), 1u);
  EXPECT_LT(allocated(o), 64u << 20);
  std::string out, err;
  ASSERT_EQ(run_cli("inspect " + q(o) + " --json", &out, &err), 0) << err;
  EXPECT_EQ(Json::parse(out)["class"]["name"], "moe");
  ASSERT_EQ(run_cli("doctor " + q(o) + " --json", &out, &err), 1) << out << err;
  for (const auto& f : Json::parse(out)["findings"])
    if (f["severity"] == "error" || f["severity"] == "warning") {
      EXPECT_EQ(f["kind"], "header-only-weights") << f.dump();
    }
  ASSERT_EQ(run_cli("plan --seat ds=" + q(o) + ":tp=8,max_model_len=32768 --json", &out, &err), 0) << err;
  const Json plan = Json::parse(out);
  ASSERT_EQ(plan["seats"].size(), 1u);
  EXPECT_NE(plan.dump().find("header-only"), std::string::npos);
  // Each rule family's fixture, written with values from its own config: doctor finds nothing to report as an error.
  for (const char* f : {"mistral", "phi3", "qwen2", "qwen3", "mixtral", "qwen2_moe", "deepseek_v2", "deepseek_v3",
                        "glm4_moe"}) {
    SCOPED_TRACE(f);
    const stdfs::path d = t.path / f;
    const Json w = synth_json("--config " + q(kData + "/" + f + "/config.json") + " --no-progress --out " + q(d));
    EXPECT_EQ(w["arch"], f);
    EXPECT_EQ(run_cli("doctor " + q(d) + " --json", &out, &err), 0) << out << err;
  }
}

}  // namespace
