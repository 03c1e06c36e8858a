// One exchange of the probe (internal.h): a request under the check's deadline, classified. POST bodies carry
// the alias's request extras, LiteLLM's response headers name the deployment that answered, and a 401/403 stops
// the probe with a hint about the key. Also the text and JSON helpers every check uses.
#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "fp4forge/util/redact.h"
#include "fp4forge/util/strings.h"
#include "internal.h"

namespace fp4forge::probe::detail {

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
std::string excerpt(std::string_view s, std::size_t n) {
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

namespace {

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

bool alnum_char(char ch) { return std::isalnum(static_cast<unsigned char>(ch)) != 0; }
/** A model name's characters beyond alnum: `org/name-v2_1`. */
bool name_char(char ch) { return alnum_char(ch) || ch == '_' || ch == '-' || ch == '/'; }

/** Whether `w` occurs in `text` as a whole word: not preceded or followed by a `word_char`. */
bool has_word(std::string_view text, std::string_view w, bool (*word_char)(char) = alnum_char) {
  if (w.empty()) return false;
  for (std::size_t p = text.find(w); p != std::string_view::npos; p = text.find(w, p + 1)) {
    const bool left = p == 0 || !word_char(text[p - 1]);
    const bool right = p + w.size() >= text.size() || !word_char(text[p + w.size()]);
    if (left && right) return true;
  }
  return false;
}

/** Whether `text` names `model` as a whole name (vLLM's "The model `M` does not exist.", LiteLLM's "model=M."), not
 * as letters inside a word: a model 't' is not named by "Not Found" (tryout M-M2). */
bool names_model(std::string_view text, std::string_view model) { return has_word(text, model, name_char); }

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
      // The detail says what the class says (issue 55: "not valid JSON" under nan-logits read as a contradiction).
      call.detail = call.cls == "nan-logits"
                        ? fmt::format("stream event carries a bare NaN / Infinity (no JSON number: the server wrote a "
                                      "non-finite value, the NaN-logits signature): '{}'", excerpt(payload, 120))
                        : fmt::format("stream event is not valid JSON: '{}'", excerpt(payload, 120));
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
  call.stream_chunks = chunks;
  call.ok = true;
}

/** The body a POST sends: the alias's defaults under the probe's own keys, its overrides over them. */
std::string body_text(const ProbeOptions& o, const json& body) {
  if (!body.is_object() || (o.request_defaults.empty() && o.request_overrides.empty())) return body.dump();
  json merged = o.request_defaults.is_object() ? o.request_defaults : json::object();
  for (const auto& [k, v] : body.items()) merged[k] = v;
  if (o.request_overrides.is_object())
    for (const auto& [k, v] : o.request_overrides.items()) merged[k] = v;
  return merged.dump();
}

/** LiteLLM's x-litellm-* response headers (LiteLLM proxy ProxyBaseLLMRequestProcessing.get_custom_headers). */
ServedBy served_by_of(const HttpResponse& r) {
  ServedBy s;
  s.api_base = util::redact_url(r.header("x-litellm-model-api-base"));
  s.model_id = excerpt(r.header("x-litellm-model-id"), 200);
  s.model_group = excerpt(r.header("x-litellm-model-group"), 200);
  return s;
}

/** The classification and detail of an HTTP 401 / 403: the key is missing or wrong for this server. */
void unauthorized(Ctx& ctx, Call& call, const char* method, const std::string& path) {
  call.cls = "unauthorized";
  const std::string hint =
      ctx.opts.api_key.empty()
          ? "no API key was sent: pass --api-key-env VAR naming the variable that holds the server's key (vLLM "
            "--api-key, a LiteLLM master or virtual key)"
          : ctx.opts.api_key_source.empty()
                ? std::string("the key sent was refused: check the variable --api-key-env names (for a gateway swap: "
                              "the alias's api_key, os.environ/NAME, must name the key this backend takes)")
                : fmt::format("the key sent was refused: it came from {}; check that it is the key this server "
                              "takes, or pass --api-key-env VAR naming the right one", ctx.opts.api_key_source);
  call.detail = fmt::format("{} {}: HTTP {}: {}; {}", method, path, call.status, call.server_message, hint);
  bool expected = false;
  if (ctx.shared.unauthorized.compare_exchange_strong(expected, true)) {
    std::lock_guard<std::mutex> g(ctx.shared.mu);
    ctx.shared.unauthorized_detail = fmt::format("HTTP {} from {} {}", call.status, method, path);
  }
}

}  // namespace

Call exchange(Ctx& ctx, const char* method, const std::string& path, const json* body, Clock::time_point deadline,
              ExchangeMode mode) {
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
  req.headers.emplace_back("Accept", mode.stream ? "text/event-stream" : mode.raw_text ? "text/plain" : "application/json");
  if (!ctx.opts.api_key.empty()) req.headers.emplace_back("Authorization", "Bearer " + ctx.opts.api_key);
  if (body != nullptr) {
    req.headers.emplace_back("Content-Type", "application/json");
    req.body = body_text(ctx.opts, *body);
  }
  HttpResponse r = ctx.client.send(req);
  const bool first_answer = !ctx.any_response;
  call.status = r.status;
  if (r.transport == Transport::CONNECTION_REFUSED || r.transport == Transport::UNREACHABLE) {
    call.cls = transport_name(r.transport);
    call.detail = (r.error.empty() ? fmt::format("{} {}: {}", method, util::redact_url(req.url), call.cls) : r.error) +
                  "; is the server up, and is this its host and port?";
    if (!ctx.any_response && ctx.dead_cls.empty()) ctx.dead_cls = call.cls;
    return call;
  }
  if (r.status > 0) ctx.any_response = true;
  // The headers of a refusal prove no routing: a refused key (401/403) or a model the gateway does not serve (404,
  // LiteLLM's 400 "Invalid model name") is the proxy's own answer, whatever x-litellm-* it sent (issue 55 tryout J:
  // ten 404s read as "the alias still answers from" a backend, "a fallback?").
  const bool refused = r.status == 401 || r.status == 403 || r.status == 404 ||
                       (r.status == 400 && r.body.find("Invalid model name") != std::string::npos);
  if (const ServedBy s = served_by_of(r); s.any() && !refused) ctx.served_by = s;
  if (r.transport == Transport::TIMEOUT) {
    call.cls = "timeout";
    call.detail = fmt::format("{} {}: no complete answer within {:.1f} s ({} bytes received)", method, path, left,
                              r.body.size());
    // The first request, a listing that answers at once on any OpenAI server, never answered: nothing else will
    // (issue 55 tryout: a server that accepts and never answers cost eleven timeouts).
    if (!ctx.any_response && ctx.dead_cls.empty() && path == "/v1/models" && r.status == 0) ctx.dead_cls = call.cls;
    return call;
  }
  if (r.transport == Transport::CUT_OFF) {
    call.cls = mode.stream ? "stream-cut-off" : "truncated";
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
    if ((r.status == 401 || r.status == 403) && mode.auth_fatal) {
      unauthorized(ctx, call, method, path);
      return call;
    }
    if (mentions_nan(call.server_message) || has_nan_literal(r.body)) {
      call.cls = "nan-logits";
    } else {
      call.cls = r.status >= 500 ? "server-error" : "client-error";
    }
    call.detail = fmt::format("{} {}: HTTP {}: {}", method, path, r.status, call.server_message);
    // Only a request that names the model (a POST) is refused for its model; GET /metrics and /v1/models are not.
    if ((r.status == 404 || r.status == 400) && std::string_view(method) == "POST" &&
        names_model(call.server_message, ctx.model) &&
        (r.status == 404 || call.server_message.find("Invalid model name") != std::string::npos)) {
      // vLLM's "The model `M` does not exist.", LiteLLM's 400 "Invalid model name passed in model=M": the model
      // name is not served, the URL is right (issue 55 tryout: nine lines asked whether a right URL was the
      // server's base URL).
      call.detail = fmt::format("{} {}: HTTP {}: {}; the server does not serve '{}' under that name: {}", method, path,
                                r.status, call.server_message, ctx.model,
                                ctx.opts.model_not_served_hint.empty()
                                    ? std::string("check --model (vLLM: --served-model-name; the models check lists "
                                                  "what it serves)")
                                    : ctx.opts.model_not_served_hint);
    } else if (r.status == 404 &&
               path != "/metrics") {  // the whole URL, and what a 404 at the root of the API means (issue 55 tryout)
      call.detail = fmt::format("{} {}: HTTP 404{}{}; is {} the server's base URL? vLLM and LiteLLM answer "
                                "{} at their root", method, util::redact_url(req.url),
                                call.server_message.empty() ? "" : ": ", call.server_message,
                                util::redact_url(ctx.base), path);
      if (path == "/v1/models" && first_answer)
        ctx.stop = fmt::format("GET {} answered 404 (detail above): not an OpenAI API root",
                               util::redact_url(req.url));
    }
    return call;
  }
  if (mode.raw_text) {
    call.raw = std::move(r.body);
    call.ok = true;
    return call;
  }
  const bool is_sse = mode.stream && r.body.find("data:") != std::string::npos && trim(r.body).rfind("{", 0) != 0;
  if (is_sse) {
    parse_stream(r.body, call);
    if (!call.ok) call.detail = fmt::format("{} {}: {}", method, path, call.detail);
    return call;
  }
  call.body = parse_server_json(r.body);
  if (call.body.is_discarded() || !call.body.is_object()) {
    call.cls = has_nan_literal(r.body) ? "nan-logits" : "malformed-json";
    call.detail = call.cls == "nan-logits"
                      ? fmt::format("{} {}: HTTP {} body carries a bare NaN / Infinity (no JSON number: the server "
                                    "wrote a non-finite value, the NaN-logits signature): '{}'", method, path, r.status,
                                    excerpt(trim(r.body), 120))
                      : fmt::format("{} {}: HTTP {} body is not a JSON object: '{}'", method, path, r.status,
                                    excerpt(trim(r.body), 120));
    call.body = json();
    return call;
  }
  call.ok = true;
  return call;
}

}  // namespace fp4forge::probe::detail
