// gateway and probe through the CLI, issue 51 #4 and #5: swap --api-key-env writes its key, gateway add creates
// an alias (exit 2 for an existing one), gateway check exits 1 when the alias answers from a backend the file does
// not name, probe exits 1 on a 401 with the other checks not sent, and probe --checks context,kv compares the
// served pool with the one `plan --json` computed for the seat. A vision alias's swap to a text-only seat is
// refused unless --text-only; --deployment takes a model_info.id and the probe sends that deployment's extras;
// STORE_MODEL_IN_DB warns; a 403 stops the probe; a stream past max_tokens fails 'long'; the text report is
// escaped.
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "probe_fake_server.h"
#include "test_util.h"

namespace {

namespace stdfs = std::filesystem;
using fp4forge::testing::FakeServer;
using fp4forge::testing::FakeServerOptions;
using fp4forge::testing::Fault;
using fp4forge::testutil::TempDir;

const std::string kModel = "fake-org/fake-model-nvfp4";

struct CliRun {
  int rc = -1;
  std::string out, err;
};

// The CLI with `args` (shell words) under the environment assignments `env`.
CliRun cli(const std::string& args, const std::string& env = "") {
  CliRun r;
  r.rc = fp4forge::testutil::run_cli_with(env, args, &r.out, &r.err);
  return r;
}

using fp4forge::testutil::slurp;

TEST(GatewayPromisesCli, SwapWritesItsKeyAddCreatesCheckSeesTheOldBackend) {
  TempDir dir;
  const stdfs::path cfg = dir.path / "litellm.yaml";
  FakeServer old_seat(FakeServerOptions{});
  std::ofstream(cfg, std::ios::binary)
      << "model_list:\n  - model_name: chat\n    litellm_params:\n      model: hosted_vllm/old\n      api_base: "
      << old_seat.url() << "/v1\n      api_key: os.environ/FP4FORGE_E2E_OLD\n"
      << "general_settings:\n  master_key: os.environ/FP4FORGE_E2E_MASTER\n";
  const std::string env = "FP4FORGE_E2E_OLD=sk-old FP4FORGE_E2E_NEW=sk-new-e2e FP4FORGE_E2E_MASTER=sk-master";
  FakeServerOptions so;
  so.expect_api_key = "sk-new-e2e";
  FakeServer seat(so);
  const std::string swap = "gateway swap --config '" + cfg.string() + "' --alias chat --backend-model hosted_vllm/" +
                           kModel + " --api-base " + seat.url() + "/v1 --timeout 5 --checks models,prose,logprobs";
  CliRun r = cli(swap + " --api-key-env FP4FORGE_E2E_NEW --json", env);
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(slurp(cfg).find("api_key: os.environ/FP4FORGE_E2E_NEW"), std::string::npos) << slurp(cfg);
  EXPECT_EQ((r.out + r.err + slurp(cfg)).find("sk-new-e2e"), std::string::npos);

  const std::string add = "gateway add --config '" + cfg.string() + "' --backend-model hosted_vllm/" + kModel +
                          " --api-base " + seat.url() + "/v1 --timeout 5 --checks models,prose,logprobs "
                          "--api-key-env FP4FORGE_E2E_NEW";
  CliRun exists = cli(add + " --alias chat", env);
  EXPECT_EQ(exists.rc, 2) << exists.out << exists.err;
  EXPECT_NE(exists.err.find("alias 'chat' exists with 1 deployment(s)"), std::string::npos) << exists.err;
  CliRun added = cli(add + " --alias char-rp-fast --model-info id=char-rp-fast-1 --json", env);
  ASSERT_EQ(added.rc, 0) << added.out << added.err;
  const auto aj = nlohmann::json::parse(added.out);
  EXPECT_EQ(aj["schema"], "fp4forge.gateway/1");
  EXPECT_EQ(aj["command"], "add");
  EXPECT_TRUE(aj["changed"].get<bool>());
  EXPECT_NE(slurp(cfg).find("  - model_name: char-rp-fast\n"), std::string::npos) << slurp(cfg);

  // The proxy was not restarted: it still answers 'chat' from the old seat, which the swap's backup names.
  FakeServerOptions go;
  go.model = "chat";
  go.expect_api_key = "sk-master";
  go.litellm_api_base = old_seat.url() + "/v1";
  go.litellm_model_group = "chat";
  FakeServer gw(go);
  CliRun c = cli("gateway check --config '" + cfg.string() + "' --alias chat --url " + gw.url() +
                     " --timeout 5 --checks models,prose --json", env);
  EXPECT_EQ(c.rc, 1) << c.out << c.err;
  const auto cj = nlohmann::json::parse(c.out);
  EXPECT_FALSE(cj["ok"].get<bool>());
  EXPECT_NE(cj["stale"].get<std::string>().find("still answers from " + old_seat.url()), std::string::npos) << c.out;
  EXPECT_TRUE(cj["probe"]["ok"].get<bool>());
}

TEST(GatewayPromisesCli, ProbeUnauthorizedStopsAndKvComparesWithThePlan) {
  FakeServerOptions locked;
  locked.expect_api_key = "sk-x";
  FakeServer guarded(locked);
  CliRun u = cli("probe " + guarded.url() + " --model " + kModel + " --timeout 5 --json");
  EXPECT_EQ(u.rc, 1) << u.out << u.err;
  const auto uj = nlohmann::json::parse(u.out);
  EXPECT_EQ(uj["checks"][0]["classification"], "unauthorized");
  EXPECT_EQ(uj["summary"]["skip"], 10);

  TempDir dir;
  const stdfs::path plan = dir.path / "plan.json";
  CliRun p = cli("plan --seat demo=" + fp4forge::testutil::kData + "/llama --gpu 0=80GiB --json");
  ASSERT_EQ(p.rc, 0) << p.err;
  std::ofstream(plan) << p.out;
  const auto pj = nlohmann::json::parse(p.out);
  const std::int64_t blocks = pj["seats"][0]["placement"]["num_blocks"].get<std::int64_t>();
  {
    FakeServerOptions o;
    o.kv_blocks = blocks;
    FakeServer srv(o);
    CliRun r = cli("probe " + srv.url() + " --model " + kModel + " --checks context,kv --seed 5 --timeout 5 "
                   "--expect-kv-from '" + plan.string() + "' --seat demo --json");
    ASSERT_EQ(r.rc, 0) << r.out << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["checks"][0]["check"], "context");
    EXPECT_EQ(j["checks"][0]["context"]["seed"], 5);
    EXPECT_EQ(j["checks"][1]["kv"]["tokens"], blocks * 16);
    EXPECT_EQ(j["checks"][1]["kv"]["expected_tokens"], blocks * 16);
  }
  {
    FakeServerOptions o;
    o.kv_blocks = blocks * 9 / 10;  // another image, another utilization: 10 % smaller
    FakeServer srv(o);
    CliRun r = cli("probe " + srv.url() + " --model " + kModel + " --checks kv --timeout 5 --expect-kv-from '" +
                   plan.string() + "' --seat demo");
    EXPECT_EQ(r.rc, 1) << r.out << r.err;
    EXPECT_NE(r.out.find("kv-mismatch"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("seat 'demo'"), std::string::npos) << r.out;
  }
  CliRun bad = cli("probe http://127.0.0.1:1 --model m --expect-kv-from '" + plan.string() + "' --seat nope");
  EXPECT_EQ(bad.rc, 3) << bad.err;
  EXPECT_EQ(cli("probe http://127.0.0.1:1 --model m --seat demo").rc, 2);
}

TEST(GatewayPromisesCli, VisionAliasDeploymentByIdExtrasAndTheDatabase) {
  TempDir dir;
  const stdfs::path cfg = dir.path / "litellm.yaml";
  const std::string dead = "http://127.0.0.1:" + std::to_string(FakeServer::free_port()) + "/v1";
  std::ofstream(cfg, std::ios::binary)
      << "model_list:\n"
         "  - model_name: chat\n    litellm_params:\n      model: hosted_vllm/x\n      api_base: " << dead
      << "\n    model_info:\n      id: chat-gpu7\n"
         "  - model_name: chat\n    litellm_params:\n      model: hosted_vllm/x\n      api_base: " << dead
      << "\n      top_k: 20\n      rpm: 100\n      extra_body: {chat_template_kwargs: {enable_thinking: false}}\n"
         "    model_info:\n      id: chat-gpu8\n      supports_vision: true\n"
         "general_settings:\n  store_model_in_db: true\n";
  const std::string before = slurp(cfg);
  FakeServerOptions to;
  to.fault = Fault::TEXT_ONLY;
  FakeServer text_seat(to);
  const std::string swap = "gateway swap --config '" + cfg.string() + "' --alias chat --deployment chat-gpu8 "
                           "--backend-model hosted_vllm/" + kModel + " --api-base " + text_seat.url() +
                           "/v1 --timeout 5";
  CliRun refused = cli(swap + " --json");
  EXPECT_EQ(refused.rc, 1) << refused.out << refused.err;
  EXPECT_NE(refused.out.find("vision: image-rejected"), std::string::npos) << refused.out;
  EXPECT_NE(refused.err.find("takes images (model_info.supports_vision"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("keeps models in its database"), std::string::npos) << refused.err;
  EXPECT_EQ(slurp(cfg), before);
  // In text, the refusal is said once, as the error line (it was on stdout too).
  CliRun text = cli(swap);
  EXPECT_EQ(text.rc, 1);
  EXPECT_EQ(text.out.find("swap refused"), std::string::npos) << text.out;
  const std::size_t at = text.err.find("fp4forge: error: swap refused: ");
  EXPECT_NE(at, std::string::npos) << text.err;
  EXPECT_EQ(text.err.find("swap refused", at + 20), std::string::npos) << text.err;
  EXPECT_EQ(cli(swap + " --checks models,prose,logprobs").rc, 2);  // a vision alias keeps its vision check

  CliRun forced = cli(swap + " --text-only --json");
  ASSERT_EQ(forced.rc, 0) << forced.out << forced.err;
  EXPECT_NE(forced.err.find("--text-only: the vision check is skipped"), std::string::npos) << forced.err;
  const std::string now = slurp(cfg);
  EXPECT_NE(now.find("api_base: " + dead + "\n    model_info:\n      id: chat-gpu7"), std::string::npos) << now;
  EXPECT_LT(now.find(text_seat.url()), now.find("id: chat-gpu8")) << now;  // the second deployment moved
  int posts = 0;
  for (const std::string& b : text_seat.bodies()) {
    if (b.empty()) continue;
    const auto j = nlohmann::json::parse(b);
    ++posts;
    EXPECT_EQ(j["top_k"], 20) << b.substr(0, 200);
    EXPECT_EQ(j["chat_template_kwargs"]["enable_thinking"], false) << b.substr(0, 200);
    EXPECT_FALSE(j.contains("rpm"));
  }
  EXPECT_GT(posts, 3);
}

TEST(GatewayPromisesCli, ForbiddenStopsLongPastMaxTokensFailsAndTheTextIsEscaped) {
  FakeServerOptions locked;
  locked.expect_api_key = "sk-x";
  locked.auth_status = 403;
  FakeServer guarded(locked);
  CliRun f = cli("probe " + guarded.url() + " --model " + kModel + " --timeout 5 --api-key-env FP4FORGE_E2E_K",
                 "FP4FORGE_E2E_K=sk-wrong");
  EXPECT_EQ(f.rc, 1) << f.out << f.err;
  EXPECT_NE(f.out.find("unauthorized"), std::string::npos) << f.out;
  EXPECT_NE(f.out.find("not-run"), std::string::npos) << f.out;
  EXPECT_EQ((f.out + f.err).find("sk-wrong"), std::string::npos);
  EXPECT_EQ(guarded.requests().size(), 1u);

  FakeServerOptions over;
  over.fault = Fault::OVERRUN_STREAM;
  FakeServer srv(over);
  CliRun l = cli("probe " + srv.url() + " --model " + kModel + " --checks long --timeout 5 --json");
  EXPECT_EQ(l.rc, 1) << l.out << l.err;
  EXPECT_EQ(nlohmann::json::parse(l.out)["checks"][0]["classification"], "exceeds-max-tokens") << l.out;

  // A model name with terminal escapes: the text report writes them as \xNN, never the bytes.
  // A newline in it forges no report line.
  CliRun e = cli("probe " + srv.url() + " --model \"$(printf 'm\\033[31mX\\n  PASS')\" --checks models --timeout 5");
  EXPECT_EQ(e.rc, 1) << e.out << e.err;
  EXPECT_EQ(e.out.find('\x1b'), std::string::npos) << e.out;
  EXPECT_NE(e.out.find("m\\x1b[31mX\\x0a  PASS"), std::string::npos) << e.out;
}

}  // namespace
