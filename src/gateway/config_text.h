#pragma once
// The line-addressed model of a LiteLLM config.yaml, private to the gateway module. Every gateway command reads,
// edits and re-validates a config through it: yaml-cpp does not keep comments, so an edit is a text edit of the
// file's own lines, located with the parsed structure (each entry's lines, each scalar's extent), then re-parsed
// and compared with the intended structure. The commands sit in their own files (gateway.cc: show, rollback,
// retire; swap.cc; add.cc; check.cc; seat_gate.cc: the probe a new deployment must pass); this header is the one
// model they share. Sources: config_text.cc (lines, parse, scalar text, masking), validate.cc (is an edit safe),
// gateway.cc (routes, deployments, backups).
#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "fp4forge/core/error.h"
#include "fp4forge/gateway/gateway.h"
#include "fp4forge/util/path_lock.h"

namespace fp4forge::gateway::detail {

namespace stdfs = std::filesystem;

inline constexpr const char* kRetiredMarker = "# fp4forge-retired: alias '";
inline constexpr std::uint64_t kMaxConfigBytes = 16u << 20;
/** What LiteLLM's readers of a YAML "edit it by hand" refusal are told. */
inline constexpr const char* kUnsafeYaml =
    "the config uses YAML a line edit cannot change safely (anchors, merge keys, tags?): edit it by hand";

// ---- lines: each with its terminator ("\n", "\r\n" or none on the last line)
std::vector<std::string> split_keep(const std::string& s);
std::string join(const std::vector<std::string>& lines);
std::string body_of(const std::string& line);  ///< the line without its terminator
std::string eol_of(const std::string& line);
bool blank_or_comment(const std::string& line);
std::string file_eol(const std::vector<std::string>& lines);  ///< the file's first terminator ("\n" if none)
int indent_of(const std::string& line);  ///< spaces before the content; -1 for a blank line

// ---- the parse
struct Entry {
  std::string alias;
  int index = 0;       // position in model_list
  int first_line = 0;  // 0-based line of the entry's first key
  int dash_line = 0;   // 0-based line holding its "-"
  YAML::Node node;     // as yaml-cpp read it, with marks (where an edit goes)
  /** What LiteLLM reads: `node` with YAML merge keys (`<<: *defaults`) resolved as PyYAML's safe_load does (own keys
   * first, then each merged mapping's missing ones, earlier first). Every read of a value goes through it. */
  YAML::Node view;
};

struct Parsed {
  YAML::Node root;
  std::vector<Entry> entries;
  int model_list_line = 0;
  std::vector<int> root_key_lines;  // 0-based, all top-level keys
  std::vector<RetiredAlias> retired;  // the marker comments of earlier retires (alias as written, 1-based line)
};

/** `n[key]` when `n` is a mapping holding it, else a null node (a missing key's child throws in yaml-cpp). */
YAML::Node child(const YAML::Node& n, const char* key);
/** The scalar under `key` of mapping `n` ("" when `n` is not a mapping or the value is not a scalar). */
std::string scalar_or(const YAML::Node& n, const char* key);
/** BAD_INPUT unless `text` is a LiteLLM config: a mapping with `model_list`, no duplicate keys, entries with
 * `model_name`. `lines` are split_keep(text). */
Result<Parsed> parse(const std::string& text, const std::string& path, const std::vector<std::string>& lines);
Result<std::string> read_config(const stdfs::path& config);
std::string dump(const YAML::Node& n);  ///< canonical text of a node, for comparing values
std::string dump_one_line(const YAML::Node& n);             ///< the node in flow style on one line, for reports
bool glob_match(std::string_view pat, std::string_view s);  ///< '*' only, as LiteLLM's wildcard routes
std::string timestamp(const char* fmt_str);                 ///< local time, strftime format
/** `content` written atomically to `path` with the mode and owner of `like` (configs may hold API keys). */
Status write_like(const stdfs::path& path, const std::string& content, const stdfs::path& like);
/** The file the config path names (a symlinked config is edited at its target, the link kept). */
stdfs::path write_target(const stdfs::path& config);

// ---- scalar text
bool plain_safe(std::string_view v);  ///< util::yaml_plain_safe: plain when no YAML 1.1 / 1.2 reader retypes it
std::string double_quoted(std::string_view v);
/** Text for a string scalar: in `quote` style ('\'', '"' or 0 = plain when safe). */
std::string scalar_text(std::string_view v, char quote);
/** End column (exclusive) of the scalar starting at `col` of line body `b`; npos when it cannot be edited. */
std::size_t scalar_end(const std::string& b, std::size_t col);

// ---- secrets in what is shown
/** A LiteLLM parameter name whose whole value is secret (util::is_secret_name, or a headers / credentials block). */
bool is_secret_key(std::string_view k);
/** `text` with every secret value masked by name and by shape; line count and layout unchanged. */
std::string mask_secret_values(const std::string& text);
/** A scalar from the config (or a message quoting one) as it may be shown: the value after every secret-named
 * `key:` / `key=` inside it masked (to its closing quote or bracket, else to the end: a plain value may hold
 * spaces), then util::redact_line. For text a quote left open swallowed from the following lines (round-3 B3:
 * `model_name: "chat` takes the entry's `api_key:` line into the alias); a no-op on an ordinary name. */
std::string mask_inline(std::string_view s);
/** A LiteLLM secret value as LiteLLM reads it: `os.environ/NAME` is the environment variable NAME. "" (and a
 * warning naming `what`) when NAME is not set here. */
std::string resolve_secret(const std::string& v, const std::string& what, std::vector<std::string>& warnings);

// ---- is an edit safe (validate.cc)
/** Lines [dash_line, end) of an entry, trailing blank and comment lines left out. */
std::pair<int, int> entry_range(const Parsed& p, const std::vector<std::string>& lines, const Entry& e);
/** BAD_INPUT when YAML anchors or aliases make a line edit of `targets` change another part of the file. */
Status refuse_shared_anchors(const Parsed& p, const std::vector<std::string>& lines, const std::set<int>& targets,
                             const std::string& path);
/** The edited text must parse, keep every top-level key and every entry not in `edited_entries` (or removed)
 * as it was; `added_at` >= 0: one new entry stands at that model_list position (gateway add). */
Status validate_edit(const Parsed& before, const std::string& new_text, const std::string& path,
                     const std::set<int>& edited_entries, const std::set<int>& removed_entries, int added_at = -1);

// ---- routes, deployments, writing (gateway.cc)
/** scheme://host:port of a URL (the path left out: LiteLLM may report the api_base with or without /v1); with
 * same_backend, whether two URLs name one server. */
std::string server_of(std::string_view url);
void describe_routes(const Parsed& p, GatewayShow& s);
/** "N) MODEL @ API_BASE (line L[, id ID])" for each deployment (api_base redacted). */
std::string list_deployments(const std::vector<const Entry*>& ds);
/** The deployments of `alias`: all for an empty `deployment`, else the one it names (number, model_info.id,
 * api_base, model). BAD_INPUT when the alias is absent; USAGE when `deployment` names none or several. */
/** The alias of `p` that `alias` is a case variant or a typo of ("" when none, or when `alias` is one): the
 * did-you-mean of swap, retire, check and add (issue 55 tryout: add and check missed `Chat` for `chat`). */
std::string similar_alias(const Parsed& p, const std::string& alias);
Result<std::vector<const Entry*>> deployments_of(const Parsed& p, const std::string& path, const std::string& alias,
                                                 const std::string& deployment);
/** What the operator does after an edit; `kept`: deployments of the alias a partial retire left; `check_flags`: the
 * gate's probe flags (" --no-tools --text-only"), so that the gateway check it suggests asks what the gate proved. */
std::vector<std::string> next_steps_after_edit(const std::string& path, const std::string& alias, bool retired,
                                               std::size_t kept = 0, const std::string& check_flags = {});
/** Backup of `old_text`, then `new_text` written atomically; fills out.backup and out.changed. */
Status backup_and_write(const stdfs::path& config, const std::string& old_text, const std::string& new_text,
                        EditResult& out);

/** The edit lock of a config (R4-B1) and what taking it cleaned up (R4-B16). */
struct EditLock {
  fs::PathLock lock;
  std::vector<std::string> notes;  ///< one warning per stale temporary of a killed edit removed
};
/** Every edit (swap, add, retire, rollback) calls this before it reads the config and keeps the lock until its
 * rename: the lock of the file the config names (its target when a link), then the temporaries a killed edit of
 * it left (its own and its backups', backup::stale_temporaries) removed. Nothing on a dry run, nor when the
 * config cannot be opened (the read says why). */
Result<EditLock> lock_for_edit(const stdfs::path& config, bool dry_run);

/** The end of swap and add after their gate: nothing on a dry run; IO when the file changed since `text` was read
 * (re-run out.command); else backup, atomic write of `new_text`, next steps. */
Status write_edit(const stdfs::path& config, const std::string& text, const std::string& new_text,
                  const std::string& alias, bool dry_run, EditResult& out, const std::string& check_flags = {});

}  // namespace fp4forge::gateway::detail
