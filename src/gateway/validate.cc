// Is a line edit of a LiteLLM config safe (config_text.h)? The entry's lines, the YAML anchors that would make
// an edit change another part of the file, and the re-parse that proves nothing else changed.
#include <algorithm>

#include <fmt/format.h>

#include "config_text.h"

namespace fp4forge::gateway::detail {


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

namespace {

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

}  // namespace

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
                     const std::set<int>& edited_entries, const std::set<int>& removed_entries, int added_at) {
  const std::vector<std::string> new_lines = split_keep(new_text);
  auto np = parse(new_text, path, new_lines);
  if (!np.ok())
    return make_error(Errc::BAD_INPUT, "{}: the edited config does not parse ({}); file left untouched; {}", path,
                      np.error().message, kUnsafeYaml);
  // Root keys other than model_list unchanged.
  for (auto it = before.root.begin(); it != before.root.end(); ++it) {
    const std::string k = it->first.Scalar();
    if (k == "model_list") continue;
    if (!np->root[k] || dump(np->root[k]) != dump(it->second))
      return make_error(Errc::BAD_INPUT, "{}: the edit changed top-level key '{}'; file left untouched; {}", path, k,
                        kUnsafeYaml);
  }
  std::size_t j = 0;
  for (const Entry& e : before.entries) {
    if (static_cast<int>(j) == added_at) ++j;  // the new entry (gateway add), checked by its caller
    if (removed_entries.count(e.index)) continue;
    if (j >= np->entries.size())
      return make_error(Errc::BAD_INPUT, "{}: the edit lost model_list entry '{}'; file left untouched; {}", path,
                        e.alias, kUnsafeYaml);
    if (!edited_entries.count(e.index) && dump(np->entries[j].node) != dump(e.node))
      return make_error(Errc::BAD_INPUT, "{}: the edit changed unrelated entry '{}' (line {}); file left untouched; {}",
                        path, e.alias, e.first_line + 1, kUnsafeYaml);
    ++j;
  }
  if (static_cast<int>(j) == added_at) ++j;  // appended after the last entry
  if (j != np->entries.size())
    return make_error(Errc::BAD_INPUT, "{}: the edit {} model_list entries; file left untouched; {}", path,
                      j < np->entries.size() ? "added" : "lost", kUnsafeYaml);
  return {};
}

}  // namespace fp4forge::gateway::detail
