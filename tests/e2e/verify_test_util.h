#pragma once
// Helpers shared by the verify e2e tests: opening checkpoints, reading findings, and seeding defects into a
// written checkpoint (patching bytes in place, adding, replacing or dropping a tensor through the project's
// shard writer, editing config.json).
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fp4forge/codec/half.h"
#include "fp4forge/safetensors/checkpoint.h"
#include "fp4forge/safetensors/shard_writer.h"
#include "fp4forge/verify/verify.h"

namespace fp4forge::vtest {

namespace sfs = std::filesystem;
using Json = nlohmann::ordered_json;

inline std::vector<std::byte> bytes_of(std::span<const std::byte> s) { return {s.begin(), s.end()}; }

inline Json read_json(const sfs::path& p) {
  std::ifstream f(p);
  return Json::parse(f);
}
inline void write_json(const sfs::path& p, const Json& j) {
  std::ofstream f(p, std::ios::trunc);
  f << j.dump(2) << "\n";
}

inline Checkpoint open_ok(const sfs::path& p) {
  auto r = Checkpoint::open(p);
  EXPECT_TRUE(r.ok()) << r.error().describe();
  return std::move(r).value();
}

inline std::string dump(const std::vector<Finding>& fs) {
  std::string s;
  for (const auto& f : fs) s += fmt::format("  {} {}: {}\n", severity_name(f.severity), f.kind, f.message);
  return s;
}

inline const Finding* find_kind(const VerifyReport& r, std::string_view kind) {
  for (const auto& f : r.findings)
    if (f.kind == kind) return &f;
  return nullptr;
}

inline std::set<std::string> kinds(const VerifyReport& r) {
  std::set<std::string> k;
  for (const auto& f : r.findings) k.insert(f.kind);
  return k;
}

/** Overwrites bytes of tensor `name` at `offset` (inside the tensor) in place. */
inline void patch_tensor(const sfs::path& dir, const std::string& name, std::uint64_t offset,
                         std::span<const std::byte> b) {
  std::uint64_t file_off = 0;
  std::string shard;
  {
    Checkpoint c = open_ok(dir);
    const TensorRef* t = c.find(name);
    ASSERT_NE(t, nullptr) << name;
    ASSERT_LE(offset + b.size(), t->info->nbytes());
    file_off = c.shards()[t->shard].header().data_start() + t->info->begin + offset;
    shard = c.shard_names()[t->shard];
  }
  std::fstream f(dir / shard, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(file_off));
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  ASSERT_TRUE(f.good());
}

/**
 * Rewrites the shard holding `name`: the tensor replaced by `with` (nullopt: dropped), or, when `name` is
 * absent, `with` added to the shard of `beside`. The index follows (weight_map and total_size).
 */
inline void rewrite_tensor(const sfs::path& dir, const std::string& name,
                           std::optional<std::pair<st::OutTensor, std::vector<std::byte>>> with,
                           const std::string& beside = "") {
  std::vector<std::pair<st::OutTensor, std::vector<std::byte>>> all;
  std::string shard;
  std::int64_t delta = 0;
  {
    Checkpoint c = open_ok(dir);
    const TensorRef* at = c.find(name);
    if (!at) at = c.find(beside);
    ASSERT_NE(at, nullptr) << name << " / " << beside;
    shard = c.shard_names()[at->shard];
    for (const auto& r : c.tensors()) {
      if (r.shard != at->shard) continue;
      if (r.name == name) {
        delta -= static_cast<std::int64_t>(r.info->nbytes());
        continue;
      }
      all.push_back({{r.name, r.info->dtype, r.info->shape}, bytes_of(c.data(r))});
    }
  }
  if (with) {
    delta += static_cast<std::int64_t>(with->second.size());
    all.push_back(std::move(*with));
  }
  ASSERT_TRUE(st::write_safetensors(dir / shard, all).ok());
  const sfs::path index = dir / "model.safetensors.index.json";
  if (!sfs::exists(index)) return;
  Json idx = read_json(index);
  idx["weight_map"].erase(name);
  if (!all.empty() && with) idx["weight_map"][all.back().first.name] = shard;
  idx["metadata"]["total_size"] = idx["metadata"]["total_size"].get<std::int64_t>() + delta;
  write_json(index, idx);
}

/** Adds a tensor to the shard holding `beside` (shard rewritten, index updated). */
inline void add_tensor(const sfs::path& dir, const std::string& beside, st::OutTensor t, std::vector<std::byte> bytes) {
  const std::string name = t.name;
  rewrite_tensor(dir, name, std::make_pair(std::move(t), std::move(bytes)), beside);
}

/** Renames tensor `from` to `to` (same shard, dtype, shape and bytes; index updated): st2.py rename. */
inline void rename_tensor(const sfs::path& dir, const std::string& from, const std::string& to) {
  st::OutTensor t;
  std::vector<std::byte> bytes;
  std::string beside;  // another tensor of its shard: the renamed one goes back there
  {
    Checkpoint c = open_ok(dir);
    const TensorRef* r = c.find(from);
    ASSERT_NE(r, nullptr) << from;
    t = {to, r->info->dtype, r->info->shape};
    bytes = bytes_of(c.data(*r));
    for (const auto& o : c.tensors())
      if (o.shard == r->shard && o.name != from) beside = o.name;
  }
  ASSERT_FALSE(beside.empty()) << from << " is alone in its shard";
  rewrite_tensor(dir, from, std::nullopt);
  add_tensor(dir, beside, std::move(t), std::move(bytes));
}

/** Tensor `name` rewritten as `dtype` (F32, F16 or BF16) holding `values` repeated to fill its shape: st2.py vals. */
inline void write_values(const sfs::path& dir, const std::string& name, DType dtype, const std::vector<double>& values) {
  std::vector<std::uint64_t> shape;
  {
    Checkpoint c = open_ok(dir);
    const TensorRef* r = c.find(name);
    ASSERT_NE(r, nullptr) << name;
    shape = r->info->shape;
  }
  std::uint64_t n = 1;
  for (auto d : shape) n *= d;
  const std::size_t es = dtype == DType::F32 ? 4 : 2;
  std::vector<std::byte> b(static_cast<std::size_t>(n) * es);
  for (std::uint64_t i = 0; i < n; ++i) {
    const float v = static_cast<float>(values[i % values.size()]);
    if (dtype == DType::F32) {
      std::memcpy(b.data() + i * 4, &v, 4);
    } else {
      const std::uint16_t h = dtype == DType::BF16 ? half::float_to_bf16(v) : half::float_to_f16(v);
      std::memcpy(b.data() + i * 2, &h, 2);
    }
  }
  rewrite_tensor(dir, name, std::make_pair(st::OutTensor{name, dtype, shape}, std::move(b)));
}

/** Tensor `name` relabelled with `shape` (its bytes cut or zero-padded to fit): st2.py meta shape=. */
inline void relabel_tensor(const sfs::path& dir, const std::string& name, std::vector<std::uint64_t> shape) {
  st::OutTensor t;
  std::vector<std::byte> bytes;
  {
    Checkpoint c = open_ok(dir);
    const TensorRef* r = c.find(name);
    ASSERT_NE(r, nullptr) << name;
    bytes = bytes_of(c.data(*r));
    t = {name, r->info->dtype, shape};
  }
  std::uint64_t n = dtype_bits(t.dtype) / 8;
  for (auto d : shape) n *= d;
  bytes.resize(static_cast<std::size_t>(n));
  rewrite_tensor(dir, name, std::make_pair(std::move(t), std::move(bytes)));
}

inline void edit_config(const sfs::path& dir, const std::function<void(Json&)>& fn) {
  Json c = read_json(dir / "config.json");
  fn(c);
  write_json(dir / "config.json", c);
}

}  // namespace fp4forge::vtest
