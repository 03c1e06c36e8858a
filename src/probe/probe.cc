// run_probe: the checks (internal.h) run on one client, then concurrently on a client each, under one overall
// deadline; an absent server costs one connect, an unauthorized key one refusal.
#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "fp4forge/util/redact.h"
#include "internal.h"

namespace fp4forge::probe {

using namespace detail;

namespace {

// The checks whose requests carry the answer budget (max_tokens, client_max_tokens, long_max_tokens).
bool uses_answer_budget(Check ch) {
  return ch == Check::PROSE || ch == Check::LONG || ch == Check::VISION || ch == Check::TOOLS ||
         ch == Check::MULTITURN || ch == Check::REASONING || ch == Check::CONTEXT;
}

// A seat whose served max_model_len is under twice the answer budget: every check gets half its max_model_len,
// said once per check (tryout Q-H1: plan's 1024-token seat failed the probe its compose.yaml names, 34 + 1024 >
// 1024). A budget given on the command line is kept (its refusals get a hint instead, run_one).
void fit_answer_budget(ProbeOptions& eff, Shared& shared) {
  const std::int64_t served = shared.served_max_model_len;
  if (eff.max_tokens_given || served <= 0 || !shared.budget_note.empty()) return;
  const int cap = static_cast<int>(std::max<std::int64_t>(16, served / 2));
  const int asked = std::max(eff.max_tokens, eff.client_max_tokens);
  if (asked <= cap && eff.long_max_tokens <= cap) return;
  eff.max_tokens = std::min(eff.max_tokens, cap);
  eff.client_max_tokens = std::min(eff.client_max_tokens, cap);
  eff.long_max_tokens = std::min(eff.long_max_tokens, cap);
  eff.long_min_tokens = std::min(eff.long_min_tokens, std::max(8, eff.long_max_tokens / 2));
  shared.budget_note = fmt::format(
      "max_tokens {}, half the served max_model_len {}, not {}: no room for the prompt "
      "beside it; --max-tokens sets it",
      cap, served, asked);
}

// One check on `ctx`'s client: its own deadline (timeout_s from its start), capped by the probe's overall one.
CheckResult run_one(Ctx& ctx, Check ch, Clock::time_point overall, const std::string& password) {
  CheckResult r;
  r.check = ch;
  auto mask = [&](const std::string& t) { return mask_secret(mask_secret(t, ctx.opts.api_key), password); };
  const auto t0 = Clock::now();
  ctx.served_by = {};
  if (!ctx.dead_cls.empty()) {
    // The first request's detail (a 200-character transport error) is said once, on its own check; the rest
    // point at it instead of repeating it (issue 55: nine copies for a server that is down).
    // Not sent is not a failure of its own: one failure (the first request's), the rest skipped (issue 55).
    skip(r, "not-run", fmt::format("not sent: the server did not answer the first request ({}, detail above)",
                                   ctx.dead_cls));
  } else if (!ctx.stop.empty()) {
    skip(r, "not-run", "not sent: " + ctx.stop);
  } else if (ctx.shared.unauthorized) {
    std::lock_guard<std::mutex> g(ctx.shared.mu);
    skip(r, "not-run", fmt::format("not sent: an earlier request was refused as unauthorized ({}); fix the key and "
                                   "probe again", ctx.shared.unauthorized_detail));
  } else if (overall - t0 < std::chrono::milliseconds(50)) {  // as exchange(): too little time left to send
    fail(r, "timeout", fmt::format("not sent: the probe's overall deadline of {:g} s passed first",
                                   ctx.opts.total_timeout_s > 0 ? ctx.opts.total_timeout_s : ctx.opts.timeout_s));
  } else {
    const auto deadline =
        std::min(overall, t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(ctx.opts.timeout_s)));
    switch (ch) {
      case Check::MODELS: check_models(ctx, r, deadline); break;
      case Check::PROSE: check_prose(ctx, r, deadline); break;
      case Check::LONG: check_long(ctx, r, deadline); break;
      case Check::LOGPROBS: check_logprobs(ctx, r, deadline); break;
      case Check::VISION: check_vision(ctx, r, deadline); break;
      case Check::TOOLS: check_tools(ctx, r, deadline); break;
      case Check::MULTITURN: check_multiturn(ctx, r, deadline); break;
      case Check::COMPLETIONS: check_completions(ctx, r, deadline); break;
      case Check::REASONING: check_reasoning(ctx, r, deadline); break;
      case Check::CONTEXT: check_context(ctx, r, deadline); break;
      case Check::KV: check_kv(ctx, r, deadline); break;
    }
    if (uses_answer_budget(ch) && r.status != CheckStatus::SKIP) {  // a skipped check sent no budget
      if (!ctx.shared.budget_note.empty()) {
        r.detail += " (" + ctx.shared.budget_note + ")";
      } else if (r.status == CheckStatus::FAIL && r.classification == "client-error" &&
                 contains_any(r.detail, {"maximum context length", "maximum model length", "max_model_len"})) {
        r.detail += fmt::format("; hint: lower --max-tokens ({}): it and the prompt must fit the served max_model_len",
                                ctx.opts.max_tokens);
      }
    }
    r.served_by = ctx.served_by;
  }
  r.latency_s = std::chrono::duration<double>(Clock::now() - t0).count();
  r.detail = mask(r.detail);
  r.content = mask(r.content);
  r.reasoning = mask(r.reasoning);
  r.served_by.api_base = mask(r.served_by.api_base);
  return r;
}

// The probe: the first check (models when asked for) on `client`, alone: it proves something answers. The
// others then run `opts.concurrency` at a time, each on a client of its own from `make_client` (serially on
// `client` without a factory).
ProbeReport probe_impl(HttpClient& client, const std::function<std::unique_ptr<HttpClient>()>* make_client,
                       std::string_view base_url, std::string_view model, const std::vector<Check>& checks,
                       const ProbeOptions& opts) {
  ProbeReport rep;
  const std::string base = normalize_base_url(base_url);
  rep.url = util::redact_url(base);  // a password in the URL is used, never shown
  const std::string password = url_password(base);
  rep.model = std::string(model);
  // A default the probe sets itself on every request is never sent (exchange.cc merges defaults under the body).
  constexpr std::array<std::string_view, 4> kProbeOwn{"model", "messages", "max_tokens", "temperature"};
  for (const json* extras : {&opts.request_defaults, &opts.request_overrides})
    if (extras->is_object())
      for (const auto& [k, v] : extras->items()) {
        const bool own =
            extras == &opts.request_defaults && std::find(kProbeOwn.begin(), kProbeOwn.end(), k) != kProbeOwn.end();
        auto& list = own ? rep.request_not_sent : rep.request_extras;
        if (std::find(list.begin(), list.end(), k) == list.end()) list.push_back(k);
      }
  const double total = opts.total_timeout_s > 0 ? opts.total_timeout_s : opts.timeout_s;
  const auto overall = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(total));
  rep.checks.resize(checks.size());
  std::mutex mu;  // on_result, one call at a time
  auto done = [&](std::size_t i, CheckResult r) {
    std::lock_guard<std::mutex> g(mu);
    if (opts.on_result) opts.on_result(r);
    rep.checks[i] = std::move(r);
  };
  std::vector<std::size_t> order(checks.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_partition(order.begin(), order.end(), [&](std::size_t i) { return checks[i] == Check::MODELS; });
  Shared shared;
  ProbeOptions eff = opts;  // the answer budgets fitted to the seat (fit_answer_budget) before any check uses them
  Ctx first{client, base, rep.model, eff, shared, {}, false, {}};
  std::size_t next = 0;
  // Only checks that send a budget need it (a --text-only vision check sends nothing at all).
  const bool sends_budget = std::any_of(checks.begin(), checks.end(), [&](Check ch) {
    return uses_answer_budget(ch) && !(ch == Check::VISION && opts.vision == VisionMode::TEXT_ONLY) &&
           !(ch == Check::TOOLS && opts.no_tools);
  });
  if (!order.empty() && checks[order[0]] != Check::MODELS && !opts.max_tokens_given && sends_budget) {
    // No models check to learn the served max_model_len from: one listing first. A server that is down or refuses
    // the key fails the first check with that answer, and the rest are not sent, as after a models check.
    const Call c = exchange(first, "GET", "/v1/models", nullptr, overall);
    if (!first.dead_cls.empty() || shared.unauthorized) {
      CheckResult r;
      r.check = checks[order[0]];
      // Masked as run_one masks a check's detail: a 401 body may echo the key (ProbeChecks.ApiKeyIsSentAndNeverEchoed).
      // Said as the listing, not the check's own request (tryout R-L3: a 401 of GET /v1/models on the prose row).
      fail(r, shared.unauthorized ? "unauthorized" : c.cls,
           "not sent: the model listing read first (to size the answer budget) failed: " +
               mask_secret(mask_secret(c.detail, opts.api_key), password));
      done(order[0], std::move(r));
      next = 1;
    } else if (c.ok) {
      shared.served_max_model_len = max_model_len_of(c.body, rep.model);
      fit_answer_budget(eff, shared);
    }
  }
  if (next == 0 && !order.empty()) {
    done(order[0], run_one(first, checks[order[0]], overall, password));
    next = 1;
  }
  fit_answer_budget(eff, shared);  // after a models check
  bool any_response = first.any_response;
  bool dead = !first.dead_cls.empty() && !first.any_response;
  const std::size_t rest = order.size() - next;
  // Nothing to send after a first request that stopped the probe: the rest are skipped on the first client.
  const std::size_t workers =
      make_client == nullptr || dead || !first.stop.empty()
          ? 1
          : std::min<std::size_t>(rest, static_cast<std::size_t>(std::max(1, opts.concurrency)));
  if (workers <= 1) {
    for (; next < order.size(); ++next) done(order[next], run_one(first, checks[order[next]], overall, password));
    any_response = first.any_response;
    dead = !first.dead_cls.empty() && !first.any_response;
  } else {
    std::atomic<std::size_t> cursor{next};
    std::atomic<bool> answered{any_response};
    std::vector<std::thread> pool;
    for (std::size_t w = 0; w < workers; ++w)
      pool.emplace_back([&] {
        std::unique_ptr<HttpClient> own = (*make_client)();
        Ctx ctx{*own, base, rep.model, eff, shared, {}, false, {}};
        for (std::size_t k = cursor++; k < order.size(); k = cursor++)
          done(order[k], run_one(ctx, checks[order[k]], overall, password));
        if (ctx.any_response) answered = true;
      });
    for (auto& t : pool) t.join();
    any_response = answered;
  }
  rep.unreachable = dead && !any_response;
  rep.served_max_model_len = shared.served_max_model_len;
  return rep;
}

}  // namespace

ProbeReport run_probe(HttpClient& client, std::string_view base_url, std::string_view model,
                      const std::vector<Check>& checks, const ProbeOptions& opts) {
  return probe_impl(client, nullptr, base_url, model, checks, opts);
}

ProbeReport run_probe(const std::function<std::unique_ptr<HttpClient>()>& make_client, std::string_view base_url,
                      std::string_view model, const std::vector<Check>& checks, const ProbeOptions& opts) {
  auto client = make_client();
  return probe_impl(*client, &make_client, base_url, model, checks, opts);
}

ProbeReport run_probe(std::string_view base_url, std::string_view model, const std::vector<Check>& checks,
                      const ProbeOptions& opts) {
  return run_probe(std::function<std::unique_ptr<HttpClient>()>(&make_curl_client), base_url, model, checks, opts);
}

}  // namespace fp4forge::probe
