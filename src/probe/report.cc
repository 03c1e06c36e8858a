#include "fp4forge/probe/report.h"

#include <cmath>

#include <fmt/format.h>

namespace fp4forge::probe {

using oj = nlohmann::ordered_json;

namespace {
oj num_or_null(int v) { return v < 0 ? oj(nullptr) : oj(v); }
oj str_or_null(const std::string& s) { return s.empty() ? oj(nullptr) : oj(s); }
}  // namespace

oj report_json(const ProbeReport& r) {
  oj j;
  int pass = 0, fail = 0, skip = 0;
  oj checks = oj::array();
  for (const CheckResult& c : r.checks) {
    (c.status == CheckStatus::PASS ? pass : c.status == CheckStatus::FAIL ? fail : skip)++;
    oj x;
    x["check"] = check_name(c.check);
    x["status"] = status_name(c.status);
    x["classification"] = c.classification;
    x["detail"] = c.detail;
    x["latency_s"] = std::round(c.latency_s * 1000.0) / 1000.0;
    x["http_status"] = c.http_status == 0 ? oj(nullptr) : oj(c.http_status);
    x["finish_reason"] = str_or_null(c.finish_reason);
    x["prompt_tokens"] = num_or_null(c.prompt_tokens);
    x["completion_tokens"] = num_or_null(c.completion_tokens);
    x["reasoning_tokens"] = num_or_null(c.reasoning_tokens);
    x["content"] = str_or_null(c.content);
    x["reasoning"] = str_or_null(c.reasoning);
    x["metric"] = c.metric < 0 ? oj(nullptr) : oj(std::round(c.metric * 1000.0) / 1000.0);
    checks.push_back(std::move(x));
  }
  j["ok"] = fail == 0;
  j["url"] = r.url;
  j["model"] = r.model;
  j["unreachable"] = r.unreachable;
  j["summary"] = oj{{"pass", pass}, {"fail", fail}, {"skip", skip}};
  j["checks"] = std::move(checks);
  return j;
}

std::string report_text(const ProbeReport& r) {
  std::string out = fmt::format("probe {} model '{}'\n", r.url, r.model);
  int pass = 0, fail = 0, skip = 0;
  for (const CheckResult& c : r.checks) {
    (c.status == CheckStatus::PASS ? pass : c.status == CheckStatus::FAIL ? fail : skip)++;
    const char* tag = c.status == CheckStatus::PASS ? "PASS" : c.status == CheckStatus::FAIL ? "FAIL" : "SKIP";
    out += fmt::format("  {}  {:<11} {:<22} {:>6.2f}s  {}\n", tag, check_name(c.check), c.classification, c.latency_s,
                       c.detail);
  }
  out += fmt::format("{}: {} passed, {} failed, {} skipped{}\n", fail == 0 ? "ok" : "FAILED", pass, fail, skip,
                     r.unreachable ? " (server unreachable)" : "");
  return out;
}

int report_exit_code(const ProbeReport& r) {
  if (r.unreachable) return 4;
  return r.any_failed() ? 1 : 0;
}

oj show_json(const GatewayShow& s) {
  oj j;
  j["ok"] = true;
  j["config"] = s.path;
  oj routes = oj::array();
  for (const GatewayRoute& r : s.routes) {
    oj params = oj::object();
    for (const auto& [k, v] : r.params) params[k] = v;
    routes.push_back(oj{{"alias", r.alias}, {"model", r.model}, {"api_base", str_or_null(r.api_base)},
                        {"line", r.line}, {"wildcard", r.wildcard}, {"params", params}});
  }
  j["routes"] = std::move(routes);
  oj retired = oj::array();
  for (const RetiredAlias& r : s.retired) retired.push_back(oj{{"alias", r.alias}, {"line", r.line}});
  j["retired"] = std::move(retired);
  j["backend"] = str_or_null(s.backend);
  j["backend_aliases"] = s.backend.empty() ? oj(nullptr) : oj(s.backend_aliases);
  j["warnings"] = s.warnings;
  return j;
}

std::string show_text(const GatewayShow& s) {
  std::string out = fmt::format("{}: {} route(s)\n", s.path, s.routes.size());
  for (const GatewayRoute& r : s.routes)
    out += fmt::format("  {:<24} -> {}  @ {}  (line {}){}\n", r.alias, r.model, r.api_base.empty() ? "-" : r.api_base,
                       r.line, r.wildcard ? "  [wildcard]" : "");
  for (const RetiredAlias& r : s.retired) out += fmt::format("  retired: {} (line {})\n", r.alias, r.line);
  if (!s.backend.empty()) {
    if (s.backend_aliases.empty()) {
      out += fmt::format("no alias routes to {} (a seat can be proven there without user traffic)\n", s.backend);
    } else {
      std::string a;
      for (const auto& x : s.backend_aliases) a += (a.empty() ? "" : ", ") + x;
      out += fmt::format("aliases routing to {}: {}\n", s.backend, a);
    }
  }
  return out;
}

oj edit_json(const std::string& command, const std::string& config, const EditResult& e) {
  oj j;
  j["ok"] = e.refused.empty();
  j["command"] = command;
  j["config"] = config;
  j["changed"] = e.changed;
  j["refused"] = str_or_null(e.refused);
  j["backup"] = str_or_null(e.backup);
  j["diff"] = e.diff;
  j["warnings"] = e.warnings;
  j["probe"] = e.probe ? report_json(*e.probe) : oj(nullptr);
  return j;
}

std::string edit_text(const std::string& command, const std::string& config, const EditResult& e) {
  std::string out;
  if (e.probe) out += report_text(*e.probe);
  if (!e.refused.empty()) return out + fmt::format("{} refused: {}\n", command, e.refused);
  out += e.diff;
  if (command == "rollback") {
    out += e.changed ? fmt::format("restored {} from {}\n", config, e.backup)
                     : fmt::format("{} already identical to {}; nothing to do\n", config, e.backup);
  } else if (e.changed) {
    out += fmt::format("{}: {} updated; backup {}\n", command, config, e.backup);
  } else {
    out += fmt::format("{}: dry run, {} not written\n", command, config);
  }
  return out;
}

}  // namespace fp4forge::probe
