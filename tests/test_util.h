#pragma once
// Helpers shared by the tests that run the CLI: temp dirs, reading files, shell quoting, running
// the fp4forge binary with stdout/stderr captured.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp4forge/util/backup.h"
#include "temp_dir.h"

namespace fp4forge::testutil {

namespace stdfs = std::filesystem;

inline const std::string kData = FP4FORGE_TEST_DATA;
inline const std::string kCli = FP4FORGE_CLI;

inline std::string slurp(const stdfs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/** Single-quotes a path for the shell. */
inline std::string q(const stdfs::path& p) {
  std::string s;
  s.reserve(p.native().size() + 2);
  s.push_back('\'');
  s.append(p.native());
  s.push_back('\'');
  return s;
}

/** Runs the CLI with `args` (shell words) after the shell text `prefix` (a `cd DIR &&`, `VAR=value`
 * assignments); returns the exit code, captures stdout / stderr. */
inline int run_cli_with(const std::string& prefix, const std::string& args, std::string* out = nullptr,
                        std::string* err = nullptr) {
  static int counter = 0;
  const stdfs::path base = stdfs::temp_directory_path() /
                           ("fp4forge-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  const std::string cmd =
      prefix + " " + kCli + " " + args + " >'" + base.string() + ".out' 2>'" + base.string() + ".err'";
  const int st = std::system(cmd.c_str());
  if (out) *out = slurp(base.string() + ".out");
  if (err) *err = slurp(base.string() + ".err");
  std::error_code ec;
  stdfs::remove(base.string() + ".out", ec);
  stdfs::remove(base.string() + ".err", ec);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/** Runs the CLI with `args` (shell words); returns the exit code, captures stdout / stderr. */
inline int run_cli(const std::string& args, std::string* out = nullptr, std::string* err = nullptr) {
  return run_cli_with("", args, out, err);
}

/** The regular files of a folder, fp4forge's backups left out: name -> bytes. */
inline std::map<std::string, std::string> file_contents(const stdfs::path& dir) {
  std::map<std::string, std::string> m;
  for (const auto& e : stdfs::directory_iterator(dir))
    if (e.is_regular_file() && !backup::is_backup_name(e.path().filename().string()))
      m[e.path().filename().string()] = slurp(e.path());
  return m;
}

/** The names that differ between two name -> value maps: " -name" (only in a), " ~name" (values differ),
 * " +name" (only in b); "" when the maps are equal. */
template <class V>
std::string changed_names(const std::map<std::string, V>& a, const std::map<std::string, V>& b) {
  std::string s;
  for (const auto& [n, v] : a) {
    if (!b.count(n)) s += " -" + n;
    else if (b.at(n) != v) s += " ~" + n;
  }
  for (const auto& [n, v] : b)
    if (!a.count(n)) s += " +" + n;
  return s;
}

/** `n` as a gtest parameter name: every character but [A-Za-z0-9] becomes '_' ("qwen3_5-moe-mm" ->
 * "qwen3_5_moe_mm"). */
inline std::string test_name(std::string n) {
  for (char& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

/** Every fixture directory of tests/data that holds a config.json, sorted (found at run time, so a new fixture is
 * covered by adding it). */
inline std::vector<std::string> fixture_names() {
  std::vector<std::string> out;
  for (const auto& e : stdfs::directory_iterator(kData))
    if (e.is_directory() && stdfs::exists(e.path() / "config.json")) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

/** A string field of a JSON object, or "" (written out: GCC's -Wnull-dereference misfires inside
 * json::value() once inlined). */
inline std::string str_field(const nlohmann::json& f, const std::string& k) {
  const auto it = f.find(k);
  return it != f.end() && it->is_string() ? it->get<std::string>() : std::string();
}

/** The error findings of a --json report (and any reencode-mismatch: a byte difference from the reference
 * encoders, which fp4forge's own output never has), one line each; "" when there are none. */
inline std::string failing_findings(const std::string& json_text) {
  const auto j = nlohmann::json::parse(json_text, nullptr, false);
  if (j.is_discarded()) return "unparseable --json output: " + json_text.substr(0, 300);
  const auto& field = str_field;
  std::string s;
  if (j.contains("findings"))
    for (const auto& f : j["findings"])
      if (field(f, "severity") == "error" || field(f, "kind") == "reencode-mismatch")
        s += field(f, "kind") + ": " + field(f, "message") + "\n";
  return s;
}

/** The warning kinds of a --json report. */
inline std::set<std::string> warning_kinds(const nlohmann::json& j) {
  std::set<std::string> k;
  if (j.contains("findings"))
    for (const auto& f : j["findings"])
      if (str_field(f, "severity") == "warning") k.insert(str_field(f, "kind"));
  return k;
}

/** `fp4forge quantize SRC DST FLAGS -j 2 --json`; a family whose routed experts vLLM cannot load quantized is run
 * again with them kept (--ignore 're:.*experts'), as its users must. */
inline int quantize_json(const std::string& src, const stdfs::path& dst, const std::string& flags, std::string* out,
                         std::string* err) {
  const std::string base = "quantize " + q(src) + " " + q(dst) + " " + flags + " -j 2 --json";
  int rc = run_cli(base, out, err);
  if (rc == 3 && err->find("cannot be served quantized") != std::string::npos) {
    stdfs::remove_all(dst);
    rc = run_cli(base + " --ignore 're:.*experts'", out, err);
  }
  return rc;
}

}  // namespace fp4forge::testutil
