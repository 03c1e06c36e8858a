#include "fp4forge/probe/report.h"
#include "fp4forge/util/redact.h"
#include "fp4forge/util/strings.h"

#include <cmath>

#include <fmt/format.h>

namespace fp4forge::probe {

using oj = nlohmann::ordered_json;

namespace {
oj num_or_null(int v) { return v < 0 ? oj(nullptr) : oj(v); }
oj str_or_null(const std::string& s) { return s.empty() ? oj(nullptr) : oj(s); }
}  // namespace

oj to_json(const CheckResult& c) {
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
  x["served_by"] = c.served_by.any() ? oj{{"api_base", str_or_null(c.served_by.api_base)},
                                          {"model_id", str_or_null(c.served_by.model_id)},
                                          {"model_group", str_or_null(c.served_by.model_group)}}
                                     : oj(nullptr);
  auto n64 = [](std::int64_t v) { return v < 0 ? oj(nullptr) : oj(v); };
  x["kv"] = c.kv ? oj{{"num_gpu_blocks", n64(c.kv->num_gpu_blocks)}, {"block_size", n64(c.kv->block_size)},
                      {"tokens", n64(c.kv->tokens)}, {"expected_tokens", n64(c.kv->expected_tokens)},
                      {"kv_cache_size_tokens", n64(c.kv->kv_cache_size_tokens)}, {"engines", c.kv->engines}}
                 : oj(nullptr);
  x["context"] = c.context ? oj{{"max_model_len", n64(c.context->max_model_len)},
                                {"target_tokens", n64(c.context->target_tokens)},
                                {"estimated_tokens", n64(c.context->estimated_tokens)},
                                {"depth", c.context->depth < 0 ? oj(nullptr)
                                                               : oj(std::round(c.context->depth * 1000.0) / 1000.0)},
                                {"seed", c.context->seed}, {"code", str_or_null(c.context->code)}}
                           : oj(nullptr);
  return x;
}

oj to_json(const ProbeReport& r) {
  oj j;
  int pass = 0, fail = 0, skip = 0;
  oj checks = oj::array();
  for (const CheckResult& c : r.checks) {
    (c.status == CheckStatus::PASS ? pass : c.status == CheckStatus::FAIL ? fail : skip)++;
    checks.push_back(to_json(c));
  }
  const std::string not_proven = r.not_proven();
  j["ok"] = fail == 0 && not_proven.empty();
  j["url"] = util::redact_url(r.url);
  j["model"] = r.model;
  j["unreachable"] = r.unreachable;
  j["summary"] = oj{{"pass", pass}, {"fail", fail}, {"skip", skip}};
  j["not_proven"] = not_proven.empty() ? oj(nullptr) : oj(not_proven);
  j["request_extras"] = r.request_extras;
  j["request_not_sent"] = r.request_not_sent;
  j["checks"] = std::move(checks);
  return j;
}

std::string header_line(const ProbeReport& r) {
  std::string extras;
  for (const auto& k : r.request_extras) extras += (extras.empty() ? "" : ", ") + util::printable(k, 200);
  std::string own;
  for (const auto& k : r.request_not_sent) own += (own.empty() ? "" : ", ") + util::printable(k, 200);
  return fmt::format("probe {} model '{}'{}{}\n", util::printable(util::redact_url(r.url), util::kReportLine),
                     util::printable(r.model, util::kReportLine),
                     extras.empty() ? "" : fmt::format(" (with the alias's {})", extras),
                     own.empty() ? "" : fmt::format(" (not the alias's {}: the probe sends its own)", own));
}

std::string check_line(const CheckResult& c) {
  const char* tag = c.status == CheckStatus::PASS ? "PASS" : c.status == CheckStatus::FAIL ? "FAIL" : "SKIP";
  return fmt::format("  {}  {:<11} {:<22} {:>6.2f}s  {}\n", tag, check_name(c.check), c.classification, c.latency_s,
                     util::printable(c.detail, util::kReportLine));
}

std::string summary_line(const ProbeReport& r) {
  int pass = 0, fail = 0, skip = 0;
  for (const CheckResult& c : r.checks)
    (c.status == CheckStatus::PASS ? pass : c.status == CheckStatus::FAIL ? fail : skip)++;
  const std::string not_proven = r.not_proven();
  return fmt::format("{}: {} passed, {} failed, {} skipped{}\n",
                     fail > 0             ? "FAILED"
                     : not_proven.empty() ? "ok"
                                          : "NOT PROVEN",
                     pass, fail, skip,
                     r.unreachable        ? " (server unreachable)"
                     : not_proven.empty() ? ""
                                          : " (" + not_proven + ")");
}

namespace {
bool not_sent(const CheckResult& c) { return c.status == CheckStatus::SKIP && c.classification == "not-run"; }
}  // namespace

std::string CheckLines::add(const CheckResult& c) {
  std::string out;
  if (!held_.empty() && !(not_sent(c) && c.detail == held_.front().detail)) out = finish();
  if (not_sent(c)) {
    held_.push_back(c);
    return out;
  }
  return out + check_line(c);
}

std::string CheckLines::finish() {
  if (held_.size() < 2) {
    std::string out = held_.empty() ? std::string() : check_line(held_.front());
    held_.clear();
    return out;
  }
  std::string names;
  for (const CheckResult& c : held_) names += (names.empty() ? "" : ", ") + std::string(check_name(c.check));
  std::string out = fmt::format("  SKIP  {} ({})  {}  {}\n", names, held_.size(), held_.front().classification,
                                util::printable(held_.front().detail, util::kReportLine));
  held_.clear();
  return out;
}

std::string to_text(const ProbeReport& r) {
  std::string out = header_line(r);
  CheckLines lines;
  for (const CheckResult& c : r.checks) out += lines.add(c);
  return out + lines.finish() + summary_line(r);
}

int exit_code(const ProbeReport& r) {
  if (r.unreachable) return 4;
  return r.any_failed() || !r.not_proven().empty() ? 1 : 0;
}

}  // namespace fp4forge::probe
