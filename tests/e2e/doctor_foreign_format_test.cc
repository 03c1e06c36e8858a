// Checkpoints quantized in a format fp4forge neither reads nor writes (GPTQ, AWQ, gpt-oss's MXFP4 release,
// ModelOpt NVFP4, an unknown quant_method): doctor names the format in one warning and says what it did not check;
// verify, which cannot prove such a checkpoint, says so in one error. Neither applies compressed-tensors' structural
// checks to it (they called every module of a gpt-oss release wrong: ten false errors from doctor), and doctor's
// config-vs-shape check does not call experts stored in the format's own tensors missing.
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace fp4forge {
namespace {

using namespace fp4forge::testutil;
using nlohmann::json;

/** Finding kinds of a --json report with the given severity. */
std::multiset<std::string> kinds(const std::string& text, const std::string& severity) {
  std::multiset<std::string> k;
  const auto j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.contains("findings")) return {"(unparseable: " + text.substr(0, 200) + ")"};
  for (const auto& f : j["findings"])
    if (str_field(f, "severity") == severity) k.insert(str_field(f, "kind"));
  return k;
}

TEST(ForeignFormat, GptOssMxfp4ReleaseIsNamedNotMisread) {
  const std::string rel = kData + "/mxfp4/gpt_oss-mxfp4";
  std::string out, err;
  EXPECT_EQ(run_cli("doctor " + q(rel) + " --json", &out, &err), 0) << err;
  EXPECT_EQ(failing_findings(out), "");
  const auto warns = kinds(out, "warning");
  EXPECT_EQ(warns.count("quant-format-foreign"), 1u) << out;
  EXPECT_EQ(warns.count("config-shape-unchecked"), 1u) << out;  // the experts are the *_blocks / *_scales tensors
  EXPECT_NE(out.find("mxfp4"), std::string::npos);
  // The text names the format once per finding in a short label, the layers without a trailing dot (issue 55
  // tryout: the whole explanation four times, "tensors: model.layers.0., model.layers.1.").
  EXPECT_EQ(run_cli("doctor " + q(rel), &out, &err), 0) << err;
  EXPECT_NE(out.find("routed experts not checked, stored in a format fp4forge does not read: model.layers.0 expected "
                     "4 experts, got none in a form fp4forge reads (quant_method 'mxfp4': MXFP4, the gpt-oss release "
                     "format vLLM serves as it is)"), std::string::npos) << out;
  EXPECT_EQ(out.find("layers.0.,"), std::string::npos) << out;
  EXPECT_EQ(out.find("re-quantization would keep"), std::string::npos) << out;
  EXPECT_EQ(run_cli("verify " + q(rel) + " --json", &out, &err), 1) << err;
  EXPECT_EQ(kinds(out, "error"), std::multiset<std::string>{"quant-format-foreign"}) << out;
  // verify's headline says the scheme was not read, not "scheme  · ... 0.0% of 0 parameters".
  EXPECT_EQ(run_cli("verify " + q(rel), &out, &err), 1) << err;
  EXPECT_NE(out.find("scheme not read: a quantization format fp4forge does not read (below) · 41 tensors"),
            std::string::npos) << out;
  EXPECT_EQ(out.find("of 0 parameters"), std::string::npos) << out;
  // inspect names the format as doctor does (it said "unknown:mxfp4" alone), and quantize's refusal says to serve
  // the release as it is, not to quantize "the original BF16 weights" (issue 55).
  EXPECT_EQ(run_cli("inspect " + q(rel), &out, &err), 0) << err;
  EXPECT_NE(
      out.find("quantization unknown:mxfp4 (quant_method 'mxfp4': MXFP4, the gpt-oss release format vLLM serves as it "
               "is; fp4forge does not read it)"),
      std::string::npos)
      << out;
  EXPECT_EQ(run_cli("inspect " + q(rel) + " --json", &out, &err), 0) << err;
  EXPECT_NE(json::parse(out)["quantization"]["foreign"].get<std::string>().find("the gpt-oss release format vLLM serves as it is"),
            std::string::npos) << out;
  EXPECT_EQ(run_cli("inspect " + q(kData + "/llama") + " --json", &out, &err), 0) << err;
  EXPECT_TRUE(json::parse(out)["quantization"]["foreign"].is_null()) << out;
  TempDir t;
  EXPECT_EQ(run_cli("quantize " + q(rel) + " " + q(t.path / "o") + " --no-progress", &out, &err), 3);
  EXPECT_NE(err.find("serve it as it is: vLLM reads gpt-oss's MXFP4 release natively"), std::string::npos) << err;
  EXPECT_EQ(err.find("quantize the original BF16 weights"), std::string::npos) << err;
  EXPECT_FALSE(stdfs::exists(t.path / "o"));
}

struct Case {
  std::string name;
  json quantization_config;  // null: none in config.json
  json hf_quant_config;      // null: no hf_quant_config.json
};

class ForeignFormats : public ::testing::TestWithParam<Case> {};

// A bf16 checkpoint declared quantized in each foreign format: whatever its tensors, doctor's result is the one
// warning (no compressed-tensors error), verify's the one error.
TEST_P(ForeignFormats, OneFindingInsteadOfTheCompressedTensorsChecks) {
  TempDir tmp;
  const stdfs::path dir = tmp.path / "ck";
  stdfs::copy(kData + "/llama", dir, stdfs::copy_options::recursive);
  auto cfg = json::parse(slurp(dir / "config.json"));
  if (!GetParam().quantization_config.is_null()) cfg["quantization_config"] = GetParam().quantization_config;
  std::ofstream(dir / "config.json") << cfg.dump(2);
  if (!GetParam().hf_quant_config.is_null()) std::ofstream(dir / "hf_quant_config.json") << GetParam().hf_quant_config.dump(2);
  std::string out, err;
  EXPECT_EQ(run_cli("doctor " + q(dir) + " --json", &out, &err), 0) << err;
  EXPECT_EQ(failing_findings(out), "") << GetParam().name;
  EXPECT_EQ(kinds(out, "warning").count("quant-format-foreign"), 1u) << out;
  EXPECT_EQ(run_cli("verify " + q(dir) + " --json", &out, &err), 1) << err;
  EXPECT_EQ(kinds(out, "error"), std::multiset<std::string>{"quant-format-foreign"}) << out;
}

INSTANTIATE_TEST_SUITE_P(
    Methods, ForeignFormats,
    ::testing::Values(
        Case{"gptq", json{{"quant_method", "gptq"}, {"bits", 4}, {"group_size", 128}}, nullptr},
        Case{"awq", json{{"quant_method", "awq"}, {"bits", 4}, {"zero_point", true}}, nullptr},
        Case{"mxfp4", json{{"quant_method", "mxfp4"}}, nullptr},
        Case{"bitsandbytes", json{{"quant_method", "bitsandbytes"}, {"load_in_4bit", true}}, nullptr},
        Case{"unknown_method", json{{"quant_method", "a_format_from_next_year"}}, nullptr},
        Case{"upper_case_method", json{{"quant_method", "GPTQ"}}, nullptr},
        Case{"modelopt_nvfp4", json{{"quant_method", "modelopt"}, {"quant_algo", "NVFP4"}}, nullptr},
        Case{"modelopt_config_and_hf_quant_config", json{{"quant_method", "modelopt"}},
             json{{"quantization", {{"quant_algo", "NVFP4"}, {"group_size", 16}}}}}),
    [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

// What is not foreign keeps its own checks: an FP8 release is still an FP8 source (`fp8-source`), and a
// compressed-tensors config is still held to compressed-tensors' rules.
TEST(ForeignFormat, Fp8ReleasesAndCompressedTensorsAreNotForeign) {
  std::string out, err;
  EXPECT_EQ(run_cli("doctor " + q(kData + "/fp8/native-qwen3") + " --json", &out, &err), 0) << err;
  EXPECT_EQ(kinds(out, "warning").count("quant-format-foreign"), 0u) << out;
  EXPECT_EQ(kinds(out, "info").count("fp8-source"), 1u) << out;
  // verify's header says what the folder is (tryout L-L4: it read "scheme  · ... 0 quantized modules").
  EXPECT_EQ(run_cli("verify " + q(kData + "/fp8/native-qwen3"), &out, &err), 0) << err;
  EXPECT_NE(out.find("scheme none written by fp4forge: an FP8 release, a source to quantize (below)"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("scheme  ·"), std::string::npos) << out;
  TempDir tmp;
  const stdfs::path dir = tmp.path / "ck";
  stdfs::copy(kData + "/llama", dir, stdfs::copy_options::recursive);
  auto cfg = json::parse(slurp(dir / "config.json"));
  cfg["quantization_config"] = json{{"quant_method", "compressed-tensors"}, {"config_groups", json::object()}};
  std::ofstream(dir / "config.json") << cfg.dump(2);
  EXPECT_EQ(run_cli("doctor " + q(dir) + " --json", &out, &err), 1) << err;
  EXPECT_EQ(kinds(out, "warning").count("quant-format-foreign"), 0u);
  EXPECT_EQ(kinds(out, "error").count("quant-config-invalid"), 1u) << out;
}

}  // namespace
}  // namespace fp4forge
