// How a planned seat is served: image, parsers, extra flags, and why vLLM could not start it (serving.h).
#include "fp4forge/kvplan/serving.h"

#include <filesystem>
#include <system_error>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fp4forge/core/dtype.h"
#include "fp4forge/diagnose/diagnose.h"
#include "fp4forge/kvplan/seat.h"
#include "fp4forge/kvplan/vllm_args.h"
#include "fp4forge/model/serving_files.h"
#include "fp4forge/model/synth.h"
#include "fp4forge/model/shape_rules.h"
#include "fp4forge/model/vllm_config_forms.h"
#include "fp4forge/safetensors/checkpoint.h"

namespace fp4forge::kvplan {
namespace {

std::string version_text(const VllmParser& p) {
  return fmt::format("{}.{}.{}", p.first_major, p.first_minor, p.first_patch);
}

bool template_matches(const VllmParser& p, std::string_view text) {
  bool any = false;
  for (std::string_view m : p.markers) {
    if (m.empty()) continue;
    any = true;
    if (text.find(m) != std::string_view::npos) return true;
  }
  return !any;
}

std::string markers_text(const VllmParser& p) {
  std::string s;
  for (std::string_view m : p.markers)
    if (!m.empty()) s += (s.empty() ? "'" : " or '") + std::string(m) + "'";
  return s;
}

constexpr std::string_view kToolsFail =
    "the stack serves no tools: probe's tools check would fail (tools-not-enabled), so its compose.yaml names the "
    "probe that proves it, with --no-tools (gateway swap and add take --no-tools too)";

/** The blockers a seat's folder and config give (see serving.h). */
void find_blockers(const SeatModel& m, const Checkpoint& ck, SeatServing& s) {
  const std::string dir = m.arg.dir.string();
  if (ck.tensors().empty())
    s.blockers.push_back({"config-only", fmt::format("DIR holds no safetensors weights (a config-only folder, sized by "
                                                     "{}): vLLM has nothing to load",
                                                     m.weights_from_log ? "its log's weights" : "weights="),
                          // not `quantize SRC DIR`: DIR exists, and quantize refuses an existing DST (issue 55 tryout)
                          "point the seat at the checkpoint itself (a release, or what fp4forge quantize SRC DST "
                          "writes: then --seat NAME=DST)",
                          true});
  if (header_only_synth(ck))
    s.blockers.push_back({"header-only", "DIR was written by `synth --header-only`: its tensor data reads as zeros, "
                          "so the seat would serve a model of zeros (doctor: header-only-weights)",
                          fmt::format("serve the release (or fp4forge quantize of it) instead of {}", dir), true});
  // Which serving files are missing is doctor's check (model/serving_files.h, the one home verify, inspect and
  // quantize's preflight call too); what the stack does about them is said here. A folder that only sizes the
  // seat is not what a stack serves: its serving files are the checkpoint's concern.
  FindingSink files;
  if (s.blockers.empty()) check_serving_files(m.arg.dir, "", files);
  for (const Finding& f : files.take()) {
    if (is_kind(f, finding_kind("missing-tokenizer")) && !has_vllm_flag(m.arg.vllm_args, "tokenizer"))
      s.blockers.push_back({"no-tokenizer",
                            "DIR holds no tokenizer file (tokenizer.json, tokenizer.model, vocab.json, "
                            "...): vLLM's --tokenizer defaults to the model folder and start-up fails (doctor: "
                            "missing-tokenizer)",
                            // DIR exists, and quantize refuses an existing DST (tryout U-H2): a new one, or a copy.
                            fmt::format("copy the release's tokenizer files into {}, or write a new checkpoint with "
                                        "them (fp4forge quantize SRC NEW_DST --tokenizer-from REF) and plan NEW_DST",
                                        dir)});
    if (is_kind(f, finding_kind("missing-chat-template")) && !has_vllm_flag(m.arg.vllm_args, "chat-template"))
      s.blockers.push_back({"no-chat-template",
                            "DIR holds no chat template (chat_template.jinja, chat_template.json "
                            "or tokenizer_config.json:chat_template): vLLM refuses /v1/chat/completions and probe's "
                            "chat checks fail (doctor: missing-chat-template)",
                            fmt::format("copy the release's chat template into {} (fp4forge quantize SRC NEW_DST "
                                        "--tokenizer-from REF writes a new checkpoint with it), or "
                                        "vllm_args=--chat-template PATH with a path inside the container",
                                        dir)});
  }
  if (m.arg.kv.spec_tokens > 0 && !ck.tensors().empty()) {
    ShapeContext ctx;
    ctx.dir = ck.dir();
    ctx.config = ck.config();
    ctx.tensors = tensor_metas(ck);
    FindingSink found;
    if (init_shape_context(ctx).ok()) check_mtp(ctx, found);
    for (const auto& f : found.take())
      if (is_kind(f, finding_kind("mtp-declared-missing")))
        s.blockers.push_back({"mtp-missing", fmt::format("spec_tokens={} asks for MTP speculative decoding, but {} "
                                                         "(doctor: mtp-declared-missing)", m.arg.kv.spec_tokens,
                                                         f.actual),
                              fmt::format("fp4forge doctor {} --fix --mtp-from RELEASE splices the MTP layers back from "
                                          "the original release, or drop spec_tokens", dir)});
  }
  if (const auto form = vllm_config_form(m.info)) {
    const bool builds = form->min_minor >= 0 && (m.rules.major > 0 || m.rules.minor >= form->min_minor);
    if (!builds)
      s.blockers.push_back({"config-form",
                            form->min_minor < 0
                                ? fmt::format("{}: no vLLM release builds it (doctor: {})", form->what, form->kind)
                                : fmt::format("{}: vLLM {} cannot build it, 0.{} and newer can (doctor: {})",
                                              form->what, m.rules.version, form->min_minor, form->kind),
                            form->min_minor < 0 ? std::string(form->fix)
                                                : fmt::format("{}; fp4forge doctor {} --fix --vllm-version {} writes "
                                                              "the flat keys for it",
                                                              form->fix, dir, m.rules.version)});
  }
}

}  // namespace

std::vector<StartBlocker> doctor_blockers(const SeatModel& m) {
  std::vector<StartBlocker> out;
  if (!m.serving.blockers.empty()) return out;  // said already; a sized-only folder is not a checkpoint to serve
  // A folder without weights is config-only, a blocker of its own (find_blockers): doctor's checks are for a
  // checkpoint a stack serves.
  if (!holds_weight_files(m.arg.dir)) return out;
  doctor::DiagnoseOptions o;
  if (m.rules.major == 0) o.vllm_minor = m.rules.minor;
  const std::string dir = m.arg.dir.string();
  auto d = doctor::diagnose(m.arg.dir, o);
  if (!d) {
    out.push_back({"doctor-error", fmt::format("doctor's checks could not run: {}", d.error().describe()),
                   fmt::format("fp4forge doctor {} says the same; fix the folder, then plan again", dir)});
    return out;
  }
  const bool own_tokenizer = has_vllm_flag(m.arg.vllm_args, "tokenizer");
  const bool own_template = has_vllm_flag(m.arg.vllm_args, "chat-template");
  for (const Finding& f : (*d)->findings) {
    if (f.severity != Severity::ERROR) continue;
    if (own_tokenizer && (f.kind.starts_with("tokenizer-") || f.kind == "missing-tokenizer")) continue;
    if (own_template && f.kind.find("chat-template") != std::string::npos) continue;
    out.push_back({"doctor-error", fmt::format("doctor: {}: {}", f.kind, f.message),
                   f.fix            ? fmt::format("fp4forge doctor {} --fix ({})", dir, *f.fix)
                   : f.hint.empty() ? fmt::format("see fp4forge doctor {}", dir)
                                    : f.hint});
  }
  return out;
}

std::string vllm_image_tag(const VllmRules& r) { return fmt::format("v{}.{}.{}", r.major, r.minor, r.patch); }

ParserChoice choose_parser(Family family, ParserKind kind, const VllmRules& rules, std::string_view chat_template,
                           std::vector<std::string>& notes) {
  const std::string_view what = parser_kind_name(kind);
  const VllmParser* too_new = nullptr;
  bool any_row = false, any_marker = false;
  for (const VllmParser& p : vllm_parsers()) {
    if (p.family != family || p.kind != kind) continue;
    any_row = true;
    if (!template_matches(p, chat_template)) continue;
    // Below a preferred parser's first release, only an older name of the same format stands in for it (GLM's
    // glm4_moe for glm45); hermes never parses Qwen's XML tool calls.
    if (too_new != nullptr && p.markers != too_new->markers) continue;
    any_marker = true;
    if (!at_least(rules, p.first_major, p.first_minor, p.first_patch)) {
      if (too_new == nullptr) too_new = &p;
      continue;
    }
    return ParserChoice{std::string(p.name), version_text(p), p.inferred, false};
  }
  const std::string family_text(family_name(family));
  if (too_new != nullptr) {
    notes.push_back(fmt::format("vLLM {} has no '{}' {} parser (first in {}{}): the stack passes no {} flag{}; plan "
                                "with vllm_version={}.{} or newer for it", rules.version, too_new->name, what,
                                version_text(*too_new), too_new->inferred ? ", inferred" : "", what,
                                kind == ParserKind::TOOL ? fmt::format(", so {}", kToolsFail) : std::string(),
                                too_new->first_major, too_new->first_minor));
  } else if (kind == ParserKind::TOOL && !any_row) {
    notes.push_back(fmt::format("no vLLM tool-call parser is recorded for family {}: the stack has no "
                                "--enable-auto-tool-choice, so {}; if your vLLM has one for this model, add "
                                "vllm_args=--enable-auto-tool-choice --tool-call-parser NAME", family_text, kToolsFail));
  } else if (kind == ParserKind::TOOL && !any_marker) {
    std::string markers;
    for (const VllmParser& p : vllm_parsers())
      if (p.family == family && p.kind == kind) markers += (markers.empty() ? "" : ", ") + markers_text(p);
    notes.push_back(fmt::format("the chat template renders no tool calls (none of {} in it): the stack passes no "
                                "tool-call parser, so {}; serve a template that renders tools "
                                "(vllm_args=--chat-template PATH) with vllm_args=--enable-auto-tool-choice "
                                "--tool-call-parser NAME", markers, kToolsFail));
  }
  return {};
}

SeatServing plan_serving(const SeatModel& m, const Checkpoint& ck) {
  SeatServing s;
  s.image = fmt::format("{}:{}", kVllmImageRepo, vllm_image_tag(m.rules));
  s.extra_args = m.arg.vllm_args;
  const ServingFiles sf = serving_files(m.arg.dir);
  s.chat_template_source = sf.chat_template_source;
  find_blockers(m, ck, s);
  s.tool.from_vllm_args = has_vllm_flag(s.extra_args, "tool-call-parser");
  s.reasoning.from_vllm_args = has_vllm_flag(s.extra_args, "reasoning-parser");
  if (has_vllm_flag(s.extra_args, "chat-template")) {
    // The template is a path inside the container: which formats it renders is unknown here.
    if (!s.tool.from_vllm_args || !s.reasoning.from_vllm_args)
      s.notes.push_back("the chat template comes from vllm_args, so its tool-call and thinking formats are not read "
                        "here: plan passes no parser flags; add vllm_args=--enable-auto-tool-choice "
                        "--tool-call-parser NAME (and --reasoning-parser NAME for a thinking model)");
    return s;
  }
  if (!sf.chat_template) return s;  // a blocker already: no template, no format to read
  if (!s.tool.from_vllm_args)
    s.tool = choose_parser(m.info.family, ParserKind::TOOL, m.rules, sf.chat_template_text, s.notes);
  if (!s.reasoning.from_vllm_args)
    s.reasoning = choose_parser(m.info.family, ParserKind::REASONING, m.rules, sf.chat_template_text, s.notes);
  return s;
}

std::vector<std::string> serving_args(const SeatServing& s) {
  std::vector<std::string> v;
  const bool tools = serves_tools(s);
  if (tools && !has_vllm_flag(s.extra_args, "enable-auto-tool-choice")) v.push_back("--enable-auto-tool-choice");
  if (!s.tool.name.empty()) v.insert(v.end(), {"--tool-call-parser", s.tool.name});
  if (!s.reasoning.name.empty()) v.insert(v.end(), {"--reasoning-parser", s.reasoning.name});
  v.insert(v.end(), s.extra_args.begin(), s.extra_args.end());
  return v;
}

}  // namespace fp4forge::kvplan

namespace fp4forge::kvplan {

nlohmann::ordered_json to_json(const SeatServing& s) {
  auto parser = [](const ParserChoice& p) {
    if (p.from_vllm_args) return nlohmann::ordered_json{{"name", nullptr}, {"from_vllm_args", true}};
    if (p.name.empty()) return nlohmann::ordered_json(nullptr);
    return nlohmann::ordered_json{{"name", p.name}, {"first_vllm", p.first_version}, {"inferred", p.inferred},
                                  {"from_vllm_args", false}};
  };
  nlohmann::ordered_json blockers = nlohmann::ordered_json::array();
  for (const auto& b : s.blockers)
    blockers.push_back({{"kind", b.kind}, {"reason", b.reason}, {"fix", b.fix}, {"sized_only", b.sized_only}});
  return {{"image", s.image},
          {"can_start", s.blockers.empty()},
          {"blockers", std::move(blockers)},
          {"tool_call_parser", parser(s.tool)},
          {"reasoning_parser", parser(s.reasoning)},
          {"vllm_args", s.extra_args},
          {"chat_template", s.chat_template_source.empty() ? nlohmann::ordered_json(nullptr)
                                                           : nlohmann::ordered_json(s.chat_template_source)},
          {"notes", s.notes}};
}

std::string to_text(const SeatServing& s) {
  auto parser = [](const ParserChoice& p, std::string_view flag) {
    if (p.from_vllm_args) return fmt::format("{} from vllm_args", flag);
    if (p.name.empty()) return fmt::format("no {}", flag);
    return fmt::format("{} {} (vLLM >= {}{})", flag, p.name, p.first_version, p.inferred ? ", inferred" : "");
  };
  std::string o = fmt::format("  serving          {}; {}; {}", s.image, parser(s.tool, "--tool-call-parser"),
                              parser(s.reasoning, "--reasoning-parser"));
  if (!s.extra_args.empty()) o += fmt::format("; vllm_args {}", fmt::join(s.extra_args, " "));
  o += "\n";
  for (const auto& b : s.blockers)
    o += b.sized_only ? fmt::format("  sized only       {}: this plan sizes the seat, no stack starts from DIR; to serve "
                                    "it: {}\n", b.reason, b.fix)
                      : fmt::format("  cannot start     {}; fix: {}\n", b.reason, b.fix);
  for (const auto& n : s.notes) o += fmt::format("  note: {}\n", n);
  return o;
}

}  // namespace fp4forge::kvplan
