// Fuzzes the read-only side of LiteLLM config handling: `gateway show` on arbitrary text (the parse every gateway
// command starts with) and its text and JSON reports. No file is written; every failure must be an error value,
// never a crash or an exception.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fp4forge/gateway/gateway.h"
#include "fp4forge/gateway/report.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (const char* backend : {"", "http://127.0.0.1:8000/v1"}) {
    const auto shown = fp4forge::gateway::gateway_show_text(text, "fuzz.yaml", backend);
    if (!shown.ok()) continue;
    (void)fp4forge::gateway::to_text(*shown);
    (void)fp4forge::gateway::to_json(*shown).dump();
  }
  return 0;
}
