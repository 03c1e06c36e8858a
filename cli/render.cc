#include "render.h"

#include "fp4forge/core/finding_kinds.h"
#include "fp4forge/util/did_you_mean.h"
#include "fp4forge/util/strings.h"
#include "fp4forge/util/text_wrap.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

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

nlohmann::ordered_json with_schema(const nlohmann::ordered_json& j, std::string_view command) {
  if (!j.is_object() || j.contains("schema")) return j;
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  if (j.contains("ok")) out["ok"] = j["ok"];
  out["schema"] = fmt::format("fp4forge.{}/1", command);
  for (const auto& [k, v] : j.items())
    if (k != "ok") out[k] = v;
  return out;
}

void print_json(const nlohmann::ordered_json& j) {
  fmt::print("{}\n", j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
  std::fflush(stdout);
}

void print_report(const std::string& text) {
  // On a terminal, prose wrapped at its width (at most util::kReportWidth, issue 55); piped, one item per line.
  const int cols = ::isatty(STDOUT_FILENO) == 1 ? Progress::columns_of(stdout) : 0;
  const std::string shown = util::printable_text(text);
  fmt::print("{}", cols > 0 ? util::wrap_prose(shown, std::min<std::size_t>(static_cast<std::size_t>(cols),
                                                                            util::kReportWidth))
                            : shown);
  std::fflush(stdout);
}

namespace {

/** One "fp4forge: LEVEL: message" line on stderr: untrusted text (a repo id, a tensor name, a server's message)
 * escaped (util::printable); on a terminal wrapped at its width, at most util::kReportWidth, as print_report wraps
 * stdout (issue 55 audit: refusals of 600 columns); to a log or a pipe, one line per message for grep. */
void stderr_line(std::string_view level, const std::string& message) {
  const std::string line = fmt::format("fp4forge: {}: {}", level, util::printable(message, 16384));
  const int cols = ::isatty(STDERR_FILENO) == 1 ? Progress::columns_of(stderr) : 0;
  fmt::print(stderr, "{}", cols > 0 ? util::wrap_line(line, std::min<std::size_t>(static_cast<std::size_t>(cols),
                                                                                   util::kReportWidth))
                                    : line + "\n");
}

}  // namespace

void error_line(const std::string& message) { stderr_line("error", message); }

void warn(const std::string& message) { stderr_line("warning", message); }

void note(const std::string& message) { stderr_line("note", message); }

Result<hf_cache::Source> checkpoint_source(const std::string& arg, bool json) {
  auto src = hf_cache::resolve(arg);
  if (!src) return src;
  for (const auto& w : src->warnings) warn(w);
  if (src->hub && !json) note(hf_cache::to_text(*src->hub));
  return src;
}

bool stderr_is_tty() { return ::isatty(STDERR_FILENO) == 1; }

std::unique_ptr<Progress> progress_bar(bool json, bool no_progress) {
  (void)json;  // --json writes stdout; progress goes to stderr either way
  if (no_progress) return nullptr;
  if (stderr_is_tty()) return std::make_unique<Progress>(Progress::Mode::ALWAYS);
  // Not a terminal (a log, systemd, nohup): a status line every FP4FORGE_PROGRESS_SECONDS (default 10).
  double every = 10.0;
  if (const char* v = std::getenv("FP4FORGE_PROGRESS_SECONDS"); v != nullptr) {
    char* end = nullptr;
    const double d = std::strtod(v, &end);
    if (end != v && *end == '\0' && d >= 0.1 && d <= 86400.0) every = d;
  }
  return std::make_unique<Progress>(Progress::Mode::LINES, stderr, every);
}

Result<std::string> api_key_from_env(const std::string& var) {
  if (var.empty()) return std::string();
  const char* v = std::getenv(var.c_str());
  if (v == nullptr || *v == '\0') return make_error(Errc::USAGE, "--api-key-env {}: the variable is not set or empty", var);
  return std::string(v);
}

std::vector<std::string> allow_warnings(std::vector<Finding>& findings, const std::vector<std::string>& kinds) {
  std::vector<std::string> notes;
  for (const std::string& kind : kinds) {
    std::size_t allowed = 0, errors = 0;
    for (Finding& f : findings) {
      if (f.kind != kind) continue;
      if (f.severity == Severity::ERROR) ++errors;
      if (f.severity != Severity::WARNING) continue;
      f.severity = Severity::INFO;
      f.message += fmt::format(" (a warning, allowed by --allow {})", kind);
      ++allowed;
    }
    if (allowed > 0) continue;
    // A typed kind near one this run found is most likely that one (issue 55: `--allow multi-grup`).
    std::vector<std::string> found;
    for (const Finding& f : findings)
      if (f.severity == Severity::WARNING && std::find(found.begin(), found.end(), f.kind) == found.end())
        found.push_back(f.kind);
    // A name that is no kind at all, or an error kind, is said as such (issue 55 tryout: both read "no warning of
    // that kind to allow").
    const FindingKind* row = find_finding_kind(kind);
    std::vector<std::string> every;
    for (const FindingKind& k : finding_kinds()) every.emplace_back(k.id);
    // Beyond a typo, a name built of a kind's words in another order (`multi-group-scheme` for
    // quant-config-multi-group, issue 55 tryout F): the kind sharing the most words, two at least.
    const auto by_words = [&](const std::vector<std::string>& cands) -> std::string {
      const auto words = [](std::string_view x) {
        std::vector<std::string> w;
        for (std::string_view p : util::split(x, '-'))
          if (!p.empty()) w.emplace_back(util::ascii_lower(p));
        return w;
      };
      const auto typed = words(kind);
      std::string best;
      std::size_t best_n = 1;
      for (const std::string& c : cands) {
        std::size_t n = 0;
        for (const std::string& w : words(c)) n += std::count(typed.begin(), typed.end(), w) > 0 ? 1 : 0;
        if (n > best_n) best = c, best_n = n;
      }
      return best.empty() ? std::string() : fmt::format(" (did you mean '{}'?)", best);
    };
    std::string near = util::did_you_mean(kind, found);
    if (near.empty()) near = by_words(found);
    notes.push_back(
        errors > 0 ? fmt::format("--allow {}: {} error finding(s) of that kind stay errors (an error is never "
                                 "allowed)",
                                 util::printable(kind, 80), errors)
        : row == nullptr
            ? fmt::format("--allow {}: no finding kind has that name{}; the kinds are in docs/cli/doctor.md "
                          "and docs/cli/verify.md",
                          util::printable(kind, 80),
                          !near.empty()                              ? near
                          : !util::did_you_mean(kind, every).empty() ? util::did_you_mean(kind, every)
                                                                     : by_words(every))
        : row->severity == Severity::ERROR
            ? fmt::format("--allow {}: an error kind, never allowed (none was found here)", util::printable(kind, 80))
            : fmt::format("--allow {}: no warning of that kind to allow{}", util::printable(kind, 80), near));
  }
  std::stable_sort(findings.begin(), findings.end(),
                   [](const Finding& a, const Finding& b) { return a.severity < b.severity; });
  return notes;
}

}  // namespace fp4forge::cli
