#include "quantize/cast.h"

#include <fmt/format.h>

#include "fp4forge/codec/mxfp4_cast.h"
#include "fp4forge/codec/scheme.h"
#include "fp4forge/model/fp8_source.h"

namespace fp4forge::quant::detail {
namespace {

mxcast::Target target_of(const QuantPlan& plan, std::size_t scheme) {
  return scheme_traits(plan.schemes[scheme].scheme).e2m1_cast;
}

}  // namespace

CastDecision decide_casts(const Checkpoint& ck, const QuantPlan& plan, ThreadPool& pool) {
  CastDecision out;
  out.shift.assign(plan.groups.size(), std::nullopt);
  if (!plan.lossless_casts) return out;
  std::vector<std::size_t> candidates;  // groups of a scheme that takes packed FP4, with a packed FP4 member
  std::vector<mxcast::Range> ranges;    // their scales' exponents
  for (std::size_t g = 0; g < plan.groups.size(); ++g) {
    const ScaleGroup& grp = plan.groups[g];
    if (target_of(plan, grp.scheme) == mxcast::Target::NONE || grp.units.empty()) continue;
    bool all = true, any = false;  // every unit a whole 2-D packed FP4 weight (any: at least one is packed FP4)
    for (auto u : grp.units) {
      const QuantUnit& un = plan.units[u];
      const Fp8Weight* f = plan.fp8_of(un.decision);
      const bool fp4 = f != nullptr && f->grid.payload == fp8::Payload::E2M1;
      any = any || fp4;
      all = all && fp4 && f->shape.size() == 2 && un.rows == f->shape[0] && un.cols == f->shape[1] &&
            un.slice.offset == 0 && un.slice.contiguous();
    }
    if (!any) continue;
    candidates.push_back(g);
    ranges.emplace_back();
    if (!all) ranges.back().why = "its members are not all whole packed FP4 weights";
  }
  // The candidates' scales read on the pool: scattered over the shards, and cold, they would serialize the start.
  parallel_for(pool, candidates.size(), [&](std::size_t i) {
    mxcast::Range& r = ranges[i];
    for (auto u : plan.groups[candidates[i]].units) {
      if (!r.why.empty()) break;
      const Fp8Weight* f = plan.fp8_of(plan.units[u].decision);
      const TensorRef* st = f != nullptr ? ck.find(f->scale) : nullptr;
      if (st == nullptr) {
        r.why = "a member's scale is not in the checkpoint";
        break;
      }
      mxcast::add_scales(r, ck.data(*st).data(), st->info->numel(), f->grid.scale_dtype);
    }
  });
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const ScaleGroup& grp = plan.groups[candidates[i]];
    if (const auto m = mxcast::shift(ranges[i], target_of(plan, grp.scheme))) {
      out.shift[candidates[i]] = m;
      out.units += grp.units.size();
    } else {
      out.refused.push_back(fmt::format("{}: {}", grp.name, ranges[i].why));
    }
  }
  return out;
}

Status cast_unit_rows(const Checkpoint& ck, const QuantPlan& plan, const QuantUnit& u, int m, std::uint64_t r0,
                      std::uint64_t r1, std::vector<std::byte>& payload, std::vector<std::byte>& scale,
                      std::uint64_t& scale_row_bytes) {
  const Fp8Weight* w = plan.fp8_of(u.decision);
  const TensorRef* pt = ck.find(plan.decisions[u.decision].name);
  const TensorRef* st = w != nullptr ? ck.find(w->scale) : nullptr;
  if (pt == nullptr || st == nullptr)
    return make_error(Errc::INTERNAL, "cast unit '{}': its payload or scale is not in the checkpoint", u.module);
  const std::uint64_t n = r1 - r0, src_cols = w->grid.scale_cols(), es = dtype_bits(w->grid.scale_dtype) / 8;
  const auto packed = ck.data(*pt).subspan(r0 * u.cols / 2, n * u.cols / 2);
  const auto scales = ck.data(*st).subspan(r0 * src_cols * es, n * src_cols * es);
  const mxcast::Target t = target_of(plan, u.scheme);
  scale_row_bytes = u.cols / (t == mxcast::Target::MXFP4 ? 32 : 16);  // one byte per group of the target
  payload.resize(static_cast<std::size_t>(n * u.cols / 2));
  scale.resize(static_cast<std::size_t>(n * scale_row_bytes));
  mxcast::cast_rows(packed.data(), scales.data(), w->grid.scale_dtype, n, u.cols, t, m, payload.data(), scale.data());
  return {};
}

}  // namespace fp4forge::quant::detail
