// E8M0 x E2M1 golden table (tests/data/mxfp4/golden_e8m0_e2m1.json): what transformers 5.17's own dequantizers
// give for every E2M1 code under every E8M0 scale byte, made on the GPU host by scripts/make_mxfp4_fixtures.py.
// Paths: `dsv4_e8m0` / `dsv4_u8` / `dsv4_f32` (integrations/finegrained_fp8.py Fp8Dequantize._dequantize_one with
// a float8_e8m0fnu, uint8 and float32-container scale) and `gpt_oss` (integrations/mxfp4.py
// convert_moe_packed_tensors). fp4forge's element (codec/fp8_dequant.h) must equal each, bit for bit, except at
// scale byte 0xFF: NaN in fp4forge (F8_E8M0's meaning), 2^128 = inf in transformers' uint8 path (both non-finite:
// quantize refuses either way), and an exact ldexp in gpt-oss's path (0 stays 0, 0.5 x 2^128 = 2^127 is finite).
// That last difference is counted, not hidden: fp4forge reads no gpt-oss MXFP4 source yet (docs/fp8-sources.md).
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fp4forge/codec/fp8_dequant.h"
#include "fp4forge/codec/half.h"
#include "fp4forge/codec/nvfp4.h"

namespace fp4forge::fp8 {
namespace {

bool non_finite(std::uint16_t b) { return (b & 0x7F80u) == 0x7F80u; }

TEST(CodecE8m0E2m1Golden, EveryCodeUnderEveryScaleByteOnEveryTransformersPath) {
  std::ifstream f(std::string(FP4FORGE_TEST_DATA) + "/mxfp4/golden_e8m0_e2m1.json");
  ASSERT_TRUE(f.good()) << "tests/data/mxfp4/golden_e8m0_e2m1.json missing";
  std::stringstream ss;
  ss << f.rdbuf();
  const auto j = nlohmann::json::parse(ss.str());
  int paths = 0;
  for (const char* path : {"dsv4_e8m0", "dsv4_u8", "dsv4_f32", "gpt_oss"}) {
    ASSERT_TRUE(j.contains(path)) << path;
    const auto& rows = j[path];
    ASSERT_EQ(rows.size(), 256u) << path;
    std::size_t exact = 0, both_non_finite = 0, ldexp_at_ff = 0;
    for (int e = 0; e < 256; ++e) {
      const std::string hex = rows[static_cast<std::size_t>(e)];
      ASSERT_EQ(hex.size(), 64u) << path << " scale byte " << e;
      const std::byte eb = static_cast<std::byte>(e);
      const float s = scale_value(&eb, 0, DType::F8_E8M0);
      for (unsigned c = 0; c < 16; ++c) {
        const auto want = static_cast<std::uint16_t>(std::stoul(hex.substr(c * 4, 4), nullptr, 16));
        const std::uint16_t got = dequant_e2m1_bf16(static_cast<std::uint8_t>(c), s);
        if (got == want) {
          ++exact;
        } else if (non_finite(got) && non_finite(want) && e == 255) {
          ++both_non_finite;
        } else if (std::string(path) == "gpt_oss" && e == 255 && (c & 7u) <= 1u &&
                   want == half::float_to_bf16(std::ldexp(nvfp4::fp4_to_float(static_cast<std::uint8_t>(c)), 128))) {
          ++ldexp_at_ff;  // +-0 and +-0.5 x 2^128: finite under ldexp
        } else {
          ADD_FAILURE() << path << ": code " << c << " scale byte " << e << ": 0x" << std::hex << got << ", transformers 0x"
                        << want;
        }
      }
    }
    EXPECT_EQ(exact + both_non_finite + ldexp_at_ff, 256u * 16u) << path;
    EXPECT_EQ(exact, 4080u) << path << ": every scale byte but 0xFF is bit-exact";
    std::printf("%s: %zu of 4096 bit-exact, %zu both non-finite and %zu finite under ldexp (scale byte 0xFF)\n", path,
                exact, both_non_finite, ldexp_at_ff);
    ++paths;
  }
  EXPECT_EQ(paths, 4);
}

}  // namespace
}  // namespace fp4forge::fp8
