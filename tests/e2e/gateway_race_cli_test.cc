// Two `gateway swap` processes on one config at once (R4-B1): both exit 0 and both edits are in the file (the
// second waits for the first's edit lock and edits what it wrote). And URLs curl would misread (R4-B18,
// round-3 B14): probe and swap exit 2 with one escaped line, nothing sent, nothing written.
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "test_util.h"

namespace {

namespace stdfs = std::filesystem;
using fp4forge::testutil::q;
using fp4forge::testutil::slurp;
using fp4forge::testutil::TempDir;

TEST(GatewayRaceCli, TwoSwapsAtOnceBothLand) {
  TempDir t;
  const stdfs::path cfg = t.path / "c.yaml";
  std::ofstream(cfg, std::ios::binary)
      << "model_list:\n  - model_name: chat\n    litellm_params:\n      model: hosted_vllm/org/a\n      api_base: "
         "http://127.0.0.1:1/v1\n  - model_name: other\n    litellm_params:\n      model: hosted_vllm/org/b\n      "
         "api_base: http://127.0.0.1:2/v1\n";
  for (int i = 0; i < 6; ++i) {
    SCOPED_TRACE("round " + std::to_string(i));
    auto swap = [&](const std::string& alias, const std::string& model, const std::string& rc) {
      return "(" + fp4forge::testutil::kCli + " gateway swap --config " + q(cfg) + " --alias " + alias +
             " --backend-model " + model + " --api-base http://127.0.0.1:9/v1 --no-probe >/dev/null 2>&1; echo $? > " +
             q(t.path / rc) + ")";
    };
    const std::string a = "hosted_vllm/a/" + std::to_string(i), b = "hosted_vllm/b/" + std::to_string(i);
    const std::string cmd = swap("chat", a, "ra") + " & " + swap("other", b, "rb") + "; wait";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    EXPECT_EQ(slurp(t.path / "ra"), "0\n");
    EXPECT_EQ(slurp(t.path / "rb"), "0\n");
    const std::string now = slurp(cfg);
    EXPECT_NE(now.find("model: " + a + "\n"), std::string::npos) << now;
    EXPECT_NE(now.find("model: " + b + "\n"), std::string::npos) << now;
  }
}

TEST(GatewayRaceCli, UrlsCurlWouldMisreadAreUsageErrors) {
  TempDir t;
  const stdfs::path cfg = t.path / "c.yaml";
  const std::string text = "model_list:\n  - model_name: chat\n    litellm_params:\n      model: hosted_vllm/org/a\n";
  std::ofstream(cfg, std::ios::binary) << text;
  for (const std::string url : {"\"$(printf 'http://127.0.0.1:1/v1\\r\\nX-Injected: 1')\"", "'http://127.0.0.1:99999'",
                                "'http://h /v1'", "\"$(printf 'http://b\\303\\274cher.example/v1')\""}) {
    SCOPED_TRACE(url);
    std::string out, err;
    EXPECT_EQ(fp4forge::testutil::run_cli("probe " + url + " --model m --checks models --timeout 2", &out, &err), 2)
        << out << err;
    EXPECT_EQ((out + err).find('\r'), std::string::npos) << out << err;
    EXPECT_EQ((out + err).find("\nX-Injected"), std::string::npos) << out << err;
    EXPECT_EQ(fp4forge::testutil::run_cli("gateway swap --config " + q(cfg) + " --alias chat --backend-model m/x "
                                          "--no-probe --api-base " + url, &out, &err), 2)
        << out << err;
    EXPECT_EQ(slurp(cfg), text);
  }
}

}  // namespace
