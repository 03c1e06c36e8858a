// quantize's preflight (quantize/preflight.h): doctor's checks on the source with the output's serving files, and
// the serving files the output gets beyond the source's.
#include "fp4forge/quantize/preflight.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fp4forge/core/finding_kinds.h"
#include "fp4forge/diagnose/diagnose.h"
#include "fp4forge/diagnose/serving_fixes.h"
#include "fp4forge/model/model_info.h"
#include "fp4forge/model/serving_files.h"
#include "fp4forge/safetensors/checkpoint.h"
#include "fp4forge/util/fs.h"
#include "fp4forge/util/hf_cache.h"
#include "fp4forge/util/json_edit.h"
#include "fp4forge/util/strings.h"
#include "fp4forge/util/udiff.h"

namespace fp4forge::quant {
namespace stdfs = std::filesystem;

namespace {

bool present(const stdfs::path& p) {
  std::error_code ec;
  return stdfs::exists(p, ec);
}

/** A reference release's folder, listed like a checkpoint (config and weights optional): its side files and the
 * test that a link in it resolves inside it (or into its Hugging Face cache blobs). */
Result<Checkpoint> open_reference(const stdfs::path& ref) {
  CheckpointOptions co;
  co.require_config = false;
  co.require_weights = false;
  return Checkpoint::open(ref, co);
}

/** Takes `names` that `ref` has and the source lacks into the overlay and the serving changes. */
void take(const stdfs::path& src, const Checkpoint& ref, const std::vector<std::string>& names, const char* option,
          FileOverlay& overlay, Preflight& p) {
  const auto& files = ref.other_files();
  for (const std::string& n : names) {
    if (present(src / n) || std::find(files.begin(), files.end(), n) == files.end()) continue;
    if (const std::string why = ref.escapes(n); !why.empty()) {
      p.notes.push_back(fmt::format("{}: not taken: {}", option, why));
      continue;
    }
    overlay[n] = ref.dir() / n;
    ServingChange c;
    c.file = n;
    c.action = "taken";
    c.from = (ref.dir() / n).string();
    c.option = option;
    c.copy = true;
    p.serving.push_back(std::move(c));
  }
}

/** --tokenizer-from: a source without a tokenizer takes every tokenizer file it lacks; a source with its own takes
 * only a missing chat template (a vocabulary is never mixed from two releases). */
Status take_tokenizer(const stdfs::path& src, const stdfs::path& from, FileOverlay& overlay, Preflight& p) {
  if (from.empty()) return {};
  FP4FORGE_ASSIGN_OR_RETURN(Checkpoint ref, open_reference(from));
  const ServingFiles theirs = serving_files(ref.dir());
  if (!theirs.tokenizer)
    return make_error(Errc::BAD_INPUT, "--tokenizer-from '{}' holds no tokenizer file; expected the folder of the "
                                       "release's tokenizer ({}, ...); hint: name the release SRC was made from (its folder or "
                                       "its repo id in the Hugging Face cache)", from.string(), kTokenizerFiles[0]);
  const ServingFiles ours = serving_files(src);
  std::vector<std::string> names;
  if (!ours.tokenizer) {
    names.assign(std::begin(kTokenizerGroupFiles), std::end(kTokenizerGroupFiles));
  } else if (!ours.chat_template) {
    names = {"chat_template.jinja", "chat_template.json"};
  } else {
    p.notes.push_back(fmt::format("--tokenizer-from: nothing taken: the source has its own tokenizer ({}) and chat "
                                  "template ({})", ours.tokenizer_file, ours.chat_template_source));
    return {};
  }
  const std::size_t before = p.serving.size();
  take(src, ref, names, "--tokenizer-from", overlay, p);
  if (ours.tokenizer && p.serving.size() == before)
    p.notes.push_back(fmt::format("--tokenizer-from: no chat template taken: '{}' has none in a file of its own ({}); "
                                  "its tokenizer_config.json is not mixed into the source's tokenizer",
                                  from.string(), theirs.chat_template ? theirs.chat_template_source : "none at all"));
  return {};
}

/** --processor-from: the processor files a multimodal source lacks. */
Status take_processor(const stdfs::path& src, const stdfs::path& from, FileOverlay& overlay, Preflight& p) {
  if (from.empty()) return {};
  FP4FORGE_ASSIGN_OR_RETURN(Checkpoint ref, open_reference(from));
  const auto& files = ref.other_files();
  if (std::none_of(files.begin(), files.end(), [](const std::string& f) { return is_processor_file(f); }))
    return make_error(Errc::BAD_INPUT, "--processor-from '{}' holds no processor file; expected the folder of the "
                                       "release's processor ({}, ...); hint: name the release SRC was made from (its folder or "
                                       "its repo id in the Hugging Face cache)", from.string(), kProcessorFiles[0]);
  FP4FORGE_ASSIGN_OR_RETURN(std::string text, fs::read_file(src / "config.json"));
  FP4FORGE_ASSIGN_OR_RETURN(nlohmann::ordered_json cfg, parse_json_bounded(text, "config.json"));
  FP4FORGE_ASSIGN_OR_RETURN(ModelInfo info, read_model_info(cfg));
  if (!info.has_vision_config && !info.has_audio_config) {
    p.notes.push_back("--processor-from: nothing taken: the source is not multimodal (no vision_config or "
                      "audio_config in config.json), and vLLM reads no processor for it");
    return {};
  }
  take(src, ref, {std::begin(kProcessorFiles), std::end(kProcessorFiles)}, "--processor-from", overlay, p);
  return {};
}

/** What doctor --fix would write into the output's serving files (diagnose/serving_fixes.h). A file that does not
 * parse is left as it is: doctor's checks report it (`invalid-json-file`). */
Status derive_fixes(const stdfs::path& src, const FileOverlay& overlay, Preflight& p) {
  const stdfs::path pc = serving_path(src, "processor_config.json", &overlay);
  if (present(pc) && !present(serving_path(src, "preprocessor_config.json", &overlay))) {
    FP4FORGE_ASSIGN_OR_RETURN(std::string text, fs::read_file(pc));
    if (auto doc = JsonDocument::parse(std::move(text), "processor_config.json"); doc.ok())
      if (std::optional<std::string> derived = doctor::derive_preprocessor_config(*doc)) {
        ServingChange c;
        c.file = "preprocessor_config.json";
        c.action = "derived";
        c.from = pc.string();
        c.kinds = {"missing-preprocessor-config"};
        c.diff = util::unified_diff("", *derived, "/dev/null", "b/preprocessor_config.json");
        c.content = std::move(*derived);
        p.serving.push_back(std::move(c));
      }
  }
  const stdfs::path tj = serving_path(src, "tokenizer.json", &overlay);
  if (!present(tj)) return {};
  FP4FORGE_ASSIGN_OR_RETURN(std::string original, fs::read_file(tj));
  auto doc = JsonDocument::parse(original, "tokenizer.json");
  if (!doc.ok()) return {};
  FP4FORGE_ASSIGN_OR_RETURN(const bool changed, doctor::clear_tokenizer_truncation(*doc));
  if (!changed) return {};
  auto taken = std::find_if(p.serving.begin(), p.serving.end(), [](const ServingChange& c) { return c.file == "tokenizer.json"; });
  const bool was_taken = taken != p.serving.end();
  ServingChange& c = was_taken ? *taken : p.serving.emplace_back();
  if (!was_taken) {
    c.file = "tokenizer.json";
    c.action = "fixed";
    c.from = tj.string();
  }
  c.copy = false;
  c.kinds.push_back("tokenizer-truncation");
  c.content = doc->dump();
  c.diff = util::unified_diff(original, c.content, "a/tokenizer.json", "b/tokenizer.json");
  return {};
}

/** The fix a refusal line names for an error finding. */
std::string fix_of(const Finding& f, const std::string& src) {
  if (is_kind(f, finding_kind("missing-processor")))
    return "--processor-from REF (the original release's folder or cached repo id: its processor_config.json / "
           "preprocessor_config.json are taken)";
  if (is_kind(f, finding_kind("missing-tokenizer")))
    return "--tokenizer-from REF (the original release's folder or cached repo id: its tokenizer files are taken)";
  if (f.fix) {
    if (const auto repo = hf_cache::snapshot_repo_dir(src)) {  // the cache is never written: fix a copy
      const std::string r = repo->filename().string();
      const std::string name = r.substr(r.rfind("--") + 2);
      return fmt::format("fix a copy (cp -rL '{}' './{}' && fp4forge doctor './{}' --fix: {}) and quantize the copy",
                         src, name, name, *f.fix);
    }
    return fmt::format("fp4forge doctor '{}' --fix ({}, with a backup)", src, *f.fix);
  }
  return f.hint.empty() ? fmt::format("see fp4forge doctor '{}'", src) : f.hint;
}

}  // namespace

Result<Preflight> preflight(const stdfs::path& src, const PreflightOptions& opts) {
  Preflight p;
  p.source = src.string();
  p.tokenizer_from = opts.tokenizer_from.string();
  p.processor_from = opts.processor_from.string();
  FileOverlay overlay;
  FP4FORGE_TRY(take_tokenizer(src, opts.tokenizer_from, overlay, p));
  FP4FORGE_TRY(take_processor(src, opts.processor_from, overlay, p));
  FP4FORGE_TRY(derive_fixes(src, overlay, p));
  if (!opts.checks) return p;
  doctor::DiagnoseOptions d;
  d.overlay = overlay;
  d.as_source = true;
  FP4FORGE_ASSIGN_OR_RETURN(auto diag, doctor::diagnose(src, d));
  p.quantized_source = diag->ctx.quantized;
  std::set<std::string> applied;  // kinds whose fix the output gets
  for (const auto& c : p.serving) applied.insert(c.kinds.begin(), c.kinds.end());
  for (auto& f : diag->findings)
    if (!applied.count(f.kind)) p.findings.push_back(std::move(f));
  p.ran = true;
  return p;
}

namespace {

/** An error finding as a refusal names it: what, where, the fix. */
/** A finding about a file a --tokenizer-from / --processor-from reference supplied is blamed on that reference, with
 * its fix: another reference (issue 55 tryout L: "copy the sizes from vision_config" for a file taken from another
 * model's release). */
std::string finding_text(const Finding& f, const Preflight& p) {
  for (const ServingChange& c : p.serving)
    if (c.action == "taken" && !f.key.empty() && f.key.rfind(c.file, 0) == 0)
      return fmt::format(
          "{} in '{}' (taken by {} from '{}'): {}; fix: {} supplies a file that does not fit this "
          "model: name the release this checkpoint was made from (or drop {})",
          f.kind, c.file, c.option, c.from, f.message, c.option, c.option);
  return fmt::format("{} in '{}'{}: {}; fix: {}", f.kind, p.source, f.key.empty() ? "" : fmt::format(" ({})", f.key),
                     f.message, fix_of(f, p.source));
}

std::size_t error_count(const Preflight& p) {
  return static_cast<std::size_t>(std::count_if(p.findings.begin(), p.findings.end(),
                                                [](const Finding& f) { return f.severity == Severity::ERROR; }));
}

}  // namespace

std::vector<std::string> refusal_lines(const Preflight& p) {
  std::vector<std::string> lines;
  if (error_count(p) < 2) return lines;  // one error: the refusal itself names it (one line)
  for (const auto& f : p.findings)
    if (f.severity == Severity::ERROR)
      lines.push_back(fmt::format("preflight: {}{}", finding_text(f, p),
                                  f.kind == "header-only-weights" ? "" : "; --no-preflight quantizes anyway"));
  return lines;
}

Error refusal(const Preflight& p) {
  std::set<std::string> kinds;
  const Finding* first = nullptr;
  for (const auto& f : p.findings)
    if (f.severity == Severity::ERROR) {
      kinds.insert(f.kind);
      if (first == nullptr) first = &f;
    }
  const std::size_t n = error_count(p);
  // A header-only folder is refused without the preflight too: no "--no-preflight quantizes anyway" (issue 55 tryout).
  const bool forcible = !kinds.contains("header-only-weights");
  Error e = n == 1 ? make_error(Errc::BAD_INPUT, "quantize refused by its preflight: {}; nothing written{}",
                                finding_text(*first, p), forcible ? "; --no-preflight quantizes anyway" : "")
                   : make_error(Errc::BAD_INPUT,
                                "quantize refused by its preflight: doctor finds {} error(s) in '{}' ({}); nothing "
                                "written; expected a source doctor passes: fix each as listed (fp4forge doctor '{}' "
                                "shows them){}",
                                n, p.source, fmt::join(kinds, ", "), p.source,
                                forcible ? ", or pass --no-preflight to quantize anyway" : "");
  e.file = p.source;
  return e;
}

Status write_serving_files(const Preflight& p, const stdfs::path& dir) {
  for (const auto& c : p.serving) {
    if (c.copy)
      FP4FORGE_TRY(fs::copy_file_atomic(c.from, dir / c.file));
    else
      FP4FORGE_TRY(fs::write_file_atomic(dir / c.file, c.content));
  }
  return {};
}

nlohmann::ordered_json to_json(const Preflight& p) {
  using J = nlohmann::ordered_json;
  auto opt = [](const std::string& s) { return s.empty() ? J(nullptr) : J(s); };
  J j;
  j["ran"] = p.ran;
  j["quantized_source"] = p.quantized_source;
  j["refused"] = p.refused();
  std::size_t e = 0, w = 0;
  for (const auto& f : p.findings) {
    if (f.severity == Severity::ERROR) ++e;
    if (f.severity == Severity::WARNING) ++w;
  }
  j["errors"] = e;
  j["warnings"] = w;
  j["tokenizer_from"] = opt(p.tokenizer_from);
  j["processor_from"] = opt(p.processor_from);
  J fs = J::array();
  for (const auto& f : p.findings) fs.push_back(to_json(f));
  j["findings"] = std::move(fs);
  J sv = J::array();
  for (const auto& c : p.serving)
    sv.push_back({{"file", c.file}, {"action", c.action}, {"from", c.from}, {"option", opt(c.option)},
                  {"kinds", c.kinds}, {"diff", c.diff}});
  j["serving_files"] = std::move(sv);
  j["notes"] = p.notes;
  return j;
}

std::string to_text(const Preflight& p, bool dry_run) {
  // Paths and names come from the user's folders: escaped for a report line (R4-B5).
  const auto esc = [](std::string_view x) { return util::printable(x, util::kReportLine); };
  std::string s;
  if (!p.ran) {
    s += "preflight: skipped (--no-preflight): doctor's checks did not run on the source\n";
  } else {
    std::set<std::string> kinds;
    std::size_t e = 0, w = 0;
    for (const auto& f : p.findings) {
      if (f.severity == Severity::INFO) continue;
      (f.severity == Severity::ERROR ? e : w)++;
      kinds.insert(f.kind);
    }
    s += fmt::format("preflight: doctor's checks on the source{}: {} error(s), {} warning(s){}\n",
                     p.quantized_source ? " as quantize's input (its own quantization's serving checks left out: "
                                          "quantize re-encodes its weights)"
                                        : "",
                     e, w, kinds.empty() ? "" : fmt::format(" ({})", fmt::join(kinds, ", ")));
  }
  for (const auto& c : p.serving) {
    const std::string fixes = c.kinds.empty() ? "" : fmt::format(", doctor's fix of {}", fmt::join(c.kinds, ", "));
    if (c.action == "taken")
      s += fmt::format("  {} {} from {} ({}{})\n", dry_run ? "would take" : "took", c.file, esc(c.from), c.option, fixes);
    else if (c.action == "derived")
      s += fmt::format("  {} {} (new, derived from {}{})\n", dry_run ? "would write" : "wrote", c.file, esc(c.from), fixes);
    else
      s += fmt::format("  {} {} ({}{})\n", dry_run ? "would change" : "changed", c.file, "the source's file", fixes);
  }
  for (const auto& n : p.notes) s += fmt::format("  note: {}\n", esc(n));
  return s;
}

}  // namespace fp4forge::quant
