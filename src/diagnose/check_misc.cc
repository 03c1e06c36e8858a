// Architecture strings and layout (architectures.md §3.4; F30, F31), declared modalities, MTP (F8).
#include <algorithm>
#include <charconv>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "checks.h"
#include "fp4forge/model/classify.h"
#include "fp4forge/util/strings.h"

namespace fp4forge::doctor {
namespace {

using util::ends_with;

/** vLLM's registered architecture strings of the family (the registry). */
const std::vector<std::string_view>& registered(Family f) { return family_spec(f).architectures; }

bool is_mtp_arch(Family f, std::string_view a) {
  const auto& m = family_spec(f).mtp_architectures;
  return std::find(m.begin(), m.end(), a) != m.end();
}

std::string wrapper_arch_of(Family f) { return std::string(family_spec(f).wrapper_architecture); }

/** Whether any tensor classifies as `role` (VISION counts vision projectors too; AUDIO its projector),
 * whatever prefix the family uses (`model.visual.`, `vision_tower.`, `vision_model.`, ...). */
bool has_tower(const Context& ctx, Role role) {
  for (const auto& [name, meta] : ctx.tensors) {
    const TensorClass c = classify(name, meta.shape, ctx.info);
    if (c.role == role) return true;
    if (c.role == Role::PROJECTOR) {
      const bool audio = name.find("audio") != std::string::npos;
      if ((role == Role::AUDIO) == audio) return true;
    }
  }
  return false;
}

}  // namespace

void check_architecture(const Context& ctx, FindingSink& out) {
  const Json& cfg = ctx.config;
  std::vector<std::string> archs;
  if (auto it = cfg.find("architectures"); it != cfg.end() && it->is_array())
    for (const auto& a : *it)
      if (a.is_string()) archs.push_back(a.get<std::string>());
  const Family fam = ctx.info.family;
  const auto reg = registered(fam);

  if (archs.empty()) {
    out.add(
        finding_kind("unknown-architecture"),
        {.severity = Severity::WARNING,
         .message = "config.json has no 'architectures' list; vLLM then resolves the model class from model_type or "
                    "falls back to the Transformers backend",
         .key = "architectures",
         .expected = reg.empty() ? "a registered architecture" : fmt::format("one of {}", fmt::join(reg, ", ")),
         .actual = "absent",
         .hint = "write the architecture the checkpoint was saved with"});
  } else if (fam == Family::UNKNOWN) {
    FindingFields f;
    f.severity = Severity::WARNING;
    f.key = "architectures";
    f.actual = fmt::format("{} (model_type '{}')", fmt::join(archs, ", "), ctx.info.model_type);
    std::vector<std::string_view> names;
    for (const auto& spec : families()) names.push_back(spec.display);
    f.expected = fmt::format("a family in fp4forge's registry ({})", fmt::join(names, ", "));
    f.message = fmt::format("architecture {} is not in fp4forge's family table: config-vs-shape checks are "
                            "skipped (vLLM may still support it)", f.actual);
    out.add(finding_kind("unknown-architecture"), std::move(f));
  } else {
    for (const auto& a : archs) {
      if (std::find(reg.begin(), reg.end(), a) != reg.end()) {
        if (a == "Qwen3_5ForCausalLM" || a == "Qwen3_5MoeForCausalLM") {
          FindingFields f;
          // With a target release (doctor --vllm-version) below the first that registers it: an error.
          const bool too_old = ctx.vllm_minor >= 0 && ctx.vllm_minor < 28;
          f.severity = too_old ? Severity::ERROR : Severity::WARNING;
          f.key = "architectures";
          f.actual = a;
          f.expected = "vLLM ≥ 0.28";
          f.message = fmt::format(
              "{} is registered in vLLM only from ≈0.28 (certain: missing in ≤0.26; 0.27 unconfirmed); without it "
              "suffix matching silently picks {}, which builds an empty vision tower and crashes in the startup "
              "dummy-image profile run",
              a, wrapper_arch_of(fam));
          if (too_old) f.message += fmt::format(" (the target, vLLM 0.{}, is below it)", ctx.vllm_minor);
          f.hint = "serve with vLLM ≥ 0.28, or keep the original *ForConditionalGeneration checkpoint";
          out.add(finding_kind("architecture-needs-recent-vllm"), std::move(f));
        }
        continue;
      }
      FindingFields f;
      // Sure only for an MTP class named as the main model; any other class may be one vLLM registers that the
      // family table does not list (wrappers such as LLaVA or Idefics3 over a llama text model): a warning.
      f.severity = is_mtp_arch(fam, a) ? Severity::ERROR : Severity::WARNING;
      f.key = "architectures";
      f.actual = a;
      f.expected = fmt::format("one of {}", fmt::join(reg, ", "));
      if (is_mtp_arch(fam, a))
        f.message = fmt::format("'{}' is a speculative-decoding (MTP) architecture, not a main model for family {}; "
                                "vLLM registers {} for it", a, family_name(fam), f.expected);
      else
        f.message = fmt::format("'{}' is not among the classes fp4forge's registry lists for family {} ({}); vLLM "
                                "may still register it (its list grows every release: a multimodal wrapper over this "
                                "text model, a newer class); if it does not, vLLM falls back to the Transformers "
                                "backend or to suffix matching", a, family_name(fam), f.expected);
      f.hint = is_mtp_arch(fam, a) ? fmt::format("set architectures to {}", f.expected)
                                   : std::string("check that your vLLM version registers this class; if not, set "
                                                 "architectures to one it does");
      out.add(finding_kind("unknown-architecture"), std::move(f));
    }
    if (archs.size() > 1) {
      FindingFields f;
      f.severity = Severity::WARNING;
      f.key = "architectures";
      f.actual = fmt::format("{}", fmt::join(archs, ", "));
      f.expected = "exactly one architecture";
      f.message = fmt::format("architectures lists {} entries ({}); vLLM uses the first one it supports", archs.size(),
                              f.actual);
      out.add(finding_kind("unknown-architecture"), std::move(f));
    }
  }

  // Wrapper vs flat (§3.4, F30).
  if (ctx.tensors.empty() || archs.empty()) return;
  const std::string& a = archs.front();
  const bool wrap_keys = ctx.any_with_prefix("model.language_model.") || ctx.any_with_prefix("language_model.model.");
  const bool flat_keys = ctx.any_with_prefix("model.layers.");
  const bool vision = has_tower(ctx, Role::VISION);
  constexpr const FindingKind& kind = finding_kind("wrapper-flat-mismatch");
  FindingFields f;
  // Without a registry row the layout rule is a guess: say so, never claim the checkpoint is wrong.
  f.severity = fam == Family::UNKNOWN ? Severity::WARNING : Severity::ERROR;
  f.key = "architectures";
  f.actual = a;
  // A family fp4forge has no row for may store its text flat beside its tower (Step-3.x, Hunyuan-VL): only a
  // wrapper class with no tower at all is the re-save symptom there.
  if (ends_with(a, "ForConditionalGeneration") && flat_keys && !wrap_keys && (fam != Family::UNKNOWN || !vision)) {
    f.tensors = {"model.layers.*"};
    f.expected = "model.language_model.* keys (and a vision tower) for a *ForConditionalGeneration checkpoint";
    if (fam == Family::GEMMA4)
      f.message = fmt::format("architectures says {} but the tensors are flat model.layers.*{}: transformers 5.17 "
                              "raises nothing but reports the weights MISSING/UNEXPECTED and leaves them random; "
                              "vLLM maps the text via its model→language_model.model catch-all, then fails its "
                              "strict 'weights not initialized' check on the missing vision tower",
                              a, vision ? "" : " with no vision tower");
    else if (fam == Family::QWEN3_5 || fam == Family::QWEN3_5_MOE || fam == Family::QWEN3_VL ||
             fam == Family::QWEN3_VL_MOE)
      f.message = fmt::format("architectures says {} but the tensors are flat model.layers.*: transformers falls back "
                              "to a default wrapper config and fails with a size mismatch; vLLM's Qwen3-VL mapper "
                              "has no model. catch-all (only model.visual., model.language_model., lm_head.), so "
                              "loading fails", a);
    else  // what a wrapper class expects, said without a loader's exact behaviour (not sourced for this family)
      f.message = fmt::format("architectures says {} but the tensors are flat model.layers.*: a "
                              "*ForConditionalGeneration class expects its text weights under model.language_model.* "
                              "beside a vision tower, so loaders of that class report these weights missing or "
                              "unexpected", a);
    f.hint = "this is a multimodal model re-saved through a text-only class (F30): restore the original "
             "checkpoint, or declare the text-only *ForCausalLM with a flat config";
    out.add(kind, std::move(f));
  } else if (ends_with(a, "ForCausalLM") && wrap_keys) {
    f.tensors = {"model.language_model.*"};
    f.expected = fmt::format("{} for model.language_model.* keys", wrapper_arch_of(fam).empty() ? "a *ForConditionalGeneration class" : wrapper_arch_of(fam));
    if (fam == Family::GEMMA4)
      f.message = fmt::format("architectures says {} but the tensors use the wrapper prefix model.language_model.*: "
                              "vLLM's Gemma4ForCausalLM strips language_model. and skips the towers (loads), but "
                              "transformers 5.17 has no prefix conversion for gemma4 and silently leaves every text "
                              "weight MISSING and random", a);
    else if (fam == Family::QWEN3_5 || fam == Family::QWEN3_5_MOE)
      f.message = fmt::format("architectures says {} but the tensors use model.language_model.*: transformers "
                              "converts the prefix and loads, but vLLM registers {} only from ≈0.28 and its loader "
                              "has no language_model remap, so it fails with an unexpected-weight error", a, a);
    else
      f.message = fmt::format("architectures says {} (a flat text class) but the tensors use the wrapper prefix "
                              "model.language_model.*; loaders of this class expect model.layers.*", a);
    f.hint = fmt::format("declare {} with the wrapper config (text_config / vision_config)",
                         wrapper_arch_of(fam).empty() ? "the wrapper class" : wrapper_arch_of(fam));
    out.add(kind, std::move(f));
  } else if (ends_with(a, "ForConditionalGeneration") && !ctx.info.wrapper && !wrapper_arch_of(fam).empty()) {
    f.key = "text_config";
    f.expected = "text keys nested in text_config";
    f.actual = "a flat config.json";
    f.message = fmt::format("architectures says {} but config.json is flat (no text_config): the wrapper config "
                            "class does not see num_hidden_layers & co. at the top level (\"object has no attribute "
                            "'num_hidden_layers'\") and falls back to defaults", a);
    f.hint = "restore the wrapper config (text_config + vision_config), or declare the *ForCausalLM class";
    out.add(kind, std::move(f));
  }
}

void check_modalities(const Context& ctx, FindingSink& out) {
  if (ctx.tensors.empty()) return;
  const Json& cfg = ctx.config;
  auto declared = [&](std::string_view k) {
    auto it = cfg.find(k);
    return it != cfg.end() && !it->is_null() && !(it->is_object() && it->empty());
  };
  if (declared("audio_config") && !has_tower(ctx, Role::AUDIO)) {
    out.add(finding_kind("audio-declared-weightless"),
            {.message =
                 "audio_config is declared but the checkpoint holds no audio tower tensors: audio input cannot work, "
                 "and engines may still allocate for the modality",
             .key = "audio_config",
             .expected = "model.audio_tower.* / model.embed_audio.* tensors",
             .actual = "none",
             .hint = "set audio_config to null if the model is not meant to take audio, or restore the audio tower"});
  }
  if (declared("vision_config") && !has_tower(ctx, Role::VISION)) {
    const bool wrapper_arch = ends_with(ctx.info.architecture, "ForConditionalGeneration");
    out.add(
        finding_kind("vision-declared-weightless"),
        {.severity = wrapper_arch ? Severity::ERROR : Severity::INFO,
         .message = wrapper_arch
                        ? fmt::format("vision_config is declared and architectures is {} but there are no vision tower "
                                      "tensors: vLLM fails its strict weight-initialization check (and the startup "
                                      "dummy-image profile run)",
                                      ctx.info.architecture)
                        : "vision_config is declared but there are no vision tower tensors: image input cannot work",
         .key = "vision_config",
         .expected = "model.vision_tower.* / model.visual.* tensors",
         .actual = "none"});
  }
}

}  // namespace fp4forge::doctor
