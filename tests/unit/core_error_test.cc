#include <gtest/gtest.h>

#include "fp4forge/core/dtype.h"
#include "fp4forge/core/error.h"

namespace fp4forge {
namespace {

TEST(Error, ExitCodesMatchDocumentedTable) {
  EXPECT_EQ((Error{Errc::CHECK_FAILED, "x", {}, {}}.exit_code()), 1);
  EXPECT_EQ((Error{Errc::USAGE, "x", {}, {}}.exit_code()), 2);
  EXPECT_EQ((Error{Errc::BAD_INPUT, "x", {}, {}}.exit_code()), 3);
  EXPECT_EQ((Error{Errc::IO, "x", {}, {}}.exit_code()), 4);
  EXPECT_EQ((Error{Errc::INTERNAL, "x", {}, {}}.exit_code()), 5);
  EXPECT_STREQ(errc_name(Errc::BAD_INPUT), "bad_input");
}

TEST(Error, DescribeAddsContextOnce) {
  Error e{Errc::BAD_INPUT, "bad shape", "a.safetensors", "w"};
  EXPECT_EQ(e.describe(), "a.safetensors: tensor 'w': bad shape");
  Error f{Errc::BAD_INPUT, "a.safetensors: bad", "a.safetensors", {}};
  EXPECT_EQ(f.describe(), "a.safetensors: bad");
}

TEST(Error, DescribeElidesOverlongMessages) {
  Error e{Errc::BAD_INPUT, "tensor '" + std::string(100000, 'x') + "': bad", {}, {}};
  const std::string d = e.describe();
  EXPECT_LE(d.size(), 1600u);
  EXPECT_NE(d.find("bytes elided"), std::string::npos);
  EXPECT_EQ(d.substr(0, 8), "tensor '");
  EXPECT_EQ(d.substr(d.size() - 6), "': bad");
}

Result<int> half(int x) {
  if (x % 2) return make_error(Errc::BAD_INPUT, "{} is odd", x);
  return x / 2;
}
Result<int> quarter(int x) {
  FP4FORGE_ASSIGN_OR_RETURN(int h, half(x));
  return half(h);
}

TEST(Result, PropagatesErrors) {
  EXPECT_EQ(*quarter(8), 2);
  auto r = quarter(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "3 is odd");
}

TEST(DType, NamesRoundTripAndWriteOrder) {
  for (int i = 0; i < kDTypeCount; ++i) {
    auto t = static_cast<DType>(i);
    EXPECT_EQ(parse_dtype(dtype_name(t)), t);
  }
  EXPECT_FALSE(parse_dtype("F128").has_value());
  // Reference write order: U64 first ... F32 before BF16 before F8_E4M3 before U8 ... BOOL last.
  EXPECT_LT(dtype_write_rank(DType::U64), dtype_write_rank(DType::F32));
  EXPECT_LT(dtype_write_rank(DType::F32), dtype_write_rank(DType::BF16));
  EXPECT_LT(dtype_write_rank(DType::BF16), dtype_write_rank(DType::F8_E4M3));
  EXPECT_LT(dtype_write_rank(DType::F8_E4M3), dtype_write_rank(DType::U8));
  EXPECT_EQ(dtype_write_rank(DType::BOOL), kDTypeCount - 1);
  EXPECT_EQ(dtype_bits(DType::F4), 4u);
  EXPECT_EQ(dtype_bits(DType::BF16), 16u);
}

}  // namespace
}  // namespace fp4forge
