// W4A16 golden vectors (bytes compressed-tensors 0.18 writes under model_free_ptq, CPU reference)
// through the scalar reference encoder of fp4forge/codec/w4a16.h.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fp4forge/codec/w4a16.h"
#include "golden/schemes_golden_util.h"

namespace fp4forge::w4a16 {
namespace {

namespace sg = schemes_golden;

constexpr const char* kName = "model.layers.0.mlp.down_proj.weight";

void check_ok_case(const sg::Case& c, std::size_t* matched) {
  const nvfp4::WeightView w = c.view();
  const sg::Tensor* want_p = c.find("weight_packed");
  const sg::Tensor* want_s = c.find("weight_scale");
  const sg::Tensor* want_shape = c.find("weight_shape");
  ASSERT_NE(want_p, nullptr);
  ASSERT_NE(want_s, nullptr);
  ASSERT_NE(want_shape, nullptr);
  ASSERT_EQ(c.saved.size(), 3u);
  EXPECT_EQ(want_p->dtype, DType::I32);
  EXPECT_EQ(want_p->shape, (std::vector<std::uint64_t>{w.rows, packed_cols(w.cols)}));
  EXPECT_EQ(want_s->dtype, w.dtype);
  EXPECT_EQ(want_s->shape, (std::vector<std::uint64_t>{w.rows, scale_cols(w.cols)}));
  EXPECT_EQ(want_shape->dtype, DType::I64);
  EXPECT_EQ(want_shape->shape, (std::vector<std::uint64_t>{2}));
  std::vector<std::byte> got_p(packed_bytes(w.rows, w.cols)), got_s(scale_bytes(w.rows, w.cols, w.dtype));
  const Status st = encode(w, got_p.data(), got_s.data(), kName);
  ASSERT_TRUE(st.ok()) << st.error().message;
  const auto shape = weight_shape(w.rows, w.cols);
  std::vector<std::byte> got_shape(kShapeBytes);
  std::memcpy(got_shape.data(), shape.data(), kShapeBytes);  // little-endian host (as the data files)
  const std::string dp = sg::first_difference(want_p->bytes, got_p);
  const std::string ds = sg::first_difference(want_s->bytes, got_s);
  const std::string dsh = sg::first_difference(want_shape->bytes, got_shape);
  EXPECT_EQ(dp, "") << "weight_packed";
  EXPECT_EQ(ds, "") << "weight_scale";
  EXPECT_EQ(dsh, "") << "weight_shape";
  *matched += dp.empty() && ds.empty() && dsh.empty();
}

void check_refused_case(const sg::Case& c, std::size_t* matched) {
  std::vector<std::byte> p(c.input.shape[0] * c.input.shape[1]), s(p.size() * 4);
  const Status st = encode(c.view(), p.data(), s.data(), kName);
  ASSERT_FALSE(st.ok()) << "upstream refuses this shape";
  EXPECT_EQ(st.error().code, Errc::BAD_INPUT);
  EXPECT_NE(st.error().message.find("is not a multiple of 128"), std::string::npos) << st.error().message;
  ++*matched;
}

TEST(CodecW4a16Golden, EveryCaseByteExactOrRefused) {
  const std::vector<sg::Case> cases = sg::load("W4A16");
  ASSERT_GE(cases.size(), 18u);
  std::size_t matched = 0, refused = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE("W4A16/" + c.name);
    if (c.ok) {
      check_ok_case(c, &matched);
    } else {
      ++refused;
      check_refused_case(c, &matched);
    }
  }
  EXPECT_EQ(refused, 2u);
  EXPECT_EQ(matched, cases.size());
  std::printf("W4A16: %zu/%zu cases byte-exact or refused as upstream\n", matched, cases.size());
}

// The nibble layout on a hand-made row: scale 1 (amax 7.5), values -8..7 in column order.
TEST(CodecW4a16Golden, NibbleOrderLowestColumnInLowestNibble) {
  std::vector<float> row(128, 0.0f);
  for (int k = 1; k < 16; ++k) row[k] = static_cast<float>(k - 8);
  row[0] = -7.5f;   // rounds half to even: -8
  row[127] = 7.5f;  // amax 7.5 -> scale 7.5 / 7.5 = 1; +7.5 clamps to 7 first
  const nvfp4::WeightView w{reinterpret_cast<const std::byte*>(row.data()), DType::F32, 1, 128};
  std::vector<std::byte> p(packed_bytes(1, 128)), s(scale_bytes(1, 128, DType::F32));
  ASSERT_TRUE(encode(w, p.data(), s.data(), "t").ok());
  std::uint32_t w0, w1, w15;
  std::memcpy(&w0, p.data(), 4);
  std::memcpy(&w1, p.data() + 4, 4);
  std::memcpy(&w15, p.data() + 60, 4);
  EXPECT_EQ(w0, 0x76543210u);  // q + 8 = 0..7
  EXPECT_EQ(w1, 0xFEDCBA98u);  // q + 8 = 8..15
  EXPECT_EQ(w15, 0xF8888888u);  // zeros (8) and the clamped 7.5 (15) in the top nibble
  float scale;
  std::memcpy(&scale, s.data(), 4);
  EXPECT_EQ(scale, 1.0f);
}

}  // namespace
}  // namespace fp4forge::w4a16
