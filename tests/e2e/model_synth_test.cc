// `fp4forge synth`: every arch at tiny opens and inspects; tiny layouts equal the fixtures'; determinism;
// refusal of a non-empty output directory; plan-level checks for small / 8b geometry (no I/O).
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "fp4forge/safetensors/checkpoint.h"
#include "fp4forge/model/classify.h"
#include "fp4forge/model/synth.h"
#include "fp4forge/util/progress.h"
#include "model_test_util.h"

using namespace fp4forge;
using namespace fp4forge::mtest;

namespace {

Json synth(const std::string& arch, const stdfs::path& out, const std::string& extra = "") {
  std::string o, e;
  const int rc =
      run_cli("synth --arch " + arch + " --size tiny --out " + q(out) + " --json " + extra, &o, &e);
  EXPECT_EQ(rc, 0) << arch << ": " << e;
  return Json::parse(o);
}

std::map<std::string, Json> checkpoint_shapes(const stdfs::path& dir) {
  std::map<std::string, Json> m;
  auto ck = Checkpoint::open(dir);
  EXPECT_TRUE(ck.ok()) << (ck.ok() ? "" : ck.error().describe());
  if (!ck.ok()) return m;
  for (const auto& t : ck->tensors()) {
    EXPECT_EQ(t.info->dtype, DType::BF16) << t.name;
    m[t.name] = Json(t.info->shape);
  }
  return m;
}

std::set<std::string> keys(const std::map<std::string, Json>& m) {
  std::set<std::string> s;
  for (const auto& [k, v] : m) s.insert(k);
  return s;
}

}  // namespace

// --arch as the model_type spells it (qwen3_moe) or in upper case is the same arch (it was refused, issue 55).
TEST(SynthCli, AnArchIsTakenInTheSpellingsOperatorsType) {
  for (const std::string typed : {"qwen3_moe", "QWEN3-MOE"}) {
    TempDir t;
    const Json r = synth(typed, t.path / "out");
    EXPECT_EQ(r["arch"], "qwen3-moe") << typed;
  }
  TempDir t;
  EXPECT_EQ(synth("qwen3-5_dense", t.path / "out")["arch"], "qwen3_5-dense");
}

TEST(SynthCli, TinyLayoutsMatchFixtures) {
  const std::vector<std::pair<std::string, std::string>> pairs = {{"gemma4-moe", "gemma4-moe-mm"},
                                                                  {"gemma4-dense", "gemma4-dense-mm"},
                                                                  {"qwen3_5-dense", "qwen3_5-dense-mm"},
                                                                  {"llama", "llama"}};
  for (const auto& [arch, fx] : pairs) {
    TempDir t;
    const Json r = synth(arch, t.path / "out");
    const auto got = checkpoint_shapes(t.path / "out");
    const auto want = fixture_shapes(fx);
    EXPECT_EQ(name_patterns(keys(got)), name_patterns(keys(want))) << arch;
    // Tiny geometry copies the fixture: exact names and shapes.
    EXPECT_EQ(got, want) << arch;
    EXPECT_EQ(r["tensors"].get<std::size_t>(), want.size());
    EXPECT_GT(r["shards"].size(), 1u) << arch;
    // The config reads back as the same family / geometry as the fixture's.
    const Json cfg = Json::parse(slurp(t.path / "out" / "config.json"));
    const Json fcfg = Json::parse(slurp(kData + "/" + fx + "/config.json"));
    auto mi = read_model_info(cfg);
    auto fi = read_model_info(fcfg);
    ASSERT_TRUE(mi.ok() && fi.ok());
    EXPECT_EQ(mi->family, fi->family);
    EXPECT_EQ(mi->layer_types, fi->layer_types);
    EXPECT_EQ(mi->layer_head_dim, fi->layer_head_dim);
    EXPECT_EQ(mi->layer_kv_heads, fi->layer_kv_heads);
    EXPECT_EQ(mi->tie_word_embeddings, fi->tie_word_embeddings);
    EXPECT_EQ(mi->num_experts, fi->num_experts);
    EXPECT_EQ(stdfs::exists(t.path / "out" / "processor_config.json"),
              stdfs::exists(kData + "/" + fx + "/processor_config.json"));
    EXPECT_TRUE(stdfs::exists(t.path / "out" / "generation_config.json"));
    // The index agrees with the shards and carries total_size.
    const Json idx = Json::parse(slurp(t.path / "out" / "model.safetensors.index.json"));
    EXPECT_EQ(idx["metadata"]["total_size"], r["bytes"]);
    EXPECT_EQ(idx["weight_map"].size(), want.size());
  }
}

TEST(SynthCli, EveryArchInspects) {
  const std::vector<std::pair<std::string, std::string>> archs = {
      {"llama", "dense"},
      {"qwen3-moe", "moe"},
      {"gemma4-dense", "dense+multimodal"},
      {"gemma4-moe", "moe+multimodal"},
      {"qwen3_5-dense", "dense+hybrid+multimodal"},
      {"qwen3_5-moe", "moe+hybrid+multimodal"}};
  for (const auto& [arch, cls] : archs) {
    TempDir t;
    synth(arch, t.path / "o");
    std::string out, err;
    ASSERT_EQ(run_cli("inspect " + q(t.path / "o") + " --json", &out, &err), 0) << arch << err;
    const Json j = Json::parse(out);
    EXPECT_EQ(j["class"]["name"], cls) << arch;
    EXPECT_EQ(j["roles"].contains("other"), false) << arch << j["roles"].dump();
    EXPECT_EQ(j["warnings"].size(), 0u) << arch << j["warnings"].dump();
    if (arch == "qwen3_5-moe") {
      EXPECT_EQ(j["roles"]["router"]["tensors"], 8 * 2);  // mlp.gate + shared_expert_gate per layer
      EXPECT_EQ(j["roles"]["expert_gate_up_fused"]["tensors"], 8);
      EXPECT_EQ(j["roles"]["shared_expert_up"]["tensors"], 8);
      EXPECT_TRUE(j["mtp"]["present"].get<bool>());
      EXPECT_EQ(j["class"]["num_experts"], 8);
    }
    if (arch == "qwen3-moe") {
      EXPECT_EQ(j["roles"]["expert_gate"]["tensors"], 2 * 8);
      EXPECT_EQ(j["roles"]["router"]["tensors"], 2);
      EXPECT_EQ(j["family"], "qwen3_moe");
    }
  }
}

TEST(SynthCli, DeterministicForASeed) {
  TempDir t;
  synth("gemma4-moe", t.path / "a", "--seed 7");
  synth("gemma4-moe", t.path / "b", "--seed 7");
  synth("gemma4-moe", t.path / "c", "--seed 8");
  std::size_t same = 0, differ = 0;
  for (const auto& e : stdfs::directory_iterator(t.path / "a")) {
    const auto name = e.path().filename();
    EXPECT_EQ(slurp(e.path()), slurp(t.path / "b" / name)) << name;
    if (name.extension() == ".safetensors") (slurp(e.path()) == slurp(t.path / "c" / name) ? same : differ)++;
  }
  EXPECT_EQ(same, 0u);
  EXPECT_GT(differ, 1u);
  // Values are normal-ish with std ~0.02.
  auto ck = Checkpoint::open(t.path / "a");
  ASSERT_TRUE(ck.ok());
  const auto* ref = ck->find("model.language_model.layers.0.mlp.gate_proj.weight");
  ASSERT_NE(ref, nullptr);
  const auto bytes = ck->data(*ref);
  double sum = 0, sq = 0;
  const std::size_t n = bytes.size() / 2;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t u =
        (static_cast<std::uint32_t>(std::to_integer<std::uint8_t>(bytes[2 * i + 1])) << 24) |
        (static_cast<std::uint32_t>(std::to_integer<std::uint8_t>(bytes[2 * i])) << 16);
    float f;
    std::memcpy(&f, &u, 4);
    sum += f;
    sq += static_cast<double>(f) * f;
  }
  const double mean = sum / static_cast<double>(n);
  const double sd = std::sqrt(sq / static_cast<double>(n) - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.002);
  EXPECT_NEAR(sd, 0.02, 0.002);
}

TEST(SynthCli, ChunkedValuesEqualWholeTensorValues) {
  std::vector<std::uint16_t> whole(5000), part(1234);
  synth_fill_bf16(3, "x.weight", 0, whole);
  synth_fill_bf16(3, "x.weight", 2000, part);
  EXPECT_TRUE(std::equal(part.begin(), part.end(), whole.begin() + 2000));
  std::vector<std::uint16_t> other(5000);
  synth_fill_bf16(3, "y.weight", 0, other);
  EXPECT_NE(whole, other);
}

TEST(SynthCli, RefusesNonEmptyOutUnlessForced) {
  TempDir t;
  std::string out, err;
  stdfs::create_directories(t.path / "full");
  std::ofstream(t.path / "full" / "keep.txt") << "user data";
  EXPECT_EQ(run_cli("synth --arch llama --out " + q(t.path / "full"), &out, &err), 3);
  EXPECT_NE(err.find("--force"), std::string::npos) << err;
  EXPECT_FALSE(stdfs::exists(t.path / "full" / "config.json"));
  // An empty existing directory is fine.
  stdfs::create_directories(t.path / "empty");
  EXPECT_EQ(run_cli("synth --arch llama --out " + q(t.path / "empty"), &out, &err), 0) << err;
  // --force over a previous synth of another family replaces its checkpoint files, keeps others.
  EXPECT_EQ(run_cli("synth --arch gemma4-moe --out " + q(t.path / "full") + " --force", &out, &err), 0)
      << err;
  EXPECT_EQ(run_cli("synth --arch llama --out " + q(t.path / "full") + " --force", &out, &err), 0) << err;
  EXPECT_TRUE(stdfs::exists(t.path / "full" / "keep.txt"));
  EXPECT_FALSE(stdfs::exists(t.path / "full" / "processor_config.json"));
  EXPECT_EQ(checkpoint_shapes(t.path / "full"), fixture_shapes("llama"));
  // A refusal touches nothing: a folder holding a checkpoint (a copy of the llama fixture) refused without --force,
  // and a usage error with --force, leave every file as it was (a newcomer tryout found the refusal emptied it).
  stdfs::copy(kData + "/llama", t.path / "ckpt", stdfs::copy_options::recursive);
  std::ofstream(t.path / "ckpt" / "notes.txt") << "mine";
  std::map<std::string, std::string> was;
  for (const auto& e : stdfs::directory_iterator(t.path / "ckpt")) was[e.path().filename().string()] = slurp(e.path());
  EXPECT_EQ(run_cli("synth --arch llama --out " + q(t.path / "ckpt"), &out, &err), 3);
  EXPECT_EQ(run_cli("synth --arch nope --force --out " + q(t.path / "ckpt"), &out, &err), 2);
  std::map<std::string, std::string> now;
  for (const auto& e : stdfs::directory_iterator(t.path / "ckpt")) now[e.path().filename().string()] = slurp(e.path());
  EXPECT_EQ(now, was);
  // A file as --out: bad input.
  EXPECT_EQ(run_cli("synth --arch llama --out " + q(t.path / "full" / "keep.txt"), &out, &err), 3);
  // Usage errors.
  EXPECT_EQ(run_cli("synth --arch nope --out " + q(t.path / "x"), &out, &err), 2);
  EXPECT_EQ(run_cli("synth --arch llama --size huge --out " + q(t.path / "x"), &out, &err), 2);
  EXPECT_EQ(run_cli("synth --arch llama", &out, &err), 2);
  EXPECT_FALSE(stdfs::exists(t.path / "x"));
}

TEST(SynthPlan, LargerSizesHaveRealGeometry) {
  auto p = plan_synth("llama", "8b");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->config["hidden_size"], 4096);
  EXPECT_EQ(p->config["num_hidden_layers"], 32);
  EXPECT_EQ(p->config["num_attention_heads"], 32);
  EXPECT_EQ(p->config["num_key_value_heads"], 8);
  EXPECT_EQ(p->config["intermediate_size"], 14336);
  EXPECT_EQ(p->config["vocab_size"], 128256);
  EXPECT_EQ(p->total_params, 8030261248ULL);  // Llama-3-8B
  EXPECT_EQ(p->total_bytes, 2 * 8030261248ULL);
  EXPECT_EQ(p->shards.size(), 4u);  // ~5 GB shards
  for (const char* arch : {"qwen3-moe", "gemma4-dense", "gemma4-moe", "qwen3_5-dense", "qwen3_5-moe"}) {
    auto q8 = plan_synth(arch, "8b");
    ASSERT_TRUE(q8.ok());
    EXPECT_GT(q8->total_params, 6'000'000'000ULL) << arch;
    EXPECT_LT(q8->total_params, 11'000'000'000ULL) << arch;
    auto s = plan_synth(arch, "small");
    ASSERT_TRUE(s.ok());
    EXPECT_GT(s->total_bytes, 50'000'000ULL) << arch;
    EXPECT_LT(s->total_bytes, 400'000'000ULL) << arch;
  }
  auto bad = plan_synth("llama", "9b");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, Errc::USAGE);
}

TEST(SynthProgress, RenderLine) {
  // Half done after 2 s: 50 %, rate = done / s, ETA = remaining / rate.
  const std::string s = Progress::render("synth", 512ull << 20, 1024ull << 20, 1, 4, 2.0, "model-00002", 10);
  EXPECT_EQ(s, "synth [#####.....]  50% 512.0 MiB/1.0 GiB 1/4 256.0 MiB/s ETA 00:02 model-00002");
  const std::string done = Progress::render("synth", 100, 100, 4, 4, 1.0, "", 4);
  EXPECT_EQ(done, "synth [####] 100% 100 B/100 B 4/4 100 B/s ETA 00:00");
  // Not a TTY under ctest: nothing is drawn, but counters still add up.
  Progress p("x", 10, 0, Progress::Mode::NEVER);
  p.add(4);
  p.add(6, 1);
  EXPECT_FALSE(p.enabled());
  EXPECT_EQ(p.bytes_done(), 10u);
  EXPECT_EQ(p.items_done(), 1u);
}

namespace {
// synth reads the registry: every --arch it offers writes a config whose family the registry recognises,
// with an architecture vLLM registers for that family.
TEST(SynthPlan, EveryArchIsARegisteredFamily) {
  for (auto arch : synth_archs()) {
    auto p = plan_synth(arch, "tiny");
    ASSERT_TRUE(p.ok()) << arch;
    const auto cfg = nlohmann::ordered_json::parse(p->config.dump());
    auto info = read_model_info(cfg);
    ASSERT_TRUE(info.ok()) << arch;
    EXPECT_NE(info->family, Family::UNKNOWN) << arch;
    EXPECT_TRUE(vllm_registers(info->architecture)) << arch << ": " << info->architecture;
  }
}
}  // namespace
