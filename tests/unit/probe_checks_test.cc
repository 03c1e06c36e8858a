// probe: every failure mode of the fake server is caught with the right classification; a healthy
// server passes; the PNG the vision check sends is a valid PNG.
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fp4forge/probe/png.h"
#include "fp4forge/util/redact.h"
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

TEST(ProbeChecks, HealthyServerPassesEveryCheck) {
  FakeServer srv(FakeServerOptions{});
  const ProbeReport rep = run_probe(srv.url() + "/v1", "fake-org/fake-model-nvfp4", all_checks(), fast_opts());
  ASSERT_EQ(rep.checks.size(), 11u);
  for (const auto& c : rep.checks) {
    if (c.check == Check::REASONING) {
      EXPECT_EQ(c.status, CheckStatus::SKIP) << c.detail;
      EXPECT_EQ(c.classification, "not-reasoning");
      continue;
    }
    EXPECT_EQ(c.status, CheckStatus::PASS) << check_name(c.check) << ": " << c.classification << ": " << c.detail;
    EXPECT_EQ(c.classification, "ok");
  }
  EXPECT_FALSE(rep.any_failed());
  EXPECT_FALSE(rep.unreachable);
  EXPECT_EQ(rep.url, srv.url());
  EXPECT_EQ(find(rep, Check::PROSE).content, "42");
  EXPECT_GE(find(rep, Check::LONG).completion_tokens, 256);
  EXPECT_LT(find(rep, Check::LONG).metric, 0.05);
}

// --no-tools: a seat plan wrote without a tool-call parser is proven without the tools check (issue 55 tryout F).
TEST(ProbeChecks, NoToolsSkipsTheToolsCheck) {
  FakeServer srv(FakeServerOptions{});
  ProbeOptions po = fast_opts();
  po.no_tools = true;
  const ProbeReport rep = run_probe(srv.url() + "/v1", "fake-org/fake-model-nvfp4", {Check::PROSE, Check::TOOLS}, po);
  ASSERT_EQ(rep.checks.size(), 2u);
  EXPECT_EQ(rep.checks[1].status, CheckStatus::SKIP);
  EXPECT_EQ(rep.checks[1].classification, "no-tools");
  EXPECT_EQ(exit_code(rep), 0);
}

// "1 completion token", not "1 completion tokens" (issue 55 tryout E-11).
TEST(ProbeChecks, OneTokenIsSaidInTheSingular) {
  FakeServerOptions o;
  o.completion_tokens = 1;
  FakeServer srv(o);
  const ProbeReport rep = run_probe(srv.url() + "/v1", o.model, {Check::PROSE}, fast_opts());
  EXPECT_NE(rep.checks[0].detail.find("(finish stop, 1 completion token)"), std::string::npos) << rep.checks[0].detail;
}

TEST(ProbeChecks, HealthyReasoningModelReportsBothFields) {
  FakeServerOptions o;
  o.fault = Fault::REASONING;
  FakeServer srv(o);
  const ProbeReport rep = run_probe(srv.url(), o.model, all_checks(), fast_opts());
  for (const auto& c : rep.checks)
    EXPECT_EQ(c.status, CheckStatus::PASS) << check_name(c.check) << ": " << c.classification << ": " << c.detail;
  EXPECT_TRUE(rep.all_passed());
  const CheckResult& r = find(rep, Check::REASONING);
  EXPECT_GT(r.reasoning_tokens, 0);
  EXPECT_GT(r.metric, 1.0);
  EXPECT_NE(r.detail.find("the answer fits"), std::string::npos) << r.detail;
  EXPECT_NE(find(rep, Check::PROSE).reasoning.find("step by step"), std::string::npos);
  EXPECT_NE(find(rep, Check::PROSE).detail.find("reasoning"), std::string::npos);
}

struct Case {
  const char* name;
  Fault fault;
  Check check;
  CheckStatus status;
  const char* classification;
};

class ProbeFaults : public ::testing::TestWithParam<Case> {};

TEST_P(ProbeFaults, ClassifiedCorrectly) {
  const Case& tc = GetParam();
  FakeServerOptions o;
  o.fault = tc.fault;
  o.slow_s = 3.0;
  FakeServer srv(o);
  ProbeOptions po = fast_opts();
  if (tc.fault == Fault::SLOW) po.timeout_s = 0.5;
  const auto t0 = std::chrono::steady_clock::now();
  const ProbeReport rep = run_probe(srv.url(), o.model, {tc.check}, po);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(rep.checks.size(), 1u);
  const CheckResult& r = rep.checks[0];
  EXPECT_EQ(r.classification, tc.classification) << r.detail;
  EXPECT_EQ(r.status, tc.status) << r.detail;
  EXPECT_FALSE(r.detail.empty());
  EXPECT_EQ(r.detail.find('\n'), std::string::npos) << "detail must be one line";
  EXPECT_LT(took, 4.0) << "a check must respect its deadline";
  EXPECT_FALSE(rep.unreachable);
}

INSTANTIATE_TEST_SUITE_P(
    All, ProbeFaults,
    ::testing::Values(
        Case{"nan_logprobs", Fault::NAN_LOGPROBS, Check::LOGPROBS, CheckStatus::FAIL, "nan-logits"},
        Case{"nan_prose_still_green", Fault::NAN_LOGPROBS, Check::PROSE, CheckStatus::PASS, "ok"},
        Case{"f1_content_null", Fault::CONTENT_NULL_LENGTH, Check::PROSE, CheckStatus::FAIL, "content-null-length"},
        Case{"f1_logprobs", Fault::CONTENT_NULL_LENGTH, Check::LOGPROBS, CheckStatus::FAIL, "nan-logits"},
        Case{"f1_long", Fault::CONTENT_NULL_LENGTH, Check::LONG, CheckStatus::FAIL, "content-null-length"},
        Case{"f1_multiturn", Fault::CONTENT_NULL_LENGTH, Check::MULTITURN, CheckStatus::FAIL, "content-null-length"},
        Case{"f1_completions", Fault::CONTENT_NULL_LENGTH, Check::COMPLETIONS, CheckStatus::FAIL, "empty-completion"},
        Case{"empty_tool_calls", Fault::EMPTY_TOOL_CALLS, Check::TOOLS, CheckStatus::FAIL, "empty-tool-call"},
        Case{"loop_long", Fault::LOOP, Check::LONG, CheckStatus::FAIL, "degenerate-loop"},
        Case{"loop_prose", Fault::LOOP, Check::PROSE, CheckStatus::FAIL, "runaway-generation"},
        Case{"slow", Fault::SLOW, Check::PROSE, CheckStatus::FAIL, "timeout"},
        Case{"slow_stream", Fault::SLOW, Check::LONG, CheckStatus::FAIL, "timeout"},
        Case{"server_error", Fault::SERVER_ERROR, Check::PROSE, CheckStatus::FAIL, "server-error"},
        Case{"server_error_completions", Fault::SERVER_ERROR, Check::COMPLETIONS, CheckStatus::FAIL, "server-error"},
        Case{"malformed", Fault::MALFORMED_JSON, Check::PROSE, CheckStatus::FAIL, "malformed-json"},
        Case{"malformed_tools", Fault::MALFORMED_JSON, Check::TOOLS, CheckStatus::FAIL, "malformed-json"},
        Case{"cut_off", Fault::CUT_OFF, Check::PROSE, CheckStatus::FAIL, "truncated"},
        Case{"cut_off_stream", Fault::CUT_OFF, Check::LONG, CheckStatus::FAIL, "stream-cut-off"},
        Case{"text_only", Fault::TEXT_ONLY, Check::VISION, CheckStatus::SKIP, "text-only"},
        Case{"reasoning_no_content", Fault::REASONING_NO_CONTENT, Check::REASONING, CheckStatus::FAIL,
             "reasoning-no-content"},
        Case{"reasoning_no_content_prose", Fault::REASONING_NO_CONTENT, Check::PROSE, CheckStatus::FAIL,
             "reasoning-no-content"},
        Case{"healthy_vision", Fault::NONE, Check::VISION, CheckStatus::PASS, "ok"}),
    [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

// A body with a bare NaN is nan-logits, and its detail says so (issue 55: "not a JSON object" under nan-logits).
TEST(ProbeChecks, ABareNanBodyIsDescribedAsWhatItIs) {
  FakeServerOptions o;
  o.fault = Fault::NAN_BODY;
  FakeServer srv(o);
  const ProbeReport rep = run_probe(srv.url(), o.model, {Check::PROSE}, fast_opts());
  ASSERT_EQ(rep.checks.size(), 1u);
  EXPECT_EQ(rep.checks[0].classification, "nan-logits") << rep.checks[0].detail;
  EXPECT_NE(rep.checks[0].detail.find("bare NaN / Infinity"), std::string::npos) << rep.checks[0].detail;
  EXPECT_EQ(rep.checks[0].detail.find("not a JSON object"), std::string::npos) << rep.checks[0].detail;
}

TEST(ProbeChecks, NanLogitsDetailQuotesTheServer) {
  FakeServerOptions o;
  o.fault = Fault::NAN_LOGPROBS;
  FakeServer srv(o);
  const ProbeReport rep = run_probe(srv.url(), o.model, {Check::LOGPROBS}, fast_opts());
  EXPECT_NE(rep.checks[0].detail.find("Out of range float values are not JSON compliant: nan"), std::string::npos);
  EXPECT_EQ(rep.checks[0].http_status, 400);
}

TEST(ProbeChecks, ContentNullLengthReportsTheFullTokenCount) {
  FakeServerOptions o;
  o.fault = Fault::CONTENT_NULL_LENGTH;
  FakeServer srv(o);
  ProbeOptions po = fast_opts();
  po.max_tokens = 200;
  const ProbeReport rep = run_probe(srv.url(), o.model, {Check::PROSE}, po);
  EXPECT_EQ(rep.checks[0].completion_tokens, 200);
  EXPECT_EQ(rep.checks[0].finish_reason, "length");
  EXPECT_NE(rep.checks[0].detail.find("200 of max_tokens 200"), std::string::npos) << rep.checks[0].detail;
}

TEST(ProbeChecks, VisionForcedMultimodalFailsOnRefusal) {
  FakeServerOptions o;
  o.fault = Fault::TEXT_ONLY;
  FakeServer srv(o);
  ProbeOptions po = fast_opts();
  po.vision = VisionMode::MULTIMODAL;
  EXPECT_EQ(run_probe(srv.url(), o.model, {Check::VISION}, po).checks[0].classification, "image-rejected");
  const std::size_t sent = srv.requests().size();  // the listing that sizes the answer budget, and the image
  EXPECT_EQ(sent, 2u);
  po.vision = VisionMode::TEXT_ONLY;
  const ProbeReport rep = run_probe(srv.url(), o.model, {Check::VISION}, po);
  EXPECT_EQ(rep.checks[0].status, CheckStatus::SKIP);
  EXPECT_NE(rep.checks[0].detail.find("text-only"), std::string::npos);
  // Text-only via --text-only sends nothing, not even the listing.
  EXPECT_EQ(srv.requests().size(), sent);
}

TEST(ProbeChecks, ModelNotListed) {
  FakeServerOptions o;
  o.listed_model = "someone/else";
  FakeServer srv(o);
  const ProbeReport rep = run_probe(srv.url(), o.model, {Check::MODELS}, fast_opts());
  EXPECT_EQ(rep.checks[0].classification, "model-not-listed");
  EXPECT_NE(rep.checks[0].detail.find("someone/else"), std::string::npos);
}

// A wrong --model (here its case): the nearest listed name, and the 404s blame the name, not the URL (issue 55 tryout).
TEST(ProbeChecks, AWrongModelNameIsSaidAsOneNotAsAWrongUrl) {
  FakeServerOptions o;
  FakeServer srv(o);
  const ProbeReport rep = run_probe(srv.url(), "Fake-Org/Fake-Model-NVFP4", {Check::MODELS, Check::PROSE}, fast_opts());
  EXPECT_EQ(rep.checks[0].classification, "model-not-listed");
  EXPECT_NE(rep.checks[0].detail.find("(did you mean '" + o.model + "'?)"), std::string::npos) << rep.checks[0].detail;
  EXPECT_EQ(rep.checks[1].http_status, 404);
  EXPECT_NE(rep.checks[1].detail.find("the server does not serve 'Fake-Org/Fake-Model-NVFP4' under that name: check "
                                      "--model"),
            std::string::npos)
      << rep.checks[1].detail;
  EXPECT_EQ(rep.checks[1].detail.find("base URL"), std::string::npos) << rep.checks[1].detail;
  // The server-wide KV pool is another model's: not compared, never a pass (issue 55 tryout G).
  const ProbeReport kv = run_probe(srv.url(), "Fake-Org/Fake-Model-NVFP4", {Check::MODELS, Check::KV}, fast_opts());
  EXPECT_EQ(kv.checks[1].status, CheckStatus::SKIP);
  EXPECT_EQ(kv.checks[1].classification, "model-not-served");
  EXPECT_NE(kv.checks[1].detail.find("the pool /metrics reports is another model's"), std::string::npos)
      << kv.checks[1].detail;
}

TEST(ProbeChecks, ConnectionRefusedSendsOneRequestOnly) {
  const int port = FakeServer::free_port();
  const auto t0 = std::chrono::steady_clock::now();
  const ProbeReport rep = run_probe("http://127.0.0.1:" + std::to_string(port), "m", all_checks(), fast_opts());
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 3.0);
  EXPECT_TRUE(rep.unreachable);
  ASSERT_EQ(rep.checks.size(), 11u);
  // One failure, the first request's; the rest were not sent: skipped, pointing at it (issue 55: eleven FAILs).
  EXPECT_EQ(rep.checks[0].status, CheckStatus::FAIL);
  EXPECT_EQ(rep.checks[0].classification, "connection-refused") << rep.checks[0].detail;
  for (std::size_t i = 1; i < rep.checks.size(); ++i) {
    EXPECT_EQ(rep.checks[i].status, CheckStatus::SKIP);
    EXPECT_EQ(rep.checks[i].classification, "not-run") << rep.checks[i].detail;
    EXPECT_NE(rep.checks[i].detail.find("not sent: the server did not answer the first request (connection-refused"),
              std::string::npos);
  }
  EXPECT_EQ(exit_code(rep), 4);
  // The text says the not-sent checks once, on one line naming them.
  const std::string text = to_text(rep);
  EXPECT_NE(text.find("  SKIP  prose, long, logprobs, vision, tools, multiturn, completions, reasoning, context, kv "
                      "(10)  not-run  not sent"), std::string::npos) << text;
  EXPECT_EQ(text.find("FAIL  prose"), std::string::npos) << text;
  EXPECT_NE(text.find("FAILED: 0 passed, 1 failed, 10 skipped (server unreachable)"), std::string::npos) << text;
  // The transport error is said once: the later checks point at it (issue 55).
  EXPECT_NE(rep.checks[0].detail.find("is the server up"), std::string::npos) << rep.checks[0].detail;
  for (std::size_t i = 1; i < rep.checks.size(); ++i) {
    EXPECT_EQ(rep.checks[i].detail.find("is the server up"), std::string::npos) << rep.checks[i].detail;
    EXPECT_LT(rep.checks[i].detail.size(), 120u) << rep.checks[i].detail;
  }
}

TEST(ProbeChecks, ApiKeyIsSentAndNeverEchoed) {
  const std::string key = "sk-test-SECRET-4242";
  {
    FakeServerOptions o;
    o.expect_api_key = key;
    FakeServer srv(o);
    ProbeOptions po = fast_opts();
    po.api_key = key;
    const ProbeReport rep = run_probe(srv.url(), o.model, {Check::MODELS, Check::PROSE}, po);
    EXPECT_TRUE(rep.all_passed());
    ASSERT_FALSE(srv.auth_headers().empty());
    EXPECT_EQ(srv.auth_headers()[0], "Bearer " + key);
  }
  {
    FakeServerOptions o;
    o.fault = Fault::AUTH_ECHO;
    FakeServer srv(o);
    ProbeOptions po = fast_opts();
    po.api_key = key;
    const ProbeReport rep = run_probe(srv.url(), o.model, {Check::PROSE}, po);
    EXPECT_EQ(rep.checks[0].classification, "unauthorized");  // issue 51 #4: a 401 is its own class
    EXPECT_EQ(rep.checks[0].detail.find(key), std::string::npos) << rep.checks[0].detail;
    EXPECT_NE(rep.checks[0].detail.find("***"), std::string::npos) << rep.checks[0].detail;
  }
}

// Issue 29: the checks after the first run concurrently under one overall deadline, so a seat that hangs on
// every generation costs one deadline, not one per check (9 x 60 s at the defaults before).
TEST(ProbeChecks, HungSeatCostsOneDeadlineNotOnePerCheck) {
  FakeServerOptions o;
  o.fault = Fault::SLOW;  // GET /v1/models answers, every POST hangs
  o.slow_s = 20.0;
  FakeServer srv(o);
  ProbeOptions po = fast_opts();
  po.timeout_s = 1.5;
  const auto t0 = std::chrono::steady_clock::now();
  const ProbeReport rep = run_probe(srv.url(), o.model, all_checks(), po);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(rep.checks.size(), 11u);
  EXPECT_EQ(find(rep, Check::MODELS).status, CheckStatus::PASS);
  for (const auto& c : rep.checks) {
    if (c.check == Check::KV) {  // a GET of /metrics: answered, unless queued behind a hung POST (one connection)
      EXPECT_TRUE(c.status == CheckStatus::PASS || c.classification == "timeout") << c.detail;
    } else if (c.check != Check::MODELS) {
      EXPECT_EQ(c.classification, "timeout") << check_name(c.check) << ": " << c.detail;
    }
  }
  // One after another the nine generation checks would take 9 x 1.5 s = 13.5 s.
  EXPECT_LT(took, 6.0);
}

TEST(ProbeChecks, QueuedChecksPastTheOverallDeadlineAreNotSent) {
  FakeServerOptions o;
  o.fault = Fault::SLOW;
  o.slow_s = 20.0;
  FakeServer srv(o);
  ProbeOptions po = fast_opts();
  po.timeout_s = 1.0;
  po.total_timeout_s = 1.5;
  po.concurrency = 1;
  const ProbeReport rep = run_probe(srv.url(), o.model, {Check::PROSE, Check::LONG, Check::TOOLS}, po);
  ASSERT_EQ(rep.checks.size(), 3u);
  EXPECT_EQ(rep.checks[0].classification, "timeout");
  EXPECT_EQ(rep.checks[2].classification, "timeout");
  EXPECT_NE(rep.checks[2].detail.find("not sent: the probe's overall deadline of 1.5 s passed first"), std::string::npos)
      << rep.checks[2].detail;
}

TEST(ProbeChecks, ResultsStreamAsTheyFinishAndTheReportKeepsTheRequestedOrder) {
  FakeServer srv(FakeServerOptions{});
  ProbeOptions po = fast_opts();
  std::vector<Check> seen;
  po.on_result = [&](const CheckResult& c) { seen.push_back(c.check); };
  const std::vector<Check> asked{Check::PROSE, Check::LOGPROBS, Check::MODELS, Check::TOOLS};
  const ProbeReport rep = run_probe(srv.url(), "fake-org/fake-model-nvfp4", asked, po);
  ASSERT_EQ(rep.checks.size(), asked.size());
  for (std::size_t i = 0; i < asked.size(); ++i) EXPECT_EQ(rep.checks[i].check, asked[i]);
  ASSERT_EQ(seen.size(), asked.size());
  EXPECT_EQ(seen[0], Check::MODELS);  // the first sent, alone: it proves the server answers
  EXPECT_TRUE(rep.all_passed());
}

TEST(ProbeChecks, ParseChecks) {
  auto r = parse_checks("prose, models,prose");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0], Check::MODELS);  // canonical order
  EXPECT_EQ(parse_checks("all")->size(), 11u);
  auto bad = parse_checks("prose,vibes");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, Errc::USAGE);
  EXPECT_EQ(bad.error().message,
            "--checks: unknown check 'vibes', expected a comma-separated subset of "
            "models,prose,long,logprobs,vision,tools,multiturn,completions,reasoning,context,kv (or all)");
  EXPECT_FALSE(parse_checks(" , ").ok());
  // A near miss gets the name it was meant to be (issue 55 tryout E-9).
  EXPECT_NE(parse_checks("tool").error().message.find("unknown check 'tool' (did you mean 'tools'?)"),
            std::string::npos);
}

TEST(ProbeChecks, RepeatedNgramRatio) {
  std::string loop;
  for (int i = 0; i < 50; ++i) loop += "I am a lighthouse. ";
  EXPECT_GT(repeated_ngram_ratio(loop), 0.9);
  EXPECT_LT(repeated_ngram_ratio("The quick brown fox jumps over the lazy dog while seven wizards quietly box "
                                 "jovial nymphs near an old stone harbor wall at dusk."),
            0.01);
  EXPECT_EQ(repeated_ngram_ratio("short"), 0.0);
  EXPECT_GT(repeated_ngram_ratio(std::string(200, 'x')), 0.9);
  EXPECT_EQ(normalize_base_url("http://h:8000/v1/"), "http://h:8000");
  EXPECT_EQ(normalize_base_url("http://h:8000"), "http://h:8000");
  EXPECT_EQ(mask_secret("key=abc and abc", "abc"), "key=*** and ***");
  EXPECT_EQ(mask_secret("abc", ""), "abc");
  // Issue 27 #15: a key echoed split by a line break (or other gaps) is masked whole.
  EXPECT_EQ(mask_secret("invalid key 'sk-live-12\n3456' given", "sk-live-123456"), "invalid key '***' given");
  EXPECT_EQ(mask_secret("sk-live\r\n-123456 and sk-live-123456", "sk-live-123456"), "*** and ***");
  EXPECT_EQ(mask_secret("sk-live 12", "sk-live-123456"), "sk-live 12");  // not the key: left alone
  // Issue 14 #11: a key cut by the 300-byte limit before masking leaks no part of itself.
  EXPECT_EQ(mask_secret("invalid key sk-live-12...", "sk-live-123456"), "invalid key ***...");
  EXPECT_EQ(mask_secret("invalid key sk-live-1234", "sk-live-123456"), "invalid key ***");
  EXPECT_EQ(mask_secret("a short sk-", "sk-live-123456"), "a short sk-");  // under 4 bytes: not a key fragment
  // Issue 55 tryout E-3: a short key is masked as a word of its own, never inside other words.
  EXPECT_EQ(mask_secret("model e is not served; key: e", "e"), "model *** is not served; key: ***");
  EXPECT_EQ(mask_secret("the model 'test-model' needs a key; got test", "test"),
            "the model 'test-model' needs a key; got ***");
  EXPECT_EQ(mask_secret("invalid key 'sk-live-12\n3456' given", "sk-live-123456"), "invalid key '***' given");
  EXPECT_EQ(mask_secret("keyabcdefgh1 and abcdefgh1", "abcdefgh1"), "key*** and ***");  // a long key: everywhere
  // Issue 14 #5: 100,000 levels of nesting from a server are refused, not recursed into.
  EXPECT_TRUE(parse_server_json(std::string(100000, '[') + std::string(100000, ']')).is_discarded());
  EXPECT_EQ(parse_server_json(R"({"a": "[[[[{{{{", "b": [1, [2]]})")["b"][1][0], 2);
  // Issue 14 #12: a password in the URL is used but never shown.
  EXPECT_EQ(util::redact_url("http://admin:secret@host:8000/v1"), "http://admin:***@host:8000/v1");
  EXPECT_EQ(url_password("http://admin:secret@host:8000"), "secret");
  EXPECT_EQ(util::redact_url("http://host:8000/a@b"), "http://host:8000/a@b");
  // Issue 27 #3: secrets by shape, not only by the key that holds them.
  EXPECT_EQ(util::redact_url("https://h/v1?key=AIzaSECRET&alt=json"), "https://h/v1?key=***&alt=json");
  EXPECT_EQ(util::redact_url("https://h/x?sig=abc&api_key=K2#frag"), "https://h/x?sig=***&api_key=***#frag");
  EXPECT_EQ(util::redact_url("http://sk-TOKEN@h:8000/v1"), "http://***@h:8000/v1");
  EXPECT_EQ(util::redact_line("Authorization: Bearer eyJhbGciOi.x.y, next"), "Authorization: Bearer ***, next");
  // Prose is not a token (issue 55 tryout: "Bearer *** bad news"); a short token with a digit or a dash still is.
  EXPECT_EQ(util::redact_line("description: Bearer of bad news"), "description: Bearer of bad news");
  EXPECT_EQ(util::redact_line("Bearer sk-1 and Basic hunter2"), "Bearer *** and Basic ***");
  EXPECT_EQ(util::redact_line("Bearer changeme"), "Bearer ***");
  EXPECT_EQ(util::redact_line("base http://u:pw@h/v1 and https://h2/?token=t9"), "base http://u:***@h/v1 and https://h2/?token=***");
  EXPECT_EQ(util::redact_line(R"({"private_key": "-----BEGIN PRIVATE KEY-----\nMIIEv\n-----END PRIVATE KEY-----\n"})"),
            R"({"private_key": "***)");
  EXPECT_EQ(url_password("http://user@host"), "");
}

// ---------------------------------------------------------------------------------------------
// PNG

std::uint32_t be32(const std::vector<std::uint8_t>& b, std::size_t at) {
  return (std::uint32_t{b[at]} << 24) | (std::uint32_t{b[at + 1]} << 16) | (std::uint32_t{b[at + 2]} << 8) | b[at + 3];
}

TEST(ProbePng, ChecksumsMatchReferenceVectors) {
  const std::string s = "123456789";
  const auto* p = reinterpret_cast<const std::uint8_t*>(s.data());
  EXPECT_EQ(crc32({p, s.size()}), 0xCBF43926u);
  const std::string w = "Wikipedia";
  EXPECT_EQ(adler32({reinterpret_cast<const std::uint8_t*>(w.data()), w.size()}), 0x11E60398u);
  const std::uint8_t man[] = {'M', 'a', 'n'};
  EXPECT_EQ(base64_encode(man), "TWFu");
  EXPECT_EQ(base64_encode(std::span<const std::uint8_t>(man, 2)), "TWE=");
  EXPECT_EQ(base64_encode(std::span<const std::uint8_t>(man, 1)), "TQ==");
}

// Decodes our PNG independently: signature, chunk CRCs, IHDR, zlib header, stored blocks, Adler-32, pixels.
void decode_and_check(const std::vector<std::uint8_t>& png, std::uint32_t size) {
  const std::uint8_t sig[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  ASSERT_GE(png.size(), 8u);
  ASSERT_EQ(std::memcmp(png.data(), sig, 8), 0);
  std::size_t at = 8;
  std::vector<std::string> types;
  std::vector<std::uint8_t> idat;
  while (at + 12 <= png.size()) {
    const std::uint32_t len = be32(png, at);
    ASSERT_LE(at + 12 + len, png.size());
    const std::string type(png.begin() + static_cast<long>(at + 4), png.begin() + static_cast<long>(at + 8));
    types.push_back(type);
    EXPECT_EQ(be32(png, at + 8 + len), crc32({png.data() + at + 4, len + 4})) << "CRC of " << type;
    if (type == "IHDR") {
      ASSERT_EQ(len, 13u);
      EXPECT_EQ(be32(png, at + 8), size);
      EXPECT_EQ(be32(png, at + 12), size);
      EXPECT_EQ(png[at + 16], 8);  // bit depth
      EXPECT_EQ(png[at + 17], 2);  // RGB
    }
    if (type == "IDAT") idat.insert(idat.end(), png.begin() + static_cast<long>(at + 8), png.begin() + static_cast<long>(at + 8 + len));
    at += 12 + len;
  }
  EXPECT_EQ(at, png.size());
  ASSERT_EQ(types, (std::vector<std::string>{"IHDR", "IDAT", "IEND"}));
  ASSERT_GE(idat.size(), 6u);
  EXPECT_EQ((idat[0] * 256u + idat[1]) % 31u, 0u);
  EXPECT_EQ(idat[0] & 0x0F, 8);  // deflate
  std::vector<std::uint8_t> raw;
  std::size_t p = 2;
  bool last = false;
  while (!last) {
    ASSERT_LE(p + 5, idat.size());
    last = idat[p] & 1;
    EXPECT_EQ((idat[p] >> 1) & 3, 0) << "stored block";
    const unsigned len = idat[p + 1] | (idat[p + 2] << 8);
    const unsigned nlen = idat[p + 3] | (idat[p + 4] << 8);
    EXPECT_EQ(len ^ 0xFFFFu, nlen);
    ASSERT_LE(p + 5 + len, idat.size());
    raw.insert(raw.end(), idat.begin() + static_cast<long>(p + 5), idat.begin() + static_cast<long>(p + 5 + len));
    p += 5 + len;
  }
  ASSERT_EQ(p + 4, idat.size());
  EXPECT_EQ(be32(idat, p), adler32(raw));
  ASSERT_EQ(raw.size(), static_cast<std::size_t>(size) * (size * 3 + 1));
  auto px = [&](std::uint32_t x, std::uint32_t y) {
    const std::size_t o = y * (size * 3 + 1) + 1 + x * 3;
    return std::array<int, 3>{raw[o], raw[o + 1], raw[o + 2]};
  };
  for (std::uint32_t y = 0; y < size; ++y) EXPECT_EQ(raw[y * (size * 3 + 1)], 0) << "filter byte";
  EXPECT_EQ(px(size / 2, size / 2), (std::array<int, 3>{255, 0, 0}));
  EXPECT_EQ(px(0, 0), (std::array<int, 3>{255, 255, 255}));
  EXPECT_EQ(px(size - 1, size - 1), (std::array<int, 3>{255, 255, 255}));
}

TEST(ProbePng, RedCircleDecodes) {
  decode_and_check(red_circle_png(64), 64);
  // Large enough to need several stored blocks (> 65535 raw bytes).
  decode_and_check(red_circle_png(200), 200);
  EXPECT_EQ(png_data_url(red_circle_png(8)).rfind("data:image/png;base64,iVBORw0KGgo", 0), 0u);
}

}  // namespace
}  // namespace fp4forge::probe
