#pragma once
/**
 * The resume manifest of a quantize run: `.fp4forge-resume.json` in the staging folder records, for
 * every output shard already written and committed, its size and XXH3-64 digest, under a fingerprint
 * of the plan and the source (config, index, output headers, the FP8 weights passed through, source shard
 * sizes and mtimes). `--resume`
 * reuses a staged shard only when the fingerprint matches and the shard's size, header and digest
 * still agree with the record; anything else is rewritten.
 */
#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "fp4forge/core/error.h"
#include "fp4forge/quantize/plan.h"
#include "fp4forge/safetensors/checkpoint.h"

namespace fp4forge::quant {

/** The 64-bit content digest the resume manifest records (XXH3-64 from libxxhash). */
Result<std::uint64_t> file_digest(const std::filesystem::path& path);

/** What ties staged shards to one plan of one source: XXH3-64 over the config and index the run
 * writes, every output shard's name and header, and every source shard's name, size and mtime. */
std::uint64_t plan_fingerprint(const Checkpoint& src, const QuantPlan& plan);

/** The shard names the manifest in `staging_dir` records (whatever its fingerprint; empty when it is missing or
 * unreadable): what a `--resume` of the same plan can reuse, as against the shard files on disk. */
std::vector<std::string> recorded_shard_names(const std::filesystem::path& staging_dir);

struct ManifestEntry {
  std::uint64_t size = 0;
  std::uint64_t digest = 0;
};

class ResumeManifest {
 public:
  static constexpr const char* kFileName = ".fp4forge-resume.json";

  ResumeManifest(std::filesystem::path staging_dir, std::uint64_t fingerprint)
      : dir_(std::move(staging_dir)), fingerprint_(fingerprint) {}

  /** Reads the previous run's records. A missing file is no record; an unreadable or damaged one is no record plus
   * a warning (never an error). false: a readable manifest of another fingerprint (another source, or options that
   * change the output): nothing loaded and no warning, the caller decides (quantize refuses such a --resume). */
  bool load_previous(std::vector<std::string>& warnings);
  /** The previous run's record of `shard`, or nullptr. */
  const ManifestEntry* previous(const std::string& shard) const;
  /** Keeps a shard reused from the previous run (written out with the next record). */
  void keep(const std::string& shard, ManifestEntry e);
  /** Records a committed shard and rewrites the manifest atomically. Thread-safe. */
  Status record(const std::string& shard, ManifestEntry e);

 private:
  std::filesystem::path dir_;
  std::uint64_t fingerprint_ = 0;
  std::mutex mu_;
  std::map<std::string, ManifestEntry> current_;
  std::map<std::string, ManifestEntry> previous_;
};

}  // namespace fp4forge::quant
