#pragma once
// Loader for the trimmed scheme golden files tests/data/golden/schemes/<SCHEME>.json (header-only,
// shared by the codec_<scheme>_golden_test.cc files). Each file holds the CPU reference of
// tools/golden/schemes_golden.py, which runs compressed-tensors 0.18's own functions unmodified:
//   {"scheme": ..., "format": ..., "cases": [
//     {"name": ..., "status": "ok" | "refused",
//      "inputs": [{"dtype": "BF16", "shape": [N, K], "hex": LE bytes, row-major}],
//      "saved":  [{"suffix": "weight_scale", "dtype": ..., "shape": [...], "hex": ...}]}]}
// ("saved" only for "ok" cases). Malformed files fail the calling test through gtest assertions.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fp4forge/codec/nvfp4.h"
#include "fp4forge/core/dtype.h"
#include "fp4forge/util/fs.h"

namespace fp4forge::schemes_golden {

struct Tensor {
  std::string suffix;  // saved tensors only: "weight", "weight_scale", ...
  DType dtype = DType::U8;
  std::vector<std::uint64_t> shape;
  std::vector<std::byte> bytes;
};

struct Case {
  std::string name;
  bool ok = false;  // false: upstream refused the tensor
  Tensor input;     // one member: these schemes are not fused
  std::vector<Tensor> saved;

  nvfp4::WeightView view() const {
    return {input.bytes.data(), input.dtype, input.shape.at(0), input.shape.at(1)};
  }
  /** The saved tensor with this suffix, or nullptr. */
  const Tensor* find(const std::string& suffix) const {
    for (const auto& t : saved)
      if (t.suffix == suffix) return &t;
    return nullptr;
  }
};

inline std::vector<std::byte> from_hex(const std::string& s) {
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  EXPECT_EQ(s.size() % 2, 0u) << "odd number of hex digits";
  std::vector<std::byte> out(s.size() / 2);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const int hi = digit(s[2 * i]), lo = digit(s[2 * i + 1]);
    EXPECT_TRUE(hi >= 0 && lo >= 0) << "bad hex digit at offset " << 2 * i;
    out[i] = static_cast<std::byte>(((hi < 0 ? 0 : hi) << 4) | (lo < 0 ? 0 : lo));
  }
  return out;
}

inline Tensor parse_tensor(const nlohmann::json& j) {
  Tensor t;
  if (j.contains("suffix")) t.suffix = j.at("suffix").get<std::string>();
  const auto dt = parse_dtype(j.at("dtype").get<std::string>());
  EXPECT_TRUE(dt.has_value()) << "unknown dtype " << j.at("dtype");
  t.dtype = dt.value_or(DType::U8);
  t.shape = j.at("shape").get<std::vector<std::uint64_t>>();
  t.bytes = from_hex(j.at("hex").get<std::string>());
  std::uint64_t n = 1;
  for (auto d : t.shape) n *= d;
  EXPECT_EQ(t.bytes.size() * 8, n * dtype_bits(t.dtype)) << "hex length vs shape of " << t.suffix;
  return t;
}

/** Loads tests/data/golden/schemes/<scheme>.json; fails the test (and returns {}) on a bad file. */
inline std::vector<Case> load(const std::string& scheme) {
  const std::string path = std::string(FP4FORGE_TEST_DATA) + "/golden/schemes/" + scheme + ".json";
  auto text = fs::read_file(path);
  EXPECT_TRUE(text.ok()) << path << ": " << (text.ok() ? "" : text.error().message);
  if (!text.ok()) return {};
  const auto doc = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(doc.is_discarded()) << path << ": not JSON";
  if (doc.is_discarded()) return {};
  EXPECT_EQ(doc.at("scheme").get<std::string>(), scheme) << path;
  std::vector<Case> cases;
  for (const auto& jc : doc.at("cases")) {
    Case c;
    c.name = jc.at("name").get<std::string>();
    const std::string status = jc.at("status").get<std::string>();
    EXPECT_TRUE(status == "ok" || status == "refused") << c.name << ": status " << status;
    c.ok = status == "ok";
    EXPECT_EQ(jc.at("inputs").size(), 1u) << c.name;
    c.input = parse_tensor(jc.at("inputs").at(0));
    EXPECT_EQ(c.input.shape.size(), 2u) << c.name;
    if (c.ok)
      for (const auto& js : jc.at("saved")) c.saved.push_back(parse_tensor(js));
    cases.push_back(std::move(c));
  }
  return cases;
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
