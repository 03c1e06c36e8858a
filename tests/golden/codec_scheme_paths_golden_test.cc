// Every golden case of MXFP4A16, FP8_DYNAMIC, FP8_BLOCK and W4A16 (tests/data/golden/schemes/*.json:
// the bytes compressed-tensors 0.18 writes, CPU reference) on every encode path this binary runs:
// "scalar" (the reference) and each Highway target the CPU supports, whole tensors through
// encode_linear and row ranges (one range per 128-row strip, as a caller splits work) through the
// per-scheme *_rows_with functions. Zero differing bytes on every path; refused shapes refused.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fp4forge/codec/fp8.h"
#include "fp4forge/codec/mxfp4.h"
#include "fp4forge/codec/scheme.h"
#include "fp4forge/codec/w4a16.h"
#include "golden/schemes_golden_util.h"

namespace fp4forge {
namespace {

namespace sg = schemes_golden;

// Encodes rows [r0, r1) of a case on `path` into the tensors' row offsets (codes, scales).
Status encode_range(QuantScheme s, std::string_view path, const nvfp4::WeightView& w, std::uint64_t r0,
                    std::uint64_t r1, std::vector<std::byte>& codes, std::vector<std::byte>& scales) {
  const std::uint64_t k = w.cols, esz = w.dtype == DType::F32 ? 4 : 2;
  switch (s) {
    case QuantScheme::MXFP4A16:
      return mxfp4::encode_rows_with(path, w, r0, r1, codes.data() + r0 * (k / 2),
                                     scales.data() + r0 * mxfp4::scale_cols(k), "t");
    case QuantScheme::FP8_DYNAMIC:
      return fp8::encode_channel_rows_with(path, w, r0, r1, codes.data() + r0 * k, scales.data() + r0 * esz, "t");
    case QuantScheme::FP8_BLOCK:
      return fp8::encode_block_rows_with(path, w, r0, r1, codes.data() + r0 * k,
                                         scales.data() + (r0 / fp8::kBlock) * fp8::block_scale_cols(k) * esz, "t");
    case QuantScheme::W4A16:
      return w4a16::encode_rows_with(path, w, r0, r1, codes.data() + r0 * (k / 2),
                                     scales.data() + r0 * w4a16::scale_cols(k) * esz, "t");
    default: return make_error(Errc::INTERNAL, "not a scheme of this test");
  }
}

class CodecSchemePathsGolden : public ::testing::TestWithParam<QuantScheme> {};

TEST_P(CodecSchemePathsGolden, EveryCaseOnEveryPathByteExact) {
  const QuantScheme s = GetParam();
  const std::string preset(quant_scheme_preset(s));
  const std::vector<sg::Case> cases = sg::load(preset);
  ASSERT_GE(cases.size(), 13u);
  const std::vector<std::string> paths = encode_paths(s);
  ASSERT_GE(paths.size(), 2u) << "no Highway target compiled in";
  EXPECT_EQ(paths, nvfp4::available_paths());
  std::size_t runs = 0, exact = 0;
  for (const std::string& p : paths) {
    for (const sg::Case& c : cases) {
      SCOPED_TRACE(preset + "/" + c.name + " on " + p);
      ++runs;
      // Whole tensor: encode_linear on the path, every tensor, dtype and shape (the selftest's check).
      const nvfp4::GoldenOutcome o = run_scheme_golden_case(s, c, p);
      EXPECT_TRUE(o.pass) << o.detail;
      EXPECT_EQ(o.path, p);
      if (!c.ok || !o.pass) continue;
      // Row ranges: one range per 128-row strip, then the last rows; written at their offsets.
      const nvfp4::WeightView w = c.view();
      std::vector<std::byte> codes(c.saved[0].bytes.size()), scales(c.saved[1].bytes.size());
      for (std::uint64_t r0 = 0; r0 < w.rows; r0 += 128) {
        const Status st = encode_range(s, p, w, r0, std::min(w.rows, r0 + 128), codes, scales);
        ASSERT_TRUE(st.ok()) << st.error().message;
      }
      EXPECT_EQ(sg::first_difference(c.saved[0].bytes, codes), "") << c.saved[0].suffix << " (row ranges)";
      EXPECT_EQ(sg::first_difference(c.saved[1].bytes, scales), "") << c.saved[1].suffix << " (row ranges)";
      ++exact;
    }
  }
  const auto ok_cases = static_cast<std::size_t>(std::count_if(cases.begin(), cases.end(), [](const sg::Case& c) { return c.ok; }));
  EXPECT_EQ(exact, ok_cases * paths.size());
  std::printf("%s: %zu cases x %zu paths (%zu runs), %zu byte-exact in whole and in row ranges\n", preset.c_str(),
              cases.size(), paths.size(), runs, exact);
}

INSTANTIATE_TEST_SUITE_P(Schemes, CodecSchemePathsGolden,
                         ::testing::Values(QuantScheme::MXFP4A16, QuantScheme::FP8_DYNAMIC, QuantScheme::FP8_BLOCK,
                                           QuantScheme::W4A16),
                         [](const auto& p) {
                           std::string n(quant_scheme_preset(p.param));
                           n.erase(std::remove(n.begin(), n.end(), '_'), n.end());
                           return n;
                         });

TEST(CodecSchemePathsGolden, AnUnknownPathIsAUsageErrorListingTheValidOnes) {
  const std::uint16_t one[32] = {0x3f80};
  const nvfp4::WeightView w{reinterpret_cast<const std::byte*>(one), DType::BF16, 1, 32};
  for (QuantScheme s : {QuantScheme::MXFP4A16, QuantScheme::FP8_DYNAMIC, QuantScheme::FP8_BLOCK, QuantScheme::W4A16}) {
    auto r = encode_linear(s, w, "t", "NOPE");
    ASSERT_FALSE(r.ok()) << quant_scheme_name(s);
    EXPECT_EQ(r.error().code, Errc::USAGE);
    EXPECT_NE(r.error().message.find("scalar"), std::string::npos) << r.error().message;
  }
}

}  // namespace
}  // namespace fp4forge
