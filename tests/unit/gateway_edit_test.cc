// gateway: swap refused on a failed probe (file untouched, no backup), applied with a backup when the probe
// passes (only the alias's lines change, comments survive), rollback byte-identical, retire reversible.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "fp4forge/gateway/gateway.h"
#include "fp4forge/gateway/report.h"
#include "fp4forge/util/udiff.h"
#include "probe_fake_server.h"

namespace fp4forge::gateway {
namespace {
using namespace fp4forge::probe;  // the fake server, checks and probe options the swap gate uses

namespace stdfs = std::filesystem;
using testing::FakeServer;
using testing::FakeServerOptions;
using testing::Fault;

const char* kConfig = R"(# LiteLLM proxy config - production gateway
# owner: platform team

model_list:
  # main chat seat (H200 #1)
  - model_name: chat            # user-facing alias
    litellm_params:
      model: hosted_vllm/org/old-model-nvfp4   # previous seat
      api_base: http://10.0.0.5:8000/v1
      api_key: os.environ/VLLM_API_KEY
      timeout: 600
    model_info:
      id: chat-seat-1

  # summarizer, thinking off
  - model_name: summarizer
    litellm_params:
      model: "hosted_vllm/org/small"
      api_base: "http://10.0.0.7:8000/v1"
      extra_body: {chat_template_kwargs: {enable_thinking: false}}

  - model_name: "openai/*"   # passthrough
    litellm_params:
      model: "openai/*"
      api_key: os.environ/OPENAI_API_KEY

litellm_settings:
  drop_params: true   # keep
  request_timeout: 600

general_settings:
  master_key: os.environ/LITELLM_MASTER_KEY
)";

std::string slurp(const stdfs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

class Gateway : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = stdfs::temp_directory_path() /
           ("fp4forge-gw-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    stdfs::remove_all(dir_);
    stdfs::create_directories(dir_);
    cfg_ = dir_ / "config.yaml";
    write(kConfig);
  }
  void TearDown() override { stdfs::remove_all(dir_); }
  void write(const std::string& s) {
    std::ofstream f(cfg_, std::ios::binary);
    f << s;
  }
  SwapOptions swap_to(const FakeServer& srv) {
    SwapOptions o;
    o.alias = "chat";
    o.backend_model = "hosted_vllm/fake-org/fake-model-nvfp4";
    o.api_base = srv.url() + "/v1";
    o.probe_options.timeout_s = 5;
    return o;
  }
  stdfs::path dir_;
  stdfs::path cfg_;
};

TEST_F(Gateway, ShowListsAliasesBackendsAndWarnsOnWildcards) {
  auto s = gateway_show(cfg_, "http://10.0.0.7:8000");
  ASSERT_TRUE(s.ok()) << s.error().message;
  ASSERT_EQ(s->routes.size(), 3u);
  EXPECT_EQ(s->routes[0].alias, "chat");
  EXPECT_EQ(s->routes[0].model, "hosted_vllm/org/old-model-nvfp4");
  EXPECT_EQ(s->routes[0].api_base, "http://10.0.0.5:8000/v1");
  EXPECT_EQ(s->routes[0].line, 6);
  EXPECT_EQ(s->routes[1].alias, "summarizer");
  EXPECT_TRUE(s->routes[2].wildcard);
  EXPECT_EQ(s->backend_aliases, std::vector<std::string>{"summarizer"});
  ASSERT_FALSE(s->warnings.empty());
  EXPECT_NE(s->warnings[0].find("wildcard route 'openai/*'"), std::string::npos) << s->warnings[0];
  auto none = gateway_show(cfg_, "http://10.0.0.9:8000/v1");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->backend_aliases.empty());
  EXPECT_TRUE(same_backend("http://H:80/v1/", "http://h"));
  EXPECT_FALSE(same_backend("http://h:8000", "http://h:8001"));
}

// A deployment whose litellm_params come from a YAML merge key (`<<: *defaults`) routes where PyYAML, and so LiteLLM,
// reads it: its own keys first, then the merged ones (issue 55 tryout K: show left it out of --backend's answer).
TEST_F(Gateway, ShowReadsMergeKeysAsLiteLLMDoes) {
  write(
      "x-defaults: &defaults\n  model: hosted_vllm/chat\n  api_base: http://10.0.0.7:8000/v1\n"
      "model_list:\n  - model_name: chat\n    litellm_params:\n      <<: *defaults\n"
      "  - model_name: over\n    litellm_params:\n      <<: [*defaults]\n      api_base: http://10.0.0.8:8000/v1\n"
      "  - model_name: quoted\n    litellm_params:\n      \"<<\": x\n      model: hosted_vllm/q\n");
  auto s = gateway_show(cfg_, "http://10.0.0.7:8000");
  ASSERT_TRUE(s.ok()) << s.error().message;
  ASSERT_EQ(s->routes.size(), 3u);
  EXPECT_EQ(s->routes[0].model, "hosted_vllm/chat");
  EXPECT_EQ(s->routes[0].api_base, "http://10.0.0.7:8000/v1");
  EXPECT_TRUE(s->routes[0].params.empty());
  EXPECT_EQ(s->routes[1].model, "hosted_vllm/chat");
  EXPECT_EQ(s->routes[1].api_base, "http://10.0.0.8:8000/v1");  // its own key wins
  ASSERT_EQ(s->routes[2].params.size(), 1u);                    // a quoted "<<" is a plain key
  EXPECT_EQ(s->routes[2].params[0].first, "<<");
  EXPECT_EQ(s->backend_aliases, std::vector<std::string>{"chat"});
}

// Tryout N-L2: the text lists each route's other scalar params, secrets masked, as the JSON does.
TEST_F(Gateway, ShowTextListsTheOtherParamsMasked) {
  write(
      "model_list:\n  - model_name: vis\n    litellm_params:\n      model: hosted_vllm/vis\n"
      "      api_base: http://10.0.0.7:8000/v1\n      api_key: sk-literal-SECRET\n      temperature: 0.2\n");
  auto s = gateway_show(cfg_);
  ASSERT_TRUE(s.ok()) << s.error().message;
  const std::string text = to_text(*s);
  EXPECT_NE(text.find("api_key=***"), std::string::npos) << text;
  EXPECT_NE(text.find("temperature=0.2"), std::string::npos) << text;
  EXPECT_EQ(text.find("SECRET"), std::string::npos) << text;
  // A map or list value is one flow-style line, not block YAML with escaped line breaks (tryout P note).
  write(
      "model_list:\n  - model_name: chat\n    litellm_params:\n      model: openai/q\n"
      "      api_base: http://localhost:8000/v1\n"
      "      extra_body:\n        top_k: 20\n        chat_template_kwargs: {enable_thinking: false}\n"
      "      tags:\n        - a\n        - b\n");
  auto flow = gateway_show(cfg_);
  ASSERT_TRUE(flow.ok()) << flow.error().message;
  const std::string ft = to_text(*flow);
  EXPECT_NE(ft.find("extra_body={top_k: 20, chat_template_kwargs: {enable_thinking: false}}, tags=[a, b]"),
            std::string::npos)
      << ft;
  EXPECT_EQ(ft.find("\\x0a"), std::string::npos) << ft;
}

TEST_F(Gateway, ShowRejectsNonLiteLLMFiles) {
  write("a: [1, 2\n");
  auto bad = gateway_show(cfg_);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, Errc::BAD_INPUT);
  EXPECT_NE(bad.error().message.find("invalid YAML"), std::string::npos);
  write("general_settings: {}\n");
  auto none = gateway_show(cfg_);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("no 'model_list' key"), std::string::npos);
}

// The gateway check a swap suggests asks what its gate asked: a seat swapped in with --no-tools --text-only is not
// sent to a check that fails it on tools or vision (tryout note: the next step left the flags out).
TEST_F(Gateway, SwapNextStepCheckCarriesTheGateFlags) {
  FakeServer srv{FakeServerOptions{}};
  SwapOptions o = swap_to(srv);
  o.probe_options.no_tools = true;
  o.probe_options.vision = probe::VisionMode::TEXT_ONLY;
  auto r = gateway_swap(cfg_, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_TRUE(r->changed) << r->refused;
  ASSERT_EQ(r->next_steps.size(), 3u);
  EXPECT_NE(r->next_steps[1].find("--alias chat --url http://LITELLM_HOST:4000 --text-only --no-tools"),
            std::string::npos)
      << r->next_steps[1];
  // Without them, the check is the plain one. The rollback's next steps prove the alias it moved back (tryout R-L2).
  auto bak = gateway_rollback(cfg_);
  ASSERT_TRUE(bak.ok()) << bak.error().message;
  ASSERT_EQ(bak->next_steps.size(), 2u) << ::testing::PrintToString(bak->next_steps);
  EXPECT_NE(bak->next_steps[1].find("prove 'chat' as clients see it: fp4forge gateway check --config " + cfg_.string() +
                                    " --alias chat --url http://LITELLM_HOST:4000 (LITELLM_HOST: the proxy's host; "
                                    "add --no-tools for a seat that serves no tools"),
            std::string::npos)
      << bak->next_steps[1];
  auto plain = gateway_swap(cfg_, swap_to(srv));
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  ASSERT_EQ(plain->next_steps.size(), 3u);
  EXPECT_TRUE(plain->next_steps[1].ends_with("--url http://LITELLM_HOST:4000")) << plain->next_steps[1];
  // Checks a flag skips are not listed; every other check is no --checks at all (tryout R-L1).
  ASSERT_TRUE(gateway_rollback(cfg_).ok());
  o.checks = probe::all_checks();
  auto listed = gateway_swap(cfg_, o);
  ASSERT_TRUE(listed.ok()) << listed.error().message;
  ASSERT_EQ(listed->next_steps.size(), 3u);
  EXPECT_TRUE(listed->next_steps[1].ends_with("--url http://LITELLM_HOST:4000 --text-only --no-tools"))
      << listed->next_steps[1];
  ASSERT_TRUE(gateway_rollback(cfg_).ok());
  o.checks = {probe::Check::MODELS, probe::Check::PROSE, probe::Check::LOGPROBS, probe::Check::TOOLS};
  auto some = gateway_swap(cfg_, o);
  ASSERT_TRUE(some.ok()) << some.error().message;
  EXPECT_NE(some->next_steps[1].find(" --checks models,prose,logprobs --text-only --no-tools"), std::string::npos)
      << some->next_steps[1];
}

// Tryout S-M2: an alias that promises more context (model_info.max_input_tokens, as plan writes it) than the new
// backend serves is said; one within it is not.
TEST_F(Gateway, SwapSaysWhenTheAliasPromisesMoreContextThanTheBackendServes) {
  write(
      "model_list:\n  - model_name: chat\n    litellm_params:\n      model: hosted_vllm/old\n"
      "      api_base: http://127.0.0.1:9/v1\n    model_info:\n      max_input_tokens: 4096\n");
  FakeServerOptions so;
  so.max_model_len = 1024;
  FakeServer shorter(so);
  SwapOptions o = swap_to(shorter);
  o.probe_options.vision = probe::VisionMode::TEXT_ONLY;
  auto r = gateway_swap(cfg_, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_TRUE(r->changed) << r->refused;
  const std::string want =
      "alias 'chat' declares model_info.max_input_tokens 4096, but the new backend serves "
      "max_model_len 1024";
  EXPECT_TRUE(std::any_of(r->warnings.begin(), r->warnings.end(), [&](const std::string& w) {
    return w.find(want) != std::string::npos;
  })) << ::testing::PrintToString(r->warnings);
  ASSERT_TRUE(gateway_rollback(cfg_).ok());
  FakeServer longer(FakeServerOptions{});  // 8192
  auto ok = gateway_swap(cfg_, swap_to(longer));
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  for (const auto& w : ok->warnings) EXPECT_EQ(w.find("max_input_tokens"), std::string::npos) << w;
}

TEST_F(Gateway, SwapRefusedWhenProbeFails) {
  FakeServerOptions fo;
  fo.fault = Fault::CONTENT_NULL_LENGTH;
  FakeServer srv(fo);
  auto r = gateway_swap(cfg_, swap_to(srv));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->changed);
  EXPECT_NE(r->refused.find("prose: content-null-length"), std::string::npos) << r->refused;
  EXPECT_NE(r->refused.find("logprobs: nan-logits"), std::string::npos) << r->refused;
  ASSERT_TRUE(r->probe.has_value());
  EXPECT_TRUE(r->probe->any_failed());
  EXPECT_EQ(slurp(cfg_), kConfig);
  EXPECT_TRUE(list_backups(cfg_).empty());
  EXPECT_EQ(std::distance(stdfs::directory_iterator(dir_), stdfs::directory_iterator()), 1);
}

// Issue 14 #2: secret values never appear in a diff (swap with --param api_key=..., rollback), while the
// file itself holds them; os.environ/ references stay readable.
// Fuzzing (2026-12-02): an empty value (`model:` with nothing after it) has no position in yaml-cpp (line -1),
// which swap used as a line index (a heap overflow, with or without a YAML merge in the entry). It is refused like
// any value that is not a one-line scalar, and the file is left as it was; an entry that takes values through a
// merge (`<<: *base`) stays refused as before.
TEST_F(Gateway, SwapRefusesAnEmptyValue) {
  FakeServer srv(FakeServerOptions{});
  for (const std::string merge : {"", "    <<: *base\n"}) {
    const std::string text = "defaults: &base\n  api_base: http://10.0.0.5:8000/v1\nmodel_list:\n- model_name: chat\n"
                             "  litellm_params:\n" + merge + "    model:\n";
    write(text);
    auto r = gateway_swap(cfg_, swap_to(srv));
    ASSERT_FALSE(r.ok()) << merge;
    EXPECT_EQ(r.error().code, Errc::BAD_INPUT);
    EXPECT_NE(r.error().message.find("litellm_params.model of alias 'chat' has no value on its key's line"),
              std::string::npos) << r.error().message;
    EXPECT_EQ(slurp(cfg_), text);
  }
  const std::string merged = "defaults: &base\n  api_base: http://10.0.0.5:8000/v1\nmodel_list:\n- model_name: chat\n"
                             "  litellm_params:\n    <<: *base\n    model: hosted_vllm/org/old\n";
  write(merged);
  auto m = gateway_swap(cfg_, swap_to(srv));
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message.find("takes a value from YAML anchor '&base'"), std::string::npos) << m.error().message;
  EXPECT_EQ(slurp(cfg_), merged);
}

TEST_F(Gateway, DiffsMaskSecretValues) {
  FakeServer srv(FakeServerOptions{});
  SwapOptions o = swap_to(srv);
  o.params = {{"api_key", "sk-LIVE-abcdef123456"}, {"extra_headers", "{x-token: tok-SECRET-42, x-other: plain}"}};
  auto r = gateway_swap(cfg_, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_TRUE(r->changed) << r->refused;
  EXPECT_EQ(r->diff.find("sk-LIVE"), std::string::npos) << r->diff;
  EXPECT_EQ(r->diff.find("tok-SECRET"), std::string::npos) << r->diff;
  EXPECT_NE(r->diff.find("api_key: ***"), std::string::npos) << r->diff;
  // A flow value under a header key is masked whole, as its block form is (R4-B4: `{X-Api: SECRET}` was shown).
  EXPECT_NE(r->diff.find("extra_headers: {***}"), std::string::npos) << r->diff;
  EXPECT_NE(slurp(cfg_).find("sk-LIVE-abcdef123456"), std::string::npos);  // the file keeps the real value
  auto back = gateway_rollback(cfg_, {});
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(back->diff.find("sk-LIVE"), std::string::npos) << back->diff;
  EXPECT_NE(back->diff.find("os.environ/VLLM_API_KEY"), std::string::npos) << back->diff;
}

// Issue 27 #1: a config line of 28 KB and more (a long comment, an inline service-account JSON) crashed swap /
// retire / rollback with SIGSEGV (std::regex recursion in the masking). The masking now scans in linear time.
TEST_F(Gateway, LongLinesAreMaskedWithoutCrashing) {
  std::string cfg = kConfig;
  const std::string long_comment = "# " + std::string(300000, 'x') + "\n";
  const std::string long_value = "      vertex_project: \"" + std::string(200000, 'p') + "\"\n";
  cfg.insert(cfg.find("model_list:"), long_comment);
  cfg.insert(cfg.find("      timeout: 600"), long_value);
  write(cfg);
  FakeServer srv(FakeServerOptions{});
  SwapOptions o = swap_to(srv);
  o.params = {{"api_key", "sk-LIVE-0123456789"}};
  auto r = gateway_swap(cfg_, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_TRUE(r->changed) << r->refused;
  EXPECT_EQ(r->diff.find("sk-LIVE"), std::string::npos);
  auto back = gateway_rollback(cfg_, {});
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(slurp(cfg_), cfg);
}

// Issue 27 #3: secrets masked by shape as well as by name, in every form a LiteLLM config holds them.
TEST_F(Gateway, RetireDiffMasksSecretsByShape) {
  write(R"(model_list:
  - model_name: vertex
    litellm_params:
      model: vertex_ai/gemini
      api_base: "http://svc:PASSW0RD-1@10.0.0.7:8000/v1?key=AIzaQUERYKEY&alt=json"
      vertex_credentials: |
        {"type": "service_account", "private_key_id": "PKID-9"}
      api_key: |
        sk-BLOCK-SCALAR-KEY
      extra_headers:
        Authorization: Bearer eyJBEARER.TOKEN.X
        x-trace: on
      timeout: 600
  - model_name: chat
    litellm_params:
      model: hosted_vllm/org/m
      api_base: http://10.0.0.5:8000/v1
)");
  auto s = gateway_show(cfg_);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(to_text(*s).find("PASSW0RD"), std::string::npos) << to_text(*s);
  EXPECT_EQ(to_json(*s).dump().find("AIzaQUERYKEY"), std::string::npos);
  EXPECT_NE(to_text(*s).find("10.0.0.7:8000"), std::string::npos) << to_text(*s);
  auto r = gateway_retire(cfg_, "vertex");
  ASSERT_TRUE(r.ok()) << r.error().message;
  for (const char* secret : {"PASSW0RD-1", "AIzaQUERYKEY", "PKID-9", "sk-BLOCK-SCALAR-KEY", "eyJBEARER"})
    EXPECT_EQ(r->diff.find(secret), std::string::npos) << secret << " in\n" << r->diff;
  EXPECT_NE(r->diff.find("timeout: 600"), std::string::npos) << r->diff;
  EXPECT_NE(r->diff.find("10.0.0.7:8000"), std::string::npos) << r->diff;
}

// Tryout P-M2: edits through a link and through its target back up the one file edited under its own name, so a
// rollback through either path undoes exactly the newest edit.
TEST_F(Gateway, ARollbackThroughALinkUndoesTheNewestEditOfItsTarget) {
  const stdfs::path real = cfg_.parent_path() / "real.yaml", link = cfg_.parent_path() / "link.yaml";
  std::ofstream(real, std::ios::binary) << kConfig;
  stdfs::create_symlink("real.yaml", link);
  ASSERT_TRUE(gateway_retire(link, "summarizer").ok());
  const std::string after_first = slurp(real);
  ASSERT_TRUE(gateway_retire(real, "chat").ok());
  ASSERT_NE(slurp(real), after_first);
  EXPECT_EQ(list_backups(link).size(), 2u);
  EXPECT_EQ(list_backups(real).size(), 2u);
  auto r = gateway_rollback(link, {});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(slurp(real), after_first);
  EXPECT_TRUE(stdfs::is_symlink(link));
}

// Issue 15: the probe gate cannot be reduced below the checks that catch F1 (prose, logprobs) without
// --weak-gate, and a swap without a probe says loudly that the seat is not proven.
TEST_F(Gateway, ProbeGateKeepsTheF1ChecksAndNoProbeIsLoud) {
  FakeServer srv(FakeServerOptions{});
  SwapOptions o = swap_to(srv);
  o.checks = {Check::MODELS};
  auto weak = gateway_swap(cfg_, o);
  ASSERT_FALSE(weak.ok());
  EXPECT_EQ(weak.error().code, Errc::USAGE);
  EXPECT_NE(weak.error().message.find("leaves out prose and logprobs"), std::string::npos) << weak.error().message;
  EXPECT_EQ(slurp(cfg_), kConfig);
  o.checks = {Check::MODELS, Check::PROSE, Check::LOGPROBS};
  o.dry_run = true;
  auto ok = gateway_swap(cfg_, o);
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  o.checks = {Check::MODELS};
  o.weak_gate = true;
  EXPECT_TRUE(gateway_swap(cfg_, o).ok());
  o.weak_gate = false;
  o.probe = false;
  auto unproven = gateway_swap(cfg_, o);
  ASSERT_TRUE(unproven.ok()) << unproven.error().message;
  ASSERT_FALSE(unproven->warnings.empty());
  // (a dry run: nothing routes yet, issue 55 tryout)
  EXPECT_EQ(unproven->warnings.back().rfind("NOT PROVEN: 'chat' would route to", 0), 0u) << unproven->warnings.back();
}

TEST_F(Gateway, SwapAppliedWithBackupWhenProbePasses) {
  FakeServer srv(FakeServerOptions{});
  SwapOptions o = swap_to(srv);
  o.params = {{"extra_body", "{chat_template_kwargs: {enable_thinking: false}}"}, {"timeout", "300"}};
  auto r = gateway_swap(cfg_, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->refused.empty()) << r->refused;
  ASSERT_TRUE(r->changed);
  ASSERT_TRUE(r->probe.has_value());
  EXPECT_FALSE(r->probe->any_failed());
  EXPECT_EQ(r->probe->model, "fake-org/fake-model-nvfp4");  // provider prefix stripped for the direct probe
  // Backup: named, byte-identical to the old file.
  const auto baks = list_backups(cfg_);
  ASSERT_EQ(baks.size(), 1u);
  EXPECT_EQ(baks[0].string(), r->backup);
  EXPECT_NE(baks[0].filename().string().find("config.yaml.bak-fp4forge-"), std::string::npos);
  EXPECT_EQ(baks[0].filename().string().size(), std::string("config.yaml.bak-fp4forge-20250101-120000").size());
  EXPECT_EQ(slurp(baks[0]), kConfig);
  // Exactly the alias's lines changed; comments, quoting and other entries byte-for-byte.
  std::string expect = kConfig;
  auto replace = [&](const std::string& from, const std::string& to) {
    const auto at = expect.find(from);
    ASSERT_NE(at, std::string::npos);
    expect.replace(at, from.size(), to);
  };
  replace("      model: hosted_vllm/org/old-model-nvfp4   # previous seat\n",
          "      model: hosted_vllm/fake-org/fake-model-nvfp4   # previous seat\n"
          "      extra_body: {chat_template_kwargs: {enable_thinking: false}}\n");
  replace("      api_base: http://10.0.0.5:8000/v1\n", "      api_base: " + srv.url() + "/v1\n");
  replace("      timeout: 600\n", "      timeout: 300\n");
  EXPECT_EQ(slurp(cfg_), expect);
  const auto st = util::diff_stat(kConfig, slurp(cfg_));
  EXPECT_EQ(st.removed, 3u);
  EXPECT_EQ(st.added, 4u);
  EXPECT_NE(r->diff.find("\n-      api_base: http://10.0.0.5:8000/v1\n"), std::string::npos) << r->diff;
  EXPECT_NE(r->diff.find("\n+      api_base: " + srv.url() + "/v1\n"), std::string::npos) << r->diff;
  // The new file routes chat to the seat.
  auto s = gateway_show(cfg_, srv.url());
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->backend_aliases, std::vector<std::string>{"chat"});
}

TEST_F(Gateway, SwapKeepsQuoteStyleAndCrlf) {
  std::string crlf;
  for (char c : std::string(kConfig)) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  write(crlf);
  SwapOptions o;
  o.alias = "summarizer";
  o.backend_model = "hosted_vllm/org/small-v2";
  o.api_base = "http://10.0.0.8:8000/v1";
  o.probe = false;
  auto r = gateway_swap(cfg_, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  const std::string now = slurp(cfg_);
  EXPECT_NE(now.find("      model: \"hosted_vllm/org/small-v2\"\r\n"), std::string::npos);
  EXPECT_NE(now.find("      api_base: \"http://10.0.0.8:8000/v1\"\r\n"), std::string::npos);
  for (std::size_t i = 0; i < now.size(); ++i) {
    if (now[i] == '\n') {
      ASSERT_EQ(now[i - 1], '\r') << "LF without CR at " << i;
    }
  }
}

TEST_F(Gateway, SwapErrorsLeaveTheFileAlone) {
  SwapOptions o;
  o.alias = "nope";
  o.backend_model = "hosted_vllm/m";
  o.api_base = "http://127.0.0.1:1/v1";
  o.probe = false;
  auto r = gateway_swap(cfg_, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::BAD_INPUT);
  EXPECT_EQ(r.error().message, cfg_.string() + ": alias 'nope' not found; aliases: [chat, summarizer, openai/*]");
  // Another case or a typo of an alias the file has: the nearest named.
  for (const char* typed : {"Chat", "sumarizer"}) {
    o.alias = typed;
    r = gateway_swap(cfg_, o);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().message.find(std::string(typed) == "Chat" ? "not found (did you mean 'chat'?)"
                                                                  : "not found (did you mean 'summarizer'?)"),
              std::string::npos) << r.error().message;
  }
  std::string dup = kConfig;
  dup.replace(dup.find("model_name: summarizer"), 22, "model_name: chat      ");
  write(dup);
  o.alias = "chat";
  auto d = gateway_swap(cfg_, o);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().code, Errc::USAGE);
  // model_info.id is LiteLLM's own name of a deployment: listed, and --deployment accepts it (issue 51 #4).
  EXPECT_NE(d.error().message.find("has 2 deployments, which LiteLLM load-balances: 1) hosted_vllm/org/old-model-nvfp4 "
                                   "@ http://10.0.0.5:8000/v1 (line 6, id chat-seat-1); 2) hosted_vllm/org/small @ "
                                   "http://10.0.0.7:8000/v1 (line 16)"),
            std::string::npos) << d.error().message;
  EXPECT_NE(d.error().message.find("pass --deployment N"), std::string::npos) << d.error().message;
  EXPECT_EQ(slurp(cfg_), dup);
  o.params = {{"model", "x"}};
  EXPECT_EQ(gateway_swap(cfg_, o).error().code, Errc::USAGE);
  // A decimal comma would be written as a string the probe never sends (issue 55 tryout): refused with the fix.
  o.params = {{"temperature", "0,7"}};
  auto comma = gateway_swap(cfg_, o);
  ASSERT_FALSE(comma.ok());
  EXPECT_EQ(comma.error().code, Errc::USAGE);
  EXPECT_NE(comma.error().message.find("--param temperature=0,7: a decimal comma, which YAML reads as the string "
                                       "\"0,7\"; write 0.7"),
            std::string::npos)
      << comma.error().message;
  EXPECT_TRUE(list_backups(cfg_).empty());
}

// A second rollback finds the file already as the newest backup: it names the one before it (issue 55 tryout: add
// then retire could not be undone in two steps without knowing --to).
TEST_F(Gateway, ASecondRollbackNamesTheOlderBackup) {
  FakeServer a(FakeServerOptions{}), b(FakeServerOptions{});
  ASSERT_TRUE(gateway_swap(cfg_, swap_to(a)).ok());
  ASSERT_TRUE(gateway_swap(cfg_, swap_to(b)).ok());
  const auto baks = list_backups(cfg_);
  ASSERT_EQ(baks.size(), 2u);
  ASSERT_TRUE(gateway_rollback(cfg_).ok());
  auto again = gateway_rollback(cfg_);
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_FALSE(again->changed);
  ASSERT_EQ(again->next_steps.size(), 1u);
  EXPECT_NE(again->next_steps[0].find("gateway rollback --config " + cfg_.string() + " --to " + baks[0].string()),
            std::string::npos)
      << again->next_steps[0];
  auto older = gateway_rollback(cfg_, baks[0]);
  ASSERT_TRUE(older.ok()) << older.error().message;
  EXPECT_EQ(slurp(cfg_), kConfig);
  // Tryout T-M1: a plain rollback now would restore the newest backup, a state the --to rollback undid: it does not
  // redo, it says where the file is and names both ways on.
  auto redo = gateway_rollback(cfg_);
  ASSERT_TRUE(redo.ok()) << redo.error().message;
  EXPECT_FALSE(redo->changed);
  EXPECT_EQ(redo->backup, baks[0].string());  // the backup the file equals, not the newest (tryout U-M1)
  EXPECT_EQ(slurp(cfg_), kConfig);
  EXPECT_TRUE(std::any_of(redo->warnings.begin(), redo->warnings.end(), [&](const std::string& w) {
    return w.find("which a plain rollback does not redo: nothing written") != std::string::npos;
  })) << ::testing::PrintToString(redo->warnings);
  ASSERT_EQ(redo->next_steps.size(), 1u);  // at the oldest backup: nothing further back
  EXPECT_NE(redo->next_steps[0].find("to redo the undone change: fp4forge gateway rollback --config " + cfg_.string() +
                                     " --to " + baks[1].string()),
            std::string::npos)
      << redo->next_steps[0];
  // A new edit after it: the plain rollback undoes that edit again.
  FakeServer c(FakeServerOptions{});
  ASSERT_TRUE(gateway_swap(cfg_, swap_to(c)).ok());
  auto undo = gateway_rollback(cfg_);
  ASSERT_TRUE(undo.ok()) << undo.error().message;
  EXPECT_TRUE(undo->changed);
  EXPECT_EQ(slurp(cfg_), kConfig);
}

TEST_F(Gateway, RollbackRestoresByteIdentical) {
  FakeServer srv(FakeServerOptions{});
  ASSERT_TRUE(gateway_swap(cfg_, swap_to(srv)).ok());
  ASSERT_NE(slurp(cfg_), kConfig);
  const std::string swapped = slurp(cfg_);
  auto r = gateway_rollback(cfg_);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->changed);
  EXPECT_EQ(slurp(cfg_), kConfig);
  EXPECT_FALSE(r->diff.empty());
  // The replaced content was kept, under a name the default rollback never picks.
  bool kept = false;
  for (const auto& e : stdfs::directory_iterator(dir_))
    if (e.path().filename().string().find("config.yaml.rollback-fp4forge-") == 0) kept = slurp(e.path()) == swapped;
  EXPECT_TRUE(kept);
  EXPECT_EQ(list_backups(cfg_).size(), 1u);
  // Rolling back again is a no-op.
  auto again = gateway_rollback(cfg_);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->changed);
  EXPECT_TRUE(again->next_steps.empty());  // no older backup to point at
  // --to a missing file is an error; no backups at all is an error too.
  EXPECT_FALSE(gateway_rollback(cfg_, dir_ / "missing").ok());
  stdfs::remove(list_backups(cfg_)[0]);
  auto none = gateway_rollback(cfg_);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code, Errc::BAD_INPUT);
}

TEST_F(Gateway, RetireCommentsOutAndIsReversible) {
  auto r = gateway_retire(cfg_, "summarizer");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->changed);
  const std::string now = slurp(cfg_);
  EXPECT_NE(now.find("# fp4forge-retired: alias 'summarizer' on "), std::string::npos);
  EXPECT_NE(now.find("#   - model_name: summarizer\n#     litellm_params:\n"), std::string::npos) << now;
  EXPECT_NE(now.find("\n  # summarizer, thinking off\n"), std::string::npos);  // unrelated comment untouched
  // Only comments were added: removing them gives the original back (minus nothing).
  auto s = gateway_show(cfg_);
  ASSERT_TRUE(s.ok()) << s.error().message;
  ASSERT_EQ(s->routes.size(), 2u);
  ASSERT_EQ(s->retired.size(), 1u);
  EXPECT_EQ(s->retired[0].alias, "summarizer");
  std::string uncommented;
  std::istringstream in(now);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# fp4forge-retired:", 0) == 0) continue;
    if (line.rfind("#   ", 0) == 0 || line.rfind("#     ", 0) == 0 || line == "#       model: \"hosted_vllm/org/small\"")
      line = line.substr(2);
    uncommented += line + "\n";
  }
  EXPECT_EQ(uncommented, kConfig);
  ASSERT_TRUE(gateway_rollback(cfg_).ok());
  EXPECT_EQ(slurp(cfg_), kConfig);
}

TEST_F(Gateway, RetireWarnsWhenAWildcardSwallowsTheAlias) {
  std::string cfg = kConfig;
  cfg.replace(cfg.find("\"openai/*\"   # passthrough"), 26, "\"*\"   # catch-all        ");
  write(cfg);
  auto r = gateway_retire(cfg_, "chat");
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_FALSE(r->warnings.empty());
  EXPECT_NE(r->warnings[0].find("retired alias 'chat'"), std::string::npos) << r->warnings[0];
  EXPECT_NE(r->warnings[0].find("wildcard route '*'"), std::string::npos) << r->warnings[0];
  auto s = gateway_show(cfg_);
  ASSERT_TRUE(s.ok());
  bool swallowed = false;
  for (const auto& w : s->warnings) swallowed |= w.find("retired alias 'chat'") != std::string::npos;
  EXPECT_TRUE(swallowed);
  // Already retired: said as retired, with the way back, not as an unknown alias (issue 55 tryout E-7).
  const auto again = gateway_retire(cfg_, "chat");
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.error().message.find("alias 'chat' is retired (line "), std::string::npos) << again.error().message;
  EXPECT_NE(again.error().message.find("gateway rollback --config"), std::string::npos) << again.error().message;
  EXPECT_EQ(again.error().message.find("not found"), std::string::npos) << again.error().message;
}

// Issue 29: a load-balanced alias (two deployments of one model_name). swap and retire act on the one
// deployment --deployment names (number, api_base or model); without it they refuse and list them.
const char* kReplicas = R"(model_list:
  - model_name: chat
    litellm_params:
      model: hosted_vllm/org/m-bf16
      api_base: http://10.0.0.5:8000/v1
      api_key: os.environ/FP4FORGE_TEST_SEAT_KEY
  - model_name: chat
    litellm_params:
      model: hosted_vllm/org/m-bf16
      api_base: http://10.0.0.6:8000/v1
      api_key: os.environ/FP4FORGE_TEST_SEAT_KEY
  - model_name: "*"
    litellm_params:
      model: "openai/*"
general_settings:
  master_key: os.environ/FP4FORGE_TEST_MASTER_KEY
)";

TEST_F(Gateway, SwapRepointsOneDeploymentOfALoadBalancedAlias) {
  write(kReplicas);
  ::setenv("FP4FORGE_TEST_SEAT_KEY", "sk-seat-key-123", 1);
  FakeServerOptions fo;
  fo.expect_api_key = "sk-seat-key-123";  // the probe must send the alias's own key (os.environ/ resolved)
  FakeServer srv(fo);
  SwapOptions o = swap_to(srv);
  auto all = gateway_swap(cfg_, o);
  ASSERT_FALSE(all.ok());
  EXPECT_EQ(all.error().code, Errc::USAGE);
  EXPECT_NE(all.error().message.find("1) hosted_vllm/org/m-bf16 @ http://10.0.0.5:8000/v1 (line 2); 2) "
                                     "hosted_vllm/org/m-bf16 @ http://10.0.0.6:8000/v1 (line 7)"),
            std::string::npos) << all.error().message;
  o.deployment = "3";
  auto none = gateway_swap(cfg_, o);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("--deployment '3' names none of alias 'chat''s 2 deployment(s)"),
            std::string::npos) << none.error().message;
  o.deployment = "org/m-bf16";  // both have this model: ambiguous
  EXPECT_NE(gateway_swap(cfg_, o).error().message.find("names 2 of alias 'chat'"), std::string::npos);
  o.deployment = "http://10.0.0.6:8000";  // by api_base (the /v1 does not matter)
  auto r = gateway_swap(cfg_, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_TRUE(r->changed) << r->refused;
  const std::string now = slurp(cfg_);
  EXPECT_NE(now.find("      api_base: http://10.0.0.5:8000/v1\n"), std::string::npos) << now;  // replica 1 kept
  EXPECT_EQ(now.find("http://10.0.0.6:8000"), std::string::npos) << now;
  EXPECT_NE(now.find("      api_base: " + srv.url() + "/v1\n      api_key: os.environ/FP4FORGE_TEST_SEAT_KEY\n  - "
                     "model_name: \"*\""),
            std::string::npos) << now;
  ASSERT_EQ(r->next_steps.size(), 3u);
  EXPECT_NE(r->next_steps[0].find("reload LiteLLM"), std::string::npos);
  EXPECT_NE(r->next_steps[1].find("fp4forge gateway check --config " + cfg_.string() + " --alias chat"),
            std::string::npos) << r->next_steps[1];
  EXPECT_NE(to_text(*r).find("next: 1. reload LiteLLM"), std::string::npos) << to_text(*r);
  EXPECT_EQ(to_json(*r)["next_steps"].size(), 3u);
  EXPECT_EQ(to_json(*r).dump().find("sk-seat-key-123"), std::string::npos);
  ::unsetenv("FP4FORGE_TEST_SEAT_KEY");
}

TEST_F(Gateway, SwapProbeWithoutTheAliasKeyIsRefusedWithAHint) {
  write(kReplicas);
  ::unsetenv("FP4FORGE_TEST_SEAT_KEY");
  FakeServerOptions fo;
  fo.expect_api_key = "sk-seat-key-123";
  FakeServer srv(fo);
  SwapOptions o = swap_to(srv);
  o.deployment = "1";
  auto r = gateway_swap(cfg_, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->changed);
  EXPECT_FALSE(r->refused.empty());
  int hint = 0;
  for (const auto& w : r->warnings)
    hint += w.find("api_key is os.environ/FP4FORGE_TEST_SEAT_KEY, which is not set in this environment") !=
            std::string::npos;
  EXPECT_EQ(hint, 1);  // once, not once per place that names it (issue 55 tryout)
  EXPECT_EQ(slurp(cfg_), kReplicas);
}

TEST_F(Gateway, RetireOneReplicaKeepsTheAlias) {
  write(kReplicas);
  auto refused = gateway_retire(cfg_, "chat");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, Errc::USAGE);
  EXPECT_NE(refused.error().message.find("pass --deployment N to retire one replica, or --all-deployments"),
            std::string::npos) << refused.error().message;
  EXPECT_EQ(slurp(cfg_), kReplicas);
  EXPECT_EQ(gateway_retire(cfg_, "chat", "1", true).error().code, Errc::USAGE);
  auto r = gateway_retire(cfg_, "chat", "1");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->warnings.empty()) << r->warnings[0];  // the wildcard does not swallow a live alias
  auto s = gateway_show(cfg_);
  ASSERT_TRUE(s.ok()) << s.error().message;
  ASSERT_EQ(s->routes.size(), 2u);
  EXPECT_EQ(s->routes[0].api_base, "http://10.0.0.6:8000/v1");
  ASSERT_EQ(s->retired.size(), 1u);
  EXPECT_EQ(s->retired[0].alias, "chat");
  for (const auto& w : s->warnings) EXPECT_EQ(w.find("retired alias 'chat'"), std::string::npos) << w;
  EXPECT_NE(slurp(cfg_).find("# fp4forge-retired: alias 'chat' deployment hosted_vllm/org/m-bf16 @ "
                             "http://10.0.0.5:8000/v1 (line 2) on "),
            std::string::npos) << slurp(cfg_);
  bool keeps = false;
  for (const auto& n : r->next_steps) keeps |= n.find("'chat' keeps 1 deployment(s)") != std::string::npos;
  EXPECT_TRUE(keeps);
  ASSERT_TRUE(gateway_rollback(cfg_).ok());
  auto both = gateway_retire(cfg_, "chat", {}, true);
  ASSERT_TRUE(both.ok()) << both.error().message;
  ASSERT_FALSE(both->warnings.empty());  // now the wildcard answers for it
  EXPECT_NE(both->warnings[0].find("retired alias 'chat'"), std::string::npos) << both->warnings[0];
}

TEST_F(Gateway, BackendModelMustNameAnOpenAICompatibleProvider) {
  SwapOptions o;
  o.alias = "chat";
  o.api_base = "http://10.0.0.8:8000/v1";
  o.probe = false;
  o.dry_run = true;
  for (const auto& [model, want] : std::vector<std::pair<std::string, std::string>>{
           {"org/m", "expected 'hosted_vllm/org/m'"},
           {"m", "has no LiteLLM provider prefix"},
           {"vllm/org/m", "expected 'hosted_vllm/org/m'"},
           {"hosted_vllm/", "names no model after the provider"}}) {
    o.backend_model = model;
    auto r = gateway_swap(cfg_, o);
    ASSERT_FALSE(r.ok()) << model;
    EXPECT_EQ(r.error().code, Errc::USAGE);
    EXPECT_NE(r.error().message.find(want), std::string::npos) << r.error().message;
  }
  o.backend_model = "openai/org/m";
  o.api_base = "http://10.0.0.8:8000";
  auto nov1 = gateway_swap(cfg_, o);
  ASSERT_TRUE(nov1.ok()) << nov1.error().message;
  bool warned = false;
  for (const auto& w : nov1->warnings) warned |= w.find("has no /v1") != std::string::npos;
  EXPECT_TRUE(warned);
  EXPECT_EQ(slurp(cfg_), kConfig);
}

// gateway check: the probe goes to the gateway with the alias as the model name and the config's master key.
TEST_F(Gateway, CheckProbesTheAliasThroughTheGateway) {
  write(kReplicas);
  ::setenv("FP4FORGE_TEST_MASTER_KEY", "sk-master-456", 1);
  FakeServerOptions fo;
  fo.model = "chat";
  fo.expect_api_key = "sk-master-456";
  FakeServer gw(fo);
  CheckOptions co;
  co.alias = "chat";
  co.gateway_url = gw.url();
  co.probe_options.timeout_s = 5;
  auto r = gateway_check(cfg_, co);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->probe.any_failed()) << to_text(*r);  // reasoning is a skip for this model
  EXPECT_EQ(exit_code(*r), 0);
  EXPECT_EQ(r->probe.model, "chat");
  EXPECT_EQ(to_json(*r).dump().find("sk-master-456"), std::string::npos);
  // A master key the gateway refuses is named as where the key came from, not --api-key-env (issue 55 tryout).
  ::setenv("FP4FORGE_TEST_MASTER_KEY", "sk-stale", 1);
  auto stale = gateway_check(cfg_, co);
  ASSERT_TRUE(stale.ok()) << stale.error().message;
  EXPECT_EQ(exit_code(*stale), 1);
  EXPECT_NE(to_text(*stale).find("it came from the config's general_settings.master_key"), std::string::npos)
      << to_text(*stale);
  EXPECT_EQ(to_text(*stale).find("check the variable --api-key-env names"), std::string::npos) << to_text(*stale);
  ::unsetenv("FP4FORGE_TEST_MASTER_KEY");
  auto nokey = gateway_check(cfg_, co);
  ASSERT_TRUE(nokey.ok());
  EXPECT_EQ(exit_code(*nokey), 1);
  ASSERT_FALSE(nokey->warnings.empty());
  EXPECT_NE(nokey->warnings[0].find("general_settings.master_key is os.environ/FP4FORGE_TEST_MASTER_KEY"),
            std::string::npos);
  co.alias = "Chat";  // a case variant gets the alias the file has (issue 55 tryout)
  auto cased = gateway_check(cfg_, co);
  ASSERT_FALSE(cased.ok());
  EXPECT_NE(cased.error().message.find("no live route names alias 'Chat' (did you mean 'chat'?)"), std::string::npos)
      << cased.error().message;
  co.alias = "summarizer";  // only the "*" wildcard would answer
  auto wild = gateway_check(cfg_, co);
  ASSERT_FALSE(wild.ok());
  EXPECT_EQ(wild.error().code, Errc::BAD_INPUT);
  EXPECT_NE(wild.error().message.find("no live route names alias 'summarizer' (wildcard route '*' matches it)"),
            std::string::npos) << wild.error().message;
  co.gateway_url = "ftp://gw";
  EXPECT_EQ(gateway_check(cfg_, co).error().code, Errc::USAGE);
}

// Found by fuzz_gateway_config: an entry without litellm_params made show fail ("invalid node") while a retire of
// another entry succeeded; show now reads it and warns. A cyclic anchor (`<<: *d` inside `&d`) is read once.
TEST_F(Gateway, EntryWithoutParamsAndCyclicAnchorsAreRead) {
  write("model_list:\n  - model_name: chat\n    litellm_params:\n      model: hosted_vllm/m\n"
        "      api_base: http://10.0.0.5:8000/v1\n  - model_name: \"embed-*\"\n    routing_strategy: simple-shuffle\n");
  auto s = gateway_show(cfg_);
  ASSERT_TRUE(s.ok()) << s.error().message;
  ASSERT_EQ(s->routes.size(), 2u);
  bool warned = false;
  for (const auto& w : s->warnings) warned |= w.find("entry 'embed-*' has no litellm_params mapping") != std::string::npos;
  EXPECT_TRUE(warned);
  write("defaults: &d\n  api_:\n    <<: *d\n    x: 1\nmodel_list:\n  - model_name: chat\n    litellm_params: *d\n");
  const auto t0 = std::chrono::steady_clock::now();
  (void)gateway_show(cfg_);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 2.0);
}

TEST_F(Gateway, StripProviderPrefix) {
  EXPECT_EQ(strip_provider_prefix("hosted_vllm/Qwen/Qwen3-8B"), "Qwen/Qwen3-8B");
  EXPECT_EQ(strip_provider_prefix("openai/gpt-x"), "gpt-x");
  EXPECT_EQ(strip_provider_prefix("Qwen/Qwen3-8B"), "Qwen/Qwen3-8B");
  EXPECT_EQ(strip_provider_prefix("vllm/Qwen/Qwen3-8B"), "Qwen/Qwen3-8B");
  EXPECT_EQ(strip_provider_prefix("hosted_vllm"), "hosted_vllm");
}

}  // namespace
}  // namespace fp4forge::gateway

namespace fp4forge::gateway {
namespace {
using namespace fp4forge::probe;  // the fake server, checks and probe options the swap gate uses
// Issue 14 #13: a duplicated top-level model_list (LiteLLM uses the last; an edit of the first changes
// nothing) is refused with both lines.
TEST(GatewayYaml, DuplicateKeysAreRefused) {
  const auto dir = std::filesystem::temp_directory_path() / ("fp4forge-dup-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto cfg = dir / "config.yaml";
  std::ofstream(cfg) << "model_list:\n  - model_name: chat\n    litellm_params: {model: openai/a}\n"
                        "model_list:\n  - model_name: chat\n    litellm_params: {model: openai/b}\n";
  auto r = gateway_show(cfg);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::BAD_INPUT);
  EXPECT_NE(r.error().message.find("line 4: duplicate key 'model_list' (first at line 1)"), std::string::npos)
      << r.error().message;
  std::ofstream(cfg) << "model_list:\n  - model_name: chat\n    litellm_params: {model: openai/a, model: openai/b}\n";
  EXPECT_FALSE(gateway_show(cfg).ok());
  std::filesystem::remove_all(dir);
}

// Issue 14 #8: YAML anchors shared between entries make a line edit change (or break) another entry.
// swap and retire refuse with BAD_INPUT naming both lines; an unshared anchor, an '&' in a quoted value
// or a comment is no obstacle; the file is never touched.
TEST(GatewayYaml, SharedAnchorsAreRefusedNotInternalErrors) {
  const auto dir = std::filesystem::temp_directory_path() / ("fp4forge-anchor-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto cfg = dir / "config.yaml";
  const std::string shared =
      "model_list:\n"
      "  - model_name: a\n"
      "    litellm_params: &p\n"
      "      model: hosted_vllm/x\n"
      "      api_base: http://h:8000/v1\n"
      "  - model_name: b\n"
      "    litellm_params: *p\n"
      "  - model_name: c\n"
      "    litellm_params: &own\n"
      "      model: hosted_vllm/z # an &anchor in a comment\n"
      "      api_base: \"http://h:8000/v1?a=1&b=*c\"\n";
  const std::string aliased_entry =
      "model_list:\n  - &e\n    model_name: a\n    litellm_params:\n      model: hosted_vllm/x\n  - *e\n"
      "  - model_name: c\n    litellm_params:\n      model: hosted_vllm/z\n";
  auto swap = [&](const std::string& alias) {
    SwapOptions o;
    o.alias = alias;
    o.backend_model = "hosted_vllm/y";
    o.api_base = "http://h:9000/v1";
    o.probe = false;
    return gateway_swap(cfg, o);
  };
  struct Case {
    const std::string* text;
    std::string what;  // "swap X" or "retire X"
    std::string message;  // "" = the edit is allowed
  };
  const Case cases[] = {
      {&shared, "swap a", "line 3: entry 'a' defines YAML anchor '&p', which line 7 reuses ('*p')"},
      {&shared, "retire a", "line 3: entry 'a' defines YAML anchor '&p', which line 7 reuses ('*p')"},
      {&shared, "swap b", "line 7: entry 'b' takes a value from YAML anchor '&p' defined elsewhere"},
      {&shared, "retire b", "line 7: entry 'b' takes a value from YAML anchor '&p' defined elsewhere"},
      {&shared, "swap c", ""},
      {&shared, "retire c", ""},
      {&aliased_entry, "retire c", "model_list entry 2 ('a') is a YAML alias of the entry at line 2"},
      {&aliased_entry, "swap c", "model_list entry 2 ('a') is a YAML alias of the entry at line 2"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    std::ofstream(cfg, std::ios::trunc) << *c.text;
    const std::string alias = c.what.substr(c.what.find(' ') + 1);
    auto r = c.what.rfind("swap", 0) == 0 ? swap(alias) : gateway_retire(cfg, alias);
    if (c.message.empty()) {
      EXPECT_TRUE(r.ok()) << r.error().message;
      continue;
    }
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, Errc::BAD_INPUT) << r.error().message;
    EXPECT_NE(r.error().message.find(c.message), std::string::npos) << r.error().message;
    EXPECT_EQ(slurp(cfg), *c.text);
    EXPECT_TRUE(list_backups(cfg).empty());
  }
  std::filesystem::remove_all(dir);
}

// Issue 14 #14: eleven swaps in one second give -1 .. -10 suffixes; rollback must take the newest (-10),
// not the string-sorted last (-9).
TEST(GatewayBackups, OrderedByTimestampThenNumericSequence) {
  const auto dir = std::filesystem::temp_directory_path() / ("fp4forge-baks-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto cfg = dir / "config.yaml";
  std::ofstream(cfg) << "model_list: []\n";
  const std::string base = cfg.string() + ".bak-fp4forge-20261201-112233";
  std::ofstream(cfg.string() + ".bak-fp4forge-20261201-112232") << "older\n";
  std::ofstream(base) << "0\n";
  for (int n = 1; n <= 10; ++n) std::ofstream(base + "-" + std::to_string(n)) << n << "\n";
  const auto baks = list_backups(cfg);
  ASSERT_EQ(baks.size(), 12u);
  EXPECT_EQ(baks.front().filename().string(), "config.yaml.bak-fp4forge-20261201-112232");
  EXPECT_EQ(baks[1].filename().string(), "config.yaml.bak-fp4forge-20261201-112233");
  EXPECT_EQ(baks[10].filename().string(), "config.yaml.bak-fp4forge-20261201-112233-9");
  EXPECT_EQ(baks.back().filename().string(), "config.yaml.bak-fp4forge-20261201-112233-10");
  std::filesystem::remove_all(dir);
}
}  // namespace
}  // namespace fp4forge::gateway
