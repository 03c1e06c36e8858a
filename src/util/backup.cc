#include "fp4forge/util/backup.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "fp4forge/util/fs.h"

namespace fp4forge::backup {
namespace stdfs = std::filesystem;

std::string stamp_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
  return buf;
}

Result<stdfs::path> fresh_name(const stdfs::path& path, std::string_view infix, std::string_view stamp) {
  std::string base = path.string();
  base.append(infix);
  base.append(stamp);
  for (int n = 0; n < 100; ++n) {
    stdfs::path p = n == 0 ? stdfs::path(base) : stdfs::path(fmt::format("{}-{}", base, n));
    std::error_code ec;
    if (!stdfs::exists(stdfs::symlink_status(p, ec))) return p;
  }
  return make_error(Errc::IO, "{}: 100 backups already exist for this second; expected a free backup name", base);
}

Result<stdfs::path> write_backup(const stdfs::path& path, std::string_view content, std::string_view infix,
                                 std::string_view stamp) {
  FP4FORGE_ASSIGN_OR_RETURN(stdfs::path name, fresh_name(path, infix, stamp));
  FP4FORGE_TRY(fs::edit_file_atomic(name, content, path));
  return name;
}

namespace {

bool digits(std::string_view s, std::size_t n) {
  return s.size() == n && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}

/** The owner whose files beside `path` count as fp4forge's: the owner of `path`, or this user when it is gone. */
uid_t owner_of(const stdfs::path& path) {
  struct stat owner {};
  return ::stat(path.c_str(), &owner) == 0 ? owner.st_uid : ::geteuid();
}

/** A regular file (never a link: issue 27 #7) owned by `uid` or by this user. */
bool own_regular_file(const stdfs::path& p, uid_t uid) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && (st.st_uid == uid || st.st_uid == ::geteuid());
}

const stdfs::path& dir_or_dot(const stdfs::path& dir) {
  static const stdfs::path dot(".");
  return dir.empty() ? dot : dir;
}

}  // namespace

std::optional<std::pair<std::string, long>> parse_stamp(std::string_view tail) {
  // YYYYMMDD-HHMMSS[-N], N in 1..99 (what fresh_name writes).
  if (tail.size() < 15 || !digits(tail.substr(0, 8), 8) || tail[8] != '-' || !digits(tail.substr(9, 6), 6))
    return std::nullopt;
  const std::string_view rest = tail.substr(15);
  if (rest.empty()) return std::make_pair(std::string(tail.substr(0, 15)), 0L);
  if (rest[0] != '-' || (rest.size() != 2 && rest.size() != 3) || !digits(rest.substr(1), rest.size() - 1) ||
      rest[1] == '0')
    return std::nullopt;
  return std::make_pair(std::string(tail.substr(0, 15)), std::stol(std::string(rest.substr(1))));
}

std::vector<stdfs::path> list(const stdfs::path& path, std::string_view infix) {
  std::vector<std::pair<std::pair<std::string, long>, stdfs::path>> found;
  const stdfs::path dir = dir_or_dot(path.parent_path());
  std::string prefix = path.filename().string();
  prefix.append(infix);
  std::error_code ec;
  // A backup is a regular file (never a link: issue 27 #7, a planted link to another user's file was
  // restored) owned by the owner of the file it backs up (by this user when that file is gone), under a name
  // fresh_name writes (R4-B8: a hand-made `FILE.bak-fp4forge-before-upgrade` is not one, and sorted last).
  const uid_t uid = owner_of(path);
  for (stdfs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const auto key = parse_stamp(std::string_view(name).substr(prefix.size()));
    struct stat st {};
    if (!key || ::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != uid) continue;
    found.emplace_back(*key, path.has_parent_path() ? it->path() : stdfs::path(name));
  }
  std::sort(found.begin(), found.end());
  std::vector<stdfs::path> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

std::vector<stdfs::path> stale_temporaries(const stdfs::path& path) {
  std::vector<stdfs::path> out;
  const std::string name = path.filename().string();
  const uid_t uid = owner_of(path);
  std::error_code ec;
  for (stdfs::directory_iterator it(dir_or_dot(path.parent_path()), ec), end; !ec && it != end; it.increment(ec)) {
    const std::string f = it->path().filename().string();
    // NAME[<infix>STAMP].partial-XXXXXXXX: what fs::edit_file_atomic makes for NAME and for its backups.
    if (f.size() < name.size() + 17 || f.rfind(name, 0) != 0) continue;
    const std::string_view sfx = std::string_view(f).substr(f.size() - 17);
    if (sfx.substr(0, 9) != ".partial-" ||
        !std::all_of(sfx.begin() + 9, sfx.end(), [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }))
      continue;
    const std::string_view mid = std::string_view(f).substr(name.size(), f.size() - 17 - name.size());
    bool ours = mid.empty();
    for (std::string_view infix : {kBackupInfix, kRollbackInfix})
      if (!ours && mid.rfind(infix, 0) == 0) ours = parse_stamp(mid.substr(infix.size())).has_value();
    if (ours && own_regular_file(it->path(), uid)) out.push_back(path.has_parent_path() ? it->path() : stdfs::path(f));
  }
  std::sort(out.begin(), out.end());
  return out;
}

Result<std::size_t> remove_stale_temporaries(const stdfs::path& path) {
  const auto stale = stale_temporaries(path);
  for (const stdfs::path& p : stale) FP4FORGE_TRY(fs::remove_tree(p));
  return stale.size();
}

bool is_backup_name(std::string_view name) {
  return name.find(kBackupInfix) != std::string_view::npos || name.find(kRollbackInfix) != std::string_view::npos;
}

}  // namespace fp4forge::backup
