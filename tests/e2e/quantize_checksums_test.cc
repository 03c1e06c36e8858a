// Outputs pinned byte for byte (issue 54: a refactor changes code, not outputs). For every fixture in tests/data
// (and the FP8 / MXFP4 sources under tests/data/fp8 and tests/data/mxfp4) and every scheme, quantize's exit
// code, the XXH3-64 of each written *.safetensors file and of config.json's quantization_config (compact dump)
// must equal tests/data/quantize_checksums.txt. The serving files (tokenizer, chat template, the rest of
// config.json) are left out: they change with the serving-file work, not with the quantization.
//
// A deliberate output change re-records the file: run this test with FP4FORGE_CHECKSUMS_RECORD=DIR (each
// fixture writes DIR/<fixture>.txt), then `cat DIR/*.txt | sort > tests/data/quantize_checksums.txt`, and
// say in the commit why the bytes moved.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace fp4forge {
namespace {

using namespace fp4forge::testutil;
namespace stdfs = std::filesystem;

constexpr const char* kSchemes[] = {"nvfp4a16", "mxfp4a16", "fp8-dynamic", "fp8-block", "w4a16"};
const std::string kPinned = kData + "/quantize_checksums.txt";

/** Fixture folders: tests/data/<name>, tests/data/fp8/<name>, tests/data/mxfp4/<name> (each with a config.json). */
std::vector<std::string> sources() {
  std::vector<std::string> out = fixture_names();
  for (const char* sub : {"fp8", "mxfp4"})
    for (const auto& e : stdfs::directory_iterator(kData + "/" + sub))
      if (e.is_directory() && stdfs::exists(e.path() / "config.json"))
        out.push_back(std::string(sub) + "/" + e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string xxh(const std::string& bytes) { return fmt::format("{:016x}", XXH3_64bits(bytes.data(), bytes.size())); }

/** The pinned lines of one fixture ("<fixture> <scheme> rc=<n>" and "<fixture> <scheme> <file> <xxh3>"). */
std::vector<std::string> compute(const std::string& fx) {
  std::vector<std::string> lines;
  for (const char* scheme : kSchemes) {
    TempDir tmp;
    const stdfs::path dst = tmp.path / "q";
    std::string out, err;
    const int rc = run_cli(fmt::format("quantize {} {} --scheme {} -j 2 --no-progress", q(kData + "/" + fx), q(dst), scheme),
                           &out, &err);
    lines.push_back(fmt::format("{} {} rc={}", fx, scheme, rc));
    if (rc != 0) continue;
    std::set<std::string> files;
    for (const auto& e : stdfs::directory_iterator(dst))
      if (e.path().extension() == ".safetensors") files.insert(e.path().filename().string());
    for (const auto& f : files) lines.push_back(fmt::format("{} {} {} {}", fx, scheme, f, xxh(slurp(dst / f))));
    const auto cfg = nlohmann::ordered_json::parse(slurp(dst / "config.json"), nullptr, false);
    const bool has = !cfg.is_discarded() && cfg.contains("quantization_config");
    lines.push_back(fmt::format("{} {} config.json:quantization_config {}", fx, scheme,
                                has ? xxh(cfg["quantization_config"].dump()) : std::string("absent")));
  }
  return lines;
}

class Checksums : public ::testing::TestWithParam<std::string> {};

TEST_P(Checksums, QuantizeOutputsAreThePinnedBytes) {
  const std::string fx = GetParam();
  const std::vector<std::string> got = compute(fx);
  if (const char* dir = std::getenv("FP4FORGE_CHECKSUMS_RECORD")) {
    std::string name = fx;
    std::replace(name.begin(), name.end(), '/', '+');
    std::ofstream f(stdfs::path(dir) / (name + ".txt"));
    for (const auto& l : got) f << l << '\n';
    GTEST_SKIP() << "recorded " << fx;
  }
  std::vector<std::string> want;
  std::istringstream in(slurp(kPinned));
  for (std::string l; std::getline(in, l);)
    if (l.compare(0, fx.size() + 1, fx + " ") == 0) want.push_back(l);
  ASSERT_FALSE(want.empty()) << fx << " has no line in " << kPinned << " (a new fixture: re-record, see the top of this file)";
  std::vector<std::string> sorted = got;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, want) << fx << ": the output bytes moved";
}

INSTANTIATE_TEST_SUITE_P(AllFixtures, Checksums, ::testing::ValuesIn(sources()),
                         [](const ::testing::TestParamInfo<std::string>& p) { return test_name(p.param); });

// The pinned file names only fixtures that exist, and it covers quantized outputs of every scheme.
TEST(Checksums, PinnedFileIsWholeAndCurrent) {
  const std::vector<std::string> fxs = sources();
  std::istringstream in(slurp(kPinned));
  std::set<std::string> quantized_schemes;
  std::size_t lines = 0;
  for (std::string l; std::getline(in, l); ++lines) {
    const std::string fx = l.substr(0, l.find(' '));
    EXPECT_NE(std::find(fxs.begin(), fxs.end(), fx), fxs.end()) << "stale line: " << l;
    if (l.size() > 5 && l.compare(l.size() - 5, 5, " rc=0") == 0) {
      const std::string rest = l.substr(fx.size() + 1);
      quantized_schemes.insert(rest.substr(0, rest.find(' ')));
    }
  }
  EXPECT_GT(lines, fxs.size());
  EXPECT_EQ(quantized_schemes.size(), std::size(kSchemes));
}

}  // namespace
}  // namespace fp4forge
