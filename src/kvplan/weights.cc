#include "fp4forge/kvplan/weights.h"

#include <map>

#include <fmt/format.h>
#include <optional>

#include "fp4forge/model/classify.h"
#include "fp4forge/model/fp8_source.h"
#include "fp4forge/model/quant_config.h"
#include "fp4forge/model/scheme_policy.h"
#include "fp4forge/model/tensor_names.h"
#include "fp4forge/quantize/plan.h"

namespace fp4forge::kvplan {
namespace {

/** Bytes vLLM holds for a stored tensor (fp32/fp64 non-quantization tensors load as bf16). */
std::uint64_t loaded_bytes(const st::TensorInfo& t, const TensorClass& c) {
  if ((t.dtype == DType::F32 || t.dtype == DType::F64) && !c.quant_param) return t.numel() * 2;
  return t.nbytes();
}

/** Size of a quantizable tensor under `scheme`, or 0 when our quantize would keep it as stored (the
 * scheme's policy and shape rule, model/scheme_policy.h; fused-set and whole-layer expert rules are not
 * modelled). */
std::uint64_t quantized_bytes(QuantScheme scheme, const FamilySpec& family, const st::TensorInfo& t,
                              const TensorClass& c, std::size_t* linears) {
  const std::string_view leaf = names::leaf_of(c.module);
  if (!policy_quantizes(c.role, family, scheme, leaf) || !c.text_stack || c.quant_param || !is_source_dtype(t.dtype))
    return 0;
  const auto& s = t.shape;
  const ShapeRule rule = shape_rule(scheme);
  const std::uint64_t km = rule.k_multiple, nm = rule.n_multiple;
  if (c.role == Role::EXPERT_GATE_UP_FUSED || c.role == Role::EXPERT_DOWN_FUSED) {
    if (s.size() != 3 || s[2] % km != 0) return 0;
    if ((c.role == Role::EXPERT_GATE_UP_FUSED ? s[1] / 2 : s[1]) % nm != 0) return 0;
    // [E, 2*Im, H] splits into a gate and an up Linear [Im, H] per expert; [E, H, Im] is one down each.
    if (c.role == Role::EXPERT_GATE_UP_FUSED) {
      if (s[1] % 2 != 0) return 0;
      *linears += 2 * s[0];
      return s[0] * 2 * linear_bytes(scheme, s[1] / 2, s[2], t.dtype);
    }
    *linears += s[0];
    return s[0] * linear_bytes(scheme, s[1], s[2], t.dtype);
  }
  if (c.param != "weight" || s.size() != 2 || s[1] % km != 0 || s[0] % nm != 0) return 0;
  *linears += 1;
  return linear_bytes(scheme, s[0], s[1], t.dtype);
}

}  // namespace

std::string stored_quantization(const Checkpoint& ckpt) {
  const nlohmann::ordered_json* qc = find_quant_config(ckpt.config());
  if (qc != nullptr && qc->is_object()) {
    const auto m = qc->find("quant_method");
    if (m != qc->end() && m->is_string() && m->get<std::string>() == "compressed-tensors")
      if (auto parsed = parse_quant_config(*qc); parsed.ok()) return "compressed-tensors " + scheme_labels(*parsed);
  }
  const auto hfq = read_hf_quant_config(ckpt);
  if (auto foreign = foreign_quantization(ckpt.config(), hfq.ok() && *hfq ? &**hfq : nullptr)) return *foreign;
  if (auto fp8 = read_fp8_source(ckpt); fp8.ok() && *fp8) return (*fp8)->label;
  if (qc != nullptr || (hfq.ok() && *hfq)) return "a quantization config fp4forge cannot name";
  return {};
}

WeightEstimate estimate_weights(const Checkpoint& ckpt, const ModelInfo& info, const WeightOptions& opts) {
  WeightEstimate w;
  struct LayerKv {
    std::uint64_t k_bytes = 0, k_bytes_unquantized = 0;
    bool has_v = false;
  };
  std::map<int, LayerKv> kv_layers;  // Gemma-4 full layers with k_eq_v
  const bool k_eq_v = info.family == Family::GEMMA4 && info.attention_k_eq_v;
  // assume=SCHEME on an FP8 release sizes what quantize writes from it: each FP8 weight as its bf16
  // expansion (quantized, or kept in bf16), its scales and activation scales gone (docs/fp8-sources.md).
  std::optional<Fp8Source> fp8;
  if (opts.assume)
    if (auto r = read_fp8_source(ckpt); r.ok()) fp8 = std::move(*r);
  // assume=SCHEME: quantize's own decisions (issue 31 #4): per source tensor, the bytes of what the planner writes
  // for it when it quantizes it (its units), as `quantize --dry-run` plans.
  std::map<std::string, std::pair<std::uint64_t, std::size_t>> planned;  // tensor -> (bytes, units)
  bool use_plan = false;
  if (opts.assume) {
    quant::PlanOptions po;
    po.scheme = *opts.assume;
    po.observer = Observer::MINMAX;  // the observer changes no size
    po.scheme_for = opts.rules;
    for (auto& r : po.scheme_for) r.observer = Observer::MINMAX;
    po.ignore = opts.ignore;
    auto plan = quant::make_plan(ckpt, po);
    // A family whose routed experts vLLM cannot serve quantized (gpt-oss): quantize refuses them and names its remedy,
    // --ignore 're:.*experts'; the output it can write keeps them in 16 bits, and that is what is sized (tryout P-M3:
    // the policy alone sized them at 4 bits, 46 % short of the only servable output).
    if (!plan.ok() && !info.spec().experts_refusal.empty()) {
      po.ignore.push_back("re:.*experts");
      if (auto kept = quant::make_plan(ckpt, po); kept.ok()) {
        plan = std::move(kept);
        w.planner_note = fmt::format(
            "{} routed experts cannot be served quantized ({}): sized as quantize writes it "
            "with --ignore 're:.*experts', the experts kept in 16 bits",
            info.spec().display, info.spec().experts_refusal);
      }
    }
    if (plan.ok()) {
      use_plan = true;
      for (const quant::QuantUnit& u : plan->units) {
        auto& [bytes, n] = planned[plan->decisions[u.decision].name];
        bytes += linear_bytes(plan->schemes[u.scheme].scheme, u.rows, u.cols, u.out_dtype());
        ++n;
      }
    } else {
      w.planner_note = fmt::format("quantize would refuse this checkpoint as {} ({}); sized by the scheme's policy "
                                   "alone", scheme_traits(*opts.assume).preset, plan.error().message);
    }
  }
  for (const TensorRef& ref : ckpt.tensors()) {
    if (ref.info == nullptr) continue;
    if (fp8 && fp8->consumed(ref.name)) {
      ++w.tensors;
      w.stored_bytes += ref.info->nbytes();
      w.quantized_saved_bytes += ref.info->nbytes();
      continue;
    }
    st::TensorInfo expanded;
    if (const Fp8Weight* fw = fp8 ? fp8->find(ref.name) : nullptr) {
      expanded = *ref.info;
      expanded.dtype = DType::BF16;
      expanded.shape = fw->shape;  // a packed FP4 payload expands to twice its stored width
      expanded.end = expanded.begin + expanded.numel() * 2;
    }
    const st::TensorInfo& t = expanded.end != 0 ? expanded : *ref.info;
    const TensorClass c = classify(ref.name, t.shape, info);
    ++w.tensors;
    w.stored_bytes += ref.info->nbytes();
    std::uint64_t b = loaded_bytes(t, c);
    w.upcast_saved_bytes += t.nbytes() - b;
    const std::uint64_t unquantized = b;
    if (c.role == Role::MTP) {
      w.mtp_bytes += b;
      if (opts.include_mtp) w.bytes += b;
      continue;
    }
    if (opts.assume) {
      std::uint64_t q = 0;
      if (use_plan) {
        if (const auto it = planned.find(ref.name); it != planned.end()) {
          q = it->second.first;
          w.quantized_linears += it->second.second;
        }
      } else {
        q = quantized_bytes(*opts.assume, info.spec(), t, c, &w.quantized_linears);
      }
      if (q != 0) {
        w.quantized_saved_bytes += b > q ? b - q : 0;
        b = q;
      }
    }
    w.bytes += b;
    if (k_eq_v && c.text_stack && c.layer >= 0 && c.layer_type == "full_attention") {
      if (c.role == Role::ATTN_K) {
        kv_layers[c.layer].k_bytes += b;
        kv_layers[c.layer].k_bytes_unquantized += unquantized;
      }
      if (c.role == Role::ATTN_V) kv_layers[c.layer].has_v = true;
    }
  }
  for (const auto& [layer, kv] : kv_layers)
    if (!kv.has_v) {
      w.duplicated_v_bytes += kv.k_bytes;
      w.quantized_saved_bytes += kv.k_bytes_unquantized - kv.k_bytes;  // the copy is quantized too
    }
  w.bytes += w.duplicated_v_bytes;
  return w;
}

}  // namespace fp4forge::kvplan
