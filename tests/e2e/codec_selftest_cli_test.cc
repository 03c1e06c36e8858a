// `fp4forge selftest --golden FILE...`: files of any scheme through the one loader (codec/scheme_golden.h
// load_golden_vectors), mixed in one run; --scheme-golden is the same option; a malformed file is exit 3.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace {

using fp4forge::testutil::kData;
using fp4forge::testutil::q;
using fp4forge::testutil::run_cli;

TEST(SelftestCli, GoldenFilesOfEverySchemeRunTogether) {
  const std::string nv = FP4FORGE_GOLDEN_VECTORS;
  std::string out, err;
  ASSERT_EQ(run_cli("selftest --path scalar --json --golden " + q(kData + "/golden/schemes/FP8_BLOCK.json") +
                        " --golden " + q(nv) + " --scheme-golden " + q(kData + "/golden/schemes/W4A16.json"),
                    &out, &err),
            0)
      << err << out;
  const auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["ok"], true);
  EXPECT_EQ(j["source"], nv);  // the NVFP4A16 file given, not the built-in set
  EXPECT_EQ(j["cases"].size(), 15u);
  bool blk = false, w4 = false, mx = false;
  for (const auto& o : j["scheme_cases"]) {
    const std::string name = o["case"].get<std::string>();  // "PRESET/case"
    blk = blk || name.find("FP8_BLOCK") != std::string::npos;
    w4 = w4 || name.find("W4A16") != std::string::npos;
    mx = mx || name.find("MXFP4A16") != std::string::npos;
  }
  EXPECT_TRUE(blk && w4) << j.dump();
  EXPECT_EQ(j["scheme_failures"], 0);
  EXPECT_FALSE(mx) << "a scheme with no file given is not run when files are given";
  // A file of neither schema: exit 3 naming it.
  fp4forge::testutil::TempDir t;
  std::ofstream(t.path / "bad.json") << R"({"scheme": "FP8_BLOCK", "cases": 3})";
  EXPECT_EQ(run_cli("selftest --golden " + q(t.path / "bad.json"), &out, &err), 3);
  EXPECT_NE(err.find("bad.json"), std::string::npos) << err;
}

}  // namespace
