#pragma once
/**
 * What vLLM reads beside the weights to serve a folder (issue 29, "servable means servable"): a tokenizer (vLLM's
 * `--tokenizer` defaults to the model folder) and, for /v1/chat/completions, a chat template (transformers no
 * longer supplies a default one). doctor reports them: `missing-tokenizer` is an error (vLLM's start-up fails to
 * load a tokenizer from the folder) unless doctor --tokenizer names the source vLLM will be pointed at;
 * `missing-chat-template` is a warning (a base model served for completions needs none, and `--chat-template` can
 * name one). quantize warns before writing an output that would lack them.
 */
#include <filesystem>
#include <cstddef>
#include <string>

namespace fp4forge {

struct ServingFiles {
  bool tokenizer = false;      ///< a tokenizer file (tokenizer.json, tokenizer.model, vocab.json, a tiktoken file ...)
  std::string tokenizer_file;  ///< the first one found
  bool chat_template = false;  ///< chat_template.jinja / chat_template.json, or tokenizer_config.json:chat_template
  std::string chat_template_source;
  /** The template's text (the jinja file, chat_template.json's "chat_template", tokenizer_config.json's string or
   * the templates of its list, joined), at most kChatTemplateTextCap bytes; plan reads which tool-call and
   * reasoning format it renders (model/vllm_parsers.h). */
  std::string chat_template_text;
};

/** The most of a chat template's text ServingFiles keeps. */
inline constexpr std::size_t kChatTemplateTextCap = 4u << 20;

/** Looks at `dir` (reads tokenizer_config.json, capped like every JSON file; a broken one counts as no template). */
ServingFiles serving_files(const std::filesystem::path& dir);

/** The tokenizer file names looked for, in order (for messages). */
inline constexpr const char* kTokenizerFiles[] = {"tokenizer.json", "tokenizer.model", "vocab.json", "tiktoken.model",
                                                  "tokenizer.tiktoken", "spiece.model", "vocab.txt", "tekken.json"};

}  // namespace fp4forge
