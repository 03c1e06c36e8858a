#pragma once
/**
 * The seat key `vllm_args=`: extra vLLM server flags a stack passes through (docs/cli/plan.md, "Seat keys").
 * Its value is the last key of a seat (everything after `vllm_args=` is the value, commas and colons included)
 * and is split into words much as a shell splits them: whitespace separates words; a word that starts with '
 * runs to the next ' (its text literal), one that starts with " to the next unescaped " (\" and \\ inside); a
 * quote inside a word is literal (JSON such as {"temperature":0.6} passes as written); a backslash outside quotes
 * escapes the next character.
 *
 * A flag that contradicts what plan sets or models is refused with the seat key that sets it (`--max-model-len`:
 * max_model_len=, `--gpu-memory-utilization`: gpu_memory_utilization=, ...), or with the reason when plan has no
 * key for it (`--pipeline-parallel-size`, `--kv-cache-memory-bytes`, `--cpu-offload-gb`: the memory they change is
 * not modelled). Flags plan derives from the checkpoint are the user's when given: `--tool-call-parser`,
 * `--reasoning-parser`, `--chat-template`, `--tokenizer`.
 */
#include <string>
#include <string_view>
#include <vector>

#include "fp4forge/core/error.h"

namespace fp4forge::kvplan {

/** The words of `text` (shell rules above). USAGE on an unterminated quote, a trailing backslash or a control
 * character; a refused flag (above) is a USAGE error naming the key to use instead. */
Result<std::vector<std::string>> parse_vllm_args(std::string_view text);

/** The flag a word names, as vLLM matches it: without leading dashes, `_` as `-`, cut at `=` and at `.` (vLLM's
 * `--speculative-config.method`); "" for a word that is not a flag (a value). `-tp 2` is "tensor-parallel-size". */
std::string vllm_flag_name(std::string_view word);

/** True when `args` holds flag `name` (as vllm_flag_name spells it). */
bool has_vllm_flag(const std::vector<std::string>& args, std::string_view name);

}  // namespace fp4forge::kvplan
