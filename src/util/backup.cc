#include "fp4forge/util/backup.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <ctime>
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

std::vector<stdfs::path> list(const stdfs::path& path, std::string_view infix) {
  std::vector<stdfs::path> out;
  const stdfs::path dir = path.has_parent_path() ? path.parent_path() : stdfs::path(".");
  std::string prefix = path.filename().string();
  prefix.append(infix);
  std::error_code ec;
  // A backup is a regular file (never a link: issue 27 #7, a planted link to another user's file was
  // restored) owned by the owner of the file it backs up (by this user when that file is gone).
  struct stat owner {};
  const uid_t uid = ::stat(path.c_str(), &owner) == 0 ? owner.st_uid : ::geteuid();
  for (stdfs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(prefix, 0) != 0 || name.find(".partial") != std::string::npos) continue;
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != uid) continue;
    out.push_back(path.has_parent_path() ? it->path() : stdfs::path(name));
  }
  auto key = [&](const stdfs::path& p) {
    const std::string tail = p.filename().string().substr(prefix.size());  // YYYYMMDD-HHMMSS[-N]
    const std::size_t dash = tail.find('-', tail.find('-') + 1);
    long n = 0;
    if (dash != std::string::npos) {
      const std::string num = tail.substr(dash + 1);
      if (!num.empty() && num.size() < 10 &&
          std::all_of(num.begin(), num.end(), [](unsigned char c) { return std::isdigit(c) != 0; }))
        n = std::stol(num);
    }
    return std::make_pair(tail.substr(0, dash), n);
  };
  std::sort(out.begin(), out.end(), [&](const stdfs::path& a, const stdfs::path& b) { return key(a) < key(b); });
  return out;
}

bool is_backup_name(std::string_view name) {
  return name.find(kBackupInfix) != std::string_view::npos || name.find(kRollbackInfix) != std::string_view::npos;
}

}  // namespace fp4forge::backup
