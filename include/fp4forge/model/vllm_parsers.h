#pragma once
/**
 * vLLM's output parsers per family: the `--tool-call-parser` that turns a family's tool-call text into OpenAI
 * `tool_calls`, and the `--reasoning-parser` that moves its thinking into `reasoning` (docs/cli/plan.md,
 * "Parser flags"). One table, keyed by family, one row per parser name, with the first vLLM release that
 * registers the name and where that was read (a boundary not read is marked inferred). `plan --emit-compose`
 * chooses from it (kvplan/serving.h); a stack without the family's tool parser fails `probe`'s tools check.
 *
 * A family may list several names of one kind, preferred first: the first whose chat-template markers match
 * and whose first release is at most the planned vLLM wins (Qwen3-Coder and Qwen3.5 templates write XML tool
 * calls, `<function=`, for qwen3_coder; older Qwen templates JSON in `<tool_call>`, for hermes). A row's
 * markers are substrings of the chat template, any of which selects it; a reasoning parser is given only to a
 * template that shows the model thinks (a parser on a model that never closes its thinking block turns every
 * answer into reasoning, and probe's prose check fails).
 */
#include <array>
#include <span>
#include <string_view>

#include "fp4forge/model/registry.h"

namespace fp4forge {

enum class ParserKind : std::uint8_t {
  TOOL,       ///< --tool-call-parser (with --enable-auto-tool-choice)
  REASONING,  ///< --reasoning-parser
};

struct VllmParser {
  Family family = Family::UNKNOWN;
  ParserKind kind = ParserKind::TOOL;
  std::string_view name;                    ///< the value vLLM's flag takes
  int first_major = 0, first_minor = 0, first_patch = 0;  ///< the first vLLM release that registers `name`
  std::array<std::string_view, 2> markers;  ///< chat-template substrings, any selects the row ("" unused)
  std::string_view source;                  ///< where the name and its first release were read
  bool inferred = false;                    ///< the first release is inferred, not read (source says how)
};

/** Every row, grouped by family, preferred rows first within a family and kind. */
std::span<const VllmParser> vllm_parsers() noexcept;

/** "tool-call" / "reasoning". */
std::string_view parser_kind_name(ParserKind k) noexcept;

}  // namespace fp4forge
