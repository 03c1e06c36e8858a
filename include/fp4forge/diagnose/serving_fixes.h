#pragma once
/**
 * The serving-file fixes of doctor (docs/cli/doctor.md, "Finding kinds"), as pure edits of a file's text: doctor
 * --fix writes them into the checkpoint it fixes (with backups), quantize writes them into its output (the
 * output's serving files are what doctor --fix would leave; the source is never touched).
 *
 * - `missing-preprocessor-config`: preprocessor_config.json is processor_config.json's image_processor section,
 *   verbatim (values and number spellings as in the file, in its style), ending with a newline as transformers
 *   writes every JSON file.
 * - `tokenizer-truncation`: tokenizer.json with `truncation` and `padding` set to null (what transformers'
 *   save_pretrained writes).
 */
#include <optional>
#include <string>

#include "fp4forge/core/error.h"
#include "fp4forge/util/json_edit.h"

namespace fp4forge::doctor {

/** preprocessor_config.json derived from processor_config.json; nullopt when it has no image_processor object. */
std::optional<std::string> derive_preprocessor_config(const JsonDocument& processor_config);

/** Sets tokenizer.json's non-null `truncation` / `padding` to null; false when neither was set (nothing changed). */
Result<bool> clear_tokenizer_truncation(JsonDocument& tokenizer_json);

}  // namespace fp4forge::doctor
