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

namespace fp4forge::qtest {

namespace stdfs = std::filesystem;

inline const std::string kData = FP4FORGE_TEST_DATA;
inline const std::string kCli = FP4FORGE_CLI;

/** A temporary directory removed at scope exit. */
struct TempDir {
  stdfs::path path;
  TempDir() {
    std::string tmpl = (stdfs::temp_directory_path() / "fp4forge-qtest.XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    stdfs::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

inline std::string slurp(const stdfs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/** Runs the CLI with `args` (shell words), stdout/stderr captured; returns the exit code. */
inline int run_cli(const std::string& args, std::string* out = nullptr, std::string* err = nullptr) {
  static int counter = 0;
  const stdfs::path base = stdfs::temp_directory_path() /
                           ("fp4forge-qtest-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  const std::string cmd = kCli + " " + args + " >'" + base.string() + ".out' 2>'" + base.string() + ".err'";
  const int st = std::system(cmd.c_str());
  if (out) *out = slurp(base.string() + ".out");
  if (err) *err = slurp(base.string() + ".err");
  std::error_code ec;
  stdfs::remove(base.string() + ".out", ec);
  stdfs::remove(base.string() + ".err", ec);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

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

inline std::string q(const stdfs::path& p) {
  std::string s;
  s.reserve(p.string().size() + 2);
  s.push_back('\'');
  s.append(p.string());
  s.push_back('\'');
  return s;
}

}  // namespace fp4forge::qtest
