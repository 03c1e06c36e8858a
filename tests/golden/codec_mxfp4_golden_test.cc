// MXFP4A16 golden vectors (bytes compressed-tensors 0.18 writes under model_free_ptq, CPU reference)
// through the scalar reference encoder of fp4forge/codec/mxfp4.h.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fp4forge/codec/half.h"
#include "fp4forge/codec/mxfp4.h"
#include "golden/schemes_golden_util.h"

namespace fp4forge::mxfp4 {
namespace {

namespace sg = schemes_golden;

constexpr const char* kName = "model.layers.0.mlp.down_proj.weight";

void check_ok_case(const sg::Case& c, std::size_t* matched) {
  const nvfp4::WeightView w = c.view();
  const sg::Tensor* want_p = c.find("weight_packed");
  const sg::Tensor* want_s = c.find("weight_scale");
  ASSERT_NE(want_p, nullptr);
  ASSERT_NE(want_s, nullptr);
  ASSERT_EQ(c.saved.size(), 2u);
  EXPECT_EQ(want_p->dtype, DType::U8);
  EXPECT_EQ(want_p->shape, (std::vector<std::uint64_t>{w.rows, w.cols / 2}));
  EXPECT_EQ(want_s->dtype, DType::U8);
  EXPECT_EQ(want_s->shape, (std::vector<std::uint64_t>{w.rows, scale_cols(w.cols)}));
  std::vector<std::byte> got_p(packed_bytes(w.rows, w.cols)), got_s(scale_bytes(w.rows, w.cols));
  const Status st = encode(w, got_p.data(), got_s.data(), kName);
  ASSERT_TRUE(st.ok()) << st.error().message;
  const std::string dp = sg::first_difference(want_p->bytes, got_p);
  const std::string ds = sg::first_difference(want_s->bytes, got_s);
  EXPECT_EQ(dp, "") << "weight_packed";
  EXPECT_EQ(ds, "") << "weight_scale";
  *matched += dp.empty() && ds.empty();
}

void check_refused_case(const sg::Case& c, std::size_t* matched) {
  std::vector<std::byte> p(c.input.shape[0] * c.input.shape[1]), s(p.size());
  const Status st = encode(c.view(), p.data(), s.data(), kName);
  ASSERT_FALSE(st.ok()) << "upstream refuses this shape";
  EXPECT_EQ(st.error().code, Errc::BAD_INPUT);
  EXPECT_NE(st.error().message.find("is not a multiple of 32"), std::string::npos) << st.error().message;
  ++*matched;
}

TEST(CodecMxfp4Golden, EveryCaseByteExactOrRefused) {
  const std::vector<sg::Case> cases = sg::load("MXFP4A16");
  ASSERT_GE(cases.size(), 18u);
  std::size_t matched = 0, refused = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE("MXFP4A16/" + c.name);
    if (c.ok) {
      check_ok_case(c, &matched);
    } else {
      ++refused;
      check_refused_case(c, &matched);
    }
  }
  EXPECT_EQ(refused, 2u);
  EXPECT_EQ(matched, cases.size());
  std::printf("MXFP4A16: %zu/%zu cases byte-exact or refused as upstream\n", matched, cases.size());
}

// The E8M0 rule on hand-picked maxima: 6 -> scale 1 (127), 7 = 1.75 * 4 rounds up (scale 2, 128),
// 6.96875 rounds down (127), 0 -> 2^-127 (0) except in F16, where 2^-127 underflows to 0 and the
// eps replacement stores 1.0 (127).
TEST(CodecMxfp4Golden, ScaleExponentRule) {
  std::uint8_t e = 0;
  float s = 0.0f;
  ASSERT_TRUE(group_scale(6.0f, DType::BF16, &e, &s));
  EXPECT_EQ(e, 127);
  EXPECT_EQ(s, 1.0f);
  ASSERT_TRUE(group_scale(7.0f, DType::BF16, &e, &s));
  EXPECT_EQ(e, 128);
  ASSERT_TRUE(group_scale(6.96875f, DType::BF16, &e, &s));
  EXPECT_EQ(e, 127);
  ASSERT_TRUE(group_scale(0.0f, DType::BF16, &e, &s));
  EXPECT_EQ(e, 0);
  EXPECT_EQ(s, 0x1p-127f);
  ASSERT_TRUE(group_scale(0.0f, DType::F16, &e, &s));
  EXPECT_EQ(e, 127);
  EXPECT_EQ(s, 1.0f);
  EXPECT_FALSE(group_scale(57344.0f, DType::F16, &e, &s));  // 1.75 * 2^15 rounds to 2^16 = inf in F16
}

TEST(CodecMxfp4Golden, RefusesAnOverflowingGroup) {
  std::vector<std::uint16_t> row(32, half::float_to_f16(1.0f));
  row[3] = half::float_to_f16(60000.0f);
  const nvfp4::WeightView w{reinterpret_cast<const std::byte*>(row.data()), DType::F16, 1, 32};
  std::vector<std::byte> p(16), s(1);
  const Status st = encode(w, p.data(), s.data(), "t");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, Errc::BAD_INPUT);
  EXPECT_NE(st.error().message.find("row 0, group 0"), std::string::npos) << st.error().message;
}

}  // namespace
}  // namespace fp4forge::mxfp4
