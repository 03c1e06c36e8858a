#pragma once
/**
 * Named backups of the files fp4forge edits in a user's folder (doctor --fix, gateway swap / retire /
 * rollback): one naming scheme, one writer, one ordering.
 *
 * A backup of `DIR/FILE` is `DIR/FILE<infix>YYYYMMDD-HHMMSS[-N]`: infix `.bak-fp4forge-` for the content
 * before an edit, `.rollback-fp4forge-` for what a rollback replaced; `-N` (1..99) when that second is
 * taken. It is written through fs::edit_file_atomic with the mode and owner of FILE from its first byte.
 */
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fp4forge/core/error.h"

namespace fp4forge::backup {

inline constexpr std::string_view kBackupInfix = ".bak-fp4forge-";
inline constexpr std::string_view kRollbackInfix = ".rollback-fp4forge-";

/** The local time now as "YYYYMMDD-HHMMSS". */
std::string stamp_now();

/** The first free `path + infix + stamp[-N]`; IO when 100 names of that second are taken. */
Result<std::filesystem::path> fresh_name(const std::filesystem::path& path, std::string_view infix,
                                         std::string_view stamp);

/** Writes `content` under fresh_name() as a backup of `path` (mode and owner of `path`); its path. */
Result<std::filesystem::path> write_backup(const std::filesystem::path& path, std::string_view content,
                                           std::string_view infix, std::string_view stamp);

/** The backups `path + infix + YYYYMMDD-HHMMSS[-N]` beside `path` (only names fresh_name writes: R4-B8), oldest
 * first by (timestamp, numeric sequence: "-10" after "-9"); regular files of the owner of `path` (of this user
 * when `path` is gone); links and unfinished temporaries excluded. */
std::vector<std::filesystem::path> list(const std::filesystem::path& path, std::string_view infix);

/** ("YYYYMMDD-HHMMSS", N) of a stamp fresh_name writes (N = 0 without "-N"); nullopt for any other text. */
std::optional<std::pair<std::string, long>> parse_stamp(std::string_view tail);

/** The temporaries a killed edit of `path` left beside it (R4-B16): `NAME.partial-XXXXXXXX` of `path` itself
 * and of its backups (`NAME<infix>STAMP.partial-XXXXXXXX`), exactly the names fs::edit_file_atomic makes
 * (8 characters [a-z0-9]); regular files only (never a link), owned by this user or the owner of `path`.
 * Only meaningful under the edit lock of `path` (fs::PathLock): then no live edit owns one. */
std::vector<std::filesystem::path> stale_temporaries(const std::filesystem::path& path);
/** Removes stale_temporaries(path); how many. IO when one cannot be removed. */
Result<std::size_t> remove_stale_temporaries(const std::filesystem::path& path);

/** True when a file name is a backup fp4forge wrote (either infix). */
bool is_backup_name(std::string_view name);

}  // namespace fp4forge::backup
