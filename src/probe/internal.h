#pragma once
// The probe's parts, private to the probe module. A check sends its requests through exchange() (exchange.cc:
// one HTTP request under the check's deadline, classified; the alias's extras merged into its body; LiteLLM's
// response headers read), reads a chat answer with read_chat() and records its verdict with pass / fail / skip
// (checks.cc). The checks are functions of one signature: checks.cc holds the nine of the first probe,
// check_context.cc and check_kv.cc the long-context recall and the served KV pool; probe.cc runs them.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <mutex>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fp4forge/probe/probe.h"

namespace fp4forge::probe::detail {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// ---- text
bool contains_any(std::string_view hay, std::initializer_list<std::string_view> needles);  ///< case-insensitive
std::string trim(std::string_view s);
/** One line, at most `n` bytes (cut at a UTF-8 boundary), control characters shown as spaces. */
std::string excerpt(std::string_view s, std::size_t n = 200);
/** "" when fine, else why the text is degenerate (all whitespace, one repeated character or word). */
std::string degenerate_reason(std::string_view content);

// ---- JSON from a server, without exceptions
const json* field(const json& j, const char* key);
std::string str_field(const json& j, const char* key);
int int_field(const json& j, const char* key);  ///< -1 when absent or not a number

// ---- one exchange

/** What the checks of one probe share across workers: once a request is refused as unauthorized (401/403), the
 * checks not yet started are not sent (the key is wrong for all of them). */
struct Shared {
  std::atomic<bool> unauthorized{false};
  /** The models check found --model not listed: the server-wide kv check then reads another model's pool. */
  std::atomic<bool> model_not_listed{false};
  std::mutex mu;
  std::string unauthorized_detail;  // under mu
  /** The served max_model_len of --model from /v1/models (-1 unknown): set by the models check, or by a listing read
   * before the first check when models is not asked; written before the other checks start. */
  std::int64_t served_max_model_len = -1;
  /** Why the checks' answer budgets are lower than asked ("" when they are not): set before the other checks
   * start, read-only after. */
  std::string budget_note;
};

struct Ctx {
  HttpClient& client;
  std::string base;
  std::string model;
  const ProbeOptions& opts;
  Shared& shared;
  std::string dead_cls;     // set once a request found nothing listening
  bool any_response = false;
  ServedBy served_by;       // LiteLLM's x-litellm-* headers of the last answer of the running check
  /** Set when the first request shows that no check can pass here (GET /v1/models answered 404: not an OpenAI
   * root): why the rest are not sent (issue 55 tryout: eleven bare 404 lines). */
  std::string stop;
};

struct Call {
  bool ok = false;           // HTTP 2xx with a parsed body
  std::string cls;           // classification when !ok
  std::string detail;        // one line when !ok
  int status = 0;
  std::string server_message;  // error message of a 4xx/5xx
  json body;
  std::string raw;           // the body as received (kv: Prometheus text)
  int stream_chunks = -1;    // streamed answers: chunks that carried text (a lower bound of the tokens)
};

/** How exchange() treats an answer. */
struct ExchangeMode {
  bool stream = false;       // an SSE chat stream, parsed into one chat.completion object
  bool raw_text = false;     // a 2xx body kept as text (call.raw), not parsed as JSON
  bool auth_fatal = true;    // a 401/403 stops the probe (false: /metrics, which LiteLLM may guard alone)
};

/** One request of a check: POST bodies get the alias's request extras (ProbeOptions::request_defaults /
 * request_overrides); transport failures, HTTP errors and malformed bodies become a classification. */
Call exchange(Ctx& ctx, const char* method, const std::string& path, const json* body, Clock::time_point deadline,
              ExchangeMode mode = {});

// ---- a chat answer
struct Answer {
  bool valid = false;        // choices[0].message exists
  std::string content;       // "" when null or missing
  bool content_null = true;
  std::string reasoning;     // reasoning_content / reasoning, or a leading <think> block
  bool inline_think = false; // reasoning found as <think>...</think> inside content
  std::string finish;
  int prompt_tokens = -1;
  int completion_tokens = -1;
  int reasoning_tokens = -1; // as reported by usage.completion_tokens_details
  const json* message = nullptr;
  const json* choice = nullptr;
};

Answer read_chat(const json& body);
void record(CheckResult& r, const Answer& a);  ///< finish reason, usage and excerpts into the result
void fail(CheckResult& r, std::string cls, std::string detail);
void pass(CheckResult& r, std::string detail);
void skip(CheckResult& r, std::string cls, std::string detail);
/** Shared verdict on an answer without usable content. Returns true when it failed `r`. */
bool fail_if_no_content(CheckResult& r, const Answer& a, int max_tokens);
json user_msg(const std::string& text);
json chat_body(const Ctx& ctx, json messages, int max_tokens);

// ---- the checks: each fills `r` under `deadline`
using CheckFn = void (*)(Ctx&, CheckResult&, Clock::time_point);
void check_models(Ctx& ctx, CheckResult& r, Clock::time_point deadline);
void check_prose(Ctx& ctx, CheckResult& r, Clock::time_point deadline);
void check_long(Ctx& ctx, CheckResult& r, Clock::time_point deadline);
void check_logprobs(Ctx& ctx, CheckResult& r, Clock::time_point deadline);
void check_vision(Ctx& ctx, CheckResult& r, Clock::time_point deadline);
void check_tools(Ctx& ctx, CheckResult& r, Clock::time_point deadline);
void check_multiturn(Ctx& ctx, CheckResult& r, Clock::time_point deadline);
void check_completions(Ctx& ctx, CheckResult& r, Clock::time_point deadline);
void check_reasoning(Ctx& ctx, CheckResult& r, Clock::time_point deadline);
void check_context(Ctx& ctx, CheckResult& r, Clock::time_point deadline);
void check_kv(Ctx& ctx, CheckResult& r, Clock::time_point deadline);

/** The served model's `max_model_len` from GET /v1/models (vLLM lists it per model); -1 when not listed. */
std::int64_t served_max_model_len(Ctx& ctx, Clock::time_point deadline);
/** vLLM's max_model_len of `model` in a /v1/models answer; -1 when not listed or not said. */
std::int64_t max_model_len_of(const json& models, const std::string& model);

}  // namespace fp4forge::probe::detail
