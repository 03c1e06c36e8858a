// The probe checks. Each check builds its request(s), sends them through the HttpClient under one
// deadline, and turns what came back into a CheckResult with a stable classification id.
#include "fp4forge/probe/probe.h"
#include "fp4forge/util/redact.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <atomic>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fp4forge/probe/png.h"
#include "fp4forge/util/strings.h"

namespace fp4forge::probe {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------------------------------------
// text helpers


bool contains_any(std::string_view hay, std::initializer_list<std::string_view> needles) {
  const std::string l = util::ascii_lower(hay);
  return std::any_of(needles.begin(), needles.end(), [&](std::string_view n) { return l.find(n) != std::string::npos; });
}

std::string trim(std::string_view s) {
  std::size_t b = 0;
  std::size_t e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

// One line, at most `n` bytes (cut at a UTF-8 boundary), control characters shown as spaces.
std::string excerpt(std::string_view s, std::size_t n = 200) {
  std::string o;
  for (char c : s) o += (static_cast<unsigned char>(c) < 0x20) ? ' ' : c;
  if (o.size() > n) {
    std::size_t cut = n;
    while (cut > 0 && (static_cast<unsigned char>(o[cut]) & 0xC0) == 0x80) --cut;
    o.resize(cut);
    o += "...";
  }
  return o;
}

// "" when fine, else why the text is degenerate (all whitespace, one repeated character or word).
std::string degenerate_reason(std::string_view content) {
  const std::string t = trim(content);
  if (t.empty()) return "content is all whitespace";
  if (t.size() >= 4 && std::all_of(t.begin(), t.end(), [&](char c) { return c == t[0]; }))
    return fmt::format("content is one character repeated {} times ('{}')", t.size(), excerpt(t.substr(0, 1)));
  std::vector<std::string> words;
  std::string cur;
  for (char c : t) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (!cur.empty()) words.push_back(std::move(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) words.push_back(std::move(cur));
  if (words.size() >= 4 && std::all_of(words.begin(), words.end(), [&](const std::string& w) { return w == words[0]; }))
    return fmt::format("content is one word repeated {} times ('{}')", words.size(), excerpt(words[0], 40));
  return {};
}

// ---------------------------------------------------------------------------------------------
// JSON access without exceptions

const json* field(const json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}
std::string str_field(const json& j, const char* key) {
  const json* v = field(j, key);
  return (v != nullptr && v->is_string()) ? v->get<std::string>() : std::string();
}
int int_field(const json& j, const char* key) {
  const json* v = field(j, key);
  return (v != nullptr && v->is_number()) ? static_cast<int>(v->get<double>()) : -1;
}

// The message of an error body, in vLLM ({"message": ...}) or OpenAI/LiteLLM ({"error": {"message"}})
// shape; the raw body (shortened) otherwise.
std::string error_message(const std::string& body) {
  json j = parse_server_json(body);
  if (!j.is_discarded()) {
    if (std::string m = str_field(j, "message"); !m.empty()) return excerpt(m, 300);
    if (const json* e = field(j, "error")) {
      if (e->is_string()) return excerpt(e->get<std::string>(), 300);
      if (std::string m = str_field(*e, "message"); !m.empty()) return excerpt(m, 300);
    }
    if (const json* d = field(j, "detail"); d != nullptr && d->is_string()) return excerpt(d->get<std::string>(), 300);
  }
  return excerpt(trim(body), 300);
}

bool has_word(const std::string& l, std::string_view w) {
  for (std::size_t p = l.find(w); p != std::string::npos; p = l.find(w, p + 1)) {
    const bool left = p == 0 || !std::isalnum(static_cast<unsigned char>(l[p - 1]));
    const bool right = p + w.size() >= l.size() || !std::isalnum(static_cast<unsigned char>(l[p + w.size()]));
    if (left && right) return true;
  }
  return false;
}

// vLLM / Starlette: "Out of range float values are not JSON compliant: nan"
bool mentions_nan(std::string_view text) {
  const std::string l = util::ascii_lower(text);
  return l.find("not json compliant") != std::string::npos || l.find("out of range float") != std::string::npos ||
         has_word(l, "nan") || has_word(l, "infinity");
}

bool has_nan_literal(std::string_view body) {
  for (std::string_view tok : {"NaN", "Infinity"}) {
    for (std::size_t p = body.find(tok); p != std::string_view::npos; p = body.find(tok, p + 1)) {
      // a bare literal (a value), not text inside a string such as "Infinity War"
      std::size_t b = p;
      while (b > 0 && (body[b - 1] == ' ' || body[b - 1] == '-')) --b;
      if (b > 0 && (body[b - 1] == ':' || body[b - 1] == ',' || body[b - 1] == '[')) return true;
    }
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// one exchange

struct Ctx {
  HttpClient& client;
  std::string base;
  std::string model;
  const ProbeOptions& opts;
  std::string dead_cls;     // set once a request found nothing listening
  std::string dead_detail;
  bool any_response = false;
};

struct Call {
  bool ok = false;           // HTTP 2xx with a parsed body
  std::string cls;           // classification when !ok
  std::string detail;        // one line when !ok
  int status = 0;
  std::string server_message;  // error message of a 4xx/5xx
  json body;
};

double remaining_s(Clock::time_point deadline) {
  return std::chrono::duration<double>(deadline - Clock::now()).count();
}

// Parses an SSE chat stream into one chat.completion-shaped object. Sets cls/detail on failure.
void parse_stream(const std::string& text, Call& call) {
  json msg = json::object();
  std::string content;
  std::string reasoning;
  std::string finish;
  json usage;
  int chunks = 0;
  bool done = false;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    std::string line = trim(std::string_view(text).substr(pos, nl - pos));
    pos = nl + 1;
    if (line.rfind("data:", 0) != 0) continue;
    const std::string payload = trim(std::string_view(line).substr(5));
    if (payload == "[DONE]") {
      done = true;
      break;
    }
    json ev = parse_server_json(payload);
    if (ev.is_discarded()) {
      call.cls = has_nan_literal(payload) ? "nan-logits" : "malformed-json";
      call.detail = fmt::format("stream event is not valid JSON: '{}'", excerpt(payload, 120));
      return;
    }
    if (const json* err = field(ev, "error")) {
      const std::string m = err->is_string() ? err->get<std::string>() : str_field(*err, "message");
      call.cls = mentions_nan(m) ? "nan-logits" : "server-error";
      call.detail = fmt::format("error event in the stream: {}", excerpt(m, 300));
      return;
    }
    if (const json* u = field(ev, "usage"); u != nullptr && u->is_object()) usage = *u;
    const json* choices = field(ev, "choices");
    if (choices == nullptr || !choices->is_array() || choices->empty()) continue;
    const json& ch = (*choices)[0];
    if (const json* d = field(ch, "delta")) {
      const std::string c = str_field(*d, "content");
      std::string r = str_field(*d, "reasoning_content");
      if (r.empty()) r = str_field(*d, "reasoning");
      if (!c.empty() || !r.empty()) ++chunks;
      content += c;
      reasoning += r;
    }
    if (std::string f = str_field(ch, "finish_reason"); !f.empty()) finish = f;
  }
  if (!done) {
    call.cls = "stream-cut-off";
    call.detail = fmt::format("the stream ended after {} chunks without 'data: [DONE]' (finish_reason '{}')",
                              chunks, finish.empty() ? "none" : finish);
    return;
  }
  msg["role"] = "assistant";
  msg["content"] = content.empty() ? json(nullptr) : json(content);
  if (!reasoning.empty()) msg["reasoning_content"] = reasoning;
  json out;
  out["choices"] = json::array({json{{"index", 0}, {"message", msg}, {"finish_reason", finish.empty() ? json(nullptr) : json(finish)}}});
  if (usage.is_null()) usage = json{{"completion_tokens", chunks}, {"estimated", true}};
  out["usage"] = usage;
  call.body = std::move(out);
  call.ok = true;
}

Call exchange(Ctx& ctx, const char* method, const std::string& path, const json* body, Clock::time_point deadline,
              bool stream = false) {
  Call call;
  const double left = remaining_s(deadline);
  if (left <= 0.05) {
    call.cls = "timeout";
    call.detail = fmt::format("{} {}: the check's {:.0f} s deadline passed before the request", method, path,
                              ctx.opts.timeout_s);
    return call;
  }
  HttpRequest req;
  req.method = method;
  req.url = ctx.base + path;
  req.timeout_s = left;
  req.connect_timeout_s = ctx.opts.connect_timeout_s;
  req.max_response_bytes = ctx.opts.max_response_bytes;
  req.headers.emplace_back("Accept", stream ? "text/event-stream" : "application/json");
  if (!ctx.opts.api_key.empty()) req.headers.emplace_back("Authorization", "Bearer " + ctx.opts.api_key);
  if (body != nullptr) {
    req.headers.emplace_back("Content-Type", "application/json");
    req.body = body->dump();
  }
  HttpResponse r = ctx.client.send(req);
  call.status = r.status;
  if (r.transport == Transport::CONNECTION_REFUSED || r.transport == Transport::UNREACHABLE) {
    call.cls = transport_name(r.transport);
    call.detail = (r.error.empty() ? fmt::format("{} {}: {}", method, util::redact_url(req.url), call.cls) : r.error) +
                  "; is the server up, and is this its host and port?";
    if (!ctx.any_response && ctx.dead_cls.empty()) {
      ctx.dead_cls = call.cls;
      ctx.dead_detail = call.detail;
    }
    return call;
  }
  if (r.status > 0) ctx.any_response = true;
  if (r.transport == Transport::TIMEOUT) {
    call.cls = "timeout";
    call.detail = fmt::format("{} {}: no complete answer within {:.1f} s ({} bytes received)", method, path, left,
                              r.body.size());
    return call;
  }
  if (r.transport == Transport::CUT_OFF) {
    call.cls = stream ? "stream-cut-off" : "truncated";
    call.detail = fmt::format("{} {}: connection closed mid-body after {} bytes ({})", method, path, r.body.size(),
                              r.error);
    return call;
  }
  if (r.transport != Transport::OK) {
    call.cls = transport_name(r.transport);
    call.detail = r.error;
    return call;
  }
  if (r.status >= 400 || r.status < 200) {
    call.server_message = error_message(r.body);
    if (mentions_nan(call.server_message) || has_nan_literal(r.body)) {
      call.cls = "nan-logits";
    } else {
      call.cls = r.status >= 500 ? "server-error" : "client-error";
    }
    call.detail = fmt::format("{} {}: HTTP {}: {}", method, path, r.status, call.server_message);
    return call;
  }
  const bool is_sse = stream && r.body.find("data:") != std::string::npos &&
                      trim(r.body).rfind("{", 0) != 0;
  if (is_sse) {
    parse_stream(r.body, call);
    if (!call.ok) call.detail = fmt::format("{} {}: {}", method, path, call.detail);
    return call;
  }
  call.body = parse_server_json(r.body);
  if (call.body.is_discarded() || !call.body.is_object()) {
    call.cls = has_nan_literal(r.body) ? "nan-logits" : "malformed-json";
    call.detail = fmt::format("{} {}: HTTP {} body is not a JSON object: '{}'", method, path, r.status,
                              excerpt(trim(r.body), 120));
    call.body = json();
    return call;
  }
  call.ok = true;
  return call;
}

// ---------------------------------------------------------------------------------------------
// a chat answer

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

Answer read_chat(const json& body) {
  Answer a;
  const json* choices = field(body, "choices");
  if (choices == nullptr || !choices->is_array() || choices->empty()) return a;
  a.choice = &(*choices)[0];
  a.finish = str_field(*a.choice, "finish_reason");
  a.message = field(*a.choice, "message");
  if (a.message == nullptr || !a.message->is_object()) return a;
  a.valid = true;
  if (const json* c = field(*a.message, "content"); c != nullptr && c->is_string()) {
    a.content = c->get<std::string>();
    a.content_null = false;
  }
  a.reasoning = str_field(*a.message, "reasoning_content");
  if (a.reasoning.empty()) a.reasoning = str_field(*a.message, "reasoning");
  if (a.reasoning.empty()) {
    if (std::size_t e = a.content.find("</think>"); e != std::string::npos) {
      std::size_t b = a.content.find("<think>");
      b = (b == std::string::npos || b > e) ? 0 : b + 7;
      a.reasoning = a.content.substr(b, e - b);
      a.content = a.content.substr(e + 8);
      a.inline_think = true;
    }
  }
  if (const json* u = field(body, "usage")) {
    a.prompt_tokens = int_field(*u, "prompt_tokens");
    a.completion_tokens = int_field(*u, "completion_tokens");
    if (const json* d = field(*u, "completion_tokens_details")) a.reasoning_tokens = int_field(*d, "reasoning_tokens");
  }
  return a;
}

void record(CheckResult& r, const Answer& a) {
  r.finish_reason = a.finish;
  r.prompt_tokens = a.prompt_tokens;
  r.completion_tokens = a.completion_tokens;
  r.content = excerpt(a.content);
  r.reasoning = excerpt(a.reasoning);
  if (a.reasoning_tokens >= 0) r.reasoning_tokens = a.reasoning_tokens;
}

// Every detail is one line of at most 2,000 bytes, control bytes shown as spaces (issue 27 #15: a 500 KB
// server message reached the report whole).
constexpr std::size_t kMaxDetail = 2000;
void fail(CheckResult& r, std::string cls, std::string detail) {
  r.status = CheckStatus::FAIL;
  r.classification = std::move(cls);
  r.detail = excerpt(detail, kMaxDetail);
}
void pass(CheckResult& r, std::string detail) {
  r.status = CheckStatus::PASS;
  r.classification = "ok";
  r.detail = excerpt(detail, kMaxDetail);
}
void skip(CheckResult& r, std::string cls, std::string detail) {
  r.status = CheckStatus::SKIP;
  r.classification = std::move(cls);
  r.detail = excerpt(detail, kMaxDetail);
}

// Shared verdict on an answer without usable content. Returns true when it failed `r`.
bool fail_if_no_content(CheckResult& r, const Answer& a, int max_tokens) {
  if (!a.valid) {
    fail(r, "malformed-json", "the answer has no choices[0].message object");
    return true;
  }
  if (!trim(a.content).empty()) return false;
  const std::string tokens = a.completion_tokens >= 0 ? fmt::format("{}", a.completion_tokens) : "?";
  const char* what = a.content_null ? "null" : "empty";
  if (!trim(a.reasoning).empty()) {
    fail(r, "reasoning-no-content",
         fmt::format("content {} after {} reasoning chars (finish_reason '{}', {} of max_tokens {} tokens): the answer "
                     "never left the reasoning field; raise max_tokens or turn thinking off",
                     what, a.reasoning.size(), a.finish, tokens, max_tokens));
  } else if (a.finish == "length") {
    fail(r, "content-null-length",
         fmt::format("content {} with finish_reason 'length' after {} of max_tokens {} tokens and no reasoning: "
                     "the F1 signature of NaN logits (quantized router?); run the logprobs check and 'fp4forge doctor'",
                     what, tokens, max_tokens));
  } else {
    fail(r, "empty-content", fmt::format("content {} (finish_reason '{}', {} completion tokens)", what,
                                         a.finish.empty() ? "none" : a.finish, tokens));
  }
  return true;
}

json user_msg(const std::string& text) { return json{{"role", "user"}, {"content", text}}; }

json chat_body(const Ctx& ctx, json messages, int max_tokens) {
  return json{{"model", ctx.model}, {"messages", std::move(messages)}, {"max_tokens", max_tokens}, {"temperature", 0}};
}

// ---------------------------------------------------------------------------------------------
// checks

void check_models(Ctx& ctx, CheckResult& r, Clock::time_point deadline) {
  Call c = exchange(ctx, "GET", "/v1/models", nullptr, deadline);
  r.http_status = c.status;
  if (!c.ok) return fail(r, c.cls, c.detail);
  const json* data = field(c.body, "data");
  if (data == nullptr || !data->is_array()) return fail(r, "malformed-json", "/v1/models: no 'data' array");
  std::vector<std::string> ids;
  for (const json& m : *data) ids.push_back(str_field(m, "id"));
  if (std::find(ids.begin(), ids.end(), ctx.model) != ids.end())
    return pass(r, fmt::format("'{}' listed ({} model(s) served)", ctx.model, ids.size()));
  std::string list;
  for (std::size_t i = 0; i < ids.size() && i < 8; ++i) list += (i ? ", " : "") + ids[i];
  fail(r, "model-not-listed",
       fmt::format("/v1/models does not list '{}'; served: [{}]; check --model (vLLM: --served-model-name)",
                   ctx.model, list));
}

void check_prose(Ctx& ctx, CheckResult& r, Clock::time_point deadline) {
  const int max_tokens = ctx.opts.max_tokens;
  json body = chat_body(ctx, json::array({user_msg("What is 17 + 25? Reply with the number only.")}), max_tokens);
  Call c = exchange(ctx, "POST", "/v1/chat/completions", &body, deadline);
  r.http_status = c.status;
  if (!c.ok) return fail(r, c.cls, c.detail);
  const Answer a = read_chat(c.body);
  record(r, a);
  if (fail_if_no_content(r, a, max_tokens)) return;
  if (std::string why = degenerate_reason(a.content); !why.empty()) return fail(r, "degenerate-output", why);
  if (a.completion_tokens > max_tokens)
    return fail(r, "inconsistent-usage",
                fmt::format("usage.completion_tokens {} exceeds max_tokens {}", a.completion_tokens, max_tokens));
  if (a.finish == "length" && a.completion_tokens >= 0 && a.completion_tokens < max_tokens)
    return fail(r, "inconsistent-usage",
                fmt::format("finish_reason 'length' but only {} of max_tokens {} tokens used", a.completion_tokens,
                            max_tokens));
  if (a.finish != "stop")
    return fail(r, "runaway-generation",
                fmt::format("a one-number question ended with finish_reason '{}' after {} tokens, expected 'stop'",
                            a.finish.empty() ? "none" : a.finish, a.completion_tokens));
  if (a.content.find("42") == std::string::npos)
    return fail(r, "wrong-answer", fmt::format("17 + 25: expected 42 in the answer, got '{}'", excerpt(a.content, 80)));
  std::string d = fmt::format("answered '{}' (finish stop, {} completion tokens)", excerpt(trim(a.content), 60),
                              a.completion_tokens);
  if (!a.reasoning.empty())
    d += fmt::format("; reasoning {} chars{}", a.reasoning.size(), a.inline_think ? " inline as <think> in content" : "");
  pass(r, d);
}

void check_long(Ctx& ctx, CheckResult& r, Clock::time_point deadline) {
  const int max_tokens = std::max(ctx.opts.long_max_tokens, ctx.opts.long_min_tokens);
  json body = chat_body(
      ctx,
      json::array({user_msg("Write a detailed essay of about 600 words on the history of lighthouses: ancient fire "
                            "towers, the Pharos of Alexandria, Fresnel lenses, lighthouse keepers, electrification "
                            "and automation. Use several paragraphs.")}),
      max_tokens);
  body["temperature"] = 0.6;
  body["stream"] = true;
  body["stream_options"] = json{{"include_usage", true}};
  Call c = exchange(ctx, "POST", "/v1/chat/completions", &body, deadline, /*stream=*/true);
  r.http_status = c.status;
  if (!c.ok) return fail(r, c.cls, c.detail);
  const Answer a = read_chat(c.body);
  record(r, a);
  const double ratio = std::max(repeated_ngram_ratio(a.content), repeated_ngram_ratio(a.reasoning));
  r.metric = ratio;
  const bool reasoning_only = trim(a.content).empty() && !trim(a.reasoning).empty() && a.finish == "length";
  if (!reasoning_only && fail_if_no_content(r, a, max_tokens)) return;
  if (!reasoning_only) {
    if (std::string why = degenerate_reason(a.content); !why.empty()) return fail(r, "degenerate-output", why);
  }
  if (ratio > ctx.opts.max_repeat_ratio)
    return fail(r, "degenerate-loop",
                fmt::format("repeated 4-gram ratio {:.2f} over {} tokens exceeds {:.2f}: the generation loops ('{}')",
                            ratio, a.completion_tokens, ctx.opts.max_repeat_ratio, excerpt(a.content, 80)));
  if (a.completion_tokens >= 0 && a.completion_tokens < ctx.opts.long_min_tokens)
    return fail(r, "too-short",
                fmt::format("only {} tokens (finish_reason '{}'), expected at least {} for a long essay",
                            a.completion_tokens, a.finish, ctx.opts.long_min_tokens));
  pass(r, fmt::format("{} tokens streamed, repeated 4-gram ratio {:.2f} (limit {:.2f}){}", a.completion_tokens, ratio,
                      ctx.opts.max_repeat_ratio,
                      reasoning_only ? "; still reasoning at max_tokens (checked the reasoning text)" : ""));
}

void check_logprobs(Ctx& ctx, CheckResult& r, Clock::time_point deadline) {
  json body = chat_body(ctx, json::array({user_msg("Name the three primary colors of light.")}), 16);
  body["logprobs"] = true;
  body["top_logprobs"] = 5;
  Call c = exchange(ctx, "POST", "/v1/chat/completions", &body, deadline);
  r.http_status = c.status;
  if (!c.ok) {
    if (c.cls == "nan-logits")
      return fail(r, c.cls,
                  c.detail + " — the logits are NaN (F1: quantized router or gate?); run 'fp4forge doctor' on the "
                             "checkpoint");
    return fail(r, c.cls, c.detail);
  }
  const Answer a = read_chat(c.body);
  record(r, a);
  const json* lp = a.choice != nullptr ? field(*a.choice, "logprobs") : nullptr;
  const json* content = lp != nullptr ? field(*lp, "content") : nullptr;
  if (content == nullptr || !content->is_array() || content->empty())
    return fail(r, "missing-logprobs", "logprobs were requested but choices[0].logprobs.content is absent or empty");
  std::size_t n = 0;
  double lo = 0.0;
  for (std::size_t i = 0; i < content->size(); ++i) {
    const json& t = (*content)[i];
    std::vector<const json*> vals{field(t, "logprob")};
    if (const json* top = field(t, "top_logprobs"); top != nullptr && top->is_array())
      for (const json& e : *top) vals.push_back(field(e, "logprob"));
    for (const json* v : vals) {
      if (v == nullptr || v->is_null() || v->is_string())
        return fail(r, "nan-logits",
                    fmt::format("token {} ('{}'): logprob is {} instead of a finite number", i,
                                excerpt(str_field(t, "token"), 20), v == nullptr ? "missing" : v->dump()));
      if (!v->is_number()) return fail(r, "malformed-json", fmt::format("token {}: logprob is not a number", i));
      const double x = v->get<double>();
      if (!std::isfinite(x)) return fail(r, "nan-logits", fmt::format("token {}: logprob {} is not finite", i, x));
      if (x > 1e-4)
        return fail(r, "invalid-logprobs", fmt::format("token {}: logprob {} > 0 is impossible", i, x));
      lo = std::min(lo, x);
      ++n;
    }
  }
  pass(r, fmt::format("{} tokens, {} logprobs all finite (min {:.3f})", content->size(), n, lo));
}

void check_vision(Ctx& ctx, CheckResult& r, Clock::time_point deadline) {
  if (ctx.opts.vision == VisionMode::TEXT_ONLY)
    return skip(r, "text-only", "skipped: the model is text-only (--text-only); no image request sent");
  const std::string url = png_data_url(red_circle_png(64));
  json parts = json::array({json{{"type", "text"},
                                 {"text", "What shape is shown in this image, and what color is it? Answer in a few words."}},
                            json{{"type", "image_url"}, {"image_url", json{{"url", url}}}}});
  json body = chat_body(ctx, json::array({json{{"role", "user"}, {"content", parts}}}), ctx.opts.max_tokens);
  Call c = exchange(ctx, "POST", "/v1/chat/completions", &body, deadline);
  r.http_status = c.status;
  if (!c.ok) {
    const bool image_refusal = c.cls == "client-error" &&
                               contains_any(c.server_message, {"image", "multimodal", "multi-modal", "vision", "modalit"});
    if (image_refusal && ctx.opts.vision == VisionMode::AUTO)
      return skip(r, "text-only",
                  fmt::format("skipped: the server rejected the image, the model is text-only (HTTP {}: {}); pass "
                              "--multimodal to make this a failure",
                              c.status, excerpt(c.server_message, 160)));
    if (image_refusal) return fail(r, "image-rejected", c.detail + " (the model was declared multimodal)");
    return fail(r, c.cls, c.detail);
  }
  const Answer a = read_chat(c.body);
  record(r, a);
  if (fail_if_no_content(r, a, ctx.opts.max_tokens)) return;
  const bool red = contains_any(a.content, {"red", "crimson", "scarlet"});
  const bool round = contains_any(a.content, {"circle", "circular", "round", "disc", "disk", "dot", "ball", "sphere"});
  if (!red || !round)
    return fail(r, "vision-wrong-answer",
                fmt::format("a red circle on white was described as '{}' (mentions red: {}, circle: {}); the vision "
                            "tower may be broken (quantized tower? F24)",
                            excerpt(trim(a.content), 100), red ? "yes" : "no", round ? "yes" : "no"));
  pass(r, fmt::format("described the image as '{}'", excerpt(trim(a.content), 80)));
}

void check_tools(Ctx& ctx, CheckResult& r, Clock::time_point deadline) {
  json params = json{{"type", "object"},
                     {"properties", json{{"city", json{{"type", "string"}, {"description", "city name"}}},
                                         {"unit", json{{"type", "string"}, {"enum", json::array({"celsius", "fahrenheit"})}}}}},
                     {"required", json::array({"city"})}};
  json tool = json{{"type", "function"},
                   {"function", json{{"name", "get_weather"},
                                     {"description", "Get the current weather for a city"},
                                     {"parameters", params}}}};
  json body = chat_body(ctx, json::array({user_msg("What is the weather in Paris right now? Use the get_weather tool.")}),
                        ctx.opts.max_tokens);
  body["tools"] = json::array({tool});
  body["tool_choice"] = "auto";
  Call c = exchange(ctx, "POST", "/v1/chat/completions", &body, deadline);
  r.http_status = c.status;
  if (!c.ok) {
    if (c.cls == "client-error" && contains_any(c.server_message, {"tool"}))
      return fail(r, "tools-not-enabled",
                  c.detail + "; vLLM needs --enable-auto-tool-choice and --tool-call-parser for tool calls");
    return fail(r, c.cls, c.detail);
  }
  const Answer a = read_chat(c.body);
  record(r, a);
  if (!a.valid) return fail(r, "malformed-json", "the answer has no choices[0].message object");
  const json* calls = field(*a.message, "tool_calls");
  if (calls == nullptr || calls->is_null() || (calls->is_array() && calls->empty())) {
    if (a.finish == "tool_calls" || (calls != nullptr && calls->is_array()))
      return fail(r, "empty-tool-call",
                  fmt::format("finish_reason '{}' but tool_calls is {}", a.finish, calls == nullptr ? "absent" : calls->dump()));
    if (contains_any(a.content, {"<tool_call>", "\"name\": \"get_weather\"", "get_weather("}))
      return fail(r, "no-tool-call",
                  fmt::format("the tool call came back as text in content ('{}'): the server's tool-call parser is "
                              "missing or wrong (vLLM --tool-call-parser)",
                              excerpt(trim(a.content), 80)));
    return fail(r, "no-tool-call",
                fmt::format("no tool call; the model answered '{}' (finish_reason '{}')", excerpt(trim(a.content), 80),
                            a.finish));
  }
  if (!calls->is_array()) return fail(r, "malformed-json", "message.tool_calls is not an array");
  std::string summary;
  for (std::size_t i = 0; i < calls->size(); ++i) {
    const json* fn = field((*calls)[i], "function");
    const std::string name = fn != nullptr ? str_field(*fn, "name") : std::string();
    const json* args = fn != nullptr ? field(*fn, "arguments") : nullptr;
    if (name.empty() || args == nullptr || args->is_null() || (args->is_string() && trim(args->get<std::string>()).empty()))
      return fail(r, "empty-tool-call", fmt::format("tool call {} has an empty name or arguments: {}", i, (*calls)[i].dump()));
    json parsed = args->is_string() ? parse_server_json(args->get<std::string>()) : *args;
    if (parsed.is_discarded() || !parsed.is_object())
      return fail(r, "invalid-tool-arguments",
                  fmt::format("tool call {} ({}) arguments are not a JSON object: '{}'", i, name,
                              excerpt(args->is_string() ? args->get<std::string>() : args->dump(), 80)));
    if (name != "get_weather")
      return fail(r, "invalid-tool-arguments", fmt::format("tool call {} names '{}', expected 'get_weather'", i, name));
    if (trim(str_field(parsed, "city")).empty())
      return fail(r, "invalid-tool-arguments",
                  fmt::format("tool call {} arguments {} lack the required string 'city'", i, parsed.dump()));
    if (summary.empty()) summary = fmt::format("{}({})", name, excerpt(parsed.dump(), 60));
  }
  pass(r, fmt::format("{} tool call(s): {}", calls->size(), summary));
}

void check_multiturn(Ctx& ctx, CheckResult& r, Clock::time_point deadline) {
  const char* turns[] = {"Remember this for later: my locker code is 4817. Just reply OK.",
                         "What is the capital of France? Answer in one word.",
                         "What is my locker code? Reply with the number only."};
  json messages = json::array();
  Answer a;
  for (int t = 0; t < 3; ++t) {
    messages.push_back(user_msg(turns[t]));
    json body = chat_body(ctx, messages, ctx.opts.max_tokens);
    Call c = exchange(ctx, "POST", "/v1/chat/completions", &body, deadline);
    r.http_status = c.status;
    if (!c.ok) return fail(r, c.cls, fmt::format("turn {}: {}", t + 1, c.detail));
    a = read_chat(c.body);
    record(r, a);
    if (fail_if_no_content(r, a, ctx.opts.max_tokens)) {
      r.detail = fmt::format("turn {}: {}", t + 1, r.detail);
      return;
    }
    messages.push_back(json{{"role", "assistant"}, {"content", a.content}});
  }
  if (a.content.find("4817") == std::string::npos)
    return fail(r, "recall-failed",
                fmt::format("turn 3 should recall the code 4817 from turn 1, got '{}'", excerpt(trim(a.content), 80)));
  pass(r, fmt::format("recalled 4817 in turn 3 ('{}')", excerpt(trim(a.content), 40)));
}

void check_completions(Ctx& ctx, CheckResult& r, Clock::time_point deadline) {
  json body = json{{"model", ctx.model}, {"prompt", "The capital of France is"}, {"max_tokens", 16}, {"temperature", 0}};
  Call c = exchange(ctx, "POST", "/v1/completions", &body, deadline);
  r.http_status = c.status;
  if (!c.ok) return fail(r, c.cls, c.detail);
  const json* choices = field(c.body, "choices");
  if (choices == nullptr || !choices->is_array() || choices->empty())
    return fail(r, "malformed-json", "/v1/completions: no choices array");
  const std::string text = str_field((*choices)[0], "text");
  r.finish_reason = str_field((*choices)[0], "finish_reason");
  r.content = excerpt(text);
  if (const json* u = field(c.body, "usage")) {
    r.prompt_tokens = int_field(*u, "prompt_tokens");
    r.completion_tokens = int_field(*u, "completion_tokens");
  }
  if (trim(text).empty())
    return fail(r, "empty-completion",
                fmt::format("/v1/completions returned no text (finish_reason '{}', {} tokens): the weights themselves "
                            "produce nothing",
                            r.finish_reason, r.completion_tokens));
  if (std::string why = degenerate_reason(text); !why.empty()) return fail(r, "degenerate-output", why);
  pass(r, fmt::format("raw completion '{}'", excerpt(trim(text), 60)));
}

void check_reasoning(Ctx& ctx, CheckResult& r, Clock::time_point deadline) {
  const int max_tokens = ctx.opts.client_max_tokens;
  json body = chat_body(ctx,
                        json::array({user_msg("A train leaves at 3:40 pm and the trip takes 2 hours and 35 minutes. "
                                              "At what time does it arrive? Give the final time.")}),
                        max_tokens);
  Call c = exchange(ctx, "POST", "/v1/chat/completions", &body, deadline);
  r.http_status = c.status;
  if (!c.ok) return fail(r, c.cls, c.detail);
  const Answer a = read_chat(c.body);
  record(r, a);
  if (trim(a.reasoning).empty()) {
    if (fail_if_no_content(r, a, max_tokens)) return;
    return skip(r, "not-reasoning",
                fmt::format("no reasoning_content/reasoning field: the model answers directly ({} tokens)",
                            a.completion_tokens));
  }
  // Split completion tokens between reasoning and content: reported, or estimated by character share.
  const int total = a.completion_tokens;
  int rt = a.reasoning_tokens;
  bool estimated = false;
  if (rt < 0 && total >= 0) {
    const double share = static_cast<double>(a.reasoning.size()) /
                         static_cast<double>(std::max<std::size_t>(1, a.reasoning.size() + a.content.size()));
    rt = static_cast<int>(std::lround(share * total));
    estimated = true;
  }
  r.reasoning_tokens = rt;
  if (fail_if_no_content(r, a, max_tokens)) return;
  const int ct = (total >= 0 && rt >= 0) ? std::max(0, total - rt) : -1;
  r.metric = (ct > 0 && rt >= 0) ? static_cast<double>(rt) / ct : -1.0;
  const bool fits = a.finish == "stop";
  pass(r, fmt::format("reasoning {}{} tokens, content {} tokens (ratio {}), {} of max_tokens {} used; {}{}",
                      estimated ? "~" : "", rt, ct, r.metric >= 0 ? fmt::format("{:.1f}", r.metric) : "n/a", total,
                      max_tokens,
                      fits ? "the answer fits" : fmt::format("the answer does NOT fit (finish_reason '{}')", a.finish),
                      a.inline_think ? "; reasoning arrives inline as <think> in content (no --reasoning-parser?)" : ""));
}

}  // namespace

namespace {

// One check on `ctx`'s client: its own deadline (timeout_s from its start), capped by the probe's overall one.
CheckResult run_one(Ctx& ctx, Check ch, Clock::time_point overall, const std::string& password) {
  CheckResult r;
  r.check = ch;
  auto mask = [&](const std::string& t) { return mask_secret(mask_secret(t, ctx.opts.api_key), password); };
  const auto t0 = Clock::now();
  if (!ctx.dead_cls.empty()) {
    fail(r, ctx.dead_cls, "not sent: " + ctx.dead_detail);
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
    }
  }
  r.latency_s = std::chrono::duration<double>(Clock::now() - t0).count();
  r.detail = mask(r.detail);
  r.content = mask(r.content);
  r.reasoning = mask(r.reasoning);
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
  Ctx first{client, base, rep.model, opts, {}, {}, false};
  std::size_t next = 0;
  if (!order.empty()) {
    done(order[0], run_one(first, checks[order[0]], overall, password));
    next = 1;
  }
  bool any_response = first.any_response;
  bool dead = !first.dead_cls.empty() && !first.any_response;
  const std::size_t rest = order.size() - next;
  const std::size_t workers =
      make_client == nullptr || dead ? 1 : std::min<std::size_t>(rest, static_cast<std::size_t>(std::max(1, opts.concurrency)));
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
        Ctx ctx{*own, base, rep.model, opts, {}, {}, false};
        for (std::size_t k = cursor++; k < order.size(); k = cursor++)
          done(order[k], run_one(ctx, checks[order[k]], overall, password));
        if (ctx.any_response) answered = true;
      });
    for (auto& t : pool) t.join();
    any_response = answered;
  }
  rep.unreachable = dead && !any_response;
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
