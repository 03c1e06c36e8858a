// Recipes of several schemes (quantize/recipe.h): --scheme-for, --recipe files, selectors.
#include "fp4forge/quantize/recipe.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include "fp4forge/quantize/plan.h"
#include "fp4forge/util/format.h"
#include "fp4forge/util/fs.h"
#include "fp4forge/util/strings.h"
#include "fp4forge/util/yaml_strict.h"

namespace fp4forge::quant {
namespace {

struct RoleSelector {
  std::string_view name;
  std::vector<Role> roles;
};

/** A selector per role group a recipe may name, picking the group's Linears (the role table,
 * model/tensor_role.h). */
const std::vector<RoleSelector>& role_selectors() {
  static const std::vector<RoleSelector> t = [] {
    std::vector<RoleSelector> out;
    for (RoleGroup g : {RoleGroup::ATTENTION, RoleGroup::DENSE_MLP, RoleGroup::EXPERTS, RoleGroup::SHARED_EXPERTS,
                        RoleGroup::LINEAR_ATTENTION}) {
      RoleSelector sel{role_group_name(g), {}};
      for (const RoleTraits& r : role_table())
        if (role_is_linear_of(r.role, g)) sel.roles.push_back(r.role);
      out.push_back(std::move(sel));
    }
    return out;
  }();
  return t;
}

std::string known_selectors() {
  std::vector<std::string_view> names;
  for (const auto& r : role_selectors()) names.push_back(r.name);
  return fmt::format("{}, last_n_layers=K, first_n_layers=K, a module name or re:REGEX", fmt::join(names, ", "));
}

/** A recipe's size and entries (R4-B19): a real recipe is a few KB; yaml-cpp's tree takes about 60 times the text,
 * and every rule and ignore entry is matched against every module. */
constexpr std::uint64_t kMaxRecipeBytes = 1u << 20;
constexpr std::size_t kMaxRecipeEntries = 10000;

/** USAGE naming a key the recipe does not know; a merge key (`<<: *base`) gets its own hint. */
Error unknown_key(const std::string& at, const std::string& key, std::string_view expected) {
  if (key == "<<")
    return make_error(Errc::USAGE, "{}: merge key '<<' is not read in recipes; write the keys out (expected {})", at,
                      expected);
  return make_error(Errc::USAGE, "{}: unknown key '{}'; expected {}", at, util::printable(key, 80), expected);
}

/** A YAML scalar as a string; USAGE naming `where` when the node is not one. */
Result<std::string> scalar(const YAML::Node& n, const std::string& where) {
  if (!n.IsScalar())
    return make_error(Errc::USAGE, "{}: expected a string, found a {}", where,
                      n.IsSequence() ? "list" : n.IsMap() ? "mapping" : "null");
  return n.as<std::string>();
}

}  // namespace

std::vector<std::string_view> selector_roles() {
  std::vector<std::string_view> out;
  for (const auto& r : role_selectors()) out.push_back(r.name);
  return out;
}

Result<Selector> Selector::parse(std::string_view text) {
  Selector s;
  s.text_ = std::string(text);
  if (text.empty()) return make_error(Errc::USAGE, "empty selector; expected {}", known_selectors());
  for (const auto& r : role_selectors())
    if (text == r.name) {
      s.kind_ = Kind::ROLE;
      s.roles_ = r.roles;
      return s;
    }
  for (const auto& [prefix, kind] : {std::pair{std::string_view("last_n_layers="), Kind::LAST_N},
                                     std::pair{std::string_view("first_n_layers="), Kind::FIRST_N}}) {
    if (!text.starts_with(prefix)) continue;
    const std::string_view num = text.substr(prefix.size());
    std::int64_t k = 0;
    const auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), k);
    if (ec != std::errc() || p != num.data() + num.size() || k <= 0)
      return make_error(Errc::USAGE, "selector '{}': expected a positive layer count after '{}'", text, prefix);
    s.kind_ = kind;
    s.n_ = k;
    return s;
  }
  // A bare word that looks like a role but is none (a typo such as "attn") must not pass as a module name
  // that selects nothing: module names have dots.
  if (!text.starts_with("re:") && text.find('.') == std::string_view::npos && text != "lm_head")
    return make_error(Errc::USAGE, "selector '{}' is neither a role nor a module name; expected {}", text,
                      known_selectors());
  FP4FORGE_ASSIGN_OR_RETURN(auto np, NamePattern::parse(text));
  s.pattern_ = std::move(np);
  return s;
}

bool Selector::matches(const SelectorSubject& m, std::int64_t num_layers) const {
  switch (kind_) {
    case Kind::NAME:
      return std::any_of(m.names.begin(), m.names.end(), [&](const std::string& n) { return pattern_->matches(n); });
    case Kind::ROLE: return std::find(roles_.begin(), roles_.end(), m.role) != roles_.end();
    case Kind::LAST_N: return m.layer >= 0 && num_layers > 0 && m.layer >= num_layers - n_ && m.layer < num_layers;
    case Kind::FIRST_N: return m.layer >= 0 && m.layer < n_;
  }
  return false;
}

namespace {
/** A rule's scheme and observer text (observer "": the scheme's default), parsed where it was read; USAGE naming
 * `origin` (the --scheme-for argument, the recipe rule). */
Status parse_scheme_names(std::string_view scheme, std::string_view observer, const std::string& origin,
                          QuantScheme& s_out, std::optional<Observer>& o_out) {
  auto s = parse_quant_scheme(scheme);
  if (!s.ok()) return make_error(Errc::USAGE, "{}: {}", origin, s.error().message);
  s_out = *s;
  o_out.reset();
  if (!observer.empty()) {
    auto o = parse_observer(observer);
    if (!o.ok()) return make_error(Errc::USAGE, "{}: {}", origin, o.error().message);
    o_out = *o;
  }
  return {};
}
}  // namespace

Result<CompiledRule> compile_rule(const SchemeRule& r) {
  CompiledRule c;
  c.origin = r.origin;
  if (r.match.empty()) return make_error(Errc::USAGE, "{}: selects nothing (an empty match)", r.origin);
  for (const auto& text : r.match) {
    auto sel = Selector::parse(text);
    if (!sel.ok()) return make_error(Errc::USAGE, "{}: {}", r.origin, sel.error().message);
    c.selectors.push_back(std::move(*sel));
  }
  c.scheme = r.scheme;
  c.observer = r.observer.value_or(default_observer(c.scheme));
  if (Status st = check_observer(c.scheme, c.observer); !st)
    return make_error(Errc::USAGE, "{}: {}", r.origin, st.error().message);
  return c;
}

Result<SchemeRule> parse_scheme_for(std::string_view arg) {
  SchemeRule r;
  r.origin = fmt::format("--scheme-for '{}'", arg);
  const std::size_t eq = arg.rfind('=');
  // `last_n_layers=2=fp8-block`: the scheme follows the last '='.
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == arg.size())
    return make_error(Errc::USAGE, "{}: expected SELECTOR=SCHEME[:OBSERVER] (e.g. attention=fp8-block)", r.origin);
  r.match.emplace_back(arg.substr(0, eq));
  std::string_view rhs = arg.substr(eq + 1);
  std::string_view observer;
  if (const std::size_t colon = rhs.find(':'); colon != std::string_view::npos) {
    observer = rhs.substr(colon + 1);
    rhs = rhs.substr(0, colon);
    if (observer.empty() || rhs.empty())
      return make_error(Errc::USAGE, "{}: expected SELECTOR=SCHEME[:OBSERVER]", r.origin);
  }
  FP4FORGE_TRY(parse_scheme_names(rhs, observer, r.origin, r.scheme, r.observer));
  return r;
}

Result<Recipe> parse_recipe(std::string_view text, std::string_view where) {
  if (text.size() > kMaxRecipeBytes)
    return make_error(Errc::USAGE, "{}: {} bytes, over the {}-byte limit of a recipe; expected a recipe file "
                      "(docs/recipes.md)",
                      where, format_count(text.size()), format_count(kMaxRecipeBytes));
  // JSON is YAML's flow style: one strict reader for both (duplicate keys, documents, tags; util/yaml_strict.h).
  FP4FORGE_ASSIGN_OR_RETURN(const YAML::Node root, util::load_yaml_strict(text, where, Errc::USAGE));
  if (!root.IsMap())
    return make_error(Errc::USAGE, "{}: expected a mapping with scheme, observer, rules and ignore", where);
  Recipe out;
  static const std::set<std::string> top_keys{"scheme", "observer", "rules", "ignore"};
  try {
    for (const auto& kv : root) {
      FP4FORGE_ASSIGN_OR_RETURN(const std::string key, scalar(kv.first, fmt::format("{}: a key", where)));
      if (!top_keys.count(key)) return unknown_key(std::string(where), key, "scheme, observer, rules or ignore");
    }
    if (root["scheme"]) {
      FP4FORGE_ASSIGN_OR_RETURN(const std::string name, scalar(root["scheme"], fmt::format("{} scheme", where)));
      auto s = parse_quant_scheme(name);
      if (!s) return make_error(Errc::USAGE, "{} scheme: {}", where, s.error().message);
      out.scheme = *s;
    }
    if (root["observer"]) {
      FP4FORGE_ASSIGN_OR_RETURN(const std::string oname, scalar(root["observer"], fmt::format("{} observer", where)));
      auto o = parse_observer(oname);
      if (!o) return make_error(Errc::USAGE, "{} observer: {}", where, o.error().message);
      out.observer = *o;
    }
    if (out.scheme && out.observer)
      if (Status st = check_observer(*out.scheme, *out.observer); !st)
        return make_error(Errc::USAGE, "{}: {}", where, st.error().message);
    auto strings = [&](const YAML::Node& n, const std::string& at) -> Result<std::vector<std::string>> {
      std::vector<std::string> v;
      if (n.IsScalar()) {
        v.push_back(n.as<std::string>());
        return v;
      }
      if (!n.IsSequence()) return make_error(Errc::USAGE, "{}: expected a string or a list of strings", at);
      for (std::size_t i = 0; i < n.size(); ++i) {
        FP4FORGE_ASSIGN_OR_RETURN(auto s, scalar(n[i], fmt::format("{}[{}]", at, i)));
        v.push_back(std::move(s));
      }
      return v;
    };
    if (root["ignore"]) {
      FP4FORGE_ASSIGN_OR_RETURN(out.ignore, strings(root["ignore"], fmt::format("{} ignore", where)));
    }
    std::size_t entries = out.ignore.size();  // ignore entries and match selectors, each tried on every module
    if (const YAML::Node rules = root["rules"]) {
      if (!rules.IsSequence()) return make_error(Errc::USAGE, "{} rules: expected a list of rules", where);
      static const std::set<std::string> rule_keys{"match", "scheme", "observer"};
      for (std::size_t i = 0; i < rules.size(); ++i) {
        const std::string at = fmt::format("{} rules[{}]", where, i);
        const YAML::Node r = rules[i];
        if (!r.IsMap()) return make_error(Errc::USAGE, "{}: expected a mapping with match and scheme", at);
        for (const auto& kv : r) {
          FP4FORGE_ASSIGN_OR_RETURN(const std::string key, scalar(kv.first, at + ": a key"));
          if (!rule_keys.count(key)) return unknown_key(at, key, "match, scheme or observer");
        }
        if (!r["match"] || !r["scheme"]) return make_error(Errc::USAGE, "{}: needs both match and scheme", at);
        SchemeRule sr;
        sr.origin = at;
        FP4FORGE_ASSIGN_OR_RETURN(sr.match, strings(r["match"], at + " match"));
        if ((entries += sr.match.size()) > kMaxRecipeEntries) break;
        FP4FORGE_ASSIGN_OR_RETURN(const std::string scheme, scalar(r["scheme"], at + " scheme"));
        std::string observer;
        if (r["observer"]) {
          FP4FORGE_ASSIGN_OR_RETURN(observer, scalar(r["observer"], at + " observer"));
        }
        FP4FORGE_TRY(parse_scheme_names(scheme, observer, at, sr.scheme, sr.observer));
        FP4FORGE_TRY(compile_rule(sr));  // every problem of the file reported before anything else runs
        out.rules.push_back(std::move(sr));
      }
    }
    if (entries > kMaxRecipeEntries)
      return make_error(Errc::USAGE, "{}: more than {} selectors and ignore entries; expected a recipe of roles, "
                        "layer ranges and re: patterns (docs/recipes.md)",
                        where, format_count(kMaxRecipeEntries));
  } catch (const YAML::Exception& e) {
    return make_error(Errc::USAGE, "{}: {}", where, e.what());
  }
  return out;
}

void apply_recipe(const Recipe& r, PlanOptions& opts, bool scheme_given, bool observer_given) {
  if (r.scheme && !scheme_given) opts.scheme = *r.scheme;
  if (r.observer && !observer_given) opts.observer = *r.observer;
  opts.scheme_for.insert(opts.scheme_for.end(), r.rules.begin(), r.rules.end());
  opts.ignore.insert(opts.ignore.end(), r.ignore.begin(), r.ignore.end());
}

Result<Recipe> read_recipe(const std::filesystem::path& file) {
  FP4FORGE_ASSIGN_OR_RETURN(const std::string text, fs::read_file(file, kMaxRecipeBytes));
  return parse_recipe(text, file.string());
}

}  // namespace fp4forge::quant
