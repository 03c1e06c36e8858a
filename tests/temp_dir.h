#pragma once
// The one temporary folder of the tests: unique (mkdtemp), removed with everything in it at scope exit, also
// when a test made parts of it read-only.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace fp4forge::testutil {

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "fp4forge-test.XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) std::abort();
    path = tmpl;
  }
  ~TempDir() {
    namespace stdfs = std::filesystem;
    std::error_code ec;
    // Read-only copies must be writable again to be removed.
    for (auto it = stdfs::recursive_directory_iterator(path, ec); !ec && it != stdfs::end(it); it.increment(ec))
      if (!it->is_symlink()) stdfs::permissions(it->path(), stdfs::perms::owner_all, stdfs::perm_options::add, ec);
    stdfs::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::filesystem::path operator/(const std::string& name) const { return path / name; }
};

}  // namespace fp4forge::testutil
