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

/** Runs the CLI with `args` on a pseudo-terminal `cols` wide; returns what it drew and its exit status. */
std::string run_on_pty(const std::vector<std::string>& args, unsigned short cols, int* status) {
  winsize ws{};
  ws.ws_row = 24;
  ws.ws_col = cols;
  int master = -1;
  const pid_t pid = ::forkpty(&master, nullptr, nullptr, &ws);
  if (pid < 0) return "forkpty failed";
  if (pid == 0) {
    ::unsetenv("COLUMNS");
    std::vector<char*> argv;
    const std::string cli = testutil::kCli;
    argv.push_back(const_cast<char*>(cli.c_str()));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(cli.c_str(), argv.data());
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
  *status = -1;
  ::waitpid(pid, status, 0);
  return seen;
}

// Issue 55: a report's prose lines (a quantize plan's warnings ran to 567 columns) are wrapped at the terminal's
// width on a terminal; a table row is left whole; piped, the same report keeps each item on one line.
void expect_wrapped_on_a_terminal_only(const std::vector<std::string>& args) {
  SCOPED_TRACE(args.front());
  int st = 0;
  const std::string seen = run_on_pty(args, 80, &st);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << seen;
  std::string piped, err;
  std::string cmd;
  for (const auto& a : args) cmd += testutil::q(a) + " ";
  ASSERT_EQ(testutil::run_cli(cmd, &piped, &err), 0) << err;
  std::size_t long_piped = 0;
  for (std::size_t at = 0, nl; at < piped.size(); at = nl + 1) {
    nl = piped.find('\n', at);
    if (nl == std::string::npos) nl = piped.size();
    if (nl - at > 80) ++long_piped;
  }
  ASSERT_GT(long_piped, 0u) << "the case needs prose over 80 columns";
  std::string words_pty, words_piped;  // the same words in the same order, only the breaks differ
  auto words = [](const std::string& s) {
    std::string w;
    bool space = true;
    for (char c : s) {
      const bool sp = c == ' ' || c == '\n' || c == '\r';
      if (!sp) w += c;
      else if (!space) w += ' ';
      space = sp;
    }
    return w;
  };
  EXPECT_EQ(words(seen), words(piped));
  for (std::size_t at = 0, nl; at < seen.size(); at = nl + 1) {
    nl = seen.find_first_of("\r\n", at);
    if (nl == std::string::npos) nl = seen.size();
    const std::string line = seen.substr(at, nl - at);
    std::size_t gaps = 0;  // a table row: two or more runs of 2+ spaces after the indent
    for (std::size_t p = line.find_first_not_of(' '); p != std::string::npos && p < line.size();) {
      const std::size_t g = line.find("  ", p);
      if (g == std::string::npos) break;
      ++gaps;
      p = line.find_first_not_of(' ', g);
    }
    if (gaps < 2) {
      EXPECT_LE(line.size(), 80u) << "'" << line << "'";
    }
  }
}

TEST(ReportPty, ProseIsWrappedAtTheTerminalWidth) {
  expect_wrapped_on_a_terminal_only(
      {"quantize", testutil::kData + "/gemma4-dense-mm", "--dry-run", "--scheme-for", "attention=fp8-block"});
  // plan too (issue 55 tryout: it wrapped at 100 columns into a pipe, and a pipe is one line per item).
  expect_wrapped_on_a_terminal_only({"plan", "--seat", "chat=" + testutil::kData + "/llama", "--gpu",
                                     "0=80GiB:name=NVIDIA H100 80GB HBM3"});
}

// The error, warning and note lines on stderr too (issue 55 audit: a refusal ran to 600 columns on an 80-column
// terminal): on a terminal each is wrapped at its width; piped, one line per message.
TEST(ReportPty, ErrorLinesAreWrappedAtTheTerminalWidth) {
  const std::vector<std::string> args = {"verify", testutil::kData + "/llama", "--against", testutil::kData + "/llama",
                                         "--allow", "no-such-kind-at-all"};
  int st = 0;
  const std::string seen = run_on_pty(args, 60, &st);
  std::string piped, err;
  std::string cmd;
  for (const auto& a : args) cmd += testutil::q(a) + " ";
  testutil::run_cli(cmd, &piped, &err);
  ASSERT_NE(err.find("fp4forge: note: --allow no-such-kind-at-all: no finding kind has that name"), std::string::npos)
      << err;
  std::size_t long_err = 0;
  for (std::size_t at = 0, nl; at < err.size(); at = nl + 1) {
    nl = err.find('\n', at);
    if (nl == std::string::npos) nl = err.size();
    if (nl - at > 60) ++long_err;
  }
  ASSERT_GT(long_err, 0u) << "the case needs a message over 60 columns: " << err;
  const std::size_t note = seen.find("fp4forge: note: --allow");
  ASSERT_NE(note, std::string::npos) << seen;
  for (std::size_t at = note, nl; at < seen.size(); at = nl + 1) {
    nl = seen.find_first_of("\r\n", at);
    if (nl == std::string::npos) nl = seen.size();
    if (seen.compare(at, 9, "fp4forge:") != 0 && at != note && seen.compare(at, 4, "    ") != 0) break;
    EXPECT_LE(nl - at, 60u) << "'" << seen.substr(at, nl - at) << "'";
  }
}

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
