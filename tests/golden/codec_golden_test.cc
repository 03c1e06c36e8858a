// Golden NVFP4A16 vectors (bytes written by llm-compressor / compressed-tensors 0.18) through every
// codec path, plus the spec's §2.5 worked example and tie check, hand-coded.
#include <bit>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fp4forge/codec/golden.h"
#include "fp4forge/codec/nvfp4.h"
#include "fp4forge/util/fs.h"

namespace fp4forge::nvfp4 {
namespace {

const std::string kGoldenFile = FP4FORGE_GOLDEN_VECTORS;  // src/codec/nvfp4a16_golden.json (built into selftest)

std::vector<std::byte> bf16_bytes(const std::vector<std::uint16_t>& bits) {
  std::vector<std::byte> out(bits.size() * 2);
  std::memcpy(out.data(), bits.data(), out.size());
  return out;
}

std::string hex(const std::byte* p, std::size_t n) {
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s += fmt::format("{:02x}", static_cast<unsigned>(p[i]));
  return s;
}

TEST(CodecGolden, FileHasTheFifteenDocumentedCases) {
  auto set = load_golden(kGoldenFile);
  ASSERT_TRUE(set.ok()) << set.error().message;
  ASSERT_EQ(set->cases.size(), 15u);
  std::size_t bf16 = 0, f16 = 0, f32 = 0, fused = 0;
  for (const auto& c : set->cases) {
    bf16 += c.dtype == DType::BF16;
    f16 += c.dtype == DType::F16;
    f32 += c.dtype == DType::F32;
    fused += c.members.size() > 1;
  }
  EXPECT_GE(bf16, 1u);
  EXPECT_GE(f16, 2u);
  EXPECT_GE(f32, 2u);
  EXPECT_GE(fused, 3u);
}

TEST(CodecGolden, EveryCaseIsByteExactOnEveryPath) {
  auto set = load_golden(kGoldenFile);
  ASSERT_TRUE(set.ok()) << set.error().message;
  const std::vector<std::string> paths = available_paths();
  ASSERT_GE(paths.size(), 2u) << "expected the scalar reference and at least one Highway target";
  EXPECT_EQ(paths.front(), "scalar");
  for (const auto& c : set->cases) {
    for (const auto& p : paths) {
      const GoldenOutcome o = run_golden_case(c, p);
      EXPECT_TRUE(o.pass) << "case " << c.name << " on path " << p << ": " << o.detail;
    }
  }
  // The dispatched (default) path too.
  for (const auto& c : set->cases) {
    const GoldenOutcome o = run_golden_case(c, "");
    EXPECT_TRUE(o.pass) << "case " << c.name << " on the dispatched path: " << o.detail;
  }
}

TEST(CodecGolden, RunnerDetectsACorruptedExpectation) {
  auto set = load_golden(kGoldenFile);
  ASSERT_TRUE(set.ok()) << set.error().message;
  GoldenCase c = set->cases.front();
  c.members[0].packed[5] ^= std::byte{0x10};
  const GoldenOutcome o = run_golden_case(c, "scalar");
  EXPECT_FALSE(o.pass);
  EXPECT_NE(o.detail.find("weight_packed byte 5"), std::string::npos) << o.detail;
  GoldenCase d = set->cases.front();
  d.members[0].global_scale_bits ^= 1u;
  EXPECT_FALSE(run_golden_case(d, best_path()).pass);
  const std::vector<std::string> paths{"scalar", best_path()};
  GoldenSet bad{"x", {c, d}};
  const GoldenReport r = run_golden(bad, paths);
  EXPECT_EQ(r.failures, 4u);
  EXPECT_FALSE(r.ok());
}

TEST(CodecGolden, BuiltInVectorsAreTheTestDataFile) {
  auto text = fs::read_file(kGoldenFile);
  ASSERT_TRUE(text.ok()) << text.error().message;
  EXPECT_EQ(builtin_golden_json(), *text);
  auto set = builtin_golden();
  ASSERT_TRUE(set.ok()) << set.error().message;
  EXPECT_EQ(set->cases.size(), 15u);
  EXPECT_EQ(set->source, "built-in");
}

TEST(CodecGolden, MalformedFilesAreBadInput) {
  const char* bad[] = {
      "not json",
      "{}",
      R"({"cases": []})",
      R"({"cases": [{"name": "x", "dtype": "I8", "members": [], "expected": []}]})",
      R"({"cases": [{"name": "x", "dtype": "BF16", "members": [{"shape": [1, 16], "weight": "00"}],
          "expected": [{"weight_packed": "", "weight_scale": "", "weight_global_scale": ""}]}]})",
      R"({"cases": [{"name": "x", "dtype": "BF16", "members": [{"shape": [1, 8], "weight": "00"}],
          "expected": [{}]}]})",
  };
  for (const char* text : bad) {
    auto r = parse_golden(text, "t.json");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.error().code, Errc::BAD_INPUT) << text;
    EXPECT_NE(r.error().message.find("t.json"), std::string::npos) << r.error().message;
  }
  auto missing = load_golden("/nonexistent/golden.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, Errc::IO);
}

// §2.5: one group of a fused set whose amax is bf16(0.1) = 0x3DCD (supplied here by a second row).
TEST(CodecGolden, WorkedExampleFromSpec) {
  std::vector<std::uint16_t> bits = {0x3c4a, 0xbd3b, 0x3da2, 0xbb5f, 0x0000, 0x8000, 0x3cff, 0xbd8b,
                                     0x3b8a, 0x3d61, 0xbcb3, 0x3c1f, 0xb8d2, 0x3d83, 0xbd1e, 0x3c76};
  std::vector<std::uint16_t> row1(16, 0);
  row1[3] = 0x3DCD;
  bits.insert(bits.end(), row1.begin(), row1.end());
  const auto bytes = bf16_bytes(bits);
  const WeightView w{bytes.data(), DType::BF16, 2, 16};
  auto a = amax(w, "example");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, 0.10009765625f);
  const float gs = global_scale(*a, DType::BF16);
  EXPECT_EQ(gs, 26880.0f);
  const std::uint32_t gs_bits = std::bit_cast<std::uint32_t>(gs);
  EXPECT_EQ(hex(reinterpret_cast<const std::byte*>(&gs_bits), 4), "0000d246");
  EXPECT_EQ(group_scale_code(0.0791015625f, DType::BF16, gs), 0x7B);
  for (const auto& p : available_paths()) {
    std::vector<std::byte> packed(16), scale(2);
    ASSERT_TRUE(encode_rows_with(p, w, gs, 0, 2, packed.data(), scale.data(), "example").ok());
    EXPECT_EQ(hex(packed.data(), 8), "d29700f4611b682d") << p;
    EXPECT_EQ(hex(scale.data(), 1), "7b") << p;
    // Row 1 alone (a row range) gives the same bytes as in the full encode.
    std::vector<std::byte> packed1(8), scale1(1);
    ASSERT_TRUE(encode_rows_with(p, w, gs, 1, 2, packed1.data(), scale1.data(), "example").ok());
    EXPECT_EQ(hex(packed1.data(), 8), hex(packed.data() + 8, 8)) << p;
    EXPECT_EQ(scale1[0], scale[1]) << p;
  }
}

// §2.5 tie check: gs = 64 and s = 64 so eff = 1.
TEST(CodecGolden, TieCheckFromSpec) {
  const float vals[16] = {6, .25f, .75f, 1.25f, 1.75f, 2.5f, 3.5f, 5, -.25f, -.75f, -1.25f, -1.75f,
                          -2.5f, -3.5f, -5, -0.0f};
  std::vector<std::uint16_t> bits;
  for (float v : vals) bits.push_back(static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(v) >> 16));
  const auto bytes = bf16_bytes(bits);
  const WeightView w{bytes.data(), DType::BF16, 1, 16};
  EXPECT_EQ(global_scale(42.0f, DType::BF16), 64.0f);
  for (const auto& p : available_paths()) {
    std::vector<std::byte> packed(8), scale(1);
    ASSERT_TRUE(encode_rows_with(p, w, 64.0f, 0, 1, packed.data(), scale.data(), "ties").ok());
    EXPECT_EQ(hex(packed.data(), 8), "07224466a8caec0e") << p;
    EXPECT_EQ(e4m3_to_float(static_cast<std::uint8_t>(scale[0])), 64.0f) << p;
  }
}

}  // namespace
}  // namespace fp4forge::nvfp4
