// vLLM's tool-call and reasoning parsers per family (vllm_parsers.h; the table with its sources is in
// docs/cli/plan.md, "Parser flags"). Every name is registered in vLLM main at 0064cc9cb1
// (vllm/tool_parsers/__init__.py, vllm/reasoning/__init__.py) except glm4_moe, the GLM-4.5 name of 0.10.0.
#include "fp4forge/model/vllm_parsers.h"

namespace fp4forge {
namespace {

using enum ParserKind;

// Sources, shared by rows.
constexpr std::string_view kHermesMistral =
    "vllm#5649 (merged 2024-09-04, first in 0.6.0); the 0.6.2 parser list is 'mistral', 'hermes' (vllm#9312)";
constexpr std::string_view kLlama3 =
    "documented in docs.vllm.ai/en/v0.8.4/features/tool_calling; absent from the 0.6.2 list (vllm#9312): "
    "0.8.0 - 0.8.3 inferred";
constexpr std::string_view kList0100 =
    "the 0.10.0 parser list (zai-org/GLM-4.5#58: deepseek_v3, glm4_moe, hermes, kimi_k2, llama4_json, llama3_json, "
    "mistral, qwen3_coder, ...)";
constexpr std::string_view kQwen3Coder =
    "the 0.10.0 parser list (zai-org/GLM-4.5#58) and docs.vllm.ai/en/v0.10.0 api qwen3coder_tool_parser; "
    "Qwen3-Coder came out after 0.9.2, so 0.10.0 is the first (inferred)";
constexpr std::string_view kQwen3Reasoning =
    "vllm#17369 (qwen3 reasoning parser, merged 2025-04-30, after the 0.8.5 tag: first in 0.9.0, inferred); "
    "listed as deepseek_r1, granite, qwen3 before 0.10 (zai-org/GLM-4.5#4)";
constexpr std::string_view kGlm45 =
    "the 0.10.1 tool parser list includes glm45 (vllm-project/recipes#51); 0.10.0 takes glm4_moe and refuses glm45 "
    "(zai-org/GLM-4.5#4, #5, #58)";
constexpr std::string_view kGlm45Reasoning =
    "0.10.0 refuses --reasoning-parser glm45 (zai-org/GLM-4.5#4); glm45 works in 0.10.1.1 (vllm-project/recipes#27): "
    "0.10.1 inferred from the tool parser of the same name";
constexpr std::string_view kGlm4Moe = "0.10.0 takes glm4_moe for GLM-4.5's tool and reasoning parsers (zai-org/GLM-4.5#5, #58)";
constexpr std::string_view kLlama4Json =
    "the 0.10.0 parser list (zai-org/GLM-4.5#58); register_module(\"llama4_json\") on Llama3JsonToolParser in "
    "docs.vllm.ai/en/v0.10.2 api llama_tool_parser; releases before 0.10.0 not read (inferred)";
constexpr std::string_view kDeepseekV3 =
    "vllm#18375 serves DeepSeek-V3-0324 with --tool-call-parser deepseek_v3 on 0.8.5.post1; 0.8.0 - 0.8.4 not read "
    "(inferred)";
constexpr std::string_view kOpenai =
    "absent from the 0.10.1 list (vllm-project/recipes#51); 0.10.2 or later (vllm-project/recipes#83)";
constexpr std::string_view kGemma4 =
    "listed among vLLM 0.19.0's parsers by a Gemma 4 deployment (kenrollins.github.io gemma-forge, 'vllm-tool-call-"
    "parser'); docs.vllm.ai/en/v0.22.1 api gemma4_tool_parser; releases before 0.19.0 not read (inferred)";
constexpr std::string_view kGemma4Reasoning =
    "the Gemma 4 vLLM recipe serves with --reasoning-parser gemma4 --tool-call-parser gemma4 (vllm-project/recipes "
    "Google/Gemma4.md); taken to ship with the tool parser in 0.19.0 (inferred)";

// Markers. Qwen: XML tool calls (`<function=`) or JSON in `<tool_call>`; the Qwen3 / Qwen3.5 / GLM-4.5 / Gemma 4
// templates that think read `enable_thinking` (Qwen3-Instruct-2507 and Qwen2.5 templates do not).
constexpr std::array<std::string_view, 2> kTools{"tools", ""};
constexpr std::array<std::string_view, 2> kQwenXml{"<function=", ""};
constexpr std::array<std::string_view, 2> kQwenJson{"<tool_call>", ""};
constexpr std::array<std::string_view, 2> kThinks{"enable_thinking", ""};
constexpr std::array<std::string_view, 2> kDeepseekTools{"tool\xE2\x96\x81" "call", ""};  // <｜tool▁call▁begin｜>

constexpr VllmParser row(Family f, ParserKind k, std::string_view name, int major, int minor, int patch,
                         std::array<std::string_view, 2> markers, std::string_view source, bool inferred) {
  return VllmParser{f, k, name, major, minor, patch, markers, source, inferred};
}

constexpr auto kQwenTool = [](Family f) {
  return std::array{row(f, TOOL, "qwen3_coder", 0, 10, 0, kQwenXml, kQwen3Coder, true),
                    row(f, TOOL, "hermes", 0, 6, 0, kQwenJson, kHermesMistral, false)};
};

constexpr VllmParser kRows[] = {
    row(Family::LLAMA, TOOL, "llama3_json", 0, 8, 0, kTools, kLlama3, true),
    row(Family::MISTRAL, TOOL, "mistral", 0, 6, 0, kTools, kHermesMistral, false),
    row(Family::MIXTRAL, TOOL, "mistral", 0, 6, 0, kTools, kHermesMistral, false),
    row(Family::MISTRAL3, TOOL, "mistral", 0, 6, 0, kTools, kHermesMistral, false),
    row(Family::QWEN2, TOOL, "hermes", 0, 6, 0, kQwenJson, kHermesMistral, false),
    row(Family::QWEN2_MOE, TOOL, "hermes", 0, 6, 0, kQwenJson, kHermesMistral, false),
    kQwenTool(Family::QWEN3)[0], kQwenTool(Family::QWEN3)[1],
    row(Family::QWEN3, REASONING, "qwen3", 0, 9, 0, kThinks, kQwen3Reasoning, true),
    kQwenTool(Family::QWEN3_MOE)[0], kQwenTool(Family::QWEN3_MOE)[1],
    row(Family::QWEN3_MOE, REASONING, "qwen3", 0, 9, 0, kThinks, kQwen3Reasoning, true),
    kQwenTool(Family::QWEN3_NEXT)[0], kQwenTool(Family::QWEN3_NEXT)[1],
    row(Family::QWEN3_NEXT, REASONING, "qwen3", 0, 9, 0, kThinks, kQwen3Reasoning, true),
    kQwenTool(Family::QWEN3_5)[0], kQwenTool(Family::QWEN3_5)[1],
    row(Family::QWEN3_5, REASONING, "qwen3", 0, 9, 0, kThinks, kQwen3Reasoning, true),
    kQwenTool(Family::QWEN3_5_MOE)[0], kQwenTool(Family::QWEN3_5_MOE)[1],
    row(Family::QWEN3_5_MOE, REASONING, "qwen3", 0, 9, 0, kThinks, kQwen3Reasoning, true),
    kQwenTool(Family::QWEN3_VL)[0], kQwenTool(Family::QWEN3_VL)[1],
    row(Family::QWEN3_VL, REASONING, "qwen3", 0, 9, 0, kThinks, kQwen3Reasoning, true),
    kQwenTool(Family::QWEN3_VL_MOE)[0], kQwenTool(Family::QWEN3_VL_MOE)[1],
    row(Family::QWEN3_VL_MOE, REASONING, "qwen3", 0, 9, 0, kThinks, kQwen3Reasoning, true),
    row(Family::DEEPSEEK_V3, TOOL, "deepseek_v3", 0, 8, 5, kDeepseekTools, kDeepseekV3, true),
    row(Family::GLM4_MOE, TOOL, "glm45", 0, 10, 1, kTools, kGlm45, false),
    row(Family::GLM4_MOE, TOOL, "glm4_moe", 0, 10, 0, kTools, kGlm4Moe, false),
    row(Family::GLM4_MOE, REASONING, "glm45", 0, 10, 1, kThinks, kGlm45Reasoning, true),
    row(Family::GLM4_MOE, REASONING, "glm4_moe", 0, 10, 0, kThinks, kGlm4Moe, false),
    row(Family::LLAMA4, TOOL, "llama4_json", 0, 10, 0, kTools, kLlama4Json, true),
    row(Family::GPT_OSS, TOOL, "openai", 0, 10, 2, kTools, kOpenai, false),
    row(Family::GEMMA4, TOOL, "gemma4", 0, 19, 0, kTools, kGemma4, true),
    row(Family::GEMMA4, REASONING, "gemma4", 0, 19, 0, kThinks, kGemma4Reasoning, true),
};

}  // namespace

std::span<const VllmParser> vllm_parsers() noexcept { return kRows; }

std::string_view parser_kind_name(ParserKind k) noexcept {
  switch (k) {
    case ParserKind::TOOL: return "tool-call";
    case ParserKind::REASONING: return "reasoning";
  }
  return "?";
}

}  // namespace fp4forge
