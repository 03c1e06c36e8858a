#include "fp4forge/util/hf_cache.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <system_error>

#include <fmt/format.h>

#include "fp4forge/util/did_you_mean.h"
#include "fp4forge/util/fs.h"
#include "fp4forge/util/strings.h"

namespace fp4forge::hf_cache {
namespace {

namespace sfs = std::filesystem;

constexpr std::size_t kMaxNameLength = 96;     // validate_repo_id: repo_name {1,96}
constexpr std::uint64_t kMaxRefFile = 4096;   // a ref holds one commit hash (huggingface_hub: < 1 MB)
constexpr std::size_t kListedNames = 8;       // names listed in one message before "..."

bool is_word(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'; }
bool is_repo_char(char c) { return is_word(c) || c == '-' || c == '.'; }

/** huggingface_hub's REGEX_COMMIT_HASH: ^[0-9a-f]{40}$. */
bool is_commit(std::string_view s) {
  return s.size() == 40 && std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

/** One part of a repo id against REPO_ID_REGEX: `\b[\w\-.]+\b` ("" when it matches). */
std::string part_problem(std::string_view part, const char* what) {
  if (part.empty()) return fmt::format("the {} is empty", what);
  for (char c : part)
    if (!is_repo_char(c))
      return fmt::format("the {} holds '{}'; allowed are letters, digits, '-', '_' and '.'", what,
                         c >= 0x20 && c < 0x7f ? std::string(1, c) : fmt::format("\\x{:02x}", static_cast<unsigned char>(c)));
  if (!is_word(part.front()) || !is_word(part.back()))
    return fmt::format("the {} '{}' starts or ends with '-' or '.'", what, part);
  return {};
}

/** Python's os.path.join(a, b) for a relative `b`. */
std::string py_join(const std::string& a, std::string_view b) {
  if (a.empty() || a.back() == '/') return a + std::string(b);
  return a + "/" + std::string(b);
}

/** The home folder Python's expanduser uses for "~" ($HOME, else the password database). */
std::optional<std::string> home_of(const EnvLookup& env, std::string_view user) {
  if (user.empty()) {
    if (auto h = env("HOME")) return h;
    if (const passwd* pw = ::getpwuid(::getuid()); pw != nullptr && pw->pw_dir != nullptr) return std::string(pw->pw_dir);
    return std::nullopt;
  }
  const std::string name(user);
  if (const passwd* pw = ::getpwnam(name.c_str()); pw != nullptr && pw->pw_dir != nullptr) return std::string(pw->pw_dir);
  return std::nullopt;
}

/** os.path.expanduser (POSIX). */
std::string expanduser(const std::string& path, const EnvLookup& env) {
  if (path.empty() || path.front() != '~') return path;
  std::size_t i = path.find('/', 1);
  if (i == std::string::npos) i = path.size();
  auto home = home_of(env, std::string_view(path).substr(1, i - 1));
  if (!home) return path;
  std::string h = *home;
  while (!h.empty() && h.back() == '/') h.pop_back();
  std::string out = h + path.substr(i);
  return out.empty() ? std::string("/") : out;
}

/** os.path.expandvars (POSIX): `$name` (ASCII word characters) and `${name}` replaced when set, else kept. */
std::string expandvars(std::string path, const EnvLookup& env) {
  std::size_t i = 0;
  while ((i = path.find('$', i)) != std::string::npos) {
    std::size_t j = i + 1;
    std::string name;
    if (j < path.size() && path[j] == '{') {
      const std::size_t close = path.find('}', j + 1);
      if (close == std::string::npos) {
        ++i;
        continue;
      }
      name = path.substr(j + 1, close - j - 1);
      j = close + 1;
    } else {
      while (j < path.size() && is_word(path[j])) ++j;
      if (j == i + 1) {
        ++i;
        continue;
      }
      name = path.substr(i + 1, j - i - 1);
    }
    auto value = env(name);
    if (!value) {
      i = j;
      continue;
    }
    path = path.substr(0, i) + *value + path.substr(j);
    i += value->size();
  }
  return path;
}

std::string expand(const std::string& p, const EnvLookup& env) { return expandvars(expanduser(p, env), env); }

/** A path the user meant as a path even when it does not exist. */
bool path_like(std::string_view a) {
  return a == "." || a == ".." || util::starts_with(a, "/") || util::starts_with(a, "./") ||
         util::starts_with(a, "../") || util::starts_with(a, "~");
}

/** "" when `rev` is safe to join below refs/ (a branch, tag or refs/pr/N), else why not. */
std::string revision_problem(std::string_view rev) {
  if (rev.empty()) return "the revision after '@' is empty";
  if (rev.front() == '/') return "the revision is an absolute path";
  for (char c : rev)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f || c == '\\') return "the revision holds a control character or '\\'";
  for (auto part : util::split(rev, '/'))
    if (part.empty() || part == "." || part == "..") return "the revision has an empty, '.' or '..' part";
  return {};
}

std::string quoted(const std::optional<std::string>& v) { return fmt::format("'{}'", *v); }

/** Up to kListedNames of `names`, joined by ", " ("none" when empty). */
std::string listed(const std::vector<std::string>& names) {
  if (names.empty()) return "none";
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < kListedNames; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > kListedNames) out += fmt::format(", ... ({} in all)", names.size());
  return out;
}

/** The refs under repo/refs (relative names such as "main", "pr/1") and the snapshot folders, sorted. */
std::vector<std::string> cached_refs(const sfs::path& repo) {
  std::vector<std::string> out;
  std::error_code ec;
  const sfs::path refs = repo / "refs";
  for (auto it = sfs::recursive_directory_iterator(refs, ec); !ec && it != sfs::end(it); it.increment(ec))
    if (it->is_regular_file(ec)) out.push_back(it->path().lexically_relative(refs).string());
  std::sort(out.begin(), out.end());
  return out;
}
std::vector<std::string> cached_snapshots(const sfs::path& repo) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = sfs::directory_iterator(repo / "snapshots", ec); !ec && it != sfs::end(it); it.increment(ec))
    if (it->is_directory(ec)) out.push_back(it->path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string download_hint(const std::string& repo, const std::string& rev, bool rev_given) {
  return rev_given ? fmt::format("'hf download {} --revision {}'", repo, rev)
                   : fmt::format("'hf download {}'", repo);
}

}  // namespace

EnvLookup process_env() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

std::string repo_id_problem(std::string_view repo_id) {
  const auto slash = std::count(repo_id.begin(), repo_id.end(), '/');
  if (slash != 1) return "a repo id is NAMESPACE/NAME, with exactly one '/'";
  const std::size_t s = repo_id.find('/');
  const std::string_view ns = repo_id.substr(0, s), name = repo_id.substr(s + 1);
  if (std::string p = part_problem(ns, "namespace"); !p.empty()) return p;
  if (std::string p = part_problem(name, "name"); !p.empty()) return p;
  if (name.size() > kMaxNameLength) return fmt::format("the name is {} characters, over the {} allowed", name.size(), kMaxNameLength);
  if (repo_id.find("--") != std::string_view::npos || repo_id.find("..") != std::string_view::npos)
    return "'--' and '..' are not allowed in a repo id";
  if (util::ends_with(repo_id, ".git")) return "a repo id cannot end in '.git'";
  return {};
}

CacheDir cache_dir(const EnvLookup& env) {
  // huggingface_hub constants.py, in its order.
  const auto hub = env("HF_HUB_CACHE"), legacy = env("HUGGINGFACE_HUB_CACHE"), home = env("HF_HOME"),
             xdg = env("XDG_CACHE_HOME");
  const std::string default_home = py_join(expanduser("~", env), ".cache");
  const std::string hf_home = expand(home ? *home : py_join(xdg ? *xdg : default_home, "huggingface"), env);
  const std::string legacy_cache = legacy ? *legacy : py_join(hf_home, "hub");
  std::string dir = expand(hub ? *hub : legacy_cache, env);
  CacheDir c;
  c.dir = dir.empty() ? sfs::path(".") : sfs::path(dir);  // os.path.join("", x) is x: the current folder
  if (hub) {
    c.chosen_by = "HF_HUB_CACHE";
    c.how = fmt::format("HF_HUB_CACHE={}", quoted(hub));
  } else if (legacy) {
    c.chosen_by = "HUGGINGFACE_HUB_CACHE";
    c.how = fmt::format("HF_HUB_CACHE unset, HUGGINGFACE_HUB_CACHE={}", quoted(legacy));
  } else if (home) {
    c.chosen_by = "HF_HOME";
    c.how = fmt::format("HF_HUB_CACHE and HUGGINGFACE_HUB_CACHE unset, HF_HOME={} + '/hub'", quoted(home));
  } else if (xdg) {
    c.chosen_by = "XDG_CACHE_HOME";
    c.how = fmt::format("HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE and HF_HOME unset, XDG_CACHE_HOME={} + '/huggingface/hub'",
                        quoted(xdg));
  } else {
    c.chosen_by = "default";
    c.how = "HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE, HF_HOME and XDG_CACHE_HOME unset: the default ~/.cache/huggingface/hub";
  }
  return c;
}

std::string HubSnapshot::name() const {
  const std::size_t s = repo_id.find('/');
  return s == std::string::npos ? repo_id : repo_id.substr(s + 1);
}

Result<Source> resolve(std::string_view arg_view, const EnvLookup& env) {
  Source src;
  src.arg = std::string(arg_view);
  src.path = src.arg;
  const std::string& arg = src.arg;
  std::error_code ec;
  // Rule 1 and 2: whatever exists, and whatever reads as a path, is a path (existing behaviour).
  if (arg.empty() || sfs::exists(sfs::symlink_status(src.path, ec)) || path_like(arg)) return src;
  const std::size_t at = arg.find('@');
  const std::string repo = arg.substr(0, at);
  // Rule 4: not the shape NAMESPACE/NAME[@REVISION]: a path (Checkpoint::open reports it missing).
  if (std::count(repo.begin(), repo.end(), '/') != 1) return src;
  if (const std::string why = repo_id_problem(repo); !why.empty())
    return Error{Errc::IO,
                 fmt::format("cannot open checkpoint '{}': No such file or directory; not a Hugging Face repo id "
                             "either ({}), so the cache was not searched",
                             arg, why),
                 arg,
                 {}};
  const bool rev_given = at != std::string::npos;
  const std::string rev = rev_given ? arg.substr(at + 1) : std::string("main");
  if (const std::string why = revision_problem(rev); !why.empty())
    return make_error(Errc::USAGE, "'{}': {}; expected NAMESPACE/NAME[@REVISION] with a branch, tag or commit", arg, why);

  HubSnapshot h;
  h.repo_id = repo;
  h.revision = rev;
  const CacheDir cache = cache_dir(env);
  h.cache_dir = cache.dir;
  h.cache_dir_from = cache.chosen_by;
  const std::size_t s = repo.find('/');
  h.repo_dir = cache.dir / fmt::format("models--{}--{}", repo.substr(0, s), repo.substr(s + 1));
  const std::string hint = download_hint(repo, rev, rev_given);
  const std::string head = fmt::format("'{}' is no local folder, and not in the Hugging Face cache", arg);
  auto io = [&](std::string msg, const sfs::path& file) { return Error{Errc::IO, std::move(msg), file.string(), {}}; };

  if (!sfs::is_directory(cache.dir, ec))
    return io(fmt::format("{}: the cache folder '{}' does not exist ({}); hint: download it with {}, or set "
                          "HF_HUB_CACHE to the cache that holds it",
                          head, cache.dir.string(), cache.how, hint),
              cache.dir);
  if (!sfs::is_directory(h.repo_dir, ec)) {
    // The cached repo ids: one spelled another way (the Hub matches ids case-insensitively, the cache folder as
    // downloaded: qwen/qwen3-8b for Qwen/Qwen3-8B) or one a typo away is named first (issue 55: it offered a
    // download of what the cache holds).
    std::vector<std::string> cached;
    for (sfs::directory_iterator it(cache.dir, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string n = it->path().filename().string();
      const std::size_t sep = n.find("--", 8);
      if (n.rfind("models--", 0) == 0 && sep != std::string::npos && cached.size() < 10'000)
        cached.push_back(n.substr(8, sep - 8) + "/" + n.substr(sep + 2));
    }
    std::string near;
    for (const std::string& c : cached)
      if (util::ascii_lower(c) == util::ascii_lower(repo)) near = c;
    if (near.empty()) near = util::nearest(repo, cached);
    if (!near.empty())
      return io(fmt::format("{}: no repo folder '{}' ({}), but the cache holds '{}'; hint: name it as cached, {}{}",
                            head, h.repo_dir.string(), cache.how, near, near,
                            rev_given ? "@" + rev : std::string()),
                h.repo_dir);
    return io(fmt::format("{}: no repo folder '{}' ({}); hint: download it with {}, or set HF_HUB_CACHE to the "
                          "cache that holds it",
                          head, h.repo_dir.string(), cache.how, hint),
              h.repo_dir);
  }

  // Which commit: a 40-hex revision is one (huggingface_hub checks this first), else refs/<revision>.
  if (is_commit(rev)) {
    h.commit = rev;
  } else {
    h.ref_file = h.repo_dir / "refs" / rev;
    if (!sfs::is_regular_file(h.ref_file, ec))
      return io(fmt::format("{} at revision '{}': no ref file '{}' (cached refs: {}; snapshots: {}); hint: download "
                            "it with {}, or name a snapshot by its commit, {}@<40-hex commit>",
                            head, rev, h.ref_file.string(), listed(cached_refs(h.repo_dir)),
                            listed(cached_snapshots(h.repo_dir)), download_hint(repo, rev, true), repo),
                h.ref_file);
    auto text = fs::read_file(h.ref_file, kMaxRefFile);
    if (!text) return with_file(std::move(text).error(), h.ref_file.string());
    // huggingface_hub writes the bare hash; a trailing newline (a hand-written ref) is tolerated.
    const std::string_view commit = util::trim(std::string_view(*text).substr(0, text->find_last_not_of("\n") + 1));
    if (!is_commit(commit))
      return Error{Errc::BAD_INPUT,
                   fmt::format("{}: holds {} bytes that are not a 40-hex commit hash, expected the commit of revision "
                               "'{}'; hint: the cache entry is damaged: download it again with {}",
                               h.ref_file.string(), text->size(), rev, download_hint(repo, rev, true)),
                   h.ref_file.string(),
                   {}};
    h.commit = std::string(commit);
  }
  h.snapshot = h.repo_dir / "snapshots" / h.commit;
  if (!sfs::is_directory(h.snapshot, ec))
    return io(fmt::format("{}: no snapshot '{}' ({}; snapshots present: {}); hint: a removed or unfinished "
                          "download: download it again with {}",
                          head, h.snapshot.string(),
                          h.ref_file.empty() ? fmt::format("commit {} given", h.commit)
                                             : fmt::format("ref '{}' names commit {}", h.ref_file.string(), h.commit),
                          listed(cached_snapshots(h.repo_dir)), hint),
              h.snapshot);

  // A partial download leaves links to blobs that never arrived: say so now; an error only where a command
  // needs one of those files (Checkpoint::open for shards, config and index).
  std::vector<std::string> dangling;
  for (auto it = sfs::directory_iterator(h.snapshot, ec); !ec && it != sfs::end(it); it.increment(ec)) {
    std::error_code e2;
    if (it->is_symlink(e2) && !sfs::exists(it->path(), e2)) dangling.push_back(it->path().filename().string());
  }
  std::sort(dangling.begin(), dangling.end());
  if (!dangling.empty())
    src.warnings.push_back(fmt::format("{}@{}: {} file(s) of snapshot '{}' link to blobs missing from the cache: {} "
                                       "(an unfinished download?); hint: {} completes it",
                                       repo, rev, dangling.size(), h.snapshot.string(), listed(dangling), hint));
  src.path = h.snapshot;
  src.hub = std::move(h);
  return src;
}

Result<Source> resolve(std::string_view arg) { return resolve(arg, process_env()); }

std::optional<sfs::path> snapshot_repo_dir(const sfs::path& dir) {
  std::error_code ec;
  sfs::path p = sfs::weakly_canonical(sfs::absolute(dir, ec), ec);
  if (ec) p = sfs::absolute(dir, ec).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();  // a trailing '/'
  const sfs::path snaps = p.parent_path();
  if (snaps.filename() != "snapshots" || p.filename().empty()) return std::nullopt;
  const sfs::path repo = snaps.parent_path();
  if (!util::starts_with(repo.filename().string(), "models--")) return std::nullopt;
  return repo;
}

nlohmann::ordered_json to_json(const std::optional<HubSnapshot>& hub) {
  if (!hub) return nullptr;
  nlohmann::ordered_json j;
  j["repo_id"] = hub->repo_id;
  j["revision"] = hub->revision;
  j["commit"] = hub->commit;
  j["cache_dir"] = hub->cache_dir.string();
  j["cache_dir_from"] = hub->cache_dir_from;
  j["repo_dir"] = hub->repo_dir.string();
  j["ref_file"] = hub->ref_file.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(hub->ref_file.string());
  j["snapshot"] = hub->snapshot.string();
  return j;
}

std::string to_text(const HubSnapshot& hub) {
  return fmt::format("{}@{}: Hugging Face cache snapshot '{}' (commit {}; cache '{}' from {})", hub.repo_id,
                     hub.revision, hub.snapshot.string(), hub.commit, hub.cache_dir.string(), hub.cache_dir_from);
}

}  // namespace fp4forge::hf_cache
