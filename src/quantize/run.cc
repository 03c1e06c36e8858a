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
#include <new>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fp4forge/codec/fp8.h"
#include "fp4forge/codec/mxfp4_cast.h"
#include "fp4forge/codec/nvfp4.h"
#include "fp4forge/codec/nvfp4_search.h"
#include "fp4forge/codec/scheme_search.h"
#include "fp4forge/codec/scheme.h"
#include "fp4forge/codec/w4a16.h"
#include "fp4forge/quantize/manifest.h"
#include "fp4forge/quantize/staging.h"
#include "fp4forge/util/backup.h"
#include "fp4forge/util/format.h"
#include "fp4forge/util/fs.h"
#include "fp4forge/util/thread_pool.h"
#include "quantize/cast.h"
#include "quantize/run_checked.h"

namespace fp4forge::quant {
namespace stdfs = std::filesystem;

std::string side_file_skip_reason(std::string_view name) {
  if (backup::is_backup_name(name))
    return "a backup written by fp4forge doctor --fix or gateway";
  if (fs::is_partial_name(name)) return "an unfinished temporary file";  // fs::AtomicFile's temporaries
  // Only a safetensors file the source's index does not name is a side file (the checkpoint reader's
  // shard-not-in-index note): Mistral's consolidated.safetensors is the whole unquantized model again.
  if (name.ends_with(".safetensors"))
    return "a safetensors file the source's index does not name: vLLM and transformers never load it "
           "(doctor: shard-not-in-index)";
  for (std::string_view ext : {".bin", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".gguf", ".onnx", ".pkl", ".npz"})
    if (name.ends_with(ext))
      return "a weight or pickle file of another format: the output's weights are its safetensors shards";
  return {};
}

namespace {

std::uint64_t peak_rss_bytes() {
  struct rusage ru{};
  if (::getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return static_cast<std::uint64_t>(ru.ru_maxrss) * 1024;
}

// ---- the run --------------------------------------------------------------------------------------

/** Source bytes per search task of a searched observer (2M BF16 weights: about a tenth of a second on one core). */
constexpr std::uint64_t kSearchTaskBytes = std::uint64_t{4} << 20;

}  // namespace

unsigned default_jobs(const QuantPlan& plan) noexcept {
  bool searched = false;
  for (const PlanScheme& ps : plan.schemes) searched = searched || (ps.units > 0 && search_spec(ps.observer));
  return default_workers(searched);
}

namespace {

class Runner {
 public:
  Runner(const Checkpoint& ck, const QuantPlan& plan, const RunOptions& opts)
      : ck_(ck), plan_(plan), opts_(opts), pool_(opts.jobs != 0 ? opts.jobs : default_jobs(plan)), budget_(opts.max_memory) {}

  Result<RunSummary> run(const stdfs::path& given_dst);

 private:
  struct Slot {  // per output shard
    std::optional<st::ShardWriter> writer;
    std::atomic<std::uint64_t> remaining{0};
    bool resumed = false;
  };
  struct BigGroup {  // a global-scale group too large for one task: amax in parts, then encode
    std::mutex mu;
    float amax = 0.0f;
    std::atomic<std::size_t> pending{0};
    // A searched observer: per unit of the group (in grp.units order), the searched max of every group of
    // 16 (the amax pass searches) and the steps at which some group of the unit improved (its patience).
    // Allocated by the unit's first search task, not when the work is listed: every big group of the model
    // is listed up front, and their maxima together are an eighth of the bf16 weights (1.75 GB on an 8B).
    // Freed by the unit's last encode task, so only the groups in flight hold theirs.
    std::vector<std::shared_ptr<std::vector<float>>> maxima;
    std::vector<nvfp4::StepMask> improved;
  };
  struct Item {  // one listed task
    enum Kind { COPY, SMALL_GROUP, BIG_AMAX, ENCODE_ROWS } kind;
    std::size_t a = 0;        // decision (COPY) or group
    std::size_t shard = 0;    // COPY: output shard
    std::uint64_t off = 0, len = 0, dst_off = 0;  // COPY range
    std::size_t unit = 0;     // BIG_AMAX / ENCODE_ROWS unit
    std::uint64_t r0 = 0, r1 = 0;
    std::uint64_t cost = 0;
  };
  struct Work {
    std::uint64_t chunk = 1;  // bytes (source + output) one task may touch
    std::vector<Item> items;  // in output order
    std::vector<std::unique_ptr<BigGroup>> big;  // per group; set for big groups only
    std::size_t groups_pending = 0;
  };
  using SourceStamp = std::pair<stdfs::path, std::optional<fs::FileStamp>>;

  void fail(Error e) {
    std::lock_guard lk(err_mu_);
    if (!err_) err_ = std::move(e);
    stop_.store(true);
    cv_.notify_all();
  }
  bool stopped() const { return stop_.load(std::memory_order_relaxed); }

  /** The FP8 source weight behind decision `d`, or nullptr for a tensor stored as it is planned. */
  /** Stored source bytes of `elems` planned elements of decision `d` (an FP8 payload: 1 per element; a packed FP4
   * one: 1 per 2; else its dtype's). */
  std::uint64_t stored_bytes(std::size_t d, std::uint64_t elems) const {
    if (const Fp8Weight* f = plan_.fp8_of(d)) return f->grid.payload == fp8::Payload::E2M1 ? elems / 2 : elems;
    return elems * (dtype_bits(plan_.decisions[d].dtype) / 8);
  }
  /** Rows [r0, r1) of unit `u` as a contiguous view: into the mapping when the unit's slice is contiguous,
   * else gathered into `buf` (a transposed or interleaved fused expert); an FP8 source weight is expanded
   * to bf16 into `buf` (model/fp8_source.h). Row 0 of the view is row r0. */
  Result<nvfp4::WeightView> rows_view(const QuantUnit& u, std::uint64_t r0, std::uint64_t r1,
                                      std::vector<std::byte>& buf) const {
    const TensorRef* t = refs_[u.decision];
    const std::size_t es = dtype_bits(u.dtype) / 8;
    if (const Fp8Weight* f = plan_.fp8_of(u.decision)) {
      buf.resize(static_cast<std::size_t>((r1 - r0) * u.cols * 2));
      FP4FORGE_TRY(dequant_slice_rows(ck_, *f, u.slice, r0, r1, reinterpret_cast<std::uint16_t*>(buf.data())));
      return nvfp4::WeightView{buf.data(), DType::BF16, r1 - r0, u.cols};
    }
    const std::byte* base = ck_.data(*t).data();
    if (u.slice.contiguous()) return nvfp4::WeightView{base + (u.slice.offset + r0 * u.slice.row_stride) * es, u.dtype, r1 - r0, u.cols};
    buf.resize(static_cast<std::size_t>((r1 - r0) * u.cols * es));
    gather_rows(base, es, u.slice, r0, r1, buf.data());
    return nvfp4::WeightView{buf.data(), u.dtype, r1 - r0, u.cols};
  }
  /** Drops rows [r0, r1) of unit `u` from the page cache (contiguous slices only; a strided slice shares
   * its pages with the other parts of the fused tensor). */
  void release_rows(const QuantUnit& u, std::uint64_t r0, std::uint64_t r1) const {
    if (!u.slice.contiguous()) return;
    release(u.decision, stored_bytes(u.decision, u.slice.offset + r0 * u.slice.row_stride),
            stored_bytes(u.decision, (r1 - r0) * u.cols));
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
  /** Bytes of one row of `u` as the codec reads it (an FP8 weight: its bf16 expansion): task sizes. */
  std::uint64_t row_bytes(const QuantUnit& u) const { return u.cols * (dtype_bits(u.dtype) / 8); }
  /** Bytes of one row of `u` as stored in the source (an FP8 weight: 1 per element): progress. */
  std::uint64_t stored_row_bytes(const QuantUnit& u) const { return stored_bytes(u.decision, u.cols); }
  /** The scheme of unit `u` (one config group of the plan) and of scale group `g` (its units share it). */
  QuantScheme scheme_of(const QuantUnit& u) const { return plan_.schemes[u.scheme].scheme; }
  const PlanScheme& group_scheme(std::size_t g) const { return plan_.schemes[plan_.groups[g].scheme]; }
  /** Output bytes per source row of `u` under its scheme (for task sizes). */
  std::uint64_t out_row_bytes(const QuantUnit& u) const {
    return linear_bytes(scheme_of(u), u.rows, u.cols, u.out_dtype()) / std::max<std::uint64_t>(u.rows, 1);
  }
  /** Output tensors of one unit (2 or 3), the progress bar's item count. */
  std::uint64_t unit_tensors(const QuantUnit& u) const { return linear_tensors(scheme_of(u), 1, 128, DType::BF16).size(); }
  /** Rows per encode task: FP8_BLOCK encodes whole 128-row blocks. */
  std::uint64_t rows_per_task(const QuantUnit& u, std::uint64_t budget_bytes) const {
    std::uint64_t r = std::max<std::uint64_t>(1, budget_bytes / (row_bytes(u) + out_row_bytes(u)));
    if (const std::uint64_t b = scheme_traits(scheme_of(u)).row_block; b > 1) r = std::max(b, r / b * b);
    return r;
  }

  Status write(std::size_t shard, std::uint64_t off, std::span<const std::byte> bytes);
  void shard_finished(std::size_t shard);
  /** Encodes rows [r0, r1) of unit `ui`; `maxima` (a searched observer) holds the searched max of each of the
   * scheme's groups of these rows (16 columns for NVFP4A16), else each group's max|w| is used. */
  Status write_unit_rows(std::size_t ui, float gs, std::uint64_t r0, std::uint64_t r1, const float* maxima = nullptr);
  /** True when the unit's scheme writes a `weight_shape` tensor per Linear (W4A16). */
  bool writes_shape(const QuantUnit& u) const {
    for (const auto& t : linear_tensors(scheme_of(u), 1, 128, DType::BF16))
      if (t.part == LinearPart::SHAPE) return true;
    return false;
  }
  /** The search of scale group `g`'s observer, or nullopt for min-max. */
  std::optional<SearchSpec> search(std::size_t g) const { return search_spec(group_scheme(g).observer); }
  /** Columns per searched group of group `g`'s scheme (its scale group). */
  std::uint64_t search_cols(std::size_t g) const { return scheme_traits(group_scheme(g).scheme).search_cols; }
  /** Whole units pass through an amax / search pass before they are encoded: a global scale or a search. */
  bool two_pass(std::size_t g) const {
    return !cast_[g] && (has_global_scale(group_scheme(g).scheme) || search(g).has_value());
  }
  /** Position of unit `ui` in its group's unit list. */
  std::size_t unit_pos(const ScaleGroup& grp, std::size_t ui) const {
    return static_cast<std::size_t>(std::find(grp.units.begin(), grp.units.end(), ui) - grp.units.begin());
  }
  Status write_gs(std::size_t ui, float gs);
  /** Rows [r0, r1) of a passthrough unit: its FP8 payload and the scale rows covering them, as stored. */
  Status pass_rows(const QuantUnit& u, std::uint64_t r0, std::uint64_t r1);
  /** Which groups of packed FP4 source weights cast losslessly (codec/mxfp4_cast.h), from their scales. */
  void decide_casts();
  /** Rows [r0, r1) of a unit of a cast group under shift m: its codes copied, its scales folded. */
  Status cast_rows(const QuantUnit& u, int m, std::uint64_t r0, std::uint64_t r1);
  Status write_shape(std::size_t ui);

  // The steps of run(), in order.
  Status match_checkpoint();                      // the plan's tensors are the checkpoint's
  std::vector<SourceStamp> source_stamps() const;  // checked again before the commit
  Status take_staging(const stdfs::path& dst);    // staging folder and its manifest
  Status open_shards(RunSummary& sum);            // reuse intact staged shards (resume), open writers
  bool staged_shard_intact(const OutShard& sh, const ManifestEntry& prev) const;
  Status copy_side_files(RunSummary& sum);        // tokenizer, processor, ... (not the skipped ones)
  Status check_free_space(const stdfs::path& dst) const;
  void start_progress();
  Work list_work();                               // every task, in output order
  void list_copy(Work& w, std::size_t decision, std::size_t shard, const st::TensorInfo& t) const;
  void list_group(Work& w, std::size_t g) const;
  bool group_needed(const ScaleGroup& g) const;
  void execute(Work& w);                          // the scheduler loop
  void submit(std::uint64_t cost, std::function<Status()> fn);
  Status run_copy(const Item& it);
  Status run_small_group(std::size_t g);
  Status run_big_amax(const Item& it, BigGroup& bg);
  Status run_encode_rows(const Item& it);
  void encode_ready_group(std::size_t g, const Work& w);
  Status check_all_written() const;
  Status commit(const stdfs::path& dst, const std::vector<SourceStamp>& stamps);  // config, index, rename
  void summarize(RunSummary& sum, double secs) const;
  Result<RunSummary> abort_run(Error e);          // stop, remove staging, report (a changed source first)

  const Checkpoint& ck_;
  const QuantPlan& plan_;
  RunOptions opts_;
  ThreadPool pool_;
  ByteBudget budget_;
  std::vector<const TensorRef*> refs_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::unique_ptr<ProgressScope> progress_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> out_of_memory_{false};  // a worker's bad_alloc with no memory left to make its error
  std::mutex err_mu_;
  std::optional<Error> err_;
  std::mutex cv_mu_;
  std::condition_variable cv_;
  std::deque<std::size_t> ready_;  // big groups whose amax pass finished
  Staging staging_;
  std::optional<ResumeManifest> manifest_;  // from the moment the staging folder is ours
  std::vector<std::string> warnings_;
  std::atomic<std::size_t> shards_written_{0};
  std::vector<std::optional<int>> cast_;  // per group: the cast shift m of a group that casts (decide_casts)
  std::uint64_t cast_units_ = 0;
  std::vector<std::string> cast_refused_;  // groups of packed FP4 weights re-encoded instead, with why
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
  // A finished shard in the staging folder is one the manifest records (R4-B2: a failed run keeps them for --resume
  // and says how many): one it could not record is removed again.
  auto dg = file_digest(staging_.dir() / name);
  Status rec = dg ? manifest_->record(name, {plan_.shards[shard].layout.file_size, *dg}) : Status(dg.error());
  if (!rec) {
    (void)fs::ops().unlink((staging_.dir() / name).c_str());
    return fail(std::move(rec).error());
  }
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

Status Runner::write_shape(std::size_t ui) {
  const QuantUnit& u = plan_.units[ui];
  if (slots_[u.shard]->resumed) return {};
  const auto dims = w4a16::weight_shape(u.rows, u.cols);
  std::array<std::byte, w4a16::kShapeBytes> b{};
  std::memcpy(b.data(), dims.data(), b.size());  // little-endian host
  return write(u.shard, u.shape_begin, b);
}

Status Runner::pass_rows(const QuantUnit& u, std::uint64_t r0, std::uint64_t r1) {
  // The FP8 payload rows as stored, and the scale rows that cover them (FP8_BLOCK: r0 is a multiple of 128).
  const Fp8Weight* wp = plan_.fp8_of(u.decision);
  if (wp == nullptr) return make_error(Errc::INTERNAL, "passthrough unit '{}' has no FP8 source weight", u.module);
  const Fp8Weight& w = *wp;
  const QuantScheme scheme = scheme_of(u);
  {  // R4 as for every quantized weight: the rows expanded (and dropped), so a NaN code or a non-finite product is
     // refused naming the element, exactly as the re-encoding path refuses it.
    std::vector<std::byte> scratch;
    FP4FORGE_TRY(rows_view(u, r0, r1, scratch));
  }
  FP4FORGE_TRY(write(u.shard, u.packed_begin + r0 * u.cols, ck_.data(*refs_[u.decision]).subspan(r0 * u.cols, (r1 - r0) * u.cols)));
  const TensorRef* st = ck_.find(w.scale);
  if (st == nullptr) return make_error(Errc::INTERNAL, "FP8 scale '{}' of '{}' not found", w.scale, w.tensor);
  const std::uint64_t es = dtype_bits(u.scale_dtype) / 8;
  const bool block = scheme_traits(scheme).block_scales;
  const std::uint64_t s0 = block ? r0 / fp8::kBlock : r0, s1 = block ? fp8::block_scale_rows(r1) : r1;
  const std::uint64_t per_row = (block ? fp8::block_scale_cols(u.cols) : 1) * es;  // output scale row bytes
  std::span<const std::byte> scales = ck_.data(*st);
  std::vector<std::byte> as_f32;
  if (w.grid.scale_dtype != u.scale_dtype) {  // E8M0 exponents: written as their exact F32 values
    const std::uint64_t n = scales.size() / (dtype_bits(w.grid.scale_dtype) / 8);
    as_f32.resize(static_cast<std::size_t>(n * 4));
    for (std::uint64_t i = 0; i < n; ++i) {
      const float f = fp8::scale_value(scales.data(), i, w.grid.scale_dtype);
      std::memcpy(as_f32.data() + i * 4, &f, 4);
    }
    scales = as_f32;
  }
  if (w.grid.layout == fp8::ScaleLayout::TENSOR) {  // one scale: repeated over every output scale element
    std::vector<std::byte> rep(static_cast<std::size_t>((s1 - s0) * per_row));
    for (std::uint64_t i = 0; i < rep.size(); i += es) std::memcpy(rep.data() + i, scales.data(), es);
    return write(u.shard, u.scale_begin + s0 * per_row, rep);
  }
  return write(u.shard, u.scale_begin + s0 * per_row, scales.subspan(s0 * per_row, (s1 - s0) * per_row));
}

void Runner::decide_casts() {
  detail::CastDecision d = detail::decide_casts(ck_, plan_, pool_);
  cast_ = std::move(d.shift);
  cast_units_ = d.units;
  cast_refused_ = std::move(d.refused);
  if (!cast_refused_.empty())
    warnings_.push_back(fmt::format(
        "{} fused set(s) of packed FP4 weights re-encoded from their bf16 expansion instead of cast losslessly "
        "(first: {}); their error is the scheme's, not zero",
        cast_refused_.size(), cast_refused_.front()));
}

Status Runner::cast_rows(const QuantUnit& u, int m, std::uint64_t r0, std::uint64_t r1) {
  {  // R4-B3: every path that writes values scans them. The cast copies codes and scales, so a block whose expansion
     // is infinite (E8M0 0xFE / 0xFD with codes of +-6) is refused naming the element, as every re-encoding path does.
    std::vector<std::byte> scratch;
    FP4FORGE_TRY(rows_view(u, r0, r1, scratch));
  }
  std::vector<std::byte> payload, scale;
  std::uint64_t scale_row = 0;
  FP4FORGE_TRY(detail::cast_unit_rows(ck_, plan_, u, m, r0, r1, payload, scale, scale_row));
  FP4FORGE_TRY(write(u.shard, u.packed_begin + r0 * (u.cols / 2), payload));
  return write(u.shard, u.scale_begin + r0 * scale_row, scale);
}

Status Runner::write_unit_rows(std::size_t ui, float gs, std::uint64_t r0, std::uint64_t r1, const float* maxima) {
  const QuantUnit& u = plan_.units[ui];
  if (u.passthrough) return pass_rows(u, r0, r1);
  if (const auto& m = cast_[u.group]) return cast_rows(u, *m, r0, r1);
  const QuantScheme scheme = scheme_of(u);
  const std::uint64_t n = r1 - r0;
  // The rows' payload and scale, shaped as the scheme writes them for an [n, K] weight: rows [r0, r1) of
  // the unit's payload, and its scale rows from r0 (FP8_BLOCK: from block row r0 / 128; r0 is a multiple).
  const auto parts = linear_tensors(scheme, n, u.cols, u.dtype);
  std::vector<std::byte> payload(static_cast<std::size_t>(parts[0].bytes())), scale(static_cast<std::size_t>(parts[1].bytes()));
  std::vector<std::byte> buf;
  FP4FORGE_ASSIGN_OR_RETURN(const nvfp4::WeightView v, rows_view(u, r0, r1, buf));
  const std::string name = unit_name(u);
  // The scheme's row encoder (best Highway target: the references' bytes and errors).
  FP4FORGE_TRY(scheme_traits(scheme).encode_rows(v, RowsParams{gs, maxima}, 0, n, payload.data(), scale.data(), name));
  // Scale rows from r0 (a block scheme: from block row r0 / row_block; r0 is a multiple).
  const std::uint64_t scale_row0 = r0 / (scheme_traits(scheme).block_scales ? scheme_traits(scheme).row_block : 1);
  const std::uint64_t scale_row_bytes = parts[1].bytes() / parts[1].shape[0];
  FP4FORGE_TRY(write(u.shard, u.packed_begin + r0 * (parts[0].bytes() / n), payload));
  FP4FORGE_TRY(write(u.shard, u.scale_begin + scale_row0 * scale_row_bytes, scale));
  return {};
}

Result<RunSummary> Runner::run(const stdfs::path& given_dst) {
  const auto t0 = std::chrono::steady_clock::now();
  const stdfs::path dst = normalize_destination(given_dst);
  RunSummary sum;
  sum.source = ck_.dir().string();
  sum.destination = given_dst.string();  // as given, like the source (issue 55)
  sum.scheme = plan_.scheme;
  sum.observer = plan_.observers;  // one per config group, as the scheme names them: "mse+minmax"
  sum.jobs = pool_.size();
  sum.max_memory = budget_.limit();
  warnings_ = plan_.warnings;

  FP4FORGE_TRY(match_checkpoint());
  decide_casts();
  const std::vector<SourceStamp> stamps = source_stamps();
  FP4FORGE_TRY(take_staging(dst));
  if (Status st = check_free_space(dst); !st) return abort_run(std::move(st).error());
  // --resume over another source's or plan's shards: refused, nothing deleted (tryout N-M3; staging.h).
  if (opts_.resume && !manifest_->load_previous(warnings_))
    if (Status st = check_resume_of_other_plan(staging_.dir(), warnings_); !st) {
      staging_.unlock();
      return std::move(st).error();
    }
  if (Status st = open_shards(sum); !st) return abort_run(std::move(st).error());
  if (Status st = copy_side_files(sum); !st) return abort_run(std::move(st).error());
  start_progress();
  Work work = list_work();
  execute(work);
  pool_.wait_idle();
  if (!err_ && out_of_memory_.load()) err_ = out_of_memory_error("quantize");
  if (err_) return abort_run(*err_);
  if (Status st = check_all_written(); !st) return abort_run(std::move(st).error());
  progress_->finish();
  if (Status st = commit(dst, stamps); !st) return abort_run(std::move(st).error());
  for (const auto& sh : plan_.shards) sum.bytes_out += sh.layout.file_size;
  summarize(sum, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return sum;
}

Status Runner::match_checkpoint() {
  if (plan_.shards.size() != ck_.shard_names().size())
    return make_error(Errc::INTERNAL, "plan has {} shards, checkpoint {}", plan_.shards.size(), ck_.shard_names().size());
  refs_.resize(plan_.decisions.size());
  for (std::size_t i = 0; i < plan_.decisions.size(); ++i) {
    refs_[i] = ck_.find(plan_.decisions[i].name);
    const Fp8Weight* f = plan_.fp8_of(i);  // an FP8 / packed FP4 payload is planned as its expansion
    if (!refs_[i] || refs_[i]->shard != plan_.decisions[i].shard ||
        (f != nullptr ? refs_[i]->info->shape != f->stored_shape || f->shape != plan_.decisions[i].shape
                      : refs_[i]->info->shape != plan_.decisions[i].shape))
      return make_error(Errc::INTERNAL, "plan does not match the checkpoint at tensor '{}'", plan_.decisions[i].name);
  }
  return {};
}

std::vector<Runner::SourceStamp> Runner::source_stamps() const {
  std::vector<SourceStamp> stamps;
  auto add = [&](const std::string& n) { stamps.emplace_back(ck_.dir() / n, fs::file_stamp(ck_.dir() / n)); };
  for (const auto& n : ck_.shard_names()) add(n);
  for (const auto& n : ck_.other_files()) add(n);
  if (ck_.index_file()) add(*ck_.index_file());
  return stamps;
}

// Before any shard is written: the output (less what an interrupted run left in staging) must fit in the free
// space of the destination's filesystem. A filesystem that cannot say is not refused (the writes report ENOSPC).
Status Runner::check_free_space(const stdfs::path& dst) const {
  std::uint64_t need = std::uint64_t{1} << 20;  // config.json, the index, the manifest
  for (const auto& sh : plan_.shards) need += sh.layout.file_size;
  std::error_code ec;
  for (const auto& n : ck_.other_files())
    if (const auto sz = stdfs::file_size(ck_.dir() / n, ec); !ec) need += sz;
  std::uint64_t there = 0;
  for (const auto& e : stdfs::directory_iterator(staging_.dir(), ec))
    if (const auto sz = e.is_regular_file(ec) ? e.file_size(ec) : 0; !ec) there += sz;
  need = need > there ? need - there : 0;
  const auto avail = fs::available_bytes(staging_.dir());
  if (!avail || *avail >= need) return {};
  return make_error(Errc::IO, "not enough free space for '{}': the output needs {} more, {} available there; "
                    "expected room for the whole output (free space or choose another destination)",
                    dst.string(), format_bytes(need), format_bytes(*avail));
}

Status Runner::take_staging(const stdfs::path& dst) {
  if (Status st = staging_.open(staging_path(dst), dst, opts_.resume, opts_.restart, warnings_); !st) {
    if (staging_.created()) staging_.remove();
    return st;
  }
  manifest_.emplace(staging_.dir(), plan_fingerprint(ck_, plan_));
  return {};
}

Result<RunSummary> Runner::abort_run(Error e) {
  stop_.store(true);
  pool_.wait_idle();
  // Whatever failed, a source that changed under the run is the reason to report.
  if (Status c = ck_.check_unchanged(); !c) e = std::move(c).error();
  for (auto& s : slots_)
    if (s && s->writer) s->writer->abort();
  if (progress_) progress_->finish();
  // R4-B2: an error never deletes finished work. An I/O (or internal) failure keeps the finished shards for
  // --resume (an earlier run's too); bad input means the source must change, and the resume fingerprint covers
  // every source shard's size and mtime, so no staged shard could be reused: the folder goes.
  if (e.code == Errc::BAD_INPUT) {
    staging_.remove();
  } else if (const StagedShards kept = staging_.keep_finished(); kept.count > 0) {
    e.message += fmt::format("; {} of {} shard(s) finished ({}), kept in '{}' for the next --resume (run the same "
                             "command again with --resume once the cause is fixed; --restart discards them)",
                             kept.count, plan_.shards.size(), format_bytes(kept.bytes), staging_.dir().string());
  }
  return e;
}

bool Runner::staged_shard_intact(const OutShard& sh, const ManifestEntry& prev) const {
  const stdfs::path p = staging_.dir() / sh.name;
  const auto st = fs::file_stamp(p);
  if (!st || st->size != sh.layout.file_size || prev.size != st->size) return false;
  auto f = fs::File::open_read(p);
  std::string head(sh.layout.header_bytes.size(), '\0');
  if (!f || !f->pread_all(std::as_writable_bytes(std::span<char>(head.data(), head.size())), 0) ||
      head != sh.layout.header_bytes)
    return false;
  auto dg = file_digest(p);
  return dg && *dg == prev.digest;
}

Status Runner::open_shards(RunSummary& sum) {
  slots_.reserve(plan_.shards.size());
  for (const auto& sh : plan_.shards) {
    auto slot = std::make_unique<Slot>();
    if (const ManifestEntry* prev = manifest_->previous(sh.name)) {
      if (staged_shard_intact(sh, *prev)) {
        slot->resumed = true;
        manifest_->keep(sh.name, *prev);
        ++sum.shards_resumed;
      } else {
        warnings_.push_back(fmt::format("--resume: staged shard '{}' failed its check; rewriting it", sh.name));
      }
    }
    if (!slot->resumed) {
      const stdfs::path p = staging_.dir() / sh.name;
      FP4FORGE_TRY(fs::remove_tree(p));
      FP4FORGE_ASSIGN_OR_RETURN(st::ShardWriter w, st::ShardWriter::create(p, sh.layout));
      slot->writer.emplace(std::move(w));
      slot->remaining.store(sh.layout.tensors.empty() ? 0 : sh.layout.tensors.back().end);
    }
    slots_.push_back(std::move(slot));
  }
  for (std::size_t s = 0; s < slots_.size(); ++s)
    if (!slots_[s]->resumed && slots_[s]->remaining.load() == 0) shard_finished(s);
  if (err_) return *err_;
  return {};
}

Status Runner::copy_side_files(RunSummary& sum) {
  // Non-safetensors files first (cheap), from the source, never config.json (written from the plan).
  for (const auto& n : ck_.other_files()) {
    if (n == "config.json" || n == plan_.index_name) continue;
    // A side file linked outside the checkpoint (tokenizer.json -> ~/.ssh/id_rsa) is never copied.
    if (const std::string why = ck_.escapes(n); !why.empty()) {
      warnings_.push_back(fmt::format("not copied: {}", why));
      continue;
    }
    if (plan_.fp8_source && std::find(plan_.fp8_source->side_files.begin(), plan_.fp8_source->side_files.end(), n) !=
                                plan_.fp8_source->side_files.end()) {
      warnings_.push_back(fmt::format("not copied: '{}' (the FP8 source's quantization config; the output's is "
                                      "quantization_config in config.json)",
                                      n));
      continue;
    }
    if (const std::string why = side_file_skip_reason(n); !why.empty()) {
      warnings_.push_back(fmt::format("not copied: '{}' ({})", n, why));
      continue;
    }
    FP4FORGE_TRY(fs::copy_file_atomic(ck_.dir() / n, staging_.dir() / n));
    ++sum.files_copied;
  }
  return {};
}

void Runner::start_progress() {
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
      if (sh.sources[i].kind == OutKind::PASSTHROUGH)
        total_work += plan_.fp8_of(sh.sources[i].index) != nullptr  // a kept FP8 / FP4 weight: written as bf16
                          ? stored_bytes(sh.sources[i].index, sh.layout.tensors[i].nbytes() / 2)
                          : sh.layout.tensors[i].nbytes();
  }
  for (const QuantUnit& u : plan_.units)
    if (!slots_[u.shard]->resumed) total_work += u.rows * stored_row_bytes(u);
  progress_ = std::make_unique<ProgressScope>(opts_.progress, "quantize", total_work, total_items);
}

bool Runner::group_needed(const ScaleGroup& g) const {
  for (auto u : g.units)
    if (!slots_[plan_.units[u].shard]->resumed) return true;
  return false;
}

Runner::Work Runner::list_work() {
  Work w;
  // Work sizes: a task touches at most `chunk` bytes (source + output) so that ~2 tasks per worker fit.
  w.chunk = std::max<std::uint64_t>(budget_.limit() / (2 * std::max(1u, pool_.size())), 1);
  w.big.resize(plan_.groups.size());
  std::vector<bool> group_seen(plan_.groups.size(), false);
  // In output order: passthrough chunks and global-scale groups (the first time a group is seen).
  for (std::size_t s = 0; s < plan_.shards.size(); ++s) {
    const auto& sh = plan_.shards[s];
    for (std::size_t i = 0; i < sh.layout.tensors.size(); ++i) {
      const auto& src = sh.sources[i];
      const auto& t = sh.layout.tensors[i];
      if (src.kind == OutKind::PASSTHROUGH) {
        if (!slots_[s]->resumed) list_copy(w, src.index, s, t);
        continue;
      }
      const std::size_t g = plan_.units[src.index].group;
      if (group_seen[g]) continue;
      group_seen[g] = true;
      if (group_needed(plan_.groups[g])) list_group(w, g);
    }
  }
  return w;
}

void Runner::list_copy(Work& w, std::size_t decision, std::size_t shard, const st::TensorInfo& t) const {
  // An FP8 weight is expanded in whole bf16 elements.
  // Any other in whole 8-byte steps: each chunk holds whole elements, so run_copy's NaN/Inf scan sees every one.
  const std::uint64_t step = plan_.fp8_of(decision) != nullptr
                                 ? std::max<std::uint64_t>(2, w.chunk & ~std::uint64_t{1})
                                 : std::max<std::uint64_t>(8, w.chunk & ~std::uint64_t{7});
  for (std::uint64_t o = 0; o < t.nbytes() || (o == 0 && t.nbytes() == 0); o += step) {
    const std::uint64_t len = std::min(step, t.nbytes() - o);
    w.items.push_back({Item::COPY, decision, shard, o, len, t.begin + o, 0, 0, 0, len});
    if (t.nbytes() == 0) break;
  }
}

void Runner::list_group(Work& w, std::size_t g) const {
  const ScaleGroup& grp = plan_.groups[g];
  std::uint64_t cost = 0;
  for (auto u : grp.units) cost += plan_.units[u].rows * (row_bytes(plan_.units[u]) + out_row_bytes(plan_.units[u]));
  // A search task costs ~100x its bytes in CPU: smaller ones keep every core busy at the start (the first tasks
  // wait for their reads) and at the end (a fused set's last searches gate its encode and the run's finish).
  const bool searched = two_pass(g) && search(g).has_value();
  const std::uint64_t task_bytes = searched ? std::min(w.chunk, kSearchTaskBytes) : w.chunk;
  if (cost <= task_bytes) {  // one task: amax, global scale, encode
    w.items.push_back({Item::SMALL_GROUP, g, 0, 0, 0, 0, 0, 0, 0, cost});
    return;
  }
  if (!two_pass(g)) {  // no amax or search pass: encode tasks over row ranges
    for (auto u : grp.units) {
      const auto& un = plan_.units[u];
      const std::uint64_t rows_per = rows_per_task(un, w.chunk);
      for (std::uint64_t r = 0; r < un.rows; r += rows_per) {
        const std::uint64_t r1 = std::min(un.rows, r + rows_per);
        w.items.push_back({Item::ENCODE_ROWS, g, 0, 0, 0, 0, u, r, r1, (r1 - r) * (row_bytes(un) + out_row_bytes(un))});
      }
    }
    return;
  }
  // Two passes: amax over row ranges (BIG_AMAX items), then the encode tasks once the group is ready.
  w.big[g] = std::make_unique<BigGroup>();
  if (search(g)) {
    w.big[g]->maxima.resize(grp.units.size());
    w.big[g]->improved.resize(grp.units.size());
  }
  ++w.groups_pending;
  std::size_t n = 0;
  for (auto u : grp.units) {
    const auto& un = plan_.units[u];
    const std::uint64_t rows_per = std::max<std::uint64_t>(1, task_bytes / row_bytes(un));
    for (std::uint64_t r = 0; r < un.rows; r += rows_per) {
      const std::uint64_t r1 = std::min(un.rows, r + rows_per);
      w.items.push_back({Item::BIG_AMAX, g, 0, 0, 0, 0, u, r, r1, (r1 - r) * row_bytes(un)});
      ++n;
    }
  }
  w.big[g]->pending.store(n);
}

void Runner::submit(std::uint64_t cost, std::function<Status()> fn) {
  budget_.acquire(cost);
  pool_.submit([this, cost, fn = std::move(fn)] {
    if (!stopped()) {
      try {
        if (Status st = run_guarded(fn, "quantize"); !st) fail(std::move(st).error());
      } catch (const std::bad_alloc&) {  // not even the report's memory: flagged here, said after the workers stop
        out_of_memory_.store(true);
        stop_.store(true);
        cv_.notify_all();
      }
    }
    budget_.release(cost);
  });
}

Status Runner::run_small_group(std::size_t g) {
  const ScaleGroup& grp = plan_.groups[g];
  if (!two_pass(g)) {
    for (auto u : grp.units) {
      const QuantUnit& un = plan_.units[u];
      FP4FORGE_TRY(run_encode_rows({Item::ENCODE_ROWS, g, 0, 0, 0, 0, u, 0, un.rows, 0}));
    }
    return {};
  }
  const bool gs_scheme = has_global_scale(group_scheme(g).scheme);
  float amax = 0.0f;
  const auto spec = search(g);
  std::vector<std::vector<float>> maxima;  // a searched observer: per unit, its groups' searched maxima
  for (auto u : grp.units) {
    std::vector<std::byte> buf;
    const QuantUnit& un = plan_.units[u];
    FP4FORGE_ASSIGN_OR_RETURN(const nvfp4::WeightView v, rows_view(un, 0, un.rows, buf));
    if (spec) {
      FP4FORGE_ASSIGN_OR_RETURN(auto m, searched_group_maxima(group_scheme(g).scheme, v, *spec, unit_name(un)));
      for (float x : m) amax = std::max(amax, x);
      maxima.push_back(std::move(m));
      continue;
    }
    FP4FORGE_ASSIGN_OR_RETURN(float a, nvfp4::amax(v, unit_name(un)));
    amax = std::max(amax, a);
  }
  const float gs = gs_scheme ? nvfp4::global_scale(amax, plan_.units[grp.units.front()].dtype) : 0.0f;
  std::uint64_t bytes = 0;
  for (std::size_t k = 0; k < grp.units.size(); ++k) {
    const std::size_t u = grp.units[k];
    const QuantUnit& un = plan_.units[u];
    if (!slots_[un.shard]->resumed) {
      if (gs_scheme) FP4FORGE_TRY(write_gs(u, gs));
      if (writes_shape(un)) FP4FORGE_TRY(write_shape(u));
      FP4FORGE_TRY(write_unit_rows(u, gs, 0, un.rows, spec ? maxima[k].data() : nullptr));
      bytes += un.rows * stored_row_bytes(un);
      progress_->add(0, unit_tensors(un));
    }
    release_rows(un, 0, un.rows);
  }
  progress_->add(bytes);
  return {};
}

Status Runner::run_big_amax(const Item& it, BigGroup& bg) {
  const QuantUnit& q = plan_.units[it.unit];
  std::vector<std::byte> buf;
  FP4FORGE_ASSIGN_OR_RETURN(const nvfp4::WeightView v, rows_view(q, it.r0, it.r1, buf));
  float a = 0.0f;
  if (const auto spec = search(it.a)) {  // the search of these rows; their maxima stay for the encode pass
    const std::size_t k = unit_pos(plan_.groups[it.a], it.unit);
    const std::uint64_t cols = search_cols(it.a);
    float* out = nullptr;
    {
      std::lock_guard lk(bg.mu);
      if (!bg.maxima[k]) bg.maxima[k] = std::make_shared<std::vector<float>>(q.rows * (q.cols / cols));
      out = bg.maxima[k]->data() + it.r0 * (q.cols / cols);
    }
    StepMask improved;
    FP4FORGE_TRY(scheme_traits(scheme_of(q))
                     .search_rows(v, *spec, spec->total_steps(), 0, it.r1 - it.r0, out, &improved, unit_name(q)));
    for (std::uint64_t i = 0; i < (it.r1 - it.r0) * (q.cols / cols); ++i) a = std::max(a, out[i]);
    std::lock_guard lk(bg.mu);
    bg.improved[k] |= improved;
  } else {
    FP4FORGE_ASSIGN_OR_RETURN(a, nvfp4::amax_rows(v, 0, it.r1 - it.r0, unit_name(q)));
  }
  // The encode pass reads these rows again; drop them now so a large set stays within budget.
  release_rows(q, it.r0, it.r1);
  {
    std::lock_guard lk(bg.mu);
    bg.amax = std::max(bg.amax, a);
  }
  if (bg.pending.fetch_sub(1) == 1) {
    std::lock_guard lk(cv_mu_);
    ready_.push_back(it.a);
    cv_.notify_all();
  }
  return {};
}

Status Runner::run_encode_rows(const Item& it) {
  const QuantUnit& un = plan_.units[it.unit];
  if (!slots_[un.shard]->resumed) {
    if (it.r0 == 0 && writes_shape(un)) FP4FORGE_TRY(write_shape(it.unit));
    if (const auto& m = cast_[it.a]; m && it.r0 == 0 && has_global_scale(group_scheme(it.a).scheme))
      FP4FORGE_TRY(write_gs(it.unit, mxcast::global_scale(*m)));
    FP4FORGE_TRY(write_unit_rows(it.unit, 0.0f, it.r0, it.r1));
    progress_->add((it.r1 - it.r0) * stored_row_bytes(un), it.r1 == un.rows ? unit_tensors(un) : 0);
  }
  release_rows(un, it.r0, it.r1);
  return {};
}

Status Runner::run_copy(const Item& it) {
  if (const Fp8Weight* f = plan_.fp8_of(it.a)) {  // a kept FP8 weight: written as its bf16 expansion
    std::vector<std::uint16_t> out(static_cast<std::size_t>(it.len / 2));
    FP4FORGE_TRY(dequant_elements(ck_, *f, it.off / 2, it.len / 2, out.data()));
    FP4FORGE_TRY(write(it.shard, it.dst_off, std::as_bytes(std::span<const std::uint16_t>(out))));
    release(it.a, stored_bytes(it.a, it.off / 2), stored_bytes(it.a, it.len / 2));
    progress_->add(stored_bytes(it.a, it.len / 2), it.off + it.len == st::shape_numel(f->shape) * 2 ? 1 : 0);  // bytes read
    return {};
  }
  const auto data = ck_.data(*refs_[it.a]).subspan(it.off, it.len);
  // A kept float tensor with NaN/Inf: the output would carry it and verify rejects it (nonfinite-kept-tensor, F17),
  // so the run stops, as a quantized weight's NaN stops it (issue 55 tryout K: a NaN norm weight, exit 0).
  if (const DType dt = refs_[it.a]->info->dtype; dtype_is_float(dt))
    if (const auto [n, first] = count_nonfinite(data, dt); n > 0) {
      const std::uint64_t at = it.off / std::max(1u, dtype_bits(dt) / 8) + first;
      return make_error(Errc::BAD_INPUT,
                        "tensor '{}' ({} {}): non-finite value (NaN or Inf) at element {}; it is kept unquantized, so "
                        "the output would serve it (verify: nonfinite-kept-tensor, F17); hint: the source is corrupt "
                        "there: restore the tensor from the release",
                        refs_[it.a]->name, dtype_name(dt), format_shape(refs_[it.a]->info->shape), at);
    }
  FP4FORGE_TRY(write(it.shard, it.dst_off, data));
  release(it.a, it.off, it.len);
  const bool last = it.off + it.len == refs_[it.a]->info->nbytes();
  progress_->add(it.len, last ? 1 : 0);
  return {};
}

void Runner::encode_ready_group(std::size_t g, const Work& w) {
  const ScaleGroup& grp = plan_.groups[g];
  BigGroup& bg = *w.big[g];
  if (const auto spec = search(g)) {
    for (std::size_t k = 0; k < grp.units.size(); ++k)  // a unit no search task touched (no rows)
      if (!bg.maxima[k]) bg.maxima[k] = std::make_shared<std::vector<float>>();
    // Patience: a unit whose search upstream would have stopped early is searched again up to that step
    // (only a unit in which no group improved for `patience` steps: tiny or degenerate tensors).
    for (std::size_t k = 0; k < grp.units.size(); ++k) {
      const int run = nvfp4::steps_run(*spec, bg.improved[k]);
      if (run == spec->total_steps()) continue;
      const QuantUnit& un = plan_.units[grp.units[k]];
      std::vector<std::byte> buf;
      auto v = rows_view(un, 0, un.rows, buf);
      if (!v) return fail(std::move(v).error());
      if (Status st = scheme_traits(scheme_of(un))
                          .search_rows(*v, *spec, run, 0, un.rows, bg.maxima[k]->data(), nullptr, unit_name(un));
          !st)
        return fail(std::move(st).error());
    }
    bg.amax = 0.0f;
    for (const auto& m : bg.maxima)
      for (float x : *m) bg.amax = std::max(bg.amax, x);
  }
  const bool gs_scheme = has_global_scale(group_scheme(g).scheme);
  const float gs = gs_scheme ? nvfp4::global_scale(bg.amax, plan_.units[grp.units.front()].dtype) : 0.0f;
  const std::uint64_t cols_per_max = search_cols(g);
  for (std::size_t k = 0; k < grp.units.size(); ++k) {
    const std::size_t u = grp.units[k];
    const QuantUnit& un = plan_.units[u];
    // The encode tasks share the unit's maxima; the last one to finish frees them.
    std::shared_ptr<std::vector<float>> maxima = bg.maxima.empty() ? nullptr : std::move(bg.maxima[k]);
    if (slots_[un.shard]->resumed) continue;
    if (gs_scheme) {
      if (Status st = write_gs(u, gs); !st) return fail(std::move(st).error());
    }
    if (writes_shape(un)) {
      if (Status st = write_shape(u); !st) return fail(std::move(st).error());
    }
    const std::uint64_t extra = unit_tensors(un) - 2;  // the tensors besides payload and scale
    progress_->add(0, extra);
    const std::uint64_t per_row = row_bytes(un) + out_row_bytes(un);
    const std::uint64_t rows_per = rows_per_task(un, w.chunk);
    for (std::uint64_t r = 0; r < un.rows && !stopped(); r += rows_per) {
      const std::uint64_t r1 = std::min(un.rows, r + rows_per);
      const bool last = r1 == un.rows;
      submit((r1 - r) * per_row, [this, u, gs, r, r1, last, maxima, cols_per_max]() -> Status {
        const QuantUnit& q = plan_.units[u];
        const float* m = maxima ? maxima->data() + r * (q.cols / cols_per_max) : nullptr;
        FP4FORGE_TRY(write_unit_rows(u, gs, r, r1, m));
        release_rows(q, r, r1);
        progress_->add((r1 - r) * stored_row_bytes(q), last ? 2 : 0);
        return Status{};
      });
    }
  }
}

void Runner::execute(Work& w) {
  // The scheduler: groups whose amax pass finished are encoded first, then the next listed item;
  // with nothing to list it waits for the remaining big groups.
  std::size_t next = 0;
  std::size_t groups_left = w.groups_pending;
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
      encode_ready_group(*g, w);
      continue;
    }
    if (next < w.items.size()) {
      const Item it = w.items[next++];
      switch (it.kind) {
        case Item::COPY: submit(it.cost, [this, it] { return run_copy(it); }); break;
        case Item::SMALL_GROUP: submit(it.cost, [this, g2 = it.a] { return run_small_group(g2); }); break;
        case Item::BIG_AMAX:
          submit(it.cost, [this, it, bg = w.big[it.a].get()] { return run_big_amax(it, *bg); });
          break;
        case Item::ENCODE_ROWS: submit(it.cost, [this, it] { return run_encode_rows(it); }); break;
      }
      continue;
    }
    if (groups_left == 0) break;
    std::unique_lock lk(cv_mu_);
    cv_.wait_for(lk, std::chrono::milliseconds(100), [&] { return !ready_.empty() || stopped(); });
  }
}

Status Runner::check_all_written() const {
  for (std::size_t s = 0; s < slots_.size(); ++s)
    if (!slots_[s]->resumed && slots_[s]->remaining.load() != 0)
      return make_error(Errc::INTERNAL, "shard '{}' incomplete: {} bytes never written", plan_.shards[s].name,
                        slots_[s]->remaining.load());
  return {};
}

Status Runner::commit(const stdfs::path& dst, const std::vector<SourceStamp>& stamps) {
  // Config and index, then make sure the source did not change under us.
  FP4FORGE_TRY(fs::write_file_atomic(staging_.dir() / "config.json", plan_.config_text));
  FP4FORGE_TRY(fs::write_file_atomic(staging_.dir() / plan_.index_name, plan_.index_text));
  if (opts_.before_commit) FP4FORGE_TRY(opts_.before_commit(staging_.dir()));
  FP4FORGE_TRY(ck_.check_unchanged());
  for (const auto& [p, st0] : stamps)
    if (st0 != fs::file_stamp(p))
      return make_error(Errc::BAD_INPUT,
                        "source file '{}' changed during the run (size or mtime); the output was discarded; rerun "
                        "on a stable source",
                        p.string());
  // The manifest stays until the rename succeeded (a failed rename keeps every shard resumable, R4-B2), and goes
  // before the marker, so a kill in between leaves the marker that names the unfinished clean-up.
  return staging_.finish(dst, {ResumeManifest::kFileName});
}

void Runner::summarize(RunSummary& sum, double secs) const {
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
  // The rate of this run's work: the bytes it read (a --resume's reused shards are not read again; issue 55: they
  // were counted, so a resume reported a speed it never had).
  sum.gb_per_s = secs > 0 ? static_cast<double>(sum.bytes_read) / secs / 1e9 : 0.0;
  sum.peak_rss_bytes = peak_rss_bytes();
  sum.peak_inflight_bytes = budget_.peak();
  sum.shards_written = shards_written_.load();
  sum.cast_weights = cast_units_;
  sum.cast_refused = cast_refused_;
  if (cast_units_ > 0)
    sum.summary.push_back(fmt::format("{} packed FP4 weight{} cast losslessly (codes kept; E8M0 scales folded into NVFP4's "
                                      "E4M3 block scales under a power-of-two global scale, or kept for MXFP4A16)",
                                      cast_units_, cast_units_ == 1 ? "" : "s"));
}

}  // namespace

// ---------------------------------------------------------------------------------------------------

Status check_run_options(const RunOptions& opts) {
  if (opts.max_memory < kMinMaxMemory)
    return make_error(Errc::USAGE, "--max-memory {} bytes is too small; expected at least {} bytes ({})",
                      opts.max_memory, kMinMaxMemory, format_bytes(kMinMaxMemory));
  return {};
}

Result<RunSummary> detail::run_checked(const Checkpoint& src, const QuantPlan& plan, const stdfs::path& dst,
                                       const RunOptions& opts) {
  Runner r(src, plan, opts);
  return r.run(dst);
}

Result<RunSummary> run_plan(const Checkpoint& src, const QuantPlan& plan, const stdfs::path& dst,
                            const RunOptions& opts) {
  FP4FORGE_TRY(check_run_options(opts));
  FP4FORGE_TRY(check_destination(src.dir(), dst));
  return detail::run_checked(src, plan, dst, opts);
}

}  // namespace fp4forge::quant
