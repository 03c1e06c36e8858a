#pragma once
// Helpers for the model e2e tests (inspect, synth): temp dirs, running the CLI, reading JSON.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace fp4forge::mtest {

namespace stdfs = std::filesystem;
using testutil::kCli;
using testutil::kData;
using testutil::q;
using testutil::run_cli;
using testutil::slurp;
using testutil::TempDir;
using Json = nlohmann::ordered_json;

/** name -> shape of a fixture's tensors.json (tests/data/NAME.tensors.json). */
inline std::map<std::string, Json> fixture_shapes(const std::string& name) {
  std::map<std::string, Json> m;
  const Json list = Json::parse(slurp(kData + "/" + name + ".tensors.json"));
  for (const auto& [k, v] : list.items()) m[k] = v[2];
  return m;
}

/** Names with every `.N.` / `.N` index replaced by `*`, as a set. */
inline std::set<std::string> name_patterns(const std::set<std::string>& names) {
  static const std::regex digits(R"((^|\.)\d+(?=\.|$))");
  std::set<std::string> out;
  for (const auto& n : names) out.insert(std::regex_replace(n, digits, "$1*"));
  return out;
}

}  // namespace fp4forge::mtest
