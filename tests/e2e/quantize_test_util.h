#pragma once
// Helpers shared by the quantize e2e and fault tests: temp dirs, running the CLI, hashing directories.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "test_util.h"

namespace fp4forge::qtest {

namespace stdfs = std::filesystem;
using testutil::kCli;
using testutil::kData;
using testutil::q;
using testutil::run_cli;
using testutil::slurp;
using testutil::TempDir;

/** Every regular file under `dir` (relative path -> bytes). */
inline std::map<std::string, std::string> dir_contents(const stdfs::path& dir) {
  std::map<std::string, std::string> m;
  for (const auto& e : stdfs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) m[stdfs::relative(e.path(), dir).string()] = slurp(e.path());
  return m;
}

/** Copies a fixture to a writable place. */
inline void copy_dir(const stdfs::path& from, const stdfs::path& to) {
  stdfs::create_directories(to);
  for (const auto& e : stdfs::directory_iterator(from))
    stdfs::copy_file(e.path(), to / e.path().filename());
}

}  // namespace fp4forge::qtest
