#pragma once
/**
 * How a planned seat is served (issue 51 #3, "stacks vLLM can start"): the vLLM image of the planned version, the
 * tool-call and reasoning parsers its family and chat template call for (model/vllm_parsers.h), the extra flags of
 * `vllm_args=`, and why vLLM could not start it at all. `plan --emit-compose` writes a stack only when no seat it
 * writes has a blocker (all or nothing); the plan itself reports them for every seat (`serving` in --json).
 *
 * Blockers, each with its fix: a folder without safetensors weights (config-only, sized by weights=); no tokenizer
 * file (vLLM's --tokenizer defaults to the model folder); no chat template (the stack serves
 * /v1/chat/completions); spec_tokens on a checkpoint whose MTP layers are gone (model/shape_rules.h check_mtp); a
 * config form the planned vLLM cannot build (model/vllm_config_forms.h). The checks are the ones doctor runs.
 */
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp4forge/kvplan/vllm_version.h"
#include "fp4forge/model/vllm_parsers.h"

namespace fp4forge {
class Checkpoint;
}

namespace fp4forge::kvplan {

struct SeatModel;

/** Why vLLM cannot start a seat, and what makes it start. */
struct StartBlocker {
  std::string kind;    ///< config-only | header-only | no-tokenizer | no-chat-template | mtp-missing | config-form |
                       ///< doctor-error (doctor_blockers)
  std::string reason;  ///< one clause, no trailing period
  std::string fix;     ///< what to run or change
  /** The folder sizes the seat but no stack starts from it (config-only, header-only): the plan is still the
   * seat's answer, said as "sized only", not as a seat that cannot start. */
  bool sized_only = false;
};

/** A parser flag the stack passes. */
struct ParserChoice {
  std::string name;            ///< "" = none
  std::string first_version;   ///< the first vLLM release that registers it ("0.10.0")
  bool inferred = false;       ///< that release is inferred (docs/cli/plan.md, "Parser flags")
  bool from_vllm_args = false; ///< given in vllm_args (the user's choice wins)
};

struct SeatServing {
  std::string image;                   ///< vllm/vllm-openai:vX.Y.Z of the planned version (--image replaces it)
  ParserChoice tool, reasoning;
  std::vector<std::string> extra_args;  ///< vllm_args= words, passed after plan's flags
  std::vector<StartBlocker> blockers;   ///< empty: vLLM can start it (as far as these checks know)
  std::vector<std::string> notes;       ///< parser choices and what probe will find
  std::string chat_template_source;     ///< where the template was read ("" none)
};

/** The stack passes a tool-call parser (chosen, or given in vllm_args): clients' tools work; otherwise the probe that
 * proves the seat skips its tools check (--no-tools). */
inline bool serves_tools(const SeatServing& s) { return !s.tool.name.empty() || s.tool.from_vllm_args; }

/** The repository of the image (`--image-repo` replaces it). */
inline constexpr std::string_view kVllmImageRepo = "vllm/vllm-openai";

/** The Docker Hub tag of a modelled version: vMAJOR.MINOR.PATCH; a version given as MAJOR.MINOR is its first
 * release, MAJOR.MINOR.0 (the code the rules were read from; docs/cli/plan.md, "Image"). */
std::string vllm_image_tag(const VllmRules& r);

/**
 * The parser of `kind` for `family` under `rules`, given the chat template's text: the first row of the table
 * whose markers the template holds and whose first release is at most the planned one; none otherwise. Appends a
 * note when the family has no tool parser, when the template renders no tool calls, or when the planned vLLM
 * predates the parser. (A template given by vllm_args=--chat-template is not read: no parser, and a note.)
 */
ParserChoice choose_parser(Family family, ParserKind kind, const VllmRules& rules, std::string_view chat_template,
                           std::vector<std::string>& notes);

/** Everything above for a loaded seat; `ck` is its opened checkpoint (the MTP check reads its tensor names). */
SeatServing plan_serving(const SeatModel& m, const Checkpoint& ck);

/** --emit-compose's last gate: every check doctor runs on the seat's folder (doctor::diagnose, with the planned vLLM
 * release as doctor's --vllm-version), each error a blocker of kind "doctor-error" (tryout R-H1: a stack was written
 * for a checkpoint with a NaN scale, which verify and doctor reject). Findings that vllm_args overrides (a
 * --tokenizer or --chat-template of the container's) are left out; a seat the plan already blocks is not checked. */
std::vector<StartBlocker> doctor_blockers(const SeatModel& m);

/** The vLLM flags of the seat's parsers and extra args, in order (after plan's engine flags). */
std::vector<std::string> serving_args(const SeatServing& s);

/** `serving` of a seat in plan's --json: {image, can_start, blockers: [{kind, reason, fix}], tool_call_parser,
 * reasoning_parser (null | {name, first_vllm, inferred, from_vllm_args}), vllm_args, chat_template, notes}. */
nlohmann::ordered_json to_json(const SeatServing& s);
/** The seat's "serving" line, a "cannot start" line per blocker and a note line per note (plan's text). */
std::string to_text(const SeatServing& s);

}  // namespace fp4forge::kvplan
