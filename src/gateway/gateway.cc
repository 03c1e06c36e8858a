// gateway: show, rollback and retire of a LiteLLM config.yaml, and what every gateway command shares about its
// routes: the deployments of an alias, backups, the next steps. The line-addressed model of the file is
// config_text.h; swap.cc, add.cc and check.cc hold the other commands, seat_gate.cc the probe a new deployment
// must pass first.
#include "fp4forge/gateway/gateway.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "config_text.h"
#include "fp4forge/util/did_you_mean.h"
#include "fp4forge/util/backup.h"
#include "fp4forge/util/fs.h"
#include "fp4forge/util/redact.h"
#include "fp4forge/util/strings.h"
#include "fp4forge/util/udiff.h"

namespace fp4forge::gateway {

using probe::normalize_base_url;
namespace stdfs = std::filesystem;
using backup::kBackupInfix;
using backup::kRollbackInfix;

namespace detail {

// ---------------------------------------------------------------------------------------------
// show helpers

void describe_routes(const Parsed& p, GatewayShow& s) {
  std::map<std::string, std::vector<int>> by_alias;
  for (const Entry& e : p.entries) {
    GatewayRoute r;
    r.alias = mask_inline(e.alias);  // a quote left open can swallow the entry's api_key line into the name
    r.line = e.dash_line + 1;
    r.wildcard = e.alias.find('*') != std::string::npos;
    // An entry without litellm_params (or with a scalar there) routes nowhere: said, not a parse failure.
    const YAML::Node lp = e.view.IsMap() && e.view["litellm_params"] ? e.view["litellm_params"] : YAML::Node();
    if (!lp || !lp.IsMap())
      s.warnings.push_back(fmt::format("line {}: entry '{}' has no litellm_params mapping: LiteLLM cannot route it",
                                       e.dash_line + 1, r.alias));
    r.model = mask_inline(scalar_or(lp, "model"));
    r.api_base = scalar_or(lp, "api_base");
    if (lp && lp.IsMap()) {
      for (auto it = lp.begin(); it != lp.end(); ++it) {
        const std::string k = it->first.Scalar();
        if (k == "model" || k == "api_base") continue;
        std::string v = it->second.IsScalar() ? it->second.Scalar() : dump_one_line(it->second);
        v = is_secret_key(k) && v.rfind("os.environ/", 0) != 0 ? "***" : mask_inline(v);
        r.params.emplace_back(k, v);
      }
    }
    by_alias[r.alias].push_back(r.line);
    s.routes.push_back(std::move(r));
  }
  for (const RetiredAlias& ra : p.retired) s.retired.push_back({mask_inline(ra.alias), ra.line});
  for (const GatewayRoute& r : s.routes) {
    if (!r.wildcard) continue;
    s.warnings.push_back(fmt::format("line {}: wildcard route '{}' (model '{}') answers every alias matching it: a "
                                     "retired or misspelled alias is served by it instead of failing",
                                     r.line, r.alias, r.model));
    for (const RetiredAlias& ra : s.retired)
      if (glob_match(r.alias, ra.alias) && !by_alias.count(ra.alias))  // a retired replica: the alias still routes
        s.warnings.push_back(fmt::format("retired alias '{}' (line {}) is swallowed by wildcard route '{}' (line {}): "
                                         "its clients keep getting answers from '{}'",
                                         ra.alias, ra.line, r.alias, r.line, r.model));
  }
  for (const auto& [alias, ls] : by_alias) {
    if (ls.size() < 2) continue;
    std::string where;
    for (int l : ls) where += (where.empty() ? "" : ", ") + std::to_string(l);
    s.warnings.push_back(fmt::format("alias '{}' has {} deployments (lines {}): LiteLLM load-balances between them",
                                     alias, ls.size(), where));
  }
}

std::string list_deployments(const std::vector<const Entry*>& ds) {
  std::string out;
  for (std::size_t i = 0; i < ds.size(); ++i) {
    const YAML::Node lp = ds[i]->view["litellm_params"];
    const std::string base = scalar_or(lp, "api_base");
    const std::string id = scalar_or(ds[i]->view["model_info"], "id");
    out += fmt::format("{}{}) {} @ {} (line {}{})", i == 0 ? "" : "; ", i + 1, mask_inline(scalar_or(lp, "model")),
                       base.empty() ? "-" : util::redact_url(base), ds[i]->dash_line + 1,
                       id.empty() ? "" : ", id " + util::printable(mask_inline(id).substr(0, 80)));
  }
  return out;
}

std::string similar_alias(const Parsed& p, const std::string& alias) {
  // Another case or a typo of an alias the file has (issue 55 audit: `--alias Chat` for `chat`).
  std::vector<std::string> names;
  for (const Entry& e : p.entries) {
    if (e.alias == alias) return {};
    names.push_back(e.alias);
  }
  for (const std::string& n : names)
    if (util::ascii_lower(n) == util::ascii_lower(alias)) return n;
  return util::nearest(alias, names);
}

Result<std::vector<const Entry*>> deployments_of(const Parsed& p, const std::string& path, const std::string& alias,
                                                 const std::string& deployment) {
  std::vector<const Entry*> all_of;
  std::string all;
  for (const Entry& e : p.entries) {
    if (e.alias == alias) all_of.push_back(&e);
    all += (all.empty() ? "" : ", ") + mask_inline(e.alias);
  }
  if (all_of.empty()) {
    // An alias an earlier retire commented out is said as retired, not as unknown (issue 55 tryout E-7).
    for (const RetiredAlias& ra : p.retired)
      if (ra.alias == alias)
        return make_error(
            Errc::BAD_INPUT,
            "{}: alias '{}' is retired (line {}: commented out by an earlier retire) "
            "and routes nothing; `fp4forge gateway rollback --config {}` restores the config before that retire, "
            "`gateway add` gives the alias a new entry",
            path, mask_inline(alias), ra.line, path);
    const std::string near = similar_alias(p, alias);
    return make_error(Errc::BAD_INPUT, "{}: alias '{}' not found{}; aliases: [{}]", path, alias,
                      near.empty() ? std::string() : fmt::format(" (did you mean '{}'?)", mask_inline(near)), all);
  }
  if (deployment.empty()) return all_of;
  std::vector<const Entry*> hit;
  const bool number = deployment.find_first_not_of("0123456789") == std::string::npos;
  for (std::size_t i = 0; i < all_of.size(); ++i) {
    const YAML::Node lp = all_of[i]->view["litellm_params"];
    const std::string model = scalar_or(lp, "model");
    // LiteLLM's own name of a deployment (model_info.id, what x-litellm-model-id reports), or the shape's rule.
    const bool by_id = scalar_or(all_of[i]->view["model_info"], "id") == deployment;
    const bool match = number ? deployment == std::to_string(i + 1)
                       : deployment.find("://") != std::string::npos
                           ? same_backend(scalar_or(lp, "api_base"), deployment)
                           : model == deployment || strip_provider_prefix(model) == deployment;
    if (by_id || match) hit.push_back(all_of[i]);
  }
  if (hit.size() != 1)
    return make_error(Errc::USAGE, "--deployment '{}' names {} of alias '{}''s {} deployment(s): {}; expected exactly "
                      "one: pass its number or its model_info.id",
                      util::redact_url(deployment), hit.empty() ? "none" : std::to_string(hit.size()), alias,
                      all_of.size(), list_deployments(all_of));
  return hit;
}

namespace {
// The aliases whose deployments (litellm_params) differ between two texts of one config, present after (a retired
// alias has nothing to check); none when either text does not parse.
std::vector<std::pair<std::string, bool>> aliases_moved(const std::string& before, const std::string& after,
                                                        const std::string& path) {
  auto a = parse(before, path, split_keep(before));
  auto b = parse(after, path, split_keep(after));
  if (!a || !b) return {};
  auto deployments = [](const Parsed& p) {
    std::map<std::string, std::multiset<std::string>> m;
    for (const Entry& e : p.entries) m[e.alias].insert(dump(child(e.view, "litellm_params")));
    return m;
  };
  const auto da = deployments(*a), db = deployments(*b);
  std::vector<std::pair<std::string, bool>> out;  // alias, and whether it says it takes images
  for (const auto& [alias, ds] : db) {
    const auto it = da.find(alias);
    if (it != da.end() && it->second == ds) continue;
    bool vision = false;
    for (const Entry& e : b->entries)
      vision |= e.alias == alias && scalar_or(child(e.view, "model_info"), "supports_vision") == "true";
    out.emplace_back(alias, vision);
  }
  return out;
}

// A plain rollback never redoes: after a `rollback --to` an older backup, the newest backup is a state that rollback
// undid (tryout T-M1: the printed "to undo" step re-routed the alias forward again). True when the file is at an
// older backup and the last change was a rollback; `out` then says so and names the steps, nothing is written.
bool back_past_newest(const stdfs::path& config, const std::string& current, EditResult& out) {
  const auto baks = list_backups(config);
  const auto keeps = backup::list(write_target(config), kRollbackInfix);
  std::error_code ec1, ec2;
  if (baks.size() < 2 || keeps.empty() ||
      stdfs::last_write_time(keeps.back(), ec1) <= stdfs::last_write_time(baks.back(), ec2) || ec1 || ec2)
    return false;
  for (std::size_t i = baks.size() - 1; i-- > 0;) {
    auto text = read_config(baks[i]);
    if (!text.ok() || *text != current) continue;
    out.backup = baks[i].string();  // the state the file is at: "already identical to" it is true (tryout U-M1)
    out.warnings.push_back(
        fmt::format("{} is at {}, where a rollback --to put it; the newest backup {} is a later "
                    "state, which a plain rollback does not redo: nothing written",
                    out.config, baks[i].string(), baks.back().string()));
    if (i > 0)
      out.next_steps.push_back(fmt::format("to go one step further back: fp4forge gateway rollback --config {} --to {}",
                                           out.config, baks[i - 1].string()));
    out.next_steps.push_back(fmt::format("to redo the undone change: fp4forge gateway rollback --config {} --to {}",
                                         out.config, baks.back().string()));
    return true;
  }
  return false;
}
}  // namespace

// `kept`: deployments of the alias left after a retire of some (0 after a swap or a whole-alias retire).
std::vector<std::string> next_steps_after_edit(const std::string& path, const std::string& alias, bool retired,
                                               std::size_t kept, const std::string& check_flags) {
  std::vector<std::string> out{
      fmt::format("reload LiteLLM: restart the proxy that reads {} (it reads the file at start-up)", path)};
  if (retired)
    out.push_back(fmt::format("confirm clients of '{}' now get an error, not a wildcard's answer: fp4forge gateway "
                              "show --config {}", alias, path));
  else
    out.push_back(fmt::format(
        "{}prove the alias as clients see it: fp4forge gateway check --config {} --alias {} "
        "--url http://LITELLM_HOST:4000{}",
        kept > 0 ? fmt::format("'{}' keeps {} deployment(s): ", alias, kept) : "", path, alias, check_flags));
  out.push_back(fmt::format("to undo: fp4forge gateway rollback --config {}", path));
  return out;
}

Status backup_and_write(const stdfs::path& config, const std::string& old_text, const std::string& new_text,
                        EditResult& out) {
  // Named after the file edited, not the path typed: a rollback through a link or the target finds every edit of that
  // file (tryout P-M2: a backup named after a link hid the target's newer one, and a rollback undid two edits).
  FP4FORGE_ASSIGN_OR_RETURN(stdfs::path bak,
                            backup::write_backup(write_target(config), old_text, kBackupInfix, backup::stamp_now()));
  out.backup = bak.string();
  FP4FORGE_TRY(write_like(write_target(config), new_text, config));
  out.changed = true;
  return {};
}

Result<EditLock> lock_for_edit(const stdfs::path& config, bool dry_run) {
  EditLock l;
  std::error_code ec;
  if (dry_run || !stdfs::exists(config, ec)) return l;
  const stdfs::path target = write_target(config);
  FP4FORGE_TRY(l.lock.acquire(target));
  for (const stdfs::path& f : target == config ? std::vector<stdfs::path>{config} : std::vector<stdfs::path>{config, target})
    for (const stdfs::path& t : backup::stale_temporaries(f)) {
      FP4FORGE_TRY(fs::remove_tree(t));
      l.notes.push_back(fmt::format("removed {}, left by an fp4forge edit that was killed before it finished", t.string()));
    }
  return l;
}

Status write_edit(const stdfs::path& config, const std::string& text, const std::string& new_text,
                  const std::string& alias, bool dry_run, EditResult& out, const std::string& check_flags) {
  if (dry_run) return {};
  // The file must not have changed while the probe ran.
  FP4FORGE_ASSIGN_OR_RETURN(std::string again, read_config(config));
  if (again != text)
    return make_error(Errc::IO, "{}: the file changed while the probe ran; expected it unchanged; re-run the {}",
                      config.string(), out.command);
  FP4FORGE_TRY(backup_and_write(config, text, new_text, out));
  out.next_steps = next_steps_after_edit(config.string(), alias, false, 0, check_flags);
  return {};
}

std::string server_of(std::string_view url) {
  const std::size_t s = url.find("://");
  const std::size_t end = url.find_first_of("/?#", s == std::string_view::npos ? 0 : s + 3);
  return std::string(url.substr(0, end));
}

}  // namespace detail

using namespace detail;

// ---------------------------------------------------------------------------------------------
// public API

const std::vector<std::string>& openai_compatible_providers() {
  static const std::vector<std::string> k{"hosted_vllm", "openai", "litellm_proxy", "custom_openai",
                                          "text-completion-openai"};
  return k;
}

std::string strip_provider_prefix(std::string_view m) {
  const std::size_t slash = m.find('/');
  if (slash == std::string_view::npos) return std::string(m);
  const std::string_view head = m.substr(0, slash);
  const auto& k = openai_compatible_providers();
  if (head == "vllm" || std::find(k.begin(), k.end(), head) != k.end()) return std::string(m.substr(slash + 1));
  return std::string(m);
}

bool same_backend(std::string_view a, std::string_view b) {
  auto norm = [](std::string_view u) {
    std::string s = normalize_base_url(u);
    std::string scheme = "http";
    if (const std::size_t p = s.find("://"); p != std::string::npos) {
      scheme = s.substr(0, p);
      s = s.substr(p + 3);
    }
    scheme = util::ascii_lower(scheme);
    const std::size_t slash = s.find('/');
    std::string host = util::ascii_lower(s.substr(0, slash));
    const std::string rest = slash == std::string::npos ? "" : s.substr(slash);
    if (host.find(':') == std::string::npos || host.back() == ']') host += scheme == "https" ? ":443" : ":80";
    return scheme + "://" + host + rest;
  };
  return !a.empty() && !b.empty() && norm(a) == norm(b);
}

Result<GatewayShow> gateway_show_text(const std::string& text, const std::string& path, const std::string& backend) {
  try {
    const auto lines = split_keep(text);
    FP4FORGE_ASSIGN_OR_RETURN(Parsed p, parse(text, path, lines));
    GatewayShow s;
    s.path = path;
    s.backend = backend;
    describe_routes(p, s);
    if (!backend.empty()) {
      for (const GatewayRoute& r : s.routes)
        if (same_backend(r.api_base, backend) &&
            std::find(s.backend_aliases.begin(), s.backend_aliases.end(), r.alias) == s.backend_aliases.end())
          s.backend_aliases.push_back(r.alias);
    }
    return s;
  } catch (const YAML::Exception& e) {
    return make_error(Errc::BAD_INPUT, "{}: cannot read the config: {}", path, e.what());
  }
}

Result<GatewayShow> gateway_show(const stdfs::path& config, const std::string& backend) {
  FP4FORGE_ASSIGN_OR_RETURN(std::string text, read_config(config));
  return gateway_show_text(text, config.string(), backend);
}

std::vector<stdfs::path> list_backups(const stdfs::path& config) {
  return backup::list(write_target(config), kBackupInfix);  // the edited file's, whichever path named it
}

Result<EditResult> gateway_rollback(const stdfs::path& config, const stdfs::path& to) {
  const std::string path = config.string();
  FP4FORGE_ASSIGN_OR_RETURN(EditLock lock, lock_for_edit(config, false));  // from the read to the rename
  stdfs::path src = to;
  std::string hint = "; hint: name a backup that gateway show reads with --to";
  if (src.empty()) {
    const auto baks = list_backups(config);
    if (baks.empty())
      return make_error(Errc::BAD_INPUT, "{}: no backups ({}YYYYMMDD-HHMMSS) to roll back to; pass --to FILE", path,
                        config.filename().string() + std::string(kBackupInfix));
    src = baks.back();
    if (baks.size() > 1) hint = fmt::format("; hint: roll back to the one before it: --to {}", baks[baks.size() - 2].string());
  }
  FP4FORGE_ASSIGN_OR_RETURN(std::string restored, read_config(src));
  // R4-B8: what is restored must be a config LiteLLM and every gateway command read (the checks swap runs),
  // whether the default picked it or --to named it.
  if (auto readable = gateway_show_text(restored, src.string()); !readable.ok())
    return make_error(Errc::BAD_INPUT, "{}; nothing restored to {}{}", readable.error().message, path, hint);
  FP4FORGE_ASSIGN_OR_RETURN(std::string current, read_config(config));
  EditResult out;
  out.command = "rollback";
  out.config = path;
  out.warnings = lock.notes;
  out.backup = src.string();  // the source of the restore
  if (to.empty() && back_past_newest(config, current, out)) return out;
  if (restored == current) {
    // Already there (a second rollback): the step before it is the next older backup (issue 55 tryout: add then
    // retire could not be undone in two steps without knowing --to).
    if (to.empty() && hint.find("--to ") != std::string::npos)
      out.next_steps = {fmt::format("to go one step further back: fp4forge gateway rollback --config {} --to {}", path,
                                    hint.substr(hint.find("--to ") + 5))};
    return out;
  }
  out.diff = util::unified_diff(mask_secret_values(current), mask_secret_values(restored), path, src.string());
  // Keep what is being replaced, under a name the default rollback never picks.
  FP4FORGE_ASSIGN_OR_RETURN(stdfs::path keep,
                            backup::fresh_name(write_target(config), kRollbackInfix, backup::stamp_now()));
  FP4FORGE_TRY(write_like(keep, current, config));
  out.warnings.push_back(fmt::format("the replaced content was saved as {}", keep.string()));
  FP4FORGE_TRY(write_like(write_target(config), restored, config));
  FP4FORGE_ASSIGN_OR_RETURN(std::string check, read_config(config));
  if (check != restored)
    return make_error(Errc::IO, "{}: after the rollback the file differs from {}; expected byte-identical content", path,
                      src.string());
  out.changed = true;
  out.next_steps = {fmt::format("reload LiteLLM: restart the proxy that reads {} (it reads the file at start-up)", path)};
  // The aliases the rollback moved, proven as clients see them once the proxy is reloaded (tryout R-L2: a proxy not
  // reloaded after a rollback kept answering from the seat it rolled away from).
  // --multimodal where the entry says it takes images (the gate swap applies); tools cannot be read from the file.
  for (const auto& [alias, vision] : aliases_moved(current, restored, path))
    out.next_steps.push_back(
        fmt::format("prove '{}' as clients see it: fp4forge gateway check --config {} --alias {} "
                    "--url http://LITELLM_HOST:4000{} (LITELLM_HOST: the proxy's host; add --no-tools for a seat "
                    "that serves no tools, as its compose.yaml header's probe says)",
                    mask_inline(alias), path, mask_inline(alias), vision ? " --multimodal" : ""));
  return out;
}

Result<EditResult> gateway_retire(const stdfs::path& config, const std::string& alias, const std::string& deployment,
                                  bool all_deployments) {
  const std::string path = config.string();
  try {
    FP4FORGE_ASSIGN_OR_RETURN(EditLock lock, lock_for_edit(config, false));  // from the read to the rename
    FP4FORGE_ASSIGN_OR_RETURN(std::string text, read_config(config));
    const auto lines = split_keep(text);
    FP4FORGE_ASSIGN_OR_RETURN(Parsed p, parse(text, path, lines));
    if (!deployment.empty() && all_deployments)
      return make_error(Errc::USAGE, "--deployment and --all-deployments contradict each other; pick one");
    FP4FORGE_ASSIGN_OR_RETURN(auto hits, deployments_of(p, path, alias, deployment));
    if (hits.size() > 1 && !all_deployments)
      return make_error(Errc::USAGE,
                        "{}: alias '{}' has {} deployments, which LiteLLM load-balances: {}; retiring them all takes "
                        "the alias away (a wildcard route may then answer for it): pass --deployment N to retire one "
                        "replica, or --all-deployments to retire the alias",
                        path, alias, hits.size(), list_deployments(hits));
    const std::size_t live = static_cast<std::size_t>(
        std::count_if(p.entries.begin(), p.entries.end(), [&](const Entry& e) { return e.alias == alias; }));
    std::set<int> removed;
    for (const Entry* e : hits) removed.insert(e->index);
    const std::string which =
        removed.size() < live ? fmt::format("' deployment {}", list_deployments(hits).substr(3)) : std::string("'");
    if (removed.size() == p.entries.size())
      return make_error(Errc::BAD_INPUT,
                        "{}: retiring '{}' would leave model_list empty and the proxy without routes; expected at "
                        "least one other alias",
                        path, alias);
    if (p.root["model_list"].Style() == YAML::EmitterStyle::Flow)
      return make_error(Errc::BAD_INPUT, "{}: model_list is in flow style ([...]); edit it by hand", path);
    FP4FORGE_TRY(refuse_shared_anchors(p, lines, removed, path));
    std::vector<std::pair<int, int>> ranges;
    for (const Entry& e : p.entries)
      if (removed.count(e.index)) ranges.push_back(entry_range(p, lines, e));
    std::vector<std::string> out_lines;
    const std::string eol = file_eol(lines);
    const std::string when = timestamp("%Y-%m-%d %H:%M:%S");
    std::size_t r = 0;
    for (int i = 0; i < static_cast<int>(lines.size()); ++i) {
      if (r < ranges.size() && i == ranges[r].first) {
        out_lines.push_back(fmt::format("{}{}{} on {}: remove the '# ' before the lines below to restore it{}",
                                        kRetiredMarker, alias, which, when, eol));
      }
      std::string l = lines[static_cast<std::size_t>(i)];
      if (r < ranges.size() && i >= ranges[r].first && i < ranges[r].second) {
        l = "# " + l;
        if (i + 1 == ranges[r].second) ++r;
      }
      out_lines.push_back(std::move(l));
    }
    const std::string new_text = join(out_lines);
    FP4FORGE_TRY(validate_edit(p, new_text, path, {}, removed));
    EditResult out;
    out.command = "retire";
    out.config = path;
    out.warnings = lock.notes;
    out.diff = util::unified_diff(mask_secret_values(text), mask_secret_values(new_text), path, path + " (retired)");
    auto shown = gateway_show_text(new_text, path);
    if (shown.ok()) {
      for (const auto& w : shown->warnings)
        if (w.find("'" + alias + "'") != std::string::npos) out.warnings.push_back(w);
    }
    FP4FORGE_TRY(backup_and_write(config, text, new_text, out));
    out.next_steps = next_steps_after_edit(path, alias, removed.size() == live, live - removed.size());
    return out;
  } catch (const YAML::Exception& e) {
    return make_error(Errc::BAD_INPUT, "{}: cannot edit the config: {}", path, e.what());
  }
}

}  // namespace fp4forge::gateway
