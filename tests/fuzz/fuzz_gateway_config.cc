// Fuzzes LiteLLM config handling: `gateway show` on arbitrary text, and a swap (no probe) applied to
// the fuzz input written to a temp file, then a swap and a retire of one deployment (--deployment N); an edit
// that succeeds must leave valid YAML behind.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include "fp4forge/gateway/gateway.h"
#include "fp4forge/util/fs.h"

namespace {
// The edits write through the I/O seam with fsync (backups, atomic replace): durability is not under test here and
// an fsync per write cost two orders of magnitude of executions.
struct NoSync : fp4forge::fs::Ops {
  int fsync(int) override { return 0; }
};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static NoSync no_sync;
  static const bool installed = (fp4forge::fs::set_ops(&no_sync), true);
  (void)installed;
  std::string text(reinterpret_cast<const char*>(data), size);
  auto shown = fp4forge::gateway::gateway_show_text(text, "fuzz.yaml");
  (void)shown;
  static const auto dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("fp4forge-fuzz-gw-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    static const std::filesystem::path to_remove = d;
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(to_remove, ec);
    });
    return d;
  }();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const auto cfg = dir / "config.yaml";
  {
    std::ofstream f(cfg, std::ios::binary);
    f << text;
  }
  fp4forge::gateway::SwapOptions o;
  o.alias = "chat";
  o.backend_model = "openai/new";
  o.api_base = "http://127.0.0.1:9/v1";
  o.probe = false;
  auto r = fp4forge::gateway::gateway_swap(cfg, o);
  if (r.ok() && r->changed) {
    auto again = fp4forge::gateway::gateway_show(cfg);
    if (!again.ok()) __builtin_trap();  // a successful edit must leave a parseable config
  }
  // One deployment of a load-balanced alias (the input's first byte picks which), then a retire of one replica:
  // each edit that succeeds must leave a parseable config.
  o.deployment = std::to_string(size > 0 ? 1 + data[0] % 3 : 1);
  auto d = fp4forge::gateway::gateway_swap(cfg, o);
  if (d.ok() && d->changed && !fp4forge::gateway::gateway_show(cfg).ok()) __builtin_trap();
  auto t = fp4forge::gateway::gateway_retire(cfg, "chat", o.deployment);
  if (t.ok() && t->changed && !fp4forge::gateway::gateway_show(cfg).ok()) __builtin_trap();
  return 0;
}
