// Issue 55, plan's messages an operator trips over: the syntax line only where the syntax is wrong, an empty seat
// key named with its default, a unitless GPU size read as nvidia-smi's MiB in the hint, the docs' scheme line.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "fp4forge/kvplan/gpu.h"
#include "fp4forge/kvplan/seat.h"
#include "fp4forge/kvplan/vllm_version.h"

namespace fp4forge::kvplan {
namespace {

constexpr std::string_view kSeatSyntax = "expected NAME=DIR[:key=value,...]";
constexpr std::string_view kGpuSyntax = "expected ID=TOTAL[:used=SIZE]";

std::string seat_message(const std::string& text) {
  const auto r = parse_seat_arg(text);
  EXPECT_FALSE(r.ok()) << text;
  return r.ok() ? std::string() : r.error().message;
}

std::string gpu_message(const std::string& text) {
  const auto r = parse_gpu_arg(text);
  EXPECT_FALSE(r.ok()) << text;
  return r.ok() ? std::string() : r.error().message;
}

// A seat key with a bad value is an error about that value: no syntax line appended (it was on every error).
TEST(KvplanMessages, TheSeatSyntaxLineOnlyWhereTheSyntaxIsWrong) {
  for (const char* bad : {"x=/m:tp=0", "x=/m:kv_cache_dtype=int3", "x=/m:port=70000", "x=/m:bogus=2",
                          "x=/m:tp=1,tp=2", "x=/m:tp=2,gpu=0", "x=/m:vllm_version=0.99"}) {
    const std::string m = seat_message(bad);
    EXPECT_EQ(m.find(kSeatSyntax), std::string::npos) << bad << ": " << m;
    EXPECT_NE(m.find("invalid --seat"), std::string::npos) << m;
  }
  for (const char* bad : {"x", "=/m", "x y=/m", "x=/m:tp"}) {
    const std::string m = seat_message(bad);
    EXPECT_NE(m.find(kSeatSyntax), std::string::npos) << bad << ": " << m;
  }
}

// Tryout O-L5: `DIR,key=` was "cannot open checkpoint 'DIR,key=...'" (exit 4): the key list starts after a ':'.
TEST(KvplanMessages, AKeyListAfterACommaSaysItStartsAfterAColon) {
  const std::string m = seat_message("b=/no/such/qmw-nv,max_model_len=1024");
  EXPECT_NE(m.find("DIR '/no/such/qmw-nv' is followed by ',max_model_len': the key list starts after a ':'"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find(kSeatSyntax), std::string::npos) << m;
  // A folder whose name holds a comma is still a folder.
  EXPECT_TRUE(parse_seat_arg("b=/no/such/dir,notakey").ok());
}

// assume= takes the scheme parser's message, its suggestion included (issue 55 audit: `assume=nvfp4` got the list).
TEST(KvplanMessages, AnUnknownAssumedSchemeGetsTheNearest) {
  EXPECT_NE(seat_message("x=/m:assume=nvfp4").find("assume=nvfp4: unknown scheme 'nvfp4': did you mean nvfp4a16"),
            std::string::npos);
  EXPECT_NE(seat_message("x=/m:assume=fp8-blok").find("unknown scheme 'fp8-blok' (did you mean 'fp8-block'?)"),
            std::string::npos);
}

TEST(KvplanMessages, TheGpuSyntaxLineOnlyWhereTheSyntaxIsWrong) {
  for (const char* bad : {"0=96GiB:used=100GiB", "0=96GiB:reserved=96GiB", "0=96GiB:unified=maybe", "0=0GiB"}) {
    const std::string m = gpu_message(bad);
    EXPECT_EQ(m.find(kGpuSyntax), std::string::npos) << bad << ": " << m;
  }
  for (const char* bad : {"0", "0=96GiB:foo=1", "0=96GiB:used", "a b=96GiB"}) {
    const std::string m = gpu_message(bad);
    EXPECT_NE(m.find(kGpuSyntax), std::string::npos) << bad << ": " << m;
  }
}

// `vllm_version=` (and every other key given without a value) names the key, what it takes and its default.
TEST(KvplanMessages, AnEmptySeatKeyNamesTheKeyAndItsDefault) {
  for (const SeatKey& k : kSeatKeys) {
    if (k.key == "vllm_args") continue;  // the last key: an empty value is no extra flag
    SCOPED_TRACE(std::string(k.key));
    EXPECT_FALSE(k.dflt.empty());
    const std::string m = seat_message(fmt::format("s=/m:{}=", k.key));
    EXPECT_NE(m.find(fmt::format("{}= has no value", k.key)), std::string::npos) << m;
    EXPECT_NE(m.find(fmt::format("hint: leave the key out for its default ({}", k.key == "vllm_version" ? "0." : k.dflt)),
              std::string::npos)
        << m;
  }
  EXPECT_NE(seat_message("s=/m:vllm_version=").find(fmt::format("default ({}, the newest modelled", kNewestVllm)),
            std::string::npos);
}

// nvidia-smi's memory.total is MiB: `--gpu 0=98304` means 96 GiB, and the hint says so (it suggested 98304GiB).
TEST(KvplanMessages, AUnitlessGpuTotalLikeNvidiaSmisIsMiBInTheHint) {
  const std::string m = gpu_message("0=98304");
  EXPECT_NE(m.find("write 98304MiB (96.00 GiB)"), std::string::npos) << m;
  EXPECT_EQ(m.find("98304GiB"), std::string::npos) << m;
  EXPECT_EQ(m.find("98304GB"), std::string::npos) << m;
  const std::string h200 = gpu_message("0=143771");
  EXPECT_NE(h200.find("143771MiB (140.40 GiB)"), std::string::npos) << h200;
  const std::string small = gpu_message("0=96");  // a figure below 1024 is GiB or GB
  EXPECT_NE(small.find("96GiB or 96GB"), std::string::npos) << small;
  EXPECT_EQ(small.find("96MiB"), std::string::npos) << small;
  // An empty name= is refused as every empty value is (issue 55 tryout: accepted, the default reserve taken).
  EXPECT_NE(gpu_message("0=80GiB:name=").find("name= is empty"), std::string::npos) << gpu_message("0=80GiB:name=");
  ASSERT_TRUE(parse_gpu_arg("0=98304MiB").ok());
  EXPECT_EQ(parse_gpu_arg("0=98304MiB")->total_bytes, 96ull << 30);
  // A card's name where the total belongs: the name= key and both figures' source (issue 55 tryout G).
  const std::string named = gpu_message("0=H100");
  EXPECT_NE(named.find("hint: TOTAL comes first and a card's name after it, e.g. --gpu '0=81559MiB:name=H100'"),
            std::string::npos)
      << named;
}

// Each seat's compose stack binds host_port: port=, else 8000 + its index (the clash check and the stacks agree).
TEST(KvplanMessages, HostPortIsPortOrTheBasePlusTheIndex) {
  auto a = parse_seat_arg("a=/m");
  auto b = parse_seat_arg("b=/m:port=9000");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(host_port(*a, 0), 8000);
  EXPECT_EQ(host_port(*a, 3), 8003);
  EXPECT_EQ(host_port(*b, 3), 9000);
}

// docs/cli/plan.md said quantize "writes nvfp4a16 today": it writes five schemes (docs/cli/quantize.md).
TEST(KvplanMessages, ThePlanDocNamesTheSchemesQuantizeWrites) {
  std::ifstream in(std::string(FP4FORGE_TEST_DATA) + "/../../docs/cli/plan.md");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  ASSERT_FALSE(doc.empty());
  EXPECT_EQ(doc.find("today"), std::string::npos);
  EXPECT_NE(doc.find("`fp4forge quantize` writes each of them"), std::string::npos);
}

}  // namespace
}  // namespace fp4forge::kvplan
