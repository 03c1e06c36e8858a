#pragma once
// Loader for the trimmed scheme golden files tests/data/golden/schemes/<SCHEME>.json (header-only,
// shared by the codec_<scheme>_golden_test.cc files). Each file holds the CPU reference of
// tools/golden/schemes_golden.py, which runs compressed-tensors 0.18's own functions unmodified:
//   {"scheme": ..., "format": ..., "cases": [
//     {"name": ..., "status": "ok" | "refused",
//      "inputs": [{"dtype": "BF16", "shape": [N, K], "hex": LE bytes, row-major}],
//      "saved":  [{"suffix": "weight_scale", "dtype": ..., "shape": [...], "hex": ...}]}]}
// ("saved" only for "ok" cases), parsed by the library (codec/scheme_golden.h); a malformed file fails the
// calling test.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fp4forge/codec/nvfp4.h"
#include "fp4forge/codec/scheme_golden.h"
#include "fp4forge/core/dtype.h"
#include "fp4forge/util/fs.h"

namespace fp4forge::schemes_golden {

// The library's loader (codec/scheme_golden.h) is the one parser of this schema; the tests use its types.
using Tensor = EncodedTensor;
using Case = SchemeGoldenCase;

/** Loads tests/data/golden/schemes/<scheme>.json; fails the test (and returns {}) on a bad file. */
inline std::vector<Case> load(const std::string& scheme) {
  const std::string path = std::string(FP4FORGE_TEST_DATA) + "/golden/schemes/" + scheme + ".json";
  auto set = load_scheme_golden(path);
  EXPECT_TRUE(set.ok()) << path << ": " << (set.ok() ? "" : set.error().message);
  if (!set.ok()) return {};
  EXPECT_EQ(quant_scheme_preset(set->scheme), scheme) << path;
  return std::move(set->cases);
}

/** "" when equal, else where the first difference is (for the failure message). */
inline std::string first_difference(const std::vector<std::byte>& want, const std::vector<std::byte>& got) {
  if (want.size() != got.size())
    return "size " + std::to_string(got.size()) + " != expected " + std::to_string(want.size());
  std::size_t diffs = 0, first = 0;
  for (std::size_t i = 0; i < want.size(); ++i)
    if (want[i] != got[i] && diffs++ == 0) first = i;
  if (diffs == 0) return {};
  char buf[96];
  std::snprintf(buf, sizeof buf, "%zu differing bytes, first at %zu: got %02x, expected %02x", diffs, first,
                static_cast<unsigned>(got[first]), static_cast<unsigned>(want[first]));
  return buf;
}

}  // namespace fp4forge::schemes_golden
