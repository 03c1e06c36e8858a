// tensor-dtype (tryout S-M1): a norm weight relabelled I16 and an embedding relabelled F16 in a bfloat16 checkpoint
// passed doctor, quantize's preflight and verify --against, and the I16 weight was copied into the output. Doctor
// calls the integer one an error (so quantize refuses before writing) and the other 16-bit float a warning; no
// fixture trips either.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "temp_dir.h"
#include "test_util.h"

namespace fp4forge {
namespace {

using namespace fp4forge::testutil;
namespace stdfs = std::filesystem;

/** Rewrites tensor dtypes in a shard's header in place (same byte sizes; the header padded to its old length). */
void relabel(const stdfs::path& shard, const std::map<std::string, std::string>& dtypes) {
  std::string bytes = slurp(shard.string());
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  auto h = nlohmann::ordered_json::parse(bytes.substr(8, n));
  for (const auto& [name, dt] : dtypes) h[name]["dtype"] = dt;
  std::string text = h.dump();
  ASSERT_LE(text.size(), n);
  text.resize(n, ' ');
  bytes.replace(8, n, text);
  std::ofstream(shard, std::ios::binary) << bytes;
}

TEST(DoctorTensorDtype, AnIntegerNormIsAnErrorAndTheOtherHalfFloatAWarning) {
  TempDir t;
  const stdfs::path src = t.path / "bad";
  stdfs::copy(kData + "/qwen3", src);
  relabel(src / "model-00001-of-00002.safetensors",
          {{"model.layers.0.input_layernorm.weight", "I16"}, {"model.embed_tokens.weight", "F16"}});
  std::string out, err;
  EXPECT_EQ(run_cli("doctor " + q(src) + " --json", &out, &err), 1) << err;
  const auto j = nlohmann::json::parse(out);
  int errors = 0, warnings = 0;
  for (const auto& f : j["findings"]) {
    if (f["kind"] != "tensor-dtype") continue;
    (f["severity"] == "error" ? errors : warnings)++;
    if (f["severity"] == "error") {
      EXPECT_EQ(f["tensors"][0], "model.layers.0.input_layernorm.weight");
      EXPECT_EQ(f["actual"], "I16");
    } else {
      EXPECT_EQ(f["tensors"][0], "model.embed_tokens.weight");
      EXPECT_EQ(f["expected"], "bfloat16");
    }
  }
  EXPECT_EQ(errors, 1) << out;
  EXPECT_EQ(warnings, 1) << out;
  // quantize refuses before writing anything.
  EXPECT_EQ(run_cli("quantize " + q(src) + " " + q(t.path / "q") + " --no-progress", &out, &err), 3)
      << err;  // bad input
  EXPECT_NE(err.find("quantize refused by its preflight: tensor-dtype"), std::string::npos) << err;
  EXPECT_FALSE(stdfs::exists(t.path / "q"));
}

}  // namespace
}  // namespace fp4forge
