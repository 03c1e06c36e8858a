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
#include <string>
#include <string_view>
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

/** The backups `path + infix + *` beside `path`, oldest first by (timestamp, numeric sequence: "-10"
 * after "-9"); unfinished temporaries excluded. */
std::vector<std::filesystem::path> list(const std::filesystem::path& path, std::string_view infix);

/** True when a file name is a backup fp4forge wrote (either infix). */
bool is_backup_name(std::string_view name);

}  // namespace fp4forge::backup
