// The resume manifest of quantize (manifest.h).
#include "fp4forge/quantize/manifest.h"

#include "fp4forge/safetensors/checkpoint.h"

#include <memory>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <xxhash.h>

#include "fp4forge/util/fs.h"

namespace fp4forge::quant {
namespace stdfs = std::filesystem;

Result<std::uint64_t> file_digest(const stdfs::path& path) {
  FP4FORGE_ASSIGN_OR_RETURN(fs::File f, fs::File::open_read(path));
  FP4FORGE_ASSIGN_OR_RETURN(std::uint64_t size, f.size());
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> st(XXH3_createState(), &XXH3_freeState);
  if (!st || XXH3_64bits_reset(st.get()) != XXH_OK)
    return make_error(Errc::INTERNAL, "cannot start an XXH3 digest of '{}'", path.string());
  std::vector<std::byte> buf(static_cast<std::size_t>(std::min<std::uint64_t>(size, 4u << 20)));
  for (std::uint64_t off = 0; off < size;) {
    const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(buf.size(), size - off));
    FP4FORGE_TRY(f.pread_all(std::span<std::byte>(buf.data(), n), off));
    (void)XXH3_64bits_update(st.get(), buf.data(), n);
    off += n;
  }
  return static_cast<std::uint64_t>(XXH3_64bits_digest(st.get()));
}

std::uint64_t plan_fingerprint(const Checkpoint& src, const QuantPlan& plan) {
  std::string s = plan.config_text + plan.index_text;
  for (const auto& sh : plan.shards) s += sh.name + "\n" + sh.layout.header_bytes;
  // Which FP8 weights are passed through rather than re-encoded (--requantize-fp8) changes bytes, not headers.
  for (const auto& u : plan.units)
    if (u.passthrough) s += "passthrough:" + u.module + "\n";
  for (const auto& name : src.shard_names()) {
    const auto st = fs::file_stamp(src.dir() / name);
    s += fmt::format("{}:{}:{}\n", name, st ? st->size : 0, st ? st->mtime_ns : 0);
  }
  return XXH3_64bits(s.data(), s.size());
}

std::vector<std::string> recorded_shard_names(const stdfs::path& staging_dir) {
  std::vector<std::string> out;
  auto text = fs::read_file(staging_dir / ResumeManifest::kFileName, 64u << 20);
  if (!text) return out;
  auto parsed = parse_json_bounded(*text, "resume manifest");
  if (!parsed.ok() || !parsed->is_object()) return out;
  const auto it = parsed->find("shards");
  if (it == parsed->end() || !it->is_object()) return out;
  for (const auto& [k, v] : it->items())
    if (v.is_object()) out.push_back(k);
  return out;
}

bool ResumeManifest::load_previous(std::vector<std::string>& warnings) {
  const stdfs::path p = dir_ / kFileName;
  std::error_code ec;
  if (!stdfs::exists(p, ec)) return true;
  auto text = fs::read_file(p, 64u << 20);
  if (!text) {
    warnings.push_back("--resume: cannot read the resume manifest; redoing every shard");
    return true;
  }
  // The house JSON reader (bounded depth, a duplicate key refused); what it cannot read is a damaged manifest.
  auto parsed = parse_json_bounded(*text, "resume manifest");
  const nlohmann::ordered_json j = parsed.ok() ? std::move(parsed).value() : nlohmann::ordered_json();
  // A hand-edited or damaged manifest must not throw: every field is type-checked before use.
  const auto plan_it = j.is_object() ? j.find("plan") : j.end();
  if (!j.is_object() || plan_it == j.end() || !plan_it->is_string()) {
    warnings.push_back("--resume: the resume manifest is damaged (no plan fingerprint); redoing every shard");
    return true;
  }
  // Another source or plan (tryout N-M3: a typo in SRC or a changed option under --resume deleted hours of shards
  // with a warning): said to the caller, which refuses.
  if (plan_it->get<std::string>() != fmt::format("{:016x}", fingerprint_)) return false;
  if (!j.contains("shards") || !j["shards"].is_object()) return true;
  for (auto& [k, v] : j["shards"].items()) {
    if (!v.is_object()) continue;
    const auto size = v.find("size");
    const auto digest = v.find("digest");
    if (size == v.end() || !size->is_number_unsigned() || digest == v.end() || !digest->is_string()) continue;
    ManifestEntry e;
    e.size = size->get<std::uint64_t>();
    try {
      e.digest = std::stoull(digest->get<std::string>(), nullptr, 16);
    } catch (...) {
      continue;
    }
    previous_[k] = e;
  }
  return true;
}

const ManifestEntry* ResumeManifest::previous(const std::string& shard) const {
  const auto it = previous_.find(shard);
  return it == previous_.end() ? nullptr : &it->second;
}

void ResumeManifest::keep(const std::string& shard, ManifestEntry e) {
  std::lock_guard lk(mu_);
  current_[shard] = e;
}

Status ResumeManifest::record(const std::string& shard, ManifestEntry e) {
  std::lock_guard lk(mu_);
  current_[shard] = e;
  // Written as text, as nlohmann's dump(1) lays it out, not through a json object: this runs on a worker thread,
  // and a json object's destructor allocates, so a std::bad_alloc unwinding through one (ulimit -v) would be
  // std::terminate instead of exit 5 with the staging folder kept. A name is escaped as a json string.
  std::string text = fmt::format("{{\n \"plan\": \"{:016x}\",\n \"shards\": {{", fingerprint_);
  const char* sep = "\n";
  for (const auto& [k, v] : current_) {
    text += fmt::format("{}  {}: {{\n   \"digest\": \"{:016x}\",\n   \"size\": {}\n  }}", sep,
                        nlohmann::json(k).dump(), v.digest, v.size);
    sep = ",\n";
  }
  text += current_.empty() ? "}\n}" : "\n }\n}";
  return fs::write_file_atomic(dir_ / kFileName, text);
}


}  // namespace fp4forge::quant
