// FP8_DYNAMIC and FP8_BLOCK golden vectors (bytes compressed-tensors 0.18 writes under model_free_ptq,
// CPU reference) through the scalar reference encoders of fp4forge/codec/fp8.h.
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fp4forge/codec/fp8.h"
#include "golden/schemes_golden_util.h"

namespace fp4forge::fp8 {
namespace {

namespace sg = schemes_golden;

using EncodeFn = Status (*)(const nvfp4::WeightView&, std::byte*, std::byte*, std::string_view);

// One case byte-exact (weight, weight_scale, their dtypes and shapes); counts it in *matched.
void check_case(const std::string& scheme, const sg::Case& c, EncodeFn encode, bool block,
                std::size_t* matched) {
  SCOPED_TRACE(scheme + "/" + c.name);
  ASSERT_TRUE(c.ok) << "FP8 presets refuse no shape upstream";
  const nvfp4::WeightView w = c.view();
  const sg::Tensor* want_w = c.find("weight");
  const sg::Tensor* want_s = c.find("weight_scale");
  ASSERT_NE(want_w, nullptr);
  ASSERT_NE(want_s, nullptr);
  ASSERT_EQ(c.saved.size(), 2u);
  EXPECT_EQ(want_w->dtype, DType::F8_E4M3);
  EXPECT_EQ(want_w->shape, (std::vector<std::uint64_t>{w.rows, w.cols}));
  EXPECT_EQ(want_s->dtype, w.dtype);
  const std::vector<std::uint64_t> sshape =
      block ? std::vector<std::uint64_t>{block_scale_rows(w.rows), block_scale_cols(w.cols)}
            : std::vector<std::uint64_t>{w.rows, 1};
  EXPECT_EQ(want_s->shape, sshape);
  std::vector<std::byte> got_w(weight_bytes(w.rows, w.cols));
  std::vector<std::byte> got_s(block ? block_scale_bytes(w.rows, w.cols, w.dtype)
                                     : channel_scale_bytes(w.rows, w.dtype));
  const Status st = encode(w, got_w.data(), got_s.data(), "model.layers.0.mlp.down_proj.weight");
  ASSERT_TRUE(st.ok()) << st.error().message;
  const std::string dw = sg::first_difference(want_w->bytes, got_w);
  const std::string ds = sg::first_difference(want_s->bytes, got_s);
  EXPECT_EQ(dw, "") << "weight";
  EXPECT_EQ(ds, "") << "weight_scale";
  *matched += dw.empty() && ds.empty();
}

// Every case of `scheme`; returns how many matched.
std::size_t run_scheme(const std::string& scheme, EncodeFn encode, bool block) {
  const std::vector<sg::Case> cases = sg::load(scheme);
  EXPECT_FALSE(cases.empty()) << scheme;
  std::size_t matched = 0;
  for (const auto& c : cases) check_case(scheme, c, encode, block, &matched);
  EXPECT_EQ(matched, cases.size()) << scheme << ": " << matched << "/" << cases.size() << " cases matched";
  std::printf("%s: %zu/%zu cases byte-exact\n", scheme.c_str(), matched, cases.size());
  return matched;
}

TEST(CodecFp8Golden, Fp8DynamicEveryCaseByteExact) {
  EXPECT_GE(run_scheme("FP8_DYNAMIC", &encode_channel, false), 14u);
}

TEST(CodecFp8Golden, Fp8BlockEveryCaseByteExact) {
  EXPECT_GE(run_scheme("FP8_BLOCK", &encode_block, true), 13u);
}

TEST(CodecFp8Golden, RefusesWhatCannotBeEncoded) {
  const std::uint16_t inf_bf16[2] = {0x3f80, 0x7f80};
  std::byte wout[2], sout[2];
  for (EncodeFn f : {&encode_channel, &encode_block}) {
    nvfp4::WeightView w{reinterpret_cast<const std::byte*>(inf_bf16), DType::BF16, 1, 2};
    Status st = f(w, wout, sout, "t");
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error().code, Errc::BAD_INPUT);
    EXPECT_NE(st.error().message.find("non-finite value inf at row 0, column 1"), std::string::npos)
        << st.error().message;
    w.dtype = DType::I8;
    st = f(w, wout, sout, "t");
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error().code, Errc::BAD_INPUT);
    w = {reinterpret_cast<const std::byte*>(inf_bf16), DType::BF16, 0, 2};
    st = f(w, wout, sout, "t");
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.error().code, Errc::BAD_INPUT);
  }
}

TEST(CodecFp8Golden, E4m3RoundsToNearestEven) {
  EXPECT_EQ(e4m3_rne(448.0f), 0x7E);
  EXPECT_EQ(e4m3_rne(-448.0f), 0xFE);
  EXPECT_EQ(e4m3_rne(-0.0f), 0x80);
  EXPECT_EQ(e4m3_rne(1.0625f), 0x38);  // midpoint of 1.0 (0x38) and 1.125 (0x39): even
  EXPECT_EQ(e4m3_rne(1.1875f), 0x3A);  // midpoint of 1.125 and 1.25 (0x3A): even
  EXPECT_EQ(e4m3_rne(0x1p-10f), 0x00);  // half the smallest subnormal 2^-9: ties to 0
  EXPECT_EQ(e4m3_rne(-0x1p-11f), 0x80);
}

}  // namespace
}  // namespace fp4forge::fp8
