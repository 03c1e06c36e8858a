// gateway swap: repoint one deployment of an alias to a new backend, after the backend passed the probe
// (seat_gate.cc), as a validated line edit of the config (config_text.h) with a backup.
#include "fp4forge/gateway/gateway.h"

#include <algorithm>
#include <map>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "config_text.h"
#include "seat_gate.h"
#include "fp4forge/util/redact.h"
#include "fp4forge/util/strings.h"
#include "fp4forge/util/udiff.h"

namespace fp4forge::gateway {

using probe::all_checks;
using probe::Check;
using probe::check_name;
using probe::CheckStatus;
using probe::normalize_base_url;
using probe::ProbeReport;
using probe::run_probe;
namespace stdfs = std::filesystem;
using namespace detail;

namespace {

/** The host[:port] of a URL as a message shows it: without scheme, user info or path ("" when it has none). */
std::string url_host(std::string_view url) {
  std::size_t b = url.find("://");
  b = b == std::string_view::npos ? 0 : b + 3;
  std::size_t e = url.find_first_of("/?#", b);
  if (e == std::string_view::npos) e = url.size();
  std::string_view a = url.substr(b, e - b);
  if (const std::size_t at = a.rfind('@'); at != std::string_view::npos) a.remove_prefix(at + 1);
  return util::ascii_lower(a);
}

// Builds the swapped text. Returns the new text or an error; `p` is the parse of `text`.
Result<std::string> swap_text(const std::vector<std::string>& lines, const Parsed& p,
                              const std::string& path, const SwapOptions& o, int& entry_index) {
  FP4FORGE_ASSIGN_OR_RETURN(auto hits, deployments_of(p, path, o.alias, o.deployment));
  if (hits.size() > 1)
    return make_error(Errc::USAGE,
                      "{}: alias '{}' has {} deployments, which LiteLLM load-balances: {}; swap repoints one at a "
                      "time: pass --deployment N (or its model_info.id, api_base or model)",
                      path, o.alias, hits.size(), list_deployments(hits));
  const Entry& e = *hits[0];
  entry_index = e.index;
  const YAML::Node lp = e.node["litellm_params"];
  if (!lp || !lp.IsMap() || lp.Style() == YAML::EmitterStyle::Flow || e.node.Style() == YAML::EmitterStyle::Flow)
    return make_error(Errc::BAD_INPUT,
                      "{}: line {}: alias '{}' has no block-style 'litellm_params' mapping; expected "
                      "'litellm_params:' with one key per line; edit this entry by hand",
                      path, e.first_line + 1, o.alias);

  std::vector<std::pair<std::string, std::string>> want;  // key -> new value text
  std::vector<std::string> lines_out = lines;
  struct Existing {
    int line;         // the value's line (yaml-cpp: -1 for an empty value, which has no position)
    int key_line;     // the key's line
    std::size_t col;
    // The value can be edited in place: it starts on its key's line, inside the file (fuzzing found an empty
    // value's mark of -1 used as a line index).
    bool in_place(std::size_t n_lines) const {
      return line >= 0 && line == key_line && static_cast<std::size_t>(line) < n_lines;
    }
  };
  std::map<std::string, Existing> existing;
  int key_col = -1;
  int anchor_line = -1;  // new keys go after this line
  for (auto it = lp.begin(); it != lp.end(); ++it) {
    const std::string k = it->first.Scalar();
    existing[k] = {it->second.Mark().line, it->first.Mark().line,
                   static_cast<std::size_t>(std::max(0, it->second.Mark().column))};
    if (key_col < 0) key_col = it->first.Mark().column;
    if (k == "model") anchor_line = it->first.Mark().line;
  }
  if (anchor_line < 0) anchor_line = lp.begin()->first.Mark().line;

  auto value_for = [&](const std::string& k, const std::string& v, bool is_yaml_text) -> Result<std::string> {
    if (is_yaml_text) return v;
    char quote = 0;
    if (auto ex = existing.find(k); ex != existing.end() && ex->second.in_place(lines.size())) {
      const std::string b = body_of(lines[static_cast<std::size_t>(ex->second.line)]);
      if (ex->second.col < b.size() && (b[ex->second.col] == '"' || b[ex->second.col] == '\''))
        quote = b[ex->second.col];
    }
    return scalar_text(v, quote);
  };
  std::vector<std::tuple<std::string, std::string, bool>> edits{{"model", o.backend_model, false},
                                                                {"api_base", o.api_base, false}};
  if (!o.api_key_env.empty() && !o.keep_api_key) edits.emplace_back("api_key", "os.environ/" + o.api_key_env, false);
  for (const auto& [k, v] : o.params) edits.emplace_back(k, v, true);

  std::vector<std::string> inserts;
  for (const auto& [k, v, is_yaml] : edits) {
    FP4FORGE_ASSIGN_OR_RETURN(std::string vt, value_for(k, v, is_yaml));
    auto ex = existing.find(k);
    if (ex == existing.end()) {
      const std::string key_text = plain_safe(k) ? k : double_quoted(k);
      inserts.push_back(std::string(static_cast<std::size_t>(std::max(0, key_col)), ' ') + key_text + ": " + vt);
      continue;
    }
    if (!ex->second.in_place(lines.size()))
      return make_error(Errc::BAD_INPUT,
                        "{}: line {}: litellm_params.{} of alias '{}' has no value on its key's line; expected 'key: "
                        "value' on one line; edit this key by hand",
                        path, ex->second.key_line + 1, k, o.alias);
    const auto li = static_cast<std::size_t>(ex->second.line);
    const YAML::Node kn = lp[k];
    const std::string b = body_of(lines_out[li]);
    const std::size_t end = kn.IsScalar() ? scalar_end(b, ex->second.col) : std::string::npos;
    // A plain scalar continued on the next line is multi-line: refuse.
    bool continued = false;
    for (std::size_t n = li + 1; n < lines.size(); ++n) {
      if (blank_or_comment(lines[n])) continue;
      continued = indent_of(lines[n]) > key_col && kn.IsScalar() && b[ex->second.col] != '"' && b[ex->second.col] != '\'';
      break;
    }
    if (end == std::string::npos || continued)
      return make_error(Errc::BAD_INPUT,
                        "{}: line {}: litellm_params.{} of alias '{}' is not a one-line scalar; expected 'key: value' "
                        "on one line; edit this key by hand",
                        path, li + 1, k, o.alias);
    lines_out[li] = b.substr(0, ex->second.col) + vt + b.substr(end) + eol_of(lines_out[li]);
  }
  if (!inserts.empty()) {
    const std::string eol = file_eol(lines);
    // A last line without a terminator needs one before anything is appended after it.
    if (static_cast<std::size_t>(anchor_line) + 1 == lines_out.size() && eol_of(lines_out.back()).empty())
      lines_out.back() += eol;
    std::vector<std::string> add;
    for (const auto& s : inserts) add.push_back(s + eol);
    lines_out.insert(lines_out.begin() + anchor_line + 1, add.begin(), add.end());
  }
  return join(lines_out);
}

// Checks that the swapped entry carries exactly the intended litellm_params.
Status check_swapped(const std::string& new_text, const std::string& path, const SwapOptions& o, int entry_index,
                     const YAML::Node& old_lp) {
  const YAML::Node root = YAML::Load(new_text);
  YAML::Node lp;
  const YAML::Node ml = root["model_list"];
  if (ml && ml.IsSequence() && entry_index >= 0 && static_cast<std::size_t>(entry_index) < ml.size()) {
    const YAML::Node item = ml[static_cast<std::size_t>(entry_index)];  // the edited deployment, not a namesake
    if (item["model_name"] && item["model_name"].Scalar() == o.alias) lp = item["litellm_params"];
  }
  constexpr const char* kUnsafe = "the config uses YAML a line edit cannot change safely (anchors, merge keys, tags?): "
                                  "edit it by hand";
  if (!lp) return make_error(Errc::BAD_INPUT, "{}: alias '{}' lost by the edit; file left untouched; {}", path, o.alias, kUnsafe);
  std::map<std::string, std::string> expect;
  for (auto it = old_lp.begin(); it != old_lp.end(); ++it) expect[it->first.Scalar()] = dump(it->second);
  expect["model"] = dump(YAML::Node(o.backend_model));
  expect["api_base"] = dump(YAML::Node(o.api_base));
  if (!o.api_key_env.empty() && !o.keep_api_key) expect["api_key"] = dump(YAML::Node("os.environ/" + o.api_key_env));
  for (const auto& [k, v] : o.params) expect[k] = dump(YAML::Load(v));
  std::map<std::string, std::string> got;
  for (auto it = lp.begin(); it != lp.end(); ++it) got[it->first.Scalar()] = dump(it->second);
  if (got != expect) {
    for (const auto& [k, v] : expect)
      if (got[k] != v)
        return make_error(Errc::BAD_INPUT, "{}: after the edit litellm_params.{} of '{}' reads '{}', expected '{}'; file "
                          "left untouched; {}", path, k, o.alias, is_secret_key(k) ? "***" : mask_inline(got[k]),
                          is_secret_key(k) ? "***" : mask_inline(v), kUnsafe);
    return make_error(Errc::BAD_INPUT, "{}: the edit added unexpected keys to '{}'; file left untouched; {}", path, o.alias,
                      kUnsafe);
  }
  return {};
}

}  // namespace

Result<EditResult> gateway_swap(const stdfs::path& config, const SwapOptions& o) {
  const std::string path = config.string();
  FP4FORGE_TRY(check_seat_options(o, "swap"));
  try {
    FP4FORGE_ASSIGN_OR_RETURN(EditLock lock, lock_for_edit(config, o.dry_run));  // from the read to the rename
    FP4FORGE_ASSIGN_OR_RETURN(std::string text, read_config(config));
    const auto lines = split_keep(text);
    FP4FORGE_ASSIGN_OR_RETURN(Parsed p, parse(text, path, lines));
    int idx = -1;
    FP4FORGE_ASSIGN_OR_RETURN(std::string new_text, swap_text(lines, p, path, o, idx));
    const Entry& entry = p.entries[static_cast<std::size_t>(idx)];
    FP4FORGE_TRY(refuse_shared_anchors(p, lines, {idx}, path));
    FP4FORGE_TRY(validate_edit(p, new_text, path, {idx}, {}));
    FP4FORGE_TRY(check_swapped(new_text, path, o, idx, entry.node["litellm_params"]));

    EditResult out;
    out.command = "swap";
    out.config = path;
    out.diff = util::unified_diff(mask_secret_values(text), mask_secret_values(new_text), path, path + " (swapped)");
    GatewayShow s;
    describe_routes(p, s);
    out.warnings = s.warnings;
    warn_store_model_in_db(p, o.alias, out.warnings);
    const std::string old_key = scalar_or(entry.view["litellm_params"], "api_key");
    // A literal key (not os.environ/) kept for a backend on another host: LiteLLM would send the old backend's secret
    // to the new one (issue 55 tryout F), and the probe first (tryout H: warned only after the probe had sent it).
    // Refused before anything is sent, unless --keep-api-key says the key is meant for it.
    const bool key_param =
        std::any_of(o.params.begin(), o.params.end(), [](const auto& kv) { return kv.first == "api_key"; });
    if (o.api_key_env.empty() && !o.keep_api_key && !key_param && !old_key.empty() &&
        old_key.rfind("os.environ/", 0) != 0) {
      const std::string old_base = scalar_or(entry.view["litellm_params"], "api_base");
      const std::string old_host = url_host(old_base), new_host = url_host(o.api_base);
      // One server whatever its spelling (a default port written or not): same_backend decides, as gateway check's
      // deployment match does.
      if (old_base.empty() || !same_backend(server_of(old_base), server_of(o.api_base)))
        return make_error(
            Errc::USAGE,
            "{}: alias '{}': the deployment's literal api_key (***) was {}'s key; kept, LiteLLM would send it to {} "
            "(and the probe first): nothing sent, nothing written; pass --api-key-env NAME to give the new backend "
            "its own key (written as os.environ/NAME), or --keep-api-key to say the key is meant for it",
            path, o.alias, old_host.empty() ? "the old backend" : util::printable(old_host, 80),
            new_host.empty() ? "the new api_base" : util::printable(new_host, 80));
    }
    // The deployment's own name stays with it: model_info.id now names a deployment on another backend (issue 55
    // tryout F: `chat-old` kept, and reported as x-litellm-model-id by the new seat).
    if (const std::string id = scalar_or(child(entry.node, "model_info"), "id"); !id.empty())
      out.warnings.push_back(fmt::format(
          "model_info.id '{}' stays on the deployment, which now routes to {}: LiteLLM reports it as "
          "x-litellm-model-id for the new backend; if the id names the old one, change it by hand after the swap "
          "(gateway check tells the deployments apart by api_base either way)",
          util::printable(id, 80), util::redact_url(o.api_base)));
    if (o.keep_api_key && !o.api_key_env.empty() && old_key != "os.environ/" + o.api_key_env)
      out.warnings.push_back(fmt::format("--keep-api-key: the probe sent {}'s key, but LiteLLM will send the "
                                         "deployment's api_key ({}): if the new backend takes only {}'s key, every "
                                         "request through '{}' gets 401",
                                         o.api_key_env,
                                         old_key.empty() ? "none" : old_key.rfind("os.environ/", 0) == 0 ? old_key : "***",
                                         o.api_key_env, o.alias));
    seat_warnings(o, out.warnings);  // last: its NOT PROVEN is the swap's closing word
    Gate g;
    g.path = path;
    g.alias = o.alias;
    g.new_params = YAML::Load(new_text)["model_list"][static_cast<std::size_t>(idx)]["litellm_params"];
    FP4FORGE_ASSIGN_OR_RETURN(g.alias_entries, deployments_of(p, path, o.alias, {}));
    g.replaced = &entry;
    out.warnings.insert(out.warnings.end(), lock.notes.begin(), lock.notes.end());
    FP4FORGE_TRY(gate_and_write(g, o, config, text, new_text, out));
    return out;
  } catch (const YAML::Exception& e) {
    return make_error(Errc::BAD_INPUT, "{}: cannot edit the config: {}", path, e.what());
  }
}

}  // namespace fp4forge::gateway
