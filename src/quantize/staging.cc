// The staging folder and the destination checks of quantize (staging.h).
#include "fp4forge/quantize/staging.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "fp4forge/quantize/manifest.h"
#include "fp4forge/util/format.h"
#include "fp4forge/util/fs.h"
#include "fp4forge/util/hf_cache.h"
#include "fp4forge/util/path_lock.h"

namespace fp4forge::quant {
namespace stdfs = std::filesystem;

namespace {
bool is_within(const stdfs::path& inner, const stdfs::path& outer) {
  auto i = inner.begin();
  for (auto o = outer.begin(); o != outer.end(); ++o, ++i) {
    if (o->empty()) continue;  // trailing separator
    if (i == inner.end() || *i != *o) return false;
  }
  return true;
}

/** True when `dir` is empty or holds only the marker's `.partial` (a run killed while creating it). */
bool only_marker_partial(const stdfs::path& dir) {
  std::error_code ec;
  for (const auto& e : stdfs::directory_iterator(dir, ec))
    if (e.path().filename() != std::string(kStagingMarker) + ".partial") return false;
  return !ec;
}
}  // namespace

stdfs::path normalize_destination(const stdfs::path& p) {
  std::error_code ec;
  stdfs::path a = stdfs::weakly_canonical(stdfs::absolute(p, ec), ec);
  if (ec) a = stdfs::absolute(p).lexically_normal();
  // `out/` is the folder `out` (shell completion adds the slash; tryout O-M2: "has no directory name", exit 2).
  while (a.filename().empty() && a.has_relative_path()) a = a.parent_path();
  return a;
}

stdfs::path staging_path(const stdfs::path& dst) {
  const stdfs::path abs = normalize_destination(dst);
  return abs.parent_path() / fmt::format(".{}.fp4forge-staging", abs.filename().string());
}

Status check_destination(const stdfs::path& src, const stdfs::path& dst) {
  if (dst.empty()) return make_error(Errc::USAGE, "destination directory is empty; give DST");
  const stdfs::path s = normalize_destination(src), d = normalize_destination(dst);
  if (d.filename().empty())
    return make_error(Errc::USAGE,
                      "destination '{}' names no folder of its own (the file system's root); expected a "
                      "new folder's path, e.g. '/models/out'",
                      dst.string());
  std::error_code ec;
  if (s == d)
    return make_error(Errc::BAD_INPUT, "destination '{}' is the source directory; the source is never written; "
                                       "choose a new directory",
                      dst.string());
  if (is_within(d, s))
    return make_error(Errc::BAD_INPUT, "destination '{}' is inside the source directory '{}'; choose a directory "
                                       "outside it",
                      dst.string(), src.string());
  if (const auto repo = hf_cache::snapshot_repo_dir(src)) {
    const stdfs::path cache = normalize_destination(repo->parent_path());
    if (is_within(d, cache))
      return make_error(Errc::BAD_INPUT, "destination '{}' is inside the Hugging Face cache '{}' the source comes from; "
                                         "fp4forge never writes into the cache; choose a folder outside it",
                        dst.string(), cache.string());
  }
  if (stdfs::exists(stdfs::symlink_status(dst, ec))) {
    if (stdfs::is_regular_file(stdfs::symlink_status(d / kStagingMarker, ec))) {
      // The resume manifest goes just before the marker (Staging::finish): name it when it is still there.
      const stdfs::path manifest = d / ResumeManifest::kFileName;
      const bool both = stdfs::is_regular_file(stdfs::symlink_status(manifest, ec));
      return make_error(Errc::BAD_INPUT, "destination '{}' already exists: a run was stopped just after its final "
                                         "rename, so the output is complete; remove '{}'{} to finish it",
                        dst.string(), (d / kStagingMarker).string(),
                        both ? fmt::format(" and '{}'", manifest.string()) : std::string());
    }
    return with_file(
        make_error(Errc::BAD_INPUT, "destination '{}' already exists; choose a new directory or remove it first",
                   dst.string()),
        dst.string());  // --json error.file names it (issue 55 tryout: null)
  }
  if (!stdfs::is_directory(d.parent_path(), ec))
    return make_error(Errc::IO, "the parent of destination '{}' does not exist; create '{}' first", dst.string(),
                      d.parent_path().string());
  return {};
}

stdfs::path default_destination(std::string_view repo_name, std::span<const QuantScheme> schemes) {
  std::string name(repo_name);
  std::vector<QuantScheme> seen;
  for (QuantScheme s : schemes) {
    if (std::find(seen.begin(), seen.end(), s) != seen.end()) continue;
    seen.push_back(s);
    name += '-';
    name += quant_scheme_preset(s);
  }
  return stdfs::path(".") / name;
}

stdfs::path default_destination(std::string_view repo_name, QuantScheme scheme) {
  return stdfs::path(".") / fmt::format("{}-{}", repo_name, quant_scheme_preset(scheme));
}

StagedShards staged_shards(const stdfs::path& dir) {
  StagedShards s;
  std::error_code ec;
  const std::vector<std::string> recorded = recorded_shard_names(dir);
  for (const auto& e : stdfs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() > 12 && name.ends_with(".safetensors") && e.is_regular_file(ec)) {
      ++s.count;
      s.bytes += e.file_size(ec);
      if (std::find(recorded.begin(), recorded.end(), name) != recorded.end()) ++s.recorded;
    }
  }
  return s;
}

Status check_resume_of_other_plan(const stdfs::path& dir, std::vector<std::string>& warnings) {
  if (const StagedShards staged = staged_shards(dir); staged.count > 0)
    return make_error(Errc::BAD_INPUT,
                      "--resume: the {} finished shard(s) ({}) in '{}' come from another source or plan (another "
                      "SRC, a source file changed since, or an option that changes the output: --scheme, "
                      "--observer, --scheme-for, --recipe, --ignore, ...); nothing was deleted; expected the "
                      "interrupted run's own command, or --restart to discard them",
                      staged.count, format_bytes(staged.bytes), dir.string());
  warnings.push_back(
      "--resume: the staging folder's manifest is another source's or plan's, and it holds no "
      "finished shard; starting afresh");
  return {};
}

Status remove_staged_temporaries(const stdfs::path& dir) {
  std::error_code ec;
  for (const auto& e : stdfs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (fs::is_partial_name(name) && name != std::string(kStagingMarker) + ".partial")
      if (fs::ops().unlink(e.path().c_str()) != 0 && errno != ENOENT)
        return make_error(Errc::IO, "cannot remove the stale temporary '{}': {}", e.path().string(),
                          std::strerror(errno));
  }
  return {};
}

Status Staging::open(const stdfs::path& dir, const stdfs::path& dst, bool resume, bool restart,
                     std::vector<std::string>& warnings) {
  dir_ = dir;
  fs::PathLock parent;  // held for the set-up only: wait as long as another run's set-up takes
  FP4FORGE_TRY(parent.acquire(dir.parent_path(), fs::PathLock::kForever));
  std::error_code ec;
  if (stdfs::exists(stdfs::symlink_status(dst, ec)))
    return make_error(Errc::BAD_INPUT, "destination '{}' already exists (another run finished it first); choose "
                                       "a new directory or remove it first",
                      dst.string());
  // The staging folder is fp4forge's own: never followed through a link (issue 27 #4: a planted link made
  // the output land in the link's target and DST a link to someone else's directory).
  if (const auto st = stdfs::symlink_status(dir, ec); stdfs::exists(st) && !stdfs::is_directory(st))
    return make_error(Errc::BAD_INPUT,
                      "staging folder '{}' is {}, not a folder fp4forge made; remove it or choose another destination",
                      dir.string(), stdfs::is_symlink(st) ? "a symbolic link" : "not a directory");
  if (const auto st = stdfs::symlink_status(dir / kStagingMarker, ec); stdfs::exists(st) && !stdfs::is_regular_file(st))
    return make_error(Errc::BAD_INPUT, "staging marker '{}' is not a regular file; remove the staging folder",
                      (dir / kStagingMarker).string());
  if (stdfs::exists(dir, ec) && !stdfs::exists(dir / kStagingMarker, ec) && only_marker_partial(dir)) {
    // A run killed between creating the folder and its marker: nothing of value inside. Runs create
    // both under the parent lock, so no live run is half-way through here.
    FP4FORGE_TRY(fs::remove_tree(dir));
  }
  if (stdfs::exists(dir, ec)) {
    if (!stdfs::exists(dir / kStagingMarker, ec))
      return make_error(Errc::BAD_INPUT,
                        "staging folder '{}' exists but was not made by fp4forge; remove it or choose another "
                        "destination",
                        dir.string());
    FP4FORGE_TRY(lock(dst));
    if (resume) {
      // Temporaries of the killed run (a shard's NAME.partial, the MTP splice's NAME.partial-XXXXXXXX) are never
      // output: removed before resuming, or they would end up in DST (issue 27 #9). We hold the lock.
      return remove_staged_temporaries(dir);
    }
    // Finished shards are reusable work (verified by digest on --resume): never deleted without being asked.
    // Only a recorded shard is reused: one the manifest does not record is rewritten by --resume anyway, so a
    // folder without a recorded shard holds nothing to keep (tryout Q-L2: "--resume to reuse them", 0 resumed).
    const auto [shards, bytes, recorded] = staged_shards(dir);
    if (recorded > 0 && !restart) {
      unlock();
      return make_error(
          Errc::BAD_INPUT,
          "staging folder '{}' holds {} finished shard(s) ({}){} of an interrupted run; expected "
          "--resume to reuse {} (each is checked against its recorded digest), or --restart to "
          "discard them",
          dir.string(), shards, format_bytes(bytes),
          recorded == shards ? std::string() : fmt::format(", {} of them recorded in its resume manifest", recorded),
          recorded == shards ? std::string("them") : fmt::format("the {} recorded", recorded));
    }
    warnings.push_back(
        fmt::format("removed the staging folder of an interrupted run ('{}'{}){}", dir.string(),
                    restart && shards > 0 ? fmt::format(", {} finished shard(s), --restart", shards) : "",
                    restart && shards > 0 ? ""
                    : shards > 0          ? fmt::format("; none of its {} finished shard(s) was recorded in its "
                                                                 "resume manifest, so none could be reused",
                                                        shards)
                                          : "; it held no finished shard"));
    Status rm = fs::remove_tree(dir);  // still locked: nobody else can take it over meanwhile
    unlock();
    FP4FORGE_TRY(std::move(rm));
  } else if (resume) {
    warnings.push_back(fmt::format("--resume: no staging folder '{}' to resume from; starting afresh", dir.string()));
  }
  if (fs::ops().mkdir(dir.c_str(), 0755) != 0)
    return make_error(Errc::IO, "cannot create staging folder '{}': {}", dir.string(), std::strerror(errno));
  created_ = true;
  FP4FORGE_TRY(fs::write_file_atomic(dir / kStagingMarker, "fp4forge quantize staging folder\n"));
  return lock(dst);
}

Status Staging::finish(const stdfs::path& dst, const std::vector<std::string>& drop) {
  FP4FORGE_TRY(fs::fsync_dir(dir_));
  FP4FORGE_TRY(fs::rename_durable(dir_, dst));
  dir_ = dst;  // from here on nothing is "staging": a failure below must not remove DST
  finished_ = true;
  for (const auto& n : drop)
    if (fs::ops().unlink((dst / n).c_str()) != 0 && errno != ENOENT) {
      const int e = errno;
      unlock();
      return make_error(Errc::IO, "cannot remove '{}': {}", (dst / n).string(), std::strerror(e));
    }
  const std::string m = (dst / kStagingMarker).string();
  const int r = fs::ops().unlink(m.c_str());
  const int e = errno;
  unlock();
  if (r != 0 && e != ENOENT) return make_error(Errc::IO, "cannot remove '{}': {}", m, std::strerror(e));
  return fs::fsync_dir(dst);
}

void Staging::unlock() noexcept {
  if (lock_fd_ >= 0) {
    fs::ops().flock(lock_fd_, LOCK_UN);
    fs::ops().close(lock_fd_);
    lock_fd_ = -1;
  }
}

void Staging::remove() noexcept {
  if (!finished_) (void)fs::remove_tree(dir_);
  unlock();
}

StagedShards Staging::keep_finished() noexcept {
  if (finished_ || dir_.empty()) {
    unlock();
    return {};
  }
  const StagedShards kept = staged_shards(dir_);
  if (kept.count == 0) {
    remove();
    return {};
  }
  (void)remove_staged_temporaries(dir_);  // still locked: a failed removal leaves a temporary --resume removes
  unlock();
  return kept;
}

Status Staging::lock(const stdfs::path& dst) {
  const std::string m = (dir_ / kStagingMarker).string();
  lock_fd_ = fs::ops().open(m.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW, 0);
  if (lock_fd_ < 0) return make_error(Errc::IO, "cannot open '{}': {}", m, std::strerror(errno));
  if (fs::ops().flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    fs::ops().close(lock_fd_);
    lock_fd_ = -1;
    if (e != EWOULDBLOCK) return make_error(Errc::IO, "cannot lock '{}': {}", m, std::strerror(e));
    return make_error(Errc::BAD_INPUT,
                      "another fp4forge quantize run holds destination '{}' (its staging folder '{}' is locked); "
                      "wait for it to finish or choose another destination",
                      dst.string(), dir_.string());
  }
  return {};
}

}  // namespace fp4forge::quant
