// probe, issue 51 #4 and #5: a 401/403 is 'unauthorized' and stops the probe; a stream past max_tokens fails;
// the context check (a code at a random depth of a long prompt) and the kv check (the served pool from
// vllm:cache_config_info) against the canned seat; the alias's request extras reach the body; LiteLLM's
// response headers are recorded; Prometheus text read as hostile input; the plan --json expectation.
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fp4forge/probe/kv_pool.h"
#include "fp4forge/probe/probe.h"
#include "fp4forge/probe/report.h"
#include "probe_fake_server.h"
#include "unit/probe_test_util.h"

namespace fp4forge::probe {
namespace {

using testing::FakeServer;
using testing::FakeServerOptions;
using testing::Fault;

using testutil::fast_opts;
using testutil::find;

TEST(ProbeUnauthorized, A401StopsTheProbeWithAHint) {
  for (const int status : {401, 403}) {
    SCOPED_TRACE(status);
    FakeServerOptions o;
    o.expect_api_key = "sk-right";
    o.auth_status = status;
    FakeServer srv(o);
    ProbeOptions po = fast_opts();
    const ProbeReport rep = run_probe(srv.url(), o.model, all_checks(), po);
    ASSERT_EQ(rep.checks.size(), 11u);
    const CheckResult& first = find(rep, Check::MODELS);
    EXPECT_EQ(first.status, CheckStatus::FAIL);
    EXPECT_EQ(first.classification, "unauthorized");
    EXPECT_EQ(first.http_status, status);
    EXPECT_NE(first.detail.find("no API key was sent: pass --api-key-env"), std::string::npos) << first.detail;
    for (const auto& c : rep.checks) {
      if (c.check == Check::MODELS) continue;
      EXPECT_EQ(c.status, CheckStatus::SKIP) << check_name(c.check);
      EXPECT_EQ(c.classification, "not-run") << check_name(c.check);
      EXPECT_NE(c.detail.find(fmt::format("refused as unauthorized (HTTP {} from GET /v1/models)", status)),
                std::string::npos) << c.detail;
    }
    EXPECT_EQ(srv.requests().size(), 1u);  // nothing else was sent
    EXPECT_EQ(exit_code(rep), 1);
  }
  FakeServerOptions o;
  o.expect_api_key = "sk-right";
  FakeServer srv(o);
  ProbeOptions po = fast_opts();
  po.api_key = "sk-wrong-key-77";
  const ProbeReport rep = run_probe(srv.url(), o.model, {Check::PROSE, Check::LOGPROBS}, po);
  EXPECT_EQ(rep.checks[0].classification, "unauthorized");
  EXPECT_NE(rep.checks[0].detail.find("the key sent was refused"), std::string::npos) << rep.checks[0].detail;
  EXPECT_EQ(rep.checks[1].classification, "not-run");
  EXPECT_EQ(to_json(rep).dump().find("sk-wrong-key-77"), std::string::npos);
}

TEST(ProbeLong, AStreamPastMaxTokensFails) {
  FakeServerOptions o;
  o.fault = Fault::OVERRUN_STREAM;
  FakeServer srv(o);
  const ProbeReport rep = run_probe(srv.url(), o.model, {Check::LONG}, fast_opts());
  const CheckResult& r = rep.checks[0];
  EXPECT_EQ(r.classification, "exceeds-max-tokens") << r.detail;
  EXPECT_NE(r.detail.find("ran past max_tokens 512: 552 completion tokens"), std::string::npos) << r.detail;
}

TEST(ProbeContext, RecallsTheCodeHiddenInALongPrompt) {
  FakeServer srv(FakeServerOptions{});
  ProbeOptions po = fast_opts();
  po.seed = 42;
  const ProbeReport rep = run_probe(srv.url(), "fake-org/fake-model-nvfp4", {Check::CONTEXT}, po);
  const CheckResult& r = rep.checks[0];
  ASSERT_EQ(r.status, CheckStatus::PASS) << r.classification << ": " << r.detail;
  ASSERT_TRUE(r.context.has_value());
  EXPECT_EQ(r.context->max_model_len, 8192);
  EXPECT_EQ(r.context->seed, 42u);
  // Sized under the served max_model_len: (8192 - 1024 answer - 64 template) x 2.5 / 4 typical tokens.
  EXPECT_EQ(r.context->target_tokens, 4440);
  EXPECT_LE(r.context->estimated_tokens + 1024 + 64, 8192);  // within max_model_len by the conservative bound
  EXPECT_GE(r.context->depth, 0.1);
  EXPECT_LE(r.context->depth, 0.9);
  EXPECT_NE(r.detail.find("recalled '" + r.context->code + "'"), std::string::npos) << r.detail;
  EXPECT_GT(r.prompt_tokens, 3000);  // the server's count (here 4 characters a token)
  // The same seed builds the same prompt: the same code at the same depth.
  const ProbeReport again = run_probe(srv.url(), "fake-org/fake-model-nvfp4", {Check::CONTEXT}, po);
  EXPECT_EQ(again.checks[0].context->code, r.context->code);
  EXPECT_EQ(again.checks[0].context->depth, r.context->depth);
  po.seed = 43;
  const ProbeReport other = run_probe(srv.url(), "fake-org/fake-model-nvfp4", {Check::CONTEXT}, po);
  EXPECT_NE(other.checks[0].context->seed, r.context->seed);
  const auto j = to_json(r);
  EXPECT_EQ(j["context"]["code"], r.context->code);
  EXPECT_EQ(j["context"]["max_model_len"], 8192);
}

TEST(ProbeContext, LongContextCollapseFails) {
  FakeServerOptions o;
  o.fault = Fault::CONTEXT_COLLAPSE;
  FakeServer srv(o);
  ProbeOptions po = fast_opts();
  po.seed = 7;
  const ProbeReport rep = run_probe(srv.url(), o.model, {Check::PROSE, Check::CONTEXT}, po);
  EXPECT_EQ(rep.checks[0].status, CheckStatus::PASS);  // short prompts are fine
  const CheckResult& r = rep.checks[1];
  EXPECT_EQ(r.classification, "context-recall-failed") << r.detail;
  EXPECT_NE(r.detail.find("--seed 7 repeats this prompt"), std::string::npos) << r.detail;
}

TEST(ProbeContext, ALengthRefusalIsAFindingNotATransportError) {
  FakeServer srv(FakeServerOptions{});
  ProbeOptions po = fast_opts();
  po.context_tokens = 20000;  // asked for: more than the seat's 8192
  const ProbeReport rep = run_probe(srv.url(), "fake-org/fake-model-nvfp4", {Check::CONTEXT}, po);
  const CheckResult& r = rep.checks[0];
  EXPECT_EQ(r.classification, "context-refused") << r.detail;
  EXPECT_EQ(r.http_status, 400);
  EXPECT_NE(r.detail.find("maximum context length is 8192 tokens"), std::string::npos) << r.detail;
  EXPECT_NE(r.detail.find("lower --context-tokens"), std::string::npos) << r.detail;
}

// Tryout N-M5: the fake seat counts an image by its tokens, not its base64 bytes: a 4,096-token seat (plan's
// max_model_len for a small model) passes the vision check and the default probe.
TEST(ProbeContext, TheFakeSeatCountsAnImageByItsTokensNotItsBytes) {
  FakeServerOptions o;
  o.max_model_len = 4096;
  FakeServer srv(o);
  ProbeOptions po = fast_opts();
  po.vision = VisionMode::MULTIMODAL;
  const ProbeReport rep = run_probe(srv.url(), o.model, {Check::VISION}, po);
  EXPECT_EQ(rep.checks[0].status, CheckStatus::PASS) << rep.checks[0].detail;
}

TEST(ProbeContext, WithoutAListedLimitTheRefusalSizesTheRetry) {
  // /v1/models lists another id (as a gateway might): no max_model_len; the default 16K prompt is refused, the
  // refusal names 6000, and the prompt is rebuilt once to fit it.
  FakeServerOptions o;
  o.listed_model = "someone/else";
  o.max_model_len = 6000;
  FakeServer srv(o);
  ProbeOptions po = fast_opts();
  po.seed = 1;
  const ProbeReport rep = run_probe(srv.url(), o.model, {Check::CONTEXT}, po);
  const CheckResult& r = rep.checks[0];
  EXPECT_EQ(r.status, CheckStatus::PASS) << r.classification << ": " << r.detail;
  ASSERT_TRUE(r.context.has_value());
  EXPECT_EQ(r.context->max_model_len, 6000);
  EXPECT_EQ(r.context->target_tokens, (6000 - 1024 - 64) * 5 / 8);
}

// A short-context seat: the default answer budget (1024) would leave no prompt room, so the context check asks for a
// smaller answer and says so (issue 55 tryout: context-refused with nothing sent, no hint).
TEST(ProbeContext, AShortSeatGetsASmallerAnswerBudgetSaid) {
  FakeServerOptions o;
  o.max_model_len = 1024;
  FakeServer srv(o);
  ProbeOptions po = fast_opts();
  po.seed = 3;
  po.max_tokens_given = true;  // --max-tokens 1024: the other checks keep it, the context check lowers its own
  const ProbeReport rep = run_probe(srv.url(), o.model, {Check::CONTEXT}, po);
  const CheckResult& r = rep.checks[0];
  ASSERT_EQ(r.status, CheckStatus::PASS) << r.classification << ": " << r.detail;
  EXPECT_NE(r.detail.find("(max_tokens 256 for this check, not 1024: the served max_model_len 1024 leaves no room"),
            std::string::npos)
      << r.detail;
  EXPECT_EQ(r.context->target_tokens, (1024 - 256 - 64) * 5 / 8);
  // Too short even for that: nothing is sent, and the hint says what to lower.
  FakeServerOptions tiny;
  tiny.max_model_len = 300;
  FakeServer small(tiny);
  const ProbeReport none = run_probe(small.url(), tiny.model, {Check::CONTEXT}, po);
  EXPECT_EQ(none.checks[0].classification, "context-refused");
  EXPECT_NE(none.checks[0].detail.find("(nothing was sent); hint: lower --max-tokens"), std::string::npos)
      << none.checks[0].detail;
}

// Tryout Q-H1: plan's compose.yaml names a probe with the default budget; against a seat of max_model_len 1024 the
// prompt and max_tokens 1024 did not fit (HTTP 400 on four checks). Unless --max-tokens was given, every check gets
// half the served max_model_len, said in its detail; with it given, a refusal for length carries the hint.
TEST(ProbeBudget, AShortSeatPassesTheDefaultProbeWithTheBudgetSaid) {
  FakeServerOptions o;
  o.max_model_len = 1024;
  FakeServer srv(o);
  ProbeOptions po = fast_opts();
  po.seed = 3;
  po.no_tools = false;
  const std::vector<Check> checks{Check::MODELS, Check::PROSE,     Check::LONG,      Check::LOGPROBS, Check::VISION,
                                  Check::TOOLS,  Check::MULTITURN, Check::REASONING, Check::CONTEXT};
  const ProbeReport rep = run_probe(srv.url(), o.model, checks, po);
  EXPECT_FALSE(rep.any_failed());
  for (const CheckResult& r : rep.checks) {
    if (r.check == Check::MODELS || r.check == Check::LOGPROBS || r.status == CheckStatus::SKIP) continue;
    EXPECT_NE(r.detail.find("(max_tokens 512, half the served max_model_len 1024, not 1024"), std::string::npos)
        << check_name(r.check) << ": " << r.detail;
  }
  EXPECT_EQ(find(rep, Check::CONTEXT).context->target_tokens, (1024 - 512 - 64) * 5 / 8);
  // Without a models check the listing is read first, so the first check is fitted too.
  const ProbeReport two = run_probe(srv.url(), o.model, {Check::PROSE, Check::LOGPROBS}, po);
  EXPECT_TRUE(two.all_passed()) << two.checks[0].detail;
  EXPECT_NE(two.checks[0].detail.find("max_tokens 512"), std::string::npos) << two.checks[0].detail;
  // A seat with room keeps the budget, and says nothing.
  FakeServer roomy(FakeServerOptions{});
  const ProbeReport wide = run_probe(roomy.url(), o.model, {Check::PROSE}, po);
  EXPECT_TRUE(wide.all_passed());
  EXPECT_EQ(wide.checks[0].detail.find("max_tokens"), std::string::npos) << wide.checks[0].detail;
  // --max-tokens 1024 is kept: refused for length, with the hint.
  po.max_tokens_given = true;
  const ProbeReport given = run_probe(srv.url(), o.model, {Check::PROSE}, po);
  ASSERT_EQ(given.checks[0].status, CheckStatus::FAIL);
  EXPECT_NE(given.checks[0].detail.find("; hint: lower --max-tokens (1024)"), std::string::npos)
      << given.checks[0].detail;
  // A server that is down still costs one failure, on the first check, with the rest not sent.
  FakeServerOptions gone;
  std::string dead_url;
  {
    FakeServer tmp(gone);
    dead_url = tmp.url();
  }
  po.max_tokens_given = false;
  const ProbeReport dead = run_probe(dead_url, o.model, {Check::PROSE, Check::LOGPROBS}, po);
  EXPECT_TRUE(dead.unreachable);
  ASSERT_EQ(dead.checks[0].status, CheckStatus::FAIL);
  EXPECT_NE(dead.checks[0].detail.find("not sent: the model listing read first (to size the answer budget) failed: "),
            std::string::npos)
      << dead.checks[0].detail;
  EXPECT_EQ(dead.checks[1].status, CheckStatus::SKIP);
  EXPECT_EQ(dead.checks[1].classification, "not-run");
}

TEST(ProbeKv, ReportsTheServedPoolAndComparesIt) {
  FakeServer srv(FakeServerOptions{});  // 2048 blocks x 16
  ProbeOptions po = fast_opts();
  const ProbeReport plain = run_probe(srv.url(), "fake-org/fake-model-nvfp4", {Check::KV}, po);
  const CheckResult& r = plain.checks[0];
  ASSERT_EQ(r.status, CheckStatus::PASS) << r.detail;
  ASSERT_TRUE(r.kv.has_value());
  EXPECT_EQ(r.kv->num_gpu_blocks, 2048);
  EXPECT_EQ(r.kv->block_size, 16);
  EXPECT_EQ(r.kv->tokens, 32768);
  EXPECT_NE(r.detail.find("served KV pool 32,768 tokens (2,048 blocks x 16, cache_dtype auto)"), std::string::npos)
      << r.detail;
  for (const auto& [expect, cls] : std::vector<std::pair<std::int64_t, std::string>>{
           {32768, "ok"}, {33300, "ok"}, {32200, "ok"}, {33500, "kv-mismatch"}, {30000, "kv-mismatch"}}) {
    SCOPED_TRACE(expect);
    po.expect_kv_tokens = expect;
    po.expect_kv_from = "plan.json seat 'a'";
    const ProbeReport rep = run_probe(srv.url(), "fake-org/fake-model-nvfp4", {Check::KV}, po);
    EXPECT_EQ(rep.checks[0].classification, cls) << rep.checks[0].detail;
    EXPECT_EQ(rep.checks[0].kv->expected_tokens, expect);
    if (cls != "ok") {
      EXPECT_NE(rep.checks[0].detail.find("(plan.json seat 'a')"), std::string::npos);
    }
  }
  EXPECT_EQ(to_json(plain.checks[0])["kv"]["tokens"], 32768);
}

TEST(ProbeKv, NoMetricsIsAWarningNotAFailure) {
  FakeServerOptions o;
  o.kv_blocks = 0;  // /metrics: 404
  FakeServer srv(o);
  ProbeOptions po = fast_opts();
  po.expect_kv_tokens = 1000;
  const ProbeReport rep = run_probe(srv.url(), o.model, {Check::KV}, po);
  EXPECT_EQ(rep.checks[0].status, CheckStatus::SKIP);
  EXPECT_EQ(rep.checks[0].classification, "no-kv-metrics");
  EXPECT_NE(rep.checks[0].detail.find("the expected pool of 1000 tokens was not compared"), std::string::npos)
      << rep.checks[0].detail;
  EXPECT_FALSE(rep.any_failed());
  // No failure, but the comparison asked for did not happen: NOT PROVEN, exit 1, never "ok" (issue 55 tryout F).
  EXPECT_EQ(rep.not_proven(), "the expected KV pool of 1000 tokens was not compared: no-kv-metrics");
  EXPECT_EQ(exit_code(rep), 1);
  EXPECT_EQ(summary_line(rep).rfind("NOT PROVEN: 0 passed, 0 failed, 1 skipped (the expected KV pool", 0), 0u)
      << summary_line(rep);
  EXPECT_FALSE(to_json(rep)["ok"].get<bool>());
  // A model named with letters of "Not Found" ('t') is not "not served" there: /metrics is absent, said as such
  // (tryout M-M2: "the server does not serve 't' under that name: check --model").
  FakeServerOptions t = o;
  t.model = "t";
  FakeServer seat_t(t);
  const ProbeReport rt = run_probe(seat_t.url(), "t", {Check::MODELS, Check::KV}, po);
  EXPECT_EQ(rt.checks[0].status, CheckStatus::PASS) << rt.checks[0].detail;
  EXPECT_EQ(rt.checks[1].classification, "no-kv-metrics");
  EXPECT_EQ(rt.checks[1].detail.find("does not serve"), std::string::npos) << rt.checks[1].detail;
  EXPECT_EQ(rt.checks[1].detail.find("base URL"), std::string::npos) << rt.checks[1].detail;
  EXPECT_NE(rt.checks[1].detail.find("no metrics endpoint here"), std::string::npos) << rt.checks[1].detail;
  // Without an expectation, a probe whose every check was skipped proves nothing either.
  const ProbeReport plain = run_probe(srv.url(), o.model, {Check::KV}, fast_opts());
  EXPECT_EQ(plain.not_proven(), "no check passed: every one was skipped");
  EXPECT_EQ(exit_code(plain), 1);
  // One check passed beside the skip: proven as far as it goes.
  const ProbeReport both = run_probe(srv.url(), o.model, {Check::MODELS, Check::KV}, fast_opts());
  EXPECT_EQ(both.not_proven(), "");
  EXPECT_EQ(exit_code(both), 0);
}

TEST(ProbeKv, PrometheusTextIsReadAsHostileInput) {
  const std::string text =
      "# HELP vllm:cache_config_info Information\n"
      "vllm:cache_config_info_total{block_size=\"99\"} 1\n"   // another metric with this prefix
      "vllm:cache_config_info{block_size=\"16\",note=\"a \\\"q\\\" \\\\ b\\nc\",num_gpu_blocks=\"10\"} 1.0\r\n"
      "vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"cut\n"     // cut mid-value: skipped
      "vllm:cache_config_info{block_size=\"32\", num_gpu_blocks = \"5\",} NaN 1700000000\n"
      "vllm:cache_config_info{block_size=16} 1\n"              // unquoted value: skipped
      "vllm:cache_config_info 2\n"
      "vllm:cache_config_info{block_size=\"1\"} not-a-number\n";
  const auto s = prometheus_samples(text, "vllm:cache_config_info");
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].label("block_size"), "16");
  EXPECT_EQ(s[0].label("note"), "a \"q\" \\ b\nc");
  EXPECT_EQ(s[0].label("num_gpu_blocks"), "10");
  EXPECT_EQ(s[0].value, 1.0);
  EXPECT_EQ(s[1].label("num_gpu_blocks"), "5");
  EXPECT_TRUE(std::isnan(s[1].value));
  EXPECT_TRUE(s[2].labels.empty());
  EXPECT_EQ(s[2].value, 2.0);
  EXPECT_EQ(prometheus_samples(text, "vllm:cache_config_info", 1).size(), 1u);
  EXPECT_TRUE(prometheus_samples("", "vllm:cache_config_info").empty());
  const std::string huge = "vllm:cache_config_info{a=\"" + std::string(70000, 'x') + "\"} 1\n";
  EXPECT_TRUE(prometheus_samples(huge, "vllm:cache_config_info").empty());
  const std::string open_brace = "vllm:cache_config_info{" + std::string(1000, '{');
  EXPECT_TRUE(prometheus_samples(open_brace, "vllm:cache_config_info").empty());
}

TEST(ProbeKv, ThePoolAPlanExpects) {
  const auto dir = std::filesystem::temp_directory_path() / ("fp4forge-plankv-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto plan = dir / "plan.json";
  auto seat = [](const char* name, const char* served, nlohmann::json blocks) {
    return nlohmann::json{{"name", name}, {"served_name", served},
                          {"kv", {{"attention_block_size", 16}, {"min_block_size", 16}}},
                          {"placement", {{"num_blocks", blocks}}}};
  };
  std::ofstream(plan) << nlohmann::json{{"ok", true}, {"schema", "fp4forge.plan/1"},
                                        {"seats", {seat("a", "org/a", 1000), seat("b", "org/b", nullptr)}}}.dump();
  auto a = kv_from_plan(plan, "a", "");
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_EQ(a->tokens, 16000);
  EXPECT_EQ(a->seat, "a");
  auto by_model = kv_from_plan(plan, "", "org/a");
  ASSERT_TRUE(by_model.ok()) << by_model.error().message;
  EXPECT_EQ(by_model->tokens, 16000);
  auto b = kv_from_plan(plan, "b", "");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().code, Errc::BAD_INPUT);
  EXPECT_NE(b.error().message.find("seat 'b' has no placement.num_blocks"), std::string::npos) << b.error().message;
  auto none = kv_from_plan(plan, "", "org/zzz");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("seats: [a, b]"), std::string::npos) << none.error().message;
  std::ofstream(plan, std::ios::trunc) << R"({"schema": "something/else"})";
  EXPECT_EQ(kv_from_plan(plan, "a", "").error().code, Errc::BAD_INPUT);
  std::ofstream(plan, std::ios::trunc) << std::string(100000, '[');
  EXPECT_EQ(kv_from_plan(plan, "a", "").error().code, Errc::BAD_INPUT);
  EXPECT_EQ(kv_from_plan(dir / "missing.json", "a", "").error().code, Errc::IO);
  std::filesystem::remove_all(dir);
}

TEST(ProbeExtras, TheAliasExtrasReachTheBodyAndTheProbeKeepsItsOwnKeys) {
  FakeServer srv(FakeServerOptions{});
  ProbeOptions po = fast_opts();
  po.request_defaults = {{"chat_template_kwargs", {{"enable_thinking", false}}}, {"temperature", 0.9}, {"top_k", 20}};
  po.request_overrides = {{"repetition_penalty", 1.05}};
  const ProbeReport rep = run_probe(srv.url(), "fake-org/fake-model-nvfp4", {Check::MODELS, Check::PROSE}, po);
  EXPECT_TRUE(rep.all_passed());
  // temperature is the probe's own on every request: not listed as sent, said as not sent (issue 55 tryout).
  EXPECT_EQ(rep.request_extras, (std::vector<std::string>{"chat_template_kwargs", "top_k", "repetition_penalty"}));
  EXPECT_EQ(rep.request_not_sent, (std::vector<std::string>{"temperature"}));
  const auto bodies = srv.bodies();
  ASSERT_EQ(bodies.size(), 2u);
  EXPECT_TRUE(bodies[0].empty());  // the GET
  const auto body = nlohmann::json::parse(bodies[1]);
  EXPECT_EQ(body["chat_template_kwargs"]["enable_thinking"], false);
  EXPECT_EQ(body["top_k"], 20);
  EXPECT_EQ(body["repetition_penalty"], 1.05);
  EXPECT_EQ(body["temperature"], 0);  // the probe's own value: LiteLLM spreads the request over the alias's params
  EXPECT_NE(header_line(rep).find("(with the alias's chat_template_kwargs, top_k, repetition_penalty) (not the "
                                  "alias's temperature: the probe sends its own)"),
            std::string::npos)
      << header_line(rep);
}

TEST(ProbeServedBy, LiteLLMHeadersAreRecorded) {
  FakeServerOptions o;
  o.litellm_api_base = "http://user:pw@10.0.0.9:8000/v1";
  o.litellm_model_id = "chat-gpu9";
  o.litellm_model_group = "chat";
  FakeServer srv(o);
  const ProbeReport rep = run_probe(srv.url(), o.model, {Check::PROSE, Check::LONG}, fast_opts());
  for (const auto& c : rep.checks) {
    EXPECT_EQ(c.served_by.api_base, "http://user:***@10.0.0.9:8000/v1") << check_name(c.check);
    EXPECT_EQ(c.served_by.model_id, "chat-gpu9");
    EXPECT_EQ(c.served_by.model_group, "chat");  // sent as X-LiteLLM-Model-Group: names are case-insensitive
  }
  EXPECT_EQ(to_json(rep.checks[0])["served_by"]["model_id"], "chat-gpu9");
  FakeServer plain(FakeServerOptions{});
  const ProbeReport none = run_probe(plain.url(), "fake-org/fake-model-nvfp4", {Check::PROSE}, fast_opts());
  EXPECT_FALSE(none.checks[0].served_by.any());
  EXPECT_TRUE(to_json(none.checks[0])["served_by"].is_null());
}

}  // namespace
}  // namespace fp4forge::probe
