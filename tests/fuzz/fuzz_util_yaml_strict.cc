// Fuzzes the one strict YAML loader (util/yaml_strict.h), which recipes and LiteLLM configs are read through: any
// text gives a node or an error value (never a crash, an exception or a hang on aliases), and what it accepts keeps
// its promises: no control byte PyYAML's reader refuses, every refusal one line. (Its first finding: yaml-cpp 0.7's
// LoadAll never returns on a stray flow indicator; the loader asks for a second document twice at most.)
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fp4forge/util/yaml_strict.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto r = fp4forge::util::load_yaml_strict(text, "fuzz.yaml", fp4forge::Errc::BAD_INPUT);
  if (!r.ok()) {
    if (r.error().code != fp4forge::Errc::BAD_INPUT || r.error().message.find('\n') != std::string::npos)
      __builtin_trap();
    return 0;
  }
  for (const unsigned char c : text)
    if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f) __builtin_trap();
  return 0;
}
