// gateway, issue 51 #4: a swap keeps the promises the alias makes — the key it probed is the key it writes, a
// vision alias stays on a backend that takes images, the alias's litellm_params extras are in the probe's
// body, --deployment takes model_info.id — gateway add creates an alias with the same gate, and gateway check
// tells which backend answered from LiteLLM's response headers.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fp4forge/gateway/gateway.h"
#include "fp4forge/gateway/report.h"
#include "probe_fake_server.h"

namespace fp4forge::gateway {
namespace {

namespace stdfs = std::filesystem;
using probe::Check;
using probe::CheckStatus;
using probe::VisionMode;
using testing::FakeServer;
using testing::FakeServerOptions;
using testing::Fault;

constexpr const char* kModel = "fake-org/fake-model-nvfp4";

std::string slurp(const stdfs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

/** An environment variable set for one test. */
struct Env {
  std::string name;
  Env(std::string n, const std::string& v) : name(std::move(n)) { ::setenv(name.c_str(), v.c_str(), 1); }
  ~Env() { ::unsetenv(name.c_str()); }
};

class Promises : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = stdfs::temp_directory_path() / ("fp4forge-gwp-" + std::to_string(::getpid()) + "-" +
                                           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    stdfs::remove_all(dir_);
    stdfs::create_directories(dir_);
    cfg_ = dir_ / "config.yaml";
  }
  void TearDown() override { stdfs::remove_all(dir_); }
  void write(const std::string& s) { std::ofstream(cfg_, std::ios::binary | std::ios::trunc) << s; }
  /** One alias 'chat' on `old_base` with the given extra litellm_params / model_info lines. */
  void one_alias(const std::string& old_base, const std::string& params = "", const std::string& info = "") {
    write("model_list:\n  - model_name: chat\n    litellm_params:\n      model: hosted_vllm/" + std::string(kModel) +
          "\n      api_base: " + old_base + "/v1\n" + params + (info.empty() ? "" : "    model_info:\n" + info) +
          "general_settings:\n  master_key: os.environ/FP4FORGE_T_MASTER\n");
  }
  template <class O>
  O seat(const FakeServer& srv) {
    O o;
    o.alias = "chat";
    o.backend_model = std::string("hosted_vllm/") + kModel;
    o.api_base = srv.url() + "/v1";
    o.probe_options.timeout_s = 5;
    o.probe_options.connect_timeout_s = 2;
    return o;
  }
  static std::string dead_base() { return "http://127.0.0.1:" + std::to_string(FakeServer::free_port()); }
  static bool any_of(const std::vector<std::string>& v, const std::string& needle) {
    return std::any_of(v.begin(), v.end(), [&](const std::string& s) { return s.find(needle) != std::string::npos; });
  }
  stdfs::path dir_, cfg_;
};

// --api-key-env NAME: the probe sends NAME's key and the swap writes api_key: os.environ/NAME. Before, the probe
// passed with the new key while the file kept the old reference, and every request after the reload got 401.
// Tryout P-H1: --probe-model proved 'chat' while the file then sent 'chat2' (ok, every request a 404). A probe name
// other than the one LiteLLM sends is refused before any request; the same name is accepted.
TEST_F(Promises, TheProbeProvesTheNameLiteLLMSends) {
  one_alias(dead_base());
  const std::string before = slurp(cfg_);
  FakeServer srv(FakeServerOptions{});
  for (const bool add : {false, true}) {
    Result<EditResult> r = make_error(Errc::INTERNAL, "unset");
    if (add) {
      auto o = seat<AddOptions>(srv);
      o.alias = "other";
      o.backend_model = std::string("hosted_vllm/") + kModel + "-typo";
      o.probe_model = kModel;
      r = gateway_add(cfg_, o);
    } else {
      auto o = seat<SwapOptions>(srv);
      o.backend_model = std::string("hosted_vllm/") + kModel + "-typo";
      o.probe_model = kModel;
      r = gateway_swap(cfg_, o);
    }
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, Errc::USAGE);
    EXPECT_NE(r.error().message.find("is not the name LiteLLM will send"), std::string::npos) << r.error().message;
    EXPECT_EQ(slurp(cfg_), before);
  }
  EXPECT_TRUE(srv.requests().empty());
  auto same = seat<SwapOptions>(srv);
  same.probe_model = kModel;
  auto ok = gateway_swap(cfg_, same);
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_TRUE(ok->changed) << ok->refused;
}

TEST_F(Promises, SwapWritesTheKeyItProbedWith) {
  one_alias(dead_base(), "      api_key: os.environ/FP4FORGE_T_OLD\n");
  const std::string before = slurp(cfg_);
  Env old_key("FP4FORGE_T_OLD", "sk-old-1");
  Env new_key("FP4FORGE_T_NEW", "sk-new-SECRET-2");
  FakeServerOptions so;
  so.expect_api_key = "sk-new-SECRET-2";
  FakeServer srv(so);
  auto o = seat<SwapOptions>(srv);
  auto stale = gateway_swap(cfg_, o);  // the alias's own key: refused by the new seat, and said so
  ASSERT_TRUE(stale.ok()) << stale.error().message;
  EXPECT_NE(stale->refused.find("models: unauthorized"), std::string::npos) << stale->refused;
  EXPECT_EQ(slurp(cfg_), before);
  o.api_key_env = "FP4FORGE_T_NEW";
  const std::size_t sent_before = srv.auth_headers().size();
  auto r = gateway_swap(cfg_, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_TRUE(r->changed) << r->refused;
  const std::string now = slurp(cfg_);
  EXPECT_NE(now.find("      api_key: os.environ/FP4FORGE_T_NEW\n"), std::string::npos) << now;
  EXPECT_EQ(now.find("sk-new"), std::string::npos);  // the secret itself is never written
  EXPECT_NE(r->diff.find("+      api_key: os.environ/FP4FORGE_T_NEW"), std::string::npos) << r->diff;
  const auto auth = srv.auth_headers();
  ASSERT_GT(auth.size(), sent_before);
  for (std::size_t i = sent_before; i < auth.size(); ++i) EXPECT_EQ(auth[i], "Bearer sk-new-SECRET-2") << i;
  EXPECT_EQ(to_json(*r).dump().find("sk-new-SECRET"), std::string::npos);
}

// A literal key kept for a backend on another host is said (the old backend's secret goes to the new one), unless
// --keep-api-key says it is meant; --keep-api-key alone is no usage error (issue 55 tryout F).
TEST_F(Promises, ALiteralKeyKeptForAnotherHostIsSaid) {
  one_alias("http://10.0.0.5:8000", "      api_key: sk-live-HARDCODED-9999\n");
  FakeServer srv(FakeServerOptions{});
  auto o = seat<SwapOptions>(srv);
  o.probe_options.vision = VisionMode::TEXT_ONLY;
  o.dry_run = true;
  const std::size_t sent_before = srv.auth_headers().size();
  auto r = gateway_swap(cfg_, o);
  // Refused before anything is sent (issue 55 tryout H: the probe had sent the key when the warning came).
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::USAGE);
  EXPECT_NE(r.error().message.find("the deployment's literal api_key (***) was 10.0.0.5:8000's key; kept, LiteLLM "
                                   "would send it to 127.0.0.1:"),
            std::string::npos)
      << r.error().message;
  EXPECT_EQ(r.error().message.find("HARDCODED"), std::string::npos);
  EXPECT_EQ(srv.auth_headers().size(), sent_before);
  o.keep_api_key = true;
  r = gateway_swap(cfg_, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(any_of(r->warnings, "literal api_key"));
}

TEST_F(Promises, KeepApiKeyWarnsAndContradictionsAreRefused) {
  one_alias(dead_base(), "      api_key: os.environ/FP4FORGE_T_OLD\n");
  Env new_key("FP4FORGE_T_NEW", "sk-new");
  FakeServer srv(FakeServerOptions{});
  auto o = seat<SwapOptions>(srv);
  o.api_key_env = "FP4FORGE_T_NEW";
  o.keep_api_key = true;
  o.probe_options.vision = VisionMode::TEXT_ONLY;
  auto r = gateway_swap(cfg_, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_NE(slurp(cfg_).find("api_key: os.environ/FP4FORGE_T_OLD"), std::string::npos);
  EXPECT_TRUE(any_of(r->warnings, "LiteLLM will send the deployment's api_key (os.environ/FP4FORGE_T_OLD)"));
  // The old backend is down: with --text-only given, no advice to pass it (issue 55 tryout).
  EXPECT_TRUE(any_of(r->warnings, "--text-only moves it to a text-only seat as asked"));
  EXPECT_FALSE(any_of(r->warnings, "pass --multimodal or --text-only to decide"));
  o.keep_api_key = false;
  o.params = {{"api_key", "sk-literal"}};
  auto both = gateway_swap(cfg_, o);
  ASSERT_FALSE(both.ok());
  EXPECT_EQ(both.error().code, Errc::USAGE);
  o.params.clear();
  o.api_key_env = "FP4FORGE_T_SURELY_UNSET";
  auto unset = gateway_swap(cfg_, o);
  ASSERT_FALSE(unset.ok());
  EXPECT_EQ(unset.error().code, Errc::USAGE);
  EXPECT_NE(unset.error().message.find("FP4FORGE_T_SURELY_UNSET: the variable is not set"), std::string::npos);
}

// A vision alias (model_info.supports_vision, or a backend that answers images today) stays on one that does.
TEST_F(Promises, AVisionAliasNeedsTheVisionCheck) {
  FakeServerOptions text_only;
  text_only.fault = Fault::TEXT_ONLY;
  FakeServer seat_text(text_only);
  one_alias(dead_base(), "", "      supports_vision: true\n");
  const std::string before = slurp(cfg_);
  auto o = seat<SwapOptions>(seat_text);
  auto r = gateway_swap(cfg_, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->changed);
  EXPECT_NE(r->refused.find("vision: image-rejected"), std::string::npos) << r->refused;
  EXPECT_TRUE(any_of(r->warnings, "takes images (model_info.supports_vision of its deployment at line 2)"));
  EXPECT_EQ(slurp(cfg_), before);
  o.checks = {Check::MODELS, Check::PROSE, Check::LOGPROBS};
  auto no_vision = gateway_swap(cfg_, o);
  ASSERT_FALSE(no_vision.ok());
  EXPECT_EQ(no_vision.error().code, Errc::USAGE);
  EXPECT_NE(no_vision.error().message.find("--checks leaves out vision"), std::string::npos);
  o.checks.clear();
  o.probe_options.vision = VisionMode::TEXT_ONLY;  // the operator's decision, with a warning
  auto forced = gateway_swap(cfg_, o);
  ASSERT_TRUE(forced.ok()) << forced.error().message;
  EXPECT_TRUE(forced->changed) << forced->refused;
  EXPECT_TRUE(any_of(forced->warnings, "but --text-only: the vision check is skipped"));
  // The config still advertises images: said, not silently kept (issue 55 tryout).
  EXPECT_TRUE(any_of(forced->warnings, "model_info.supports_vision is left as it is"));
}

// Tryout N-M1: an alias with several deployments takes images when any of them answers one, whatever the order of
// the file's entries: a text-only replica is refused either way.
TEST_F(Promises, EveryDeploymentOfAnAliasIsAskedWhetherItTakesImages) {
  FakeServerOptions text_only;
  text_only.fault = Fault::TEXT_ONLY;
  FakeServer text_seat(text_only), vision_seat(FakeServerOptions{}), new_seat(text_only);
  auto entry = [](const FakeServer& srv) {
    return "  - model_name: chat\n    litellm_params:\n      model: hosted_vllm/" + std::string(kModel) +
           "\n      api_base: " + srv.url() + "/v1\n";
  };
  for (const bool vision_first : {false, true}) {
    SCOPED_TRACE(vision_first ? "vision deployment first" : "text-only deployment first");
    write("model_list:\n" +
          (vision_first ? entry(vision_seat) + entry(text_seat) : entry(text_seat) + entry(vision_seat)) +
          "general_settings:\n  master_key: os.environ/FP4FORGE_T_MASTER\n");
    const std::string before = slurp(cfg_);
    auto o = seat<AddOptions>(new_seat);
    o.replica = true;
    auto r = gateway_add(cfg_, o);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_FALSE(r->changed);
    EXPECT_NE(r->refused.find("vision: image-rejected"), std::string::npos) << r->refused;
    EXPECT_TRUE(any_of(r->warnings, "its backend " + vision_seat.url() + "/v1 answered an image"));
    EXPECT_EQ(slurp(cfg_), before);
  }
}

TEST_F(Promises, AnAliasWhoseBackendAnswersImagesIsAVisionAlias) {
  FakeServer old_seat(FakeServerOptions{});  // answers the image
  FakeServerOptions text_only;
  text_only.fault = Fault::TEXT_ONLY;
  FakeServer new_seat(text_only);
  one_alias(old_seat.url());
  auto r = gateway_swap(cfg_, seat<SwapOptions>(new_seat));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_NE(r->refused.find("vision: image-rejected"), std::string::npos) << r->refused;
  EXPECT_TRUE(any_of(r->warnings, "its current backend " + old_seat.url() + "/v1 answered an image"));
  // A gate that leaves vision out still asks the current backend: refused, not a silent move (tryout M-M1).
  {
    const std::string before = slurp(cfg_);
    auto narrow = seat<SwapOptions>(new_seat);
    narrow.checks = {Check::PROSE, Check::LOGPROBS};
    auto n = gateway_swap(cfg_, narrow);
    ASSERT_FALSE(n.ok());
    EXPECT_EQ(n.error().code, Errc::USAGE);
    EXPECT_NE(n.error().message.find("answered an image"), std::string::npos) << n.error().message;
    EXPECT_NE(n.error().message.find("--checks leaves out vision"), std::string::npos) << n.error().message;
    EXPECT_EQ(slurp(cfg_), before);
  }
  // --text-only moves it, and says that its backend answers images today (issue 55 tryout: silent).
  auto o = seat<SwapOptions>(new_seat);
  o.probe_options.vision = VisionMode::TEXT_ONLY;
  auto moved = gateway_swap(cfg_, o);
  ASSERT_TRUE(moved.ok()) << moved.error().message;
  EXPECT_TRUE(moved->changed) << moved->refused;
  EXPECT_TRUE(any_of(moved->warnings, "answered an image ('"));
  EXPECT_TRUE(any_of(moved->warnings, "but --text-only: the vision check is skipped"));
  // A text-only alias moves to a text-only seat: its vision check is a skip.
  FakeServer old_text(text_only);
  one_alias(old_text.url());
  auto ok = gateway_swap(cfg_, seat<SwapOptions>(new_seat));
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_TRUE(ok->changed) << ok->refused;
}

TEST_F(Promises, DeploymentByModelInfoIdAndTheAliasExtrasInTheBody) {
  write("model_list:\n"
        "  - model_name: chat\n    litellm_params:\n      model: hosted_vllm/x\n      api_base: " + dead_base() +
        "/v1\n    model_info:\n      id: chat-gpu7\n"
        "  - model_name: chat\n    litellm_params:\n      model: hosted_vllm/x\n      api_base: " + dead_base() + "/v1\n"
        "      extra_body: {chat_template_kwargs: {enable_thinking: false}}\n      top_k: 20\n      rpm: 100\n"
        "      timeout: 600\n      input_cost_per_token: 0.1\n      stream_timeout: 60\n      n: 3\n"
        "    model_info:\n      id: chat-gpu8\n");
  FakeServer srv(FakeServerOptions{});
  auto o = seat<SwapOptions>(srv);
  o.deployment = "chat-gpu8";
  o.probe_options.vision = VisionMode::TEXT_ONLY;
  o.params = {{"temperature", "0.3"}};
  auto r = gateway_swap(cfg_, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_TRUE(r->changed) << r->refused;
  const std::string now = slurp(cfg_);
  EXPECT_NE(now.find("      id: chat-gpu7\n"), std::string::npos);
  EXPECT_LT(now.find(srv.url()), now.find("id: chat-gpu8")) << now;  // the second deployment moved
  // Its id stays, said (issue 55 tryout F: it named the old backend, silently).
  EXPECT_TRUE(
      any_of(r->warnings, "model_info.id 'chat-gpu8' stays on the deployment, which now routes to " + srv.url()));
  ASSERT_TRUE(r->probe.has_value());
  EXPECT_EQ(r->probe->request_extras, (std::vector<std::string>{"top_k", "chat_template_kwargs"}));
  EXPECT_EQ(r->probe->request_not_sent, (std::vector<std::string>{"temperature"}));
  EXPECT_TRUE(any_of(r->warnings, "NOT PROVEN: the alias's temperature (litellm_params) is not sent by the probe"));
  int posts = 0;
  for (const std::string& b : srv.bodies()) {
    if (b.empty()) continue;
    const auto j = nlohmann::json::parse(b);
    ++posts;
    EXPECT_EQ(j["chat_template_kwargs"]["enable_thinking"], false) << b.substr(0, 200);
    EXPECT_EQ(j["top_k"], 20);
    for (const char* consumed : {"rpm", "timeout", "input_cost_per_token", "stream_timeout", "api_base", "extra_body", "n"})
      EXPECT_FALSE(j.contains(consumed)) << consumed;
  }
  EXPECT_GT(posts, 5);
}

TEST_F(Promises, AddCreatesAnAliasAfterTheProbe) {
  const std::string original =
      "# gateway\nmodel_list:\n  - model_name: chat   # main\n    litellm_params:\n      model: hosted_vllm/old\n"
      "      api_base: http://10.1.1.1:8000/v1\n\n  - model_name: \"char-*\"\n    litellm_params:\n"
      "      model: \"openai/*\"\n\ngeneral_settings:\n  master_key: os.environ/FP4FORGE_T_MASTER\n";
  write(original);
  Env key("FP4FORGE_T_NEW", "sk-add");
  FakeServerOptions so;
  so.expect_api_key = "sk-add";
  FakeServer srv(so);
  auto o = seat<AddOptions>(srv);
  o.alias = "char-rp-fast";
  o.api_key_env = "FP4FORGE_T_NEW";
  o.params = {{"extra_body", "{chat_template_kwargs: {enable_thinking: false}}"}};
  o.model_info = {{"id", "char-rp-fast-gpu9"}};
  auto r = gateway_add(cfg_, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_TRUE(r->changed) << r->refused;
  EXPECT_EQ(r->command, "add");
  const std::string entry = "  - model_name: char-rp-fast\n    litellm_params:\n      model: hosted_vllm/" +
                            std::string(kModel) + "\n      api_base: " + srv.url() +
                            "/v1\n      api_key: os.environ/FP4FORGE_T_NEW\n      extra_body: {chat_template_kwargs: "
                            "{enable_thinking: false}}\n    model_info:\n      id: char-rp-fast-gpu9\n";
  std::string expect = original;
  expect.insert(expect.find("\ngeneral_settings:"), entry);
  EXPECT_EQ(slurp(cfg_), expect);
  EXPECT_EQ(slurp(r->backup), original);
  EXPECT_TRUE(any_of(r->warnings, "until now wildcard route 'char-*' (line 8, model 'openai/*') answered 'char-rp-fast'"));
  auto s = gateway_show(cfg_, srv.url());
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->backend_aliases, std::vector<std::string>{"char-rp-fast"});
  ASSERT_TRUE(gateway_rollback(cfg_).ok());
  EXPECT_EQ(slurp(cfg_), original);
}

TEST_F(Promises, AddRefusesAnExistingAliasUnlessReplica) {
  write("model_list:\n-   model_name: chat\n    litellm_params:\n        model: hosted_vllm/old\n"
        "        api_base: http://10.1.1.1:8000/v1\n    model_info:\n        id: chat-a\n"
        "-   model_name: other\n    litellm_params:\n        model: hosted_vllm/other\n");
  const std::string original = slurp(cfg_);
  FakeServer srv(FakeServerOptions{});
  auto o = seat<AddOptions>(srv);
  o.probe_options.vision = VisionMode::TEXT_ONLY;
  auto exists = gateway_add(cfg_, o);
  ASSERT_FALSE(exists.ok());
  EXPECT_EQ(exists.error().code, Errc::USAGE);
  EXPECT_NE(exists.error().message.find("alias 'chat' exists with 1 deployment(s): 1) hosted_vllm/old @ "
                                        "http://10.1.1.1:8000/v1 (line 2, id chat-a); pass --replica"),
            std::string::npos) << exists.error().message;
  o.replica = true;
  o.model_info = {{"id", "chat-a"}};
  EXPECT_EQ(gateway_add(cfg_, o).error().code, Errc::USAGE);  // the id names a deployment already
  o.model_info = {{"id", "chat-b"}};
  auto r = gateway_add(cfg_, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_TRUE(r->changed) << r->refused;
  const std::string now = slurp(cfg_);
  // After the alias's deployment, in the file's own indentation ("-   " and 4-space steps).
  const std::string added = "-   model_name: chat\n    litellm_params:\n        model: hosted_vllm/" + std::string(kModel) +
                            "\n        api_base: " + srv.url() + "/v1\n    model_info:\n        id: chat-b\n";
  EXPECT_EQ(now, original.substr(0, original.find("-   model_name: other")) + added +
                     original.substr(original.find("-   model_name: other")));
  auto s = gateway_show(cfg_);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(any_of(s->warnings, "alias 'chat' has 2 deployments"));
  EXPECT_FALSE(any_of(r->warnings, "this replica is the same server"));
  // A replica of the very server it routes to already is said (tryout S-L2: written silently).
  o.model_info = {{"id", "chat-c"}};
  o.dry_run = true;
  auto twice = gateway_add(cfg_, o);
  ASSERT_TRUE(twice.ok()) << twice.error().message;
  EXPECT_TRUE(any_of(twice->warnings, "this replica is the same server, which LiteLLM then counts twice"))
      << ::testing::PrintToString(twice->warnings);
  o.dry_run = false;
  o.alias = "nope";
  EXPECT_EQ(gateway_add(cfg_, o).error().code, Errc::USAGE);  // --replica of nothing
  // A new alias only the case tells from an existing one is said (issue 55 tryout: added without a word).
  o.alias = "Chat";
  o.replica = false;
  o.model_info = {{"id", "chat-c"}};
  o.dry_run = true;
  auto cased = gateway_add(cfg_, o);
  ASSERT_TRUE(cased.ok()) << cased.error().message;
  EXPECT_TRUE(any_of(cased->warnings, "alias 'Chat' is new, but 'chat' (line 2) differs from it only in case"));
}

TEST_F(Promises, AddToAnEmptyModelListAndARefusedProbe) {
  write("model_list:\n# nothing yet\ngeneral_settings: {}\n");
  FakeServerOptions bad;
  bad.fault = Fault::CONTENT_NULL_LENGTH;
  FakeServer broken(bad);
  auto o = seat<AddOptions>(broken);
  o.alias = "fresh";
  o.probe_options.vision = VisionMode::MULTIMODAL;
  auto refused = gateway_add(cfg_, o);
  ASSERT_TRUE(refused.ok()) << refused.error().message;
  EXPECT_FALSE(refused->changed);
  EXPECT_NE(refused->refused.find("prose: content-null-length"), std::string::npos);
  EXPECT_TRUE(list_backups(cfg_).empty());
  FakeServer good(FakeServerOptions{});
  o.api_base = good.url() + "/v1";
  auto r = gateway_add(cfg_, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_TRUE(r->changed) << r->refused;
  EXPECT_EQ(slurp(cfg_), "model_list:\n  - model_name: fresh\n    litellm_params:\n      model: hosted_vllm/" +
                             std::string(kModel) + "\n      api_base: " + good.url() +
                             "/v1\n    model_info:\n      supports_vision: true\n# nothing yet\ngeneral_settings: {}\n");
  EXPECT_EQ(find_if(r->probe->checks.begin(), r->probe->checks.end(),
                    [](const probe::CheckResult& c) { return c.check == Check::VISION; })->status,
            CheckStatus::PASS);
}

// gateway check reads LiteLLM's x-litellm-* headers: the alias must answer from a backend the file names.
TEST_F(Promises, CheckTellsWhichBackendAnswered) {
  Env master("FP4FORGE_T_MASTER", "sk-master");
  FakeServer old_seat(FakeServerOptions{});
  FakeServer new_seat(FakeServerOptions{});
  one_alias(old_seat.url(), "", "      id: chat-gpu7\n");  // the swap keeps the id
  auto swapped = gateway_swap(cfg_, seat<SwapOptions>(new_seat));
  ASSERT_TRUE(swapped.ok() && swapped->changed) << (swapped.ok() ? swapped->refused : swapped.error().message);
  auto gateway = [&](const std::string& answers_from, const std::string& id = "") {
    FakeServerOptions g;
    g.model = "chat";
    g.expect_api_key = "sk-master";
    g.litellm_api_base = answers_from;
    g.litellm_model_id = id;
    g.litellm_model_group = answers_from.empty() ? "" : "chat";
    return g;
  };
  CheckOptions co;
  co.alias = "chat";
  co.checks = {Check::MODELS, Check::PROSE, Check::LOGPROBS};
  co.probe_options.timeout_s = 5;
  {  // the proxy reloaded: it answers from the new seat (its api_base with /v1/chat/completions is the same server)
    FakeServer gw(gateway(new_seat.url() + "/v1/chat/completions"));
    co.gateway_url = gw.url();
    auto r = gateway_check(cfg_, co);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_TRUE(r->ok()) << to_text(*r);
    EXPECT_EQ(exit_code(*r), 0);
    ASSERT_EQ(r->served.size(), 1u);
    EXPECT_EQ(r->served[0].deployment.rfind("1) hosted_vllm/", 0), 0u) << r->served[0].deployment;
    EXPECT_EQ(to_json(*r)["served"][0]["checks"].size(), 2u);  // prose, logprobs (models: no headers)
  }
  {  // not reloaded: the old backend, which the backup named
    FakeServer gw(gateway(old_seat.url() + "/v1"));
    co.gateway_url = gw.url();
    auto r = gateway_check(cfg_, co);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_FALSE(r->probe.any_failed());
    EXPECT_EQ(exit_code(*r), 1);
    EXPECT_NE(r->stale.find("alias 'chat' still answers from " + old_seat.url() + "/v1"), std::string::npos) << r->stale;
    EXPECT_NE(r->stale.find("(the backup " + swapped->backup + " routed it there: the old backend)"), std::string::npos)
        << r->stale;
    EXPECT_FALSE(to_json(*r)["ok"].get<bool>());
    EXPECT_NE(to_text(*r).find("FAILED although every check passed: alias 'chat' still answers"), std::string::npos);
    // One verdict: the probe's tally carries no "ok:" before the check's FAILED (issue 55 tryout E-10).
    EXPECT_EQ(to_text(*r).find("ok: "), std::string::npos) << to_text(*r);
    EXPECT_NE(to_text(*r).find("\nchecks: "), std::string::npos) << to_text(*r);
  }
  {  // not reloaded, and the id the swap kept: the api_base decides (issue 55 tryout: the id matched, check passed)
    FakeServer gw(gateway(old_seat.url() + "/v1", "chat-gpu7"));
    co.gateway_url = gw.url();
    auto r = gateway_check(cfg_, co);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(exit_code(*r), 1) << to_text(*r);
    EXPECT_NE(r->stale.find("alias 'chat' still answers from " + old_seat.url() + "/v1"), std::string::npos)
        << r->stale;
    EXPECT_NE(r->stale.find("its x-litellm-model-id 'chat-gpu7' is the live deployment's, which now routes to " +
                            new_seat.url()),
              std::string::npos)
        << r->stale;
  }
  {  // no headers: cannot tell, and says so
    FakeServer gw(gateway(""));
    co.gateway_url = gw.url();
    auto r = gateway_check(cfg_, co);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_TRUE(r->ok());
    EXPECT_TRUE(any_of(r->warnings, "sent no x-litellm-model-api-base / x-litellm-model-id headers"));
  }
}

// A load-balanced alias whose checks all landed on one replica: the other is said not proven (issue 55 tryout: the
// swapped replica answered nothing and the check passed on the untouched one).
TEST_F(Promises, AReplicaThatAnsweredNoCheckIsSaidNotProven) {
  Env master("FP4FORGE_T_MASTER", "sk-master");
  FakeServer one(FakeServerOptions{}), two(FakeServerOptions{});
  write("model_list:\n  - model_name: chat\n    litellm_params:\n      model: hosted_vllm/x\n      api_base: " +
        one.url() + "/v1\n  - model_name: chat\n    litellm_params:\n      model: hosted_vllm/x\n      api_base: " +
        two.url() + "/v1\ngeneral_settings:\n  master_key: os.environ/FP4FORGE_T_MASTER\n");
  FakeServerOptions g;
  g.model = "chat";
  g.expect_api_key = "sk-master";
  g.litellm_api_base = one.url() + "/v1";
  g.litellm_model_group = "chat";
  FakeServer gw(g);
  CheckOptions co;
  co.alias = "chat";
  co.checks = {Check::PROSE, Check::LOGPROBS};
  co.probe_options.timeout_s = 5;
  co.gateway_url = gw.url();
  auto r = gateway_check(cfg_, co);
  ASSERT_TRUE(r.ok()) << r.error().message;
  // Half the traffic unproven is no pass: exit 1, the verdict on stdout, ok false (issue 55 tryout G: "ok", exit 0).
  EXPECT_EQ(exit_code(*r), 1) << to_text(*r);
  EXPECT_FALSE(to_json(*r)["ok"].get<bool>());
  EXPECT_NE(r->not_proven.find("deployment(s) 2) hosted_vllm/x @ " + two.url() + "/v1"), std::string::npos)
      << r->not_proven;
  EXPECT_NE(r->not_proven.find("of alias 'chat' answered no check (LiteLLM spreads the alias over its 2 deployments)"),
            std::string::npos)
      << r->not_proven;
  const std::string text = to_text(*r);
  EXPECT_NE(text.find("\nNOT PROVEN: deployment(s) 2) "), std::string::npos) << text;
  EXPECT_EQ(text.find("ok: "), std::string::npos) << text;
}

// A refused key proves nothing about routing: no "stale proxy" verdict from a 401's headers (issue 55 tryout H).
TEST_F(Promises, ARefusedKeyIsNoRoutingEvidence) {
  Env master("FP4FORGE_T_MASTER", "sk-wrong");
  FakeServer seat(FakeServerOptions{});
  one_alias(seat.url());
  FakeServerOptions g;
  g.model = "chat";
  g.expect_api_key = "sk-master";
  g.litellm_api_base = "http://10.0.0.9:8000/v1";  // no deployment of the alias names it
  g.litellm_model_group = "chat";
  FakeServer gw(g);
  CheckOptions co;
  co.alias = "chat";
  co.checks = {Check::PROSE};
  co.probe_options.timeout_s = 5;
  co.gateway_url = gw.url();
  auto r = gateway_check(cfg_, co);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->probe.any_failed());
  EXPECT_EQ(r->probe.checks[0].classification, "unauthorized") << r->probe.checks[0].detail;
  EXPECT_TRUE(r->stale.empty()) << r->stale;
  EXPECT_EQ(to_text(*r).find("restart it"), std::string::npos) << to_text(*r);
}

// An alias the file routes but the proxy does not serve: the proxy has not loaded the file, said so (issue 55
// tryout: "check --model (vLLM: --served-model-name)" for a command without --model, in front of a proxy).
TEST_F(Promises, AnAliasTheProxyDoesNotServeIsSaidNotLoaded) {
  Env master("FP4FORGE_T_MASTER", "sk-master");
  FakeServer seat(FakeServerOptions{});
  one_alias(seat.url());
  FakeServerOptions g;
  g.model = "another-alias";
  g.expect_api_key = "sk-master";
  // Its 404s carry the headers of the group it does serve: a refusal is no routing evidence (issue 55 tryout J:
  // "alias 'chat' still answers from" that backend, "a fallback?").
  g.litellm_api_base = "http://10.0.0.9:8000/v1";
  g.litellm_model_group = "another-alias";
  FakeServer gw(g);
  CheckOptions co;
  co.alias = "chat";
  co.checks = {Check::MODELS, Check::PROSE};
  co.probe_options.timeout_s = 5;
  co.gateway_url = gw.url();
  auto r = gateway_check(cfg_, co);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(exit_code(*r), 1);
  for (const auto& c : r->probe.checks) {
    EXPECT_NE(c.detail.find(cfg_.string() + " routes alias 'chat' (line 2), so the proxy has not loaded the edited "
                                            "file (restart it)"),
              std::string::npos)
        << c.detail;
    EXPECT_EQ(c.detail.find("--served-model-name"), std::string::npos) << c.detail;
  }
  EXPECT_TRUE(r->stale.empty()) << r->stale;
  EXPECT_TRUE(r->served.empty());
  const std::string text = to_text(*r);
  EXPECT_EQ(text.find("still answers"), std::string::npos) << text;
  EXPECT_EQ(text.find("a fallback?"), std::string::npos) << text;
}

TEST_F(Promises, CheckMatchesModelInfoIdsAndWarnsAboutTheDatabase) {
  Env master("FP4FORGE_T_MASTER", "sk-master");
  write("model_list:\n  - model_name: chat\n    litellm_params:\n      model: hosted_vllm/x\n"
        "      api_base: http://10.9.9.9:8000/v1\n    model_info:\n      id: chat-gpu9\n      supports_vision: true\n"
        "general_settings:\n  master_key: os.environ/FP4FORGE_T_MASTER\n  store_model_in_db: true\n");
  CheckOptions co;
  co.alias = "chat";
  co.checks = {Check::PROSE, Check::VISION};
  co.probe_options.timeout_s = 5;
  FakeServerOptions g;
  g.model = "chat";
  g.litellm_model_id = "chat-gpu9";
  {
    FakeServer gw(g);
    co.gateway_url = gw.url();
    auto r = gateway_check(cfg_, co);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_TRUE(r->ok()) << to_text(*r);
    EXPECT_TRUE(any_of(r->warnings, "keeps models in its database (general_settings.store_model_in_db is true)"));
    EXPECT_TRUE(any_of(r->warnings, "takes images (model_info.supports_vision at line 2)"));
  }
  g.litellm_model_id = "some-db-model";
  g.fault = Fault::TEXT_ONLY;
  FakeServer gw(g);
  co.gateway_url = gw.url();
  auto r = gateway_check(cfg_, co);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_NE(r->stale.find("still answers from model id some-db-model (x-litellm-model-id"), std::string::npos)
      << r->stale;
  EXPECT_EQ(r->probe.checks[1].classification, "image-rejected");  // a vision alias: a refusal fails
}

}  // namespace
}  // namespace fp4forge::gateway
