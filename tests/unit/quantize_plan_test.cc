// make_plan on every fixture, from config.json + NAME.tensors.json only (the plan is pure: no shard is opened).
#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fp4forge/model/quant_config.h"
#include "fp4forge/model/scheme_policy.h"
#include "fp4forge/quantize/plan.h"
#include "fp4forge/util/format.h"
#include "plan_test_util.h"

namespace fp4forge::quant {
namespace {

using ::testing::HasSubstr;
using ptest::fixture;
using ptest::slurp;
const std::string kData = FP4FORGE_TEST_DATA;

QuantPlan plan_ok(const PlanInput& in, const PlanOptions& o = {}) {
  auto p = make_plan(in, o);
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : p.error().message);
  if (!p.ok()) std::abort();
  return std::move(p).value();
}

const TensorDecision& decision(const QuantPlan& p, const std::string& name) {
  for (const auto& d : p.decisions)
    if (d.name == name) return d;
  ADD_FAILURE() << "no decision for " << name;
  std::abort();
}

bool has_line(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

const char* kFixtures[] = {"llama", "gemma4-dense-mm", "gemma4-moe-mm", "qwen3_5-dense-mm"};

TEST(QuantizePlan, PolicyPerRoleOnEveryFixture) {
  for (const char* fx : kFixtures) {
    SCOPED_TRACE(fx);
    const QuantPlan p = plan_ok(fixture(fx));
    ASSERT_EQ(p.decisions.size(), fixture(fx).tensors.size());
    std::size_t quantized = 0;
    for (const auto& d : p.decisions) {
      SCOPED_TRACE(d.name);
      const bool mtp = d.name.rfind("mtp.", 0) == 0;
      const bool expect_q = role_is_quantizable(d.cls.role) && d.cls.text_stack && !mtp &&
                            (d.linear_like || d.shape.size() == 3);
      EXPECT_EQ(d.action != Action::KEEP, expect_q) << role_name(d.cls.role) << " " << d.reason;
      EXPECT_FALSE(d.reason.empty());
      if (d.action != Action::KEEP) ++quantized;
      switch (d.cls.role) {
        case Role::LM_HEAD: case Role::EMBEDDING: case Role::ROUTER: case Role::NORM: case Role::VISION:
        case Role::PROJECTOR: case Role::LINEAR_ATTN: case Role::LINEAR_ATTN_CONV: case Role::MTP:
        case Role::SCALAR: case Role::ROUTER_AUX:
          EXPECT_EQ(d.action, Action::KEEP);
          break;
        default: break;
      }
    }
    EXPECT_GT(quantized, 0u);
    for (const auto& i : p.ignore) EXPECT_EQ(i.rfind("re:", 0), std::string::npos);
  }
}

TEST(QuantizePlan, EverySchemeLaysOutItsTensorsAndConfig) {
  PlanOptions o;
  o.scheme = *parse_quant_scheme("NVFP4A16");  // preset spelling and case are accepted (parsed at the edge)
  EXPECT_EQ(plan_ok(fixture("llama"), o).scheme, "nvfp4a16");
  const char* fixtures[] = {"llama", "qwen3_next", "qwen3_5-moe-mm", "gemma4-moe-mm", "deepseek_v3", "mixtral"};
  for (QuantScheme s : kQuantSchemes) {
    o.scheme = s;
    for (const char* fx : fixtures) {
      SCOPED_TRACE(std::string(quant_scheme_name(s)) + " " + fx);
      auto pr = make_plan(fixture(fx), o);
      if (!pr.ok() && pr.error().message.find("nothing to quantize") != std::string::npos) continue;  // hidden 64
      const QuantPlan p = plan_ok(fixture(fx), o);
      EXPECT_EQ(p.quant_scheme, s);
      const ShapeRule rule = shape_rule(s);
      for (const QuantUnit& u : p.units) {
        SCOPED_TRACE(u.module);
        EXPECT_EQ(u.cols % rule.k_multiple, 0u);
        EXPECT_EQ(u.rows % rule.n_multiple, 0u);
        const auto& lay = p.shards[u.shard].layout;
        for (const LinearTensorSpec& t : linear_tensors(s, u.rows, u.cols, u.dtype)) {
          const auto* ot = lay.find(u.module + "." + std::string(t.suffix));
          ASSERT_TRUE(ot) << t.suffix;
          EXPECT_EQ(ot->dtype, t.dtype);
          EXPECT_EQ(ot->shape, t.shape);
          const std::uint64_t begin = t.part == LinearPart::PAYLOAD        ? u.packed_begin
                                      : t.part == LinearPart::SCALE        ? u.scale_begin
                                      : t.part == LinearPart::GLOBAL_SCALE ? u.global_scale_begin
                                                                           : u.shape_begin;
          EXPECT_EQ(begin, ot->begin) << t.suffix;
        }
        if (!has_global_scale(s)) {
          EXPECT_FALSE(lay.find(u.module + ".weight_global_scale"));
          EXPECT_EQ(p.groups[u.group].units.size(), 1u);
        }
      }
      // Linear attention: kept at 4 bits, quantized at 8 (in_proj_ba not under FP8_BLOCK).
      for (const auto& d : p.decisions) {
        if (d.cls.role != Role::LINEAR_ATTN || !d.linear_like) continue;
        SCOPED_TRACE(d.name);
        const bool ba = d.name.find("in_proj_ba.") != std::string::npos || d.name.find("in_proj_a.") != std::string::npos ||
                        d.name.find("in_proj_b.") != std::string::npos;
        const bool want = weight_bits(s) == 8 && !(s == QuantScheme::FP8_BLOCK && ba);
        if (want && d.action == Action::KEEP) {
          EXPECT_TRUE(d.rule == Rule::K_NOT_ALIGNED || d.rule == Rule::N_NOT_ALIGNED || d.rule == Rule::FUSED_SET)
              << d.reason;
        }
        if (!want) {
          EXPECT_EQ(d.action, Action::KEEP) << d.reason;
        }
      }
      auto qc = parse_quant_config(p.config["quantization_config"]);
      ASSERT_TRUE(qc.ok());
      EXPECT_EQ(scheme_label(qc->groups[0], qc->format), quant_scheme_preset(s));
    }
  }
  // 8-bit GatedDeltaNet projections are quantized on the fixture that has them.
  o.scheme = QuantScheme::FP8_DYNAMIC;
  const QuantPlan next = plan_ok(fixture("qwen3_next"), o);
  EXPECT_GT(next.counts[static_cast<std::size_t>(Role::LINEAR_ATTN)].quantized, 0u);
  // A shape the scheme cannot take is kept with its rule, spelled with the multiple in --json.
  o.scheme = QuantScheme::FP8_BLOCK;
  const QuantPlan blk = plan_ok(fixture("llama"), o);
  bool n_rule = false;
  const auto blk_json = to_json(blk);
  for (const auto& k : blk_json["kept"]) n_rule = n_rule || k["rule"] == "n_not_multiple_of_128";
  EXPECT_TRUE(n_rule);
  auto p = parse_quant_scheme("int3");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("unknown scheme 'int3'"), std::string::npos) << p.error().message;
}

TEST(QuantizePlan, UnitsCarryTheirOutputOffsetsFromTheLayout) {
  for (const char* fx : kFixtures) {
    SCOPED_TRACE(fx);
    const QuantPlan p = plan_ok(fixture(fx));
    ASSERT_FALSE(p.units.empty());
    for (const QuantUnit& u : p.units) {
      SCOPED_TRACE(u.module);
      const auto& lay = p.shards[u.shard].layout;
      const auto* pk = lay.find(u.module + ".weight_packed");
      const auto* sc = lay.find(u.module + ".weight_scale");
      const auto* gs = lay.find(u.module + ".weight_global_scale");
      ASSERT_TRUE(pk && sc && gs);
      EXPECT_EQ(u.packed_begin, pk->begin);
      EXPECT_EQ(u.scale_begin, sc->begin);
      EXPECT_EQ(u.global_scale_begin, gs->begin);
    }
  }
}

TEST(QuantizePlan, LlamaCountsIgnoreAndGroups) {
  const QuantPlan p = plan_ok(fixture("llama"));
  EXPECT_EQ(p.units.size(), 14u);  // 2 layers x (q,k,v,o,gate,up,down)
  EXPECT_EQ(p.ignore, (std::vector<std::string>{"lm_head", "model.embed_tokens"}));
  EXPECT_TRUE(has_line(p.summary, "8 attention Linears quantized"));
  EXPECT_TRUE(has_line(p.summary, "6 MLP Linears quantized"));
  EXPECT_TRUE(has_line(p.summary, "1 lm_head kept"));
  EXPECT_TRUE(has_line(p.summary, "5 norms kept"));
  std::map<std::string, std::string> kinds;
  for (const auto& g : p.groups) kinds[g.name] = g.kind;
  EXPECT_EQ(kinds["model.layers.0.self_attn"], "qkv");
  EXPECT_EQ(kinds["model.layers.1.mlp"], "gate_up");
  EXPECT_EQ(kinds["model.layers.1.self_attn.o_proj"], "single");
  EXPECT_EQ(p.groups.size(), 2u * 4u);  // per layer: qkv, o, gate_up, down
  EXPECT_NEAR(p.bits_per_weight(), 4.5, 0.01);
}

TEST(QuantizePlan, Gemma4MoeSplitsFusedExperts) {
  const QuantPlan p = plan_ok(fixture("gemma4-moe-mm"));
  std::map<std::string, const QuantUnit*> by;
  for (const auto& u : p.units) by[u.module] = &u;
  for (int i = 0; i < 6; ++i)
    for (int e = 0; e < 8; ++e) {
      const std::string pre = "model.language_model.layers." + std::to_string(i) + ".experts." + std::to_string(e);
      SCOPED_TRACE(pre);
      ASSERT_TRUE(by.count(pre + ".gate_proj") && by.count(pre + ".up_proj") && by.count(pre + ".down_proj"));
      const QuantUnit& g = *by[pre + ".gate_proj"];
      const QuantUnit& u = *by[pre + ".up_proj"];
      const QuantUnit& d = *by[pre + ".down_proj"];
      EXPECT_EQ(g.rows, 64u);  // [Im, H]
      EXPECT_EQ(g.cols, 128u);
      EXPECT_EQ(d.rows, 128u);  // [H, Im]
      EXPECT_EQ(d.cols, 64u);
      EXPECT_EQ(g.slice.offset * 2, static_cast<std::uint64_t>(e) * 128 * 128 * 2);
      EXPECT_EQ(u.slice.offset * 2, g.slice.offset * 2 + 64 * 128 * 2);
      EXPECT_EQ(d.slice.offset * 2, static_cast<std::uint64_t>(e) * 128 * 64 * 2);
      EXPECT_EQ(g.group, u.group);  // {gate, up} per expert
      EXPECT_EQ(p.groups[g.group].kind, "gate_up");
      EXPECT_EQ(p.groups[g.group].name, pre);
      EXPECT_NE(d.group, g.group);
      // Split parts stay in the fused tensor's shard (R5).
      EXPECT_EQ(g.shard, decision(p, "model.language_model.layers." + std::to_string(i) + ".experts.gate_up_proj").shard);
    }
  EXPECT_EQ(decision(p, "model.language_model.layers.0.experts.gate_up_proj").action, Action::SPLIT);
  EXPECT_TRUE(has_line(p.summary, "144 expert Linears quantized"));
  EXPECT_TRUE(has_line(p.summary, "6 routers kept"));
  EXPECT_TRUE(has_line(p.ignore, "model.language_model.layers.3.router.proj"));
  // The experts never group across experts, and the split tensors are absent from the output.
  for (const auto& s : p.shards)
    for (const auto& t : s.layout.tensors) EXPECT_EQ(t.name.find("experts.gate_up_proj"), std::string::npos);
  // Gemma-4 k_eq_v full layer (5): {q, k} share one scale.
  std::map<std::string, std::string> kinds;
  for (const auto& g : p.groups) kinds[g.name] = g.kind;
  EXPECT_EQ(kinds["model.language_model.layers.5.self_attn"], "qk");
  EXPECT_EQ(kinds["model.language_model.layers.4.self_attn"], "qkv");
}

TEST(QuantizePlan, FusedExpertRefusals) {
  PlanInput in = fixture("gemma4-moe-mm");
  in.config["text_config"]["moe_intermediate_size"] = 32;
  auto p = make_plan(in, {});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().code, Errc::BAD_INPUT);
  EXPECT_THAT(p.error().message, HasSubstr("experts.down_proj"));
  EXPECT_THAT(p.error().message, HasSubstr("expert width = 32"));

  // A lone gate_up whose 2I equals H reads both ways: refused, naming both readings and the option.
  PlanInput ll = fixture("llama");
  const auto H = ll.config["hidden_size"].get<std::uint64_t>();
  ll.tensors.push_back({"model.layers.0.mlp.experts.gate_up_proj", 0, DType::BF16, {4, H, H}});
  auto q = make_plan(ll, {});
  ASSERT_FALSE(q.ok());
  EXPECT_EQ(q.error().code, Errc::BAD_INPUT);
  EXPECT_THAT(q.error().message, HasSubstr("ambiguous"));
  EXPECT_THAT(q.error().message, HasSubstr("[E, 2I, H] / [E, H, I]"));
  EXPECT_THAT(q.error().message, HasSubstr("--expert-orientation"));
  // The option settles it.
  PlanOptions o;
  o.experts.orientation = FusedOrientation::IN_OUT;
  auto r = make_plan(ll, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
}

// Issue 26: quantize never writes what its own verify rejects. A 3-D stack beside the experts that no storage
// form reads (here an unknown `w_in` next to a readable fused down) would leave a half-split MoE layer: refused
// before anything is written, naming the tensor and the option that keeps the block.
TEST(QuantizePlan, AnUnreadStackBesideQuantizedExpertsIsRefused) {
  PlanInput in = fixture("qwen3_vl_moe");
  for (auto& t : in.tensors)
    if (t.name.ends_with("mlp.experts.gate_up_proj")) t.name = t.name.substr(0, t.name.size() - 12) + "w_in";
  auto p = make_plan(in, {});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().code, Errc::BAD_INPUT);
  EXPECT_THAT(p.error().message, HasSubstr("experts.w_in"));
  EXPECT_THAT(p.error().message, HasSubstr("half-quantized MoE layer"));
  EXPECT_THAT(p.error().message, HasSubstr("--ignore"));
  // gate without up (a damaged separate-stacks form) is refused the same way, not split by halves.
  PlanInput sep = fixture("qwen3_vl_moe-sep3d");
  std::erase_if(sep.tensors, [](const SourceTensor& t) { return t.name.ends_with("mlp.experts.up_proj"); });
  auto s = make_plan(sep, {});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, Errc::BAD_INPUT);
  EXPECT_THAT(s.error().message, HasSubstr("gate without up"));
}

// "Nothing quantized" is never a success: refused with the reasons each Linear was kept.
TEST(QuantizePlan, NothingToQuantizeIsRefusedWithTheReasons) {
  PlanOptions o;
  o.scheme = QuantScheme::W4A16;  // group 128: no Linear of a hidden-64 fixture fits
  auto p = make_plan(fixture("qwen3"), o);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().code, Errc::BAD_INPUT);
  EXPECT_THAT(p.error().message, HasSubstr("nothing to quantize"));
  EXPECT_THAT(p.error().message, HasSubstr("shape does not fit the scheme"));
  PlanOptions all;
  all.ignore = {"re:.*"};
  auto q = make_plan(fixture("qwen3"), all);
  ASSERT_FALSE(q.ok());
  EXPECT_THAT(q.error().message, HasSubstr("--ignore"));
}

// Issue 14 #8: a weight with a zero dimension is bad input (exit 3), not a failed plan invariant (exit 5).
TEST(QuantizePlan, ZeroDimensionWeightIsBadInput) {
  PlanInput in = fixture("llama");
  for (auto& t : in.tensors)
    if (t.name == "model.layers.0.mlp.down_proj.weight") t.shape = {0, t.shape[1]};
  auto p = make_plan(in, {});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().code, Errc::BAD_INPUT);
  EXPECT_THAT(p.error().message, HasSubstr("zero dimension"));
}

TEST(QuantizePlan, PatternThatSplitsAFusedSetIsAnError) {
  PlanOptions o;
  o.ignore = {"model.layers.0.self_attn.q_proj"};
  auto p = make_plan(fixture("llama"), o);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().code, Errc::USAGE);
  EXPECT_THAT(p.error().message, HasSubstr("fused set qkv of 'model.layers.0.self_attn'"));
  EXPECT_THAT(p.error().message, HasSubstr("--ignore 'model.layers.0.self_attn.q_proj'"));

  o.ignore = {"re:model\\.layers\\.1\\.mlp\\.up"};
  p = make_plan(fixture("llama"), o);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.error().message, HasSubstr("gate_up of 'model.layers.1.mlp'"));

  // Ignoring a whole set is fine and lands in `ignore`.
  o.ignore = {"re:model\\.layers\\.1\\.mlp\\.(gate|up)_proj"};
  const QuantPlan ok = plan_ok(fixture("llama"), o);
  EXPECT_TRUE(has_line(ok.ignore, "model.layers.1.mlp.gate_proj"));
  EXPECT_TRUE(has_line(ok.ignore, "model.layers.1.mlp.up_proj"));
  EXPECT_EQ(decision(ok, "model.layers.1.mlp.up_proj.weight").rule, Rule::USER_IGNORE);

  // Part of a layer's experts.
  PlanOptions e;
  e.ignore = {"re:.*layers\\.2\\.experts\\.3\\."};
  auto pe = make_plan(fixture("gemma4-moe-mm"), e);
  ASSERT_FALSE(pe.ok());
  EXPECT_EQ(pe.error().code, Errc::USAGE);
}

TEST(QuantizePlan, ProtectedRolesNeedAnExactForce) {
  PlanOptions o;
  o.force_quantize = {"re:.*router.*"};
  auto p = make_plan(fixture("gemma4-moe-mm"), o);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().code, Errc::BAD_INPUT);
  EXPECT_THAT(p.error().message, HasSubstr("protected router"));

  o.force_quantize = {"model.language_model.layers.0.router.proj"};
  const QuantPlan q = plan_ok(fixture("gemma4-moe-mm"), o);
  EXPECT_EQ(decision(q, "model.language_model.layers.0.router.proj.weight").action, Action::QUANTIZE);
  EXPECT_EQ(decision(q, "model.language_model.layers.1.router.proj.weight").action, Action::KEEP);
  EXPECT_FALSE(has_line(q.ignore, "model.language_model.layers.0.router.proj"));
  ASSERT_EQ(q.forced.size(), 1u);
  bool loud = false;
  for (const auto& w : q.warnings) loud = loud || w.find("FORCED") != std::string::npos;
  EXPECT_TRUE(loud);

  PlanOptions l;
  l.force_quantize = {"lm_head"};
  const QuantPlan ql = plan_ok(fixture("llama"), l);
  EXPECT_EQ(decision(ql, "lm_head.weight").action, Action::QUANTIZE);
  EXPECT_EQ(ql.ignore, (std::vector<std::string>{"model.embed_tokens"}));

  // Non-matrix and unknown exact names are usage errors; ignore+force on one module too.
  l.force_quantize = {"model.norm"};
  EXPECT_EQ(make_plan(fixture("llama"), l).error().code, Errc::USAGE);
  l.force_quantize = {"model.layers.9.mlp.down_proj"};
  EXPECT_EQ(make_plan(fixture("llama"), l).error().code, Errc::USAGE);
  l.force_quantize = {"lm_head"};
  l.ignore = {"lm_head"};
  EXPECT_EQ(make_plan(fixture("llama"), l).error().code, Errc::USAGE);
}

TEST(QuantizePlan, KNotMultipleOf16IsKeptWithWarningOrStrictError) {
  PlanInput in = fixture("llama");
  for (auto& t : in.tensors)
    if (t.name == "model.layers.1.self_attn.o_proj.weight") t.shape = {128, 120};
  const QuantPlan p = plan_ok(in);
  const auto& d = decision(p, "model.layers.1.self_attn.o_proj.weight");
  EXPECT_EQ(d.action, Action::KEEP);
  EXPECT_EQ(d.rule, Rule::K_NOT_ALIGNED);
  EXPECT_TRUE(has_line(p.ignore, "model.layers.1.self_attn.o_proj"));
  ASSERT_FALSE(p.warnings.empty());
  EXPECT_THAT(p.warnings[0], HasSubstr("model.layers.1.self_attn.o_proj (K=120)"));

  PlanOptions strict;
  strict.strict = true;
  auto s = make_plan(in, strict);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, Errc::BAD_INPUT);
  EXPECT_THAT(s.error().message, HasSubstr("o_proj (K=120)"));

  // One misaligned member keeps its whole fused set.
  PlanInput in2 = fixture("llama");
  for (auto& t : in2.tensors)
    if (t.name == "model.layers.0.self_attn.v_proj.weight") t.shape = {64, 136 - 16 + 4};
  const QuantPlan p2 = plan_ok(in2);
  EXPECT_EQ(decision(p2, "model.layers.0.self_attn.q_proj.weight").action, Action::KEEP);
  EXPECT_EQ(decision(p2, "model.layers.0.self_attn.q_proj.weight").rule, Rule::FUSED_SET);
  EXPECT_TRUE(has_line(p2.ignore, "model.layers.0.self_attn.k_proj"));
}

// `--ignore lm_head` on a tied model (no lm_head tensor) is a note, not an error; on an untied model it
// matches the real head; a module that exists nowhere is still a usage error.
TEST(QuantizePlan, IgnoreLmHeadOnATiedModelIsANote) {
  PlanOptions o;
  o.ignore = {"lm_head"};
  auto tied = make_plan(fixture("gemma4-dense-mm"), o);
  ASSERT_TRUE(tied.ok()) << tied.error().message;
  EXPECT_TRUE(std::any_of(tied->warnings.begin(), tied->warnings.end(), [](const std::string& w) {
    return w.find("ties lm_head to embed_tokens") != std::string::npos;
  }));
  EXPECT_EQ(plan_ok(fixture("gemma4-dense-mm")).ignore, tied->ignore);
  EXPECT_TRUE(make_plan(fixture("qwen3"), o).ok());
  o.ignore = {"model.no_such_module"};
  auto bad = make_plan(fixture("gemma4-dense-mm"), o);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, Errc::USAGE);
}

TEST(QuantizePlan, IgnoreListIsExpandedAndNamedAsOnDisk) {
  const QuantPlan g = plan_ok(fixture("gemma4-dense-mm"));
  EXPECT_TRUE(has_line(g.ignore, "model.language_model.embed_tokens"));
  EXPECT_TRUE(has_line(g.ignore, "model.embed_vision.embedding_projection"));
  EXPECT_TRUE(has_line(g.ignore, "model.vision_tower.encoder.layers.0.self_attn.q_proj.linear"));
  EXPECT_TRUE(has_line(g.ignore, "model.vision_tower.patch_embedder.input_proj"));
  EXPECT_FALSE(has_line(g.ignore, "lm_head"));  // tied: not on disk
  EXPECT_TRUE(std::is_sorted(g.ignore.begin(), g.ignore.end()));

  const QuantPlan q = plan_ok(fixture("qwen3_5-dense-mm"));
  for (const char* n : {"lm_head", "model.language_model.embed_tokens", "mtp.fc", "mtp.layers.0.self_attn.q_proj",
                        "mtp.layers.0.mlp.down_proj", "model.language_model.layers.0.linear_attn.in_proj_qkv",
                        "model.language_model.layers.0.linear_attn.in_proj_a",
                        "model.language_model.layers.0.linear_attn.out_proj", "model.visual.blocks.0.attn.qkv",
                        "model.visual.merger.linear_fc2"})
    EXPECT_TRUE(has_line(q.ignore, n)) << n;
  for (const auto& i : q.ignore) {
    EXPECT_EQ(i.find("conv1d"), std::string::npos);  // 3-D: not Linear-like
    EXPECT_EQ(i.find("norm"), std::string::npos);
  }
  // Every kept 2-D weight is listed, no quantized module is.
  std::set<std::string> ign(q.ignore.begin(), q.ignore.end());
  for (const auto& d : q.decisions)
    if (d.linear_like) {
      EXPECT_EQ(ign.count(d.name.substr(0, d.name.size() - 7)) == 1, d.action == Action::KEEP) << d.name;
    }
  EXPECT_EQ(decision(q, "model.language_model.layers.3.self_attn.q_proj.weight").action, Action::QUANTIZE);
}

TEST(QuantizePlan, ConfigKeepsKeyOrderAndAddsQuantizationConfig) {
  const PlanInput in = fixture("qwen3_5-dense-mm");
  const QuantPlan p = plan_ok(in);
  std::vector<std::string> src_keys, out_keys;
  for (const auto& [k, v] : in.config.items()) src_keys.push_back(k);
  for (const auto& [k, v] : p.config.items()) out_keys.push_back(k);
  ASSERT_EQ(out_keys.size(), src_keys.size() + 1);
  EXPECT_TRUE(std::equal(src_keys.begin(), src_keys.end(), out_keys.begin()));
  EXPECT_EQ(out_keys.back(), "quantization_config");
  for (const auto& k : src_keys) EXPECT_EQ(p.config[k], in.config[k]) << k;
  EXPECT_EQ(nlohmann::ordered_json::parse(p.config_text), p.config);
  EXPECT_EQ(p.config_text.back(), '\n');

  const std::string expected = R"({
  "config_groups": {
    "group_0": {
      "format": "nvfp4-pack-quantized",
      "input_activations": null,
      "output_activations": null,
      "targets": [
        "Linear"
      ],
      "weights": {
        "actorder": null,
        "block_structure": null,
        "dynamic": false,
        "group_size": 16,
        "num_bits": 4,
        "observer": "memoryless_minmax",
        "observer_kwargs": {},
        "scale_dtype": "torch.float8_e4m3fn",
        "strategy": "tensor_group",
        "symmetric": true,
        "type": "float",
        "zp_dtype": null
      }
    }
  },
  "format": "nvfp4-pack-quantized",
  "global_compression_ratio": null,
  "ignore": [
    "a",
    "b"
  ],
  "kv_cache_scheme": null,
  "quant_method": "compressed-tensors",
  "quantization_status": "compressed",
  "transform_config": {},
  "version": "0.18.0"
})";
  EXPECT_EQ(ct_quant_config(QuantScheme::NVFP4A16, {"a", "b"}).dump(2), expected);
  EXPECT_EQ(p.config["quantization_config"]["ignore"].size(), p.ignore.size());

  // A quantized source is refused.
  PlanInput q = in;
  q.config["quantization_config"] = {{"quant_method", "compressed-tensors"}};
  EXPECT_EQ(make_plan(q, {}).error().code, Errc::BAD_INPUT);
}

TEST(QuantizePlan, ShardsIndexAndReferenceOrder) {
  for (const char* fx : kFixtures) {
    SCOPED_TRACE(fx);
    const PlanInput in = fixture(fx);
    const QuantPlan p = plan_ok(in);
    ASSERT_EQ(p.shards.size(), in.shard_names.size());
    const auto idx = nlohmann::json::parse(p.index_text);
    ASSERT_TRUE(idx.contains("metadata") && idx.contains("weight_map"));
    std::uint64_t total = 0;
    std::size_t n = 0;
    for (std::size_t s = 0; s < p.shards.size(); ++s) {
      const auto& sh = p.shards[s];
      EXPECT_EQ(sh.name, in.shard_names[s]);
      ASSERT_EQ(sh.sources.size(), sh.layout.tensors.size());
      for (std::size_t i = 0; i < sh.layout.tensors.size(); ++i) {
        const auto& t = sh.layout.tensors[i];
        EXPECT_EQ(idx["weight_map"][t.name], sh.name);
        total += t.nbytes();
        ++n;
        if (i > 0) {
          const auto& a = sh.layout.tensors[i - 1];
          EXPECT_TRUE(dtype_write_rank(a.dtype) < dtype_write_rank(t.dtype) ||
                      (a.dtype == t.dtype && a.name < t.name))
              << a.name << " before " << t.name;
        }
        if (sh.sources[i].kind != OutKind::PASSTHROUGH) {
          EXPECT_EQ(p.units[sh.sources[i].index].shard, s);
        }
      }
    }
    EXPECT_EQ(idx["metadata"]["total_size"].get<std::uint64_t>(), total);
    EXPECT_EQ(idx["weight_map"].size(), n);
    EXPECT_EQ(p.output_bytes, total);
    EXPECT_EQ(p.index_name, "model.safetensors.index.json");
  }
}

TEST(QuantizePlan, PatternsMatchLikeCompressedTensors) {
  auto r = NamePattern::parse("re:.*router");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->matches("model.layers.0.router.proj"));  // re.match: anchored at the start only
  auto l = NamePattern::parse("re:layers");
  EXPECT_FALSE(l->matches("model.layers.0"));
  auto e = NamePattern::parse("lm_head");
  EXPECT_TRUE(e->matches("lm_head"));
  EXPECT_FALSE(e->matches("lm_head.x"));
  EXPECT_EQ(NamePattern::parse("re:(").error().code, Errc::USAGE);
  EXPECT_EQ(parse_quant_scheme("mxfp4").error().code, Errc::USAGE);
  EXPECT_EQ(format_count(11520), "11,520");
  EXPECT_EQ(format_count(999), "999");
  EXPECT_EQ(format_count(1000000), "1,000,000");
}

}  // namespace
}  // namespace fp4forge::quant
