// The invariant over every fixture in tests/data (found at run time, so a new fixture is covered by adding
// it): doctor on the clean source raises no error (so quantize's preflight passes it); quantize -> verify --against
// (every row re-encoded by the scalar reference) -> doctor on the output are clean. A family whose experts vLLM cannot load quantized
// (registry experts_refusal) must be refused with that reason, and quantize cleanly with the experts kept.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fp4forge/model/registry.h"
#include "fp4forge/safetensors/checkpoint.h"
#include "test_util.h"

namespace fp4forge {
namespace {

using namespace fp4forge::testutil;
std::vector<std::string> fixtures() { return fixture_names(); }
std::string errors_of(const std::string& json_text) { return failing_findings(json_text); }

class OwnOutput : public ::testing::TestWithParam<std::string> {};

TEST_P(OwnOutput, DoctorQuantizeVerifyDoctorAreClean) {
  const std::string fx = GetParam();
  const std::string src = kData + "/" + fx;
  std::string out, err;
  // 1. The clean source: no error finding.
  const int dsrc = run_cli("doctor " + q(src) + " --json", &out, &err);
  EXPECT_EQ(errors_of(out), "") << fx << " source";
  EXPECT_EQ(dsrc, 0) << fx << " source: " << err;

  TempDir tmp;
  const std::string dst = (tmp.path / "q").string();
  int rq = run_cli("quantize " + q(src) + " " + q(dst) + " -j 2 --json", &out, &err);
  std::string extra;
  if (rq == 3 && err.find("cannot be served quantized") != std::string::npos) {
    // Refused with the registry's reason: the attention alone must still quantize cleanly.
    extra = " --ignore 're:.*experts'";
    rq = run_cli("quantize " + q(src) + " " + q(dst) + " -j 2 --json" + extra, &out, &err);
  }
  ASSERT_EQ(rq, 0) << fx << ": " << err;
  const auto sum = nlohmann::json::parse(out);
  EXPECT_GT(sum["quantized_weights"].get<int>(), 0) << fx;

  // 2. verify --against, every row re-encoded by the scalar reference.
  const int rv = run_cli("verify " + q(dst) + " --against " + q(src) + " --reencode-rows 1000000 --json", &out, &err);
  EXPECT_EQ(errors_of(out), "") << fx << " verify";
  EXPECT_EQ(rv, 0) << fx << " verify: " << err;
  const auto vj = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(vj.is_discarded());
  EXPECT_GT(vj["stats"]["text_quantized_share"].get<double>(), 0.0) << fx;

  // 3. doctor on the output: no error, and no warning whose fix quantize writes into its output (issue 51: the
  // preprocessor_config.json of a processor_config.json, a tokenizer without truncation).
  const int dq = run_cli("doctor " + q(dst) + " --json", &out, &err);
  EXPECT_EQ(errors_of(out), "") << fx << " output";
  EXPECT_EQ(dq, 0) << fx << " output: " << err;
  const auto dj = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(dj.is_discarded());
  for (const char* fixed : {"missing-preprocessor-config", "tokenizer-truncation"})
    EXPECT_EQ(warning_kinds(dj).count(fixed), 0u) << fx << " output: " << fixed;
}

// The same with llm-compressor's recommended observer (--observer mse): clean, proven row by row with the
// search, and of lower error against the source than min-max on every fixture.
TEST_P(OwnOutput, MseOutputIsCleanAndOfLowerErrorThanMinMax) {
  const std::string fx = GetParam();
  const std::string src = kData + "/" + fx;
  std::string out, err;
  TempDir tmp;
  const std::string dst = (tmp.path / "q").string();
  int rq = run_cli("quantize " + q(src) + " " + q(dst) + " --observer mse -j 2 --json", &out, &err);
  if (rq == 3 && err.find("cannot be served quantized") != std::string::npos)
    rq = run_cli("quantize " + q(src) + " " + q(dst) + " --observer mse -j 2 --json --ignore 're:.*experts'", &out, &err);
  ASSERT_EQ(rq, 0) << fx << ": " << err;
  const int rv = run_cli("verify " + q(dst) + " --against " + q(src) + " --reencode-rows 1000000 --json", &out, &err);
  EXPECT_EQ(errors_of(out), "") << fx << " verify";
  EXPECT_EQ(rv, 0) << fx << " verify: " << err;
  const auto vj = nlohmann::json::parse(out, nullptr, false);
  ASSERT_FALSE(vj.is_discarded());
  const auto& a = vj["stats"]["against"];
  EXPECT_EQ(a["reencode_mismatched_rows"], 0) << fx;
  EXPECT_LT(a["mean_rel_rms"].get<double>(), a["mean_minmax_rel_rms"].get<double>()) << fx;
  const int dq = run_cli("doctor " + q(dst) + " --json", &out, &err);
  EXPECT_EQ(errors_of(out), "") << fx << " output";
  EXPECT_EQ(dq, 0) << fx << " output: " << err;
}

INSTANTIATE_TEST_SUITE_P(AllFixtures, OwnOutput, ::testing::ValuesIn(fixtures()),
                         [](const ::testing::TestParamInfo<std::string>& p) { return testutil::test_name(p.param); });

// Every registered family has a fixture written by the real writer (a family is a table row plus a fixture).
TEST(OwnOutput, EveryRegisteredFamilyHasAFixture) {
  std::vector<std::string> have;
  for (const auto& fx : fixtures()) {
    const auto j = nlohmann::json::parse(slurp(kData + "/" + fx + "/config.json"));
    std::string mt = str_field(j, "model_type");
    std::string arch = j.contains("architectures") ? j["architectures"][0].get<std::string>() : "";
    std::string tmt = j.contains("text_config") ? str_field(j["text_config"], "model_type") : "";
    have.emplace_back(family_name(detect_family(mt, tmt, arch)));
  }
  for (const auto& spec : families())
    EXPECT_NE(std::find(have.begin(), have.end(), spec.id), have.end()) << spec.id << " has no fixture in tests/data";
}

}  // namespace
}  // namespace fp4forge

namespace fp4forge {
namespace {
using namespace fp4forge::testutil;

// Independent check of the fused-expert orientation: the two Qwen3-VL-MoE fixtures hold the same weights,
// one as transformers 5.17 saves them ([E, 2I, H] / [E, H, I]), one in the Hub-release orientation
// ([E, H, 2I] / [E, I, H]). Their quantized outputs must be byte-identical.
TEST(OwnOutput, BothExpertOrientationsQuantizeToTheSameBytes) {
  TempDir tmp;
  std::string out, err;
  for (const char* fx : {"qwen3_vl_moe", "qwen3_vl_moe-hub"})
    ASSERT_EQ(run_cli("quantize " + q(kData + "/" + fx) + " " + q(tmp.path / fx) + " -j 2", &out, &err), 0) << err;
  std::size_t shards = 0;
  for (const auto& e : std::filesystem::directory_iterator(tmp.path / "qwen3_vl_moe")) {
    const auto name = e.path().filename().string();
    if (e.path().extension() != ".safetensors") continue;
    ++shards;
    EXPECT_EQ(slurp(e.path()), slurp(tmp.path / "qwen3_vl_moe-hub" / name)) << name;
  }
  EXPECT_GT(shards, 1u);
}

// Issue 26: experts stored as three separate 3-D stacks (gate_proj, up_proj [E, I, H], down_proj [E, H, I], as
// Step-3.x writes them) are split like the fused gate_up form: every per-expert module of the output has the
// bytes of the same module quantized from the fused fixture (shard layout aside: the sources differ in shape).
TEST(OwnOutput, SeparateExpertStacksQuantizeToTheSameModules) {
  TempDir tmp;
  std::string out, err;
  for (const char* fx : {"qwen3_vl_moe", "qwen3_vl_moe-sep3d"})
    ASSERT_EQ(run_cli("quantize " + q(kData + "/" + fx) + " " + q(tmp.path / fx) + " -j 2", &out, &err), 0) << err;
  auto a = Checkpoint::open(tmp.path / "qwen3_vl_moe");
  auto b = Checkpoint::open(tmp.path / "qwen3_vl_moe-sep3d");
  ASSERT_TRUE(a.ok() && b.ok());
  std::size_t experts = 0;
  for (const auto& t : a->tensors()) {
    const TensorRef* u = b->find(t.name);
    ASSERT_NE(u, nullptr) << t.name << " missing from the separate-stacks output";
    const auto da = a->data(t), db = b->data(*u);
    EXPECT_TRUE(da.size() == db.size() && std::equal(da.begin(), da.end(), db.begin())) << t.name;
    experts += t.name.find(".experts.") != std::string::npos ? 1 : 0;
  }
  EXPECT_EQ(a->tensors().size(), b->tensors().size());
  EXPECT_GT(experts, 0u);
}

}  // namespace
}  // namespace fp4forge
