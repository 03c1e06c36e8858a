// The resume manifest is written as text (a worker thread must not destroy a json object while a bad_alloc
// unwinds): the text is what nlohmann's dump(1) writes for the same records, and the next run reads it back.
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fp4forge/quantize/manifest.h"
#include "fp4forge/util/fs.h"
#include "test_util.h"

namespace fp4forge::quant {
namespace {

std::string written(const std::filesystem::path& dir) {
  auto text = fs::read_file(dir / ResumeManifest::kFileName, 1u << 20);
  return text ? *text : std::string("<unreadable>");
}

TEST(QuantizeManifest, TextIsNlohmannsDumpAndReadsBack) {
  testutil::TempDir t;
  ResumeManifest m(t.path, 0x00ab'cdef'0123'4567ULL);
  const std::string odd = "model \"q\"\\\x01-\xc3\xa9.safetensors";
  ASSERT_TRUE(m.record("model-00002-of-00002.safetensors", {123, 0xffff'0000'ffff'0000ULL}).ok());
  nlohmann::json j = {{"plan", "00abcdef01234567"}, {"shards", nlohmann::json::object()}};
  j["shards"]["model-00002-of-00002.safetensors"] = {{"size", 123}, {"digest", "ffff0000ffff0000"}};
  EXPECT_EQ(written(t.path), j.dump(1));
  m.keep(odd, {0, 7});
  ASSERT_TRUE(m.record("a.safetensors", {1, 2}).ok());
  j["shards"][odd] = {{"size", 0}, {"digest", "0000000000000007"}};
  j["shards"]["a.safetensors"] = {{"size", 1}, {"digest", "0000000000000002"}};
  EXPECT_EQ(written(t.path), j.dump(1));
  EXPECT_EQ(nlohmann::json::parse(written(t.path)), j);
  // The next run, same plan, finds every record; another plan finds none and says so to the caller (which refuses).
  ResumeManifest next(t.path, 0x00ab'cdef'0123'4567ULL);
  std::vector<std::string> warnings;
  next.load_previous(warnings);
  EXPECT_TRUE(warnings.empty());
  ASSERT_NE(next.previous(odd), nullptr);
  EXPECT_EQ(next.previous(odd)->digest, 7u);
  ASSERT_NE(next.previous("model-00002-of-00002.safetensors"), nullptr);
  EXPECT_EQ(next.previous("model-00002-of-00002.safetensors")->size, 123u);
  EXPECT_TRUE(next.load_previous(warnings));
  ResumeManifest other(t.path, 1);
  EXPECT_FALSE(other.load_previous(warnings));
  EXPECT_EQ(other.previous("a.safetensors"), nullptr);
  EXPECT_TRUE(warnings.empty());
}

}  // namespace
}  // namespace fp4forge::quant
