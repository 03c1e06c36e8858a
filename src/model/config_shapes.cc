// config-shape-mismatch and expert-layout: the shape invariants of architectures.md §3.1 / §3.5, by rule
// for every family in the table (not by fixture). One finding per broken rule, listing the tensors. And the MTP
// layers the config declares against the tensors (model/shape_rules.h).
#include <algorithm>
#include <charconv>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fp4forge/model/shape_rules.h"
#include "fp4forge/util/json_get.h"
#include "fp4forge/model/classify.h"
#include "fp4forge/model/experts.h"
#include "fp4forge/model/fp8_source.h"

namespace fp4forge {
namespace {

using Json = nlohmann::ordered_json;

std::string dims(const std::vector<std::int64_t>& v) {
  std::vector<std::string> s;
  for (auto x : v) s.push_back(x < 0 ? "*" : std::to_string(x));
  return fmt::format("[{}]", fmt::join(s, ", "));
}
std::string dims(const std::vector<std::uint64_t>& v) { return fmt::format("[{}]", fmt::join(v, ", ")); }

/** A broken shape rule, one finding per rule (the sink merges the tensors that break it: group = the rule). */
class Violations {
 public:
  explicit Violations(FindingSink& out) : out_(out) {}
  /** `rule` broken at `tensor` ("" when no tensor is involved): `f` carries expected and actual (and any other
   * field); the message is "RULE: TENSOR expected E, got A". */
  void add(const std::string& rule, const std::string& tensor, FindingFields f) {
    // (Not a default argument: clang refuses a consteval call there, "outside of an immediate invocation".)
    add(rule, tensor, std::move(f), finding_kind("config-shape-mismatch"));
  }
  void add(const std::string& rule, const std::string& tensor, FindingFields f, const FindingKind& kind) {
    f.group = rule;
    f.message =
        fmt::format("{}: {}expected {}, got {}", rule, tensor.empty() ? "" : tensor + " ", f.expected, f.actual);
    if (!tensor.empty()) f.tensors.push_back(tensor);
    out_.add(kind, std::move(f));
  }

 private:
  FindingSink& out_;
};

/** The per-layer attention geometry under one reading of the config. 0 = unknown (not checked). */
struct Reading {
  std::string label;  // "" when there is one reading
  std::vector<std::int64_t> d, kv;
  bool operator==(const Reading& o) const { return d == o.d && kv == o.kv; }
};

struct ShapeChecker {
  ShapeChecker(const ShapeContext& c, FindingSink& o) : ctx(c), v(o) {}
  const ShapeContext& ctx;
  Violations v;
  const ModelInfo& m = ctx.info;
  Family fam = ctx.info.family;
  std::int64_t H = ctx.info.hidden_size;
  std::string P = ctx.text_prefix;

  bool qwen_hybrid() const { return m.spec().mixer == Mixer::GATED_DELTANET; }
  bool mamba_hybrid() const { return m.spec().mixer == Mixer::MAMBA2; }
  bool mla() const { return m.spec().mla || m.kv_lora_rank > 0; }

  /** key: the config key the rows come from; in_key: the one the columns come from, blamed when only they differ. */
  void linear(const std::string& module, std::int64_t out, std::int64_t in, const std::string& rule,
              const std::string& key = {}, const std::string& in_key = {}) {
    auto s = ctx.linear_shape(module);
    if (!s) return;
    const bool bad_out = out > 0 && s->first != out;
    const bool bad_in = in > 0 && s->second >= 0 && s->second != in;
    if (bad_out || bad_in)
      v.add(rule, module,
            {.key = !bad_out && !in_key.empty() ? in_key : key,
             .expected = dims(std::vector<std::int64_t>{out > 0 ? out : -1, in > 0 ? in : -1}),
             .actual = dims(std::vector<std::int64_t>{s->first, s->second})});
  }
  /** The same against a shape from the width formulas (model/shape_rules.h); unknown widths: not checked. */
  void linear(const std::string& module, LinearShape want, const std::string& rule, const std::string& key = {},
              const std::string& in_key = {}) {
    if (want) linear(module, want->first, want->second, rule, key, in_key);
  }
  void shape(const std::string& name, const std::vector<std::int64_t>& want, const std::string& rule,
             const std::string& key = {}) {
    const auto* t = ctx.tensor(name);
    if (t == nullptr) return;
    bool bad = t->shape.size() != want.size();
    for (std::size_t i = 0; !bad && i < want.size(); ++i)
      if (want[i] > 0 && static_cast<std::int64_t>(t->shape[i]) != want[i]) bad = true;
    if (bad) v.add(rule, name, {.key = key, .expected = dims(want), .actual = dims(t->shape)});
  }
  bool module_present(const std::string& module) const { return ctx.linear_shape(module).has_value(); }

  std::vector<Reading> readings() const {
    const Json& tc = ctx.text();
    const std::size_t N = m.layer_types.size();
    Reading base;
    base.d.assign(N, m.head_dim);
    base.kv.assign(N, m.num_kv_heads);
    if (fam != Family::GEMMA4) return {base};
    const bool k_eq_v = bool_of(tc, "attention_k_eq_v");
    std::vector<Reading> out;
    const Json* plc = nullptr;
    if (auto it = tc.find("per_layer_config"); it != tc.end() && it->is_object()) plc = &*it;
    const auto gd = integral_of(tc, "global_head_dim");
    const auto gkv = integral_of(tc, "num_global_key_value_heads");
    if (plc != nullptr) {
      Reading r = base;
      r.label = "per_layer_config (transformers ≥5.15)";
      for (std::size_t i = 0; i < N; ++i) {
        auto it = plc->find(std::to_string(i));
        if (it == plc->end() || !it->is_object()) continue;
        r.d[i] = integral_of(*it, "head_dim").value_or(m.head_dim);
        r.kv[i] = integral_of(*it, "num_key_value_heads").value_or(m.num_kv_heads);
      }
      out.push_back(std::move(r));
    }
    if (plc == nullptr || gd || gkv) {
      Reading r = base;
      r.label = "flat global fields (vLLM ≤0.27, transformers ≤5.14)";
      for (std::size_t i = 0; i < N; ++i) {
        if (m.layer_types[i] != "full_attention") continue;
        r.d[i] = gd.value_or(0);  // absent: reported as gemma4-missing-global-kv-fields
        if (k_eq_v) r.kv[i] = gkv.value_or(0);
      }
      out.push_back(std::move(r));
    }
    if (out.size() == 2 && out[0] == out[1]) out.pop_back();
    if (out.size() == 1) out[0].label.clear();
    return out;
  }

  /** Multi-head latent attention (DeepSeek-V2/V3): q_a/q_b (or q_proj), kv_a_proj_with_mqa, kv_b_proj, o_proj. */
  void mla_attention(const std::string& sa) {
    if (m.q_lora_rank > 0) {
      linear(sa + "q_a_proj", mla_shape(Role::ATTN_Q_A, m), "q_a_proj == [q_lora_rank, hidden_size]", "q_lora_rank");
      linear(sa + "q_b_proj", mla_shape(Role::ATTN_Q_B, m),
             "q_b_proj == [num_attention_heads·(qk_nope_head_dim + qk_rope_head_dim), q_lora_rank]", "q_lora_rank");
      if (module_present(sa + "q_proj"))
        v.add("with q_lora_rank set, MLA layers have q_a_proj/q_b_proj and no q_proj", sa + "q_proj",
              {.key = "q_lora_rank", .expected = "absent", .actual = "present"});
    } else {
      linear(sa + "q_proj", mla_shape(Role::ATTN_Q, m),
             "q_proj == [num_attention_heads·(qk_nope_head_dim + qk_rope_head_dim), hidden_size]", "qk_nope_head_dim");
    }
    linear(sa + "kv_a_proj_with_mqa", mla_shape(Role::ATTN_KV_A, m),
           "kv_a_proj_with_mqa == [kv_lora_rank + qk_rope_head_dim, hidden_size]", "kv_lora_rank");
    linear(sa + "kv_b_proj", mla_shape(Role::ATTN_KV_B, m),
           "kv_b_proj == [num_attention_heads·(qk_nope_head_dim + v_head_dim), kv_lora_rank]", "kv_lora_rank");
    linear(sa + "o_proj", mla_shape(Role::ATTN_O, m), "o_proj == [hidden_size, num_attention_heads·v_head_dim]",
           "v_head_dim");
    if (!module_present(sa + "kv_a_proj_with_mqa"))
      v.add("every MLA layer has kv_a_proj_with_mqa", sa + "kv_a_proj_with_mqa",
            {.key = "kv_lora_rank", .expected = "present", .actual = "absent"});
  }

  void attention(const std::string& base, std::size_t i, std::int64_t d, std::int64_t kv, bool full,
                 bool shared, const std::string& label) {
    const std::string sfx = label.empty() ? "" : fmt::format(" [per {}]", label);
    const std::string sa = base + "self_attn.";
    const std::int64_t A = m.num_heads;
    if (mla()) return mla_attention(sa);
    if (module_present(sa + "qkv_proj")) {  // pre-fused q/k/v (Phi-3)
      linear(sa + "qkv_proj", attention_shape(Role::ATTN_QKV, H, A, d, kv),
             "qkv_proj == [(num_attention_heads + 2·num_key_value_heads)·head_dim, hidden_size]" + sfx,
             "num_key_value_heads");
      linear(sa + "o_proj", attention_shape(Role::ATTN_O, H, A, d, kv),
             "o_proj == [hidden_size, num_attention_heads·head_dim_i]" + sfx, "num_attention_heads");
      return;
    }
    const std::int64_t gate = gated_q_multiplier(m);
    if (d > 0 && A > 0) {
      linear(sa + "q_proj", attention_shape(Role::ATTN_Q, H, A, d, kv, gate),
             gate == 2 ? "q_proj == [num_attention_heads·head_dim·2 (attn_output_gate), hidden_size]" + sfx
                       : "q_proj == [num_attention_heads·head_dim_i, hidden_size]" + sfx,
             "num_attention_heads", "hidden_size");
      linear(sa + "o_proj", attention_shape(Role::ATTN_O, H, A, d, kv),
             "o_proj == [hidden_size, num_attention_heads·head_dim_i]" + sfx, "num_attention_heads");
      shape(sa + "q_norm.weight", {d}, "q_norm length == head_dim_i" + sfx, "head_dim");
    }
    const bool k_eq_v = fam == Family::GEMMA4 && full && m.attention_k_eq_v;
    if (shared) {
      for (const char* p : {"k_proj", "v_proj"})
        if (module_present(sa + p))
          v.add("KV-shared layers (the last num_kv_shared_layers) have no k_proj/v_proj", sa + p,
                {.key = "num_kv_shared_layers", .expected = "absent", .actual = "present"});
      return;
    }
    if (!module_present(sa + "k_proj"))
      v.add("every attention layer that is not KV-shared has a k_proj", sa + "k_proj",
            {.key = "num_kv_shared_layers", .expected = "present", .actual = "absent"});
    if (d > 0 && kv > 0) {
      linear(sa + "k_proj", attention_shape(Role::ATTN_K, H, A, d, kv),
             (k_eq_v ? "full-attention k_proj == [num_global_key_value_heads·global_head_dim, hidden_size]"
                     : "k_proj == [num_key_value_heads_i·head_dim_i, hidden_size]") +
                 sfx,
             k_eq_v ? "num_global_key_value_heads" : "num_key_value_heads", "hidden_size");
      shape(sa + "k_norm.weight", {d}, "k_norm length == head_dim_i" + sfx, "head_dim");
    }
    if (k_eq_v) {
      if (module_present(sa + "v_proj"))
        v.add("full-attention layers have no v_proj when attention_k_eq_v is true", sa + "v_proj",
              {.key = "attention_k_eq_v", .expected = "absent", .actual = "present"});
    } else {
      if (!module_present(sa + "v_proj") && module_present(sa + "k_proj"))
        v.add(fam == Family::GEMMA4 && full
                  ? "attention_k_eq_v is false but a full-attention layer has no v_proj (transformers "
                    "initializes it randomly, vLLM reports a missing weight)"
                  : "every attention layer has a v_proj",
              sa + "v_proj", {.key = "attention_k_eq_v", .expected = "present", .actual = "absent"});
      if (d > 0 && kv > 0)
        linear(sa + "v_proj", attention_shape(Role::ATTN_V, H, A, d, kv),
               "v_proj == [num_key_value_heads_i·head_dim_i, hidden_size]" + sfx, "num_key_value_heads", "hidden_size");
    }
    if (kv > 0 && A > 0 && A % kv != 0)
      v.add(
          "num_attention_heads divisible by the kv heads of every layer (GQA)" + sfx, fmt::format("layer {}", i),
          {.key = "num_key_value_heads", .expected = fmt::format("a divisor of {}", A), .actual = std::to_string(kv)});
  }

  void linear_attention(const std::string& base) {
    const std::string la = base + "linear_attn.";
    // Every width from the one home of the GatedDeltaNet formulas (shape_rules.h); the rule texts name them.
    auto want = [&](std::string_view leaf) { return linear_attention_shape(leaf, m); };
    if (want("out_proj").empty()) return;
    auto lin = [&](std::string_view leaf, const std::string& rule, const std::string& key) {
      const auto s = want(leaf);
      linear(la + std::string(leaf), s[0], s[1], rule, key);
    };
    if (module_present(la + "in_proj_qkvz")) {  // Qwen3-Next fused form
      lin("in_proj_qkvz", "in_proj_qkvz rows == 2·Hk·Dk + 2·Hv·Dv", "linear_num_value_heads");
      lin("in_proj_ba", "in_proj_ba rows == 2·linear_num_value_heads", "linear_num_value_heads");
    } else {
      lin("in_proj_qkv", "in_proj_qkv rows == 2·Hk·Dk + Hv·Dv", "linear_num_key_heads");
      lin("in_proj_z", "in_proj_z rows == Hv·Dv", "linear_num_value_heads");
      lin("in_proj_a", "in_proj_a rows == linear_num_value_heads", "linear_num_value_heads");
      lin("in_proj_b", "in_proj_b rows == linear_num_value_heads", "linear_num_value_heads");
    }
    shape(la + "conv1d.weight", want("conv1d"), "conv1d == [2·Hk·Dk + Hv·Dv, 1, linear_conv_kernel_dim]",
          "linear_conv_kernel_dim");
    shape(la + "A_log", want("A_log"), "A_log length == linear_num_value_heads", "linear_num_value_heads");
    shape(la + "dt_bias", want("dt_bias"), "dt_bias length == linear_num_value_heads", "linear_num_value_heads");
    shape(la + "norm.weight", want("norm"), "linear_attn.norm length == linear_value_head_dim", "linear_value_head_dim");
    lin("out_proj", "out_proj == [hidden_size, Hv·Dv]", "linear_num_value_heads");
  }

  void dense_mlp(const std::string& mlp, std::int64_t I, const std::string& what = "mlp",
                 const std::string& key = "intermediate_size") {
    if (I <= 0) return;
    const std::string i = key == "intermediate_size" ? "intermediate_size_i" : key;
    linear(mlp + "gate_proj", mlp_shape(Role::MLP_GATE, H, I), fmt::format("{}.gate_proj == [{}, hidden_size]", what, i), key);
    linear(mlp + "up_proj", mlp_shape(Role::MLP_UP, H, I), fmt::format("{}.up_proj == [{}, hidden_size]", what, i), key);
    linear(mlp + "down_proj", mlp_shape(Role::MLP_DOWN, H, I), fmt::format("{}.down_proj == [hidden_size, {}]", what, i), key);
  }

  /** The routed experts of the MoE layer under `base` (model/experts.h decides each block's form), its
   * router, and its shared expert. */
  void experts(const std::string& base) {
    const std::int64_t E = m.num_experts, Im = m.moe_intermediate_size, Is = m.shared_expert_intermediate_size;
    std::vector<const ExpertBlock*> mine;
    for (const auto& b : blocks_)
      if (b.key.compare(0, base.size(), base) == 0) mine.push_back(&b);
    // Router: the 2-D router weight under the layer (mlp.gate, router.proj, feed_forward.router, router.layer).
    for (auto it = ctx.tensors.lower_bound(base); it != ctx.tensors.end(); ++it) {
      if (it->first.compare(0, base.size(), base) != 0) break;
      const TensorClass c = classify(it->first, it->second.shape, m);
      const Role role = c.role == Role::MTP ? c.base_role : c.role;  // an MTP layer's router
      if (role != Role::ROUTER || c.param != "weight" || it->second.shape.size() != 2 || it->second.shape[0] == 1)
        continue;
      if (E > 0) linear(c.module, E, H, "router == [num_experts, hidden_size]", "num_experts");
    }
    if (mine.empty()) {
      if (E <= 0) return;
      const std::string layer = base.ends_with('.') ? base.substr(0, base.size() - 1) : base;  // not "layers.0."
      // A format fp4forge does not read may store the experts as its own packed tensors (gpt-oss's MXFP4
      // `gate_up_proj_blocks` / `_scales`): then they could not be found, which is not their absence.
      if (const auto foreign = foreign_quantization(ctx.config, nullptr))
        v.add("routed experts not checked, stored in a format fp4forge does not read", layer,
              {.severity = Severity::WARNING,
               .key = "num_experts",
               .expected = fmt::format("{} experts", E),
               .actual = fmt::format("none in a form fp4forge reads ({})", *foreign)},
              finding_kind("config-shape-unchecked"));
      else
        v.add("every MoE layer has its routed experts", layer,
              {.key = "num_experts", .expected = fmt::format("{} experts", E), .actual = "none"});
      return;
    }
    for (std::size_t k = 1; k < mine.size(); ++k)
      if (mine[k]->key == mine[k - 1]->key)
        v.add("experts are stored either fused 3-D or per expert 2-D, never both in one layer", mine[k]->key + ".*",
              {.expected = "one form", .actual = "both fused and per-expert tensors"}, finding_kind("expert-layout"));
    for (const ExpertBlock* b : mine) {
      if (!b->problem.empty()) {
        v.add(b->ambiguous ? "fused expert orientation could not be decided (not checked)" : "fused expert shapes",
              b->key,
              {.severity = b->ambiguous ? Severity::WARNING : Severity::ERROR,
               .key = "num_experts",
               .expected = b->ambiguous ? "one reading" : "[E, 2I, H] / [E, H, I] or [E, H, 2I] / [E, I, H]",
               .actual = b->problem,
               .hint = b->ambiguous ? "pass --expert-orientation to quantize / verify" : ""},
              finding_kind("expert-layout"));
        continue;
      }
      if (b->storage == ExpertStorage::FUSED) {
        const std::string t = b->stored().empty() ? b->key : b->stored().front();
        const std::string form = fmt::format("{} experts of width {} over hidden {} ({})", b->num_experts,
                                             b->intermediate, b->hidden, orientation_name(b->orientation));
        if (E > 0 && static_cast<std::int64_t>(b->num_experts) != E)
          v.add("fused experts: dim 0 == num_experts", t,
                {.key = "num_experts", .expected = std::to_string(E), .actual = form});
        if (Im > 0 && static_cast<std::int64_t>(b->intermediate) != Im)
          v.add("fused experts: expert width == the config's expert intermediate size", t,
                {.key = "moe_intermediate_size", .expected = std::to_string(Im), .actual = form});
        if ((b->gate_up.empty() && b->gate.empty()) || b->down.empty())
          v.add("fused experts have both gate_up and down tensors", b->key,
                {.key = "num_experts", .expected = "present", .actual = "one missing"});
        continue;
      }
      // Zero-computation experts (zero_expert_num) are no weights of the model: left out of the expert rules.
      ExpertBlock real = *b;
      drop_zero_experts(real, m);
      if (real.parts.empty()) continue;
      b = &real;
      std::map<int, std::set<Role>> have;
      for (const auto& p : b->parts) {
        have[p.expert].insert(p.role);
        if (Im <= 0) continue;
        const bool down = p.role == Role::EXPERT_DOWN;
        linear(p.module, down ? H : Im, down ? Im : H,
               down ? "experts.{e}.down == [hidden_size, expert intermediate size]"
                    : "experts.{e}.gate/up == [expert intermediate size, hidden_size]",
               "moe_intermediate_size");
      }
      if (E > 0 && (static_cast<std::int64_t>(have.size()) != E || have.begin()->first != 0 ||
                    have.rbegin()->first != E - 1))
        v.add("per-expert tensors cover exactly the expert indices 0..num_experts-1", b->key + ".*",
              {.key = "num_experts",
               .expected = fmt::format("{} experts (0..{})", E, E - 1),
               .actual = fmt::format("{} indices ({}..{})", have.size(), have.begin()->first, have.rbegin()->first)});
      for (int e : incomplete_experts(*b))
        v.add("every expert has the block's projections (gate, up and down; or up and down)",
              fmt::format("{}.{}.*", b->key, e),
              {.key = "num_experts",
               .expected = "the same complete set as every expert",
               .actual = std::to_string(have[e].size()) + " projection(s)"});
    }
    // Shared expert(s): Qwen shared_expert, DeepSeek shared_experts, Llama-4 feed_forward.shared_expert,
    // Granite shared_mlp (pre-fused input_linear).
    if (Is <= 0) return;
    for (const char* c : {"mlp.shared_expert.", "mlp.shared_experts.", "feed_forward.shared_expert."})
      dense_mlp(base + c, Is, std::string(c).substr(0, std::string(c).size() - 1), "shared_expert_intermediate_size");
    linear(base + "shared_mlp.input_linear", 2 * Is, H, "shared_mlp.input_linear == [2·shared_intermediate_size, hidden_size]",
           "shared_intermediate_size");
    linear(base + "shared_mlp.output_linear", H, Is, "shared_mlp.output_linear == [hidden_size, shared_intermediate_size]",
           "shared_intermediate_size");
    linear(base + "mlp.shared_expert_gate", 1, H, "mlp.shared_expert_gate == [1, hidden_size]");
  }

  bool layer_is_moe(std::size_t i) const {
    if (fam == Family::GEMMA4) return m.enable_moe_block;
    return fp4forge::layer_is_moe(m.spec(), ctx.text(), static_cast<std::int64_t>(i), m.num_layers);
  }

  bool has_experts(const std::string& base) const {
    for (const auto& b : blocks_)
      if (b.key.compare(0, base.size(), base) == 0) return true;
    return false;
  }

  void layer(std::size_t i, const std::vector<Reading>& rs) {
    const std::string base = fmt::format("{}{}.", ctx.layer_prefix, i);
    if (!ctx.any_with_prefix(base)) {
      v.add("every decoder layer < num_hidden_layers has tensors", base + "*",
            {.key = "num_hidden_layers", .expected = "present", .actual = "absent"});
      return;
    }
    const std::string lt = i < m.layer_types.size() ? m.layer_types[i] : "full_attention";
    const bool has_sa = ctx.any_with_prefix(base + "self_attn.");
    const bool has_la = ctx.any_with_prefix(base + "linear_attn.");
    const bool wants_la = qwen_hybrid() && lt == "linear_attention";
    const bool wants_mamba = mamba_hybrid() && (lt == "linear_attention" || lt == "mamba");
    if (wants_mamba) {
      if (!ctx.any_with_prefix(base + "mamba."))
        v.add("a Mamba layer (layer_types) has mamba.* tensors", base + "mamba.*",
              {.key = "layer_types", .expected = "present", .actual = "absent"});
      if (has_sa)
        v.add("a Mamba layer (layer_types) has no self_attn.* tensors", base + "self_attn.*",
              {.key = "layer_types", .expected = "absent", .actual = "present"});
    } else if (wants_la) {
      if (!has_la)
        v.add("a linear_attention layer has linear_attn.* tensors (layer_types)", base + "linear_attn.*",
              {.key = "layer_types", .expected = "present", .actual = "absent"});
      if (has_sa)
        v.add("a linear_attention layer has no self_attn.* tensors (layer_types)", base + "self_attn.*",
              {.key = "layer_types", .expected = "absent", .actual = "present"});
      linear_attention(base);
    } else {
      if (!has_sa)
        v.add(fmt::format("a {} layer has self_attn.* tensors (layer_types)", lt), base + "self_attn.*",
              {.key = "layer_types", .expected = "present", .actual = "absent"});
      if (has_la)
        v.add(fmt::format("a {} layer has no linear_attn.* tensors (layer_types)", lt), base + "linear_attn.*",
              {.key = "layer_types", .expected = "absent", .actual = "present"});
      const std::int64_t N = static_cast<std::int64_t>(m.layer_types.size());
      const bool shared = fam == Family::GEMMA4 && m.num_kv_shared_layers > 0 &&
                          static_cast<std::int64_t>(i) >= N - m.num_kv_shared_layers;
      for (const auto& r : rs) attention(base, i, r.d[i], r.kv[i], lt == "full_attention", shared, r.label);
    }
    // MLP
    const bool moe = layer_is_moe(i);
    if (fam == Family::GEMMA4) {
      const std::int64_t N = static_cast<std::int64_t>(m.layer_types.size());
      const bool shared = m.num_kv_shared_layers > 0 && static_cast<std::int64_t>(i) >= N - m.num_kv_shared_layers;
      dense_mlp(base + "mlp.", (m.use_double_wide_mlp && shared) ? 2 * m.intermediate_size : m.intermediate_size);
      const bool has_moe_tensors = ctx.any_with_prefix(base + "experts.") || ctx.any_with_prefix(base + "router.") ||
                                   ctx.any_with_prefix(base + "moe.");
      if (moe) {
        experts(base);
      } else if (has_moe_tensors) {
        v.add("router/experts tensors only when enable_moe_block is true", base + "experts.*",
              {.key = "enable_moe_block", .expected = "absent", .actual = "present"});
      }
    } else if (moe) {
      experts(base);
    } else {
      if (has_experts(base))
        v.add(fmt::format("routed experts only on the layers the config makes MoE ({} rule)", m.spec().display),
              base + "*experts*",
              {.key = "first_k_dense_replace / moe layer keys",
               .expected = "absent (a dense layer)",
               .actual = "present"});
      for (const char* c : {"mlp.", "feed_forward."}) {
        dense_mlp(base + c, m.intermediate_size);
        linear(base + c + "gate_up_proj", 2 * m.intermediate_size, H,
               fmt::format("{}gate_up_proj == [2·intermediate_size, hidden_size]", c), "intermediate_size");
      }
    }
  }

  void run() {
    std::vector<NamedShape> named;
    for (const auto& [name, meta] : ctx.tensors) named.push_back({name, meta.shape});
    blocks_ = find_expert_blocks(named, m);
    const std::int64_t N = m.num_layers;
    const std::size_t nlt = m.layer_types.size();
    if (!m.layer_types_synthesized && static_cast<std::int64_t>(nlt) != N)
      v.add("len(layer_types) == num_hidden_layers", "",
            {.key = "layer_types", .expected = std::to_string(N), .actual = std::to_string(nlt)});
    if (fam == Family::GEMMA4 && nlt > 0 && m.layer_types.back() != "full_attention")
      v.add("the last layer_types entry is full_attention (transformers forces it, changing the model)", "",
            {.key = "layer_types", .expected = "full_attention", .actual = m.layer_types.back()});
    if (qwen_hybrid() && !m.layer_types_synthesized && m.full_attention_interval > 0) {
      for (std::size_t i = 0; i < nlt; ++i) {
        const bool want_full = (static_cast<std::int64_t>(i) + 1) % m.full_attention_interval == 0;
        if (want_full != (m.layer_types[i] == "full_attention")) {
          v.add("full_attention_interval agrees with layer_types", fmt::format("layer {}", i),
                {.severity = Severity::WARNING,
                 .key = "full_attention_interval",
                 .expected = want_full ? "full_attention" : "linear_attention",
                 .actual = m.layer_types[i],
                 .hint = "transformers uses layer_types when present; drop or correct full_attention_interval"});
          break;
        }
      }
    }
    if (m.num_heads <= 0 || H <= 0 || N <= 0 || nlt != static_cast<std::size_t>(N)) {
      return;  // geometry unknown: per-layer rules cannot be evaluated
    }
    if (m.stack_layers > 0) {  // LongCat-Flash: num_hidden_layers counts each layer's two sublayers
      v.add(
          "per-layer shape rules apply to one attention and one MLP per layer", "",
          {.severity = Severity::WARNING,
           .key = "num_hidden_layers",
           .expected = "num_hidden_layers layers",
           .actual = fmt::format("num_hidden_layers {} counts sublayers of num_layers = {} layers", N, m.stack_layers),
           .hint = "per-layer shapes were not checked; verify --against compares every tensor with its source"},
          finding_kind("config-shape-unchecked"));
      return;
    }
    if (ctx.layer_prefix.empty()) {
      v.add("the decoder layers are found (per-layer shape rules need them)", "",
            {.severity = Severity::WARNING,
             .key = "num_hidden_layers",
             .expected = "<root>.layers.<i>.*",
             .actual = "no stack of per-layer tensors outside the towers",
             .hint = "per-layer shapes were not checked; inspect shows where the tensors are"},
            finding_kind("config-shape-unchecked"));
      return;
    }
    const auto rs = readings();
    for (std::size_t i = 0; i < nlt; ++i) layer(i, rs);
    // tensors beyond num_hidden_layers
    const std::string lp = ctx.layer_prefix;
    std::set<std::int64_t> extra;
    for (auto it = ctx.tensors.lower_bound(lp); it != ctx.tensors.end(); ++it) {
      std::string_view n = it->first;
      if (n.substr(0, lp.size()) != lp) break;
      n.remove_prefix(lp.size());
      std::int64_t e = 0;
      auto [p, ec] = std::from_chars(n.data(), n.data() + n.size(), e);
      const std::int64_t mtp = m.mtp_form == MtpForm::EXTRA_LAYERS ? m.mtp_num_hidden_layers : 0;
      if (ec == std::errc() && e >= N + mtp) extra.insert(e);
    }
    for (auto e : extra)
      v.add("no decoder layer tensors at index ≥ num_hidden_layers (+ num_nextn_predict_layers for MTP)",
            fmt::format("{}{}.*", lp, e),
            {.key = "num_hidden_layers", .expected = fmt::format("< {}", N), .actual = std::to_string(e)});

    head_and_embeddings();
    family_specifics();
    mtp_layers();
  }

  /** Embeddings, the final norm and lm_head against tie_word_embeddings. */
  void head_and_embeddings() {
    const Json& tc = ctx.text();
    // embeddings, final norm, lm_head (tie_word_embeddings)
    if (m.vocab_size > 0) {
      if (ctx.has(P + "embed_tokens.weight"))
        shape(P + "embed_tokens.weight", {m.vocab_size, H}, "embed_tokens == [vocab_size, hidden_size]", "vocab_size");
    }
    shape(P + "norm.weight", {H}, "final norm length == hidden_size", "hidden_size");
    // lm_head at the top level, or under the legacy wrapper (language_model.lm_head: Gemma-3, Llama-4, Mistral-3).
    const std::string head = module_present("language_model.lm_head") ? "language_model.lm_head" : "lm_head";
    const bool lm = module_present(head);
    if (m.tie_word_embeddings && lm) {
      bool same = false;
      const TensorRef* a = ctx.ckpt ? ctx.ckpt->find(head + ".weight") : nullptr;
      const TensorRef* b = ctx.ckpt ? ctx.ckpt->find(P + "embed_tokens.weight") : nullptr;
      if (a != nullptr && b != nullptr) {
        auto da = ctx.ckpt->data(*a), db = ctx.ckpt->data(*b);
        same = da.size() == db.size() && std::equal(da.begin(), da.end(), db.begin());
      }
      v.add(same ? "tie_word_embeddings is true and lm_head.weight duplicates embed_tokens (dead weight)"
                 : "tie_word_embeddings is true but lm_head.weight exists and differs from embed_tokens: vLLM "
                   "skips lm_head when tied, so these weights are ignored",
            "lm_head.weight",
            {.severity = same ? Severity::WARNING : Severity::ERROR,
             .key = "tie_word_embeddings",
             .expected = "absent (tied)",
             .actual = "present"});
    } else if (!m.tie_word_embeddings && !lm && ctx.any_with_prefix(P + "layers.")) {
      v.add(
          "tie_word_embeddings is false but there is no lm_head.weight (loaders leave the head random or "
          "fail on a missing weight)",
          "lm_head.weight", {.key = "tie_word_embeddings", .expected = "present", .actual = "absent"});
    }
    if (lm && m.vocab_size > 0) linear(head, m.vocab_size, H, "lm_head == [vocab_size, hidden_size]", "vocab_size");
    if (ctx.info.wrapper) {
      auto top = ctx.config.find("tie_word_embeddings");
      auto txt = tc.find("tie_word_embeddings");
      if (top != ctx.config.end() && txt != tc.end() && top->is_boolean() && txt->is_boolean() && *top != *txt)
        v.add("top-level tie_word_embeddings == text_config.tie_word_embeddings", "",
              {.severity = Severity::WARNING,
               .key = "tie_word_embeddings",
               .expected = txt->dump(),
               .actual = top->dump(),
               .hint = "the text-level value decides whether lm_head exists (vLLM reads the text config)"});
    }
  }

  /** Gemma-4's MoE switch, per-layer embeddings and vision tower; Qwen3.5's vision merger. */
  void family_specifics() {
    // Gemma-4 specifics: MoE switch, PLE, vision tower.
    if (fam == Family::GEMMA4) {
      if (!m.enable_moe_block && m.num_experts > 0)
        v.add("num_experts is set only when enable_moe_block is true", "",
              {.severity = Severity::WARNING,
               .key = "enable_moe_block",
               .expected = "enable_moe_block: true",
               .actual = "enable_moe_block: false",
               .hint = "vLLM decides by enable_moe_block; a stray num_experts hints at a broken export"});
      if (m.enable_moe_block && m.num_experts <= 0)
        v.add("enable_moe_block requires num_experts", "",
              {.key = "num_experts", .expected = "num_experts > 0", .actual = "absent"});
      const std::int64_t pd = m.hidden_size_per_layer_input;
      const bool ple = ctx.has(P + "embed_tokens_per_layer.weight");
      if (pd > 0 && !ple)
        v.add("per-layer-embedding tensors present iff hidden_size_per_layer_input > 0",
              P + "embed_tokens_per_layer.weight",
              {.key = "hidden_size_per_layer_input", .expected = "present", .actual = "absent"});
      else if (pd <= 0 && ple)
        v.add("per-layer-embedding tensors present iff hidden_size_per_layer_input > 0",
              P + "embed_tokens_per_layer.weight",
              {.key = "hidden_size_per_layer_input", .expected = "absent", .actual = "present"});
      else if (pd > 0)
        shape(P + "embed_tokens_per_layer.weight", {-1, m.num_layers * pd},
              "embed_tokens_per_layer columns == num_hidden_layers·hidden_size_per_layer_input",
              "hidden_size_per_layer_input");
      if (auto vc = ctx.config.find("vision_config"); vc != ctx.config.end() && vc->is_object()) {
        const std::int64_t hv = integral_of(*vc, "hidden_size").value_or(0);
        const std::int64_t p = integral_of(*vc, "patch_size").value_or(0);
        const std::int64_t pos = integral_of(*vc, "position_embedding_size").value_or(0);
        if (hv > 0) {
          linear("model.embed_vision.embedding_projection", H, hv,
                 "embed_vision.embedding_projection == [text hidden_size, vision hidden_size]", "vision_config.hidden_size");
          shape("model.vision_tower.patch_embedder.position_embedding_table", {2, pos > 0 ? pos : -1, hv},
                "position_embedding_table == [2, position_embedding_size, vision hidden_size]",
                "vision_config.position_embedding_size");
          if (p > 0)
            linear("model.vision_tower.patch_embedder.input_proj", hv, 3 * p * p,
                   "patch_embedder.input_proj == [vision hidden_size, 3·patch_size²]", "vision_config.patch_size");
        }
      }
    }
    // Qwen3.5 vision merger and MTP geometry
    if (fam == Family::QWEN3_5 || fam == Family::QWEN3_5_MOE) {
      if (auto vc = ctx.config.find("vision_config"); vc != ctx.config.end() && vc->is_object()) {
        const auto oh = integral_of(*vc, "out_hidden_size");
        if (oh && *oh != H)
          v.add("vision_config.out_hidden_size == text hidden_size", "",
                {.key = "vision_config.out_hidden_size", .expected = std::to_string(H), .actual = std::to_string(*oh)});
        linear("model.visual.merger.linear_fc2", oh.value_or(H), -1,
               "visual.merger.linear_fc2 rows == vision_config.out_hidden_size", "vision_config.out_hidden_size");
      }
    }
  }

  /** The MTP layers where present (mtp-declared-missing reports absent ones): Qwen `mtp.fc` and norms, or
   * DeepSeek / GLM `eh_proj`, `enorm` / `hnorm`, `shared_head`, `embed_tokens`; each MTP layer as a
   * full-attention decoder layer (vLLM builds it with the decoder layer class): attention, layer norms, and
   * the routed experts when it has them, the dense MLP in a dense family. */
  void mtp_layers() {
    const MtpForm form = m.mtp_form;
    const std::int64_t n = m.mtp_num_hidden_layers;
    auto layer_body = [&](const std::string& base, std::size_t i) {
      attention(base, i, m.head_dim, m.num_kv_heads, true, false, "");
      for (const char* nm : {"input_layernorm.weight", "post_attention_layernorm.weight"})
        shape(base + nm, {H}, "MTP layer norms length == hidden_size", "hidden_size");
      if (has_experts(base))
        experts(base);
      else if (m.spec().moe_layers == MoeLayers::NONE)
        dense_mlp(base + "mlp.", m.intermediate_size, "MTP mlp");
    };
    if (form == MtpForm::MTP_MODULE && ctx.any_with_prefix("mtp.")) {
      linear("mtp.fc", H, 2 * H, "mtp.fc == [hidden_size, 2·hidden_size]", "hidden_size");
      for (const char* nm : {"mtp.norm.weight", "mtp.pre_fc_norm_embedding.weight", "mtp.pre_fc_norm_hidden.weight"})
        shape(nm, {H}, "MTP norms length == hidden_size", "hidden_size");
      for (std::int64_t k = 0; k < n; ++k) {
        const std::string base = fmt::format("mtp.layers.{}.", k);
        if (ctx.any_with_prefix(base)) layer_body(base, static_cast<std::size_t>(k));
      }
    }
    if (form == MtpForm::EXTRA_LAYERS) {
      for (std::int64_t k = 0; k < n; ++k) {
        const std::int64_t i = m.num_layers + k;
        const std::string base = fmt::format("{}{}.", ctx.layer_prefix, i);
        if (!ctx.any_with_prefix(base)) continue;
        layer_body(base, static_cast<std::size_t>(i));
        linear(base + "eh_proj", H, 2 * H, "MTP eh_proj == [hidden_size, 2·hidden_size]", "hidden_size");
        for (const char* nm : {"enorm.weight", "hnorm.weight", "shared_head.norm.weight"})
          shape(base + nm, {H}, "MTP norms length == hidden_size", "hidden_size");
        if (m.vocab_size > 0) {
          linear(base + "shared_head.head", m.vocab_size, H, "MTP shared_head.head == [vocab_size, hidden_size]",
                 "vocab_size");
          shape(base + "embed_tokens.weight", {m.vocab_size, H}, "MTP embed_tokens == [vocab_size, hidden_size]",
                "vocab_size");
        }
      }
    }
  }

  std::vector<ExpertBlock> blocks_;
};

}  // namespace

void check_config_shapes(const ShapeContext& ctx, FindingSink& out) {
  if (ctx.info.family == Family::UNKNOWN || ctx.tensors.empty()) return;
  ShapeChecker c(ctx, out);
  c.run();
}

void check_mtp(const ShapeContext& ctx, FindingSink& out) {
  if (ctx.tensors.empty()) return;
  const std::int64_t n = ctx.info.mtp_num_hidden_layers;
  if (ctx.info.mtp_form == MtpForm::EXTRA_LAYERS) {
    // DeepSeek-V3 / GLM-4.5: MTP layers are decoder layers [N, N + n).
    std::vector<std::string> missing;
    for (std::int64_t k = 0; k < n; ++k) {
      const std::string base = fmt::format("{}layers.{}.", ctx.text_prefix, ctx.info.num_layers + k);
      if (!ctx.any_with_prefix(base)) missing.push_back(base + "*");
    }
    if (missing.empty()) return;
    FindingFields f;
    f.key = "num_nextn_predict_layers";
    f.expected = fmt::format("decoder layers {}..{} (the MTP layers)", ctx.info.num_layers, ctx.info.num_layers + n - 1);
    f.actual = fmt::format("missing {}", fmt::join(missing, ", "));
    f.tensors = missing;
    f.message = fmt::format("num_nextn_predict_layers = {} but {}: MTP speculative decoding is unavailable "
                            "(typical of a checkpoint re-saved by plain transformers, which drops the MTP layers)",
                            n, f.actual);
    f.hint = "copy the MTP layers from the original release (doctor --fix --mtp-from SRC), or set "
             "num_nextn_predict_layers to 0";
    if (static_cast<std::int64_t>(missing.size()) == n)
      f.fix = "splice the MTP layers from the original release: --fix --mtp-from SRC";
    out.add(finding_kind("mtp-declared-missing"), std::move(f));
    return;
  }
  std::vector<std::string> mtp;
  std::set<std::int64_t> layers;
  for (auto it = ctx.tensors.lower_bound("mtp."); it != ctx.tensors.end(); ++it) {
    std::string_view name = it->first;
    if (name.substr(0, 4) != "mtp.") break;
    mtp.push_back(it->first);
    if (name.substr(0, 11) == "mtp.layers.") {
      std::string_view r = name.substr(11);
      std::int64_t k = 0;
      auto [p, ec] = std::from_chars(r.data(), r.data() + r.size(), k);
      if (ec == std::errc()) layers.insert(k);
    }
  }
  const std::string key = ctx.info.wrapper ? "text_config.mtp_num_hidden_layers" : "mtp_num_hidden_layers";
  std::vector<std::string> missing;
  for (std::int64_t k = 0; k < n; ++k)
    if (!layers.count(k)) missing.push_back(fmt::format("mtp.layers.{}", k));
  if (n >= 1 && (mtp.empty() || !missing.empty())) {
    FindingFields f;
    f.key = key;
    f.expected = fmt::format("mtp.* tensors for {} MTP layer(s)", n);
    f.actual = mtp.empty() ? "no mtp.* tensors" : fmt::format("missing {}", fmt::join(missing, ", "));
    f.tensors = missing;
    f.message = fmt::format("{} = {} but {}: MTP speculative decoding is unavailable (typical of a checkpoint "
                            "re-saved by plain transformers, which drops mtp.* on load)", key, n, f.actual);
    f.hint = "copy the mtp.* tensors from the source checkpoint (doctor --fix --mtp-from SRC; llm-compressor "
             "re-adds them on save), or set mtp_num_hidden_layers to 0";
    if (mtp.empty()) f.fix = "splice the mtp.* tensors from the original release: --fix --mtp-from SRC";
    out.add(finding_kind("mtp-declared-missing"), std::move(f));
  }
  std::vector<std::string> extra;
  for (auto k : layers)
    if (k >= n) extra.push_back(fmt::format("mtp.layers.{}", k));
  if (!mtp.empty() && (n == 0 || !extra.empty())) {
    FindingFields f;
    f.key = key;
    f.expected = n == 0 ? "mtp_num_hidden_layers ≥ 1 for the mtp.* tensors" : fmt::format("at most {} MTP layer(s)", n);
    f.actual = n == 0 ? fmt::format("{} absent or 0 with {} mtp.* tensors", key, mtp.size())
                      : fmt::format("extra {}", fmt::join(extra, ", "));
    f.tensors = n == 0 ? mtp : extra;
    f.message = fmt::format(
        "mtp.* tensors are present but not declared ({}): MTP speculative decoding will not use "
        "them",
        f.actual);
    f.hint = "declare mtp_num_hidden_layers to match the mtp.layers.* on disk";
    out.add(finding_kind("mtp-present-undeclared"), std::move(f));
  }
}

}  // namespace fp4forge
