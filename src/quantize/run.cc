#include "fp4forge/quantize/run.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>

#include <fmt/format.h>

#include "fp4forge/codec/nvfp4.h"
#include "fp4forge/quantize/manifest.h"
#include "fp4forge/quantize/staging.h"
#include "fp4forge/util/backup.h"
#include "fp4forge/util/fs.h"
#include "fp4forge/util/thread_pool.h"

namespace fp4forge::quant {
namespace stdfs = std::filesystem;
namespace {


// ---- file helpers ---------------------------------------------------------------------------------

std::uint64_t peak_rss_bytes() {
  struct rusage ru{};
  if (::getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return static_cast<std::uint64_t>(ru.ru_maxrss) * 1024;
}

// ---- side files ----

}  // namespace

std::string side_file_skip_reason(std::string_view name) {
  if (backup::is_backup_name(name))
    return "a backup written by fp4forge doctor --fix or gateway";
  // fs::AtomicFile temporaries: NAME.partial, NAME.partial-XXXXXXXX (not any name holding ".partial").
  if (name.ends_with(".partial") || name.find(".partial-") != std::string_view::npos) return "an unfinished temporary file";
  for (std::string_view ext : {".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".gguf", ".onnx", ".pkl", ".npz"})
    if (name.ends_with(ext))
      return "a weight or pickle file of another format: the output's weights are its safetensors shards";
  return {};
}

namespace {

// ---- the run --------------------------------------------------------------------------------------

class Runner {
 public:
  Runner(const Checkpoint& ck, const QuantPlan& plan, const RunOptions& opts)
      : ck_(ck), plan_(plan), opts_(opts), pool_(opts.jobs), budget_(opts.max_memory) {}

  Result<RunSummary> run(const stdfs::path& dst);

 private:
  struct Slot {  // per output shard
    std::optional<st::ShardWriter> writer;
    std::atomic<std::uint64_t> remaining{0};
    bool resumed = false;
  };
  struct BigGroup {
    std::mutex mu;
    float amax = 0.0f;
    std::atomic<std::size_t> pending{0};
  };

  void fail(Error e) {
    std::lock_guard lk(err_mu_);
    if (!err_) err_ = std::move(e);
    stop_.store(true);
    cv_.notify_all();
  }
  bool stopped() const { return stop_.load(std::memory_order_relaxed); }

  /** Rows [r0, r1) of unit `u` as a contiguous view: into the mapping when the unit's slice is contiguous,
   * else gathered into `buf` (a transposed or interleaved fused expert). Row 0 of the view is row r0. */
  nvfp4::WeightView rows_view(const QuantUnit& u, std::uint64_t r0, std::uint64_t r1,
                              std::vector<std::byte>& buf) const {
    const TensorRef* t = refs_[u.decision];
    const std::size_t es = dtype_bits(u.dtype) / 8;
    const std::byte* base = ck_.data(*t).data();
    if (u.slice.contiguous()) return {base + (u.slice.offset + r0 * u.slice.row_stride) * es, u.dtype, r1 - r0, u.cols};
    buf.resize(static_cast<std::size_t>((r1 - r0) * u.cols * es));
    gather_rows(base, es, u.slice, r0, r1, buf.data());
    return {buf.data(), u.dtype, r1 - r0, u.cols};
  }
  /** Drops rows [r0, r1) of unit `u` from the page cache (contiguous slices only; a strided slice shares
   * its pages with the other parts of the fused tensor). */
  void release_rows(const QuantUnit& u, std::uint64_t r0, std::uint64_t r1) const {
    if (!u.slice.contiguous()) return;
    release(u.decision, (u.slice.offset + r0 * u.slice.row_stride) * (dtype_bits(u.dtype) / 8),
            (r1 - r0) * row_bytes(u));
  }
  std::string unit_name(const QuantUnit& u) const {
    const auto& d = plan_.decisions[u.decision];
    if (d.action == Action::SPLIT) return fmt::format("{} (as {})", d.name, u.module);
    return d.name;
  }
  void release(std::size_t decision, std::uint64_t off, std::uint64_t len) const {
    const TensorRef* t = refs_[decision];
    st::TensorInfo r = *t->info;
    r.begin = t->info->begin + off;
    r.end = r.begin + len;
    ck_.shards()[t->shard].release(r);
  }
  std::uint64_t row_bytes(const QuantUnit& u) const { return u.cols * (dtype_bits(u.dtype) / 8); }
  std::uint64_t out_row_bytes(const QuantUnit& u) const { return u.cols / 2 + u.cols / nvfp4::kGroupSize; }

  Status write(std::size_t shard, std::uint64_t off, std::span<const std::byte> bytes);
  void shard_finished(std::size_t shard);
  Status write_unit_rows(std::size_t ui, float gs, std::uint64_t r0, std::uint64_t r1);
  Status write_gs(std::size_t ui, float gs);

  const Checkpoint& ck_;
  const QuantPlan& plan_;
  RunOptions opts_;
  ThreadPool pool_;
  ByteBudget budget_;
  std::vector<const TensorRef*> refs_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::unique_ptr<ProgressScope> progress_;
  std::atomic<bool> stop_{false};
  std::mutex err_mu_;
  std::optional<Error> err_;
  std::mutex cv_mu_;
  std::condition_variable cv_;
  std::deque<std::size_t> ready_;  // big groups whose amax pass finished
  Staging staging_;
  std::optional<ResumeManifest> manifest_;  // from the moment the staging folder is ours
  std::vector<std::string> warnings_;
  std::atomic<std::size_t> shards_written_{0};
};

Status Runner::write(std::size_t shard, std::uint64_t off, std::span<const std::byte> bytes) {
  Slot& s = *slots_[shard];
  if (bytes.empty()) return {};
  FP4FORGE_TRY(s.writer->write_at(off, bytes));
  if (s.remaining.fetch_sub(bytes.size()) == bytes.size()) shard_finished(shard);
  return {};
}

void Runner::shard_finished(std::size_t shard) {
  Slot& s = *slots_[shard];
  const std::string& name = plan_.shards[shard].name;
  if (stopped()) return;
  if (Status st = s.writer->commit(); !st) return fail(std::move(st).error());
  auto dg = file_digest(staging_.dir() / name);
  if (!dg) return fail(std::move(dg).error());
  if (Status st = manifest_->record(name, {plan_.shards[shard].layout.file_size, *dg}); !st)
    return fail(std::move(st).error());
  shards_written_.fetch_add(1);
  if (progress_) progress_->set_detail(name);
}

Status Runner::write_gs(std::size_t ui, float gs) {
  const QuantUnit& u = plan_.units[ui];
  if (slots_[u.shard]->resumed) return {};
  std::array<std::byte, 4> b{};
  std::memcpy(b.data(), &gs, 4);  // little-endian host (x86-64 / aarch64)
  return write(u.shard, u.global_scale_begin, b);
}

Status Runner::write_unit_rows(std::size_t ui, float gs, std::uint64_t r0, std::uint64_t r1) {
  const QuantUnit& u = plan_.units[ui];
  const std::uint64_t pk = u.cols / 2, sk = u.cols / nvfp4::kGroupSize, n = r1 - r0;
  std::vector<std::byte> packed(static_cast<std::size_t>(n * pk)), scale(static_cast<std::size_t>(n * sk));
  std::vector<std::byte> buf;
  FP4FORGE_TRY(nvfp4::encode_rows(rows_view(u, r0, r1, buf), gs, 0, n, packed.data(), scale.data(), unit_name(u)));
  FP4FORGE_TRY(write(u.shard, u.packed_begin + r0 * pk, packed));
  FP4FORGE_TRY(write(u.shard, u.scale_begin + r0 * sk, scale));
  return {};
}

Result<RunSummary> Runner::run(const stdfs::path& dst) {
  const auto t0 = std::chrono::steady_clock::now();
  RunSummary sum;
  sum.source = ck_.dir().string();
  sum.destination = dst.string();
  sum.scheme = plan_.scheme;
  sum.jobs = pool_.size();
  sum.max_memory = budget_.limit();
  warnings_ = plan_.warnings;

  if (plan_.shards.size() != ck_.shard_names().size())
    return make_error(Errc::INTERNAL, "plan has {} shards, checkpoint {}", plan_.shards.size(), ck_.shard_names().size());
  refs_.resize(plan_.decisions.size());
  for (std::size_t i = 0; i < plan_.decisions.size(); ++i) {
    refs_[i] = ck_.find(plan_.decisions[i].name);
    if (!refs_[i] || refs_[i]->shard != plan_.decisions[i].shard || refs_[i]->info->shape != plan_.decisions[i].shape)
      return make_error(Errc::INTERNAL, "plan does not match the checkpoint at tensor '{}'", plan_.decisions[i].name);
  }
  // Source stamps (checked again at the end).
  std::vector<std::pair<stdfs::path, std::optional<fs::FileStamp>>> stamps;
  for (const auto& n : ck_.shard_names()) stamps.emplace_back(ck_.dir() / n, fs::file_stamp(ck_.dir() / n));
  for (const auto& n : ck_.other_files()) stamps.emplace_back(ck_.dir() / n, fs::file_stamp(ck_.dir() / n));
  if (ck_.index_file()) stamps.emplace_back(ck_.dir() / *ck_.index_file(), fs::file_stamp(ck_.dir() / *ck_.index_file()));

  const stdfs::path stage = staging_path(dst);
  if (Status st = staging_.open(stage, dst, opts_.resume, warnings_); !st) {
    if (staging_.created()) staging_.remove();
    return std::move(st).error();
  }
  manifest_.emplace(staging_.dir(), plan_fingerprint(ck_, plan_));
  auto cleanup_fail = [&](Error e) -> Result<RunSummary> {
    stop_.store(true);
    pool_.wait_idle();
    // Whatever failed, a source that changed under the run is the reason to report.
    if (Status c = ck_.check_unchanged(); !c) e = std::move(c).error();
    for (auto& s : slots_)
      if (s && s->writer) s->writer->abort();
    if (progress_) progress_->finish();
    staging_.remove();
    return e;
  };
  if (opts_.resume) manifest_->load_previous(warnings_);

  // Shards: reuse verified ones (resume), open writers for the rest.
  slots_.reserve(plan_.shards.size());
  for (std::size_t s = 0; s < plan_.shards.size(); ++s) {
    auto slot = std::make_unique<Slot>();
    const auto& sh = plan_.shards[s];
    const stdfs::path p = stage / sh.name;
    if (const ManifestEntry* prev = manifest_->previous(sh.name)) {
      bool ok = false;
      const auto st = fs::file_stamp(p);
      if (st && st->size == sh.layout.file_size && prev->size == st->size) {
        auto f = fs::File::open_read(p);
        std::string head(sh.layout.header_bytes.size(), '\0');
        if (f && f->pread_all(std::as_writable_bytes(std::span<char>(head.data(), head.size())), 0) &&
            head == sh.layout.header_bytes) {
          auto dg = file_digest(p);
          ok = dg && *dg == prev->digest;
        }
      }
      if (ok) {
        slot->resumed = true;
        manifest_->keep(sh.name, *prev);
        ++sum.shards_resumed;
      } else {
        warnings_.push_back(fmt::format("--resume: staged shard '{}' failed its check; rewriting it", sh.name));
      }
    }
    if (!slot->resumed) {
      if (Status st = fs::remove_tree(p); !st) return cleanup_fail(std::move(st).error());
      auto w = st::ShardWriter::create(p, sh.layout);
      if (!w) return cleanup_fail(std::move(w).error());
      slot->writer.emplace(std::move(*w));
      const std::uint64_t data = sh.layout.tensors.empty() ? 0 : sh.layout.tensors.back().end;
      slot->remaining.store(data);
    }
    slots_.push_back(std::move(slot));
  }
  for (std::size_t s = 0; s < slots_.size(); ++s)
    if (!slots_[s]->resumed && slots_[s]->remaining.load() == 0) shard_finished(s);
  if (err_) return cleanup_fail(*err_);

  // Non-safetensors files first (cheap), from the source, never config.json (written from the plan).
  for (const auto& n : ck_.other_files()) {
    if (n == "config.json" || n == plan_.index_name) continue;
    // A side file linked outside the checkpoint (tokenizer.json -> ~/.ssh/id_rsa) is never copied.
    if (const std::string why = ck_.escapes(n); !why.empty()) {
      warnings_.push_back(fmt::format("not copied: {}", why));
      continue;
    }
    if (const std::string why = side_file_skip_reason(n); !why.empty()) {
      warnings_.push_back(fmt::format("not copied: '{}' ({})", n, why));
      continue;
    }
    if (Status st = fs::copy_file_atomic(ck_.dir() / n, stage / n); !st) return cleanup_fail(std::move(st).error());
    ++sum.files_copied;
  }

  std::uint64_t total_items = 0;
  for (std::size_t s = 0; s < plan_.shards.size(); ++s)
    if (!slots_[s]->resumed) total_items += plan_.shards[s].layout.tensors.size();
  // The bar counts source bytes read (copied or quantized), so its total is the source bytes of the
  // shards still to write: count and total in one unit (it used to total output bytes).
  std::uint64_t total_work = 0;
  for (std::size_t s = 0; s < plan_.shards.size(); ++s) {
    if (slots_[s]->resumed) continue;
    const auto& sh = plan_.shards[s];
    for (std::size_t i = 0; i < sh.layout.tensors.size(); ++i)
      if (sh.sources[i].kind == OutKind::PASSTHROUGH) total_work += sh.layout.tensors[i].nbytes();
  }
  for (const QuantUnit& u : plan_.units)
    if (!slots_[u.shard]->resumed) total_work += u.rows * row_bytes(u);
  progress_ = std::make_unique<ProgressScope>(opts_.progress, "quantize", total_work, total_items);

  // Work sizes: a task touches at most `chunk` bytes (source + output) so that ~2 tasks per worker fit.
  const std::uint64_t chunk = std::max<std::uint64_t>(budget_.limit() / (2 * std::max(1u, pool_.size())), 1);

  // Work list in output order: passthrough chunks and global-scale groups (first time seen).
  struct Item {
    enum Kind { COPY, SMALL_GROUP, BIG_AMAX } kind;
    std::size_t a = 0;        // decision (COPY) or group
    std::size_t shard = 0;    // COPY: output shard
    std::uint64_t off = 0, len = 0, dst_off = 0;  // COPY range
    std::size_t unit = 0;     // BIG_AMAX unit
    std::uint64_t r0 = 0, r1 = 0;
    std::uint64_t cost = 0;
  };
  std::vector<Item> items;
  std::vector<std::unique_ptr<BigGroup>> big(plan_.groups.size());
  std::vector<bool> group_seen(plan_.groups.size(), false);
  std::size_t groups_pending = 0;
  auto group_needed = [&](const ScaleGroup& g) {
    for (auto u : g.units)
      if (!slots_[plan_.units[u].shard]->resumed) return true;
    return false;
  };
  for (std::size_t s = 0; s < plan_.shards.size(); ++s) {
    const auto& sh = plan_.shards[s];
    for (std::size_t i = 0; i < sh.layout.tensors.size(); ++i) {
      const auto& src = sh.sources[i];
      const auto& t = sh.layout.tensors[i];
      if (src.kind == OutKind::PASSTHROUGH) {
        if (slots_[s]->resumed) continue;
        for (std::uint64_t o = 0; o < t.nbytes() || (o == 0 && t.nbytes() == 0); o += chunk) {
          const std::uint64_t len = std::min(chunk, t.nbytes() - o);
          items.push_back({Item::COPY, src.index, s, o, len, t.begin + o, 0, 0, 0, len});
          if (t.nbytes() == 0) break;
        }
        continue;
      }
      const std::size_t g = plan_.units[src.index].group;
      if (group_seen[g]) continue;
      group_seen[g] = true;
      const ScaleGroup& grp = plan_.groups[g];
      if (!group_needed(grp)) continue;
      std::uint64_t cost = 0;
      for (auto u : grp.units)
        cost += plan_.units[u].rows * (row_bytes(plan_.units[u]) + out_row_bytes(plan_.units[u]));
      if (cost <= chunk) {
        items.push_back({Item::SMALL_GROUP, g, 0, 0, 0, 0, 0, 0, 0, cost});
        continue;
      }
      big[g] = std::make_unique<BigGroup>();
      ++groups_pending;
      std::size_t n = 0;
      for (auto u : grp.units) {
        const auto& un = plan_.units[u];
        const std::uint64_t rows_per = std::max<std::uint64_t>(1, chunk / row_bytes(un));
        for (std::uint64_t r = 0; r < un.rows; r += rows_per) {
          const std::uint64_t r1 = std::min(un.rows, r + rows_per);
          items.push_back({Item::BIG_AMAX, g, 0, 0, 0, 0, u, r, r1, (r1 - r) * row_bytes(un)});
          ++n;
        }
      }
      big[g]->pending.store(n);
    }
  }

  auto submit = [&](std::uint64_t cost, std::function<Status()> fn) {
    budget_.acquire(cost);
    pool_.submit([this, cost, fn = std::move(fn)] {
      if (!stopped()) {
        if (Status st = fn(); !st) fail(std::move(st).error());
      }
      budget_.release(cost);
    });
  };

  auto run_small_group = [this](std::size_t g) -> Status {
    const ScaleGroup& grp = plan_.groups[g];
    float amax = 0.0f;
    for (auto u : grp.units) {
      std::vector<std::byte> buf;
      const QuantUnit& un = plan_.units[u];
      FP4FORGE_ASSIGN_OR_RETURN(float a, nvfp4::amax(rows_view(un, 0, un.rows, buf), unit_name(un)));
      amax = std::max(amax, a);
    }
    const float gs = nvfp4::global_scale(amax, plan_.units[grp.units.front()].dtype);
    std::uint64_t bytes = 0;
    for (auto u : grp.units) {
      const QuantUnit& un = plan_.units[u];
      if (!slots_[un.shard]->resumed) {
        FP4FORGE_TRY(write_gs(u, gs));
        FP4FORGE_TRY(write_unit_rows(u, gs, 0, un.rows));
        bytes += un.rows * row_bytes(un);
        progress_->add(0, 3);
      }
      release_rows(un, 0, un.rows);
    }
    progress_->add(bytes);
    return {};
  };

  std::size_t next = 0;
  std::size_t groups_left = groups_pending;
  while (!stopped()) {
    std::optional<std::size_t> g;
    {
      std::lock_guard lk(cv_mu_);
      if (!ready_.empty()) {
        g = ready_.front();
        ready_.pop_front();
      }
    }
    if (g) {
      --groups_left;
      const ScaleGroup& grp = plan_.groups[*g];
      const float gs = nvfp4::global_scale(big[*g]->amax, plan_.units[grp.units.front()].dtype);
      for (auto u : grp.units) {
        const QuantUnit& un = plan_.units[u];
        if (slots_[un.shard]->resumed) continue;
        if (Status st = write_gs(u, gs); !st) {
          fail(std::move(st).error());
          break;
        }
        progress_->add(0, 1);
        const std::uint64_t per_row = row_bytes(un) + out_row_bytes(un);
        const std::uint64_t rows_per = std::max<std::uint64_t>(1, chunk / per_row);
        for (std::uint64_t r = 0; r < un.rows && !stopped(); r += rows_per) {
          const std::uint64_t r1 = std::min(un.rows, r + rows_per);
          const bool last = r1 == un.rows;
          submit((r1 - r) * per_row, [this, u, gs, r, r1, last]() -> Status {
            const QuantUnit& q = plan_.units[u];
            FP4FORGE_TRY(write_unit_rows(u, gs, r, r1));
            release_rows(q, r, r1);
            progress_->add((r1 - r) * row_bytes(q), last ? 2 : 0);
            return Status{};
          });
        }
      }
      continue;
    }
    if (next < items.size()) {
      const Item it = items[next++];
      switch (it.kind) {
        case Item::COPY:
          submit(it.cost, [this, it]() -> Status {
            const auto data = ck_.data(*refs_[it.a]).subspan(it.off, it.len);
            FP4FORGE_TRY(write(it.shard, it.dst_off, data));
            release(it.a, it.off, it.len);
            const bool last = it.off + it.len == refs_[it.a]->info->nbytes();
            progress_->add(it.len, last ? 1 : 0);
            return Status{};
          });
          break;
        case Item::SMALL_GROUP:
          submit(it.cost, [run_small_group, g2 = it.a] { return run_small_group(g2); });
          break;
        case Item::BIG_AMAX:
          submit(it.cost, [this, it, bg = big[it.a].get()]() -> Status {
            const QuantUnit& q = plan_.units[it.unit];
            std::vector<std::byte> buf;
            FP4FORGE_ASSIGN_OR_RETURN(float a, nvfp4::amax_rows(rows_view(q, it.r0, it.r1, buf), 0, it.r1 - it.r0,
                                                                unit_name(q)));
            // The encode pass reads these rows again; drop them now so a large set stays within budget.
            release_rows(q, it.r0, it.r1);
            {
              std::lock_guard lk(bg->mu);
              bg->amax = std::max(bg->amax, a);
            }
            if (bg->pending.fetch_sub(1) == 1) {
              std::lock_guard lk(cv_mu_);
              ready_.push_back(it.a);
              cv_.notify_all();
            }
            return Status{};
          });
          break;
      }
      continue;
    }
    if (groups_left == 0) break;
    std::unique_lock lk(cv_mu_);
    cv_.wait_for(lk, std::chrono::milliseconds(100), [&] { return !ready_.empty() || stopped(); });
  }
  pool_.wait_idle();
  if (err_) return cleanup_fail(*err_);
  for (std::size_t s = 0; s < slots_.size(); ++s)
    if (!slots_[s]->resumed && slots_[s]->remaining.load() != 0)
      return cleanup_fail(make_error(Errc::INTERNAL, "shard '{}' incomplete: {} bytes never written",
                                     plan_.shards[s].name, slots_[s]->remaining.load()));
  progress_->finish();

  // Config and index, then make sure the source did not change under us.
  if (Status st = fs::write_file_atomic(stage / "config.json", plan_.config_text); !st)
    return cleanup_fail(std::move(st).error());
  if (Status st = fs::write_file_atomic(stage / plan_.index_name, plan_.index_text); !st)
    return cleanup_fail(std::move(st).error());
  if (Status st = ck_.check_unchanged(); !st) return cleanup_fail(std::move(st).error());
  for (const auto& [p, st0] : stamps) {
    const auto st1 = fs::file_stamp(p);
    if (st0 != st1)
      return cleanup_fail(make_error(Errc::BAD_INPUT,
                                     "source file '{}' changed during the run (size or mtime); the output was "
                                     "discarded; rerun on a stable source",
                                     p.string()));
  }
  for (const auto& sh : plan_.shards) sum.bytes_out += sh.layout.file_size;
  if (Status st = manifest_->remove(); !st) return cleanup_fail(std::move(st).error());
  if (Status st = staging_.finish(dst); !st) return cleanup_fail(std::move(st).error());

  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  sum.counts = plan_.counts;
  sum.summary = plan_.summary;
  sum.warnings = warnings_;
  sum.quantized_weights = plan_.units.size();
  for (const auto& c : plan_.counts) sum.kept_tensors += c.kept;
  sum.ignore_entries = plan_.ignore.size();
  sum.bytes_in = plan_.source_bytes;
  sum.bytes_read = progress_->bytes_done();
  sum.bits_per_weight = plan_.bits_per_weight();
  sum.seconds = secs;
  sum.gb_per_s = secs > 0 ? static_cast<double>(plan_.source_bytes) / secs / 1e9 : 0.0;
  sum.peak_rss_bytes = peak_rss_bytes();
  sum.peak_inflight_bytes = budget_.peak();
  sum.shards_written = shards_written_.load();
  return sum;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------

namespace {
Status check_run_options(const RunOptions& opts) {
  if (opts.max_memory < kMinMaxMemory)
    return make_error(Errc::USAGE, "--max-memory {} is too small; at least {} bytes", opts.max_memory, kMinMaxMemory);
  return {};
}
}  // namespace

Result<RunSummary> run_plan(const Checkpoint& src, const QuantPlan& plan, const stdfs::path& dst,
                            const RunOptions& opts) {
  FP4FORGE_TRY(check_run_options(opts));
  FP4FORGE_TRY(check_destination(src.dir(), dst));
  Runner r(src, plan, opts);
  return r.run(normalize_destination(dst));
}

Result<QuantizeResult> quantize(const QuantizeParams& p) {
  FP4FORGE_TRY(check_run_options(p.run));  // a dry run refuses what the real run would
  if (!p.dry_run && p.dst.empty())
    return make_error(Errc::USAGE, "missing DST; give an output directory (or use --dry-run)");
  if (!p.dst.empty()) FP4FORGE_TRY(check_destination(p.src, p.dst));
  FP4FORGE_ASSIGN_OR_RETURN(Checkpoint ck, Checkpoint::open(p.src));
  QuantizeResult out;
  FP4FORGE_ASSIGN_OR_RETURN(out.plan, make_plan(ck, p.plan));
  if (p.on_plan) p.on_plan(out.plan);
  if (p.dry_run) return out;
  Runner r(ck, out.plan, p.run);
  FP4FORGE_ASSIGN_OR_RETURN(RunSummary sum, r.run(normalize_destination(p.dst)));
  out.summary = std::move(sum);
  return out;
}

nlohmann::ordered_json to_json(const RunSummary& s) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  j["ok"] = true;
  j["source"] = s.source;
  j["destination"] = s.destination;
  j["scheme"] = s.scheme;
  j["jobs"] = s.jobs;
  j["max_memory"] = s.max_memory;
  j["quantized_weights"] = s.quantized_weights;
  j["kept_tensors"] = s.kept_tensors;
  j["ignore_entries"] = s.ignore_entries;
  nlohmann::ordered_json roles = nlohmann::ordered_json::object();
  for (std::size_t r = 0; r < s.counts.size(); ++r) {
    const auto& c = s.counts[r];
    if (c.quantized == 0 && c.kept == 0) continue;
    roles[std::string(role_name(static_cast<Role>(r)))] = {{"quantized", c.quantized}, {"kept", c.kept}};
  }
  j["roles"] = std::move(roles);
  j["summary"] = s.summary;
  j["bytes_in"] = s.bytes_in;
  j["bytes_out"] = s.bytes_out;
  j["bits_per_weight"] = s.bits_per_weight;
  j["seconds"] = s.seconds;
  j["gb_per_s"] = s.gb_per_s;
  j["peak_rss_bytes"] = s.peak_rss_bytes;
  j["peak_inflight_bytes"] = s.peak_inflight_bytes;
  j["bytes_read"] = s.bytes_read;
  j["shards_written"] = s.shards_written;
  j["shards_resumed"] = s.shards_resumed;
  j["files_copied"] = s.files_copied;
  j["warnings"] = s.warnings;
  return j;
}

std::string to_text(const RunSummary& s) {
  std::string out;
  for (const auto& l : s.summary) out += fmt::format("  {}\n", l);
  out += fmt::format("wrote {}: {} shard(s) ({} resumed), {:.3f} GB from {:.3f} GB, {:.3f} bits per quantized weight\n",
                     s.destination, s.shards_written + s.shards_resumed, s.shards_resumed,
                     static_cast<double>(s.bytes_out) / 1e9, static_cast<double>(s.bytes_in) / 1e9, s.bits_per_weight);
  out += fmt::format("  {:.2f} s, {:.2f} GB/s, -j {}, peak RSS {:.0f} MiB (in-flight budget {:.0f} MiB, peak {:.0f} MiB)\n",
                     s.seconds, s.gb_per_s, s.jobs, static_cast<double>(s.peak_rss_bytes) / 1048576.0,
                     static_cast<double>(s.max_memory) / 1048576.0, static_cast<double>(s.peak_inflight_bytes) / 1048576.0);
  return out;
}

nlohmann::ordered_json to_json(const QuantizeResult& r) {
  if (r.summary) return to_json(*r.summary);
  nlohmann::ordered_json j;
  j["ok"] = true;
  j["dry_run"] = true;
  j["plan"] = to_json(r.plan);
  return j;
}

std::string to_text(const QuantizeResult& r, bool verbose) {
  if (r.summary) return to_text(*r.summary);
  return to_text(r.plan, verbose) + "dry run: nothing written\n";
}

}  // namespace fp4forge::quant
