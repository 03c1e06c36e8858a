// Fuzzes the read-only side of LiteLLM config handling: `gateway show` on arbitrary text (the parse every gateway
// command starts with) and its text and JSON reports. No file is written; every failure must be an error value,
// never a crash or an exception. The JSON is dumped as the CLI dumps it (cli/render.cc: invalid UTF-8 from the file
// replaced); a plain dump() throws on such a byte, which was this target's first finding (a harness bug, kept in
// regressions/ so the replay holds it to the CLI's way).
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "fp4forge/gateway/gateway.h"
#include "fp4forge/gateway/report.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (const char* backend : {"", "http://127.0.0.1:8000/v1"}) {
    const auto shown = fp4forge::gateway::gateway_show_text(text, "fuzz.yaml", backend);
    if (!shown.ok()) continue;
    (void)fp4forge::gateway::to_text(*shown);
    (void)fp4forge::gateway::to_json(*shown).dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  }
  return 0;
}
