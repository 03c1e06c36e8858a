#pragma once
// A fake Hugging Face hub cache, laid out as huggingface_hub writes one:
//   <cache>/models--ORG--NAME/refs/<ref>            the commit hash, no newline
//   <cache>/models--ORG--NAME/blobs/<hash>          file contents
//   <cache>/models--ORG--NAME/snapshots/<commit>/F  -> ../../blobs/<hash>
// and a recursive listing of a folder (type, size, mtime, link target, bytes) to prove nothing was written.
#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>

namespace fp4forge::testutil {

namespace hfs = std::filesystem;

struct FakeHubRepo {
  hfs::path repo_dir;
  hfs::path snapshot;
  std::string commit;
};

/** A 40-hex fake commit made from `seed`. */
inline std::string fake_commit(unsigned seed) {
  std::string out;
  static const char* kHex = "0123456789abcdef";
  std::uint64_t x = 0x9e3779b97f4a7c15ull * (seed + 1);
  for (int i = 0; i < 40; ++i) {
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    out.push_back(kHex[(x >> 60) & 15]);
  }
  return out;
}

/** Puts every plain file of `from` (not recursive) into `cache` as repo `org/name` at `commit` (each file a
 * blob and a relative link in the snapshot); writes refs/`ref` naming the commit unless `ref` is empty. */
inline FakeHubRepo make_fake_hub_repo(const hfs::path& cache, const std::string& org, const std::string& name,
                                      const hfs::path& from, const std::string& commit,
                                      const std::string& ref = "main") {
  FakeHubRepo r;
  r.repo_dir = cache / ("models--" + org + "--" + name);
  r.commit = commit;
  r.snapshot = r.repo_dir / "snapshots" / commit;
  hfs::create_directories(r.repo_dir / "blobs");
  hfs::create_directories(r.snapshot);
  for (const auto& e : hfs::directory_iterator(from)) {
    if (!e.is_regular_file()) continue;
    const std::string file = e.path().filename().string();
    // A blob name shaped like a sha256, unique per file and commit.
    const std::string blob = fake_commit(static_cast<unsigned>(std::hash<std::string>{}(commit + "/" + file))) +
                             fake_commit(static_cast<unsigned>(std::hash<std::string>{}(file))).substr(0, 24);
    if (!hfs::exists(r.repo_dir / "blobs" / blob)) hfs::copy_file(e.path(), r.repo_dir / "blobs" / blob);
    hfs::create_symlink(hfs::path("../../blobs") / blob, r.snapshot / file);
  }
  if (!ref.empty()) {
    hfs::create_directories((r.repo_dir / "refs" / ref).parent_path());
    std::ofstream(r.repo_dir / "refs" / ref, std::ios::binary) << commit;
  }
  return r;
}

/** Every entry under `dir` (itself included): kind, size, mtime in ns, link target, from lstat. */
inline std::map<std::string, std::string> tree_state(const hfs::path& dir) {
  std::map<std::string, std::string> out;
  auto add = [&](const hfs::path& p) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) return;
    std::string v = std::to_string(st.st_mode) + " " + std::to_string(st.st_size) + " " +
                    std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
    if (S_ISLNK(st.st_mode)) v += " -> " + hfs::read_symlink(p).string();
    if (S_ISREG(st.st_mode)) {  // the bytes too
      std::ifstream f(p, std::ios::binary);
      std::ostringstream bytes;
      bytes << f.rdbuf();
      v += " #" + std::to_string(std::hash<std::string>{}(bytes.str()));
    }
    out[p.lexically_relative(dir).string()] = v;
  };
  add(dir);
  for (auto it = hfs::recursive_directory_iterator(dir); it != hfs::end(it); ++it) add(it->path());
  return out;
}

}  // namespace fp4forge::testutil
