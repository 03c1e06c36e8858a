#include "fp4forge/doctor/doctor.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <ctime>
#include <map>
#include <memory>
#include <set>

#include "fp4forge/core/finding_kinds.h"
#include "fp4forge/diagnose/diagnose.h"
#include "fp4forge/diagnose/serving_fixes.h"
#include "fp4forge/model/quant_config.h"
#include "fp4forge/util/backup.h"
#include "fp4forge/util/fs.h"
#include "fp4forge/util/hf_cache.h"
#include "fp4forge/util/json_edit.h"
#include "fp4forge/util/path_lock.h"
#include "fp4forge/util/strings.h"
#include "fp4forge/util/udiff.h"

namespace fp4forge::doctor {
namespace {

/** A file being edited by the fixes. */
struct Pending {
  bool existed = false;
  std::string original;
  std::optional<JsonDocument> doc;
  std::string created;  // content of a new file
  std::vector<std::string> kinds;
};

class Fixer {
 public:
  Fixer(const Context& ctx, DoctorReport& rep) : ctx_(ctx), rep_(rep) {}

  Result<Pending*> open(const std::string& file) {
    auto it = files_.find(file);
    if (it != files_.end()) return &it->second;
    Pending p;
    p.existed = true;
    FP4FORGE_ASSIGN_OR_RETURN(p.original, fs::read_file(ctx_.dir / file));
    FP4FORGE_ASSIGN_OR_RETURN(JsonDocument doc, JsonDocument::parse(p.original, file));
    p.doc.emplace(std::move(doc));
    return &files_.emplace(file, std::move(p)).first->second;
  }
  void refuse(std::string kind, std::string reason) { rep_.refused.push_back({std::move(kind), std::move(reason)}); }

  Status gemma4_globals() {
    const std::string kind(finding_kind("gemma4-missing-global-kv-fields").id);
    FP4FORGE_ASSIGN_OR_RETURN(Pending * p, open("config.json"));
    const Json cfg = *p->doc->get({});
    const Json& tc = text_config(cfg);
    if (tc.contains("per_layer_config") && !tc["per_layer_config"].is_null()) {
      refuse(kind, "config.json now has a per_layer_config: it supplies the full-attention geometry");
      return {};
    }
    const bool k_eq_v = bool_of(tc, "attention_k_eq_v");
    const bool has_gd = has_non_null(tc, "global_head_dim");
    const bool has_gkv = has_non_null(tc, "num_global_key_value_heads");
    if (has_gd && (has_gkv || !k_eq_v)) return {};  // nothing missing any more
    const GlobalKvDerivation der = derive_global_kv(ctx_, cfg);
    if (!der.problem.empty()) {
      refuse(kind, fmt::format("the values cannot be derived safely: {}", der.problem));
      return {};
    }
    auto path = [&](const char* k) {
      return ctx_.info.wrapper ? JsonDocument::Path{"text_config", k} : JsonDocument::Path{k};
    };
    if (!has_gd) FP4FORGE_TRY(p->doc->set(path("global_head_dim"), der.global_head_dim));
    if (k_eq_v && !has_gkv) FP4FORGE_TRY(p->doc->set(path("num_global_key_value_heads"), der.num_global_kv_heads));
    p->kinds.push_back(kind);
    return {};
  }

  /** gemma4-per-layer-config-only under a target vLLM that cannot build it: the flat keys from the tensors, then
   * per_layer_config removed, both only when per_layer_config is proven (on the edited file) to repeat them. */
  Status plc_only() {
    const std::string kind(finding_kind("gemma4-per-layer-config-only").id);
    FP4FORGE_ASSIGN_OR_RETURN(Pending * p, open("config.json"));
    const Json cfg = *p->doc->get({});
    const Json& tc = text_config(cfg);
    if (has_non_null(tc, "global_head_dim") || has_non_null(tc, "num_global_key_value_heads")) {
      refuse(kind, "config.json has flat global fields now");
      return {};
    }
    const GlobalKvDerivation der = derive_global_kv(ctx_, cfg);
    if (!der.problem.empty()) {
      refuse(kind, fmt::format("the values cannot be derived safely: {}", der.problem));
      return {};
    }
    const bool k_eq_v = bool_of(tc, "attention_k_eq_v");
    Json next = cfg;
    Json& ntc = ctx_.info.wrapper ? next["text_config"] : next;
    ntc["global_head_dim"] = der.global_head_dim;
    if (k_eq_v) ntc["num_global_key_value_heads"] = der.num_global_kv_heads;
    std::string why;
    if (!prove_per_layer_config_redundant(next, ctx_.info.layer_types, &why)) {
      refuse(kind, fmt::format("per_layer_config does not repeat what the tensors prove ({}); edit it by hand", why));
      return {};
    }
    auto path = [&](const char* k) {
      return ctx_.info.wrapper ? JsonDocument::Path{"text_config", k} : JsonDocument::Path{k};
    };
    FP4FORGE_TRY(p->doc->set(path("global_head_dim"), der.global_head_dim));
    if (k_eq_v) FP4FORGE_TRY(p->doc->set(path("num_global_key_value_heads"), der.num_global_kv_heads));
    p->doc->erase(path("per_layer_config"));
    p->kinds.push_back(kind);
    return {};
  }

  Status redundant_plc() {
    const std::string kind(finding_kind("per-layer-config-redundant").id);
    FP4FORGE_ASSIGN_OR_RETURN(Pending * p, open("config.json"));
    const Json cfg = *p->doc->get({});  // re-prove on the file at hand
    auto info = read_model_info(cfg);
    if (!info.ok()) {
      refuse(kind, info.error().message);
      return {};
    }
    std::string why;
    if (!prove_per_layer_config_redundant(cfg, info->layer_types, &why)) {
      refuse(kind, fmt::format("redundancy does not hold on config.json at fix time: {}", why));
      return {};
    }
    p->doc->erase(info->wrapper ? JsonDocument::Path{"text_config", "per_layer_config"}
                                : JsonDocument::Path{"per_layer_config"});
    p->kinds.push_back(kind);
    return {};
  }

  Status preprocessor() {
    const std::string kind(finding_kind("missing-preprocessor-config").id);
    std::error_code ec;
    if (std::filesystem::exists(ctx_.dir / "preprocessor_config.json", ec)) {
      refuse(kind, "preprocessor_config.json exists now");
      return {};
    }
    FP4FORGE_ASSIGN_OR_RETURN(Pending * src, open("processor_config.json"));
    std::optional<std::string> derived = derive_preprocessor_config(*src->doc);
    if (!derived) {
      refuse(kind, "processor_config.json has no image_processor object any more");
      return {};
    }
    Pending p;
    p.existed = false;
    p.created = std::move(*derived);
    p.kinds.push_back(kind);
    files_.emplace("preprocessor_config.json", std::move(p));
    return {};
  }

  Status index_total_size() {
    const std::string kind(finding_kind("index-total-size").id);
    if (!ctx_.ckpt || !ctx_.ckpt->index_file()) {
      refuse(kind, "the checkpoint has no index file any more");
      return {};
    }
    const std::string file = *ctx_.ckpt->index_file();
    FP4FORGE_ASSIGN_OR_RETURN(Pending * p, open(file));
    const std::uint64_t want = ctx_.ckpt->total_tensor_bytes();
    auto md = p->doc->get({"metadata"});
    if (!md || !md->is_object()) {
      refuse(kind, fmt::format("{} has no metadata object any more", file));
      return {};
    }
    auto cur = p->doc->get({"metadata", "total_size"});
    if (cur && cur->is_number_unsigned() && cur->get<std::uint64_t>() == want) return {};  // fixed meanwhile
    FP4FORGE_TRY(p->doc->set({"metadata", "total_size"}, want));
    p->kinds.push_back(kind);
    return {};
  }

  Status tokenizer() {
    const std::string kind(finding_kind("tokenizer-truncation").id);
    FP4FORGE_ASSIGN_OR_RETURN(Pending * p, open("tokenizer.json"));
    FP4FORGE_ASSIGN_OR_RETURN(const bool changed, clear_tokenizer_truncation(*p->doc));
    if (changed) p->kinds.push_back(kind);
    return {};
  }

  /** Diffs every pending file; writes backups and files unless dry_run. */
  Status commit(bool dry_run, const std::string& stamp) {
    for (auto& [file, p] : files_) {
      const std::string next = p.doc ? p.doc->dump() : p.created;
      if (p.existed && next == p.original) continue;
      FP4FORGE_CHECK(!(file.size() >= 12 && file.compare(file.size() - 12, 12, ".safetensors") == 0));
      FileChange c;
      c.file = file;
      c.kinds = p.kinds;
      c.created = !p.existed;
      c.diff = util::unified_diff(p.existed ? p.original : std::string(), next,
                                  p.existed ? "a/" + file : "/dev/null", "b/" + file);
      if (!dry_run) {
        // Under the folder's edit lock: a temporary of this file is a killed run's, never a live one (R4-B16).
        FP4FORGE_TRY(backup::remove_stale_temporaries(ctx_.dir / file));
        if (p.existed) {
          FP4FORGE_ASSIGN_OR_RETURN(std::filesystem::path bak,
                                    backup::write_backup(ctx_.dir / file, p.original, backup::kBackupInfix, stamp));
          c.backup = bak.filename().string();
        }
        FP4FORGE_TRY(fs::edit_file_atomic(ctx_.dir / file, next));
        c.written = true;
      }
      rep_.changes.push_back(std::move(c));
    }
    return {};
  }

 private:
  const Context& ctx_;
  DoctorReport& rep_;
  std::map<std::string, Pending> files_;
};

nlohmann::ordered_json findings_json(const std::vector<Finding>& fs) {
  nlohmann::ordered_json a = nlohmann::ordered_json::array();
  for (const auto& f : fs) a.push_back(to_json(f));
  return a;
}

}  // namespace

int exit_code(const DoctorReport& r) { return fails(r.remaining, r.strict) ? 1 : 0; }

Result<DoctorReport> run_doctor(const std::filesystem::path& dir, const DoctorOptions& opts) {
  DoctorReport rep;
  rep.dir = dir.string();
  rep.fix = opts.fix;
  rep.dry_run = opts.dry_run;
  rep.strict = opts.strict;
  // A Hugging Face cache snapshot is read-only to fp4forge: its files are links into blobs that other
  // snapshots share and huggingface_hub verifies; editing one (or replacing a link) corrupts the cache.
  if (opts.fix && !opts.dry_run)
    if (const auto repo = hf_cache::snapshot_repo_dir(dir)) {
      const std::string repo_name = repo->filename().string();
      const std::string name = repo_name.substr(repo_name.rfind("--") + 2);
      return make_error(Errc::USAGE,
                        "doctor --fix: '{}' is a snapshot in the Hugging Face cache ('{}'), which fp4forge never "
                        "writes; hint: see the fixes with --dry-run, or fix a copy: cp -rL '{}' './{}' && fp4forge "
                        "doctor './{}' --fix",
                        dir.string(), repo->string(), dir.string(), name, name);
    }
  // Every fix is a read-modify-replace of files in `dir`: one doctor --fix of a folder at a time (R4-B1's rule),
  // from the first read to the last rename.
  fs::PathLock lock;
  std::error_code ec;
  if (opts.fix && !opts.dry_run && std::filesystem::is_directory(dir, ec)) FP4FORGE_TRY(lock.acquire(dir));
  FP4FORGE_ASSIGN_OR_RETURN(auto d, diagnose(dir, DiagnoseOptions{opts.tokenizer, {}, false, opts.vllm_minor, opts.transformers_version}));
  rep.family = std::string(family_name(d->ctx.info.family));
  rep.architecture = d->ctx.info.architecture;
  rep.quantized = d->ctx.quantized;
  rep.findings = d->findings;
  rep.remaining = d->findings;
  if (!opts.mtp_from.empty() && !opts.fix && !opts.dry_run)
    return make_error(Errc::USAGE, "--mtp-from needs --fix (or --dry-run): it names where a fix copies the MTP "
                                   "tensors from");
  if (!opts.fix && !opts.dry_run) return rep;

  std::set<std::string, std::less<>> due;
  for (const auto& f : d->findings)
    if (f.fix) due.insert(f.kind);
  auto is_due = [&due](const FindingKind& k) { return due.count(k.id) > 0; };
  const std::string stamp = opts.timestamp.empty() ? backup::stamp_now() : opts.timestamp;
  // The MTP splice is proven (a dry run: every refusal) before any other fix is written.
  if (!opts.mtp_from.empty()) {
    quant::MtpSpliceOptions so;
    so.dry_run = true;
    so.timestamp = stamp;
    FP4FORGE_ASSIGN_OR_RETURN(quant::MtpSpliceReport pre, quant::splice_mtp(dir, opts.mtp_from, so));
    if (opts.dry_run) rep.mtp_splice = std::move(pre);
  } else if (is_due(finding_kind("mtp-declared-missing"))) {
    rep.refused.push_back({std::string(finding_kind("mtp-declared-missing").id),
                           "needs --mtp-from SRC: the original release (or a local copy of it) to copy the MTP "
                           "tensors from"});
  }
  Fixer fx(d->ctx, rep);
  // Fixed order: config.json edits compose (globals first, then redundancy is re-proven on the result).
  if (is_due(finding_kind("gemma4-missing-global-kv-fields"))) FP4FORGE_TRY(fx.gemma4_globals());
  if (is_due(finding_kind("gemma4-per-layer-config-only"))) FP4FORGE_TRY(fx.plc_only());
  if (is_due(finding_kind("per-layer-config-redundant"))) FP4FORGE_TRY(fx.redundant_plc());
  if (is_due(finding_kind("missing-preprocessor-config"))) FP4FORGE_TRY(fx.preprocessor());
  if (is_due(finding_kind("tokenizer-truncation"))) FP4FORGE_TRY(fx.tokenizer());
  if (is_due(finding_kind("index-total-size"))) FP4FORGE_TRY(fx.index_total_size());
  FP4FORGE_TRY(fx.commit(opts.dry_run, stamp));
  if (rep.mtp_splice) {
    for (const auto& c : rep.mtp_splice->changes) rep.changes.push_back(c);
  } else if (!opts.mtp_from.empty() && !opts.dry_run) {
    d.reset();  // release the mappings: the splice opens the checkpoint as the fixes left it
    quant::MtpSpliceOptions so;
    so.timestamp = stamp;
    FP4FORGE_ASSIGN_OR_RETURN(quant::MtpSpliceReport sr, quant::splice_mtp(dir, opts.mtp_from, so));
    for (const auto& c : sr.changes) rep.changes.push_back(c);
    rep.mtp_splice = std::move(sr);
  }
  if (opts.dry_run || rep.changes.empty()) return rep;
  d.reset();  // release the mappings before re-reading
  FP4FORGE_ASSIGN_OR_RETURN(auto again, diagnose(dir, DiagnoseOptions{opts.tokenizer, {}, false, opts.vllm_minor, opts.transformers_version}));
  rep.remaining = again->findings;
  return rep;
}

nlohmann::ordered_json to_json(const DoctorReport& r) {
  nlohmann::ordered_json j;
  j["command"] = "doctor";
  j["dir"] = r.dir;
  j["family"] = r.family;
  j["architecture"] = r.architecture;
  j["quantized"] = r.quantized;
  j["mode"] = r.dry_run ? "dry-run" : r.fix ? "fix" : "check";
  j["ok"] = exit_code(r) == 0;
  j["strict"] = r.strict;
  j["exit_code"] = exit_code(r);
  std::size_t e = 0, w = 0, i = 0, fixable = 0;
  for (const auto& f : r.remaining) {
    (f.severity == Severity::ERROR ? e : f.severity == Severity::WARNING ? w : i)++;
    if (f.fix) ++fixable;
  }
  j["summary"] = {{"errors", e}, {"warnings", w}, {"info", i}, {"fixable", fixable}};
  j["findings"] = findings_json(r.findings);
  nlohmann::ordered_json ch = nlohmann::ordered_json::array();
  for (const auto& c : r.changes) {
    nlohmann::ordered_json x;
    x["file"] = c.file;
    x["kinds"] = c.kinds;
    x["created"] = c.created;
    x["backup"] = c.backup.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(c.backup);
    x["written"] = c.written;
    x["diff"] = c.diff;
    ch.push_back(std::move(x));
  }
  j["changes"] = std::move(ch);
  nlohmann::ordered_json rf = nlohmann::ordered_json::array();
  for (const auto& x : r.refused) rf.push_back({{"kind", x.kind}, {"reason", x.reason}});
  j["refused"] = std::move(rf);
  j["mtp_splice"] = r.mtp_splice ? quant::to_json(*r.mtp_splice) : nlohmann::ordered_json(nullptr);
  j["remaining"] = findings_json(r.remaining);
  return j;
}

namespace {
/** Text from files (names, config values, the messages that quote them), escaped for a report line (R4-B5). */
std::string esc(std::string_view x) { return util::printable(x, util::kReportLine); }

void append_findings(std::string& s, const std::vector<Finding>& fs) {
  for (const auto& f : fs) {
    s += fmt::format("{:<8} {}: {}\n", severity_name(f.severity), esc(f.kind), esc(f.message));
    if (!f.key.empty()) s += fmt::format("         key: {}\n", esc(f.key));
    if (!f.expected.empty() && !f.actual.empty())
      s += fmt::format("         expected: {}; actual: {}\n", esc(f.expected), esc(f.actual));
    else if (!f.actual.empty())
      s += fmt::format("         actual: {}\n", esc(f.actual));
    else if (!f.expected.empty())
      s += fmt::format("         expected: {}\n", esc(f.expected));
    if (!f.tensors.empty()) {
      std::string t;
      for (std::size_t i = 0; i < f.tensors.size() && i < 5; ++i) t += (i ? ", " : "") + esc(f.tensors[i]);
      if (f.tensors.size() > 5) t += fmt::format(", ... ({} listed)", f.tensors.size());
      s += fmt::format("         tensors: {}\n", t);
    }
    if (f.fix) s += fmt::format("         fix: {}\n", esc(*f.fix));
    if (!f.hint.empty()) s += fmt::format("         hint: {}\n", esc(f.hint));
  }
}
std::string counts(const std::vector<Finding>& fs) {
  std::size_t e = 0, w = 0, i = 0;
  for (const auto& f : fs) (f.severity == Severity::ERROR ? e : f.severity == Severity::WARNING ? w : i)++;
  return fmt::format("{} error(s), {} warning(s), {} info", e, w, i);
}
}  // namespace

std::string to_text(const DoctorReport& r) {
  std::string s = fmt::format("doctor {}: {} ({}){}\n", esc(r.dir), esc(r.family),
                              r.architecture.empty() ? "no architectures" : esc(r.architecture),
                              r.quantized ? ", quantized" : "");
  if (r.findings.empty()) s += "no findings\n";
  append_findings(s, r.findings);
  if (r.fix || r.dry_run) {
    if (r.changes.empty()) s += r.refused.empty() ? "nothing to fix\n" : "";
    for (const auto& c : r.changes) {
      s += fmt::format("\n{} {}{} ({})\n", r.dry_run ? "would change" : "changed", esc(c.file),
                       c.created ? " (new file)" : "", fmt::join(c.kinds, ", "));
      if (!c.backup.empty()) s += fmt::format("backup: {}\n", esc(c.backup));
      s += c.diff;
    }
    for (const auto& x : r.refused) s += fmt::format("refused {}: {}\n", x.kind, esc(x.reason));
    if (r.mtp_splice) {  // two appends: GCC 12's -Wrestrict misfires on "\n" + to_text(...) here
      s += '\n';
      s += quant::to_text(*r.mtp_splice);
    }
    if (r.fix && !r.dry_run && !r.changes.empty()) {
      s += fmt::format("\nafter fixes: {}\n", counts(r.remaining));
      append_findings(s, r.remaining);
    }
  }
  // What --fix alone would fix, and what needs the original release too (the MTP splice: --fix alone refuses it).
  std::size_t fixable = 0, with_mtp_from = 0;
  for (const auto& f : r.remaining)
    if (f.fix) ++(f.kind == finding_kind("mtp-declared-missing").id ? with_mtp_from : fixable);
  std::string fixes;
  if (!(r.fix && !r.dry_run)) {
    const char* how = r.dry_run ? "run with --fix, without --dry-run" : "run with --fix";
    if (fixable) fixes += fmt::format(", {} fixable ({})", fixable, how);
    if (with_mtp_from)
      fixes += fmt::format(", {} fixable with --fix --mtp-from SRC (the original release)", with_mtp_from);
  } else if (with_mtp_from && !r.mtp_splice) {
    fixes += fmt::format(", {} fixable only with --mtp-from SRC (the original release)", with_mtp_from);
  }
  s += fmt::format("summary: {}{}; exit {}\n", counts(r.remaining), fixes, exit_code(r));
  return s;
}

}  // namespace fp4forge::doctor
