#include "fp4forge/model/serving_files.h"

#include "fp4forge/safetensors/checkpoint.h"

#include <nlohmann/json.hpp>

#include "fp4forge/util/fs.h"

namespace fp4forge {

ServingFiles serving_files(const std::filesystem::path& dir) {
  ServingFiles s;
  std::error_code ec;
  for (const char* f : kTokenizerFiles)
    if (!s.tokenizer && std::filesystem::is_regular_file(dir / f, ec)) {
      s.tokenizer = true;
      s.tokenizer_file = f;
    }
  for (const char* f : {"chat_template.jinja", "chat_template.json"})
    if (!s.chat_template && std::filesystem::is_regular_file(dir / f, ec)) {
      s.chat_template = true;
      s.chat_template_source = f;
    }
  if (!s.chat_template && std::filesystem::is_regular_file(dir / "tokenizer_config.json", ec)) {
    auto text = fs::read_file(dir / "tokenizer_config.json");
    // The house JSON reader (bounded depth, a duplicate key refused): what it cannot read counts as no template.
    auto parsed = text.ok() ? parse_json_bounded(*text, "tokenizer_config.json") : Result<nlohmann::ordered_json>(text.error());
    if (parsed.ok()) {
      const auto& j = *parsed;
      if (j.is_object()) {
        const auto it = j.find("chat_template");
        if (it != j.end() && ((it->is_string() && !it->get_ref<const std::string&>().empty()) ||
                              (it->is_array() && !it->empty()))) {
          s.chat_template = true;
          s.chat_template_source = "tokenizer_config.json:chat_template";
        }
      }
    }
  }
  return s;
}

}  // namespace fp4forge
