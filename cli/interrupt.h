#pragma once
// A clear line when a long command is interrupted (Ctrl-C, SIGTERM from systemd or a scheduler): what was kept
// and how to continue, instead of a silent death. SIGINT and SIGTERM are blocked in the calling thread (and so in
// every thread it starts afterwards) and received by a watcher thread, which prints `message()` and exits
// 128 + the signal number (130 for SIGINT, 143 for SIGTERM), as a shell reports a killed command.
#include <atomic>
#include <csignal>
#include <functional>
#include <string>
#include <thread>

namespace fp4forge::cli {

class InterruptNotice {
 public:
  /** `message(signal_name)` is called on the watcher thread (not in a signal handler). With `json` (the command's
   * --json), stdout also carries the error document, code "interrupted" (docs/errors.md). */
  explicit InterruptNotice(std::function<std::string(const char* signal_name)> message, bool json = false);
  ~InterruptNotice();
  InterruptNotice(const InterruptNotice&) = delete;
  InterruptNotice& operator=(const InterruptNotice&) = delete;

 private:
  std::function<std::string(const char*)> message_;
  bool json_ = false;
  sigset_t set_{};
  sigset_t old_{};
  std::atomic<bool> done_{false};
  std::thread watcher_;
};

}  // namespace fp4forge::cli
