// gateway: LiteLLM config.yaml show / swap / rollback / retire / check as validated line-based text edits.
// Why one file of about 1,100 lines: every command reads, edits and re-validates the same line-addressed
// model of the YAML (Parsed entries with their line ranges, anchors, scalar extents); splitting the
// editing primitives from the commands would export that model to no other reader. Each function stays
// under 150 lines.
#include "fp4forge/gateway/gateway.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <map>
#include "fp4forge/util/redact.h"
#include "fp4forge/util/regex.h"
#include <tuple>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include "fp4forge/util/backup.h"
#include "fp4forge/util/fs.h"
#include "fp4forge/util/strings.h"
#include "fp4forge/util/udiff.h"

namespace fp4forge::gateway {

using probe::all_checks;
using probe::Check;
using probe::check_name;
using probe::CheckStatus;
using probe::normalize_base_url;
using probe::run_probe;
using probe::HttpClient;
using probe::ProbeReport;
namespace {

/** A LiteLLM parameter name whose whole value is secret: a secret name (util::is_secret_name), or a block that
 * holds headers or credentials (`extra_headers`, `vertex_credentials`: every scalar under it). */
bool is_secret_key(std::string_view k) {
  const std::string l = util::ascii_lower(k);
  return util::is_secret_name(k) || l.find("header") != std::string::npos || l.find("credential") != std::string::npos;
}

/** Where a line's YAML content starts: past its indentation and, for a commented-out line (a retired alias:
 * `#   api_key: |`), past the `#` too, so that commented blocks are masked like live ones. */
std::size_t indent_of(std::string_view line) {
  std::size_t i = 0;
  while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '#')) ++i;
  return i;
}

/** `text` with every secret masked, by name and by shape: the value of every secret-named `key: value` (block
 * or flow style, quoted keys too), every line of a block value under such a key (`api_key: |`,
 * `vertex_credentials:` with a mapping or JSON below it, `extra_headers:`), then on every line URL passwords,
 * secret query parameters, Bearer/Basic tokens and PEM keys (util::redact_line). `os.environ/NAME`
 * references are not secrets and stay. Line count and layout are unchanged, so a diff of masked texts is the
 * masked diff. Linear in the text (RE2). */
std::string mask_secret_values(const std::string& text) {
  static const Regex kv = *Regex::compile(
      R"(["']?([A-Za-z0-9_\-]+)["']?(\s*:\s*)("[^"]*"|'[^']*'|[^,{}\[\]\s#][^,}#]*?)(\s*(?:[,}#]|$)))");
  static const Regex opener =
      *Regex::compile(R"(^[\s#]*-?\s*["']?([A-Za-z0-9_\-]+)["']?\s*:\s*([|>][-+0-9]*)?\s*(#.*)?$)");
  std::string out;
  std::size_t start = 0;
  std::size_t block_indent = std::string::npos;  // inside a secret block value: lines indented deeper are masked
  while (start <= text.size()) {
    const std::size_t nl = text.find('\n', start);
    const std::string line = text.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    std::string masked;
    const std::size_t ind = indent_of(line);
    const bool blank = ind == line.size();
    if (block_indent != std::string::npos && !blank && ind <= block_indent) block_indent = std::string::npos;
    if (block_indent != std::string::npos && !blank) {
      masked = line.substr(0, ind) + "***";
    } else {
      std::size_t last = 0;
      for (const auto& m : kv.find_all(line)) {
        std::string v = line.substr(m.begin[3], m.end[3] - m.begin[3]);
        if (!v.empty() && (v.front() == '"' || v.front() == '\'')) v = v.substr(1, v.size() >= 2 ? v.size() - 2 : 0);
        if (!is_secret_key(line.substr(m.begin[1], m.end[1] - m.begin[1])) || v.rfind("os.environ/", 0) == 0) continue;
        masked += line.substr(last, m.begin[3] - last) + "***";
        last = m.end[3];
      }
      masked += line.substr(last);
      const auto open = opener.find_all(line);
      if (!open.empty() && is_secret_key(line.substr(open[0].begin[1], open[0].end[1] - open[0].begin[1])))
        block_indent = ind + (line.find('-', ind) == ind ? 2 : 0);  // a list item's key sits after "- "
      masked = util::redact_line(masked);
    }
    out += masked;
    if (nl == std::string::npos) break;
    out += '\n';
    start = nl + 1;
  }
  return out;
}

namespace stdfs = std::filesystem;

using backup::kBackupInfix;
using backup::kRollbackInfix;
constexpr const char* kRetiredMarker = "# fp4forge-retired: alias '";
constexpr std::uint64_t kMaxConfigBytes = 16u << 20;

// ---------------------------------------------------------------------------------------------
// lines

std::vector<std::string> split_keep(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < s.size()) {
    std::size_t nl = s.find('\n', start);
    if (nl == std::string::npos) nl = s.size() - 1;
    out.push_back(s.substr(start, nl - start + 1));
    start = nl + 1;
  }
  return out;
}
std::string join(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l;
  return s;
}
// The line without its terminator.
std::string body_of(const std::string& line) {
  std::size_t e = line.size();
  if (e > 0 && line[e - 1] == '\n') --e;
  if (e > 0 && line[e - 1] == '\r') --e;
  return line.substr(0, e);
}
std::string eol_of(const std::string& line) { return line.substr(body_of(line).size()); }
bool blank_or_comment(const std::string& line) {
  const std::string b = body_of(line);
  const std::size_t p = b.find_first_not_of(" \t");
  return p == std::string::npos || b[p] == '#';
}
std::string file_eol(const std::vector<std::string>& lines) {
  for (const auto& l : lines)
    if (!eol_of(l).empty()) return eol_of(l);
  return "\n";
}

// ---------------------------------------------------------------------------------------------
// parsed structure

struct Entry {
  std::string alias;
  int index = 0;       // position in model_list
  int first_line = 0;  // 0-based line of the entry's first key
  int dash_line = 0;   // 0-based line holding its "-"
  YAML::Node node;
};

struct Parsed {
  YAML::Node root;
  std::vector<Entry> entries;
  int model_list_line = 0;
  std::vector<int> root_key_lines;  // 0-based, all top-level keys
};

std::string scalar_or(const YAML::Node& n, const char* key) {
  if (!n || !n.IsMap()) return {};  // an absent key's node is invalid: IsMap() would throw
  const YAML::Node v = n[key];
  return (v && v.IsScalar()) ? v.Scalar() : std::string();
}

/** The first key that a mapping under `n` repeats: (key, its line, the first occurrence's line), 0-based.
 * `budget` bounds the nodes visited: aliases can make the node graph cyclic (`&d` ... `<<: *d`). */
std::optional<std::tuple<std::string, int, int>> duplicate_key(const YAML::Node& n, std::size_t& budget,
                                                               std::set<int>& visited, int depth = 0) {
  if (depth > 64 || budget == 0) return std::nullopt;  // deeper or larger than any LiteLLM config
  --budget;
  // A collection reached again through an alias (`<<: *d` inside `&d`: a cycle) was checked the first time; its
  // parse position names it (yaml-cpp resolves an alias to the anchored node itself). Without this a cyclic
  // anchor walked the whole budget: seconds for an 83-byte file.
  if ((n.IsMap() || n.IsSequence()) && n.Mark().pos >= 0 && !visited.insert(n.Mark().pos).second) return std::nullopt;
  if (n.IsMap()) {
    std::map<std::string, int> seen;
    for (auto it = n.begin(); it != n.end(); ++it) {
      if (it->first.IsScalar()) {
        auto [at, fresh] = seen.emplace(it->first.Scalar(), it->first.Mark().line);
        if (!fresh) return std::make_tuple(it->first.Scalar(), it->first.Mark().line, at->second);
      }
      if (auto d = duplicate_key(it->second, budget, visited, depth + 1)) return d;
    }
  } else if (n.IsSequence()) {
    for (const auto& e : n)
      if (auto d = duplicate_key(e, budget, visited, depth + 1)) return d;
  }
  return std::nullopt;
}

Result<Parsed> parse(const std::string& text, const std::string& path, const std::vector<std::string>& lines) {
  Parsed p;
  try {
    p.root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return make_error(Errc::BAD_INPUT, "{}: line {}, column {}: invalid YAML ({}); expected a LiteLLM proxy config.yaml",
                      path, e.mark.line + 1, e.mark.column + 1, e.msg);
  }
  if (!p.root.IsMap())
    return make_error(Errc::BAD_INPUT, "{}: top level is not a mapping; expected a LiteLLM proxy config with 'model_list:'",
                      path);
  // A repeated key: LiteLLM keeps the last, an editor the first, so an edit would not change the route.
  std::size_t budget = 100000;
  std::set<int> visited;
  if (auto d = duplicate_key(p.root, budget, visited))
    return make_error(Errc::BAD_INPUT, "{}: line {}: duplicate key '{}' (first at line {}); expected each key once in a "
                      "mapping (LiteLLM uses the last one, so an edit of the first would change nothing)",
                      path, std::get<1>(*d) + 1, std::get<0>(*d).substr(0, 80), std::get<2>(*d) + 1);
  for (auto it = p.root.begin(); it != p.root.end(); ++it) {
    p.root_key_lines.push_back(it->first.Mark().line);
    if (it->first.Scalar() == "model_list") p.model_list_line = it->first.Mark().line;
  }
  const YAML::Node ml = p.root["model_list"];
  if (!ml) return make_error(Errc::BAD_INPUT, "{}: no 'model_list' key; expected a LiteLLM proxy config.yaml", path);
  if (ml.IsNull()) return p;
  if (!ml.IsSequence())
    return make_error(Errc::BAD_INPUT, "{}: line {}: 'model_list' is not a list", path, ml.Mark().line + 1);
  int idx = 0;
  for (const YAML::Node& item : ml) {
    Entry e;
    e.index = idx++;
    e.node = item;
    e.first_line = item.Mark().line;
    if (!item.IsMap() || !item["model_name"] || !item["model_name"].IsScalar())
      return make_error(Errc::BAD_INPUT, "{}: line {}: model_list entry {} has no 'model_name'", path, e.first_line + 1,
                        e.index + 1);
    e.alias = item["model_name"].Scalar();
    // The "-" is on the first key's line (before its column) or alone on an earlier line.
    e.dash_line = e.first_line;
    const auto col = static_cast<std::size_t>(std::max(0, item.Mark().column));
    const std::string head = body_of(lines[static_cast<std::size_t>(e.first_line)]).substr(0, col);
    if (head.find('-') == std::string::npos) {
      for (int l = e.first_line - 1; l >= 0; --l) {
        const std::string b = body_of(lines[static_cast<std::size_t>(l)]);
        if (b.find_first_not_of(" \t-") == std::string::npos && b.find('-') != std::string::npos) {
          e.dash_line = l;
          break;
        }
        if (!blank_or_comment(lines[static_cast<std::size_t>(l)])) break;
      }
    }
    p.entries.push_back(std::move(e));
  }
  return p;
}

Result<std::string> read_config(const stdfs::path& config) {
  auto r = fs::read_file(config, kMaxConfigBytes);
  if (!r.ok()) return with_file(r.error(), config.string());
  return std::move(r).value();
}

bool glob_match(std::string_view pat, std::string_view s) {
  // '*' only; iterative with backtracking to the last star (linear in practice, bounded by |pat|*|s|).
  std::size_t p = 0, i = 0, star = std::string_view::npos, mark = 0;
  while (i < s.size()) {
    if (p < pat.size() && pat[p] == '*') {
      star = p++;
      mark = i;
    } else if (p < pat.size() && pat[p] == s[i]) {
      ++p;
      ++i;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      i = ++mark;
    } else {
      return false;
    }
  }
  while (p < pat.size() && pat[p] == '*') ++p;
  return p == pat.size();
}

std::string timestamp(const char* fmt_str) {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, fmt_str, &tm);
  return buf;
}

// Writes `content` to `path` atomically with the permissions of `like` (configs may hold API keys).
Status write_like(const stdfs::path& path, const std::string& content, const stdfs::path& like) {
  return fs::edit_file_atomic(path, content, like);  // mode and owner of `like` from the first byte
}

// The file the config path really names (a symlinked config is edited in place, the link kept).
stdfs::path write_target(const stdfs::path& config) {
  std::error_code ec;
  if (stdfs::is_symlink(config, ec)) {
    auto t = stdfs::canonical(config, ec);
    if (!ec) return t;
  }
  return config;
}

std::string dump(const YAML::Node& n) {
  YAML::Emitter e;
  e << n;
  return e.c_str();
}

// ---------------------------------------------------------------------------------------------
// scalar text

bool plain_safe(std::string_view v) {
  if (v.empty()) return false;
  static const std::set<std::string> kSpecial{"true", "false", "yes", "no", "on", "off", "null", "~", "y", "n"};
  if (kSpecial.count(util::ascii_lower(v))) return false;
  if (!(std::isalpha(static_cast<unsigned char>(v[0])) || v[0] == '_' || v[0] == '/' || v[0] == '.')) return false;
  for (char c : v)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || std::string_view("_./:@+-=").find(c) != std::string_view::npos))
      return false;
  return v.back() != ':';
}

std::string double_quoted(std::string_view v) {
  std::string o = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o + "\"";
}

// Text for a string scalar; keeps the quote style the value had.
std::string scalar_text(std::string_view v, char quote) {
  if (quote == '\'') {
    std::string o = "'";
    for (char c : v) o += (c == '\'') ? std::string("''") : std::string(1, c);
    return o + "'";
  }
  if (quote == '"' || !plain_safe(v)) return double_quoted(v);
  return std::string(v);
}

// End column (exclusive) of the scalar that starts at `col` in `b`; npos when it cannot be edited safely.
std::size_t scalar_end(const std::string& b, std::size_t col) {
  if (col >= b.size()) return std::string::npos;
  const char q = b[col];
  if (q == '|' || q == '>' || q == '&' || q == '*' || q == '!' || q == '{' || q == '[') return std::string::npos;
  if (q == '"') {
    for (std::size_t i = col + 1; i < b.size(); ++i) {
      if (b[i] == '\\') {
        ++i;
      } else if (b[i] == '"') {
        return i + 1;
      }
    }
    return std::string::npos;
  }
  if (q == '\'') {
    for (std::size_t i = col + 1; i < b.size(); ++i) {
      if (b[i] == '\'') {
        if (i + 1 < b.size() && b[i + 1] == '\'') {
          ++i;
          continue;
        }
        return i + 1;
      }
    }
    return std::string::npos;
  }
  std::size_t end = b.size();
  if (std::size_t h = b.find(" #", col); h != std::string::npos) end = h;
  if (std::size_t h = b.find("\t#", col); h != std::string::npos) end = std::min(end, h);
  while (end > col && (b[end - 1] == ' ' || b[end - 1] == '\t')) --end;
  return end;
}

int indent_of(const std::string& line) {
  const std::string b = body_of(line);
  const std::size_t p = b.find_first_not_of(' ');
  return p == std::string::npos ? -1 : static_cast<int>(p);
}

// ---------------------------------------------------------------------------------------------
// validation of an edit

/** Lines [dash_line, end) of an entry: up to the next entry or top-level key, minus trailing blank and
 * comment lines (they usually introduce what follows). */
std::pair<int, int> entry_range(const Parsed& p, const std::vector<std::string>& lines, const Entry& e) {
  int end = static_cast<int>(lines.size());
  if (static_cast<std::size_t>(e.index) + 1 < p.entries.size())
    end = p.entries[static_cast<std::size_t>(e.index) + 1].dash_line;
  for (int k : p.root_key_lines)
    if (k > e.first_line && k < end) end = k;
  while (end - 1 > e.dash_line && blank_or_comment(lines[static_cast<std::size_t>(end - 1)])) --end;
  return {e.dash_line, end};
}

/** YAML anchors (`&name`) or aliases (`*name`) named on a line outside quoted scalars and comments. */
std::vector<std::string> yaml_refs(const std::string& line, char sigil) {
  std::vector<std::string> out;
  const std::string b = body_of(line);
  char quote = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    const char c = b[i];
    if (quote) {
      if (c == quote) quote = 0;
      continue;
    }
    if (c == '#' && (i == 0 || b[i - 1] == ' ' || b[i - 1] == '\t')) break;
    if ((c == '"' || c == '\'') && (i == 0 || std::string_view(" \t:[{,-").find(b[i - 1]) != std::string_view::npos)) {
      quote = c;
      continue;
    }
    if (c != sigil || (i > 0 && std::string_view(" \t:[{,-").find(b[i - 1]) == std::string_view::npos)) continue;
    std::size_t j = i + 1;
    while (j < b.size() && std::string_view(" \t[]{},").find(b[j]) == std::string_view::npos) ++j;
    if (j > i + 1) out.push_back(b.substr(i + 1, j - i - 1));
    i = j;
  }
  return out;
}

/**
 * Refuses a line edit of `targets` that YAML anchors and aliases make unsafe: an entry that is itself an
 * alias of another (`- *e`: its text is elsewhere), or one that defines an anchor another part of the
 * file reuses (`litellm_params: &p` ... `litellm_params: *p`: editing one would change, or with retire
 * break, the other). BAD_INPUT naming both lines; the file is untouched.
 */
Status refuse_shared_anchors(const Parsed& p, const std::vector<std::string>& lines, const std::set<int>& targets,
                             const std::string& path) {
  for (std::size_t i = 1; i < p.entries.size(); ++i)
    if (p.entries[i].first_line <= p.entries[i - 1].first_line)
      return make_error(Errc::BAD_INPUT, "{}: model_list entry {} ('{}') is a YAML alias of the entry at line {}; a "
                        "line edit cannot change one without the other; expected each entry written out (expand "
                        "the alias by hand)",
                        path, i + 1, p.entries[i].alias, p.entries[i].first_line + 1);
  for (const Entry& e : p.entries) {
    if (!targets.count(e.index)) continue;
    const auto [lo, hi] = entry_range(p, lines, e);
    for (int l = lo; l < hi; ++l)
      for (const std::string& a : yaml_refs(lines[static_cast<std::size_t>(l)], '*')) {
        bool local = false;
        for (int m = lo; m < hi && !local; ++m) {
          const auto defs = yaml_refs(lines[static_cast<std::size_t>(m)], '&');
          local = std::find(defs.begin(), defs.end(), a) != defs.end();
        }
        if (!local)
          return make_error(Errc::BAD_INPUT, "{}: line {}: entry '{}' takes a value from YAML anchor '&{}' defined "
                            "elsewhere ('*{}'); editing it in place would change the anchor's owner instead; expected "
                            "the entry written out (expand '*{}' by hand first)",
                            path, l + 1, e.alias, a.substr(0, 80), a.substr(0, 80), a.substr(0, 80));
      }
    for (int l = lo; l < hi; ++l)
      for (const std::string& a : yaml_refs(lines[static_cast<std::size_t>(l)], '&'))
        for (int m = 0; m < static_cast<int>(lines.size()); ++m) {
          if (m >= lo && m < hi) continue;
          const auto uses = yaml_refs(lines[static_cast<std::size_t>(m)], '*');
          if (std::find(uses.begin(), uses.end(), a) != uses.end())
            return make_error(Errc::BAD_INPUT, "{}: line {}: entry '{}' defines YAML anchor '&{}', which line {} reuses "
                              "('*{}'); editing the entry would change that line's value too; expected the anchor "
                              "unshared (expand '*{}' by hand first)",
                              path, l + 1, e.alias, a.substr(0, 80), m + 1, a.substr(0, 80), a.substr(0, 80));
        }
  }
  return {};
}

Status validate_edit(const Parsed& before, const std::string& new_text, const std::string& path,
                     const std::set<int>& edited_entries, const std::set<int>& removed_entries) {
  const std::vector<std::string> new_lines = split_keep(new_text);
  auto np = parse(new_text, path, new_lines);
  if (!np.ok())
    return make_error(Errc::BAD_INPUT, "{}: the edited config does not parse ({}); file left untouched; the config uses YAML a line edit cannot change safely (anchors, merge keys, tags?): edit it by hand", path,
                      np.error().message);
  // Root keys other than model_list unchanged.
  for (auto it = before.root.begin(); it != before.root.end(); ++it) {
    const std::string k = it->first.Scalar();
    if (k == "model_list") continue;
    if (!np->root[k] || dump(np->root[k]) != dump(it->second))
      return make_error(Errc::BAD_INPUT, "{}: the edit changed top-level key '{}'; file left untouched; the config uses YAML a line edit cannot change safely (anchors, merge keys, tags?): edit it by hand", path, k);
  }
  std::size_t j = 0;
  for (const Entry& e : before.entries) {
    if (removed_entries.count(e.index)) continue;
    if (j >= np->entries.size())
      return make_error(Errc::BAD_INPUT, "{}: the edit lost model_list entry '{}'; file left untouched; the config uses YAML a line edit cannot change safely (anchors, merge keys, tags?): edit it by hand", path, e.alias);
    if (!edited_entries.count(e.index) && dump(np->entries[j].node) != dump(e.node))
      return make_error(Errc::BAD_INPUT, "{}: the edit changed unrelated entry '{}' (line {}); file left untouched; the config uses YAML a line edit cannot change safely (anchors, merge keys, tags?): edit it by hand", path,
                        e.alias, e.first_line + 1);
    ++j;
  }
  if (j != np->entries.size())
    return make_error(Errc::BAD_INPUT, "{}: the edit added model_list entries; file left untouched; the config uses YAML a line edit cannot change safely (anchors, merge keys, tags?): edit it by hand", path);
  return {};
}

// ---------------------------------------------------------------------------------------------
// show helpers

void describe_routes(const Parsed& p, const std::vector<std::string>& lines, GatewayShow& s) {
  std::map<std::string, std::vector<int>> by_alias;
  for (const Entry& e : p.entries) {
    GatewayRoute r;
    r.alias = e.alias;
    r.line = e.dash_line + 1;
    r.wildcard = e.alias.find('*') != std::string::npos;
    // An entry without litellm_params (or with a scalar there) routes nowhere: said, not a parse failure.
    const YAML::Node lp = e.node.IsMap() && e.node["litellm_params"] ? e.node["litellm_params"] : YAML::Node();
    if (!lp || !lp.IsMap())
      s.warnings.push_back(fmt::format("line {}: entry '{}' has no litellm_params mapping: LiteLLM cannot route it",
                                       e.dash_line + 1, e.alias));
    r.model = scalar_or(lp, "model");
    r.api_base = scalar_or(lp, "api_base");
    if (lp && lp.IsMap()) {
      for (auto it = lp.begin(); it != lp.end(); ++it) {
        const std::string k = it->first.Scalar();
        if (k == "model" || k == "api_base") continue;
        std::string v = it->second.IsScalar() ? it->second.Scalar() : dump(it->second);
        if (is_secret_key(k) && v.rfind("os.environ/", 0) != 0) v = "***";
        r.params.emplace_back(k, v);
      }
    }
    by_alias[r.alias].push_back(r.line);
    s.routes.push_back(std::move(r));
  }
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string b = body_of(lines[i]);
    const std::size_t at = b.find(kRetiredMarker);
    if (at == std::string::npos) continue;
    const std::size_t start = at + std::char_traits<char>::length(kRetiredMarker);
    const std::size_t end = b.find('\'', start);
    if (end == std::string::npos) continue;
    s.retired.push_back({b.substr(start, end - start), static_cast<int>(i) + 1});
  }
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

}  // namespace

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
    describe_routes(p, lines, s);
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

std::vector<stdfs::path> list_backups(const stdfs::path& config) { return backup::list(config, kBackupInfix); }

namespace {

// "N) MODEL @ API_BASE (line L)" for each deployment (api_base redacted).
std::string list_deployments(const std::vector<const Entry*>& ds) {
  std::string out;
  for (std::size_t i = 0; i < ds.size(); ++i) {
    const YAML::Node lp = ds[i]->node["litellm_params"];
    const std::string base = scalar_or(lp, "api_base");
    out += fmt::format("{}{}) {} @ {} (line {})", i == 0 ? "" : "; ", i + 1, scalar_or(lp, "model"),
                       base.empty() ? "-" : util::redact_url(base), ds[i]->dash_line + 1);
  }
  return out;
}

/** The deployments (entries) of `alias`: all of them for an empty `deployment`, else the one it names: its
 * number N (1-based, file order), its api_base (same server) or its model (with or without the provider
 * prefix). BAD_INPUT when the alias is absent; USAGE when `deployment` names none or several. */
Result<std::vector<const Entry*>> deployments_of(const Parsed& p, const std::string& path, const std::string& alias,
                                                 const std::string& deployment) {
  std::vector<const Entry*> all_of;
  std::string all;
  for (const Entry& e : p.entries) {
    if (e.alias == alias) all_of.push_back(&e);
    all += (all.empty() ? "" : ", ") + e.alias;
  }
  if (all_of.empty()) return make_error(Errc::BAD_INPUT, "{}: alias '{}' not found; aliases: [{}]", path, alias, all);
  if (deployment.empty()) return all_of;
  std::vector<const Entry*> hit;
  const bool number = deployment.find_first_not_of("0123456789") == std::string::npos;
  for (std::size_t i = 0; i < all_of.size(); ++i) {
    const YAML::Node lp = all_of[i]->node["litellm_params"];
    const std::string model = scalar_or(lp, "model");
    const bool match = number ? deployment == std::to_string(i + 1)
                       : deployment.find("://") != std::string::npos
                           ? same_backend(scalar_or(lp, "api_base"), deployment)
                           : model == deployment || strip_provider_prefix(model) == deployment;
    if (match) hit.push_back(all_of[i]);
  }
  if (hit.size() != 1)
    return make_error(Errc::USAGE, "--deployment '{}' names {} of alias '{}''s {} deployment(s): {}; expected exactly "
                      "one: pass its number",
                      util::redact_url(deployment), hit.empty() ? "none" : std::to_string(hit.size()), alias,
                      all_of.size(), list_deployments(all_of));
  return hit;
}

// Builds the swapped text. Returns the new text or an error; `p` is the parse of `text`.
Result<std::string> swap_text(const std::vector<std::string>& lines, const Parsed& p,
                              const std::string& path, const SwapOptions& o, int& entry_index) {
  FP4FORGE_ASSIGN_OR_RETURN(auto hits, deployments_of(p, path, o.alias, o.deployment));
  if (hits.size() > 1)
    return make_error(Errc::USAGE,
                      "{}: alias '{}' has {} deployments, which LiteLLM load-balances: {}; swap repoints one at a "
                      "time: pass --deployment N (or its api_base or model)",
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
  for (const auto& [k, v] : o.params) expect[k] = dump(YAML::Load(v));
  std::map<std::string, std::string> got;
  for (auto it = lp.begin(); it != lp.end(); ++it) got[it->first.Scalar()] = dump(it->second);
  if (got != expect) {
    for (const auto& [k, v] : expect)
      if (got[k] != v)
        return make_error(Errc::BAD_INPUT, "{}: after the edit litellm_params.{} of '{}' reads '{}', expected '{}'; file "
                          "left untouched; {}", path, k, o.alias, is_secret_key(k) ? "***" : got[k],
                          is_secret_key(k) ? "***" : v, kUnsafe);
    return make_error(Errc::BAD_INPUT, "{}: the edit added unexpected keys to '{}'; file left untouched; {}", path, o.alias,
                      kUnsafe);
  }
  return {};
}

/** USAGE unless `m` starts with a LiteLLM provider that sends the OpenAI API to an api_base (what the probe
 * proves) and names a model after it. */
Status check_backend_model(const std::string& m) {
  const std::size_t slash = m.find('/');
  const std::string head = slash == std::string::npos ? std::string() : m.substr(0, slash);
  const auto& k = openai_compatible_providers();
  if (slash != std::string::npos && slash + 1 < m.size() && std::find(k.begin(), k.end(), head) != k.end()) return {};
  const std::string rest = slash == std::string::npos ? m : m.substr(slash + 1);
  if (rest.empty())
    return make_error(Errc::USAGE, "--backend-model '{}' names no model after the provider; expected '{}<model name "
                      "at the backend>'", m, m);
  const std::string want = "hosted_vllm/" + (head == "vllm" || std::find(k.begin(), k.end(), head) != k.end() ? rest : m);
  if (slash == std::string::npos)
    return make_error(Errc::USAGE, "--backend-model '{}' has no LiteLLM provider prefix: LiteLLM picks its client by "
                      "the prefix and cannot route a bare name to an api_base; expected '{}' (vLLM's LiteLLM guide: "
                      "'hosted_vllm is prefix key word and necessary')",
                      m, want);
  return make_error(Errc::USAGE, "--backend-model '{}': '{}' is not one of the LiteLLM providers that send the OpenAI API "
                    "to an api_base ({}), which is what the probe proves; expected '{}'",
                    m, head, fmt::join(k, ", "), want);
}

/** A LiteLLM secret value as LiteLLM reads it: `os.environ/NAME` is the environment variable NAME. "" (and a
 * warning naming `what`) when NAME is not set here. */
std::string resolve_secret(const std::string& v, const std::string& what, std::vector<std::string>& warnings) {
  constexpr std::string_view kEnv = "os.environ/";
  if (v.rfind(kEnv, 0) != 0) return v;
  const std::string name = v.substr(kEnv.size());
  const char* got = name.empty() ? nullptr : std::getenv(name.c_str());
  if (got != nullptr && *got != '\0') return got;
  warnings.push_back(fmt::format("{} is os.environ/{}, which is not set in this environment: the probe runs without a "
                                 "key (set {} here or pass --api-key-env)",
                                 what, name.substr(0, 80), name.substr(0, 80)));
  return {};
}

/** The key LiteLLM will send the backend after the swap: `--param api_key=...` if given, else the deployment's
 * own `api_key` (the swap keeps it). */
std::string deployment_api_key(const SwapOptions& o, const YAML::Node& lp, std::vector<std::string>& warnings) {
  for (const auto& [k, v] : o.params)
    if (k == "api_key") {
      const YAML::Node n = YAML::Load(v);
      return n.IsScalar() ? resolve_secret(n.Scalar(), "--param api_key", warnings) : std::string();
    }
  const std::string own = scalar_or(lp, "api_key");
  return own.empty() ? own : resolve_secret(own, fmt::format("the alias's litellm_params.api_key"), warnings);
}

// `kept`: deployments of the alias left after a retire of some (0 after a swap or a whole-alias retire).
std::vector<std::string> next_steps_after_edit(const std::string& path, const std::string& alias, bool retired,
                                               std::size_t kept = 0) {
  std::vector<std::string> out{
      fmt::format("reload LiteLLM: restart the proxy that reads {} (it reads the file at start-up)", path)};
  if (retired)
    out.push_back(fmt::format("confirm clients of '{}' now get an error, not a wildcard's answer: fp4forge gateway "
                              "show --config {}", alias, path));
  else
    out.push_back(fmt::format("{}prove the alias as clients see it: fp4forge gateway check --config {} --alias {} "
                              "--url http://LITELLM_HOST:4000",
                              kept > 0 ? fmt::format("'{}' keeps {} deployment(s): ", alias, kept) : "", path, alias));
  out.push_back(fmt::format("to undo: fp4forge gateway rollback --config {}", path));
  return out;
}

Status backup_and_write(const stdfs::path& config, const std::string& old_text, const std::string& new_text,
                        EditResult& out) {
  FP4FORGE_ASSIGN_OR_RETURN(stdfs::path bak, backup::write_backup(config, old_text, kBackupInfix, backup::stamp_now()));
  out.backup = bak.string();
  FP4FORGE_TRY(write_like(write_target(config), new_text, config));
  out.changed = true;
  return {};
}

}  // namespace

Result<EditResult> gateway_swap(const stdfs::path& config, const SwapOptions& o) {
  const std::string path = config.string();
  if (!o.api_base.empty()) FP4FORGE_TRY(probe::check_base_url(o.api_base));
  if (o.alias.empty() || o.backend_model.empty() || o.api_base.empty())
    return make_error(Errc::USAGE, "gateway swap: --alias, --backend-model and --api-base are all required");
  FP4FORGE_TRY(check_backend_model(o.backend_model));
  for (const auto& [k, v] : o.params) {
    if (k.empty() || k == "model" || k == "api_base")
      return make_error(Errc::USAGE, "--param '{}={}': use --backend-model / --api-base for model and api_base", k, v);
    if (v.find('\n') != std::string::npos)
      return make_error(Errc::USAGE, "--param {}: the value must be one line (use YAML flow style: {{a: 1}})", k);
    try {
      (void)YAML::Load(v);
    } catch (const YAML::Exception& e) {
      return make_error(Errc::USAGE, "--param {}={}: not a YAML value ({})", k, v, e.msg);
    }
  }
  if (o.probe && !o.weak_gate && !o.checks.empty()) {
    std::vector<std::string> missing;
    for (Check c : {Check::PROSE, Check::LOGPROBS})
      if (std::find(o.checks.begin(), o.checks.end(), c) == o.checks.end()) missing.push_back(check_name(c));
    if (!missing.empty())
      return make_error(Errc::USAGE, "gateway swap --checks leaves out {}: the checks that catch a seat serving "
                        "garbage while every health check is green (F1); add them, or pass --weak-gate to swap on "
                        "the reduced probe",
                        fmt::format("{}", fmt::join(missing, " and ")));
  }
  try {
    FP4FORGE_ASSIGN_OR_RETURN(std::string text, read_config(config));
    const auto lines = split_keep(text);
    FP4FORGE_ASSIGN_OR_RETURN(Parsed p, parse(text, path, lines));
    int idx = -1;
    FP4FORGE_ASSIGN_OR_RETURN(std::string new_text, swap_text(lines, p, path, o, idx));
    FP4FORGE_TRY(refuse_shared_anchors(p, lines, {idx}, path));
    FP4FORGE_TRY(validate_edit(p, new_text, path, {idx}, {}));
    FP4FORGE_TRY(check_swapped(new_text, path, o, idx, p.entries[static_cast<std::size_t>(idx)].node["litellm_params"]));

    EditResult out;
  out.command = "swap";
  out.config = path;
    out.diff = util::unified_diff(mask_secret_values(text), mask_secret_values(new_text), path, path + " (swapped)");
    GatewayShow s;
    describe_routes(p, lines, s);
    out.warnings = s.warnings;
    {
      std::string base = o.api_base;
      while (!base.empty() && base.back() == '/') base.pop_back();
      if (normalize_base_url(base) == base)
        out.warnings.push_back(fmt::format("api_base {} has no /v1: LiteLLM's OpenAI client posts to API_BASE/chat/"
                                           "completions, which vLLM serves under /v1 (inferred from the OpenAI "
                                           "client's URL rule); expected {}/v1",
                                           util::redact_url(o.api_base), util::redact_url(base)));
    }
    if (!o.probe)
      out.warnings.push_back(fmt::format("NOT PROVEN: '{}' now routes to {} without a probe (--no-probe); a seat "
                                         "can pass every health check and still serve garbage (F1): run "
                                         "'fp4forge probe {} --model {}' before traffic arrives",
                                         o.alias, util::redact_url(o.api_base), util::redact_url(o.api_base),
                                         o.probe_model.empty() ? strip_provider_prefix(o.backend_model) : o.probe_model));
    if (o.probe) {
      const std::string model = o.probe_model.empty() ? strip_provider_prefix(o.backend_model) : o.probe_model;
      const auto checks = o.checks.empty() ? all_checks() : o.checks;
      probe::ProbeOptions po = o.probe_options;
      if (po.api_key.empty())
        po.api_key = deployment_api_key(o, p.entries[static_cast<std::size_t>(idx)].node["litellm_params"], out.warnings);
      ProbeReport rep = o.client != nullptr ? run_probe(*o.client, o.api_base, model, checks, po)
                                            : run_probe(o.api_base, model, checks, po);
      const bool failed = rep.any_failed();
      if (failed) {
        std::string why;
        for (const auto& c : rep.checks)
          if (c.status == CheckStatus::FAIL) why += fmt::format("{}{}: {}", why.empty() ? "" : "; ", check_name(c.check), c.classification);
        out.refused = fmt::format("probe of {} (model '{}') failed ({}); {} left untouched", rep.url, model, why, path);
      }
      out.probe = std::move(rep);
      if (failed) return out;
    }
    if (o.dry_run) return out;
    // The file must not have changed while we probed.
    FP4FORGE_ASSIGN_OR_RETURN(std::string again, read_config(config));
    if (again != text)
      return make_error(Errc::IO, "{}: the file changed while the probe ran; expected it unchanged; re-run the swap",
                        path);
    FP4FORGE_TRY(backup_and_write(config, text, new_text, out));
    out.next_steps = next_steps_after_edit(path, o.alias, false);
    return out;
  } catch (const YAML::Exception& e) {
    return make_error(Errc::BAD_INPUT, "{}: cannot edit the config: {}", path, e.what());
  }
}

Result<EditResult> gateway_rollback(const stdfs::path& config, const stdfs::path& to) {
  const std::string path = config.string();
  stdfs::path src = to;
  if (src.empty()) {
    const auto baks = list_backups(config);
    if (baks.empty())
      return make_error(Errc::BAD_INPUT, "{}: no backups ({}*) to roll back to; pass --to FILE", path,
                        config.filename().string() + std::string(kBackupInfix));
    src = baks.back();
  }
  FP4FORGE_ASSIGN_OR_RETURN(std::string restored, read_config(src));
  FP4FORGE_ASSIGN_OR_RETURN(std::string current, read_config(config));
  EditResult out;
  out.command = "rollback";
  out.config = path;
  out.backup = src.string();  // the source of the restore
  if (restored == current) return out;
  out.diff = util::unified_diff(mask_secret_values(current), mask_secret_values(restored), path, src.string());
  // Keep what is being replaced, under a name the default rollback never picks.
  FP4FORGE_ASSIGN_OR_RETURN(stdfs::path keep, backup::fresh_name(config, kRollbackInfix, backup::stamp_now()));
  FP4FORGE_TRY(write_like(keep, current, config));
  out.warnings.push_back(fmt::format("the replaced content was saved as {}", keep.string()));
  FP4FORGE_TRY(write_like(write_target(config), restored, config));
  FP4FORGE_ASSIGN_OR_RETURN(std::string check, read_config(config));
  if (check != restored)
    return make_error(Errc::IO, "{}: after the rollback the file differs from {}; expected byte-identical content", path,
                      src.string());
  out.changed = true;
  out.next_steps = {fmt::format("reload LiteLLM: restart the proxy that reads {} (it reads the file at start-up)", path)};
  return out;
}

Result<EditResult> gateway_retire(const stdfs::path& config, const std::string& alias, const std::string& deployment,
                                  bool all_deployments) {
  const std::string path = config.string();
  try {
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
    describe_routes(p, lines, s);
    const bool routed = std::any_of(s.routes.begin(), s.routes.end(),
                                    [&](const GatewayRoute& r) { return !r.wildcard && r.alias == o.alias; });
    if (!routed) {
      std::string wild;
      for (const GatewayRoute& r : s.routes)
        if (r.wildcard && glob_match(r.alias, o.alias)) wild = r.alias;
      const bool retired = std::any_of(s.retired.begin(), s.retired.end(),
                                       [&](const RetiredAlias& r) { return r.alias == o.alias; });
      return make_error(Errc::BAD_INPUT, "{}: no live route names alias '{}'{}{}; a probe through the gateway would "
                        "prove {}; expected the alias in model_list",
                        path, o.alias, retired ? " (it is retired)" : "",
                        wild.empty() ? "" : fmt::format(" (wildcard route '{}' matches it)", wild),
                        wild.empty() ? "nothing" : "the wildcard's backend instead");
    }
    if (po.api_key.empty()) {
      const YAML::Node gs = p.root["general_settings"];
      const std::string mk = scalar_or(gs, "master_key");
      if (!mk.empty()) po.api_key = resolve_secret(mk, "general_settings.master_key", rep.warnings);
    }
  } catch (const YAML::Exception& e) {
    return make_error(Errc::BAD_INPUT, "{}: cannot read the config: {}", path, e.what());
  }
  const auto checks = o.checks.empty() ? all_checks() : o.checks;
  rep.probe = o.client != nullptr ? run_probe(*o.client, url, o.alias, checks, po) : run_probe(url, o.alias, checks, po);
  return rep;
}

}  // namespace fp4forge::gateway
