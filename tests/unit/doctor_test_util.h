#pragma once
// Helpers for the doctor tests: fixture copies in a temp dir, JSON edits, a minimal safetensors shard
// rewriter (to build layout variants), file snapshots and hashes.
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "temp_dir.h"

namespace doctor_test {

namespace fsys = std::filesystem;
using Json = nlohmann::ordered_json;

inline std::string read(const fsys::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void write(const fsys::path& p, const std::string& s) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << s;
}

inline Json read_json(const fsys::path& p) { return Json::parse(read(p)); }

/** Writes like transformers' save_pretrained (indent 2, sorted keys as given, trailing newline). */
inline void write_json(const fsys::path& p, const Json& j) { write(p, j.dump(2) + "\n"); }

/** A fresh copy of tests/data/<name> in a unique temp dir, removed on destruction. */
class Fixture {
 public:
  explicit Fixture(const std::string& name) : dir_(root_.path / name) {
    fsys::copy(fsys::path(FP4FORGE_TEST_DATA) / name, dir_, fsys::copy_options::recursive);
  }
  Fixture(const Fixture&) = delete;
  Fixture& operator=(const Fixture&) = delete;

  const fsys::path& dir() const { return dir_; }
  fsys::path path(const std::string& f) const { return dir_ / f; }

  /** Edits config.json (written back in the transformers style). */
  void edit_config(const std::function<void(Json&)>& fn) { edit_json("config.json", fn); }
  /** The text config inside `cfg`. */
  static Json& text(Json& cfg) { return cfg.contains("text_config") ? cfg["text_config"] : cfg; }
  void edit_json(const std::string& file, const std::function<void(Json&)>& fn) {
    Json j = read_json(path(file));
    fn(j);
    write_json(path(file), j);
  }

  /** All regular files (name -> bytes). */
  std::map<std::string, std::string> snapshot() const {
    std::map<std::string, std::string> m;
    for (const auto& e : fsys::directory_iterator(dir_))
      if (e.is_regular_file()) m[e.path().filename().string()] = read(e.path());
    return m;
  }

  /** FNV-1a over every .safetensors file (name and bytes). */
  std::uint64_t safetensors_hash() const {
    std::uint64_t h = 1469598103934665603ull;
    auto mix = [&](const std::string& s) {
      for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    };
    for (const auto& [name, bytes] : snapshot()) {
      if (name.size() < 12 || name.substr(name.size() - 12) != ".safetensors") continue;
      mix(name);
      mix(bytes);
    }
    return h;
  }

  /** A tensor of a shard: dtype, shape and raw bytes. */
  struct Tensor {
    std::string dtype;
    std::vector<std::uint64_t> shape;
    std::string bytes;
  };
  using Tensors = std::map<std::string, Tensor>;

  static std::size_t dtype_size(const std::string& dt) {
    if (dt == "F32" || dt == "I32") return 4;
    if (dt == "BF16" || dt == "F16") return 2;
    if (dt == "F64" || dt == "I64") return 8;
    return 1;
  }

  /** Rewrites `shard` after `fn` edits its tensors, and keeps the index's weight_map in sync. */
  void rewrite_shard(const std::string& shard, const std::function<void(Tensors&)>& fn) {
    Tensors ts;
    if (fsys::exists(path(shard))) {
      const std::string file = read(path(shard));
      std::uint64_t n = 0;
      std::memcpy(&n, file.data(), 8);
      const Json h = Json::parse(file.substr(8, n));
      for (auto it = h.begin(); it != h.end(); ++it) {
        if (it.key() == "__metadata__") continue;
        const auto b = it.value()["data_offsets"][0].get<std::uint64_t>();
        const auto e = it.value()["data_offsets"][1].get<std::uint64_t>();
        ts[it.key()] = Tensor{it.value()["dtype"].get<std::string>(),
                              it.value()["shape"].get<std::vector<std::uint64_t>>(), file.substr(8 + n + b, e - b)};
      }
    }
    Tensors before = ts;
    fn(ts);
    Json h = Json::object();
    h["__metadata__"] = {{"format", "pt"}};
    std::string data;
    for (auto& [name, t] : ts) {
      std::uint64_t numel = 1;
      for (auto d : t.shape) numel *= d;
      t.bytes.resize(numel * dtype_size(t.dtype), '\0');
      h[name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
      data += t.bytes;
    }
    std::string hs = h.dump();
    while (hs.size() % 8) hs += ' ';
    std::string out(8, '\0');
    const std::uint64_t n = hs.size();
    std::memcpy(out.data(), &n, 8);
    write(path(shard), out + hs + data);
    const auto index = path("model.safetensors.index.json");
    if (fsys::exists(index)) {
      Json idx = read_json(index);
      for (const auto& [name, t] : before)
        if (!ts.count(name)) idx["weight_map"].erase(name);
      for (const auto& [name, t] : ts) idx["weight_map"][name] = shard;
      std::int64_t delta = 0;
      for (const auto& [name, t] : before) delta -= static_cast<std::int64_t>(t.bytes.size());
      for (const auto& [name, t] : ts) delta += static_cast<std::int64_t>(t.bytes.size());
      if (idx.contains("metadata") && idx["metadata"].contains("total_size"))
        idx["metadata"]["total_size"] = idx["metadata"]["total_size"].get<std::int64_t>() + delta;
      // transformers also writes total_parameters: kept in step, as a re-save without these tensors writes it
      std::int64_t dparams = 0;
      for (const auto& [name, t] : before) dparams -= static_cast<std::int64_t>(t.bytes.size() / dtype_size(t.dtype));
      for (const auto& [name, t] : ts) dparams += static_cast<std::int64_t>(t.bytes.size() / dtype_size(t.dtype));
      if (idx.contains("metadata") && idx["metadata"].contains("total_parameters"))
        idx["metadata"]["total_parameters"] = idx["metadata"]["total_parameters"].get<std::int64_t>() + dparams;
      write_json(index, idx);
    }
  }
  /** The shard holding `tensor` per the index. */
  std::string shard_of(const std::string& tensor) const {
    return read_json(path("model.safetensors.index.json"))["weight_map"][tensor].get<std::string>();
  }
  /** Removes tensors whose name starts with `prefix` from every shard (dropping emptied shards). */
  void remove_tensors(const std::string& prefix) {
    Json idx = read_json(path("model.safetensors.index.json"));
    std::map<std::string, int> shards;
    for (auto it = idx["weight_map"].begin(); it != idx["weight_map"].end(); ++it)
      if (it.key().rfind(prefix, 0) == 0) shards[it.value().get<std::string>()]++;
    for (const auto& [shard, n] : shards) {
      rewrite_shard(shard, [&](Tensors& ts) {
        for (auto it = ts.begin(); it != ts.end();) it = it->first.rfind(prefix, 0) == 0 ? ts.erase(it) : std::next(it);
      });
      bool empty = true;
      const Json now = read_json(path("model.safetensors.index.json"));
      for (const auto& [k, v] : now["weight_map"].items())
        if (v == shard) empty = false;
      if (empty) fsys::remove(path(shard));
    }
  }

 private:
  fp4forge::testutil::TempDir root_;  // declared first: dir_ lies inside it
  fsys::path dir_;
};

}  // namespace doctor_test
