// The selftest vectors of the schemes beside NVFP4A16 (src/codec/schemes_golden.json built into the
// binary) and the scheme golden parser's refusals.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <fmt/format.h>

#include "fp4forge/codec/nvfp4.h"
#include "fp4forge/codec/scheme_golden.h"

namespace fp4forge {
namespace {

TEST(CodecSchemeSelftest, BuiltInVectorsCoverEverySchemeAndAllPass) {
  auto sets = builtin_scheme_golden();
  ASSERT_TRUE(sets.ok()) << sets.error().message;
  ASSERT_EQ(sets->size(), 4u);  // every scheme but NVFP4A16, whose vectors are golden.h's
  nvfp4::GoldenReport r;
  run_scheme_golden(*sets, r);
  std::size_t refused = 0;
  for (const auto& s : *sets) {
    EXPECT_FALSE(s.cases.empty()) << quant_scheme_preset(s.scheme);
    for (const auto& c : s.cases) refused += !c.ok;
  }
  EXPECT_GE(r.scheme_outcomes.size(), 15u);
  EXPECT_GE(refused, 4u);  // MXFP4 K=16/48, W4A16 K=64/200
  EXPECT_EQ(r.scheme_failures, 0u);
  for (const auto& o : r.scheme_outcomes) EXPECT_TRUE(o.pass) << o.case_name << ": " << o.detail;
  EXPECT_TRUE(r.ok());
  EXPECT_NE(nvfp4::to_text(r).find("W4A16        6/6 case runs byte-exact to compressed-tensors (1 path(s): scalar;"),
            std::string::npos)
      << nvfp4::to_text(r);
  EXPECT_EQ(nvfp4::to_json(r)["scheme_failures"], 0);
}

// What `fp4forge selftest` runs: every built-in case of every scheme on every codec path of this CPU.
TEST(CodecSchemeSelftest, BuiltInVectorsPassOnEveryCodecPath) {
  auto sets = builtin_scheme_golden();
  ASSERT_TRUE(sets.ok()) << sets.error().message;
  const std::vector<std::string> paths = nvfp4::available_paths();
  ASSERT_GE(paths.size(), 2u);  // the scalar reference and at least one Highway target
  nvfp4::GoldenReport r;
  run_scheme_golden(*sets, r, paths);
  std::size_t cases = 0;
  for (const auto& s : *sets) cases += s.cases.size();
  EXPECT_EQ(r.scheme_outcomes.size(), cases * paths.size());
  for (const auto& o : r.scheme_outcomes) EXPECT_TRUE(o.pass) << o.case_name << " on " << o.path << ": " << o.detail;
  EXPECT_NE(nvfp4::to_text(r).find(fmt::format("({} path(s): {}", paths.size(), paths.front())), std::string::npos)
      << nvfp4::to_text(r);
}

TEST(CodecSchemeSelftest, AChangedByteFailsNamingTheTensorAndByte) {
  auto sets = builtin_scheme_golden();
  ASSERT_TRUE(sets.ok());
  SchemeGoldenSet fp8 = (*sets)[1];
  ASSERT_EQ(fp8.scheme, QuantScheme::FP8_DYNAMIC);
  fp8.cases.front().saved.front().bytes[3] ^= std::byte{1};
  nvfp4::GoldenReport r;
  run_scheme_golden({fp8}, r);
  EXPECT_EQ(r.scheme_failures, 1u);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.scheme_outcomes.front().detail.find("weight: byte 3"), std::string::npos)
      << r.scheme_outcomes.front().detail;
}

TEST(CodecSchemeSelftest, MalformedFilesAreBadInputNamingTheField) {
  const std::string ok_input = R"({"dtype":"BF16","shape":[1,128],"hex":")" + std::string(512, '0') + R"("})";
  const struct {
    const char* what;
    std::string text;
    const char* mentions;
  } cases[] = {
      {"not json", "{", "not a JSON object"},
      {"no scheme", R"({"cases":[]})", "\"scheme\""},
      {"nvfp4 scheme", R"({"scheme":"NVFP4A16","cases":[]})", "NVFP4A16"},
      {"unknown scheme", R"({"scheme":"INT3","cases":[]})", "INT3"},
      {"empty cases", R"({"scheme":"W4A16","cases":[]})", "cases"},
      {"bad status", R"({"scheme":"W4A16","cases":[{"name":"x","status":"maybe","inputs":[)" + ok_input + "]}]}",
       "status"},
      {"ok without saved", R"({"scheme":"W4A16","cases":[{"name":"x","status":"ok","inputs":[)" + ok_input + "]}]}",
       "saved"},
      {"short hex", R"({"scheme":"W4A16","cases":[{"name":"x","status":"refused","inputs":[{"dtype":"BF16","shape":[1,128],"hex":"00"}]}]})",
       "digits"},
      {"bad hex", R"({"scheme":"W4A16","cases":[{"name":"x","status":"refused","inputs":[{"dtype":"BF16","shape":[1,1],"hex":"zz00"}]}]})",
       "non-hex"},
      {"int input", R"({"scheme":"W4A16","cases":[{"name":"x","status":"refused","inputs":[{"dtype":"I32","shape":[1,1],"hex":"00000000"}]}]})",
       "BF16, F16 or F32"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    auto r = parse_scheme_golden(c.text, "t.json");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, Errc::BAD_INPUT);
    EXPECT_NE(r.error().message.find(c.mentions), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find("t.json"), std::string::npos) << r.error().message;
  }
}

// One loader keyed by the scheme a file holds (issue 54): NVFP4A16's schema and every scheme file come through
// load_golden_vectors; the typed loaders refuse a file of the other kind by name instead of a schema error.
TEST(CodecSchemeSelftest, OneLoaderReadsEveryGoldenFileByItsScheme) {
  const std::string nv = FP4FORGE_GOLDEN_VECTORS, blk = std::string(FP4FORGE_TEST_DATA) + "/golden/schemes/FP8_BLOCK.json";
  auto a = load_golden_vectors(nv);
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_EQ(a->scheme, QuantScheme::NVFP4A16);
  ASSERT_TRUE(a->nvfp4.has_value());
  EXPECT_EQ(a->nvfp4->cases.size(), 15u);
  EXPECT_FALSE(a->other.has_value());
  auto b = load_golden_vectors(blk);
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_EQ(b->scheme, QuantScheme::FP8_BLOCK);
  ASSERT_TRUE(b->other.has_value());
  EXPECT_FALSE(b->other->cases.empty());
  EXPECT_FALSE(b->nvfp4.has_value());
  auto wrong = load_scheme_golden(nv);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.error().code, Errc::BAD_INPUT);
  EXPECT_NE(wrong.error().message.find("holds NVFP4A16 vectors"), std::string::npos) << wrong.error().message;
  auto wrong2 = nvfp4::load_golden(blk);
  ASSERT_FALSE(wrong2.ok());
  EXPECT_NE(wrong2.error().message.find("holds FP8_BLOCK vectors; expected NVFP4A16"), std::string::npos)
      << wrong2.error().message;
  EXPECT_EQ(load_golden_vectors("/nonexistent/golden.json").error().code, Errc::IO);
}

}  // namespace
}  // namespace fp4forge
