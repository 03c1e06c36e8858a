// Searched-observer NVFP4A16 vectors (tests/data/golden/observers/<observer>-<seed>.json): the bytes
// llm-compressor's model_free writes with `nvfp4_expanded_mse` / `memoryless_mse`, computed by its own
// _grid_search_mse / _grid_search_eager / _calculate_error and compressed-tensors 0.18 on the GPU host
// (CPU and CUDA, identical on every case), converted by scripts/convert_observer_golden.py.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fp4forge/codec/golden.h"
#include "fp4forge/codec/nvfp4_search.h"
#include "fp4forge/codec/observer.h"
#include "fp4forge/util/fs.h"

namespace fp4forge::nvfp4 {
namespace {

const std::string kDir = std::string(FP4FORGE_TEST_DATA) + "/golden/observers/";

struct ObserverFile {
  std::string file;
  Observer observer;
};

const ObserverFile kFiles[] = {
    {"nvfp4_expanded_mse-4242.json", Observer::NVFP4_EXPANDED_MSE},
    {"nvfp4_expanded_mse-90210.json", Observer::NVFP4_EXPANDED_MSE},
    {"memoryless_mse-4242.json", Observer::MEMORYLESS_MSE},
    {"memoryless_mse-90210.json", Observer::MEMORYLESS_MSE},
};

std::string first_diff(const std::vector<std::byte>& got, const std::vector<std::byte>& want) {
  if (got.size() != want.size()) return fmt::format("size {} vs {}", got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i])
      return fmt::format("byte {}: 0x{:02x} vs upstream 0x{:02x}", i, static_cast<unsigned>(got[i]),
                         static_cast<unsigned>(want[i]));
  return {};
}

// Encodes a case with `observer` on a search path and compares every byte of every member.
std::string run_case(const GoldenCase& c, Observer observer, std::string_view path) {
  std::vector<std::string> names;
  for (std::size_t i = 0; i < c.members.size(); ++i) names.push_back(c.name + "." + std::to_string(i));
  const auto views = c.views();
  auto set = encode_fused_observed(views, names, observer, path);
  if (!set.ok()) return "error: " + set.error().message;
  for (std::size_t i = 0; i < c.members.size(); ++i) {
    const auto& m = c.members[i];
    const auto gs_bits = std::bit_cast<std::uint32_t>(set->global_scale);
    if (gs_bits != m.global_scale_bits)
      return fmt::format("member {}: global scale {:08x} vs upstream {:08x}", i, gs_bits, m.global_scale_bits);
    if (auto d = first_diff(set->members[i].scale, m.scale); !d.empty()) return fmt::format("member {} weight_scale {}", i, d);
    if (auto d = first_diff(set->members[i].packed, m.packed); !d.empty()) return fmt::format("member {} weight_packed {}", i, d);
  }
  return {};
}

TEST(CodecObserverGolden, EveryCaseIsByteExactOnEverySearchPath) {
  for (const auto& f : kFiles) {
    auto set = load_golden(kDir + f.file);
    ASSERT_TRUE(set.ok()) << set.error().message;
    ASSERT_GE(set->cases.size(), 18u) << f.file;
    for (const auto& c : set->cases)
      for (const auto& path : search_paths())
        EXPECT_EQ(run_case(c, f.observer, path), "") << f.file << " case " << c.name << " path " << path;
  }
}

TEST(CodecObserverGolden, TheFilesCoverDtypesFusedSetsAndTheConfigUpstreamWrites) {
  for (const auto& f : kFiles) {
    auto text = fs::read_file(kDir + f.file);
    ASSERT_TRUE(text.ok());
    const auto doc = nlohmann::json::parse(*text);
    // What llm-compressor writes for the observer: its registered name, no kwargs.
    EXPECT_EQ(doc.at("quantization_config_weights").at("observer"), std::string(observer_config_name(f.observer)));
    EXPECT_EQ(doc.at("quantization_config_weights").at("observer_kwargs"), nlohmann::json::object());
    for (const auto& [name, same] : doc.at("cuda_identical_to_cpu").items()) EXPECT_TRUE(same.get<bool>()) << name;
    auto set = load_golden(kDir + f.file);
    ASSERT_TRUE(set.ok());
    bool bf16 = false, f16 = false, f32 = false, fused = false;
    for (const auto& c : set->cases) {
      bf16 |= c.dtype == DType::BF16;
      f16 |= c.dtype == DType::F16;
      f32 |= c.dtype == DType::F32;
      fused |= c.members.size() > 1;
    }
    EXPECT_TRUE(bf16 && f16 && f32 && fused) << f.file;
    // Upstream refuses K % 16 != 0; so does the search.
    ASSERT_FALSE(doc.at("refused").empty());
    for (const auto& r : doc.at("refused")) {
      const auto shape = r.at("shape").get<std::vector<std::uint64_t>>();
      std::vector<std::byte> w(shape[0] * shape[1] * 2);
      const WeightView v{w.data(), DType::BF16, shape[0], shape[1]};
      const std::string n = r.at("name").get<std::string>();
      std::vector<WeightView> views{v};
      std::vector<std::string> names{n};
      auto res = encode_fused_observed(views, names, f.observer);
      ASSERT_FALSE(res.ok()) << n;
      EXPECT_EQ(res.error().code, Errc::BAD_INPUT);
      EXPECT_NE(res.error().message.find("not a multiple of 16"), std::string::npos) << res.error().message;
    }
  }
}

TEST(CodecObserverGolden, TheSearchChangesTheBytesMinMaxWouldWrite) {
  // The vectors are not min-max's: on random data the searched scales differ (a test of the test data).
  auto set = load_golden(kDir + std::string(kFiles[0].file));
  ASSERT_TRUE(set.ok());
  std::size_t differing = 0;
  for (const auto& c : set->cases) {
    std::vector<std::string> names(c.members.size(), c.name);
    const auto views = c.views();
    auto mm = encode_fused(views, names);
    ASSERT_TRUE(mm.ok());
    differing += mm->members[0].scale != c.members[0].scale;
  }
  EXPECT_GE(differing, 5u);
}

}  // namespace
}  // namespace fp4forge::nvfp4
