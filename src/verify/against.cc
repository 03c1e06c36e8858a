// verify --against: every quantized module re-encoded from its source and compared (the proof), errors against the source and the min-max baseline, kept tensors compared.
#include "verify/internal.h"
#include "verify/source_view.h"

#include <cstdlib>
#include <future>
#include <system_error>

#include "fp4forge/util/first_difference.h"
#include "fp4forge/util/thread_owned.h"

namespace fp4forge::verify_internal {
namespace {

/** A worker's buffers, reused across chunks and modules (one allocation per worker, not per chunk); each use
 * site has its own ThreadOwned, so no site's buffers are another's. */
struct Scratch {
  std::vector<float> deq, ref, mm, w32;
  std::vector<std::byte> pk, sc;
};

// ---- the source comparison ---------------------------------------------------------------------

struct Member {
  const Module* mod = nullptr;
  SourceView src;
  float amax = 0;              // max|w|
  float observed_amax = 0;     // max of the searched maxima (a searched observer), else amax
  std::vector<float> maxima;   // a searched observer: each group's searched max (nvfp4_search.h)
  bool searched = false;       // maxima computed ahead (search_ahead), while the job before compared
  bool ok = false;
  std::optional<TensorError> lossless;  // written from a low-bit source without re-encoding (compare_lossless)
};

/**
 * A module of MXFP4A16, FP8_DYNAMIC, FP8_BLOCK or W4A16 against its source: re-encoded whole by the
 * scheme's encoder (encode_linear on the best codec path, byte-identical to the scalar reference on every path; in chunks of whole 128-row blocks) and compared byte for byte,
 * every member; dequantized (decode_linear_rows) and its relative RMS error compared with the re-encoding's.
 * A byte difference is a warning (a GPU run or another quantizer differs too, docs/schemes.md); an error
 * far above the reference's is error-outlier. nullopt when the source cannot be encoded.
 */
std::optional<TensorError> compare_reencoded(const Checkpoint& q, const Layout& L, const Module& m,
                                             const SourceView& src, const VerifyOptions& opts, FindingSink& sink,
                                             VerifyStats& st, ThreadPool& pool, const float* maxima) {
  const std::uint64_t n = m.n, k = m.k;
  const DType dt = src.dtype;
  const std::size_t es = elem_size(dt);
  const auto specs = linear_tensors(L.qs, n, k, dt);
  // The stored tensor of each part (weight_shape was compared with [N, K] by the structural pass).
  std::vector<const TensorRef*> stored(specs.size(), nullptr);
  std::vector<MemberDiff> diffs(specs.size());
  std::optional<std::size_t> scale_dtype_differs;  // the scale member stored in another dtype than the source's
  for (std::size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].part == LinearPart::SHAPE) continue;
    stored[i] = m.param(specs[i].suffix);
    if (stored[i] && (stored[i]->info->dtype != specs[i].dtype || stored[i]->info->shape != specs[i].shape))
      diffs[i].what = fmt::format("{} {} where the encoding of the {} source is {} {}", dtype_name(stored[i]->info->dtype),
                                  format_shape(stored[i]->info->shape), dtype_name(dt), dtype_name(specs[i].dtype),
                                  format_shape(specs[i].shape));
    // R4-B10 (report_scale_dtype; docs/schemes.md "Scale dtype"): exact with the source at hand. An FP8 source's
    // module passed through keeps its scale's dtype (compare_lossless; against the expansion: exact, below).
    if (stored[i] && specs[i].part == LinearPart::SCALE && stored[i]->info->dtype != specs[i].dtype &&
        is_source_dtype(specs[i].dtype) && src.fp8 == nullptr)
      scale_dtype_differs = i;
  }
  const TensorRef* scale_t = m.scale;
  LinearData have{q.data(*m.payload).data(), q.data(*scale_t).data(), scale_t->info->dtype, 1.0f};
  std::vector<char> row_bad(n, 0);
  const std::uint64_t block = fp8::kBlock;
  const std::uint64_t chunk = ((std::max<std::uint64_t>(1, (1u << 20) / std::max<std::uint64_t>(k, 1)) + block - 1) / block) * block;
  // Row chunks in parallel (whole 128-row blocks); each chunk's differences and sums kept apart and merged
  // in chunk order, so the report is the same for any -j. row_bad is written on disjoint row ranges.
  struct ChunkResult {
    bool ok = true;
    std::vector<MemberDiff> diffs;
    double err2 = 0, ref2 = 0, src2 = 0, mm2 = 0;
    bool exact = true;  // every dequantized value, rounded to the source's dtype, is the source's
  };
  const std::size_t nchunks = static_cast<std::size_t>((n + chunk - 1) / chunk);
  std::vector<ChunkResult> results(nchunks);
  parallel_for(pool, nchunks, [&](std::size_t c) {
    ChunkResult& cr = results[c];
    cr.diffs.resize(specs.size());
    const std::uint64_t r0 = c * chunk, r1 = std::min(n, r0 + chunk), rows = r1 - r0;
    const nvfp4::WeightView v{src.data + r0 * k * es, dt, rows, k};
    // The config's observer: its searched maxima (these rows' groups), else min-max.
    const std::uint64_t gpr = maxima != nullptr ? k / scheme_traits(L.qs).search_cols : 0;
    auto enc = maxima != nullptr ? encode_linear_maxima(L.qs, v, maxima + r0 * gpr, m.name) : encode_linear(L.qs, v, m.name);
    if (!enc.ok()) {  // refused sources (NaN/Inf) were reported by the amax pass
      cr.ok = false;
      return;
    }
    const auto before = linear_tensors(L.qs, r0, k, dt);  // what rows [0, r0) take of each member
    for (std::size_t i = 0; i < specs.size(); ++i) {
      if (!stored[i] || !diffs[i].what.empty()) continue;
      const EncodedTensor& e = (*enc)[i];
      const std::size_t tes = dtype_bits(e.dtype) / 8;
      const std::uint64_t off = before[i].bytes();
      const std::byte* have_bytes = q.data(*stored[i]).data() + off;
      if (std::memcmp(have_bytes, e.bytes.data(), e.bytes.size()) == 0) continue;
      const bool per_row = !e.shape.empty() && e.shape[0] == rows;
      const std::uint64_t row_elems = e.shape.size() == 2 ? e.shape[1] : 1;
      for (std::uint64_t j = 0; j < e.bytes.size() / tes; ++j) {
        if (std::memcmp(have_bytes + j * tes, e.bytes.data() + j * tes, tes) == 0) continue;
        if (cr.diffs[i].elements++ == 0) cr.diffs[i].first = off / tes + j;
        const std::uint64_t unit = j / row_elems;
        if (per_row) {
          row_bad[r0 + unit] = 1;
        } else {  // a 128 x 128 block scale: every row of its block
          for (std::uint64_t r = r0 + unit * block; r < std::min(r1, r0 + (unit + 1) * block); ++r) row_bad[r] = 1;
        }
      }
    }
    // Errors against the source: the stored tensors and the re-encoding, dequantized alike.
    static ThreadOwned<Scratch> scratch;
    auto& [deq, ref, mm, w32, pk, sc] = scratch.get();
    deq.resize(rows * k);
    ref.resize(rows * k);
    decode_linear_rows(L.qs, have, n, k, r0, r1, deq.data());
    const LinearData mine{(*enc)[0].bytes.data(), (*enc)[1].bytes.data(), (*enc)[1].dtype, 1.0f};
    decode_linear_rows(L.qs, mine, rows, k, 0, rows, ref.data());
    // A searched observer: what min-max would have written, for the quality report.
    std::optional<std::vector<EncodedTensor>> minmax;
    if (maxima != nullptr) {
      auto e = encode_linear(L.qs, v, m.name);
      if (e.ok()) {
        minmax = std::move(e).value();
        mm.resize(rows * k);
        const LinearData mmd{(*minmax)[0].bytes.data(), (*minmax)[1].bytes.data(), (*minmax)[1].dtype, 1.0f};
        decode_linear_rows(L.qs, mmd, rows, k, 0, rows, mm.data());
      }
    }
    for (std::uint64_t i = 0; i < rows * k; ++i) {
      const double w = load_elem(src.data, dt, r0 * k + i);
      const double dq = deq[i], rf = ref[i];
      const double as_src = dt == DType::BF16  ? half::round_to_bf16(deq[i])
                            : dt == DType::F16 ? half::round_to_f16(deq[i])
                                               : dq;
      cr.exact = cr.exact && as_src == w;
      cr.err2 += (dq - w) * (dq - w);
      cr.ref2 += (rf - w) * (rf - w);
      cr.src2 += w * w;
      const double mv = minmax ? mm[i] : rf;
      cr.mm2 += (mv - w) * (mv - w);
    }
  });
  double err2 = 0, ref2 = 0, src2 = 0, mm2 = 0;
  bool exact = true;
  for (const ChunkResult& cr : results) {
    if (!cr.ok) return std::nullopt;
    exact = exact && cr.exact;
    for (std::size_t i = 0; i < specs.size(); ++i) {
      if (cr.diffs[i].elements == 0) continue;
      if (diffs[i].elements == 0) diffs[i].first = cr.diffs[i].first;
      diffs[i].elements += cr.diffs[i].elements;
    }
    err2 += cr.err2;
    ref2 += cr.ref2;
    src2 += cr.src2;
    mm2 += cr.mm2;
  }
  auto rel = [&](double e2) {
    if (src2 > 0) return std::sqrt(e2 / src2);
    return e2 > 0 || std::isnan(e2) ? std::numeric_limits<double>::infinity() : 0.0;
  };
  TensorError te;
  te.module = m.name;
  te.source = src.label;
  te.rows = n;
  te.cols = k;
  te.rel_rms = rel(err2);
  te.ref_rel_rms = rel(ref2);
  te.minmax_rel_rms = rel(mm2);  // min-max's encoding (the reference itself without a searched observer)
  if (std::isnan(te.rel_rms)) te.rel_rms = std::numeric_limits<double>::infinity();  // NaN codes or scales
  te.global_scale = std::numeric_limits<float>::quiet_NaN();
  te.expected_global_scale = std::numeric_limits<float>::quiet_NaN();
  st.reencoded_rows += n;
  // The source's values exactly (an FP8 module passed through, against the release's expansion): any encoding of
  // them is right, bytes and scale dtype included (issue 55 tryout: errors against a clean source's .bf16 copy).
  if (exact) {
    ++st.exact_modules;
    te.exact = true;
    te.rel_rms = te.ref_rel_rms = te.minmax_rel_rms = 0;
    return te;
  }
  if (scale_dtype_differs)
    report_scale_dtype(m, *stored[*scale_dtype_differs], src, specs[*scale_dtype_differs].dtype, sink);
  report_reencoded(L, m, specs, diffs, stored, row_bad, te, opts, sink, st);
  return te;
}

/**
 * A module written from a low-bit source without re-encoding: an FP8 module passed through (quantize's lossless
 * passthrough), or an NVFP4 module cast from a packed FP4 source (codec/mxfp4_cast.h). Its payload is the source's
 * payload byte for byte, and its dequantized values (the scheme's decoder with the stored scales and global scale,
 * rounded to bf16 as the expansion is) equal the source's expansion element for element. The error against the
 * source is then zero; nullopt when it is not such a module (it is compared by re-encoding instead).
 */
std::optional<TensorError> compare_lossless(const Checkpoint& q, const Checkpoint& src, const Layout& L,
                                            const Module& m, const SourceView& sv, ThreadPool& pool) {
  if (sv.fp8 == nullptr || sv.data == nullptr || sv.fp8->shape.size() != 2) return std::nullopt;
  const bool cast = sv.fp8->grid.payload == fp8::Payload::E2M1 && scheme_traits(L.qs).e2m1_cast != mxcast::Target::NONE;
  if (!cast && L.payload != "weight") return std::nullopt;
  const std::uint64_t n = m.n, k = m.k;
  const auto have = q.data(*m.payload), stored = src.data(*sv.tensor);
  if (stored.size() != have.size() || std::memcmp(have.data(), stored.data(), have.size()) != 0) return std::nullopt;
  float gs = 1.0f;
  if (cast && scheme_traits(L.qs).global_scale) {
    gs = m.gs != nullptr ? read_f32_scalar(q, m.gs).value_or(0.0f) : 0.0f;
    if (!(gs > 0.0f) || !std::isfinite(gs)) return std::nullopt;
  }
  const LinearData d{have.data(), q.data(*m.scale).data(), m.scale->info->dtype, gs};
  const std::uint64_t chunk = std::max<std::uint64_t>(fp8::kBlock, (std::uint64_t{1} << 20) / std::max<std::uint64_t>(k, 1) /
                                                                       fp8::kBlock * fp8::kBlock);
  const auto* expansion = reinterpret_cast<const std::uint16_t*>(sv.data);
  const std::size_t nchunks = static_cast<std::size_t>((n + chunk - 1) / chunk);
  std::vector<char> equal(nchunks, 0);  // row chunks in parallel; each says whether all its values are the source's
  parallel_for(pool, nchunks, [&](std::size_t c) {
    const std::uint64_t r0 = c * chunk, r1 = std::min(n, r0 + chunk);
    static ThreadOwned<Scratch> scratch;
    std::vector<float>& deq = scratch.get().deq;
    deq.resize(static_cast<std::size_t>((r1 - r0) * k));
    decode_linear_rows(L.qs, d, n, k, r0, r1, deq.data());
    for (std::uint64_t i = 0; i < deq.size(); ++i)
      if (half::float_to_bf16(deq[i]) != expansion[r0 * k + i]) return;
    equal[c] = 1;
  });
  if (std::find(equal.begin(), equal.end(), 0) != equal.end()) return std::nullopt;
  TensorError te;
  te.module = m.name;
  te.source = sv.label;
  te.rows = n;
  te.cols = k;
  te.global_scale = cast && scheme_traits(L.qs).global_scale ? gs : std::numeric_limits<float>::quiet_NaN();
  te.expected_global_scale = std::numeric_limits<float>::quiet_NaN();
  return te;  // rel_rms, ref_rel_rms, minmax_rel_rms: 0 (the source's own values)
}

/** The observer of the module's config group decides its reference encoding (a searched one: its search). */
std::optional<SearchSpec> search_of(const Structure& s, const Module& m) {
  const SchemeGroup& g = s.group(m);
  return g.observer_known ? search_spec(g.observer) : std::nullopt;
}

/** True when some module to compare re-encodes through a searched observer. */
bool searches(const Structure& s) {
  for (const auto& [name, m] : s.modules)
    if (m.quantized() && m.valid && search_of(s, m)) return true;
  return false;
}

/** One comparison run: what every step reads, and the sums and sets they fill. */
struct Against {
  Against(const Checkpoint& q_, const Checkpoint& src_, const Fp8Source* fp8_, const ModelInfo& info_,
          const Structure& s_, const VerifyOptions& opts_, FindingSink& sink_, VerifyStats& st_)
      : q(q_),
        src(src_),
        fp8(fp8_),
        info(info_),
        s(s_),
        opts(opts_),
        sink(sink_),
        st(st_),
        pool(opts_.jobs != 0 ? opts_.jobs : default_workers(searches(s_))) {
    st.jobs = pool.size();
  }
  const Checkpoint& q;
  const Checkpoint& src;
  const Fp8Source* fp8;
  const ModelInfo& info;
  const Structure& s;
  const VerifyOptions& opts;
  FindingSink& sink;
  VerifyStats& st;
  std::optional<SearchSpec> search_of(const Module& m) const { return verify_internal::search_of(s, m); }
  ThreadPool pool;                  // the search and the row chunks of each module
  std::set<std::string> src_used;   // source tensors accounted for
  std::set<const TensorRef*> q_used;
  std::unordered_map<const TensorRef*, std::size_t> src_refs;  // jobs left per source tensor
  double sum_w = 0, sum_rel = 0, sum_ref = 0, sum_mm = 0;
  std::vector<std::byte> pk1, sc1;  // one row of the sampled re-encode

  /** Step 3 for an NVFP4 member (below): its global scale, errors and sampled re-encode. */
  std::optional<TensorError> compare_nvfp4(Member& mem, float set_observed, float gs_set, float gs_minmax);
  void check_global_scale(const Member& mem, float gs_q, float set_observed, float gs_set);
  bool compare_chunks(const Member& mem, float gs_deq, float gs_ref, float gs_minmax, TensorError& te,
                      RowCompare* rows = nullptr);
  void reencode_sample(const Member& mem, float gs_q);
  void report_rows(const Member& mem, const RowCompare& rc);

  void record(TensorError te) {
    ++st.compared_quantized;
    te.group = s.group_index(te.module);
    const double w = static_cast<double>(te.rows) * static_cast<double>(te.cols);
    if (std::isfinite(te.rel_rms) && !te.exact) {  // an exact tensor's 0 is no measure of the encoding
      sum_w += w;
      sum_rel += w * te.rel_rms;
      sum_ref += w * te.ref_rel_rms;
      sum_mm += w * te.minmax_rel_rms;
    }
    st.max_rel_rms =
        std::isfinite(te.rel_rms) ? std::max(st.max_rel_rms, te.rel_rms) : std::numeric_limits<double>::infinity();
    if (!std::isfinite(te.rel_rms)) ++st.nonfinite_tensors;
    st.per_tensor.push_back(std::move(te));
  }
};

struct Job {
  std::vector<Member> members;
  std::string sort_key;
};

/** Step 1: the sets to compare (fused sets whose members are all valid quantized modules, then singletons),
 * each member with its source resolved, in source order; the quantized and source tensors they account for. */
std::vector<Job> plan_jobs(Against& r) {
  const Checkpoint& src = r.src;
  const Fp8Source* fp8 = r.fp8;
  const Structure& s = r.s;
  FindingSink& sink = r.sink;
  auto& src_used = r.src_used;
  auto& q_used = r.q_used;
  auto& src_refs = r.src_refs;
  const ModelInfo& info = r.info;
  const VerifyOptions& opts = r.opts;
  // An FP8 source is compared as its bf16 expansion: its scales and activation scales are no tensors of it.
  if (fp8)
    for (const auto& t : src.tensors())
      if (fp8->consumed(t.name)) src_used.insert(t.name);
  // Sets to process: fused sets whose members are all valid quantized modules, then singletons.
  std::vector<std::vector<const Module*>> work;
  std::set<std::string> in_set;
  for (const FusedSet& set : s.sets) {
    std::vector<const Module*> ms;
    for (const auto& mem : set.members) {
      const Module& m = s.modules.at(mem);
      if (m.quantized() && m.valid && !in_set.count(mem)) ms.push_back(&m);
    }
    if (ms.size() != set.members.size()) continue;
    for (auto* m : ms) in_set.insert(m->name);
    work.push_back(std::move(ms));
  }
  for (const auto& [name, m] : s.modules)
    if (m.quantized() && m.valid && !in_set.count(name)) work.push_back({&m});
  // Invalid quantized modules: their tensors are accounted for, not compared.
  for (const auto& [name, m] : s.modules) {
    if (!m.quantized()) continue;
    for (const TensorRef* t : m.members()) q_used.insert(t);
  }
  // Resolve sources first so fused 3-D sources can be released when their last slice is done.
  std::vector<Job> jobs;
  const std::vector<ExpertBlock> src_blocks = find_expert_blocks(named_shapes(src), info, opts.experts);
  for (auto& ms : work) {
    Job job;
    for (const Module* m : ms) {
      Member mem;
      mem.mod = m;
      bool undecided = false;
      auto err = resolve_source(src, fp8, src_blocks, m->name, m->n, m->k, mem.src, undecided);
      if (err && undecided) {
        sink.add(finding_kind("source-layout-undecided"),
                 {.group = family_of(m->name) + " source",
                  .message = fmt::format("could not compare '{}' with its source: {}", m->name, *err),
                  .tensors = {m->payload->name},
                  .expected = "a decidable fused-expert layout",
                  .actual = *err,
                  .hint = "pass --expert-orientation to verify"});
        continue;
      }
      if (err) {
        sink.add(finding_kind("extra-tensor"),
                 {.group = family_of(m->name) + " source",
                  .message = fmt::format("quantized module '{}' has no matching source weight: {}", m->name, *err),
                  .tensors = {m->payload->name},
                  .expected = "a source weight of the same shape",
                  .actual = *err,
                  .hint = "is --against the checkpoint this was quantized from?"});
        continue;
      }
      mem.ok = true;
      src_used.insert(mem.src.tensor->name);
      ++src_refs[mem.src.tensor];
      job.members.push_back(std::move(mem));
    }
    if (job.members.empty()) continue;
    job.sort_key = job.members[0].src.label;
    jobs.push_back(std::move(job));
  }
  // A family outside the registry: the fused gate_up order is the one quantize assumed, and reading the source
  // the same way cannot tell it from another. Said, not passed silently.
  if (info.family == Family::UNKNOWN) {
    std::set<std::string> assumed;
    for (const Job& j : jobs)
      for (const Member& m : j.members) {
        const ExpertBlock* b = block_of(src_blocks, m.mod->name);
        if (b != nullptr && b->storage == ExpertStorage::FUSED && !b->gate_up.empty() && m.src.tensor != nullptr &&
            m.src.tensor->name == b->gate_up)
          assumed.insert(b->gate_up);
      }
    if (!assumed.empty())
      sink.add(finding_kind("experts-order-assumed"),
               {.group = "experts source",
                .message =
                    fmt::format("the fused gate_up experts of {} layer(s) (e.g. '{}') of a family outside the registry "
                                "were compared as {}: the comparison cannot tell that order from another, so it proves "
                                "the bytes, not the gate/up assignment",
                                assumed.size(), *assumed.begin(), kAssumedGateUpOrder),
                .tensors = {assumed.begin(), assumed.end()},
                .expected = "a registry family's gate_up order",
                .actual = "assumed",
                .hint = "prove the output against the model's own class (scripts/check_logits.py) before serving it"});
  }
  std::sort(jobs.begin(), jobs.end(), [](const Job& a, const Job& b) { return a.sort_key < b.sort_key; });
  return jobs;
}

/** Progress unit: source bytes compared (each quantized member's slice, then each kept tensor). */
std::uint64_t member_bytes(const Member& m) {
  return m.src.rows * m.src.cols * static_cast<std::uint64_t>(dtype_bits(m.src.dtype) / 8);
}

/** Step 2, per job: each member's source expanded and checked (finite, a source dtype), its amax, and with
 * a searched observer its searched maxima; false (with the finding) when a source cannot be judged. */
/** A member's searched maxima with the observer `search` of its config group, as quantize ran it (the one place
 * verify searches: load_sources, and search_ahead for the next job). */
Result<std::vector<float>> search_member(Against& r, const Member& mem, const SearchSpec& search) {
  const nvfp4::WeightView v{mem.src.data, mem.src.dtype, mem.src.rows, mem.src.cols};
  return searched_group_maxima(r.s.layout(*mem.mod).qs, v, search, mem.src.label, &r.pool);
}

bool load_sources(Against& r, Job& job, float& set_amax, float& set_observed) {
  const Checkpoint& src = r.src;
  FindingSink& sink = r.sink;
  bool src_ok = true;
  // amax per member (R4 check on the source), then the set's expected gs.
  for (Member& mem : job.members) {
    if (Status e = expand(src, mem.src, r.pool); !e) {
      sink.add(finding_kind("nonfinite-kept-tensor"),
               {.group = family_of(mem.src.tensor->name) + " (source)",
                .message = fmt::format("source: {}", e.error().message),
                .tensors = {mem.src.tensor->name},
                .expected = "finite source values",
                .actual = "non-finite",
                .hint = "the source itself is corrupt (F17); the quantized tensor cannot be judged"});
      src_ok = false;
      break;
    }
    nvfp4::WeightView v{mem.src.data, mem.src.dtype, mem.src.rows, mem.src.cols};
    if (!is_source_dtype(mem.src.dtype)) {
      sink.add(finding_kind("extra-tensor"), {.group = family_of(mem.mod->name) + " source-dtype",
                                              .message = fmt::format("source '{}' has dtype {}, not BF16/F16/F32",
                                                                     mem.src.label, dtype_name(mem.src.dtype)),
                                              .tensors = {mem.src.tensor->name},
                                              .expected = "BF16, F16 or F32",
                                              .actual = std::string(dtype_name(mem.src.dtype))});
      src_ok = false;
      break;
    }
    auto a = nvfp4::amax(v, mem.src.label, &r.pool);  // the pool is idle here: the job before is done
    if (!a.ok()) {
      sink.add(finding_kind("nonfinite-kept-tensor"),
               {.group = family_of(mem.src.tensor->name) + " (source)",
                .message = fmt::format("source: {}", a.error().message),
                .tensors = {mem.src.tensor->name},
                .expected = "finite source values",
                .actual = "non-finite",
                .hint = "the source itself is corrupt (F17); the quantized tensor cannot be judged"});
      src_ok = false;
      break;
    }
    mem.amax = *a;
    mem.observed_amax = *a;
    set_amax = std::max(set_amax, *a);
    // A module passed through or cast from a low-bit source is proven equal to it here, and needs no search.
    if (mem.src.fp8 != nullptr)
      mem.lossless = compare_lossless(r.q, src, r.s.layout(*mem.mod), *mem.mod, mem.src, r.pool);
    if (const auto search = r.search_of(*mem.mod); search && !mem.lossless) {  // the observer's search, as quantize ran it
      auto m = mem.searched ? Result<std::vector<float>>(std::move(mem.maxima)) : search_member(r, mem, *search);
      if (!m.ok()) {
        src_ok = false;
        break;
      }
      mem.maxima = std::move(m).value();
      mem.observed_amax = 0;
      for (float x : mem.maxima) mem.observed_amax = std::max(mem.observed_amax, x);
    }
    set_observed = std::max(set_observed, mem.observed_amax);
  }
  return src_ok;
}

/** The searches of a job's members, run ahead on the shared pool while the job before it compares (verify is
 * otherwise one job at a time, and the search is most of its CPU). Only members whose source is in place (not
 * an FP8 source still to expand) and only what load_sources would compute: it takes the maxima as they are.
 * A search that fails (a non-finite source) leaves the member to load_sources, which reports it. The members
 * search at once, each from its own thread; each touches nothing but its member and the pool (parallel_for
 * waits for its own tasks only): no findings. */
void search_ahead(Against& r, Job& job) {
  auto one = [&r](Member& mem) {
    const auto search = r.search_of(*mem.mod);
    if (!search || mem.src.data == nullptr || !is_source_dtype(mem.src.dtype)) return;
    auto m = search_member(r, mem, *search);
    if (!m.ok()) return;  // load_sources stops at this member, with its finding
    mem.maxima = std::move(m).value();
    mem.searched = true;
  };
  // The members' searches at once (each waits for its own tasks), so the pool's queue holds the whole job
  // and one member's last tasks overlap the next one's instead of idling workers.
  std::vector<std::future<void>> rest;
  for (std::size_t i = 1; i < job.members.size(); ++i) {
    try {
      rest.push_back(std::async(std::launch::async, one, std::ref(job.members[i])));
    } catch (const std::system_error&) {
      one(job.members[i]);  // no thread to spare: this member in turn
    }
  }
  if (!job.members.empty()) one(job.members[0]);
  for (auto& f : rest) f.get();
}

/** Step 3, per NVFP4 member: the global scale against the source statistics, the module dequantized and
 * compared with the source and with the reference encoding (and min-max's), sampled rows re-encoded. The comparison
 * runs in row chunks of about 32K elements, so a chunk's float buffers (decoded, reference, min-max, source) stay
 * in a core's L2: at 1M elements they were 16 MB per thread, written and read back through memory, and the
 * comparison cost more CPU than the search it follows on a large model. */
std::optional<TensorError> Against::compare_nvfp4(Member& mem, float set_observed, float gs_set, float gs_minmax) {
  const Module& m = *mem.mod;
  const SchemeGroup& grp = s.group(m);
  const float gs_q = read_f32_scalar(q, m.gs).value_or(std::numeric_limits<float>::quiet_NaN());
  TensorError te;
  te.module = m.name;
  te.source = mem.src.label;
  te.rows = m.n;
  te.cols = m.k;
  te.global_scale = gs_q;
  te.expected_global_scale = gs_set;
  const bool gs_usable = std::isfinite(gs_q) && gs_q > 0;
  const bool full_rows =
      gs_usable && opts.reencode_rows > 0 && grp.observer_known && f32_bits(gs_q) == f32_bits(gs_set);
  RowCompare rows;
  if (!compare_chunks(mem, gs_usable ? gs_q : 1.0f, gs_set, gs_minmax, te, full_rows ? &rows : nullptr))
    return std::nullopt;
  // Not finite (a NaN scale byte, a zero global scale): infinite, so the worst list and the max put it first (issue 55
  // tryout I: a NaN sorted last, and max_rel_rms skipped it).
  if (!gs_usable || !std::isfinite(te.rel_rms)) te.rel_rms = std::numeric_limits<double>::infinity();
  // The source exactly: any encoding of exactly these values is right (a packed FP4 release's bf16 expansion, cast
  // losslessly), whatever its global scale; said as exact, like a cast from the packed source itself (issue 55
  // tryout: "global-scale-wrong" and "-100 % vs min-max" on the same weights as the FP8 folder's clean verdict).
  if (gs_usable && te.rel_rms == 0) {
    ++st.exact_modules;
    te.exact = true;
    te.ref_rel_rms = te.minmax_rel_rms = 0;
    te.expected_global_scale = std::numeric_limits<float>::quiet_NaN();
    return te;
  }
  if (grp.observer_known) check_global_scale(mem, gs_q, set_observed, gs_set);
  // The re-encode proof (F18). With the observer's own global scale, every row was compared with the reference
  // encoding above (issue 55 tryout F: a damaged row outside the sample passed); with another, sampled rows are
  // re-encoded by the scalar reference codec with the checkpoint's own gs.
  if (full_rows) {
    st.reencoded_rows += m.n;
    report_rows(mem, rows);
  } else if (gs_usable && opts.reencode_rows > 0 && grp.observer_known) {
    reencode_sample(mem, gs_q);
  }
  const double limit = std::max(opts.outlier_factor * te.ref_rel_rms, opts.outlier_floor);
  if (!(te.rel_rms <= limit)) {
    sink.add(
        finding_kind("error-outlier"),
        {.group = family_of(m.name),
         .message = fmt::format("'{}' relative RMS error vs source is {:.4g}, the reference NVFP4 encoding of the same "
                                "source gives {:.4g} (limit {:.4g})",
                                m.name, te.rel_rms, te.ref_rel_rms, limit),
         .tensors = {m.payload->name, m.scale->name, m.gs->name},
         .expected = fmt::format("<= {:.4g}", limit),
         .actual = fmt::format("{:.4g}", te.rel_rms),
         .hint = "wrong global scale (F19), corrupt scales or codes, or a tensor quantized from other data"});
  }
  return te;
}

/** compare_nvfp4's global scale `gs_q` against the source statistics: the set's (`gs_set`, from `set_observed`)
 * or the member's own. */
void Against::check_global_scale(const Member& mem, float gs_q, float set_observed, float gs_set) {
  const Module& m = *mem.mod;
  const float gs_own = nvfp4::global_scale(mem.observed_amax, mem.src.dtype);
  if (!std::isfinite(gs_q) || gs_q <= 0 || f32_bits(gs_q) == f32_bits(gs_set) || f32_bits(gs_q) == f32_bits(gs_own))
    return;
  auto dev = [&](float e) { return e > 0 ? std::max(gs_q / e, e / gs_q) : 1e30f; };
  const float d = std::min(dev(gs_set), dev(gs_own));
  if (d <= 1.01f) {
    // Within 1 % yet not the observer's own bits: harmless to the values, but the module is then re-encoded on a
    // sample of rows only, which is said (issue 55 tryout G: a flipped byte of a global scale left no finding, only
    // a smaller row count).
    sink.add(finding_kind("global-scale-wrong"),
             {.severity = Severity::INFO,
              .group = family_of(m.name),
              .message = fmt::format("'{}' weight_global_scale is {}, the source {} {} gives {} (off by {:.6g}x, "
                                     "within 1 %): not the observer's own value, so {} of its rows are re-encoded "
                                     "and compared instead of all {}",
                                     m.name, gs_q, search_of(m) ? "searched max" : "amax", set_observed, gs_set, d,
                                     std::min<std::uint64_t>(opts.reencode_rows, m.n), m.n),
              .tensors = {m.gs->name},
              .expected = fmt::format("{} (2688/amax, §2.2)", gs_set),
              .actual = fmt::format("{}", gs_q),
              .hint = "another tool's arithmetic, or a damaged byte of the scale"});
    return;
  }
  if (d > 1.01f) {
    sink.add(finding_kind("global-scale-wrong"),
             {.severity = d > 2.0f ? Severity::ERROR : Severity::WARNING,
              .group = family_of(m.name),
              .message = fmt::format("'{}' weight_global_scale is {}, the source {} {} gives {} (off by {:.3g}x)",
                                     m.name, gs_q, search_of(m) ? "searched max" : "amax", set_observed, gs_set, d),
              .tensors = {m.gs->name},
              .expected = fmt::format("{} (2688/amax, §2.2)", gs_set),
              .actual = fmt::format("{}", gs_q),
              // A config naming another observer than the one that wrote the scales reads the same (issue 55 tryout
              // I): the error against the source tells them apart.
              .hint = "a divisor/multiplier mix-up (F19) or a scale from other data (the values are then scaled "
                      "wrongly: error-outlier says so), or a config that names another observer than the one that "
                      "wrote the scales (the error against the source then stays near the reference's: see the "
                      "quality lines)"});
  }
}

/** compare_nvfp4's errors: the module dequantized with `gs_deq` (the checkpoint's global scale, 1 when unusable),
 * the reference encoding with `gs_ref` (and min-max's with `gs_minmax`, for a searched observer), each against
 * the source, in row chunks (about 32K elements: see compare_nvfp4). Fills te's relative RMS errors; false when
 * the reference encoding fails (no TensorError for the member). */
bool Against::compare_chunks(const Member& mem, float gs_deq, float gs_ref, float gs_minmax, TensorError& te,
                             RowCompare* rows_out) {
  const Module& m = *mem.mod;
  const std::uint64_t n = m.n, k = m.k;
  const std::uint64_t chunk = std::max<std::uint64_t>(1, (std::uint64_t{1} << 15) / std::max<std::uint64_t>(k, 1));
  const auto packed = q.data(*m.payload);
  const auto scales = q.data(*m.scale);
  nvfp4::WeightView v{mem.src.data, mem.src.dtype, n, k};
  const float* maxima = mem.maxima.empty() ? nullptr : mem.maxima.data();
  // Row chunks in parallel; each chunk's sums kept apart and added in order (the same total for any -j).
  struct ChunkSums {
    double err2 = 0, ref2 = 0, mm2 = 0, src2 = 0;
    bool ok = true;
    RowCompare rows;
  };
  const std::size_t nchunks = static_cast<std::size_t>((n + chunk - 1) / chunk);
  std::vector<ChunkSums> sums(nchunks);
  parallel_for(pool, nchunks, [&](std::size_t c) {
    const std::uint64_t r0 = c * chunk, r1 = std::min(n, r0 + chunk), rows = r1 - r0;
    static ThreadOwned<Scratch> scratch;
    auto& [deq, ref, mm, w32, pk, sc] = scratch.get();
    for (auto* b : {&deq, &ref, &w32}) b->resize(rows * k);
    pk.resize(rows * k / 2);
    sc.resize(rows * k / 16);
    ChunkSums& cs = sums[c];
    nvfp4::decode_rows(packed.data() + r0 * k / 2, scales.data() + r0 * k / 16, gs_deq, rows, k, deq.data());
    // The reference encoding with the config's observer (a searched one: its maxima).
    auto e = maxima ? nvfp4::encode_rows_maxima(v, gs_ref, maxima + r0 * (k / 16), r0, r1, pk.data(), sc.data(), m.name)
                    : nvfp4::encode_rows(v, gs_ref, r0, r1, pk.data(), sc.data(), m.name);
    if (!e.ok()) {
      cs.ok = false;
      return;
    }
    if (rows_out) compare_row_bytes(packed.data(), scales.data(), pk.data(), sc.data(), r0, r1, k, cs.rows);
    nvfp4::decode_rows(pk.data(), sc.data(), gs_ref, rows, k, ref.data());
    // And, for a searched observer, what min-max would have written: the quality report's baseline.
    if (maxima) {
      mm.resize(rows * k);
      if (!nvfp4::encode_rows(v, gs_minmax, r0, r1, pk.data(), sc.data(), m.name).ok()) {
        cs.ok = false;
        return;
      }
      nvfp4::decode_rows(pk.data(), sc.data(), gs_minmax, rows, k, mm.data());
    }
    load_floats(mem.src.data, mem.src.dtype, r0 * k, rows * k, w32.data());
    for (std::uint64_t i = 0; i < rows * k; ++i) {
      const double w = w32[i];
      const double dq = deq[i], rf = ref[i];
      cs.err2 += (dq - w) * (dq - w);
      cs.ref2 += (rf - w) * (rf - w);
      cs.src2 += w * w;
      if (maxima) cs.mm2 += (mm[i] - w) * (mm[i] - w);
    }
    if (!maxima) cs.mm2 = cs.ref2;
  });
  double err2 = 0, ref2 = 0, src2 = 0, mm2 = 0;
  bool enc_ok = true;
  for (const ChunkSums& cs : sums) {
    enc_ok = enc_ok && cs.ok;
    if (rows_out) {
      rows_out->bad += cs.rows.bad;
      rows_out->far += cs.rows.far;
      rows_out->first = std::min(rows_out->first, cs.rows.first);
      rows_out->codes = rows_out->codes || cs.rows.codes;
      rows_out->scales = rows_out->scales || cs.rows.scales;
    }
    err2 += cs.err2;
    ref2 += cs.ref2;
    mm2 += cs.mm2;
    src2 += cs.src2;
  }
  if (!enc_ok) return false;
  auto rel = [&](double e2) {
    if (src2 > 0) return std::sqrt(e2 / src2);
    return e2 > 0 || std::isnan(e2) ? std::numeric_limits<double>::infinity() : 0.0;
  };
  te.rel_rms = rel(err2);
  te.ref_rel_rms = rel(ref2);
  te.minmax_rel_rms = rel(mm2);
  return true;
}

/** compare_nvfp4's re-encode proof over every row: reencode_findings.cc. */
void Against::report_rows(const Member& mem, const RowCompare& rc) {
  if (rc.bad == 0) return;
  st.reencode_mismatched_rows += rc.bad;
  report_row_compare(*mem.mod, s.group(*mem.mod).observer_name, rc, sink);
}

/** compare_nvfp4's re-encode proof: opts.reencode_rows rows, spread over the module, re-encoded by the scalar
 * reference codec with the checkpoint's own global scale `gs_q` and compared byte for byte (F18). */
void Against::reencode_sample(const Member& mem, float gs_q) {
  const Module& m = *mem.mod;
  const SchemeGroup& grp = s.group(m);
  const std::uint64_t n = m.n, k = m.k;
  const auto packed = q.data(*m.payload);
  const auto scales = q.data(*m.scale);
  nvfp4::WeightView v{mem.src.data, mem.src.dtype, n, k};
  const float* maxima = mem.maxima.empty() ? nullptr : mem.maxima.data();
  const std::uint64_t want = std::min<std::uint64_t>(opts.reencode_rows, n);
  std::uint64_t bad = 0, first_bad = 0;
  pk1.resize(k / 2);
  sc1.resize(k / 16);
  for (std::uint64_t i = 0; i < want; ++i) {
    const std::uint64_t r = want == 1 ? 0 : i * (n - 1) / (want - 1);
    const bool enc = maxima ? nvfp4::encode_rows_maxima(v, gs_q, maxima + r * (k / 16), r, r + 1, pk1.data(),
                                                        sc1.data(), m.name, "scalar").ok()
                            : nvfp4::encode_rows_with("scalar", v, gs_q, r, r + 1, pk1.data(), sc1.data(), m.name).ok();
    if (!enc) break;
    ++st.reencoded_rows;
    if (std::memcmp(pk1.data(), packed.data() + r * k / 2, k / 2) != 0 ||
        std::memcmp(sc1.data(), scales.data() + r * k / 16, k / 16) != 0) {
      if (bad++ == 0) first_bad = r;
    }
  }
  st.reencode_mismatched_rows += bad;
  if (bad) {
    sink.add(
        finding_kind("reencode-mismatch"),
        {.group = family_of(m.name),
         .message = fmt::format("'{}': {} of {} sampled rows differ from the scalar reference encoding of the source "
                                "with the checkpoint's own global scale and observer {} (first row {})",
                                m.name, bad, want, grp.observer_name, first_bad),
         .tensors = {m.payload->name},
         .expected = fmt::format("byte-identical to compressed-tensors' RTN with observer {} (nvfp4a16-format.md §2)",
                                 grp.observer_name),
         .actual = fmt::format("{} rows differ", bad),
         // The re-encode used the checkpoint's own observer: corrupted bytes are as likely as another quantizer
         // (issue 55 tryout: one flipped byte read "another quantizer (MSE observer, ...)").
         .hint = fmt::format("corrupted bytes (a damaged copy or shard: `fp4forge diff DIR OTHER --values` against "
                             "another copy finds them), another quantizer than observer {} says (ModelOpt, a "
                             "patched llm-compressor), or environment-dependent numerics (F18)",
                             grp.observer_name)});
  }
}

/** Step 4: every tensor the quantized checkpoint keeps is bit-identical to the source (an FP8 source: its
 * bf16 expansion). */
void compare_kept(Against& r, ProgressScope& progress) {
  const Checkpoint& q = r.q;
  const Checkpoint& src = r.src;
  const Fp8Source* fp8 = r.fp8;
  FindingSink& sink = r.sink;
  VerifyStats& st = r.st;
  const auto& q_used = r.q_used;
  auto& src_used = r.src_used;
  for (const TensorRef& t : q.tensors()) {
    if (q_used.count(&t)) continue;
    progress.add(t.info->nbytes(), 1);
    const TensorRef* o = src.find(t.name);
    if (!o) {
      sink.add(finding_kind("extra-tensor"),
               {.group = family_of(t.name),
                .message = fmt::format("'{}' is in the quantized checkpoint but not in the source", t.name),
                .tensors = {t.name},
                .expected = "only tensors derived from the source",
                .actual = "extra tensor",
                .hint = "leaked buffers or a different source checkpoint (F20)"});
      continue;
    }
    src_used.insert(o->name);
    ++st.compared_kept;
    std::string why;
    if (const Fp8Weight* w = fp8 ? fp8->find(o->name) : nullptr) {  // kept FP8 weight: its bf16 expansion
      if (t.info->dtype != DType::BF16 || t.info->shape != w->shape) {
        why = fmt::format("{} {} where the FP8 source's expansion is BF16 {}", dtype_name(t.info->dtype),
                          format_shape(t.info->shape), format_shape(w->shape));
      } else {
        const auto a = q.data(t);
        const std::uint64_t n = st::shape_numel(w->shape), chunk = 1u << 20;
        std::vector<std::uint16_t> e(static_cast<std::size_t>(std::min(n, chunk)));
        for (std::uint64_t i = 0; i < n && why.empty(); i += chunk) {
          const std::uint64_t c = std::min(chunk, n - i);
          if (Status d = dequant_elements(src, *w, i, c, e.data()); !d) {
            why = d.error().message;
            break;
          }
          if (std::memcmp(a.data() + i * 2, e.data(), c * 2) != 0) {
            std::uint64_t j = 0;
            while (j < c && std::memcmp(a.data() + (i + j) * 2, &e[j], 2) == 0) ++j;
            why = fmt::format("element {} of {} differs from the bf16 expansion of the FP8 source", i + j, n);
          }
        }
        q.shards()[t.shard].release(*t.info);
        src.shards()[o->shard].release(*o->info);
      }
    } else if (t.info->dtype != o->info->dtype || t.info->shape != o->info->shape) {
      why = fmt::format("{} {} vs source {} {}", dtype_name(t.info->dtype), format_shape(t.info->shape),
                        dtype_name(o->info->dtype), format_shape(o->info->shape));
    } else {
      const auto a = q.data(t), b = src.data(*o);
      if (const auto i = first_difference(a, b, &r.pool))  // on the pool: a cold embedding reads at once
        why = fmt::format("bytes differ from offset {} of {}", *i, a.size());
      q.shards()[t.shard].release(*t.info);
      src.shards()[o->shard].release(*o->info);
    }
    if (!why.empty()) {
      sink.add(finding_kind("kept-tensor-modified"),
               {.group = family_of(t.name),
                .message = fmt::format("kept tensor '{}' is not bit-identical to the source: {}", t.name, why),
                .tensors = {t.name},
                .expected = "bit-identical passthrough",
                .actual = why,
                .hint = "passthrough tensors must be copied unchanged (norms, routers, towers, MTP ...)"});
    }
  }
}

}  // namespace

void compare_against(const Checkpoint& q, const Checkpoint& src, const Fp8Source* fp8, const ModelInfo& info,
                     const Structure& s, const VerifyOptions& opts, FindingSink& sink, VerifyStats& st) {
  st.against = true;
  Against r(q, src, fp8, info, s, opts, sink, st);
  for (const SchemeGroup& g : s.groups)
    if (!g.observer_known)
      sink.add(
          finding_kind("observer-unknown"),
          {.group = "observer",
           .message = fmt::format(
               "the weights' observer{} is \"{}\", which fp4forge cannot reproduce: the global-scale check "
               "and the re-encode proof were skipped; errors are compared with a min-max encoding",
               s.groups.size() > 1 ? fmt::format(" of config group '{}'", g.name) : std::string(), g.observer_name),
           .key = "quantization_config.config_groups.*.weights.observer",
           .expected = "memoryless_minmax, nvfp4_expanded_mse or memoryless_mse (docs/schemes.md#observers)",
           .actual = g.observer_name,
           .hint = "a calibrated or custom observer (GPTQ, imatrix, kwargs); the values are still compared with the "
                   "source"});
  std::vector<Job> jobs = plan_jobs(r);
  std::uint64_t total_bytes = 0, total_items = jobs.size();
  for (const Job& j : jobs)
    for (const Member& m : j.members) total_bytes += member_bytes(m);
  for (const TensorRef& t : q.tensors())
    if (!r.q_used.count(&t)) {
      total_bytes += t.info->nbytes();
      ++total_items;
    }
  ProgressScope progress(opts.progress, "verify", total_bytes, total_items);
  std::future<void> ahead;  // the next job's searches (search_ahead); joined before that job loads
  for (std::size_t ji = 0; ji < jobs.size(); ++ji) {
    Job& job = jobs[ji];
    // Read-ahead: the next job's source and quantized tensors load while this one computes.
    if (ji + 1 < jobs.size())
      for (const Member& mem : jobs[ji + 1].members) {
        if (mem.src.tensor != nullptr) src.shards()[mem.src.tensor->shard].prefetch(*mem.src.tensor->info);
        for (const TensorRef* t : mem.mod->members()) q.shards()[t->shard].prefetch(*t->info);
      }
    struct Unexpand {  // an FP8 source's expansion lives for its job only
      Job& j;
      ~Unexpand() {
        for (Member& m : j.members) unexpand(m.src);
      }
    } unexpand_at_end{job};
    float set_amax = 0, set_observed = 0;  // max|w| and the observer's max over the fused set
    if (ahead.valid()) ahead.get();        // this job's searches, run while the job before compared
    const bool loaded = load_sources(r, job, set_amax, set_observed);
    if (ji + 1 < jobs.size() && r.pool.size() > 1) {  // -j 1 stays one thread of work
      try {
        ahead = std::async(std::launch::async, [&r, next = &jobs[ji + 1]] { search_ahead(r, *next); });
      } catch (const std::system_error&) {
        // No thread to spare (ulimit, memory): the next job searches in load_sources, as with -j 1.
      }
    }
    if (loaded) {
      const DType dt = job.members[0].src.dtype;
      const float gs_set = nvfp4::global_scale(set_observed, dt);  // what the config's observer gives
      const float gs_minmax = nvfp4::global_scale(set_amax, dt);
      for (Member& mem : job.members) {
        if (mem.lossless) {  // proven in load_sources
          ++(mem.src.fp8->grid.payload == fp8::Payload::E2M1 ? st.cast_modules : st.passthrough_modules);
          mem.lossless->exact = true;
          r.record(std::move(*mem.lossless));
          continue;
        }
        if (!scheme_traits(s.layout(*mem.mod).qs).global_scale) {
          // Every other scheme: the whole module re-encoded and compared byte for byte.
          if (auto te = compare_reencoded(q, s.layout(*mem.mod), *mem.mod, mem.src, opts, sink, st, r.pool,
                                          r.search_of(*mem.mod) ? mem.maxima.data() : nullptr))
            r.record(std::move(*te));
          continue;
        }
        if (auto te = r.compare_nvfp4(mem, set_observed, gs_set, gs_minmax)) r.record(std::move(*te));
      }
    }
    if (job.members.empty()) progress.add(0, 1);
    for (std::size_t mi = 0; mi < job.members.size(); ++mi) {
      Member& mem = job.members[mi];
      const Module& m = *mem.mod;
      // The job counts as one item when its last member is done (issue 55: every job's item came at the end).
      progress.add(member_bytes(mem), mi + 1 == job.members.size() ? 1 : 0);
      for (const TensorRef* t : m.members()) q.shards()[t->shard].release(*t->info);
      if (--r.src_refs[mem.src.tensor] == 0) src.shards()[mem.src.tensor->shard].release(*mem.src.tensor->info);
      std::vector<float>().swap(mem.maxima);  // the job's searched maxima: 1/8 of its BF16 bytes, freed now
    }
  }
  if (r.sum_w > 0) {
    st.mean_rel_rms = r.sum_rel / r.sum_w;
    st.mean_ref_rel_rms = r.sum_ref / r.sum_w;
    st.mean_minmax_rel_rms = r.sum_mm / r.sum_w;
  }
  if (s.groups.size() > 1) {  // each group's own error, weighted as the means above
    std::vector<double> w(s.groups.size()), rel(s.groups.size()), mm(s.groups.size());
    std::vector<std::uint64_t> n(s.groups.size()), exact(s.groups.size());
    for (const TensorError& te : st.per_tensor) {
      if (te.group >= s.groups.size() || !std::isfinite(te.rel_rms)) continue;
      if (te.exact) {  // a group of them still gets its line (tryout N-M4: a lossless FP8 group had none)
        ++exact[te.group];
        continue;
      }
      const double x = static_cast<double>(te.rows) * static_cast<double>(te.cols);
      w[te.group] += x;
      rel[te.group] += x * te.rel_rms;
      mm[te.group] += x * te.minmax_rel_rms;
      ++n[te.group];
    }
    for (std::size_t g = 0; g < s.groups.size(); ++g)
      if (w[g] > 0 || exact[g] > 0)
        st.group_errors.push_back(
            {s.groups[g].name, n[g], w[g] > 0 ? rel[g] / w[g] : 0.0, w[g] > 0 ? mm[g] / w[g] : 0.0, exact[g]});
  }
  std::sort(st.per_tensor.begin(), st.per_tensor.end(),
            [](const TensorError& a, const TensorError& b) { return a.module < b.module; });
  st.worst = st.per_tensor;
  std::stable_sort(st.worst.begin(), st.worst.end(),
                   [](const TensorError& a, const TensorError& b) { return a.rel_rms > b.rel_rms; });
  if (st.worst.size() > opts.worst_n) st.worst.resize(opts.worst_n);


  // Kept tensors: bit-identical to the source.
  compare_kept(r, progress);
  for (const TensorRef& t : src.tensors()) {
    if (r.src_used.count(t.name)) continue;
    sink.add(finding_kind("missing-tensor"),
             {.group = family_of(t.name),
              .message = fmt::format("source tensor '{}' ({} {}) has no counterpart in the quantized checkpoint",
                                     t.name, dtype_name(t.info->dtype), format_shape(t.info->shape)),
              .tensors = {t.name},
              .expected = fmt::format("passthrough, or {}",
                                      fmt::join(s.group_of(split_name(t.name).first).layout.suffixes, "/")),
              .actual = "(absent)",
              .hint = "dropped on the way (MTP tensors, F8) or quantized under another name"});
  }
}

}  // namespace fp4forge::verify_internal
