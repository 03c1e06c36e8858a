// verify --against: a quantized module's source as a 2-D weight (verify/source_view.h).
#include "verify/source_view.h"

namespace fp4forge::verify_internal {

void unexpand(SourceView& v) {
  if (v.fp8 == nullptr) return;
  v.data = nullptr;
  std::vector<std::byte>().swap(v.owned);
}

Status expand(const Checkpoint& src, SourceView& v, ThreadPool& pool) {
  if (v.fp8 == nullptr || v.data != nullptr) return {};
  v.owned.resize(static_cast<std::size_t>(v.rows * v.cols * 2));
  auto* out = reinterpret_cast<std::uint16_t*>(v.owned.data());
  const std::uint64_t chunk = std::max<std::uint64_t>(1, (std::uint64_t{1} << 20) / std::max<std::uint64_t>(v.cols, 1));
  const std::size_t nchunks = static_cast<std::size_t>((v.rows + chunk - 1) / chunk);
  std::vector<Status> st(nchunks);
  parallel_for(pool, nchunks, [&](std::size_t c) {
    const std::uint64_t r0 = c * chunk, r1 = std::min(v.rows, r0 + chunk);
    st[c] = dequant_slice_rows(src, *v.fp8, v.slice, r0, r1, out + r0 * v.cols);
  });
  for (Status& e : st)
    if (!e) {
      unexpand(v);
      return e;
    }
  v.data = v.owned.data();
  return {};
}

std::optional<std::string> resolve_source(const Checkpoint& src, const Fp8Source* fp8,
                                          std::span<const ExpertBlock> blocks, const std::string& module,
                                          std::uint64_t n, std::uint64_t k, SourceView& out, bool& undecided) {
  undecided = false;
  if (const TensorRef* t = src.find(module + ".weight")) {
    const Fp8Weight* fw = fp8 ? fp8->find(t->name) : nullptr;
    const auto& sh = fw != nullptr ? fw->shape : t->info->shape;  // a packed FP4 payload: its expansion's shape
    if (sh.size() != 2 || sh[0] != n || sh[1] != k)
      return fmt::format("source '{}' is {}, the quantized module is [{}, {}]", t->name, format_shape(sh), n, k);
    out.tensor = t;
    out.label = t->name;
    out.dtype = t->info->dtype;
    out.rows = n;
    out.cols = k;
    if (fw != nullptr) {
      out.fp8 = fw;
      out.dtype = DType::BF16;
      out.slice = {0, n, k, k, 1};
      return std::nullopt;
    }
    out.data = src.data(*t).data();
    return std::nullopt;
  }
  const ExpertBlock* b = block_of(blocks, module);
  if (b == nullptr || b->storage != ExpertStorage::FUSED) return std::string("no source tensor '" + module + ".weight'");
  if (!b->problem.empty()) {
    undecided = true;
    return b->problem;
  }
  const ExpertPart* p = part_of(blocks, module);
  if (p == nullptr)
    return fmt::format("no source tensor '{}.weight', and the fused experts of '{}' hold no such part", module, b->key);
  const TensorRef* t = src.find(p->tensor);
  if (t == nullptr) return fmt::format("fused source '{}' missing", p->tensor);
  if (p->slice.rows != n || p->slice.cols != k)
    return fmt::format("fused source '{}' {} holds {} as [{}, {}] ({}), the quantized module is [{}, {}]", t->name,
                       format_shape(t->info->shape), module, p->slice.rows, p->slice.cols,
                       orientation_name(b->orientation), n, k);
  out.tensor = t;
  out.dtype = t->info->dtype;
  out.rows = n;
  out.cols = k;
  const std::size_t es = elem_size(t->info->dtype);
  if (const Fp8Weight* w = fp8 ? fp8->find(t->name) : nullptr) {
    out.fp8 = w;
    out.dtype = DType::BF16;
    out.slice = p->slice;
  } else if (p->slice.contiguous()) {
    out.data = src.data(*t).data() + p->slice.offset * es;
  } else {
    out.owned.resize(n * k * es);
    gather_rows(src.data(*t).data(), es, p->slice, 0, n, out.owned.data());
    out.data = out.owned.data();
  }
  out.label = fmt::format("{}[{} of expert {}, {}]", t->name, role_name(p->role), p->expert,
                          orientation_name(b->orientation));
  return std::nullopt;
}

}  // namespace fp4forge::verify_internal
