#pragma once
/**
 * Where quantize writes before its output is final: the staging folder `.<DST>.fp4forge-staging` beside
 * DST, its marker and lock, and the checks on DST that come before anything is written.
 *
 * Life of a run (issue 14 #9, #10 in docs/reliability.md): set-up happens under an flock on DST's
 * parent folder (fs::PathLock), so two runs never both decide a staging folder is stale or both create
 * one; the marker file `.fp4forge-staging` inside the staging folder is flock'ed for as long as the run
 * owns it and stays through the final rename, so a run killed at any point leaves either a recognisable
 * staging folder (resumable with --resume) or a finished DST.
 */
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <span>
#include <string_view>
#include <vector>

#include "fp4forge/codec/scheme.h"
#include "fp4forge/core/error.h"

namespace fp4forge::quant {

/** The marker (and lock) file inside a staging folder. */
inline constexpr const char* kStagingMarker = ".fp4forge-staging";

/** DST made absolute and normalised (symlinks in existing parents resolved): the path a run writes. */
std::filesystem::path normalize_destination(const std::filesystem::path& dst);
/** `.<DST name>.fp4forge-staging` beside DST. */
std::filesystem::path staging_path(const std::filesystem::path& dst);

/** The finished shards an interrupted run left in a staging folder: `*.safetensors` files (a shard being
 * written is `NAME.partial`), how many and their bytes, and how many of them its resume manifest records (what a
 * `--resume` reuses: a shard renamed into place an instant before the run stopped may have no record yet). */
struct StagedShards {
  std::size_t count = 0;
  std::uint64_t bytes = 0;
  std::size_t recorded = 0;
};
StagedShards staged_shards(const std::filesystem::path& dir);
/** A --resume whose manifest is another source's or plan's (ResumeManifest::load_previous false): BAD_INPUT when the
 * folder holds finished shards (--resume means "reuse my work": they are refused and kept, as a run without --resume
 * refuses them; tryout N-M3: a typo in SRC deleted them with a warning), else a warning and a fresh start. */
Status check_resume_of_other_plan(const std::filesystem::path& dir, std::vector<std::string>& warnings);
/** Removes the temporaries of a run from its staging folder (`fs::is_partial_name`: a shard's `NAME.partial`, an
 * atomic write's `NAME.partial-XXXXXXXX`), never the marker's: they are never output. The caller holds the lock. */
Status remove_staged_temporaries(const std::filesystem::path& dir);

/**
 * Refuses a DST that is empty, the source, inside the source, inside the Hugging Face cache a source
 * snapshot belongs to (hf_cache::snapshot_repo_dir: the cache is never written), already existing (with a
 * precise message when it is a run completed up to its marker), or whose parent folder is missing.
 * USAGE / BAD_INPUT / IO.
 */
Status check_destination(const std::filesystem::path& src, const std::filesystem::path& dst);

/** The DST of `quantize ORG/NAME` without one: `./NAME-<preset>` in the current folder, the preset of the
 * scheme written (`./Qwen3-8B-NVFP4A16`). A folder source always needs an explicit DST. */
std::filesystem::path default_destination(std::string_view repo_name, QuantScheme scheme);
/** With a recipe: every scheme asked for, the default first, each preset once (`./Qwen3-30B-A3B-NVFP4A16-FP8_BLOCK`). */
std::filesystem::path default_destination(std::string_view repo_name, std::span<const QuantScheme> schemes);

/** The staging folder of one run, locked through its marker while the run owns it. */
class Staging {
 public:
  Staging() = default;
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;
  ~Staging() { unlock(); }
  /**
   * Takes `dir` (the staging folder of `dst`) under the parent-folder lock: refuses a DST that appeared
   * meanwhile, a folder without marker, and one locked by a live run; reuses a previous run's folder
   * when `resume`. Without it, a previous folder that holds finished shards is refused (BAD_INPUT naming
   * --resume and --restart: they are never deleted unannounced) unless `restart`; one without is removed
   * (with a warning) and a fresh one created.
   */
  Status open(const std::filesystem::path& dir, const std::filesystem::path& dst, bool resume, bool restart,
              std::vector<std::string>& warnings);
  /** Renames the finished staging folder to `dst`, then removes the files named in `drop` (the resume manifest)
   * and the marker (and the lock) there. */
  Status finish(const std::filesystem::path& dst, const std::vector<std::string>& drop = {});
  void unlock() noexcept;
  /** Removes the staging folder (never a finished DST), then unlocks. */
  void remove() noexcept;
  /**
   * After a failed run (R4-B2: an error never deletes finished work): a staging folder that holds finished shards
   * (this run's or an earlier run's, reusable by --resume after their digest check) is kept with only its
   * temporaries (`*.partial`, `*.partial-XXXXXXXX`) removed, and unlocked; one without is removed. Returns the
   * shards kept (count 0: nothing kept). Never touches a finished DST.
   */
  StagedShards keep_finished() noexcept;
  const std::filesystem::path& dir() const { return dir_; }
  bool created() const { return created_; }
  bool finished() const { return finished_; }

 private:
  Status lock(const std::filesystem::path& dst);
  std::filesystem::path dir_;
  int lock_fd_ = -1;
  bool created_ = false;
  bool finished_ = false;
};

}  // namespace fp4forge::quant
