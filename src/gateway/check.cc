// gateway check: the probe sent through the LiteLLM proxy itself, with the alias as the model name: what the
// alias's clients get after the proxy reloaded the config; and which backend answered, from LiteLLM's response
// headers, against the deployments the file names (an old backend still answering means the edit is not live).
#include "fp4forge/gateway/gateway.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "config_text.h"
#include "fp4forge/util/backup.h"
#include "fp4forge/util/redact.h"
#include "seat_gate.h"

namespace fp4forge::gateway {

using probe::all_checks;
using probe::run_probe;
namespace stdfs = std::filesystem;
using namespace detail;

namespace {

/** The live deployment of the alias a served-by names: by server where both sides give one, else by model_info.id.
 * "" when none. The server decides: a swap keeps the deployment's id, so a proxy that has not reloaded answers
 * with the live id and the old backend's api_base (issue 55 tryout: the id matched first and the check passed). */
std::string matching_deployment(const std::vector<const Entry*>& entries, const probe::ServedBy& by) {
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const std::string id = scalar_or(entries[i]->view["model_info"], "id");
    const std::string base = scalar_or(entries[i]->view["litellm_params"], "api_base");
    const bool by_id = !by.model_id.empty() && !id.empty() && by.model_id == id;
    const bool both_bases = !by.api_base.empty() && !base.empty();
    const bool by_base = both_bases && same_backend(server_of(util::redact_url(base)), server_of(by.api_base));
    if (both_bases ? by_base : by_id) return std::to_string(i + 1) + list_deployments({entries[i]}).substr(1);
  }
  return {};
}

/** The live deployment whose model_info.id a served-by gives, when its api_base is another server ("" if none). */
std::string same_id_other_base(const std::vector<const Entry*>& entries, const probe::ServedBy& by) {
  if (by.model_id.empty() || by.api_base.empty()) return {};
  for (const Entry* e : entries)
    if (scalar_or(e->view["model_info"], "id") == by.model_id)
      return util::redact_url(scalar_or(e->view["litellm_params"], "api_base"));
  return {};
}

/** Where the newest backup routed the alias to a served-by's backend ("" when it did not): the old backend. */
std::string in_newest_backup(const stdfs::path& config, const std::string& alias, const probe::ServedBy& by) {
  const auto baks = list_backups(config);
  if (baks.empty()) return {};
  auto text = read_config(baks.back());
  if (!text.ok()) return {};
  const auto lines = split_keep(*text);
  auto p = parse(*text, baks.back().string(), lines);
  if (!p.ok()) return {};
  auto old = deployments_of(*p, baks.back().string(), alias, {});
  if (!old.ok()) return {};
  return matching_deployment(*old, by).empty() ? std::string() : baks.back().string();
}

/** Who answered each check (LiteLLM's x-litellm-* headers), matched with the alias's live deployments. */
void verify_served(const stdfs::path& config, const std::vector<const Entry*>& entries, CheckReport& rep) {
  bool any_id = false;
  for (const Entry* e : entries) any_id |= !scalar_or(e->view["model_info"], "id").empty();
  bool answered = false;
  for (const auto& c : rep.probe.checks) {
    answered |= c.http_status >= 200 && c.http_status < 300;
    // A refused request (401/403) proves nothing about routing, whatever headers came with it (issue 55 tryout H:
    // a refused key read as a stale proxy, "restart it").
    if (!c.served_by.any() || c.http_status == 401 || c.http_status == 403) continue;
    auto it = std::find_if(rep.served.begin(), rep.served.end(), [&](const ServedBackend& b) {
      return b.by.api_base == c.served_by.api_base && b.by.model_id == c.served_by.model_id;
    });
    if (it == rep.served.end()) {
      rep.served.push_back({c.served_by, {}, matching_deployment(entries, c.served_by)});
      it = rep.served.end() - 1;
    }
    it->checks.push_back(probe::check_name(c.check));
  }
  // A load-balanced alias: a replica that answered no check is not proven by this run (issue 55 tryout: the swapped
  // replica never answered, and the check passed on the untouched one).
  if (entries.size() > 1 && !rep.served.empty()) {
    std::vector<std::string> silent;
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const std::string tag = std::to_string(i + 1) + ")";
      if (std::none_of(rep.served.begin(), rep.served.end(),
                       [&](const ServedBackend& b) { return b.deployment.rfind(tag, 0) == 0; }))
        silent.push_back(std::to_string(i + 1) + list_deployments({entries[i]}).substr(1));
    }
    if (!silent.empty())
      rep.not_proven = fmt::format(
          "deployment(s) {} of alias '{}' answered no check (LiteLLM spreads the alias over its {} deployments): "
          "probe each seat directly (fp4forge probe API_BASE --model MODEL), or run the check again",
          fmt::join(silent, "; "), rep.alias, entries.size());
  }
  if (rep.served.empty() && answered)
    rep.warnings.push_back("the gateway sent no x-litellm-model-api-base / x-litellm-model-id headers: which backend "
                           "answered could not be checked (a LiteLLM without them, or a proxy in front that drops them)");
  for (const ServedBackend& b : rep.served) {
    if (!b.by.model_group.empty() && b.by.model_group != rep.alias)
      rep.warnings.push_back(fmt::format("checks {} were answered by model group '{}', not '{}' (a fallback?)",
                                         fmt::join(b.checks, ","), b.by.model_group, rep.alias));
    // A model id alone tells nothing when the file gives no ids (LiteLLM then names deployments by a hash).
    if (!b.deployment.empty() || (b.by.api_base.empty() && !any_id)) continue;
    const std::string backend = !b.by.api_base.empty() ? b.by.api_base : "model id " + b.by.model_id;
    const std::string old = in_newest_backup(config, rep.alias, b.by);
    const std::string kept_id = same_id_other_base(entries, b.by);
    rep.stale = fmt::format(
        "alias '{}' still answers from {} ({}: checks {}), which no live deployment of it in {} "
        "names{}{}; the proxy has not reloaded the edited file (restart it), or keeps the alias in "
        "its database",
        rep.alias, backend, b.by.api_base.empty() ? "x-litellm-model-id" : "x-litellm-model-api-base",
        fmt::join(b.checks, ","), rep.config,
        old.empty() ? "" : fmt::format(" (the backup {} routed it there: the old backend)", old),
        kept_id.empty() ? ""
                        : fmt::format(" (its x-litellm-model-id '{}' is the live deployment's, "
                                      "which now routes to {})",
                                      b.by.model_id, kept_id));
    return;
  }
}

}  // namespace

Result<CheckReport> gateway_check(const stdfs::path& config, const CheckOptions& o) {
  const std::string path = config.string();
  const std::string url = o.gateway_url.empty() ? std::string("http://127.0.0.1:4000") : o.gateway_url;
  FP4FORGE_TRY(probe::check_base_url(url));
  if (o.alias.empty()) return make_error(Errc::USAGE, "gateway check: --alias is required");
  CheckReport rep;
  rep.config = path;
  rep.alias = o.alias;
  probe::ProbeOptions po = o.probe_options;
  try {
    FP4FORGE_ASSIGN_OR_RETURN(std::string text, read_config(config));
    const auto lines = split_keep(text);
    FP4FORGE_ASSIGN_OR_RETURN(Parsed p, parse(text, path, lines));
    GatewayShow s;
    describe_routes(p, s);
    const bool routed = std::any_of(s.routes.begin(), s.routes.end(),
                                    [&](const GatewayRoute& r) { return !r.wildcard && r.alias == o.alias; });
    if (!routed) {
      std::string wild;
      for (const GatewayRoute& r : s.routes)
        if (r.wildcard && glob_match(r.alias, o.alias)) wild = r.alias;
      const bool retired = std::any_of(s.retired.begin(), s.retired.end(),
                                       [&](const RetiredAlias& r) { return r.alias == o.alias; });
      const std::string near = similar_alias(p, o.alias);
      return make_error(Errc::BAD_INPUT, "{}: no live route names alias '{}'{}{}{}; a probe through the gateway would "
                        "prove {}; expected the alias in model_list",
                        path, o.alias, near.empty() ? std::string() : fmt::format(" (did you mean '{}'?)", mask_inline(near)),
                        retired ? " (it is retired)" : "",
                        wild.empty() ? "" : fmt::format(" (wildcard route '{}' matches it)", wild),
                        wild.empty() ? "nothing" : "the wildcard's backend instead");
    }
    if (po.api_key.empty()) {
      const YAML::Node gs = p.root["general_settings"];
      const std::string mk = scalar_or(gs, "master_key");
      if (!mk.empty()) {
        po.api_key = resolve_secret(mk, "general_settings.master_key", rep.warnings);
        po.api_key_source = "the config's general_settings.master_key";
      }
    }
    FP4FORGE_ASSIGN_OR_RETURN(auto entries, deployments_of(p, path, o.alias, {}));
    // The file routes the alias: a proxy that does not serve it has not loaded the file (issue 55 tryout: the
    // probe's "check --model (vLLM: ...)" for a command without --model, in front of a proxy).
    if (po.model_not_served_hint.empty() && !entries.empty())
      po.model_not_served_hint = fmt::format(
          "{} routes alias '{}' (line {}), so the proxy has not loaded the edited file (restart it), or keeps its "
          "models in its database",
          path, o.alias, entries.front()->dash_line + 1);
    if (po.vision == probe::VisionMode::AUTO)
      for (const Entry* e : entries)
        if (yaml_to_json(child(child(e->node, "model_info"), "supports_vision")) == true) {
          po.vision = probe::VisionMode::MULTIMODAL;
          rep.warnings.push_back(fmt::format("alias '{}' takes images (model_info.supports_vision at line {}): a "
                                             "rejected image fails the vision check (--text-only overrides)",
                                             o.alias, e->dash_line + 1));
          break;
        }
    warn_store_model_in_db(p, o.alias, rep.warnings);
    const auto checks = o.checks.empty() ? all_checks() : o.checks;
    rep.probe = o.client != nullptr ? run_probe(*o.client, url, o.alias, checks, po) : run_probe(url, o.alias, checks, po);
    verify_served(config, entries, rep);
  } catch (const YAML::Exception& e) {
    return make_error(Errc::BAD_INPUT, "{}: cannot read the config: {}", path, e.what());
  }
  return rep;
}

}  // namespace fp4forge::gateway
