// gateway add: a new alias (or one more deployment of an existing one with --replica) written as a new
// model_list entry, after the backend passed the probe (seat_gate.cc), with a backup: the same cutover order as
// swap (F44), for the alias an operator would otherwise add to the YAML by hand.
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "config_text.h"
#include "fp4forge/util/yaml_strict.h"
#include "fp4forge/gateway/gateway.h"
#include "fp4forge/util/redact.h"
#include "fp4forge/util/strings.h"
#include "fp4forge/util/udiff.h"
#include "seat_gate.h"

namespace fp4forge::gateway {

namespace stdfs = std::filesystem;
using namespace detail;

namespace {

/** The entry's keys as the new file must read them: litellm_params and model_info, each key -> dump(value). */
struct Intended {
  std::map<std::string, std::string> params, info;
};

/** model_info KEY=VALUE pairs: USAGE for an empty key, a multi-line or unparsable value. */
Status check_model_info(const AddOptions& o) {
  for (const auto& [k, v] : o.model_info) {
    if (k.empty() || v.find('\n') != std::string::npos)
      return make_error(Errc::USAGE, "--model-info '{}={}': expected KEY=VALUE with a one-line YAML value", k, v);
    // The value is written into the file LiteLLM reads with PyYAML's safe_load: only what that reader takes as
    // yaml-cpp does (no `!!python/...` or other non-core tag, no control byte; util/yaml_strict.h, R4-B14).
    FP4FORGE_TRY(util::load_yaml_strict(v, fmt::format("--model-info {}={}", util::printable(k, 80), util::printable(v, 120)),
                                        Errc::USAGE));
  }
  return {};
}

/** model_info as written: --model-info pairs, plus supports_vision: true for --multimodal (so that later swaps
 * know the alias takes images). */
std::vector<std::pair<std::string, std::string>> model_info_of(const AddOptions& o) {
  auto info = o.model_info;
  const bool has = std::any_of(info.begin(), info.end(), [](const auto& kv) { return kv.first == "supports_vision"; });
  if (!has && o.probe_options.vision == probe::VisionMode::MULTIMODAL) info.emplace_back("supports_vision", "true");
  return info;
}

/** The entry's lines, indented like the file's last entry (its "-", its keys, its litellm_params' keys). */
std::vector<std::string> entry_lines(const Parsed& p, const std::vector<std::string>& lines, const AddOptions& o,
                                     const std::string& eol, Intended& want) {
  std::size_t dash = 2, key = 4, step = 2;
  if (!p.entries.empty()) {
    const Entry& e = p.entries.back();
    dash = std::min<std::size_t>(body_of(lines[static_cast<std::size_t>(e.dash_line)]).find('-'), 40);
    key = static_cast<std::size_t>(std::max(0, e.node.Mark().column));
    const YAML::Node lp = child(e.node, "litellm_params");
    if (lp.IsMap() && lp.size() > 0 && lp.Style() != YAML::EmitterStyle::Flow) {
      const int c = lp.begin()->first.Mark().column - static_cast<int>(key);
      if (c > 0 && c <= 8) step = static_cast<std::size_t>(c);
    }
    if (key <= dash) key = dash + 2;
  }
  auto pad = [](std::size_t n) { return std::string(n, ' '); };
  auto key_text = [](const std::string& k) { return plain_safe(k) ? k : double_quoted(k); };
  std::vector<std::string> out{pad(dash) + "-" + pad(key - dash - 1) + "model_name: " + scalar_text(o.alias, 0) + eol,
                               pad(key) + "litellm_params:" + eol};
  std::vector<std::pair<std::string, std::string>> params{{"model", scalar_text(o.backend_model, 0)},
                                                          {"api_base", scalar_text(o.api_base, 0)}};
  if (!o.api_key_env.empty()) params.emplace_back("api_key", scalar_text("os.environ/" + o.api_key_env, 0));
  for (const auto& kv : o.params) params.push_back(kv);
  for (const auto& [k, v] : params) {
    out.push_back(pad(key + step) + key_text(k) + ": " + v + eol);
    want.params[k] = dump(YAML::Load(v));
  }
  const auto info = model_info_of(o);
  if (!info.empty()) out.push_back(pad(key) + "model_info:" + eol);
  for (const auto& [k, v] : info) {
    out.push_back(pad(key + step) + key_text(k) + ": " + v + eol);
    want.info[k] = dump(YAML::Load(v));
  }
  return out;
}

/** BAD_INPUT unless the new file's entry at `at` is exactly the one intended. */
Status check_added(const std::string& new_text, const std::string& path, const AddOptions& o, int at,
                   const Intended& want) {
  const YAML::Node ml = YAML::Load(new_text)["model_list"];
  const YAML::Node item = ml && ml.IsSequence() && static_cast<std::size_t>(at) < ml.size()
                              ? ml[static_cast<std::size_t>(at)] : YAML::Node();
  auto read = [](const YAML::Node& m) {
    std::map<std::string, std::string> got;
    if (m && m.IsMap())
      for (auto it = m.begin(); it != m.end(); ++it) got[it->first.Scalar()] = dump(it->second);
    return got;
  };
  if (scalar_or(item, "model_name") != o.alias || read(child(item, "litellm_params")) != want.params ||
      read(child(item, "model_info")) != want.info)
    return make_error(Errc::BAD_INPUT, "{}: the new entry for '{}' does not read back as written; file left "
                      "untouched; {}", path, o.alias, kUnsafeYaml);
  return {};
}

/** USAGE for an alias that exists without --replica (or the reverse), or a model_info.id another entry has. */
Status check_alias(const Parsed& p, const std::string& path, const AddOptions& o, std::vector<const Entry*>& live) {
  for (const Entry& e : p.entries)
    if (e.alias == o.alias) live.push_back(&e);
  if (!live.empty() && !o.replica)
    return make_error(Errc::USAGE, "{}: alias '{}' exists with {} deployment(s): {}; pass --replica to add one more "
                      "(LiteLLM load-balances them), or use gateway swap to repoint one", path, o.alias, live.size(),
                      list_deployments(live));
  if (live.empty() && o.replica)
    return make_error(Errc::USAGE, "{}: --replica: alias '{}' has no deployment to add a replica to; leave --replica "
                      "out to create it", path, o.alias);
  for (const auto& [k, v] : o.model_info) {
    if (k != "id") continue;
    const YAML::Node id = YAML::Load(v);
    for (const Entry& e : p.entries)
      if (id.IsScalar() && scalar_or(child(e.node, "model_info"), "id") == id.Scalar())
        return make_error(Errc::USAGE, "--model-info id={}: the entry '{}' at line {} has that model_info.id; LiteLLM "
                          "names one deployment by it (x-litellm-model-id, --deployment); pick another", v, e.alias,
                          e.dash_line + 1);
  }
  return {};
}

/** The new file's text: the entry inserted after the alias's last deployment (replica) or model_list's last entry.
 * `at` is its position in model_list. */
Result<std::string> add_text(const Parsed& p, const std::vector<std::string>& lines, const std::string& path,
                             const AddOptions& o, const std::vector<const Entry*>& live, int& at, Intended& want) {
  const YAML::Node ml = p.root["model_list"];
  if (ml.IsSequence() && ml.Style() == YAML::EmitterStyle::Flow)
    return make_error(Errc::BAD_INPUT, "{}: model_list is in flow style ([...]); edit it by hand", path);
  std::vector<std::string> out = lines;
  int line = 0;
  if (p.entries.empty()) {
    const std::string head = body_of(lines[static_cast<std::size_t>(p.model_list_line)]);
    const std::string rest = head.substr(head.find(':') + 1);
    const std::size_t c = rest.find_first_not_of(" \t");
    if (c != std::string::npos && rest[c] != '#')
      return make_error(Errc::BAD_INPUT, "{}: line {}: model_list has a value on its line ('{}'); expected 'model_list:' "
                        "alone; edit it by hand", path, p.model_list_line + 1, util::printable(rest, 40));
    line = p.model_list_line + 1;
    at = 0;
  } else {
    const Entry& after = live.empty() ? p.entries.back() : *live.back();
    line = entry_range(p, lines, after).second;
    at = after.index + 1;
  }
  const std::string eol = file_eol(lines);
  if (line > 0 && eol_of(out[static_cast<std::size_t>(line - 1)]).empty()) out[static_cast<std::size_t>(line - 1)] += eol;
  const auto add = entry_lines(p, lines, o, eol, want);
  out.insert(out.begin() + line, add.begin(), add.end());
  return join(out);
}

/** Warnings about what the new entry changes: a wildcard that answered the alias until now, a retired namesake. */
void describe_takeover(const Parsed& p, const AddOptions& o, bool existed, std::vector<std::string>& warnings) {
  GatewayShow s;
  describe_routes(p, s);
  warnings = s.warnings;
  for (const GatewayRoute& r : s.routes)
    if (!existed && r.wildcard && glob_match(r.alias, o.alias))
      warnings.push_back(fmt::format("until now wildcard route '{}' (line {}, model '{}') answered '{}': after the "
                                     "reload the new deployment does", r.alias, r.line, r.model, o.alias));
  // A new alias that only the case tells from one in the file: LiteLLM routes the two apart (issue 55 tryout).
  if (!existed)
    for (const Entry& e : p.entries)
      if (e.alias != o.alias && util::ascii_lower(e.alias) == util::ascii_lower(o.alias)) {
        warnings.push_back(fmt::format("alias '{}' is new, but '{}' (line {}) differs from it only in case: LiteLLM "
                                       "routes them apart; did you mean '{}' (with --replica to add a deployment)?",
                                       mask_inline(o.alias), mask_inline(e.alias), e.dash_line + 1,
                                       mask_inline(e.alias)));
        break;
      }
  for (const RetiredAlias& r : s.retired)
    if (r.alias == o.alias)
      warnings.push_back(fmt::format("alias '{}' has a retired entry (line {}); it stays commented out", o.alias, r.line));
}

}  // namespace

Result<EditResult> gateway_add(const stdfs::path& config, const AddOptions& o) {
  const std::string path = config.string();
  FP4FORGE_TRY(check_seat_options(o, "add"));
  FP4FORGE_TRY(check_model_info(o));
  try {
    FP4FORGE_ASSIGN_OR_RETURN(EditLock lock, lock_for_edit(config, o.dry_run));  // from the read to the rename
    FP4FORGE_ASSIGN_OR_RETURN(std::string text, read_config(config));
    const auto lines = split_keep(text);
    FP4FORGE_ASSIGN_OR_RETURN(Parsed p, parse(text, path, lines));
    std::vector<const Entry*> live;
    FP4FORGE_TRY(check_alias(p, path, o, live));
    int at = -1;
    Intended want;
    FP4FORGE_ASSIGN_OR_RETURN(std::string new_text, add_text(p, lines, path, o, live, at, want));
    FP4FORGE_TRY(validate_edit(p, new_text, path, {}, {}, at));
    FP4FORGE_TRY(check_added(new_text, path, o, at, want));

    EditResult out;
    out.command = "add";
    out.config = path;
    out.diff = util::unified_diff(mask_secret_values(text), mask_secret_values(new_text), path, path + " (added)");
    describe_takeover(p, o, !live.empty(), out.warnings);
    warn_store_model_in_db(p, o.alias, out.warnings);
    seat_warnings(o, out.warnings);
    Gate g;
    g.path = path;
    g.alias = o.alias;
    const YAML::Node item = YAML::Load(new_text)["model_list"][static_cast<std::size_t>(at)];
    g.new_params = child(item, "litellm_params");
    g.new_model_info = child(item, "model_info");
    g.alias_entries = live;
    // A replica of a server the alias already routes to is one server counted twice (tryout S-L2: written silently).
    for (const Entry* e : live) {
      const YAML::Node lp = child(e->view, "litellm_params");
      if (same_backend(scalar_or(lp, "api_base"), o.api_base) &&
          strip_provider_prefix(scalar_or(lp, "model")) == strip_provider_prefix(o.backend_model))
        out.warnings.push_back(fmt::format(
            "alias '{}' already routes to {} (model '{}', line {}): this replica is the same server, which LiteLLM "
            "then counts twice in its load balancing; retire one of them unless that is meant",
            o.alias, util::redact_url(o.api_base), scalar_or(lp, "model"), e->dash_line + 1));
    }
    out.warnings.insert(out.warnings.end(), lock.notes.begin(), lock.notes.end());
    FP4FORGE_TRY(gate_and_write(g, o, config, text, new_text, out));
    return out;
  } catch (const YAML::Exception& e) {
    return make_error(Errc::BAD_INPUT, "{}: cannot edit the config: {}", path, e.what());
  }
}

}  // namespace fp4forge::gateway
