#pragma once
/**
 * What vLLM reads beside the weights to serve a folder (issue 29, "servable means servable"): a tokenizer (vLLM's
 * `--tokenizer` defaults to the model folder) and, for /v1/chat/completions, a chat template (transformers no
 * longer supplies a default one). doctor reports them (`missing-tokenizer`, `missing-chat-template`) and quantize
 * warns before writing an output that would lack them. Neither is an error: `--tokenizer` / `--chat-template`
 * can name them elsewhere, and a base model served for completions needs no template.
 */
#include <filesystem>
#include <string>

namespace fp4forge {

struct ServingFiles {
  bool tokenizer = false;      ///< a tokenizer file (tokenizer.json, tokenizer.model, vocab.json, a tiktoken file ...)
  std::string tokenizer_file;  ///< the first one found
  bool chat_template = false;  ///< chat_template.jinja / chat_template.json, or tokenizer_config.json:chat_template
  std::string chat_template_source;
};

/** Looks at `dir` (reads tokenizer_config.json, capped like every JSON file; a broken one counts as no template). */
ServingFiles serving_files(const std::filesystem::path& dir);

/** The tokenizer file names looked for, in order (for messages). */
inline constexpr const char* kTokenizerFiles[] = {"tokenizer.json", "tokenizer.model", "vocab.json", "tiktoken.model",
                                                  "tokenizer.tiktoken", "spiece.model", "vocab.txt", "tekken.json"};

}  // namespace fp4forge
