#include "interrupt.h"

#include <pthread.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "render.h"

namespace fp4forge::cli {

InterruptNotice::InterruptNotice(std::function<std::string(const char*)> message, bool json)
    : message_(std::move(message)), json_(json) {
  sigemptyset(&set_);
  sigaddset(&set_, SIGINT);
  sigaddset(&set_, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set_, &old_);
  watcher_ = std::thread([this] {
    const timespec tick{0, 200 * 1000 * 1000};
    while (!done_.load()) {
      const int sig = sigtimedwait(&set_, nullptr, &tick);
      if (sig != SIGINT && sig != SIGTERM) continue;  // timeout (EAGAIN) or EINTR
      std::fflush(stdout);
      const std::string what = message_(sig == SIGINT ? "SIGINT" : "SIGTERM");
      fmt::print(stderr, "\nfp4forge: {}\n", what);
      std::fflush(stderr);
      if (json_) {  // a --json caller reads stdout: the same error document as any failure, never nothing
        nlohmann::ordered_json j;
        j["ok"] = false;
        j["error"] = {{"code", "interrupted"},
                      {"exit_code", 128 + sig},
                      {"message", what},
                      {"file", nullptr},
                      {"tensor", nullptr}};
        print_json(j);
      }
      std::_Exit(128 + sig);
    }
  });
}

InterruptNotice::~InterruptNotice() {
  done_.store(true);
  if (watcher_.joinable()) watcher_.join();
  pthread_sigmask(SIG_SETMASK, &old_, nullptr);
}

}  // namespace fp4forge::cli
