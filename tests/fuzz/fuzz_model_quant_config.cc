// Fuzzes the compressed-tensors quantization_config parser (config.json text in).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fp4forge/safetensors/checkpoint.h"
#include "fp4forge/model/quant_config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto j = fp4forge::parse_json_bounded(text, "config.json");
  if (!j.ok()) return 0;
  const auto* qc = fp4forge::find_quant_config(*j);
  if (qc == nullptr) return 0;
  auto parsed = fp4forge::parse_quant_config(*qc);
  (void)parsed;
  return 0;
}
