// probe / gateway CLI against the fake server: exit codes, --json parses, the API key is never printed.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "probe_fake_server.h"

namespace {

namespace stdfs = std::filesystem;
using fp4forge::testing::FakeServer;
using fp4forge::testing::FakeServerOptions;
using fp4forge::testing::Fault;

struct CliRun {
  int rc = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs the CLI with `args` (already shell-quoted), environment prefix `env`.
CliRun cli(const std::string& args, const std::string& env = "") {
  const stdfs::path errf = stdfs::temp_directory_path() / ("fp4forge-probe-cli-" + std::to_string(::getpid()) + ".err");
  const std::string cmd = env + " '" + std::string(FP4FORGE_CLI) + "' " + args + " 2>'" + errf.string() + "'";
  CliRun r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf{};
  std::size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int st = ::pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  std::ifstream f(errf);
  std::stringstream s;
  s << f.rdbuf();
  r.err = s.str();
  stdfs::remove(errf);
  return r;
}

const char* kModel = "fake-org/fake-model-nvfp4";

TEST(ProbeCli, HealthyServerExitsZeroAndJsonParses) {
  FakeServer srv(FakeServerOptions{});
  CliRun r = cli("probe " + srv.url() + "/v1 --model " + kModel + " --timeout 5 --json");
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["ok"].get<bool>());
  EXPECT_EQ(j["schema"], "fp4forge.probe/1");
  EXPECT_EQ(j["url"], srv.url());
  EXPECT_EQ(j["checks"].size(), 11u);
  EXPECT_EQ(j["summary"]["fail"], 0);
  EXPECT_EQ(j["checks"][1]["check"], "prose");
  EXPECT_EQ(j["checks"][1]["status"], "pass");
  EXPECT_EQ(j["checks"][1]["content"], "42");
  CliRun t = cli("probe " + srv.url() + " --model " + kModel + " --checks models,prose --timeout 5");
  EXPECT_EQ(t.rc, 0) << t.out << t.err;
  EXPECT_NE(t.out.find("PASS  prose"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("ok: 2 passed, 0 failed, 0 skipped"), std::string::npos) << t.out;
}

TEST(ProbeCli, NanLogitsExitsOne) {
  FakeServerOptions o;
  o.fault = Fault::CONTENT_NULL_LENGTH;
  FakeServer srv(o);
  CliRun r = cli("probe " + srv.url() + " --model " + kModel + " --checks models,prose,logprobs --timeout 5 --json");
  EXPECT_EQ(r.rc, 1) << r.out << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_FALSE(j["ok"].get<bool>());
  EXPECT_EQ(j["checks"][0]["status"], "pass");
  EXPECT_EQ(j["checks"][1]["classification"], "content-null-length");
  EXPECT_EQ(j["checks"][2]["classification"], "nan-logits");
  EXPECT_EQ(j["checks"][2]["http_status"], 400);
}

TEST(ProbeCli, UnreachableExitsFour) {
  const int port = FakeServer::free_port();
  CliRun r = cli("probe http://127.0.0.1:" + std::to_string(port) + " --model m --timeout 2 --json");
  EXPECT_EQ(r.rc, 4) << r.out << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["unreachable"].get<bool>());
  EXPECT_EQ(j["checks"][0]["classification"], "connection-refused");
}

// Issue 55 tryout: a base URL that is no OpenAI root (a path prefix the server does not have) gave eleven bare
// "GET /v1/models: HTTP 404" lines without the URL asked; a server that accepts and never answers, eleven timeouts.
// Now: one failure naming the whole URL and what a 404 there means, the rest not sent.
TEST(ProbeCli, ANotFoundRootOrASilentServerIsOneFailure) {
  FakeServer srv(FakeServerOptions{});
  CliRun r = cli("probe " + srv.url() + "/api --model " + kModel + " --timeout 5 --json");
  EXPECT_EQ(r.rc, 1) << r.out << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["summary"]["fail"], 1) << r.out;
  EXPECT_NE(r.out.find("GET " + srv.url() + "/api/v1/models: HTTP 404: Not Found; is " + srv.url() +
                       "/api the server's base URL?"), std::string::npos) << r.out;
  std::size_t not_sent = 0;
  for (const auto& c : j["checks"]) not_sent += c["classification"] == "not-run" ? 1 : 0;
  EXPECT_EQ(not_sent, j["checks"].size() - 1) << r.out;
  // A socket that accepts (the kernel's backlog) and never answers: the listing times out once, the rest not sent.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(fd, 16), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const std::string silent = "http://127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  CliRun s = cli("probe " + silent + " --model " + kModel + " --timeout 2 --json");
  ::close(fd);
  auto js = nlohmann::json::parse(s.out);
  EXPECT_EQ(js["summary"]["fail"], 1) << s.out;
  EXPECT_EQ(js["checks"][0]["classification"], "timeout") << s.out;
  EXPECT_EQ(s.rc, 4) << s.out;  // nothing answered: unreachable
}

TEST(ProbeCli, UsageErrorsExitTwo) {
  EXPECT_EQ(cli("probe http://127.0.0.1:1 --model m --checks prose,vibes").rc, 2);
  CliRun r = cli("probe http://127.0.0.1:1");
  EXPECT_EQ(r.rc, 2);
  CliRun k = cli("probe http://127.0.0.1:1 --model m --api-key-env FP4FORGE_SURELY_UNSET_VAR");
  EXPECT_EQ(k.rc, 2);
  EXPECT_NE(k.err.find("FP4FORGE_SURELY_UNSET_VAR"), std::string::npos) << k.err;
}

TEST(ProbeCli, ApiKeyNeverPrinted) {
  const std::string key = "sk-cli-TOPSECRET-9731";
  {
    FakeServerOptions o;
    o.expect_api_key = key;
    FakeServer srv(o);
    CliRun r = cli("probe " + srv.url() + " --model " + kModel + " --api-key-env PROBE_TEST_KEY --timeout 5 --json",
                "PROBE_TEST_KEY=" + key);
    EXPECT_EQ(r.rc, 0) << r.out << r.err;
    EXPECT_EQ(r.out.find(key), std::string::npos);
    EXPECT_EQ(r.err.find(key), std::string::npos);
  }
  {
    FakeServerOptions o;
    o.fault = Fault::AUTH_ECHO;  // the server echoes the key back in its error message
    FakeServer srv(o);
    for (const char* fmt : {" --json", ""}) {
      CliRun r = cli("probe " + srv.url() + " --model " + kModel + " --api-key-env PROBE_TEST_KEY --timeout 5 --checks prose" + fmt,
                  "PROBE_TEST_KEY=" + key);
      EXPECT_EQ(r.rc, 1) << r.out << r.err;
      EXPECT_EQ(r.out.find(key), std::string::npos) << r.out;
      EXPECT_EQ(r.err.find(key), std::string::npos) << r.err;
      EXPECT_NE(r.out.find("***"), std::string::npos) << r.out;
    }
  }
}

// Issue 14 #12: a password in the URL reaches the server but is never printed.
TEST(ProbeCli, UrlPasswordNeverPrinted) {
  FakeServer srv(FakeServerOptions{});
  std::string url = srv.url();
  url.insert(url.find("://") + 3, "admin:pw-TOPSECRET-55@");
  for (const char* fmt : {" --json", ""}) {
    CliRun r = cli("probe " + url + " --model " + kModel + " --timeout 5 --checks models" + fmt, "");
    EXPECT_EQ(r.out.find("TOPSECRET"), std::string::npos) << r.out;
    EXPECT_EQ(r.err.find("TOPSECRET"), std::string::npos) << r.err;
    EXPECT_NE(r.out.find("admin:***@"), std::string::npos) << r.out;
  }
}

TEST(ProbeCli, GatewaySwapShowRollback) {
  const stdfs::path dir = stdfs::temp_directory_path() / ("fp4forge-gw-cli-" + std::to_string(::getpid()));
  stdfs::remove_all(dir);
  stdfs::create_directories(dir);
  const stdfs::path cfg = dir / "config.yaml";
  const std::string original =
      "# gateway\nmodel_list:\n  - model_name: chat  # alias\n    litellm_params:\n      model: hosted_vllm/old\n"
      "      api_base: http://10.1.1.1:8000/v1\n  - model_name: \"*\"\n    litellm_params:\n      model: \"openai/*\"\n";
  std::ofstream(cfg, std::ios::binary) << original;
  auto slurp = [&] {
    std::ifstream f(cfg, std::ios::binary);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  };

  CliRun show = cli("gateway show --config '" + cfg.string() + "' --backend http://10.1.1.1:8000 --json");
  ASSERT_EQ(show.rc, 0) << show.err;
  auto sj = nlohmann::json::parse(show.out);
  EXPECT_EQ(sj["routes"].size(), 2u);
  EXPECT_EQ(sj["backend_aliases"][0], "chat");
  EXPECT_NE(show.err.find("wildcard route '*'"), std::string::npos) << show.err;

  {  // a failing seat: refused, exit 1, file untouched
    FakeServerOptions o;
    o.fault = Fault::NAN_LOGPROBS;
    FakeServer bad(o);
    CliRun r = cli("gateway swap --config '" + cfg.string() + "' --alias chat --backend-model hosted_vllm/" + kModel +
                " --api-base " + bad.url() + "/v1 --timeout 5 --json");
    EXPECT_EQ(r.rc, 1) << r.out << r.err;
    auto j = nlohmann::json::parse(r.out);
    EXPECT_FALSE(j["ok"].get<bool>());
    EXPECT_FALSE(j["changed"].get<bool>());
    EXPECT_NE(j["refused"].get<std::string>().find("logprobs: nan-logits"), std::string::npos);
    EXPECT_EQ(slurp(), original);
  }
  FakeServer good(FakeServerOptions{});
  CliRun r = cli("gateway swap --config '" + cfg.string() + "' --alias chat --backend-model hosted_vllm/" + kModel +
              " --api-base " + good.url() + "/v1 --timeout 5");
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("+      api_base: " + good.url() + "/v1"), std::string::npos) << r.out;
  EXPECT_NE(slurp().find("# alias"), std::string::npos);
  CliRun rb = cli("gateway rollback --config '" + cfg.string() + "' --json");
  ASSERT_EQ(rb.rc, 0) << rb.err;
  EXPECT_TRUE(nlohmann::json::parse(rb.out)["changed"].get<bool>());
  EXPECT_EQ(slurp(), original);
  CliRun bad = cli("gateway show --config '" + (dir / "missing.yaml").string() + "'");
  EXPECT_EQ(bad.rc, 4) << bad.err;
  stdfs::remove_all(dir);
}

// Issue 29: a load-balanced alias through the CLI: swap needs --deployment (exit 2 listing the replicas), moves
// one replica probed with the alias's own os.environ key, prints the next steps; gateway check probes the alias
// through the gateway with the master key (exit 0), and refuses a retired one (exit 3).
TEST(ProbeCli, GatewayReplicaSwapThenCheckThroughTheGateway) {
  const stdfs::path dir = stdfs::temp_directory_path() / ("fp4forge-gw-rep-" + std::to_string(::getpid()));
  stdfs::remove_all(dir);
  stdfs::create_directories(dir);
  const stdfs::path cfg = dir / "config.yaml";
  std::ofstream(cfg, std::ios::binary)
      << "model_list:\n"
         "  - model_name: chat\n    litellm_params:\n      model: hosted_vllm/old\n      api_base: http://10.1.1.1:8000/v1\n"
         "      api_key: os.environ/FP4FORGE_E2E_SEAT_KEY\n"
         "  - model_name: chat\n    litellm_params:\n      model: hosted_vllm/old\n      api_base: http://10.1.1.2:8000/v1\n"
         "      api_key: os.environ/FP4FORGE_E2E_SEAT_KEY\n"
         "  - model_name: other\n    litellm_params:\n      model: hosted_vllm/other\n      api_base: http://10.1.1.3:8000/v1\n"
         "general_settings:\n  master_key: os.environ/FP4FORGE_E2E_MASTER\n";
  const std::string env = "FP4FORGE_E2E_SEAT_KEY=sk-seat-e2e FP4FORGE_E2E_MASTER=sk-master-e2e";
  FakeServerOptions so;
  so.expect_api_key = "sk-seat-e2e";
  FakeServer seat(so);
  const std::string swap = "gateway swap --config '" + cfg.string() + "' --alias chat --backend-model hosted_vllm/" +
                           kModel + " --api-base " + seat.url() + "/v1 --timeout 5";
  CliRun lb = cli(swap, env);
  EXPECT_EQ(lb.rc, 2) << lb.out << lb.err;
  EXPECT_NE(lb.err.find("1) hosted_vllm/old @ http://10.1.1.1:8000/v1 (line 2); 2) hosted_vllm/old @ "
                        "http://10.1.1.2:8000/v1 (line 7)"),
            std::string::npos) << lb.err;
  CliRun r = cli(swap + " --deployment 2", env);
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("next: 1. reload LiteLLM"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("fp4forge gateway check --config"), std::string::npos) << r.out;
  EXPECT_EQ((r.out + r.err).find("sk-seat-e2e"), std::string::npos);
  FakeServerOptions go;
  go.model = "chat";
  go.expect_api_key = "sk-master-e2e";
  FakeServer gw(go);
  CliRun c = cli("gateway check --config '" + cfg.string() + "' --alias chat --url " + gw.url() + " --timeout 5 --json",
                 env);
  ASSERT_EQ(c.rc, 0) << c.out << c.err;
  auto j = nlohmann::json::parse(c.out);
  EXPECT_EQ(j["command"], "check");
  EXPECT_EQ(j["probe"]["model"], "chat");
  EXPECT_EQ(c.out.find("sk-master-e2e"), std::string::npos);
  CliRun ret = cli("gateway retire --config '" + cfg.string() + "' --alias chat --all-deployments --json");
  ASSERT_EQ(ret.rc, 0) << ret.err;
  CliRun gone = cli("gateway check --config '" + cfg.string() + "' --alias chat --url " + gw.url(), env);
  EXPECT_EQ(gone.rc, 3) << gone.err;
  EXPECT_NE(gone.err.find("(it is retired)"), std::string::npos) << gone.err;
  stdfs::remove_all(dir);
}

// Issue 29: --json-lines streams one object per check as it finishes, then the report.
TEST(ProbeCli, JsonLinesStreamEachCheckThenTheReport) {
  FakeServer srv(FakeServerOptions{});
  CliRun r = cli("probe " + srv.url() + " --model " + kModel + " --checks models,prose,logprobs --timeout 5 --json-lines");
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  std::istringstream in(r.out);
  std::vector<nlohmann::json> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(nlohmann::json::parse(l));
  ASSERT_EQ(lines.size(), 4u) << r.out;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(lines[static_cast<std::size_t>(i)]["event"], "check");
  EXPECT_EQ(lines[0]["check"], "models");
  EXPECT_EQ(lines[3]["event"], "report");
  EXPECT_EQ(lines[3]["checks"].size(), 3u);
  EXPECT_EQ(cli("probe ftp://h --model m").rc, 2);
  EXPECT_EQ(cli("probe " + srv.url() + " --model m --json --json-lines").rc, 2);
}

}  // namespace
