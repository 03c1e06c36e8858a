#include "render.h"

#include "fp4forge/util/strings.h"

#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

namespace fp4forge::cli {

nlohmann::ordered_json error_json(const Error& e) {
  nlohmann::ordered_json j;
  j["code"] = errc_name(e.code);
  j["exit_code"] = e.exit_code();
  j["message"] = e.describe();
  j["file"] = e.file.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(e.file);
  j["tensor"] = e.tensor.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(e.tensor);
  return j;
}

int report_error(const Error& e, bool json) {
  error_line(e.describe());
  if (json) {
    nlohmann::ordered_json j;
    j["ok"] = false;
    j["error"] = error_json(e);
    print_json(j);
  }
  return e.exit_code();
}

void print_json(const nlohmann::ordered_json& j) {
  fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
  std::fflush(stdout);
}

// Untrusted text (a repo id, a tensor name, a server's message) reaches the terminal escaped (util::printable).
void error_line(const std::string& message) { fmt::print(stderr, "fp4forge: error: {}\n", util::printable(message, 16384)); }

void warn(const std::string& message) { fmt::print(stderr, "fp4forge: warning: {}\n", util::printable(message, 16384)); }

void note(const std::string& message) { fmt::print(stderr, "fp4forge: note: {}\n", util::printable(message, 16384)); }

Result<hf_cache::Source> checkpoint_source(const std::string& arg, bool json) {
  auto src = hf_cache::resolve(arg);
  if (!src) return src;
  for (const auto& w : src->warnings) warn(w);
  if (src->hub && !json) note(hf_cache::to_text(*src->hub));
  return src;
}

bool stderr_is_tty() { return ::isatty(STDERR_FILENO) == 1; }

std::unique_ptr<Progress> progress_bar(bool json, bool no_progress) {
  if (json || no_progress || !stderr_is_tty()) return nullptr;
  return std::make_unique<Progress>(Progress::Mode::ALWAYS);
}

}  // namespace fp4forge::cli
