// verify --against while another process truncates a shard it has mapped (issue 14 #4): the reads of
// the vanished pages give zeros, not SIGBUS, and verify reports "changed during the run" (BAD_INPUT)
// instead of a verdict built on zeros.
#include <unistd.h>

#include <gtest/gtest.h>

#include "../e2e/quantize_test_util.h"
#include "fp4forge/safetensors/checkpoint.h"
#include "fp4forge/quantize/plan.h"
#include "fp4forge/quantize/run.h"
#include "fp4forge/verify/verify.h"

namespace fp4forge {
namespace {

using namespace fp4forge::qtest;

TEST(VerifyFaults, SourceTruncatedWhileComparedIsBadInput) {
  for (const bool truncate_quantized : {false, true}) {
    SCOPED_TRACE(truncate_quantized ? "quantized shard truncated" : "source shard truncated");
    TempDir tmp;
    const stdfs::path src = tmp.path / "src", out = tmp.path / "out";
    copy_dir(kData + "/llama", src);
    {
      auto ck = Checkpoint::open(src);
      ASSERT_TRUE(ck.ok());
      auto plan = quant::make_plan(*ck, {});
      ASSERT_TRUE(plan.ok());
      ASSERT_TRUE(quant::run_plan(*ck, *plan, out, quant::RunOptions{}).ok());
    }
    auto q = Checkpoint::open(out);
    auto s = Checkpoint::open(src);
    ASSERT_TRUE(q.ok() && s.ok());
    {
      auto clean = verify_checkpoint(*q, &*s, {});
      ASSERT_TRUE(clean.ok());
      EXPECT_TRUE(clean->ok());
    }
    const stdfs::path victim = (truncate_quantized ? out : src) / "model-00003-of-00004.safetensors";
    ASSERT_EQ(::truncate(victim.c_str(), 1024), 0);
    auto r = verify_checkpoint(*q, &*s, {});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, Errc::BAD_INPUT);
    EXPECT_NE(r.error().message.find("changed during the run"), std::string::npos) << r.error().message;
    EXPECT_NE(r.error().message.find(victim.filename().string()), std::string::npos) << r.error().message;
  }
}

}  // namespace
}  // namespace fp4forge
