// The non-KV memory terms of a seat (budget.h). Every constant here is fitted to, or read from, the
// startup logs listed in docs/plan-overheads.md ("Calibration"); the formulas say which widths they scale
// with.
#include "fp4forge/kvplan/budget.h"

#include <algorithm>

#include "fp4forge/util/checked.h"
#include "fp4forge/util/size.h"
#include "fp4forge/kvplan/kv_cache.h"

namespace fp4forge::kvplan {
namespace {

constexpr std::uint64_t kActBytes = 2;          // bf16/fp16 activations
constexpr std::int64_t kFusedMoeChunk = 32768;  // VLLM_FUSED_MOE_CHUNK_SIZE: fused_moe caches at most this many tokens
constexpr double kForwardFactor = 2.7;          // bytes per (token x (H + 3I)) at a dense layer's peak
constexpr double kHiddenFactor = 2.3;           // bytes per (token x H) kept for the sampler
constexpr double kLogitBytes = 14.7;            // bytes per logit of the sampler, vLLM >= 0.19
constexpr double kLogitBytesOld = 38.4;         // the same before 0.19 (measured at 0.6 and 0.11)
constexpr std::uint64_t kGraphBase = 450ull << 20;   // CUDA graphs at 51 capture sizes: base ...
constexpr std::uint64_t kGraphPerLayer = 16ull << 20;  // ... plus this per decoder layer
constexpr int kGraphSizesMeasured = 51;

using util::sat_add;
using util::sat_mul;

std::uint64_t u(std::int64_t v) { return v > 0 ? static_cast<std::uint64_t>(v) : 0; }
std::uint64_t scale(std::uint64_t v, double f) { return util::sat_from_double(static_cast<double>(v) * f); }

/** Peak of a dense decoder layer at `tokens`: input, gate_up [2I] and the activation [I] (fitted factor). */
std::uint64_t dense_forward(const ModelInfo& m, std::int64_t tokens, int tp) {
  const std::uint64_t inter = u(m.intermediate_size) / u(std::max(1, tp));
  return scale(sat_mul(u(tokens), sat_add(u(m.hidden_size), sat_mul(3, inter))), kForwardFactor);
}

/** fused_moe's caches: intermediate_cache1 [T, k, 2I], cache2 [T*k, I], cache3 [T, k, H] (model dtype). */
std::uint64_t moe_workspace(const ModelInfo& m, std::int64_t tokens, int tp) {
  if (m.num_experts <= 0 || m.experts_per_tok <= 0) return 0;
  const std::uint64_t t = u(std::min(tokens, kFusedMoeChunk)), k = u(m.experts_per_tok);
  const std::uint64_t mi = u(m.moe_intermediate_size > 0 ? m.moe_intermediate_size : m.intermediate_size) /
                           u(std::max(1, tp));
  return sat_mul({t, k, sat_add(sat_mul(3, mi), u(m.hidden_size)), kActBytes});
}

}  // namespace

std::int64_t default_max_num_seqs(std::uint64_t gpu_total_bytes, std::string_view gpu_name) {
  return vllm_large_gpu(gpu_total_bytes, gpu_name) ? 1024 : 256;
}

int cuda_graph_size_count(const VllmRules& r, const ProfileShape& p) {
  if (p.enforce_eager) return 0;
  const std::int64_t seqs = std::max<std::int64_t>(p.max_num_seqs, 1);
  const std::int64_t default_cap = r.sm100_graph_cap_1024 && p.sm100 ? 1024 : r.cuda_graph_cap;
  std::int64_t cap = default_cap;
  if (at_least(r, 0, 11, 1))
    cap = std::min<std::int64_t>(seqs * (1 + std::max(0, p.spec_tokens)) * 2, default_cap);
  else if (at_least(r, 0, 10))
    cap = std::min<std::int64_t>(seqs * 2, default_cap);
  cap = std::min(cap, p.batched_tokens);
  int n = 0;
  for (std::int64_t s : {1, 2, 4})
    if (s <= cap) ++n;
  const bool step16 = at_least(r, 0, 11, 1);  // step 8 below 256, 16 from 256 on
  for (std::int64_t s = 8; s <= cap && (!step16 || s < 256); s += 8) ++n;
  if (step16)
    for (std::int64_t s = 256; s <= cap; s += 16) ++n;
  return n;
}

OverheadTerms estimate_overhead(const ModelInfo& m, const ProfileShape& p, const VllmRules& r) {
  OverheadTerms o;
  const std::int64_t rows = std::min(p.batched_tokens, std::max<std::int64_t>(p.max_num_seqs, 1));
  o.activation = dense_forward(m, p.batched_tokens, p.tp);
  // The sampler runs on the gathered full vocabulary on every rank, beside the hidden states of the
  // forward pass and (MoE) the fused-MoE workspace the forward left allocated.
  const double per_logit = at_least(r, 0, 19) ? kLogitBytes : kLogitBytesOld;
  o.sampler = sat_add(sat_add(scale(sat_mul(u(rows), u(m.vocab_size)), per_logit),
                              scale(sat_mul(u(p.batched_tokens), u(m.hidden_size)), kHiddenFactor)),
                      moe_workspace(m, p.batched_tokens, p.tp));
  o.profile_peak = std::max(o.activation, o.sampler);
  if (p.multimodal) o.encoder = sat_mul({u(p.batched_tokens), u(m.hidden_size), kActBytes});
  const bool new_buffers = at_least(r, 0, 19);  // 0.19: custom all-reduce buffers after the snapshot
  o.non_torch = p.tp > 1 ? (new_buffers ? 2150ull << 20 : 560ull << 20) : (new_buffers ? 256ull << 20 : 144ull << 20);
  o.cuda_graph_sizes = cuda_graph_size_count(r, p);
  if (o.cuda_graph_sizes > 0)
    o.cuda_graphs = (kGraphBase + u(m.num_layers) * kGraphPerLayer) * u(o.cuda_graph_sizes) / kGraphSizesMeasured;
  o.cuda_graphs_in_budget = graphs_in_budget(r, p.v2_runner);
  o.v2_runner = p.v2_runner;
  o.cuda_context = kCudaContextBytes;
  o.nccl = p.tp > 1 ? kNcclBytes : 0;
  return o;
}

}  // namespace fp4forge::kvplan
