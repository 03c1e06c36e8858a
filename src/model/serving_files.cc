#include "fp4forge/model/serving_files.h"

#include "fp4forge/safetensors/checkpoint.h"

#include <nlohmann/json.hpp>

#include "fp4forge/util/fs.h"

namespace fp4forge {

namespace {

/** The text of a `chat_template` value: a string, or a list of {name, template} (transformers' named templates),
 * joined. */
std::string template_text(const nlohmann::ordered_json& v) {
  if (v.is_string()) return v.get<std::string>();
  std::string out;
  if (v.is_array())
    for (const auto& e : v)
      if (e.is_object() && e.contains("template") && e["template"].is_string()) out += e["template"].get<std::string>() + "\n";
  return out;
}

/** `file` parsed by the house JSON reader (bounded depth, a duplicate key refused); what it cannot read is null. */
nlohmann::ordered_json read_json(const std::filesystem::path& file) {
  auto text = fs::read_file(file);
  auto parsed = text.ok() ? parse_json_bounded(*text, file.filename().string()) : Result<nlohmann::ordered_json>(text.error());
  return parsed.ok() ? std::move(*parsed) : nlohmann::ordered_json();
}

}  // namespace

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
      if (std::string_view(f) == "chat_template.jinja") {
        auto text = fs::read_file(dir / f);
        if (text.ok()) s.chat_template_text = std::move(*text);
      } else if (const auto j = read_json(dir / f); j.is_object() && j.contains("chat_template")) {
        s.chat_template_text = template_text(j["chat_template"]);
      }
    }
  if (!s.chat_template && std::filesystem::is_regular_file(dir / "tokenizer_config.json", ec)) {
    // What the reader cannot read counts as no template.
    const auto j = read_json(dir / "tokenizer_config.json");
    if (j.is_object()) {
      const auto it = j.find("chat_template");
      if (it != j.end() && ((it->is_string() && !it->get_ref<const std::string&>().empty()) ||
                            (it->is_array() && !it->empty()))) {
        s.chat_template = true;
        s.chat_template_source = "tokenizer_config.json:chat_template";
        s.chat_template_text = template_text(*it);
      }
    }
  }
  if (s.chat_template_text.size() > kChatTemplateTextCap) s.chat_template_text.resize(kChatTemplateTextCap);
  return s;
}

}  // namespace fp4forge
