// fp4forge-fake-seat: a stand-in OpenAI-compatible server for the demo (and for trying probe / gateway without a
// GPU). It answers in vLLM's response shapes for one model name, on 127.0.0.1, for a bounded time and number of
// requests, then exits. It serves nothing real: every answer is canned (tests/probe_fake_server.h).
//
//   fp4forge-fake-seat --model NAME [--port P] [--api-key-env VAR] [--lifetime S] [--max-requests N]
//                      [--url-file F] [--max-model-len N] [--kv-blocks N] [--block-size N] [--text-only]
//                      [--litellm-api-base URL] [--litellm-model-id ID]
//
// Usage: docs/fake-seat.md. Exit codes as fp4forge's: 0 served its time, 2 usage, 4 cannot listen (port taken).
//
// As a seat it serves vLLM's /metrics (vllm:cache_config_info with --kv-blocks x --block-size) and refuses prompts
// longer than --max-model-len; as a stand-in for a LiteLLM proxy (--litellm-api-base / --litellm-model-id) it names
// the deployment that answered in LiteLLM's x-litellm-* response headers.
//
// Prints its base URL (http://127.0.0.1:PORT) on stdout, and to F when given, then serves until the lifetime or
// the request budget is spent.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>

#include <CLI/CLI.hpp>

#include "probe_fake_server.h"

int main(int argc, char** argv) {
  CLI::App app{"fp4forge-fake-seat: a canned OpenAI-compatible server for demos (not a model)"};
  fp4forge::testing::FakeServerOptions o;
  std::string key_env, url_file;
  app.add_option("--model", o.model, "the model name it serves")->required();
  app.add_option("--port", o.port, "127.0.0.1 port to listen on (default 0: a free port the kernel picks)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--api-key-env", key_env, "require 'Bearer <value of this variable>'");
  app.add_option("--lifetime", o.max_lifetime_s, "seconds to serve (default 60)")->check(CLI::Range(0.1, 3600.0));
  app.add_option("--max-requests", o.max_requests, "requests to serve (default 200)")->check(CLI::Range(1, 100000));
  app.add_option("--url-file", url_file, "also write the base URL to this file");
  app.add_option("--max-model-len", o.max_model_len, "max_model_len listed in /v1/models (default 8192)")
      ->check(CLI::Range(256, 1 << 24));
  app.add_option("--kv-blocks", o.kv_blocks, "num_gpu_blocks in /metrics (default 2048; 0 = no /metrics)");
  app.add_option("--block-size", o.block_size, "block_size in /metrics (default 16)")->check(CLI::Range(1, 4096));
  bool text_only = false;
  app.add_flag("--text-only", text_only,
               "refuse images as a text-only model does (probe's vision check skips; with --multimodal it fails)");
  app.add_option("--litellm-api-base", o.litellm_api_base, "answer as a LiteLLM proxy routing to this api_base");
  app.add_option("--litellm-model-id", o.litellm_model_id, "answer as a LiteLLM proxy naming this deployment id");
  o.max_lifetime_s = 60.0;
  o.max_requests = 200;
  app.footer("Docs: docs/fake-seat.md. Exit codes: 0 served its time, 2 usage, 4 cannot listen on the port.");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help is CLI11's "success"; every other parse error is a usage error, exit 2 as fp4forge's (CLI11's own
    // codes, 109 for an unexpected argument, are undocumented here; issue 55 tryout J).
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (text_only) o.fault = fp4forge::testing::Fault::TEXT_ONLY;
  if (!o.litellm_api_base.empty() || !o.litellm_model_id.empty()) o.litellm_model_group = o.model;
  if (!key_env.empty()) {
    const char* v = std::getenv(key_env.c_str());
    if (v == nullptr || *v == '\0') {
      std::fprintf(stderr, "fp4forge-fake-seat: --api-key-env %s: the variable is not set\n", key_env.c_str());
      return 2;
    }
    o.expect_api_key = v;
  }
  std::unique_ptr<fp4forge::testing::FakeServer> owned;
  try {
    owned = std::make_unique<fp4forge::testing::FakeServer>(o);
  } catch (const std::runtime_error& e) {
    std::fprintf(stderr, "fp4forge-fake-seat: error: %s; hint: choose another --port, or --port 0 for a free one\n",
                 e.what());
    return 4;
  }
  fp4forge::testing::FakeServer& srv = *owned;
  std::printf("%s\n", srv.url().c_str());
  std::fflush(stdout);
  if (!url_file.empty()) {
    std::ofstream f(url_file + ".tmp");
    f << srv.url() << "\n";
    f.close();
    std::rename((url_file + ".tmp").c_str(), url_file.c_str());
  }
  srv.wait();
  return 0;
}
