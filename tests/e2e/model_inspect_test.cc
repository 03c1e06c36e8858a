// `fp4forge inspect` on every fixture: role counts, class, layers, files, totals; exit codes.
#include <algorithm>
#include <fstream>

#include <gtest/gtest.h>

#include "model_test_util.h"

using namespace fp4forge::mtest;

namespace {

Json inspect_json(const std::string& dir, int* rc = nullptr) {
  std::string out, err;
  const int code = run_cli("inspect " + q(dir) + " --json", &out, &err);
  if (rc) *rc = code;
  EXPECT_EQ(code, 0) << err;
  return Json::parse(out);
}

std::uint64_t role_tensors(const Json& j, const char* role) {
  return j["roles"].contains(role) ? j["roles"][role]["tensors"].get<std::uint64_t>() : 0;
}

/** Totals of a fixture from its index metadata and tensors.json. */
void expect_totals(const Json& j, const std::string& name) {
  const Json idx = Json::parse(slurp(kData + "/" + name + "/model.safetensors.index.json"));
  const Json tl = Json::parse(slurp(kData + "/" + name + ".tensors.json"));
  EXPECT_EQ(j["tensors"]["count"].get<std::size_t>(), tl.size()) << name;
  EXPECT_EQ(j["tensors"]["bytes"], idx["metadata"]["total_size"]) << name;
  // (metadata.total_parameters is transformers' count: it leaves out buffers and the added MTP block.)
  std::uint64_t numel = 0;
  for (const auto& [k, v] : tl.items()) {
    std::uint64_t n = 1;
    for (const auto& d : v[2]) n *= d.get<std::uint64_t>();
    numel += n;
  }
  EXPECT_EQ(j["tensors"]["params"], numel) << name;
  EXPECT_EQ(j["dtypes"]["BF16"]["tensors"].get<std::size_t>(), tl.size()) << name;
  EXPECT_EQ(j["tensors"]["index"], "model.safetensors.index.json");
  std::uint64_t sum = 0;
  for (const auto& [k, v] : j["roles"].items()) sum += v["tensors"].get<std::uint64_t>();
  EXPECT_EQ(sum, tl.size()) << name;
  EXPECT_EQ(j["schema"], "fp4forge.inspect/1");
  EXPECT_EQ(j["quantization"]["state"], "none");
}

}  // namespace

// A header-only synth is said where a folder is first looked at, and a real checkpoint is not (tryout S-L1).
TEST(InspectCli, AHeaderOnlySynthIsSaid) {
  fp4forge::testutil::TempDir t;
  std::string out, err;
  ASSERT_EQ(run_cli("synth --arch llama --size tiny --header-only --no-progress --out " + q(t.path / "h"), &out, &err),
            0)
      << err;
  const Json h = inspect_json((t.path / "h").string());
  bool said = false;
  for (const auto& w : h["warnings"])
    said |=
        w.get<std::string>().find("written by `synth --header-only`: every tensor reads as zeros") != std::string::npos;
  EXPECT_TRUE(said) << h["warnings"].dump();
  for (const auto& w : inspect_json(kData + "/llama")["warnings"])
    EXPECT_EQ(w.get<std::string>().find("header-only"), std::string::npos) << w;
}

// gpt-oss's attention sinks and its fused experts' biases, and the routing bias of DeepSeek-V3-style MoEs, have roles:
// inspect names every tensor of these checkpoints without a "no known role" warning.
TEST(InspectCli, SinksAndBiasesHaveRoles) {
  const Json g = inspect_json(kData + "/gpt_oss");
  expect_totals(g, "gpt_oss");
  EXPECT_EQ(role_tensors(g, "attn_sink"), 2u);
  EXPECT_EQ(role_tensors(g, "expert_proj_bias"), 4u);
  EXPECT_EQ(role_tensors(g, "other"), 0u);
  for (const auto& w : g["warnings"]) EXPECT_EQ(w.get<std::string>().find("no known role"), std::string::npos) << w;
  const Json d = inspect_json(kData + "/deepseek_v3");
  EXPECT_EQ(role_tensors(d, "router_aux"), 1u);
  EXPECT_EQ(role_tensors(d, "other"), 0u);
  for (const auto& w : d["warnings"]) EXPECT_EQ(w.get<std::string>().find("no known role"), std::string::npos) << w;
}

TEST(InspectCli, Gemma4MoeFixture) {
  const Json j = inspect_json(kData + "/gemma4-moe-mm");
  expect_totals(j, "gemma4-moe-mm");
  EXPECT_EQ(j["family"], "gemma4");
  EXPECT_EQ(j["architecture"], "Gemma4ForConditionalGeneration");
  EXPECT_EQ(j["layout"], "wrapper");
  EXPECT_EQ(j["text_prefix"], "model.language_model.");
  EXPECT_EQ(j["class"]["name"], "moe+multimodal");
  EXPECT_EQ(j["class"]["num_experts"], 8);
  EXPECT_EQ(role_tensors(j, "router"), 6u);
  EXPECT_EQ(role_tensors(j, "expert_gate_up_fused"), 6u);
  EXPECT_EQ(role_tensors(j, "expert_down_fused"), 6u);
  EXPECT_EQ(role_tensors(j, "router_aux"), 12u);
  EXPECT_EQ(role_tensors(j, "attn_v"), 5u);
  EXPECT_EQ(role_tensors(j, "lm_head"), 0u);
  EXPECT_EQ(role_tensors(j, "other"), 0u);
  EXPECT_EQ(j["roles"]["expert_gate_up_fused"]["params"], 6 * 8 * 128 * 128);
  EXPECT_EQ(j["layers"]["by_type"]["sliding_attention"], 5);
  EXPECT_EQ(j["layers"]["by_type"]["full_attention"], 1);
  EXPECT_EQ(j["layers"]["in_tensors"], 6);
  EXPECT_EQ(j["geometry"]["global_head_dim"], 64);
  EXPECT_EQ(j["geometry"]["num_global_key_value_heads"], 1);
  EXPECT_TRUE(j["embeddings"]["tied"].get<bool>());
  EXPECT_FALSE(j["embeddings"]["lm_head_present"].get<bool>());
  EXPECT_EQ(j["files"]["processor"], Json::array({"processor_config.json"}));
  EXPECT_EQ(j["files"]["tokenizer"], Json::parse(R"(["chat_template.jinja","tokenizer.json","tokenizer_config.json"])"));
  EXPECT_TRUE(j["files"]["generation_config"].get<bool>());
  EXPECT_FALSE(j["mtp"]["present"].get<bool>());
  EXPECT_EQ(j["tensors"]["shards"], 17);
}

TEST(InspectCli, Gemma4DenseFixture) {
  const Json j = inspect_json(kData + "/gemma4-dense-mm");
  expect_totals(j, "gemma4-dense-mm");
  EXPECT_EQ(j["class"]["name"], "dense+multimodal");
  EXPECT_EQ(role_tensors(j, "attn_q"), 6u);
  EXPECT_EQ(role_tensors(j, "attn_v"), 5u);
  EXPECT_EQ(role_tensors(j, "router"), 0u);
  EXPECT_EQ(role_tensors(j, "projector"), 1u);
  EXPECT_EQ(role_tensors(j, "scalar"), 6u);
  EXPECT_EQ(role_tensors(j, "vision"), 30u);
}

TEST(InspectCli, Qwen35Fixture) {
  const Json j = inspect_json(kData + "/qwen3_5-dense-mm");
  expect_totals(j, "qwen3_5-dense-mm");
  EXPECT_EQ(j["family"], "qwen3_5");
  EXPECT_EQ(j["class"]["name"], "dense+hybrid+multimodal");
  EXPECT_TRUE(j["mtp"]["present"].get<bool>());
  EXPECT_EQ(j["mtp"]["tensors"], 15);
  EXPECT_EQ(j["mtp"]["config_layers"], 1);
  EXPECT_EQ(role_tensors(j, "linear_attn"), 30u);
  EXPECT_EQ(role_tensors(j, "linear_attn_conv"), 6u);
  EXPECT_EQ(role_tensors(j, "linear_attn_param"), 12u);
  EXPECT_EQ(role_tensors(j, "lm_head"), 1u);
  EXPECT_EQ(role_tensors(j, "projector"), 6u);
  EXPECT_EQ(j["layers"]["by_type"]["linear_attention"], 6);
  EXPECT_EQ(j["layers"]["by_type"]["full_attention"], 2);
  EXPECT_FALSE(j["embeddings"]["tied"].get<bool>());
  EXPECT_TRUE(j["embeddings"]["lm_head_present"].get<bool>());
  EXPECT_EQ(j["tensors"]["shards"], 17);
}

TEST(InspectCli, LlamaFixtureAndText) {
  const Json j = inspect_json(kData + "/llama");
  expect_totals(j, "llama");
  EXPECT_EQ(j["family"], "llama");
  EXPECT_EQ(j["layout"], "flat");
  EXPECT_EQ(j["class"]["name"], "dense");
  EXPECT_EQ(j["layers"]["by_type"]["full_attention"], 2);
  EXPECT_EQ(role_tensors(j, "mlp_down"), 2u);
  EXPECT_EQ(j["files"]["processor"], Json::array());
  std::string out, err;
  ASSERT_EQ(run_cli("inspect " + q(kData + "/llama"), &out, &err), 0) << err;
  EXPECT_NE(out.find("LlamaForCausalLM"), std::string::npos);
  EXPECT_NE(out.find("role"), std::string::npos);
  EXPECT_NE(out.find("attn_q"), std::string::npos);
  EXPECT_NE(out.find("lm_head"), std::string::npos);
}

TEST(InspectCli, WarnsOnUnknownFamilyAndMissingMtp) {
  TempDir t;
  for (const auto& e : stdfs::directory_iterator(kData + "/llama"))
    stdfs::copy_file(e.path(), t.path / e.path().filename());
  Json cfg = Json::parse(slurp(t.path / "config.json"));
  cfg["model_type"] = "mystery";
  cfg["architectures"] = Json::array({"MysteryForCausalLM"});
  cfg["mtp_num_hidden_layers"] = 1;
  std::ofstream(t.path / "config.json") << cfg.dump(2);
  const Json j = inspect_json(t.path.string());
  EXPECT_EQ(j["family"], "unknown");
  EXPECT_EQ(role_tensors(j, "attn_q"), 2u);  // generic roles by name
  bool unknown = false, mtp = false;
  for (const auto& w : j["warnings"]) {
    unknown = unknown || w.get<std::string>().find("unknown model family") != std::string::npos;
    mtp = mtp || w.get<std::string>().find("mtp_num_hidden_layers") != std::string::npos;
  }
  EXPECT_TRUE(unknown) << j["warnings"].dump();
  EXPECT_TRUE(mtp) << j["warnings"].dump();
}

TEST(InspectCli, ExitCodes) {
  std::string out, err;
  EXPECT_EQ(run_cli("inspect", &out, &err), 2);
  EXPECT_EQ(run_cli("inspect " + q(kData + "/llama") + " --bogus", &out, &err), 2);
  // A file, not a directory: bad input.
  EXPECT_EQ(run_cli("inspect " + q(kData + "/llama.tensors.json"), &out, &err), 3);
  // Missing directory: I/O.
  EXPECT_EQ(run_cli("inspect /nonexistent/fp4forge-model-test --json", &out, &err), 4);
  const Json e = Json::parse(out);
  EXPECT_FALSE(e["ok"].get<bool>());
  EXPECT_EQ(e["error"]["exit_code"], 4);
  // Corrupt shard: truncated data section -> bad input, one-line error naming the shard.
  TempDir t;
  for (const auto& f : stdfs::directory_iterator(kData + "/llama"))
    stdfs::copy_file(f.path(), t.path / f.path().filename());
  stdfs::resize_file(t.path / "model-00002-of-00004.safetensors", 1000);
  EXPECT_EQ(run_cli("inspect " + q(t.path), &out, &err), 3);
  EXPECT_NE(err.find("model-00002-of-00004.safetensors"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  // Corrupt config.json -> bad input.
  TempDir c;
  for (const auto& f : stdfs::directory_iterator(kData + "/llama"))
    stdfs::copy_file(f.path(), c.path / f.path().filename());
  std::ofstream(c.path / "config.json") << "{\"text_config\": 5}";
  EXPECT_EQ(run_cli("inspect " + q(c.path), &out, &err), 3) << err;
  // Unreadable shard (only meaningful when not root).
  if (::geteuid() != 0) {
    TempDir u;
    for (const auto& f : stdfs::directory_iterator(kData + "/llama"))
      stdfs::copy_file(f.path(), u.path / f.path().filename());
    stdfs::permissions(u.path / "model-00001-of-00004.safetensors", stdfs::perms::none);
    EXPECT_EQ(run_cli("inspect " + q(u.path), &out, &err), 4) << err;
  }
}

TEST(InspectCli, ListsTheRegistryFamilies) {
  std::string out, err;
  ASSERT_EQ(run_cli("inspect --families --json", &out, &err), 0) << err;
  const Json j = Json::parse(out);
  ASSERT_TRUE(j["ok"].get<bool>());
  std::vector<std::string> ids;
  for (const auto& f : j["families"]) ids.push_back(f["id"].get<std::string>());
  for (const char* id : {"llama", "deepseek_v3", "llama4", "gpt_oss", "granitemoehybrid", "qwen3_vl_moe", "mistral3"})
    EXPECT_NE(std::find(ids.begin(), ids.end(), id), ids.end()) << id;
  for (const auto& f : j["families"])
    if (f["id"] == "gpt_oss") {
      EXPECT_FALSE(f["experts_quantizable"].get<bool>());
    }
  ASSERT_EQ(run_cli("inspect --families", &out, &err), 0) << err;
  EXPECT_NE(out.find("Llama4ForConditionalGeneration"), std::string::npos);
  // Without DIR and without --families: a usage error.
  EXPECT_EQ(run_cli("inspect", &out, &err), 2);
}

namespace {
// Issue 15: one compressed-tensors reader. A W4A16 quantization_config is named "W4A16" by inspect,
// verify and diff alike (verify used to say "WNA16"), FP8 dynamic "FP8_DYNAMIC" and NVFP4A16 "NVFP4A16".
TEST(ModelInspect, SchemeNamesAgreeAcrossCommands) {
  TempDir t;
  std::string out, err;
  ASSERT_EQ(run_cli("quantize " + q(kData + "/llama") + " " + q(t.path / "nv"), &out, &err), 0) << err;
  const Json nv = inspect_json((t.path / "nv").string());
  EXPECT_EQ(nv["quantization"]["groups"][0]["scheme"], "NVFP4A16");
  struct Case {
    const char* name;
    Json weights, input;
    const char* format;
  };
  const Case cases[] = {
      {"W4A16",
       {{"num_bits", 4}, {"type", "int"}, {"strategy", "group"}, {"group_size", 128}, {"symmetric", true},
        {"dynamic", false}},
       nullptr, "pack-quantized"},
      {"FP8_DYNAMIC",
       {{"num_bits", 8}, {"type", "float"}, {"strategy", "channel"}, {"symmetric", true}, {"dynamic", false}},
       {{"num_bits", 8}, {"type", "float"}, {"strategy", "token"}, {"symmetric", true}, {"dynamic", true}},
       "float-quantized"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const auto dir = t.path / c.name;
    std::filesystem::copy(t.path / "nv", dir);
    Json cfg = Json::parse(slurp(dir / "config.json"));
    Json& g = cfg["quantization_config"]["config_groups"]["group_0"];
    g["weights"] = c.weights;
    g["input_activations"] = c.input;
    g["format"] = c.format;
    cfg["quantization_config"]["format"] = c.format;
    std::ofstream(dir / "config.json", std::ios::trunc) << cfg.dump(2);
    const Json ij = inspect_json(dir.string());
    EXPECT_EQ(ij["quantization"]["groups"][0]["scheme"], c.name);
    EXPECT_EQ(run_cli("verify " + q(dir) + " --json", &out, &err), 1) << err;  // not NVFP4A16: refused
    const Json vj = Json::parse(out);
    EXPECT_EQ(vj["scheme"], c.name) << out.substr(0, 300);
    run_cli("diff " + q(dir) + " " + q(t.path / "nv") + " --json", &out, &err);
    EXPECT_NE(out.find(std::string("\"") + c.name + " ("), std::string::npos) << out.substr(0, 600);
  }
}
}  // namespace

namespace {
// Issue 29: scales, global scales and weight_shape are quantization metadata, not parameters: a quantized
// checkpoint has the parameter count of its source, under every scheme.
TEST(Inspect, QuantizedOutputCountsTheSourceParameters) {
  TempDir t;
  const Json src = inspect_json(kData + "/llama");
  for (const char* scheme : {"nvfp4a16", "w4a16", "fp8-block", "mxfp4a16"}) {
    SCOPED_TRACE(scheme);
    const auto dst = t.path / scheme;
    std::string out, err;
    ASSERT_EQ(run_cli("quantize " + q(kData + "/llama") + " " + q(dst) + " --scheme " + scheme + " --observer minmax",
                      &out, &err),
              0)
        << err;
    EXPECT_EQ(inspect_json(dst.string())["tensors"]["params"], src["tensors"]["params"]);
  }
}
}  // namespace

namespace {
// Issue 29: diff compares structure; two quantizations of different weights are IDENTICAL to it and the result
// says the values were not compared. --values compares every tensor's bytes and finds them.
TEST(DiffCli, ValuesComparesBytesWhenAsked) {
  TempDir t;
  const auto a = t.path / "a", b = t.path / "b", src2 = t.path / "src2";
  std::string out, err;
  ASSERT_EQ(run_cli("synth --arch llama --size tiny --seed 1 --out " + q(src2), &out, &err), 0) << err;
  const auto src1 = t.path / "src1";
  ASSERT_EQ(run_cli("synth --arch llama --size tiny --seed 2 --out " + q(src1), &out, &err), 0) << err;
  ASSERT_EQ(run_cli("quantize " + q(src1) + " " + q(a) + " --observer minmax", &out, &err), 0) << err;
  ASSERT_EQ(run_cli("quantize " + q(src2) + " " + q(b) + " --observer minmax", &out, &err), 0) << err;
  EXPECT_EQ(run_cli("diff " + q(a) + " " + q(b), &out, &err), 0) << err;
  EXPECT_NE(out.find("tensor values not compared: --values compares them"), std::string::npos) << out;
  EXPECT_EQ(run_cli("diff " + q(a) + " " + q(b) + " --values --json", &out, &err), 1) << err;
  const Json j = Json::parse(out);
  EXPECT_FALSE(j["identical"].get<bool>());
  EXPECT_GT(j["values"]["differ"].get<int>(), 0);
  bool item = false;
  for (const auto& i : j["items"])
    if (i["area"] == "values") {
      item = true;
      EXPECT_NE(i["a"].get<std::string>().find(" at byte "), std::string::npos) << i.dump();
      EXPECT_EQ(i["b"], "") << i.dump();
    }
  EXPECT_TRUE(item);
  // One text line per family, naming the first differing byte (issue 55 tryout J: "B: (the other side)").
  EXPECT_EQ(run_cli("diff " + q(a) + " " + q(b) + " --values", &out, &err), 1) << err;
  EXPECT_NE(out.find("  model.layers.*.mlp.down_proj.weight_packed: 2 of 2 tensors' bytes differ (first: "
                     "model.layers.0.mlp.down_proj.weight_packed at byte "),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("(the other side)"), std::string::npos) << out;
  EXPECT_EQ(run_cli("diff " + q(a) + " " + q(a) + " --values", &out, &err), 0) << err;
  EXPECT_NE(out.find("IDENTICAL (structure, config, files and every tensor's bytes)"), std::string::npos) << out;
}
// Issue 30: inspect counts the modules vLLM gives each config group (its own matching: names before the Linear
// class), and warns about quantized modules no group selects.
// A quant_method fp8 release has no config groups: vLLM loads it by its own method, so no module is "uncovered"
// (issue 55 tryout L: "vLLM has no scheme to load them with" on Qwen3-FP8's layout).
TEST(InspectCli, AnFp8ReleaseIsNoUncoveredModules) {
  std::string out, err;
  ASSERT_EQ(run_cli("inspect " + q(kData + "/fp8/native-qwen3") + " --json", &out, &err), 0) << err;
  const Json j = Json::parse(out);
  EXPECT_EQ(j["quantization"]["uncovered_modules"], 0) << out;
  EXPECT_EQ(out.find("match no config group's targets"), std::string::npos) << out;
}

// gpt-oss's MXFP4 release: a U8 `*_blocks` byte is two E2M1 weights, `*_scales` are exponents (tryout L-L5: one
// parameter per byte). The fixture's experts: 2 layers x 4 x (128 x 96 + 96 x 64) = 147,456 weights.
TEST(InspectCli, AnMxfp4ReleaseCountsTwoWeightsPerByte) {
  std::string out, err;
  ASSERT_EQ(run_cli("inspect " + q(kData + "/mxfp4/gpt_oss-mxfp4") + " --json", &out, &err), 0) << err;
  const Json j = Json::parse(out);
  EXPECT_EQ(j["roles"]["other"]["params"], 147456u) << j["roles"].dump();
  EXPECT_EQ(j["roles"]["other"]["bytes"], 78336u) << j["roles"].dump();
}

TEST(InspectCli, ConfigGroupsCountTheirModules) {
  TempDir t;
  const auto q1 = t.path / "q";
  std::string out, err;
  ASSERT_EQ(run_cli("quantize " + q(kData + "/llama") + " " + q(q1), &out, &err), 0) << err;
  Json j = inspect_json(q1.string());
  const auto total = j["quantization"]["quantized_modules"].get<std::uint64_t>();
  ASSERT_GT(total, 0u);
  EXPECT_EQ(j["quantization"]["groups"][0]["modules"], total) << "one Linear group selects every module";
  EXPECT_EQ(j["quantization"]["uncovered_modules"], 0);
  // Two groups of the same scheme: attention by name, the rest through Linear.
  Json c = Json::parse(slurp(q1 / "config.json"));
  Json& groups = c["quantization_config"]["config_groups"];
  groups["attn"] = groups["group_0"];
  groups["attn"]["targets"] = Json::array({"re:.*self_attn\\."});
  std::ofstream(q1 / "config.json", std::ios::trunc) << c.dump(2) << "\n";
  j = inspect_json(q1.string());
  std::uint64_t attn = 0;  // the quantized attention projections, from the index
  const Json index = Json::parse(slurp(q1 / "model.safetensors.index.json"));  // bound: items() of a temporary dangles
  for (const auto& [name, shard] : index["weight_map"].items())
    if (name.find("self_attn.") != std::string::npos && name.ends_with(".weight_packed")) ++attn;
  ASSERT_GT(attn, 0u);
  const Json& g = j["quantization"]["groups"];
  ASSERT_EQ(g.size(), 2u);
  EXPECT_EQ(g[0]["name"], "group_0");
  EXPECT_EQ(g[1]["name"], "attn");
  EXPECT_EQ(g[1]["modules"], attn) << j["quantization"].dump();
  EXPECT_EQ(g[0]["modules"].get<std::uint64_t>() + g[1]["modules"].get<std::uint64_t>(), total);
  // No Linear target: the MLP modules are selected by nothing.
  groups.erase("group_0");
  std::ofstream(q1 / "config.json", std::ios::trunc) << c.dump(2) << "\n";
  j = inspect_json(q1.string());
  EXPECT_EQ(j["quantization"]["uncovered_modules"], total - attn);
  bool warned = false;
  for (const auto& w : j["warnings"]) warned = warned || w.get<std::string>().find("match no config group") != std::string::npos;
  EXPECT_TRUE(warned) << j["warnings"].dump();
}


// A low-bit source counts its weights as their expansion (a packed FP4 byte holds two values) and its scales as none:
// every FP8 / FP4 source fixture has the parameters of its bf16 expansion.
TEST(Inspect, LowBitSourcesCountTheParamsOfTheirExpansion) {
  std::size_t seen = 0;
  for (const auto& e : std::filesystem::directory_iterator(kData + "/fp8")) {
    const std::string n = e.path().filename().string();
    if (!e.is_directory() || n.ends_with(".bf16") || !std::filesystem::exists(e.path().string() + ".bf16")) continue;
    SCOPED_TRACE(n);
    EXPECT_EQ(inspect_json(e.path().string())["tensors"]["params"],
              inspect_json(e.path().string() + ".bf16")["tensors"]["params"]);
    ++seen;
  }
  EXPECT_GE(seen, 8u);
}

}  // namespace
