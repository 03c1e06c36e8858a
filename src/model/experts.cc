// Routed-expert storage forms and the per-expert matrix views into them (include/fp4forge/model/experts.h).
#include "fp4forge/model/experts.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fp4forge/model/classify.h"
#include "fp4forge/model/tensor_names.h"

namespace fp4forge {
namespace {

std::string shape_text(std::span<const std::uint64_t> s) { return fmt::format("[{}]", fmt::join(s, ", ")); }

bool is_part_role(Role r) { return r == Role::EXPERT_GATE || r == Role::EXPERT_UP || r == Role::EXPERT_DOWN; }

/** The block key of a 3-D expert stack: `<key>.gate_up_proj` (the leaf is the projection: its module), or
 * `<block>.input_linear.weight` (Granite: the module's parent, then `experts`). */
std::string fused_key(const TensorClass& c) {
  if (c.param_kind != ParamKind::WEIGHT) return c.module;
  const std::string_view parent = names::module_of(c.module);
  return parent.empty() ? std::string("experts") : std::string(parent) + ".experts";
}

int role_rank(Role r) { return r == Role::EXPERT_GATE ? 0 : r == Role::EXPERT_UP ? 1 : 2; }

struct FusedPair {
  const NamedShape* gate_up = nullptr;
  const NamedShape* gate = nullptr;  // separate 3-D gate / up (Step-3.x): each [E, I, H] or [E, H, I]
  const NamedShape* up = nullptr;
  const NamedShape* down = nullptr;
  bool mtp = false;
};

/** E, I (one projection's width) and H of the gate side (gate_up halves, or gate / up) under orientation o. */
struct Dims {
  std::uint64_t e = 0, i = 0, h = 0;
  bool ok = false;
};
Dims gate_side(const FusedPair& f, bool oi) {
  Dims d;
  if (f.gate_up != nullptr) {
    const auto& s = f.gate_up->shape;
    const std::uint64_t two_i = oi ? s[1] : s[2];
    d = {s[0], two_i / 2, oi ? s[2] : s[1], two_i != 0 && two_i % 2 == 0};
  } else if (f.gate != nullptr || f.up != nullptr) {
    const auto& s = (f.gate != nullptr ? f.gate : f.up)->shape;
    d = {s[0], oi ? s[1] : s[2], oi ? s[2] : s[1], s[1] != 0 && s[2] != 0};
    if (f.gate != nullptr && f.up != nullptr && !std::equal(f.gate->shape.begin(), f.gate->shape.end(),
                                                             f.up->shape.begin(), f.up->shape.end()))
      d.ok = false;
  }
  return d;
}

/** Whether the fused tensors fit orientation `o` (with hidden size H when known). */
bool fits(const FusedPair& f, FusedOrientation o, std::uint64_t H) {
  const bool oi = o == FusedOrientation::OUT_IN;
  const bool has_gate = f.gate_up != nullptr || f.gate != nullptr || f.up != nullptr;
  const Dims g = gate_side(f, oi);
  if (has_gate && (!g.ok || (H != 0 && g.h != H))) return false;
  if (f.down != nullptr) {
    const auto& s = f.down->shape;
    const std::uint64_t h = oi ? s[1] : s[2];
    if (s[1] == 0 || s[2] == 0 || (H != 0 && h != H)) return false;
    if (has_gate) {
      const std::uint64_t di = oi ? s[2] : s[1];
      if (g.e != s[0] || g.h != h || g.i != di) return false;
    }
  }
  return true;
}

std::string reading(const FusedPair& f, FusedOrientation o) {
  const bool oi = o == FusedOrientation::OUT_IN;
  std::uint64_t I = 0, H = 0;
  if (f.gate_up != nullptr || f.gate != nullptr || f.up != nullptr) {
    const Dims g = gate_side(f, oi);
    I = g.i;
    H = g.h;
  } else if (f.down != nullptr) {
    I = oi ? f.down->shape[2] : f.down->shape[1];
    H = oi ? f.down->shape[1] : f.down->shape[2];
  }
  return fmt::format("{} ({}: I = {}, H = {})", oi ? "[E, 2I, H] / [E, H, I]" : "[E, H, 2I] / [E, I, H]",
                     orientation_name(o), I, H);
}

void decide_fused(ExpertBlock& b, const FusedPair& f, const ModelInfo& info, const ExpertLayoutOptions& opts) {
  const std::uint64_t H = info.hidden_size > 0 ? static_cast<std::uint64_t>(info.hidden_size) : 0;
  std::vector<std::string> names;
  for (const NamedShape* t : {f.gate_up, f.gate, f.up})
    if (t) names.push_back(fmt::format("'{}' {}", t->name, shape_text(t->shape)));
  if (f.down) names.push_back(fmt::format("'{}' {}", f.down->name, shape_text(f.down->shape)));
  const std::string what = fmt::format("{}", fmt::join(names, " and "));
  const bool oi = fits(f, FusedOrientation::OUT_IN, H), io = fits(f, FusedOrientation::IN_OUT, H);
  FusedOrientation o = FusedOrientation::OUT_IN;
  if (opts.orientation) {
    o = *opts.orientation;
    if (!(o == FusedOrientation::OUT_IN ? oi : io)) {
      b.problem = fmt::format("fused experts {}: --expert-orientation {} does not fit the shapes (hidden_size {})",
                              what, orientation_name(o), H);
      return;
    }
  } else if (oi && !io) {
    o = FusedOrientation::OUT_IN;
  } else if (io && !oi) {
    o = FusedOrientation::IN_OUT;
  } else if (!oi && !io) {
    b.problem = fmt::format("fused experts {} fit neither [E, 2I, H] / [E, H, I] nor [E, H, 2I] / [E, I, H] with "
                            "hidden_size {}; the tensors or the config are damaged",
                            what, H);
    return;
  } else {
    b.ambiguous = true;
    b.problem = fmt::format("fused experts {} are ambiguous: they read as {} or as {}; pass "
                            "--expert-orientation out-in or in-out to settle it",
                            what, reading(f, FusedOrientation::OUT_IN), reading(f, FusedOrientation::IN_OUT));
    return;
  }
  b.orientation = o;
  const bool out_in = o == FusedOrientation::OUT_IN;
  const bool inter = b.order == GateUpOrder::INTERLEAVED;
  if (f.gate_up || f.gate || f.up) {
    const Dims g = gate_side(f, out_in);
    b.num_experts = g.e;
    b.intermediate = g.i;
    b.hidden = g.h;
  } else {
    const auto& s = f.down->shape;
    b.num_experts = s[0];
    b.intermediate = out_in ? s[2] : s[1];
    b.hidden = out_in ? s[1] : s[2];
  }
  const std::uint64_t I = b.intermediate, Hs = b.hidden;
  const auto& leaves = info.spec().expert_leaves;
  for (std::uint64_t e = 0; e < b.num_experts; ++e) {
    auto part = [&](Role r, std::string_view proj, std::string_view tensor, MatrixSlice sl) {
      b.parts.push_back({static_cast<int>(e), r, fmt::format("{}.{}.{}", b.key, e, proj), std::string(tensor), sl});
    };
    if (f.gate_up) {
      const std::uint64_t base = e * 2 * I * Hs;
      for (int k = 0; k < 2; ++k) {
        MatrixSlice sl;
        sl.rows = I;
        sl.cols = Hs;
        if (out_in) {  // element (r, c) = [e, row(r), c]
          sl.offset = base + static_cast<std::uint64_t>(k) * (inter ? Hs : I * Hs);
          sl.row_stride = inter ? 2 * Hs : Hs;
          sl.col_stride = 1;
        } else {  // element (r, c) = [e, c, col(r)]
          sl.offset = base + static_cast<std::uint64_t>(k) * (inter ? 1 : I);
          sl.row_stride = inter ? 2 : 1;
          sl.col_stride = 2 * I;
        }
        part(k == 0 ? Role::EXPERT_GATE : Role::EXPERT_UP, leaves[static_cast<std::size_t>(k)], f.gate_up->name, sl);
      }
    }
    // One expert's matrix of a per-projection 3-D stack [E, rows, cols] (out-in) or [E, cols, rows] (in-out):
    // separate gate / up ([I, H] each) and down ([H, I]).
    auto stacked = [&](Role r, std::size_t leaf, const NamedShape* t, std::uint64_t rows, std::uint64_t cols) {
      if (t == nullptr) return;
      MatrixSlice sl;
      sl.offset = e * I * Hs;
      sl.rows = rows;
      sl.cols = cols;
      sl.row_stride = out_in ? cols : 1;
      sl.col_stride = out_in ? 1 : rows;
      part(r, leaves[leaf], t->name, sl);
    };
    stacked(Role::EXPERT_GATE, 0, f.gate, I, Hs);
    stacked(Role::EXPERT_UP, 1, f.up, I, Hs);
    stacked(Role::EXPERT_DOWN, 2, f.down, Hs, I);
  }
}

}  // namespace

void gather_rows(const std::byte* base, std::size_t es, const MatrixSlice& s, std::uint64_t r0, std::uint64_t r1,
                 std::byte* out) {
  if (s.col_stride == 1) {
    for (std::uint64_t r = r0; r < r1; ++r)
      std::memcpy(out + (r - r0) * s.cols * es, base + (s.offset + r * s.row_stride) * es, s.cols * es);
    return;
  }
  for (std::uint64_t r = r0; r < r1; ++r) {
    const std::byte* src = base + (s.offset + r * s.row_stride) * es;
    std::byte* dst = out + (r - r0) * s.cols * es;
    for (std::uint64_t c = 0; c < s.cols; ++c) std::memcpy(dst + c * es, src + c * s.col_stride * es, es);
  }
}

std::string_view orientation_name(FusedOrientation o) noexcept {
  return o == FusedOrientation::OUT_IN ? "out-in" : "in-out";
}

std::optional<FusedOrientation> parse_orientation(std::string_view s) noexcept {
  if (s == "out-in") return FusedOrientation::OUT_IN;
  if (s == "in-out") return FusedOrientation::IN_OUT;
  return std::nullopt;
}

std::vector<ExpertBlock> find_expert_blocks(std::span<const NamedShape> tensors, const ModelInfo& info,
                                            const ExpertLayoutOptions& opts) {
  std::map<std::string, FusedPair, std::less<>> fused;
  std::map<std::string, ExpertBlock, std::less<>> per;
  for (const auto& t : tensors) {
    const TensorClass c = classify(t.name, t.shape, info);
    const bool mtp = c.role == Role::MTP;
    const Role r = mtp ? c.base_role : c.role;
    if ((r == Role::EXPERT_GATE_UP_FUSED || r == Role::EXPERT_DOWN_FUSED) && c.expert < 0 && t.shape.size() == 3) {
      // `<key>.gate_up_proj` (the parameter is the projection) or `<block>.input_linear.weight` (Granite).
      const std::string key = fused_key(c);
      FusedPair& f = fused[key];
      (r == Role::EXPERT_GATE_UP_FUSED ? f.gate_up : f.down) = &t;
      f.mtp = f.mtp || mtp;
      continue;
    }
    if ((r == Role::EXPERT_GATE || r == Role::EXPERT_UP || r == Role::EXPERT_DOWN) && c.expert < 0 &&
        t.shape.size() == 3) {
      // Separate 3-D projections: `<key>.gate_proj` (parameter) or `<block>.gate_proj.weight`.
      const std::string key = fused_key(c);
      FusedPair& f = fused[key];
      (r == Role::EXPERT_GATE ? f.gate : r == Role::EXPERT_UP ? f.up : f.down) = &t;
      f.mtp = f.mtp || mtp;
      continue;
    }
    if (!is_part_role(r) || c.expert < 0) continue;
    const bool w = c.param == "weight" && t.shape.size() == 2;
    const bool packed = c.param == "weight_packed" && t.shape.size() == 2;
    if (!w && !packed) continue;
    const std::string_view key = experts_key_of(c.module);
    if (key.empty()) continue;
    ExpertBlock& b = per[std::string(key)];
    b.mtp = b.mtp || mtp;
    ExpertPart p;
    p.expert = c.expert;
    p.role = r;
    p.module = c.module;
    p.tensor = std::string(t.name);
    p.slice.rows = t.shape[0];
    p.slice.cols = packed ? t.shape[1] * 2 : t.shape[1];
    p.slice.row_stride = p.slice.cols;
    b.parts.push_back(std::move(p));
  }
  std::vector<ExpertBlock> out;
  for (auto& [key, b] : per) {
    b.key = key;
    b.storage = ExpertStorage::PER_EXPERT;
    std::sort(b.parts.begin(), b.parts.end(), [](const ExpertPart& x, const ExpertPart& y) {
      return x.expert != y.expert ? x.expert < y.expert : role_rank(x.role) < role_rank(y.role);
    });
    if (!b.parts.empty()) b.num_experts = static_cast<std::uint64_t>(b.parts.back().expert) + 1;
    out.push_back(std::move(b));
  }
  for (const auto& [key, f] : fused) {
    ExpertBlock b;
    b.key = key;
    b.storage = ExpertStorage::FUSED;
    b.order = info.spec().gate_up_order;
    b.mtp = f.mtp;
    if (f.gate_up) b.gate_up = std::string(f.gate_up->name);
    if (f.down) b.down = std::string(f.down->name);
    if (f.gate) b.gate = std::string(f.gate->name);
    if (f.up) b.up = std::string(f.up->name);
    if ((f.gate == nullptr) != (f.up == nullptr) || (f.gate_up != nullptr && (f.gate || f.up))) {
      b.problem = fmt::format("experts '{}' store {}: expected gate_up, or gate and up together, beside down", key,
                              f.gate_up ? "gate_up and a separate gate or up" : f.gate ? "gate without up"
                                                                                    : "up without gate");
      out.push_back(std::move(b));
      continue;
    }
    decide_fused(b, f, info, opts);
    out.push_back(std::move(b));
  }
  std::sort(out.begin(), out.end(), [](const ExpertBlock& x, const ExpertBlock& y) { return x.key < y.key; });
  return out;
}

std::vector<std::string> ExpertBlock::stored() const {
  std::vector<std::string> v;
  for (const std::string* t : {&gate_up, &gate, &up, &down})
    if (!t->empty()) v.push_back(*t);
  return v;
}

std::vector<int> drop_zero_experts(ExpertBlock& b, const ModelInfo& info) {
  const std::int64_t E = info.num_experts;
  std::set<int> zero;
  if (E <= 0 || info.zero_experts <= 0) return {};
  std::erase_if(b.parts, [&](const ExpertPart& p) {
    const bool z = p.expert >= E && p.expert < E + info.zero_experts;
    if (z) zero.insert(p.expert);
    return z;
  });
  return {zero.begin(), zero.end()};
}

std::vector<int> incomplete_experts(const ExpertBlock& b) {
  std::map<int, unsigned> have;  // bit 0 gate, 1 up, 2 down
  unsigned all = 0;
  for (const auto& p : b.parts) {
    const unsigned bit = 1u << role_rank(p.role);
    have[p.expert] |= bit;
    all |= bit;
  }
  const bool shape_ok = all == 7u || all == 6u;  // gate+up+down, or up+down
  std::vector<int> out;
  for (const auto& [e, m] : have)
    if (!shape_ok || m != all) out.push_back(e);
  return out;
}

std::string_view experts_key_of(std::string_view module) noexcept {
  const std::size_t pos = module.rfind(".experts.");
  return pos == std::string_view::npos ? std::string_view() : module.substr(0, pos + 8);
}

const ExpertBlock* block_of(std::span<const ExpertBlock> blocks, std::string_view module) noexcept {
  for (const auto& b : blocks)
    if (module.size() > b.key.size() + 1 && module.substr(0, b.key.size()) == b.key && module[b.key.size()] == '.')
      return &b;
  return nullptr;
}

const ExpertPart* part_of(std::span<const ExpertBlock> blocks, std::string_view module) noexcept {
  const ExpertBlock* b = block_of(blocks, module);
  if (b == nullptr) return nullptr;
  for (const auto& p : b->parts)
    if (p.module == module) return &p;
  return nullptr;
}

}  // namespace fp4forge
