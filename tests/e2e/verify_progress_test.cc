// The library reports progress to a ProgressSink and never draws (issue 15): quantize and
// verify --against begin once, count in the unit of their totals, reach exactly the totals and finish.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <string>

#include "fp4forge/safetensors/checkpoint.h"
#include "fp4forge/quantize/run.h"
#include "fp4forge/util/progress_sink.h"
#include "fp4forge/verify/verify.h"
#include "test_util.h"

namespace fp4forge {
namespace {

struct CountingSink : ProgressSink {
  std::mutex mu;
  std::string label;
  std::uint64_t total_bytes = 0, total_items = 0;
  std::atomic<std::uint64_t> bytes{0}, items{0};
  int begins = 0, finishes = 0;
  void begin(std::string_view l, std::uint64_t b, std::uint64_t i) override {
    std::lock_guard lk(mu);
    label = std::string(l);
    total_bytes = b;
    total_items = i;
    ++begins;
  }
  void add(std::uint64_t b, std::uint64_t i) override {
    bytes += b;
    items += i;
  }
  void set_detail(std::string_view) override {}
  void finish() override {
    std::lock_guard lk(mu);
    ++finishes;
  }
};

/** One job reported completely: begun once, ended, counted in its totals' unit up to the totals. */
void expect_complete(const CountingSink& s, const char* label) {
  EXPECT_EQ(s.begins, 1);
  EXPECT_GE(s.finishes, 1);
  EXPECT_EQ(s.label, label);
  EXPECT_GT(s.total_bytes, 0u);
  EXPECT_EQ(s.bytes.load(), s.total_bytes);
  EXPECT_EQ(s.items.load(), s.total_items);
}

TEST(VerifyProgress, QuantizeAndVerifyReachTheirTotals) {
  for (const char* fixture : {"llama", "qwen3_moe", "gemma4-moe-mm"}) {
    SCOPED_TRACE(fixture);
    testutil::TempDir t;
    const std::string src = testutil::kData + "/" + fixture;
    CountingSink qs;
    quant::QuantizeParams p;
    p.src = src;
    p.dst = t.path / "q";
    p.run.progress = &qs;
    p.run.jobs = 2;
    auto r = quant::quantize(p);
    ASSERT_TRUE(r.ok()) << r.error().message;
    expect_complete(qs, "quantize");
    EXPECT_EQ(r->summary->bytes_read, qs.total_bytes);

    auto q = Checkpoint::open(t.path / "q");
    auto s = Checkpoint::open(src);
    ASSERT_TRUE(q.ok() && s.ok());
    CountingSink vs;
    VerifyOptions vo;
    vo.progress = &vs;
    auto v = verify_checkpoint(*q, &*s, vo);
    ASSERT_TRUE(v.ok()) << v.error().message;
    EXPECT_TRUE(v->ok());
    expect_complete(vs, "verify");
    EXPECT_EQ(vs.finishes, 1);
  }
}

}  // namespace
}  // namespace fp4forge
