#include "fp4forge/diagnose/serving_fixes.h"

namespace fp4forge::doctor {

std::optional<std::string> derive_preprocessor_config(const JsonDocument& processor_config) {
  const auto ip = processor_config.get({"image_processor"});
  if (!ip || !ip->is_object()) return std::nullopt;
  std::optional<std::string> out = processor_config.dump_styled({"image_processor"});
  // A new file: transformers' save_pretrained ends every JSON file it writes with a newline (to_json_string), so
  // the derived file does too, whatever processor_config.json's own convention.
  if (out && (out->empty() || out->back() != '\n')) *out += '\n';
  return out;
}

Result<bool> clear_tokenizer_truncation(JsonDocument& tokenizer_json) {
  bool changed = false;
  for (const char* k : {"truncation", "padding"}) {
    const auto v = tokenizer_json.get({k});
    if (v && !v->is_null()) {
      FP4FORGE_TRY(tokenizer_json.set({k}, nullptr));
      changed = true;
    }
  }
  return changed;
}

}  // namespace fp4forge::doctor
