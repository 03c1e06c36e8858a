#pragma once
// The fault tests' one way to start the CLI in the background (to signal or kill it mid-run): stderr to `log`,
// stdout to `out_log` (both /dev/null by default).
#include <fcntl.h>
#include <sys/types.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "test_util.h"

namespace fp4forge::testutil {

inline pid_t spawn_cli(std::vector<std::string> args, const std::filesystem::path& log = "/dev/null",
                       const std::filesystem::path& out_log = "/dev/null") {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int devnull = ::open("/dev/null", O_WRONLY);
    const int err = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int out = ::open(out_log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(out >= 0 ? out : devnull, 1);
    ::dup2(err >= 0 ? err : devnull, 2);
    args.insert(args.begin(), kCli);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(kCli.c_str(), argv.data());
    ::_exit(127);
  }
  return pid;
}

}  // namespace fp4forge::testutil
