#pragma once
/**
 * What vLLM reads beside the weights to serve a folder (issue 29, "servable means servable"): a tokenizer (vLLM's
 * `--tokenizer` defaults to the model folder) and, for /v1/chat/completions, a chat template (transformers no
 * longer supplies a default one); for a multimodal model, its processor files.
 *
 * The one home of the serving-file check: `check_serving_files` writes doctor's `missing-tokenizer` (an error:
 * vLLM's start-up fails to load a tokenizer from the folder), `missing-chat-template` (a warning: a base model
 * served for completions needs none, and `--chat-template` can name one) and `tokenizer-unchecked` (a `--tokenizer`
 * source that cannot be read here). doctor, verify, inspect and quantize's preflight (through doctor's checks)
 * all call it, and plan --emit-compose refuses a seat by it.
 */
#include <cstddef>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "fp4forge/core/error.h"
#include "fp4forge/core/finding_sink.h"

namespace fp4forge {

/** Files a folder will hold that are read from elsewhere: file name -> the path it is read from. quantize's
 * preflight checks its output's serving files this way before writing them (--tokenizer-from / --processor-from
 * take them from a reference release). */
using FileOverlay = std::map<std::string, std::filesystem::path, std::less<>>;

/** Where `name` beside `dir` is read from: the overlay's path for it, else `dir / name`. */
std::filesystem::path serving_path(const std::filesystem::path& dir, std::string_view name,
                                   const FileOverlay* overlay = nullptr);

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

/** Looks at `dir` (and the overlay) (reads tokenizer_config.json, capped like every JSON file; a broken one counts
 * as no template). */
ServingFiles serving_files(const std::filesystem::path& dir, const FileOverlay* overlay = nullptr);

/** The tokenizer file names whose presence makes a tokenizer, in order (for messages). */
inline constexpr const char* kTokenizerFiles[] = {"tokenizer.json", "tokenizer.model", "vocab.json", "tiktoken.model",
                                                  "tokenizer.tiktoken", "spiece.model", "vocab.txt", "tekken.json"};

/** Every file of a tokenizer as a release ships it: the tokenizer files above and their companions (config,
 * special tokens, merges, added tokens, chat template). inspect lists them; quantize --tokenizer-from copies the
 * ones the source lacks. */
inline constexpr const char* kTokenizerGroupFiles[] = {
    "tokenizer.json",  "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja", "chat_template.json",
    "tokenizer.model", "vocab.json",            "merges.txt",              "added_tokens.json",   "tiktoken.model",
    "tokenizer.tiktoken", "spiece.model",       "vocab.txt",               "tekken.json"};

/** The processor files of a multimodal release (inspect lists them; quantize --processor-from copies the missing
 * ones). */
inline constexpr const char* kProcessorFiles[] = {"processor_config.json", "preprocessor_config.json",
                                                  "video_preprocessor_config.json", "feature_extractor_config.json"};

/** True when `name` is in `kTokenizerGroupFiles` / `kProcessorFiles`. */
bool is_tokenizer_group_file(std::string_view name) noexcept;
bool is_processor_file(std::string_view name) noexcept;

/**
 * Where vLLM reads the tokenizer from: `dir` (vLLM's default, `from` empty), the folder `from`, or the cached
 * snapshot of the repo id `from` (util/hf_cache.h). A repo id not in the cache gives an empty path (reported as
 * `tokenizer-unchecked`, never guessed); a name that is neither a folder nor a repo id, or is a file, is USAGE.
 * `option` names the flag in messages (`--tokenizer`).
 */
Result<std::filesystem::path> tokenizer_source(const std::filesystem::path& dir, const std::string& from,
                                               std::string_view option = "--tokenizer");

/**
 * doctor's serving-file findings for a folder whose tokenizer is read from `tokenizer_dir` (tokenizer_source's
 * answer; empty: `tokenizer-unchecked`). `from` is the --tokenizer argument as given ("" = the model folder),
 * `command` the command messages name in their hint (`doctor`, `verify`). Appends `tokenizer-unchecked`,
 * `missing-chat-template` and `missing-tokenizer`.
 */
void check_serving_files(const std::filesystem::path& tokenizer_dir, const std::string& from,
                         FindingSink& out, const FileOverlay* overlay = nullptr,
                         std::string_view command = "doctor");

}  // namespace fp4forge
