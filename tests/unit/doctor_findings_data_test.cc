// Findings as data: each tests/data/findings/*.json names a fixture, the edits that break it, the command that
// checks it (doctor's diagnosis, or verify of its quantized output) and every finding expected, in order, with its
// kind, severity and exact message. One test replays them all (as DuckDB keeps its SQL tests): a new case is a
// file, a changed message is a reviewed diff of one.
//
// Case file:
//   {"fixture": "llama",                       tests/data/<fixture>, copied to a temp folder
//    "quantize": true,                         optional: check quantize's output (default scheme and observer)
//    "edits": [{"merge": "config.json", "with": {...}},   JSON merge patch (RFC 7386) of a JSON file
//              {"remove": "tokenizer.json"},
//              {"write": "FILE", "text": "..."}],
//    "command": "doctor" | "verify",           verify: verify_checkpoint, with --against the fixture if quantized
//    "findings": [{"kind": "...", "severity": "error", "message": "..."}]}
// "{dir}" in a message stands for the checked folder. FP4FORGE_FINDINGS_RECORD=1 writes what was found into the
// case file (to author one), and fails the case so that a recorded file is always read before it lands.
#include <cstdlib>
#include <fstream>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fp4forge/core/finding_kinds.h"
#include "fp4forge/diagnose/diagnose.h"
#include "fp4forge/quantize/run.h"
#include "fp4forge/safetensors/checkpoint.h"
#include "fp4forge/verify/verify.h"
#include "test_util.h"

namespace fp4forge {
namespace {

namespace stdfs = std::filesystem;
using ojson = nlohmann::ordered_json;
using testutil::TempDir;

const stdfs::path kCases = stdfs::path(FP4FORGE_TEST_DATA) / "findings";

std::vector<std::string> case_names() {
  std::vector<std::string> names;
  for (const auto& e : stdfs::directory_iterator(kCases))
    if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (std::size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
}

/** Writes `hex` at byte `at` of tensor `name`'s data, in whichever shard of `dir` holds it (safetensors: an 8-byte
 * little-endian header length, the JSON header with each tensor's data_offsets, then the data). */
void poke(const stdfs::path& dir, const std::string& name, std::uint64_t at, const std::string& hex) {
  for (const auto& e : stdfs::directory_iterator(dir)) {
    if (e.path().extension() != ".safetensors") continue;
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    unsigned char len[8];
    f.read(reinterpret_cast<char*>(len), 8);
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | len[i];
    std::string header(n, '\0');
    f.read(header.data(), static_cast<std::streamsize>(n));
    const nlohmann::json h = nlohmann::json::parse(header);
    if (!h.contains(name)) continue;
    const std::uint64_t begin = h[name]["data_offsets"][0].get<std::uint64_t>();
    ASSERT_LE(at + hex.size() / 2, h[name]["data_offsets"][1].get<std::uint64_t>() - begin) << name;
    f.seekp(static_cast<std::streamoff>(8 + n + begin + at));
    for (std::size_t i = 0; i + 1 < hex.size(); i += 2) f.put(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    return;
  }
  FAIL() << "no shard of " << dir << " holds " << name;
}

void apply_edits(const stdfs::path& dir, const ojson& edits) {
  for (const auto& e : edits) {
    if (e.contains("merge")) {
      const stdfs::path p = dir / e["merge"].get<std::string>();
      nlohmann::json j = nlohmann::json::parse(testutil::slurp(p));
      j.merge_patch(e["with"]);
      std::ofstream(p, std::ios::binary | std::ios::trunc) << j.dump(2) << "\n";
    } else if (e.contains("set")) {
      const stdfs::path p = dir / e["set"].get<std::string>();
      nlohmann::json j = nlohmann::json::parse(testutil::slurp(p));
      j[nlohmann::json::json_pointer(e["at"].get<std::string>())] = e["value"];
      std::ofstream(p, std::ios::binary | std::ios::trunc) << j.dump(2) << "\n";
    } else if (e.contains("poke")) {
      poke(dir, e["poke"].get<std::string>(), e["at"].get<std::uint64_t>(), e["hex"].get<std::string>());
    } else if (e.contains("remove")) {
      ASSERT_TRUE(stdfs::remove(dir / e["remove"].get<std::string>())) << e.dump();
    } else if (e.contains("write")) {
      std::ofstream(dir / e["write"].get<std::string>(), std::ios::binary | std::ios::trunc)
          << e["text"].get<std::string>();
    } else {
      FAIL() << "unknown edit " << e.dump();
    }
  }
}

/** The findings the case's command reports on `dir` (`source`: the fixture it was quantized from, or empty). */
std::vector<Finding> run_command(const std::string& command, const stdfs::path& dir, const stdfs::path& source) {
  if (command == "doctor") {
    auto d = doctor::diagnose(dir);
    EXPECT_TRUE(d.ok()) << (d.ok() ? "" : d.error().describe());
    return d.ok() ? (*d)->findings : std::vector<Finding>{};
  }
  EXPECT_EQ(command, "verify");
  auto q = Checkpoint::open(dir);
  EXPECT_TRUE(q.ok()) << (q.ok() ? "" : q.error().describe());
  if (!q.ok()) return {};
  std::optional<Checkpoint> src;
  if (!source.empty()) {
    auto s = Checkpoint::open(source);
    EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().describe());
    if (!s.ok()) return {};
    src.emplace(std::move(*s));
  }
  VerifyOptions opts;
  opts.jobs = 1;
  auto rep = verify_checkpoint(*q, src ? &*src : nullptr, opts);
  EXPECT_TRUE(rep.ok()) << (rep.ok() ? "" : rep.error().describe());
  return rep.ok() ? rep->findings : std::vector<Finding>{};
}

class FindingsData : public ::testing::TestWithParam<std::string> {};

TEST_P(FindingsData, Replays) {
  const stdfs::path file = kCases / (GetParam() + ".json");
  ojson c = ojson::parse(testutil::slurp(file));
  TempDir tmp;
  const stdfs::path fixture = stdfs::path(FP4FORGE_TEST_DATA) / c["fixture"].get<std::string>();
  stdfs::path dir = tmp.path / "ckpt";
  stdfs::path source;
  if (c.value("quantize", false)) {
    quant::QuantizeParams p;
    p.src = fixture;
    p.dst = dir;
    p.run.jobs = 1;
    auto r = quant::quantize(p);
    ASSERT_TRUE(r.ok()) << r.error().describe();
    source = fixture;
  } else {
    stdfs::copy(fixture, dir, stdfs::copy_options::recursive);
  }
  apply_edits(dir, c.value("edits", ojson::array()));
  const std::vector<Finding> found = run_command(c["command"].get<std::string>(), dir, source);

  ojson actual = ojson::array();
  for (const auto& f : found) {
    std::string message = f.message;
    replace_all(message, dir.string(), "{dir}");
    actual.push_back({{"kind", f.kind}, {"severity", severity_name(f.severity)}, {"message", message}});
    // Built from the one registry: a known kind, and a fix only where doctor --fix has one.
    const FindingKind* k = find_finding_kind(f.kind);
    ASSERT_NE(k, nullptr) << f.kind;
    EXPECT_TRUE(!f.fix || k->fixable) << f.kind << " carries a fix but its row is not fixable";
  }
  if (std::getenv("FP4FORGE_FINDINGS_RECORD") != nullptr) {
    c["findings"] = actual;
    std::ofstream(file, std::ios::binary | std::ios::trunc) << c.dump(2) << "\n";
    FAIL() << "recorded " << file << ": read it, then run without FP4FORGE_FINDINGS_RECORD";
  }
  ASSERT_TRUE(c.contains("findings")) << file;
  EXPECT_EQ(actual.dump(2), c["findings"].dump(2)) << file;
}

INSTANTIATE_TEST_SUITE_P(Cases, FindingsData, ::testing::ValuesIn(case_names()),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string n = p.param;
                           for (char& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace fp4forge
