// Searched-observer vectors of the schemes beside NVFP4A16 (tests/data/golden/observers/
// memoryless_mse-<SCHEME>-<seed>.json): the bytes llm-compressor's model_free writes for W4A16 and MXFP4A16
// with `memoryless_mse`, computed by its own _grid_search_mse / _grid_search_eager / _calculate_error and
// compressed-tensors 0.18 on the GPU host (CPU bytes; whether CUDA agreed is recorded per case), converted
// by scripts/observers/convert_scheme_observer_golden.py.
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fp4forge/codec/observer.h"
#include "fp4forge/codec/scheme.h"
#include "fp4forge/codec/scheme_golden.h"
#include "fp4forge/codec/scheme_search.h"
#include "fp4forge/util/fs.h"
#include "fp4forge/util/thread_pool.h"
#include "schemes_golden_util.h"

namespace fp4forge {
namespace {

const std::string kDir = std::string(FP4FORGE_TEST_DATA) + "/golden/observers/";

struct File {
  std::string file;
  QuantScheme scheme;
};

const File kFiles[] = {
    {"memoryless_mse-W4A16-4242.json", QuantScheme::W4A16},
    {"memoryless_mse-W4A16-90210.json", QuantScheme::W4A16},
    {"memoryless_mse-MXFP4A16-4242.json", QuantScheme::MXFP4A16},
    {"memoryless_mse-MXFP4A16-90210.json", QuantScheme::MXFP4A16},
};

// Searches and encodes one case (the search on `pool` when given) and compares the saved tensors.
std::string run_case(QuantScheme s, const SchemeGoldenCase& c, ThreadPool* pool, Observer o = Observer::MEMORYLESS_MSE) {
  const auto v = c.view();
  std::vector<EncodedTensor> got;
  if (const auto spec = search_spec(o)) {
    auto m = searched_group_maxima(s, v, *spec, c.name, pool);
    if (!m.ok()) return c.ok ? "error: " + m.error().message : "";
    if (!c.ok) return "upstream refuses it, fp4forge searched it";
    auto e = encode_linear_maxima(s, v, m->data(), c.name);
    if (!e.ok()) return "encode error: " + e.error().message;
    got = std::move(e).value();
  } else {
    auto e = encode_linear(s, v, c.name);
    if (!e.ok()) return "error: " + e.error().message;
    got = std::move(e).value();
  }
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i].suffix == "weight_shape") continue;
    const EncodedTensor* want = c.find(got[i].suffix);
    if (want == nullptr) return "upstream saved no " + got[i].suffix;
    if (auto d = schemes_golden::first_difference(want->bytes, got[i].bytes); !d.empty()) return got[i].suffix + ": " + d;
  }
  return {};
}

TEST(CodecSchemeObserverGolden, EveryCaseIsByteExactSerialAndThreaded) {
  ThreadPool pool(4);
  for (const auto& f : kFiles) {
    auto set = load_scheme_golden(kDir + f.file);
    ASSERT_TRUE(set.ok()) << set.error().message;
    ASSERT_EQ(set->scheme, f.scheme) << f.file;
    ASSERT_GE(set->cases.size(), 18u) << f.file;
    for (const auto& c : set->cases) {
      EXPECT_EQ(run_case(f.scheme, c, nullptr), "") << f.file << " case " << c.name;
      EXPECT_EQ(run_case(f.scheme, c, &pool), "") << f.file << " case " << c.name << " (threaded search)";
    }
  }
}

TEST(CodecSchemeObserverGolden, TheSearchChangesBytesSoTheVectorsCanTellObserversApart) {
  // Min-max encoding of the same inputs differs from upstream's searched bytes on most random cases: the
  // comparison above would notice an observer that silently fell back to min-max.
  std::size_t differ = 0, cases = 0;
  for (const auto& f : kFiles) {
    auto set = load_scheme_golden(kDir + f.file);
    ASSERT_TRUE(set.ok());
    for (const auto& c : set->cases) {
      if (!c.ok) continue;
      ++cases;
      if (!run_case(f.scheme, c, nullptr, Observer::MINMAX).empty()) ++differ;
    }
  }
  EXPECT_GT(differ, cases / 2) << differ << " of " << cases;
}

TEST(CodecSchemeObserverGolden, TheFilesRecordTheObserverAndCoverEveryDtype) {
  for (const auto& f : kFiles) {
    auto text = fs::read_file(kDir + f.file);
    ASSERT_TRUE(text.ok());
    const auto doc = nlohmann::json::parse(*text);
    EXPECT_EQ(doc.at("observer"), "memoryless_mse") << f.file;
    std::set<std::string> dtypes;
    std::size_t refused = 0;
    for (const auto& c : doc.at("cases")) {
      dtypes.insert(c.at("inputs").at(0).at("dtype").get<std::string>());
      refused += c.at("status") == "refused";
    }
    EXPECT_EQ(dtypes, (std::set<std::string>{"BF16", "F16", "F32"})) << f.file;
    EXPECT_GE(refused, 2u) << f.file << ": K not a multiple of the group is refused upstream";
  }
}

TEST(TorchCpuSum, SmallRowsTakeTheFourWayScalarCascadeAndVectorsAddHalves) {
  const float big = 0x1p24f;  // ulp 2: a lone +1 rounds away
  // 8 values, less than one BF16 vector: partials (x0 + x4), (x1 + x5), (x2 + x6), (x3 + x7), added in order.
  // In element order every +1 would round away; the cascade adds the ones in pairs first.
  const std::vector<float> v = {big, 1.0f, 1.0f, 1.0f, 0.0f, 1.0f, 1.0f, 1.0f};
  EXPECT_EQ(torch_cpu_sum(v.data(), v.size(), DType::BF16), big + 6.0f);
  // 32 BF16 values: one vector; lane j = x[j] + x[j + 16] (its two float halves), then the lanes in order.
  std::vector<float> w(32, 0.0f);
  w[0] = big;
  w[1] = 1.0f;
  w[17] = 1.0f;  // lane 1 = 2 survives; adjacent pairs (x0 + x1, x16 + x17) would lose both ones
  EXPECT_EQ(torch_cpu_sum(w.data(), w.size(), DType::BF16), big + 2.0f);
  // F32: 16 floats per vector, so 32 values are two vectors added lane by lane: the same lanes here.
  EXPECT_EQ(torch_cpu_sum(w.data(), w.size(), DType::F32), big + 2.0f);
  EXPECT_EQ(torch_cpu_sum(w.data(), 0, DType::F32), 0.0f);
}

}  // namespace
}  // namespace fp4forge
