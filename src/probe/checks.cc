// The checks of the first probe (internal.h): models, prose, long, logprobs, vision, tools, multiturn,
// completions, reasoning; and how a chat answer is read and a verdict recorded. check_context.cc and
// check_kv.cc hold the long-context and KV-pool checks.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "fp4forge/probe/png.h"
#include "fp4forge/util/did_you_mean.h"
#include "internal.h"

namespace fp4forge::probe::detail {

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
    fail(r, "empty-content",
         fmt::format("content {} (finish_reason '{}', {} completion token{})", what,
                     a.finish.empty() ? "none" : a.finish, tokens, tokens == "1" ? "" : "s"));
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
  ctx.shared.served_max_model_len = max_model_len_of(c.body, ctx.model);  // the first check runs alone: no race
  if (std::find(ids.begin(), ids.end(), ctx.model) != ids.end())
    return pass(r, fmt::format("'{}' listed ({} model(s) served)", ctx.model, ids.size()));
  std::string list;
  for (std::size_t i = 0; i < ids.size() && i < 8; ++i) list += (i ? ", " : "") + ids[i];
  ctx.shared.model_not_listed = true;
  fail(r, "model-not-listed",
       fmt::format("/v1/models does not list '{}'{}; served: [{}]; {}", ctx.model, util::did_you_mean(ctx.model, ids),
                   list,
                   ctx.opts.model_not_served_hint.empty() ? std::string("check --model (vLLM: --served-model-name)")
                                                          : ctx.opts.model_not_served_hint));
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
  std::string d = fmt::format("answered '{}' (finish stop, {} completion token{})", excerpt(trim(a.content), 60),
                              a.completion_tokens, a.completion_tokens == 1 ? "" : "s");  // "1 completion token"
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
  Call c = exchange(ctx, "POST", "/v1/chat/completions", &body, deadline, ExchangeMode{.stream = true});
  r.http_status = c.status;
  if (!c.ok) return fail(r, c.cls, c.detail);
  const Answer a = read_chat(c.body);
  record(r, a);
  // A stream that runs past max_tokens: the server ignores the client's budget (usage, or the chunks that carried
  // text: each holds at least one token, so more chunks than max_tokens is more tokens than asked).
  if (a.completion_tokens > max_tokens || c.stream_chunks > max_tokens)
    return fail(r, "exceeds-max-tokens",
                fmt::format("the stream ran past max_tokens {}: {} completion tokens{}, {} chunks with text; the "
                            "server does not honour the client's budget (a runaway seat costs every client its "
                            "latency)",
                            max_tokens, a.completion_tokens,
                            c.body.contains("usage") && c.body["usage"].contains("estimated") ? " (counted)" : "",
                            c.stream_chunks));
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
  if (ctx.opts.no_tools)
    return skip(r, "no-tools",
                "not run: --no-tools says the seat serves no tools (a client that sends tools gets "
                "vLLM's error); leave --no-tools out to prove a seat that does");
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


}  // namespace fp4forge::probe::detail
