// Cross-family end to end: for every family `synth` knows, synthesize a tiny checkpoint, quantize it,
// then prove the output with `verify --against` (exit 0, no error finding) and `doctor` (no error).
// This exercises layouts the fixtures do not have (Qwen3.5-MoE with fused experts and MTP experts,
// Qwen3-MoE per-expert experts).
#include <gtest/gtest.h>

#include <string>

#include "e2e/quantize_test_util.h"

namespace fp4forge {
namespace {

using namespace qtest;

class QuantizeFamilies : public ::testing::TestWithParam<const char*> {};

TEST_P(QuantizeFamilies, SynthQuantizeVerifyDoctor) {
  TempDir tmp;
  const auto src = tmp.path / "src", dst = tmp.path / "q";
  std::string out, err;
  ASSERT_EQ(run_cli(std::string("synth --arch ") + GetParam() + " --size tiny --seed 3 --out " + q(src), &out, &err),
            0)
      << err;
  ASSERT_EQ(run_cli("quantize " + q(src) + " " + q(dst) + " -j 2", &out, &err), 0) << err;
  EXPECT_EQ(run_cli("verify " + q(dst) + " --against " + q(src) + " --json", &out, &err), 0)
      << "verify found errors:\n" << out << err;
  EXPECT_EQ(out.find("\"severity\": \"error\""), std::string::npos) << out;
  EXPECT_EQ(run_cli("doctor " + q(dst) + " --json", &out, &err), 0) << "doctor found errors:\n" << out << err;
}

INSTANTIATE_TEST_SUITE_P(AllSynthArchs, QuantizeFamilies,
                         ::testing::Values("llama", "qwen3-moe", "gemma4-dense", "gemma4-moe", "qwen3_5-dense",
                                           "qwen3_5-moe"),
                         [](const ::testing::TestParamInfo<const char*>& p) {
                           std::string n = p.param;
                           for (auto& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

}  // namespace
}  // namespace fp4forge
