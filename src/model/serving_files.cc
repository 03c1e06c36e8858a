#include "fp4forge/model/serving_files.h"

#include "fp4forge/safetensors/checkpoint.h"

#include <algorithm>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fp4forge/util/fs.h"
#include "fp4forge/util/hf_cache.h"

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

std::filesystem::path serving_path(const std::filesystem::path& dir, std::string_view name, const FileOverlay* overlay) {
  if (overlay != nullptr)
    if (const auto it = overlay->find(name); it != overlay->end()) return it->second;
  return dir / name;
}

ServingFiles serving_files(const std::filesystem::path& dir, const FileOverlay* overlay) {
  ServingFiles s;
  std::error_code ec;
  auto at = [&](const char* f) { return serving_path(dir, f, overlay); };
  for (const char* f : kTokenizerFiles)
    if (!s.tokenizer && std::filesystem::is_regular_file(at(f), ec)) {
      s.tokenizer = true;
      s.tokenizer_file = f;
    }
  for (const char* f : {"chat_template.jinja", "chat_template.json"})
    if (!s.chat_template && std::filesystem::is_regular_file(at(f), ec)) {
      s.chat_template = true;
      s.chat_template_source = f;
      if (std::string_view(f) == "chat_template.jinja") {
        auto text = fs::read_file(at(f));
        if (text.ok()) s.chat_template_text = std::move(*text);
      } else if (const auto j = read_json(at(f)); j.is_object() && j.contains("chat_template")) {
        s.chat_template_text = template_text(j["chat_template"]);
      }
    }
  if (!s.chat_template && std::filesystem::is_regular_file(at("tokenizer_config.json"), ec)) {
    // What the reader cannot read counts as no template.
    const auto j = read_json(at("tokenizer_config.json"));
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

bool is_tokenizer_group_file(std::string_view name) noexcept {
  return std::find(std::begin(kTokenizerGroupFiles), std::end(kTokenizerGroupFiles), name) != std::end(kTokenizerGroupFiles);
}

bool is_processor_file(std::string_view name) noexcept {
  return std::find(std::begin(kProcessorFiles), std::end(kProcessorFiles), name) != std::end(kProcessorFiles);
}

Result<std::filesystem::path> tokenizer_source(const std::filesystem::path& dir, const std::string& from,
                                               std::string_view option) {
  if (from.empty()) return dir;
  std::error_code ec;
  const std::filesystem::path p(from);
  if (std::filesystem::is_directory(p, ec)) return p;
  if (std::filesystem::exists(p, ec))
    return make_error(Errc::USAGE, "{} '{}' is a file; expected the folder that holds the tokenizer files "
                                   "(what vllm serve --tokenizer takes)", option, from);
  if (const std::string why = hf_cache::repo_id_problem(from); !why.empty())
    return make_error(Errc::USAGE, "{} '{}': no such folder, and not a Hub repo id ({}); expected a folder "
                                   "or ORG/NAME as vllm serve --tokenizer takes", option, from, why);
  auto src = hf_cache::resolve(from);
  if (!src.ok()) return std::filesystem::path{};  // a repo not in the cache: reported as not checked
  return src->path;
}

void check_serving_files(const std::filesystem::path& tokenizer_dir, const std::string& from, FindingSink& out,
                         const FileOverlay* overlay, std::string_view command) {
  const bool elsewhere = !from.empty();
  const std::string where = elsewhere ? fmt::format("the tokenizer source '{}' (--tokenizer)", from)
                                      : std::string("the folder");
  if (tokenizer_dir.empty()) {  // --tokenizer names what cannot be read here: say so, never guess
    out.add(finding_kind("tokenizer-unchecked"),
            {.message =
                 fmt::format("the tokenizer comes from '{}', which is neither a local folder nor a repo in the Hugging "
                             "Face cache: its tokenizer files and chat template were not checked",
                             from),
             .key = "--tokenizer",
             .expected = "a local folder, or a repo id in the Hugging Face cache",
             .actual = from,
             .hint = fmt::format("download it first (hf download {}) or name a local copy", from)});
    return;
  }
  // Issue 29: a folder without any tokenizer passed every check, yet vLLM cannot serve it. vLLM's `--tokenizer`
  // defaults to the model folder, and start-up fails when nothing there loads as a tokenizer: an error, unless
  // --tokenizer says where vLLM will be pointed instead.
  const ServingFiles sf = serving_files(tokenizer_dir, overlay);
  if (sf.tokenizer && !sf.chat_template) {
    out.add(
        finding_kind("missing-chat-template"),
        {.message = fmt::format("no chat template in {}: vLLM's /v1/chat/completions refuses requests (transformers "
                                "supplies no default template); a base model served for /v1/completions needs none",
                                where),
         .expected = "chat_template.jinja, chat_template.json or tokenizer_config.json:chat_template",
         .actual = "none",
         .hint = "copy chat_template.jinja (or tokenizer_config.json) from the original release, or serve with "
                 "--chat-template"});
  }
  if (!sf.tokenizer) {
    out.add(
        finding_kind("missing-tokenizer"),
        {.message = elsewhere
                        ? fmt::format("no tokenizer file in {}: vLLM started with --tokenizer {} fails to load one",
                                      where, from)
                        : "no tokenizer file: vLLM cannot serve the folder as it is (its --tokenizer defaults to the "
                          "model folder, and start-up fails when no tokenizer loads from it)",
         .key = elsewhere ? "--tokenizer" : "",
         .expected = "tokenizer.json (or tokenizer.model, vocab.json + merges.txt, a tiktoken file)",
         .actual = "none",
         .hint = elsewhere
                     ? "name the folder (or cached repo) that holds the release's tokenizer files"
                     : fmt::format("copy the tokenizer files (and chat template) from the original release; if vLLM "
                                   "will be started with --tokenizer SRC, say so: fp4forge {} DIR --tokenizer SRC",
                                   command)});
  }
}

}  // namespace fp4forge
