#pragma once
/**
 * Hugging Face Hub cache repo ids as checkpoint arguments: `fp4forge inspect Qwen/Qwen3-8B` reads the
 * snapshot huggingface_hub downloaded, offline, the way `snapshot_download(local_files_only=True)` finds
 * it. Every command that reads a checkpoint resolves its argument here first (docs/cli/README.md,
 * "Checkpoint arguments").
 *
 * Which argument is what (resolve()):
 * 1. something that exists at that path (a folder, a file, a link) is a path, used as given: a local
 *    folder `org/name` beats the repo id `org/name`;
 * 2. a path-like argument (`/...`, `./...`, `../...`, `~...`, `.`, `..`) is a path even when missing
 *    (Checkpoint::open reports it, as before);
 * 3. `NAMESPACE/NAME[@REVISION]` with a valid repo id (huggingface_hub's validate_repo_id, with the
 *    namespace required) is looked up in the cache;
 * 4. anything else is a path.
 *
 * The cache folder is huggingface_hub's (constants.py): `HF_HUB_CACHE`, else the legacy
 * `HUGGINGFACE_HUB_CACHE`, else `HF_HOME/hub`, else `XDG_CACHE_HOME/huggingface/hub`, else
 * `~/.cache/huggingface/hub`, with `~` and `$VAR` / `${VAR}` expanded as Python's os.path.expanduser /
 * expandvars do. Only that one folder is searched (it is the one vLLM and transformers would read). In it,
 * `models--NAMESPACE--NAME/`: a REVISION (default `main`) that is a 40-hex commit names
 * `snapshots/<commit>` directly, else `refs/<REVISION>` holds the commit. The snapshot folder is the
 * checkpoint; its files are usually links to `../../blobs/<hash>` (Checkpoint::open reads through them).
 *
 * Nothing here writes: the cache is read-only to fp4forge (doctor --fix and quantize refuse to write into
 * it, see snapshot_repo_dir()). A failed lookup is IO (exit 4, like a missing folder) and says where it
 * looked: the cache folder and the variables that chose it, the repo folder, the ref file, the snapshot.
 */
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp4forge/core/error.h"

namespace fp4forge::hf_cache {

/** Reads one environment variable (nullopt when unset; an empty value is a value, as in Python). */
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

/** The process environment (std::getenv). */
EnvLookup process_env();

/** Why `repo_id` is not a valid `NAMESPACE/NAME` repo id; "" when it is valid. The rules of
 * huggingface_hub's validate_repo_id: exactly one '/' here (fp4forge requires the namespace), each part
 * of [A-Za-z0-9._-] starting and ending with a letter, digit or '_', the name at most 96 characters, no
 * "--" or "..", not ending in ".git". */
std::string repo_id_problem(std::string_view repo_id);

/** The cache folder huggingface_hub uses, and why. */
struct CacheDir {
  std::filesystem::path dir;
  std::string chosen_by;  ///< "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME" or "default"
  std::string how;        ///< one phrase: each variable read, in order, up to the one that chose it
};
/** The cache folder of `env` (see the file comment). */
CacheDir cache_dir(const EnvLookup& env);

/** A checkpoint argument resolved from the cache. */
struct HubSnapshot {
  std::string repo_id;               ///< "org/name"
  std::string revision;              ///< as given, or "main"
  std::string commit;                ///< 40 hex digits
  std::filesystem::path cache_dir;   ///< the cache folder searched
  std::string cache_dir_from;        ///< CacheDir::chosen_by
  std::filesystem::path repo_dir;    ///< cache_dir / "models--org--name"
  std::filesystem::path ref_file;    ///< repo_dir / "refs" / revision ("" when the revision is a commit)
  std::filesystem::path snapshot;    ///< repo_dir / "snapshots" / commit: the checkpoint folder
  /** The repo's name without its namespace ("name"). */
  std::string name() const;
};

/** What a checkpoint argument names. */
struct Source {
  std::string arg;                   ///< as given on the command line
  std::filesystem::path path;        ///< the folder to open: `arg` itself, or the snapshot
  std::optional<HubSnapshot> hub;    ///< set when resolved from the cache
  /** Things to tell the user that do not stop the command: files of the snapshot that link to missing
   * blobs (a partial download; an error only if a command needs one of them). */
  std::vector<std::string> warnings;
};

/**
 * Resolves a checkpoint argument (rules in the file comment). IO when a repo id is not in the cache (no
 * repo folder, no ref, no snapshot), BAD_INPUT for a ref file that does not hold a commit, USAGE for an
 * empty or unsafe `@REVISION` (empty, absolute, `.` or `..` parts).
 */
Result<Source> resolve(std::string_view arg, const EnvLookup& env);
/** resolve() with the process environment. */
Result<Source> resolve(std::string_view arg);

/**
 * The repository folder `.../models--org--name` when `dir` is one of its snapshots
 * (`.../models--org--name/snapshots/<rev>`, after resolving links), else nullopt: the test behind every
 * refusal to write into the cache (doctor --fix, a quantize DST inside the cache).
 */
std::optional<std::filesystem::path> snapshot_repo_dir(const std::filesystem::path& dir);

/** The --json object of a resolution: {repo_id, revision, commit, cache_dir, cache_dir_from, repo_dir,
 * ref_file (null for a commit), snapshot}; null when `hub` is empty (a path was given). */
nlohmann::ordered_json to_json(const std::optional<HubSnapshot>& hub);
/** One line for text output: "org/name@main: Hugging Face cache snapshot PATH (commit C; cache DIR from VAR)". */
std::string to_text(const HubSnapshot& hub);

}  // namespace fp4forge::hf_cache
