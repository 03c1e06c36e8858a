// Issue 29: on a narrow terminal the progress bar fits the width, so a redraw never wraps and leaves lines behind.
// The CLI runs on a pseudo-terminal 50 columns wide (as in a narrow tmux pane); every line it draws on it stays
// under 50 characters.
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_util.h"

namespace fp4forge {
namespace {

TEST(ProgressPty, TheBarFitsANarrowTerminal) {
  testutil::TempDir t;
  const std::string out = (t.path / "synth").string();
  winsize ws{};
  ws.ws_row = 24;
  ws.ws_col = 50;
  int master = -1;
  const pid_t pid = ::forkpty(&master, nullptr, nullptr, &ws);
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::unsetenv("COLUMNS");
    const std::string cli = testutil::kCli;
    ::execl(cli.c_str(), cli.c_str(), "synth", "--arch", "llama", "--size", "small", "--out", out.c_str(), "--seed",
            "3", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  std::string seen;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(master, buf, sizeof buf);
    if (n > 0) {
      seen.append(buf, static_cast<std::size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;  // EIO once the child closed the terminal
    }
  }
  ::close(master);
  int st = 0;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << seen;
  int bars = 0;
  std::size_t start = 0;
  while (start < seen.size()) {
    std::size_t end = seen.find_first_of("\r\n", start);
    if (end == std::string::npos) end = seen.size();
    const std::string seg = seen.substr(start, end - start);
    if (seg.find(" [") != std::string::npos && seg.find("synth") == 0) {
      ++bars;
      EXPECT_LT(seg.size(), 50u) << "'" << seg << "'";
    }
    start = end + 1;
  }
  EXPECT_GE(bars, 1) << seen.substr(0, 2000);
}

}  // namespace
}  // namespace fp4forge
