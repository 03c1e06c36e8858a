// The line-addressed model of a LiteLLM config.yaml (config_text.h): its lines, the parse with each entry's
// lines, scalar text that keeps a value's quote style, and the masking of secrets in what is shown.
#include "config_text.h"

#include <algorithm>
#include <cctype>
#include <ctime>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "fp4forge/util/fs.h"
#include "fp4forge/util/redact.h"
#include "fp4forge/util/regex.h"
#include "fp4forge/util/strings.h"
#include "fp4forge/util/yaml_scalar.h"
#include "fp4forge/util/yaml_strict.h"

namespace fp4forge::gateway::detail {

/** A LiteLLM parameter name whose whole value is secret: a secret name (util::is_secret_name), or a block that
 * holds headers or credentials (`extra_headers`, `vertex_credentials`: every scalar under it). */
bool is_secret_key(std::string_view k) {
  const std::string l = util::ascii_lower(k);
  return util::is_secret_name(k) || l.find("header") != std::string::npos || l.find("credential") != std::string::npos;
}

namespace {

/** Where a line's YAML content starts: past its indentation and, for a commented-out line (a retired alias:
 * `#   api_key: |`), past the `#` too, so that commented blocks are masked like live ones. */
std::size_t content_start(std::string_view line) {
  std::size_t i = 0;
  while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '#')) ++i;
  return i;
}

/** The end (exclusive) of the flow collection opening at `open` ('[' or '{'), or npos when `s` ends first. */
std::size_t flow_end(std::string_view s, std::size_t open) {
  int depth = 0;
  char quote = 0;
  for (std::size_t i = open; i < s.size(); ++i) {
    const char c = s[i];
    if (quote != 0) {
      if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if ((c == ']' || c == '}') && --depth == 0) {
      return i + 1;
    }
  }
  return std::string_view::npos;
}

/** The value of a secret-named key in flow style (`fallback_keys: [SECRET]`, `api_key: {k: SECRET}`: R4-B4)
 * masked on `line`; `open_to_end` is set when the collection goes on past the line. */
std::string mask_flow_values(const std::string& line, bool& open_to_end) {
  static const Regex flow = *Regex::compile(R"(["']?([A-Za-z0-9_\-]+)["']?\s*:\s*([\[{]))");
  std::string out;
  std::size_t last = 0;
  open_to_end = false;
  for (const auto& m : flow.find_all(line)) {
    if (m.begin[0] < last || !is_secret_key(line.substr(m.begin[1], m.end[1] - m.begin[1]))) continue;
    const std::size_t end = flow_end(line, m.begin[2]);
    out += line.substr(last, m.end[2] - last) + "***";
    if (end == std::string::npos) {
      open_to_end = true;
      return out;
    }
    out += line[end - 1];
    last = end;
  }
  return out + line.substr(last);
}

}  // namespace

std::string mask_inline(std::string_view s) {
  static const Regex key = *Regex::compile(R"(([A-Za-z0-9_\-]+)["']?\s*[:=]\s*)");
  std::string out;
  std::size_t last = 0;
  for (const auto& m : key.find_all(s)) {
    if (m.begin[0] < last || !is_secret_key(s.substr(m.begin[1], m.end[1] - m.begin[1]))) continue;
    const std::size_t v = m.end[0];
    if (v >= s.size() || s.substr(v).rfind("os.environ/", 0) == 0) continue;
    std::size_t end = s.size();  // a plain value may hold spaces: masked to the end
    if (s[v] == '"' || s[v] == '\'') {
      const std::size_t q = s.find(s[v], v + 1);
      end = q == std::string_view::npos ? s.size() : q + 1;
    } else if (s[v] == '[' || s[v] == '{') {
      end = std::min(flow_end(s, v), s.size());
    }
    out += std::string(s.substr(last, v - last)) + "***";
    last = end;
  }
  out += s.substr(std::min(last, s.size()));
  return util::redact_line(out);
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
    const std::string raw = text.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    std::string masked;
    const std::size_t ind = content_start(raw);
    const bool blank = ind == raw.size();
    if (block_indent != std::string::npos && !blank && ind <= block_indent) block_indent = std::string::npos;
    if (block_indent != std::string::npos && !blank) {
      masked = raw.substr(0, ind) + "***";
    } else {
      bool flow_open = false;
      const std::string line = mask_flow_values(raw, flow_open);
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
      if (flow_open || (!open.empty() && is_secret_key(line.substr(open[0].begin[1], open[0].end[1] - open[0].begin[1]))))
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

/** A LiteLLM secret value as LiteLLM reads it: `os.environ/NAME` is the environment variable NAME. "" (and a
 * warning naming `what`) when NAME is not set here. */
std::string resolve_secret(const std::string& v, const std::string& what, std::vector<std::string>& warnings) {
  constexpr std::string_view kEnv = "os.environ/";
  if (v.rfind(kEnv, 0) != 0) return v;
  const std::string name = v.substr(kEnv.size());
  const char* got = name.empty() ? nullptr : std::getenv(name.c_str());
  if (got != nullptr && *got != '\0') return got;
  // Once per variable: the alias's and the deployment's key are often the same line (issue 55 tryout: said twice).
  const std::string said = fmt::format(" is os.environ/{}, which is not set", name.substr(0, 80));
  if (std::any_of(warnings.begin(), warnings.end(),
                  [&](const std::string& w) { return w.find(said) != std::string::npos; }))
    return {};
  warnings.push_back(fmt::format("{} is os.environ/{}, which is not set in this environment: the probe runs without a "
                                 "key (set {} here or pass --api-key-env)",
                                 what, name.substr(0, 80), name.substr(0, 80)));
  return {};
}

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

/** `n[key]` when `n` is a mapping holding it, else a null node (yaml-cpp throws on a missing key's child). */
YAML::Node child(const YAML::Node& n, const char* key) {
  if (!n || !n.IsMap()) return YAML::Node();
  const YAML::Node v = n[key];
  return v ? v : YAML::Node();
}

std::string scalar_or(const YAML::Node& n, const char* key) {
  if (!n || !n.IsMap()) return {};  // an absent key's node is invalid: IsMap() would throw
  const YAML::Node v = n[key];
  return (v && v.IsScalar()) ? v.Scalar() : std::string();
}

namespace {

/** `n` with its merge keys resolved, recursively (yaml-cpp keeps `<<` as a plain key; PyYAML merges it): a mapping's
 * own keys win, then those of `<<`'s mapping, or of its list of mappings in order (issue 55 tryout K: `gateway show
 * --backend` left out an alias whose api_base came from `<<: *defaults`). */
YAML::Node resolve_merges(const YAML::Node& n, int depth, std::size_t& budget) {
  // yaml_strict bounds nesting; the budget bounds the work an alias repeated in merge lists can multiply (fuzzing).
  if (depth > 64 || budget == 0) return n;
  --budget;
  if (n.IsSequence()) {
    YAML::Node out(YAML::NodeType::Sequence);
    for (std::size_t i = 0; i < n.size(); ++i) out.push_back(resolve_merges(n[i], depth + 1, budget));
    return out;
  }
  if (!n.IsMap()) return n;
  YAML::Node out(YAML::NodeType::Map);
  std::vector<YAML::Node> merged;
  for (auto it = n.begin(); it != n.end(); ++it) {
    // Copies, never references into the iterator's temporary pair (ASan: stack-use-after-scope, fuzz_gateway_show).
    const YAML::Node key = it->first;
    const YAML::Node value = it->second;
    // A quoted "<<" is a plain key to PyYAML too.
    if (key.IsScalar() && key.Scalar() == "<<" && key.Tag() != "!") {
      if (value.IsMap()) merged.push_back(value);
      if (value.IsSequence())
        for (std::size_t i = 0; i < value.size(); ++i)
          if (value[i].IsMap()) merged.push_back(value[i]);
      continue;
    }
    out[key.Scalar()] = resolve_merges(value, depth + 1, budget);
  }
  for (const YAML::Node& m : merged) {
    const YAML::Node r = resolve_merges(m, depth + 1, budget);
    if (!r.IsMap()) continue;
    for (auto it = r.begin(); it != r.end(); ++it) {
      const std::string k = it->first.Scalar();
      const YAML::Node& seen = out;  // a const lookup inserts nothing
      if (!seen[k]) out[k] = YAML::Node(it->second);
    }
  }
  return out;
}

YAML::Node resolve_merges(const YAML::Node& n) {
  std::size_t budget = 100000;
  return resolve_merges(n, 0, budget);
}

}  // namespace

Result<Parsed> parse(const std::string& text, const std::string& path, const std::vector<std::string>& lines) {
  Parsed p;
  // LiteLLM loads the file with PyYAML's safe_load: read it only where that reader and yaml-cpp agree (one document,
  // no NUL or control bytes, no repeated key, core tags only; util/yaml_strict.h, R4-B14), so an edit is checked
  // against what the proxy will read.
  FP4FORGE_ASSIGN_OR_RETURN(p.root, util::load_yaml_strict(text, path, Errc::BAD_INPUT));
  if (!p.root.IsMap())
    return make_error(Errc::BAD_INPUT, "{}: top level is not a mapping; expected a LiteLLM proxy config with 'model_list:'",
                      path);
  for (auto it = p.root.begin(); it != p.root.end(); ++it) {
    p.root_key_lines.push_back(it->first.Mark().line);
    if (it->first.Scalar() == "model_list") p.model_list_line = it->first.Mark().line;
  }
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string b = body_of(lines[i]);
    const std::size_t at = b.find(kRetiredMarker);
    if (at == std::string::npos) continue;
    const std::size_t start = at + std::char_traits<char>::length(kRetiredMarker);
    const std::size_t end = b.find('\'', start);
    if (end != std::string::npos) p.retired.push_back({b.substr(start, end - start), static_cast<int>(i) + 1});
  }
  const YAML::Node ml = p.root["model_list"];
  if (!ml)
    return make_error(Errc::BAD_INPUT,
                      "{}: no 'model_list' key; expected a LiteLLM proxy config.yaml (hint: to start a config's first "
                      "alias, add a line 'model_list:' at the top level, then gateway add)",
                      path);
  if (ml.IsNull()) return p;
  if (!ml.IsSequence())
    return make_error(Errc::BAD_INPUT, "{}: line {}: 'model_list' is not a list", path, ml.Mark().line + 1);
  int idx = 0;
  for (const YAML::Node& item : ml) {
    Entry e;
    e.index = idx++;
    e.node = item;
    e.view = resolve_merges(item);
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

std::string dump_one_line(const YAML::Node& n) {
  YAML::Emitter e;
  e.SetMapFormat(YAML::Flow);
  e.SetSeqFormat(YAML::Flow);
  e << n;
  return e.c_str();
}

// ---------------------------------------------------------------------------------------------
// scalar text

bool plain_safe(std::string_view v) { return util::yaml_plain_safe(v); }  // the one rule (util/yaml_scalar.h)

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

}  // namespace fp4forge::gateway::detail
