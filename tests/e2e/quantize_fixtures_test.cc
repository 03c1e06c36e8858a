// `fp4forge quantize` end to end on every fixture: inventory, fused global scales, error bound, passthrough
// bytes, reference order, index, config, ignore coverage, determinism across -j / --max-memory, R4.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fp4forge/safetensors/checkpoint.h"
#include "fp4forge/codec/half.h"
#include "fp4forge/codec/nvfp4.h"
#include "fp4forge/codec/scheme.h"
#include "fp4forge/model/quant_config.h"
#include "fp4forge/quantize/plan.h"
#include "fp4forge/quantize/run.h"
#include "quantize_test_util.h"

namespace fp4forge::quant {
namespace {

using namespace fp4forge::qtest;
using ::testing::HasSubstr;

const char* kFixtures[] = {"llama", "gemma4-dense-mm", "gemma4-moe-mm", "qwen3_5-dense-mm"};

float src_value(const std::byte* p, DType t, std::uint64_t i) {
  if (t == DType::BF16) {
    std::uint16_t b;
    std::memcpy(&b, p + 2 * i, 2);
    return half::bf16_to_float(b);
  }
  if (t == DType::F16) {
    std::uint16_t b;
    std::memcpy(&b, p + 2 * i, 2);
    return half::f16_to_float(b);
  }
  float f;
  std::memcpy(&f, p + 4 * i, 4);
  return f;
}

class QuantizeFixture : public ::testing::TestWithParam<const char*> {};

TEST_P(QuantizeFixture, OutputIsCompleteCorrectAndDeterministic) {
  const std::string fx = GetParam();
  const stdfs::path src = kData + "/" + fx;
  const auto before = dir_contents(src);
  TempDir tmp;
  const stdfs::path dst = tmp.path / "out";
  std::string out, err;
  // Min-max: every value within half the widest E2M1 step of its group (a searched observer clips on purpose,
  // quantize_observer_test and the all-fixture tests prove its bytes and its lower error instead).
  ASSERT_EQ(run_cli("quantize " + q(src) + " " + q(dst) + " --observer minmax -j 2 --json", &out, &err), 0) << err;
  const auto summary = nlohmann::json::parse(out);
  EXPECT_EQ(summary["observer"], "minmax");
  EXPECT_TRUE(summary["ok"].get<bool>());
  EXPECT_GT(summary["quantized_weights"].get<int>(), 0);
  EXPECT_GT(summary["peak_rss_bytes"].get<std::uint64_t>(), 0u);
  EXPECT_FALSE(stdfs::exists(staging_path(dst)));

  auto sck = Checkpoint::open(src);
  ASSERT_TRUE(sck.ok());
  auto plan = make_plan(*sck, {});
  ASSERT_TRUE(plan.ok());
  auto ock = Checkpoint::open(dst);  // validates the index against the shards
  ASSERT_TRUE(ock.ok()) << ock.error().message;
  EXPECT_EQ(ock->shard_names(), sck->shard_names());

  // Inventory: every source tensor is either copied bit for bit or replaced by its three NVFP4 tensors.
  std::set<std::string> expected;
  for (const auto& d : plan->decisions) {
    SCOPED_TRACE(d.name);
    if (d.action == Action::KEEP) {
      expected.insert(d.name);
      const TensorRef* o = ock->find(d.name);
      ASSERT_NE(o, nullptr);
      EXPECT_EQ(o->info->dtype, d.dtype);
      EXPECT_EQ(o->info->shape, d.shape);
      EXPECT_EQ(sck->shard_names()[d.shard], ock->shard_names()[o->shard]);
      const auto a = sck->data(*sck->find(d.name));
      const auto b = ock->data(*o);
      ASSERT_EQ(a.size(), b.size());
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size()), 0) << "passthrough bytes differ";
    } else {
      EXPECT_EQ(ock->find(d.name), nullptr);
    }
  }
  for (const auto& u : plan->units) {
    SCOPED_TRACE(u.module);
    const TensorRef* pk = ock->find(u.module + ".weight_packed");
    const TensorRef* sc = ock->find(u.module + ".weight_scale");
    const TensorRef* gs = ock->find(u.module + ".weight_global_scale");
    ASSERT_TRUE(pk && sc && gs);
    expected.insert({pk->name, sc->name, gs->name});
    EXPECT_EQ(pk->info->dtype, DType::U8);
    EXPECT_EQ(pk->info->shape, (std::vector<std::uint64_t>{u.rows, u.cols / 2}));
    EXPECT_EQ(sc->info->dtype, DType::F8_E4M3);
    EXPECT_EQ(sc->info->shape, (std::vector<std::uint64_t>{u.rows, u.cols / 16}));
    EXPECT_EQ(gs->info->dtype, DType::F32);
    EXPECT_EQ(gs->info->shape, (std::vector<std::uint64_t>{1}));
    EXPECT_EQ(ock->shard_names()[pk->shard], sck->shard_names()[u.shard]);
    // Dequantized values within the FP4 error bound (half the widest E2M1 step, or the 6.0 clamp).
    float g;
    std::memcpy(&g, ock->data(*gs).data(), 4);
    ASSERT_TRUE(std::isfinite(g) && g > 0);
    std::vector<float> deq(u.rows * u.cols);
    nvfp4::decode_rows(ock->data(*pk).data(), ock->data(*sc).data(), g, u.rows, u.cols, deq.data());
    std::vector<std::byte> src_rows(u.rows * u.cols * (dtype_bits(u.dtype) / 8));
    gather_rows(sck->data(*sck->find(plan->decisions[u.decision].name)).data(), dtype_bits(u.dtype) / 8, u.slice, 0,
                u.rows, src_rows.data());
    const std::byte* w = src_rows.data();
    const auto scales = ock->data(*sc);
    std::size_t bad = 0;
    for (std::uint64_t r = 0; r < u.rows; ++r)
      for (std::uint64_t c = 0; c < u.cols; ++c) {
        const std::uint8_t code = static_cast<std::uint8_t>(scales[r * (u.cols / 16) + c / 16]);
        EXPECT_NE(code & 0x7F, 0x7F);  // never an FP8 NaN scale
        const float eff = nvfp4::e4m3_to_float(code) / g;
        const float x = src_value(w, u.dtype, r * u.cols + c);
        if (std::fabs(x - deq[r * u.cols + c]) > eff * 1.0f + 1e-6f * std::fabs(x)) ++bad;
      }
    EXPECT_EQ(bad, 0u);
  }
  std::set<std::string> got;
  for (const auto& t : ock->tensors()) got.insert(t.name);
  EXPECT_EQ(got, expected);

  // Fused sets share one bit-identical global scale (R1); q/k/v and gate/up checked by name too.
  auto gs_bits = [&](const std::string& module) {
    const TensorRef* t = ock->find(module + ".weight_global_scale");
    EXPECT_NE(t, nullptr) << module;
    std::uint32_t b = 0;
    if (t) std::memcpy(&b, ock->data(*t).data(), 4);
    return b;
  };
  std::size_t fused = 0;
  for (const auto& g : plan->groups) {
    if (g.units.size() < 2) continue;
    ++fused;
    for (auto u : g.units) EXPECT_EQ(gs_bits(plan->units[u].module), gs_bits(plan->units[g.units[0]].module)) << g.name;
  }
  EXPECT_GT(fused, 0u);
  for (const auto& t : sck->tensors()) {
    const std::string n = t.name;
    const auto pos = n.find(".self_attn.q_proj.weight");
    if (pos == std::string::npos || !ock->find(n.substr(0, pos) + ".self_attn.q_proj.weight_packed")) continue;
    const std::string a = n.substr(0, pos) + ".self_attn";
    EXPECT_EQ(gs_bits(a + ".q_proj"), gs_bits(a + ".k_proj")) << a;
  }

  // Header order is the reference writer's: dtype rank, then name.
  for (std::size_t s = 0; s < ock->shards().size(); ++s) {
    const auto& ts = ock->shards()[s].header().tensors;
    for (std::size_t i = 1; i < ts.size(); ++i)
      EXPECT_TRUE(dtype_write_rank(ts[i - 1].dtype) < dtype_write_rank(ts[i].dtype) ||
                  (ts[i - 1].dtype == ts[i].dtype && ts[i - 1].name < ts[i].name))
          << ts[i - 1].name << " / " << ts[i].name;
  }

  // Index: total_size; config: source keys kept + quantization_config whose ignore covers every 2-D weight.
  const auto idx = nlohmann::json::parse(slurp(dst / "model.safetensors.index.json"));
  EXPECT_EQ(idx["metadata"]["total_size"].get<std::uint64_t>(), ock->total_tensor_bytes());
  const auto cfg = nlohmann::ordered_json::parse(slurp(dst / "config.json"));
  for (const auto& [k, v] : sck->config().items()) EXPECT_EQ(cfg[k], v) << k;
  const auto& qc = cfg["quantization_config"];
  EXPECT_EQ(qc["quant_method"], "compressed-tensors");
  EXPECT_EQ(qc["format"], "nvfp4-pack-quantized");
  EXPECT_TRUE(qc["config_groups"].contains("group_0"));
  EXPECT_TRUE(qc["config_groups"]["group_0"]["input_activations"].is_null());
  std::set<std::string> ign;
  for (const auto& e : qc["ignore"]) {
    EXPECT_EQ(e.get<std::string>().rfind("re:", 0), std::string::npos);
    ign.insert(e.get<std::string>());
  }
  for (const auto& t : ock->tensors()) {
    const std::string& n = t.name;
    if (n.size() > 7 && n.substr(n.size() - 7) == ".weight" && t.info->shape.size() == 2) {
      EXPECT_EQ(ign.count(n.substr(0, n.size() - 7)), 1u) << n << " unquantized but not in ignore";
    }
    if (n.find(".weight_packed") != std::string::npos) {
      EXPECT_EQ(ign.count(n.substr(0, n.find(".weight_packed"))), 0u) << n;
    }
  }

  // Other files copied byte for byte; source untouched.
  for (const auto& f : sck->other_files())
    if (f != "config.json") {
      EXPECT_EQ(slurp(src / f), slurp(dst / f)) << f;
    }
  EXPECT_EQ(dir_contents(src), before);

  // Determinism: -j 1 and a tiny --max-memory (row ranges for every set) give identical bytes.
  const stdfs::path dst1 = tmp.path / "j1", dst2 = tmp.path / "tiny";
  ASSERT_EQ(run_cli("quantize " + q(src) + " " + q(dst1) + " --observer minmax -j 1", nullptr, &err), 0) << err;
  ASSERT_EQ(run_cli("quantize " + q(src) + " " + q(dst2) + " --observer minmax -j 2 --max-memory 8K --json", &out, &err), 0) << err;
  EXPECT_LE(nlohmann::json::parse(out)["peak_inflight_bytes"].get<std::uint64_t>(), 8192u);
  const auto ref = dir_contents(dst);
  EXPECT_TRUE(ref == dir_contents(dst1));
  EXPECT_TRUE(ref == dir_contents(dst2));
}

INSTANTIATE_TEST_SUITE_P(AllFixtures, QuantizeFixture, ::testing::ValuesIn(kFixtures),
                         [](const auto& pinfo) { return testutil::test_name(pinfo.param); });

// Every other scheme, end to end: each quantized Linear's tensors are byte for byte what the scheme's
// reference encoder makes of the source slice (codec/scheme.h encode_linear), everything kept is copied bit for
// bit, the config is the preset's, and row-range tasks (a tiny --max-memory: FP8_BLOCK in 128-row blocks) give
// the same bytes as whole-tensor tasks.
struct SchemeCase {
  const char* fixture;
  QuantScheme scheme;
};

class QuantizeScheme : public ::testing::TestWithParam<SchemeCase> {};

TEST_P(QuantizeScheme, TensorsAreTheReferenceEncodersBytes) {
  const auto [fx, scheme] = GetParam();
  const stdfs::path src = kData + "/" + fx;
  TempDir tmp;
  const stdfs::path dst = tmp.path / "out", tiny = tmp.path / "tiny";
  const std::string name(quant_scheme_name(scheme));
  std::string out, err;
  ASSERT_EQ(run_cli("quantize " + q(src) + " " + q(dst) + " --scheme " + name + " -j 2 --json", &out, &err), 0) << err;
  EXPECT_EQ(nlohmann::json::parse(out)["scheme"], name);
  ASSERT_EQ(run_cli("quantize " + q(src) + " " + q(tiny) + " --scheme " + name + " -j 2 --max-memory 8K", nullptr, &err),
            0)
      << err;
  EXPECT_TRUE(dir_contents(dst) == dir_contents(tiny)) << "row-range tasks changed the bytes";

  auto sck = Checkpoint::open(src);
  ASSERT_TRUE(sck.ok());
  PlanOptions po;
  po.scheme = scheme;
  auto plan = make_plan(*sck, po);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  auto ock = Checkpoint::open(dst);
  ASSERT_TRUE(ock.ok()) << ock.error().message;
  std::set<std::string> expected;
  for (const auto& d : plan->decisions) {
    if (d.action != Action::KEEP) continue;
    SCOPED_TRACE(d.name);
    expected.insert(d.name);
    const TensorRef* o = ock->find(d.name);
    ASSERT_NE(o, nullptr);
    const auto a = sck->data(*sck->find(d.name));
    const auto b = ock->data(*o);
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size()), 0) << "passthrough bytes differ";
  }
  for (const auto& u : plan->units) {
    SCOPED_TRACE(u.module);
    const std::size_t es = dtype_bits(u.dtype) / 8;
    std::vector<std::byte> rows(u.rows * u.cols * es);
    gather_rows(sck->data(*sck->find(plan->decisions[u.decision].name)).data(), es, u.slice, 0, u.rows, rows.data());
    auto want = encode_linear(scheme, {rows.data(), u.dtype, u.rows, u.cols}, u.module);
    ASSERT_TRUE(want.ok()) << want.error().message;
    for (const EncodedTensor& t : *want) {
      const std::string tn = u.module + "." + t.suffix;
      expected.insert(tn);
      const TensorRef* o = ock->find(tn);
      ASSERT_NE(o, nullptr) << tn;
      EXPECT_EQ(o->info->dtype, t.dtype) << tn;
      EXPECT_EQ(o->info->shape, t.shape) << tn;
      const auto got = ock->data(*o);
      ASSERT_EQ(got.size(), t.bytes.size()) << tn;
      EXPECT_EQ(std::memcmp(got.data(), t.bytes.data(), got.size()), 0) << tn << ": bytes differ from encode_linear";
    }
  }
  std::set<std::string> got;
  for (const auto& t : ock->tensors()) got.insert(t.name);
  EXPECT_EQ(got, expected);
  const auto cfg = nlohmann::ordered_json::parse(slurp(dst / "config.json"));
  EXPECT_EQ(cfg["quantization_config"], ct_quant_config(scheme, plan->ignore));
  // inspect names the scheme and counts the quantized modules.
  ASSERT_EQ(run_cli("inspect " + q(dst) + " --json", &out, &err), 0) << err;
  const auto ins = nlohmann::json::parse(out)["quantization"];
  EXPECT_EQ(ins["groups"][0]["scheme"], quant_scheme_preset(scheme));
  EXPECT_EQ(ins["quantized_modules"].get<std::size_t>(), plan->units.size());
}

const SchemeCase kSchemeCases[] = {
    {"llama", QuantScheme::MXFP4A16},         {"llama", QuantScheme::FP8_DYNAMIC},
    {"llama", QuantScheme::FP8_BLOCK},        {"llama", QuantScheme::W4A16},
    {"qwen3_next", QuantScheme::MXFP4A16},    {"qwen3_next", QuantScheme::FP8_DYNAMIC},
    {"gemma4-moe-mm", QuantScheme::MXFP4A16},
    {"gemma4-moe-mm", QuantScheme::FP8_DYNAMIC}, {"gemma4-moe-mm", QuantScheme::W4A16},
    {"qwen3_5-dense-mm", QuantScheme::FP8_BLOCK}, {"qwen3_5-dense-mm", QuantScheme::W4A16},
    {"deepseek_v3", QuantScheme::FP8_DYNAMIC}, {"mixtral", QuantScheme::MXFP4A16},
    {"granitemoehybrid", QuantScheme::FP8_DYNAMIC}, {"qwen3_vl_moe", QuantScheme::MXFP4A16},
    // The -wide fixtures: widths that are multiples of 128, so W4A16 and FP8_BLOCK quantize experts, shared
    // experts and (at 8 bits) GatedDeltaNet projections, and keep the 192-row k/v and in_proj_qkv by their N rule.
    {"qwen3_moe-wide", QuantScheme::FP8_BLOCK}, {"qwen3_moe-wide", QuantScheme::W4A16},
    {"qwen3_5-moe-mm-wide", QuantScheme::FP8_BLOCK}, {"qwen3_5-moe-mm-wide", QuantScheme::W4A16},
    {"qwen3_5-moe-mm-wide", QuantScheme::FP8_DYNAMIC}, {"qwen3_5-moe-mm-wide", QuantScheme::MXFP4A16},
};

INSTANTIATE_TEST_SUITE_P(Schemes, QuantizeScheme, ::testing::ValuesIn(kSchemeCases), [](const auto& pinfo) {
  return testutil::test_name(std::string(pinfo.param.fixture) + "_" + std::string(quant_scheme_name(pinfo.param.scheme)));
});

/** Writes a bf16 NaN over element `elem` of tensor `name` in the checkpoint at `src`. */
void poison_bf16(const stdfs::path& src, const std::string& name, std::uint64_t elem) {
  stdfs::path shard;
  std::uint64_t off = 0;
  {
    auto ck = Checkpoint::open(src);
    ASSERT_TRUE(ck.ok());
    const TensorRef* t = ck->find(name);
    ASSERT_NE(t, nullptr);
    shard = src / ck->shard_names()[t->shard];
    off = ck->shards()[t->shard].header().data_start() + t->info->begin + elem * 2;
  }
  std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(off));
  const unsigned char nan[2] = {0xC0, 0x7F};
  f.write(reinterpret_cast<const char*>(nan), 2);
}

// A NaN in a tensor quantize keeps (a norm) stops the run as one in a quantized weight does: the output would
// carry it, and verify rejects it (issue 55 tryout K: exit 0, then verify and doctor failed the output).
TEST(QuantizeE2E, NanInAKeptTensorFailsNamingTheTensorAndLeavesNothing) {
  TempDir tmp;
  const stdfs::path src = tmp.path / "src";
  copy_dir(kData + "/llama", src);
  const std::string name = "model.layers.0.input_layernorm.weight";
  poison_bf16(src, name, 3);
  const stdfs::path dst = tmp.path / "out";
  std::string out, err;
  EXPECT_EQ(run_cli("quantize " + q(src) + " " + q(dst) + " --json", &out, &err), 3) << err;
  EXPECT_THAT(err, HasSubstr(name));
  EXPECT_THAT(err, HasSubstr("non-finite value (NaN or Inf) at element 3"));
  EXPECT_FALSE(stdfs::exists(dst));
  EXPECT_FALSE(stdfs::exists(staging_path(dst)));
  for (const char* scheme : {"fp8-dynamic", "w4a16"}) {
    EXPECT_EQ(run_cli("quantize " + q(src) + " " + q(dst) + " --scheme " + scheme, &out, &err), 3) << scheme << err;
    EXPECT_FALSE(stdfs::exists(dst)) << scheme;
  }
}

TEST(QuantizeE2E, NanInAWeightFailsNamingTheTensorAndLeavesNothing) {
  TempDir tmp;
  const stdfs::path src = tmp.path / "src";
  copy_dir(kData + "/llama", src);
  // Poison one element of model.layers.1.mlp.up_proj.weight (row 3, column 5) with a bf16 NaN.
  const std::string name = "model.layers.1.mlp.up_proj.weight";
  poison_bf16(src, name, 3 * 128 + 5);
  const stdfs::path dst = tmp.path / "out";
  std::string out, err;
  EXPECT_EQ(run_cli("quantize " + q(src) + " " + q(dst) + " --json", &out, &err), 3);
  EXPECT_THAT(err, HasSubstr(name));
  EXPECT_THAT(err, HasSubstr("row 3, column 5"));
  EXPECT_FALSE(stdfs::exists(dst));
  EXPECT_FALSE(stdfs::exists(staging_path(dst)));
  const auto j = nlohmann::json::parse(out);
  EXPECT_FALSE(j["ok"].get<bool>());
  EXPECT_EQ(j["error"]["exit_code"], 3);
}

TEST(QuantizeE2E, DryRunWritesNothingAndPrintsThePlan) {
  TempDir tmp;
  const stdfs::path dst = tmp.path / "out";
  std::string out, err;
  ASSERT_EQ(run_cli("quantize " + q(kData + "/gemma4-moe-mm") + " " + q(dst) + " --dry-run", &out, &err), 0) << err;
  EXPECT_THAT(out, HasSubstr("144 expert Linears quantized"));
  EXPECT_THAT(out, HasSubstr("6 routers kept"));
  EXPECT_THAT(out, HasSubstr("router/gate: never quantized"));
  EXPECT_FALSE(stdfs::exists(dst));
  EXPECT_FALSE(stdfs::exists(staging_path(dst)));
  ASSERT_EQ(run_cli("quantize " + q(kData + "/llama") + " --dry-run --json", &out, &err), 0) << err;
  const auto j = nlohmann::json::parse(out);
  EXPECT_TRUE(j["dry_run"].get<bool>());
  EXPECT_EQ(j["plan"]["quantized_weights"], 14);
  EXPECT_EQ(j["plan"]["ignore"], nlohmann::json::array({"lm_head", "model.embed_tokens"}));
}

TEST(QuantizeE2E, RefusesExistingDestinationAndUsageErrors) {
  TempDir tmp;
  std::string err;
  EXPECT_EQ(run_cli("quantize " + q(kData + "/llama") + " " + q(tmp.path), nullptr, &err), 3);
  EXPECT_THAT(err, HasSubstr("already exists"));
  {  // --json names the path in error.file (issue 55 tryout: null)
    std::string jo;
    EXPECT_EQ(run_cli("quantize " + q(kData + "/llama") + " " + q(tmp.path) + " --json", &jo, &err), 3);
    EXPECT_EQ(nlohmann::json::parse(jo)["error"]["file"], tmp.path.string()) << jo;
  }
  EXPECT_EQ(run_cli("quantize " + q(kData + "/llama") + " " + q(kData + "/llama/sub"), nullptr, &err), 3);
  EXPECT_THAT(err, HasSubstr("inside the source"));
  EXPECT_EQ(run_cli("quantize " + q(kData + "/llama") + " " + q(tmp.path / "o") + " --ignore model.layers.0.self_attn.k_proj",
                    nullptr, &err),
            2);
  EXPECT_THAT(err, HasSubstr("fused set qkv"));
  EXPECT_EQ(run_cli("quantize " + q(kData + "/llama") + " " + q(tmp.path / "o") + " --max-memory 12Q", nullptr, &err), 2);
  EXPECT_FALSE(stdfs::exists(tmp.path / "o"));
}

}  // namespace
}  // namespace fp4forge::quant
