// Issue 31 #3: one quantization-config lookup for every command. A multimodal checkpoint whose quantization_config
// sits under text_config (vLLM finds it there since PR #24131; docs/quant-config-lookup.md) is read the same by
// inspect, verify, verify --against, doctor and diff, and quantize refuses it as already quantized, naming where it
// found the config.
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace fp4forge {
namespace {

namespace stdfs = std::filesystem;
using Json = nlohmann::ordered_json;
using testutil::kData;
using testutil::q;
using testutil::run_cli;
using testutil::slurp;
using testutil::TempDir;

TEST(QuantConfigLookup, UnderTextConfigEveryCommandReadsIt) {
  TempDir t;
  const stdfs::path src = stdfs::path(kData) / "qwen3_5-dense-mm", top = t.path / "top", nested = t.path / "nested";
  std::string out, err;
  ASSERT_EQ(run_cli("quantize " + q(src) + " " + q(top), &out, &err), 0) << err;
  stdfs::copy(top, nested);
  Json c = Json::parse(slurp(nested / "config.json"));
  ASSERT_TRUE(c.contains("text_config"));
  c["text_config"]["quantization_config"] = c["quantization_config"];
  c.erase("quantization_config");
  std::ofstream(nested / "config.json", std::ios::trunc) << c.dump(2) << "\n";

  ASSERT_EQ(run_cli("inspect " + q(nested) + " --json", &out, &err), 0) << err;
  const Json j = Json::parse(out);
  EXPECT_EQ(j["quantization"]["quant_method"], "compressed-tensors") << out.substr(0, 600);
  EXPECT_EQ(j["quantization"]["groups"][0]["scheme"], "NVFP4A16");
  EXPECT_EQ(run_cli("verify " + q(nested) + " --against " + q(src), &out, &err), 0) << out << err;
  EXPECT_EQ(run_cli("doctor " + q(nested), &out, &err), 0) << out << err;
  // The configs differ (where the group sits), so diff says DIFFERENT (exit 1), and reads one scheme on both sides.
  ASSERT_EQ(run_cli("diff " + q(top) + " " + q(nested), &out, &err), 1) << out << err;
  EXPECT_NE(out.find("scheme: NVFP4A16 on both sides"), std::string::npos) << out.substr(0, 600);
  EXPECT_EQ(run_cli("quantize " + q(nested) + " " + q(t.path / "again"), &out, &err), 3) << err;
  EXPECT_NE(err.find("text_config.quantization_config"), std::string::npos) << err;
  EXPECT_FALSE(stdfs::exists(t.path / "again"));
}

}  // namespace
}  // namespace fp4forge
