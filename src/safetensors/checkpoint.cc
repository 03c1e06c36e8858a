#include "fp4forge/safetensors/checkpoint.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <system_error>
#include <unordered_map>
#include <variant>

#include "fp4forge/safetensors/shard_writer.h"
#include "fp4forge/util/format.h"
#include "fp4forge/util/fs.h"
#include "fp4forge/util/strings.h"
#include "strict_json.h"

namespace fp4forge {
namespace {

namespace sfs = std::filesystem;
using ojson = nlohmann::ordered_json;
using json = nlohmann::json;

constexpr std::uint64_t kMaxJsonFile = 256ull << 20;  // config / index files
constexpr std::string_view kIndexSuffix = ".safetensors.index.json";
constexpr std::string_view kShardSuffix = ".safetensors";

using util::ends_with;

Error bad(std::string file, std::string tensor, std::string msg) {
  return Error{Errc::BAD_INPUT, std::move(msg), std::move(file), std::move(tensor)};
}

// True if `p` (absolute, normalized) lies inside directory `d` (absolute, normalized).
bool inside(const sfs::path& p, const sfs::path& d) {
  auto pi = p.begin();
  for (auto di = d.begin(); di != d.end(); ++di, ++pi) {
    if (di->empty()) continue;  // trailing separator
    if (pi == p.end() || *pi != *di) return false;
  }
  return pi != p.end();
}

// A shard name taken from an index must be a plain file name inside the directory.
Status check_shard_name(const sfs::path& dir, const std::string& index_path, const std::string& tensor,
                        const std::string& shard) {
  const std::string shown = st::detail::printable(shard);
  if (shard.empty())
    return bad(index_path, tensor,
               fmt::format("{}: tensor '{}': shard name is empty; expected a file name such as "
                           "\"model-00001-of-00002.safetensors\"",
                           index_path, st::detail::printable(tensor)));
  if (shard.front() == '/')
    return bad(index_path, tensor,
               fmt::format("{}: tensor '{}': shard name '{}' is an absolute path; shard names must be "
                           "plain file names inside the checkpoint directory",
                           index_path, st::detail::printable(tensor), shown));
  if (shard.find('/') != std::string::npos || shard == "." || shard == ".." ||
      shard.find('\0') != std::string::npos)
    return bad(index_path, tensor,
               fmt::format("{}: tensor '{}': shard name '{}' is not a plain file name (path "
                           "separators and '..' are refused); refusing to leave the checkpoint directory",
                           index_path, st::detail::printable(tensor), shown));
  (void)dir;
  return {};
}

/** A link inside `dir` must resolve inside it (or, for a Hugging Face cache snapshot, inside the same
 * repository's blobs folder); "" when `p` is no link or is confined, else why not. */
std::string link_escape(const sfs::path& dir, const sfs::path& p, const std::string& what) {
  std::error_code ec;
  auto st = sfs::symlink_status(p, ec);
  if (ec || !sfs::is_symlink(st)) return {};
  sfs::path target = sfs::canonical(p, ec);
  if (ec) return fmt::format("{} is a symlink that does not resolve: {}", what, ec.message());
  sfs::path cdir = sfs::canonical(dir, ec);
  if (ec) return fmt::format("cannot resolve '{}': {}", dir.string(), ec.message());
  // The Hugging Face hub cache stores snapshots/<rev>/<file> as symlinks to ../../blobs/<hash>;
  // that sibling blobs folder of the same repository is the one place outside allowed.
  const bool hub_blob = cdir.parent_path().filename() == "snapshots" &&
                        inside(target, cdir.parent_path().parent_path() / "blobs");
  if (inside(target, cdir) || hub_blob) return {};
  return fmt::format("{} is a symlink to '{}', outside the checkpoint directory '{}'", what,
                     st::detail::printable(target.string()), cdir.string());
}

// A shard file (named by the index or found in the directory) must resolve inside the directory.
Status check_shard_file(const sfs::path& dir, const std::string& who, const std::string& shard) {
  const sfs::path p = dir / shard;
  std::error_code ec;
  auto st = sfs::symlink_status(p, ec);
  if (ec || !sfs::exists(st))
    return bad(who, {},
               fmt::format("{}: shard '{}' does not exist in '{}'; missing download or stale index?", who,
                           st::detail::printable(shard), dir.string()));
  if (const std::string why = link_escape(dir, p, fmt::format("shard '{}'", st::detail::printable(shard)));
      !why.empty())
    return bad(who, {}, fmt::format("{}: {}{}", who, why, why.find(", outside ") != std::string::npos ? "; refusing" : ""));
  if (!sfs::is_regular_file(p, ec))
    return bad(who, {},
               fmt::format("{}: shard '{}' is not a regular file", who, st::detail::printable(shard)));
  return {};
}

}  // namespace

namespace {
template <typename Json>
Result<Json> parse_bounded(std::string_view text, std::string_view source, std::size_t max_depth) {
  const std::string src(source);
  if (text.size() > kMaxJsonFile)
    return bad(src, {},
               fmt::format("{}: JSON is {} bytes, over the {}-byte limit", src, text.size(),
                           kMaxJsonFile));
  auto parsed = st::detail::parse_strict<Json>(text, max_depth);
  if (auto* issue = std::get_if<st::detail::JsonIssue>(&parsed)) {
    switch (issue->kind) {
      case st::detail::JsonIssue::Kind::SYNTAX:
        return bad(src, {}, fmt::format("{}: invalid JSON: {}", src, issue->detail));
      case st::detail::JsonIssue::Kind::DEPTH:
        return bad(src, {},
                   fmt::format("{}: JSON is nested deeper than {} levels; refusing", src, max_depth));
      case st::detail::JsonIssue::Kind::DUPLICATE_KEY:
        return bad(src, {},
                   fmt::format("{}: key '{}' appears twice in {}; ambiguous JSON (remove one)", src,
                               st::detail::printable(issue->key),
                               issue->parent.empty()
                                   ? std::string("the top-level object")
                                   : fmt::format("'{}'", st::detail::printable(issue->parent))));
    }
  }
  return std::move(std::get<Json>(parsed));
}

template <typename Json>
Result<Json> read_json_file(const sfs::path& p) {
  FP4FORGE_ASSIGN_OR_RETURN(std::string text, fs::read_file(p, kMaxJsonFile));
  return parse_bounded<Json>(text, p.string(), 64);
}
}  // namespace

Result<ojson> parse_json_bounded(std::string_view text, std::string_view source,
                                 std::size_t max_depth) {
  return parse_bounded<ojson>(text, source, max_depth);
}

const TensorRef* Checkpoint::find(std::string_view name) const noexcept {
  auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                             [](const TensorRef& t, std::string_view n) { return t.name < n; });
  return it != tensors_.end() && it->name == name ? &*it : nullptr;
}

Status Checkpoint::check_unchanged() const {
  for (const auto& sh : shards_) FP4FORGE_TRY(sh.check_unchanged());
  return {};
}

std::span<const std::byte> Checkpoint::data(const TensorRef& t) const noexcept {
  FP4FORGE_CHECK(t.shard < shards_.size() && t.info != nullptr);
  return shards_[t.shard].data(*t.info);
}

std::string Checkpoint::escapes(const std::string& file) const {
  return link_escape(dir_, dir_ / file, fmt::format("'{}'", st::detail::printable(file)));
}

std::uint64_t Checkpoint::total_tensor_bytes() const noexcept {
  std::uint64_t n = 0;
  for (const auto& t : tensors_) n += t.info->nbytes();
  return n;
}

namespace {

/** The index of a checkpoint folder: its file, the shards it names (in order of first mention) and which
 * shard each tensor is listed in, metadata.total_size; without an index, the *.safetensors files. */
struct IndexRead {
  std::optional<std::string> file;
  std::string path;                                   ///< the index's path (empty without one)
  std::vector<std::string> shard_names;
  std::unordered_map<std::string, std::size_t> listed;  ///< tensor name -> shard index
  std::optional<std::uint64_t> total_size;
  std::optional<std::string> bad_total_size;  ///< not a non-negative integer: the value, printable
};

/** The folder's entries that are not directories (links to files too), sorted. */
Result<std::vector<std::string>> list_files(const sfs::path& dir, const std::string& dir_s) {
  // List the directory.
  std::error_code ec;
  if (!sfs::exists(dir, ec))
    return Error{Errc::IO,
                 fmt::format("cannot open checkpoint '{}': {}", dir_s,
                             ec ? ec.message() : std::string("No such file or directory")),
                 dir_s,
                 {}};
  if (!sfs::is_directory(dir, ec))
    return bad(dir_s, {},
               fmt::format("'{}' is not a directory; pass the checkpoint folder (the one holding "
                           "config.json)",
                           dir_s));
  std::vector<std::string> files;
  {
    sfs::directory_iterator it(dir, ec), end;
    if (ec)
      return Error{Errc::IO, fmt::format("cannot list '{}': {}", dir_s, ec.message()), dir_s, {}};
    for (; it != end; it.increment(ec)) {
      if (ec)
        return Error{Errc::IO, fmt::format("cannot list '{}': {}", dir_s, ec.message()), dir_s, {}};
      std::error_code e2;
      // Files and symlinks to files (dangling ones too: reported if used as shards); not directories.
      if (it->is_directory(e2)) continue;
      files.push_back(it->path().filename().string());
    }
  }
  std::sort(files.begin(), files.end());

  return files;
}

Result<IndexRead> read_index(const sfs::path& dir, const std::string& dir_s, const std::vector<std::string>& files) {
  IndexRead ix;
  // Index
  std::vector<std::string> index_files;
  for (const auto& f : files)
    if (ends_with(f, kIndexSuffix)) index_files.push_back(f);
  if (index_files.size() > 1)
    return bad(dir_s, {},
               fmt::format("{}: several index files ({}); keep exactly one", dir_s,
                           st::detail::printable(fmt::format("{}", fmt::join(index_files, ", ")), 1024)));

  if (index_files.size() == 1) {
    ix.file = index_files[0];
    ix.path = (dir / index_files[0]).string();
    // std::map objects: weight_maps of 10^5 tensors stay fast (ordered_json inserts are linear).
    FP4FORGE_ASSIGN_OR_RETURN(json idx, read_json_file<json>(dir / index_files[0]));
    if (!idx.is_object())
      return bad(ix.path, {},
                 fmt::format("{}: top level is {}, expected an object with \"weight_map\"", ix.path,
                             idx.type_name()));
    if (!idx.contains("weight_map"))
      return bad(ix.path, {},
                 fmt::format("{}: no \"weight_map\"; expected {{\"metadata\":{{...}},\"weight_map\":"
                             "{{tensor: shard file}}}}",
                             ix.path));
    const json& wm = idx["weight_map"];
    if (!wm.is_object())
      return bad(ix.path, {},
                 fmt::format("{}: weight_map is {} {}, expected an object of tensor name -> shard file",
                             ix.path, wm.type_name(), st::detail::brief(wm)));
    if (idx.contains("metadata")) {
      const json& md = idx["metadata"];
      if (!md.is_object())
        return bad(ix.path, {},
                   fmt::format("{}: metadata is {} {}, expected an object", ix.path, md.type_name(),
                               st::detail::brief(md)));
      if (md.contains("total_size")) {
        const json& ts = md["total_size"];
        if (ts.is_number_unsigned()) {
          ix.total_size = ts.get<std::uint64_t>();
        } else if (ts.is_number_float() && ts.get<double>() >= 0 && ts.get<double>() < 1.8e19 &&
                   static_cast<double>(static_cast<std::uint64_t>(ts.get<double>())) ==
                       ts.get<double>()) {
          ix.total_size = static_cast<std::uint64_t>(ts.get<double>());  // some writers emit 123.0
        } else {
          ix.bad_total_size = st::detail::brief(ts);
        }
      }
    }
    std::map<std::string, std::size_t> shard_pos;
    for (auto it = wm.begin(); it != wm.end(); ++it) {
      const std::string& tensor = it.key();
      if (!it.value().is_string())
        return bad(ix.path, tensor,
                   fmt::format("{}: weight_map['{}'] is {} {}, expected a shard file name", ix.path,
                               st::detail::printable(tensor), it.value().type_name(),
                               st::detail::brief(it.value())));
      const std::string& shard = it.value().get_ref<const std::string&>();
      auto [pos, inserted] = shard_pos.emplace(shard, ix.shard_names.size());
      if (inserted) {
        FP4FORGE_TRY(check_shard_name(dir, ix.path, tensor, shard));
        ix.shard_names.push_back(shard);
      }
      ix.listed.emplace(tensor, pos->second);
    }
  } else {
    for (const auto& f : files)
      if (ends_with(f, kShardSuffix)) ix.shard_names.push_back(f);
  }

  return ix;
}

/** The shards' tensors against the index, both ways (a tensor in exactly one shard, the one the index
 * names; every listed tensor present), as TensorRefs in shard order. */
Result<std::vector<TensorRef>> match_index(const std::vector<st::ShardReader>& shards, const IndexRead& ix) {
  std::vector<TensorRef> tensors;
  // Agreement, both ways.
  std::unordered_map<std::string_view, std::size_t> seen;  // tensor -> shard holding it
  for (std::size_t s = 0; s < shards.size(); ++s) {
    const auto& r = shards[s];
    for (const auto& t : r.header().tensors) {
      auto [it, inserted] = seen.emplace(t.name, s);
      if (!inserted) {
        std::string msg =
            fmt::format("{}: tensor '{}' is also in shard '{}'; a tensor must be in exactly one shard",
                        r.path(), st::detail::printable(t.name), st::detail::printable(ix.shard_names[it->second]));
        if (ix.file) {
          auto l = ix.listed.find(t.name);
          if (l != ix.listed.end())
            msg += fmt::format(" (the index lists it in '{}')", st::detail::printable(ix.shard_names[l->second]));
        }
        return bad(r.path(), t.name, std::move(msg));
      }
      if (ix.file) {
        auto l = ix.listed.find(t.name);
        if (l == ix.listed.end())
          return bad(r.path(), t.name,
                     fmt::format("{}: tensor '{}' is not listed in {}; index and shards disagree "
                                 "(stale index?)",
                                 r.path(), st::detail::printable(t.name), *ix.file));
        if (l->second != s) {
          // Listed elsewhere: report the shard the index names (which lacks it, or duplicates it).
          const auto& other = shards[l->second];
          if (other.find(t.name))
            return bad(r.path(), t.name,
                       fmt::format("{}: tensor '{}' is also in shard '{}'; a tensor must be in "
                                   "exactly one shard (the index lists it in '{}')",
                                   r.path(), st::detail::printable(t.name),
                                   st::detail::printable(ix.shard_names[l->second]),
                                   st::detail::printable(ix.shard_names[l->second])));
          return bad(ix.path, t.name,
                     fmt::format("{}: tensor '{}' is listed in shard '{}' but found in '{}'; index "
                                 "and shards disagree (stale index?)",
                                 ix.path, st::detail::printable(t.name),
                                 st::detail::printable(ix.shard_names[l->second]),
                                 st::detail::printable(ix.shard_names[s])));
        }
      }
      tensors.push_back(TensorRef{t.name, s, &t});
    }
  }
  if (ix.file) {
    // Listed tensors missing from their shard (in any order: report the smallest name).
    std::vector<std::string_view> missing;
    for (const auto& [name, s] : ix.listed)
      if (!seen.count(name)) missing.push_back(name);
    if (!missing.empty()) {
      auto first = *std::min_element(missing.begin(), missing.end());
      const std::size_t s = ix.listed.at(std::string(first));
      return bad(ix.path, std::string(first),
                 fmt::format("{}: tensor '{}' is listed in shard '{}' but that shard does not contain "
                             "it{}; index and shards disagree (stale index or missing shard?)",
                             ix.path, st::detail::printable(first), st::detail::printable(ix.shard_names[s]),
                             missing.size() > 1
                                 ? fmt::format(" ({} listed tensors missing in all)", missing.size())
                                 : std::string()));
    }
  }
  return tensors;
}

}  // namespace

Result<Checkpoint> Checkpoint::open(const std::filesystem::path& dir, CheckpointOptions opts) {
  Checkpoint ck;
  ck.dir_ = dir;
  const std::string dir_s = dir.string();

  FP4FORGE_ASSIGN_OR_RETURN(std::vector<std::string> files, list_files(dir, dir_s));

  // config.json
  if (std::find(files.begin(), files.end(), "config.json") != files.end()) {
    FP4FORGE_ASSIGN_OR_RETURN(ojson cfg, read_json_file<ojson>(dir / "config.json"));
    if (!cfg.is_object()) {
      const std::string p = (dir / "config.json").string();
      return bad(p, {},
                 fmt::format("{}: top level is {}, expected an object", p, cfg.type_name()));
    }
    ck.config_ = std::move(cfg);
    ck.has_config_ = true;
  } else if (opts.require_config) {
    return bad(dir_s, {},
               fmt::format("{}: no config.json; not a Hugging Face checkpoint folder?", dir_s));
  }

  FP4FORGE_ASSIGN_OR_RETURN(IndexRead ix, read_index(dir, dir_s, files));
  ck.index_file_ = ix.file;
  ck.shard_names_ = ix.shard_names;
  const std::string& index_path = ix.path;
  const std::optional<std::uint64_t>& total_size = ix.total_size;
  const std::optional<std::string>& bad_total_size = ix.bad_total_size;

  // An index that lists nothing while shard files sit beside it is broken even when weights are optional.
  const bool orphan_shards =
      ck.index_file_ && ck.shard_names_.empty() &&
      std::any_of(files.begin(), files.end(), [](const std::string& f) { return ends_with(f, kShardSuffix); });
  if (ck.shard_names_.empty() && (opts.require_weights || orphan_shards))
    return bad(dir_s, {},
               ck.index_file_
                   ? fmt::format("{}: the index lists no tensors; expected at least one shard",
                                 index_path)
                   : fmt::format("{}: no *.safetensors file; only safetensors checkpoints are "
                                 "supported",
                                 dir_s));

  // Open every shard (each header fully validated).
  const std::string who = ck.index_file_ ? index_path : dir_s;
  ck.shards_.reserve(ck.shard_names_.size());
  for (const auto& name : ck.shard_names_) {
    FP4FORGE_TRY(check_shard_file(dir, who, name));
    FP4FORGE_ASSIGN_OR_RETURN(st::ShardReader r, st::ShardReader::open(dir / name));
    ck.shards_.push_back(std::move(r));
  }

  FP4FORGE_ASSIGN_OR_RETURN(ck.tensors_, match_index(ck.shards_, ix));
  std::sort(ck.tensors_.begin(), ck.tensors_.end(),
            [](const TensorRef& a, const TensorRef& b) { return a.name < b.name; });

  // transformers and vLLM never read metadata.total_size; a wrong one is worth a warning, not a refusal.
  if (bad_total_size || (total_size && *total_size != ck.total_tensor_bytes()))
    ck.notes_.push_back(
        {.kind = &finding_kind("index-total-size"),
         .message = fmt::format("{}: metadata.total_size is {}, but the shards hold {} tensor bytes (stale or "
                                "hand-edited index); ignored, as transformers and vLLM do; 'fp4forge doctor --fix' "
                                "rewrites it",
                                index_path, bad_total_size ? *bad_total_size : std::to_string(*total_size),
                                ck.total_tensor_bytes()),
         .key = ck.index_file_.value_or("") + ":metadata.total_size",
         .expected = std::to_string(ck.total_tensor_bytes()),
         .hint = "transformers and vLLM do not read this field; a tool that trusts it (a download-size check, a "
                 "mirror) is misled",
         .fix = fmt::format("set metadata.total_size to {}", ck.total_tensor_bytes())});

  // Other files: everything that is not a shard and not the index.
  std::set<std::string> shard_set(ck.shard_names_.begin(), ck.shard_names_.end());
  for (const auto& f : files) {
    if (shard_set.count(f)) continue;
    if (ck.index_file_ && f == *ck.index_file_) continue;
    ck.other_files_.push_back(f);
    // A safetensors file beside an index that does not name it: vLLM keeps only the files the index's weight_map
    // names (filter_duplicate_safetensors_files, vLLM v0.9.0 model_executor/model_loader/weight_utils.py, made for
    // Mistral's consolidated.safetensors), and transformers loads the index's shards only.
    if (ck.index_file_ && ends_with(f, kShardSuffix))
      ck.notes_.push_back(
          {.kind = &finding_kind("shard-not-in-index"),
           .message = fmt::format("'{}' is a safetensors file that {} does not name: vLLM and transformers load "
                                  "only the shards the index names, so its tensors are never loaded",
                                  st::detail::printable(f), *ck.index_file_),
           .key = f,
           .hint = "a consolidated copy (Mistral's consolidated.safetensors) or a leftover of an older export: "
                   "remove it if it is a leftover, or rebuild the index if its tensors belong to the model; "
                   "quantize does not copy it",
           .fix = {}});
  }
  return ck;
}

Result<Checkpoint> Checkpoint::from_memory(ojson config, std::vector<MemoryTensor> tensors, std::filesystem::path label) {
  if (!config.is_object())
    return bad(label.string(), {}, fmt::format("{}: config is {}, expected an object", label.string(), config.type_name()));
  std::vector<st::OutTensor> outs;
  outs.reserve(tensors.size());
  for (const auto& t : tensors) outs.push_back({t.name, t.dtype, t.shape});
  FP4FORGE_ASSIGN_OR_RETURN(st::ShardLayout layout, st::layout_shard(std::move(outs), {{"format", "pt"}}));
  std::vector<std::byte> buf(static_cast<std::size_t>(layout.file_size));
  std::memcpy(buf.data(), layout.header_bytes.data(), layout.header_bytes.size());
  for (const auto& t : tensors) {
    const st::TensorInfo* info = layout.find(t.name);
    FP4FORGE_CHECK(info != nullptr);
    if (t.bytes.size() != info->nbytes())
      return bad(label.string(), t.name,
                 fmt::format("{}: tensor '{}' has {} bytes, expected {} for {} {}", label.string(),
                             st::detail::printable(t.name), t.bytes.size(), info->nbytes(), dtype_name(t.dtype),
                             format_shape(t.shape)));
    if (!t.bytes.empty()) std::memcpy(buf.data() + layout.header_bytes.size() + info->begin, t.bytes.data(), t.bytes.size());
  }
  Checkpoint ck;
  ck.dir_ = std::move(label);
  ck.config_ = std::move(config);
  ck.has_config_ = true;
  ck.shard_names_ = {"model.safetensors"};
  FP4FORGE_ASSIGN_OR_RETURN(st::ShardReader r, st::ShardReader::from_buffer(std::move(buf), "model.safetensors"));
  ck.shards_.push_back(std::move(r));
  IndexRead ix;
  ix.shard_names = ck.shard_names_;
  FP4FORGE_ASSIGN_OR_RETURN(ck.tensors_, match_index(ck.shards_, ix));
  std::sort(ck.tensors_.begin(), ck.tensors_.end(),
            [](const TensorRef& a, const TensorRef& b) { return a.name < b.name; });
  return ck;
}

bool holds_weight_files(const std::filesystem::path& dir) {
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(dir, ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec))
    if (ends_with(it->path().filename().string(), kShardSuffix) ||
        it->path().filename() == "model.safetensors.index.json")
      return true;
  return false;
}

}  // namespace fp4forge
