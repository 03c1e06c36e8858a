// Recipes of several schemes (quantize/recipe.h): --scheme-for and --recipe parsing, selectors, and the plan's
// config groups (targets proven against vLLM's lookup, refusals where vLLM would serve one scheme for two).
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fp4forge/model/quant_config.h"
#include "fp4forge/quantize/plan.h"
#include "fp4forge/quantize/recipe.h"
#include "plan_test_util.h"

namespace fp4forge::quant {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ptest::fixture;

SchemeRule rule(std::string_view arg) {
  auto r = parse_scheme_for(arg);
  EXPECT_TRUE(r.ok()) << arg;
  return r.ok() ? *r : SchemeRule{};
}

PlanOptions with_rules(std::string_view scheme, std::vector<std::string_view> args) {
  PlanOptions o;
  const auto s = parse_quant_scheme(scheme);
  EXPECT_TRUE(s.ok()) << scheme;
  if (s.ok()) o.scheme = *s;
  for (auto a : args) o.scheme_for.push_back(rule(a));
  return o;
}

TEST(Recipe, SchemeForParsesSelectorSchemeAndObserver) {
  const SchemeRule a = rule("attention=fp8-block");
  EXPECT_THAT(a.match, ElementsAre("attention"));
  EXPECT_EQ(a.scheme, QuantScheme::FP8_BLOCK);  // parsed where it was read: the library takes it typed
  EXPECT_FALSE(a.observer.has_value());
  const SchemeRule b = rule("last_n_layers=2=w4a16:mse");  // the scheme follows the last '='
  EXPECT_THAT(b.match, ElementsAre("last_n_layers=2"));
  EXPECT_EQ(b.scheme, QuantScheme::W4A16);
  EXPECT_EQ(b.observer, Observer::NVFP4_EXPANDED_MSE);
  for (std::string_view bad : {"attention", "=fp8-block", "attention=", "attention=fp8-block:", "attention=:mse"}) {
    auto r = parse_scheme_for(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code, Errc::USAGE) << bad;
    EXPECT_THAT(r.error().message, HasSubstr("SELECTOR=SCHEME")) << bad;
  }
}

TEST(Recipe, CompileRuleChecksSelectorSchemeAndObserver) {
  EXPECT_TRUE(compile_rule(rule("experts=nvfp4a16")).ok());
  auto typo = compile_rule(rule("attn=fp8-block"));
  ASSERT_FALSE(typo.ok());
  EXPECT_THAT(typo.error().message, HasSubstr("neither a role nor a module name"));
  EXPECT_THAT(typo.error().message, HasSubstr("attention, dense_mlp, experts"));
  EXPECT_FALSE(compile_rule(rule("last_n_layers=0=fp8-block")).ok());
  EXPECT_FALSE(compile_rule(rule("last_n_layers=x=fp8-block")).ok());
  EXPECT_FALSE(compile_rule(rule("re:(=fp8-block")).ok());
  // The scheme is read where the rule is: an unknown one is refused by parse_scheme_for, naming the argument.
  auto scheme = parse_scheme_for("attention=fp7");
  ASSERT_FALSE(scheme.ok());
  EXPECT_EQ(scheme.error().code, Errc::USAGE);
  EXPECT_THAT(scheme.error().message, HasSubstr("--scheme-for 'attention=fp7'"));
  EXPECT_THAT(parse_scheme_for("attention=nvfp4a16:msee").error().message, HasSubstr("did you mean"));
  // FP8 takes min-max only (codec/observer.h): an observer the scheme does not take is refused.
  EXPECT_FALSE(compile_rule(rule("attention=fp8-block:mse")).ok());
  auto c = compile_rule(rule("dense_mlp=nvfp4a16:minmax"));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->observer, Observer::MINMAX);
  EXPECT_EQ(compile_rule(rule("dense_mlp=nvfp4a16"))->observer, default_observer(QuantScheme::NVFP4A16));
}

TEST(Recipe, SelectorsMatchRolesLayersAndNames) {
  auto sel = [](std::string_view t) { return *Selector::parse(t); };
  const SelectorSubject q{{"model.layers.3.self_attn.q_proj"}, Role::ATTN_Q, 3};
  const SelectorSubject e{{"model.layers.0.mlp.experts.1.up_proj", "model.layers.0.mlp.experts.gate_up_proj"},
                          Role::EXPERT_UP, 0};
  const SelectorSubject tower{{"model.visual.blocks.0.attn.qkv"}, Role::VISION, -1};
  EXPECT_TRUE(sel("attention").matches(q, 4));
  EXPECT_FALSE(sel("attention").matches(e, 4));
  EXPECT_TRUE(sel("experts").matches(e, 4));
  EXPECT_FALSE(sel("shared_experts").matches(e, 4));
  EXPECT_TRUE(sel("last_n_layers=1").matches(q, 4));
  EXPECT_FALSE(sel("last_n_layers=1").matches(e, 4));
  EXPECT_TRUE(sel("first_n_layers=1").matches(e, 4));
  EXPECT_FALSE(sel("first_n_layers=3").matches(tower, 4));  // outside the text stack: no layer
  // A fused 3-D expert tensor is selected by its own name as well as by the per-expert module.
  EXPECT_TRUE(sel("model.layers.0.mlp.experts.gate_up_proj").matches(e, 4));
  EXPECT_TRUE(sel("re:.*experts\\.1\\.").matches(e, 4));
  EXPECT_FALSE(sel("re:experts").matches(e, 4));  // re.match: anchored at the start
  EXPECT_TRUE(sel("model.layers.3.self_attn.q_proj").is_exact());
  EXPECT_FALSE(sel("re:.*q_proj").is_exact());
  EXPECT_FALSE(sel("attention").is_exact());
}

TEST(Recipe, YamlAndJsonRecipesReadTheSame) {
  const std::string yaml = R"(# mixed
scheme: nvfp4a16
observer: minmax
rules:
  - match: attention
    scheme: fp8-block
  - match: [last_n_layers=2, "re:.*shared_experts.*"]
    scheme: fp8-dynamic
    observer: minmax
ignore: ["re:.*mtp.*"]
)";
  const std::string json = R"({"scheme": "nvfp4a16", "observer": "minmax",
    "rules": [{"match": "attention", "scheme": "fp8-block"},
              {"match": ["last_n_layers=2", "re:.*shared_experts.*"], "scheme": "fp8-dynamic", "observer": "minmax"}],
    "ignore": ["re:.*mtp.*"]})";
  for (const std::string& text : {yaml, json}) {
    auto r = parse_recipe(text, "r");
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->scheme, QuantScheme::NVFP4A16);
    EXPECT_EQ(r->observer, Observer::MINMAX);
    ASSERT_EQ(r->rules.size(), 2u);
    EXPECT_THAT(r->rules[0].match, ElementsAre("attention"));
    EXPECT_EQ(r->rules[0].scheme, QuantScheme::FP8_BLOCK);
    EXPECT_EQ(r->rules[0].origin, "r rules[0]");
    EXPECT_THAT(r->rules[1].match, ElementsAre("last_n_layers=2", "re:.*shared_experts.*"));
    EXPECT_EQ(r->rules[1].observer, Observer::MINMAX);
    EXPECT_THAT(r->ignore, ElementsAre("re:.*mtp.*"));
  }
}

TEST(Recipe, MalformedRecipesAreUsageErrorsNamingTheRule) {
  struct Case {
    std::string text, says;
  };
  for (const Case& c : std::vector<Case>{
           {"scheme: [a", "invalid YAML"},
           {"- a\n- b\n", "expected a mapping"},
           {"schem: nvfp4a16\n", "unknown key 'schem'"},
           {"rules: attention\n", "expected a list of rules"},
           {"rules:\n  - match: attention\n", "needs both match and scheme"},
           {"rules:\n  - match: attention\n    scheme: fp8-block\n    observe: minmax\n", "unknown key 'observe'"},
           {"rules:\n  - match: attention\n    scheme: fp7\n", "r rules[0]"},
           {"rules:\n  - match: []\n    scheme: fp8-block\n", "selects nothing"},
           {"rules:\n  - match: {a: 1}\n    scheme: fp8-block\n", "a string or a list of strings"},
           {"ignore: {a: 1}\n", "a string or a list of strings"},
           // The default scheme and observer are read (and checked together) where the file is, not at plan time.
           {"scheme: fp7\n", "r scheme: unknown scheme 'fp7'"},
           {"observer: msee\n", "r observer:"},
           {"scheme: fp8-block\nobserver: mse\n", "r: "},
       }) {
    auto r = parse_recipe(c.text, "r");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.error().code, Errc::USAGE) << c.text;
    EXPECT_THAT(r.error().message, HasSubstr(c.says)) << c.text;
  }
  auto missing = read_recipe("/nonexistent/recipe.yaml");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, Errc::IO);
}

TEST(Recipe, CommandLineWinsOverTheRecipe) {
  Recipe r;
  r.scheme = QuantScheme::FP8_DYNAMIC;
  r.observer = Observer::MINMAX;
  r.rules.push_back(rule("experts=nvfp4a16"));
  r.ignore = {"lm_head"};
  PlanOptions o = with_rules("w4a16", {"attention=fp8-block"});
  o.ignore = {"x"};
  apply_recipe(r, o, /*scheme_given=*/true, /*observer_given=*/false);
  EXPECT_EQ(o.scheme, QuantScheme::W4A16);
  EXPECT_EQ(o.observer, Observer::MINMAX);
  ASSERT_EQ(o.scheme_for.size(), 2u);
  EXPECT_THAT(o.scheme_for[0].match, ElementsAre("attention"));  // --scheme-for first
  EXPECT_THAT(o.scheme_for[1].match, ElementsAre("experts"));
  EXPECT_THAT(o.ignore, ElementsAre("x", "lm_head"));
  PlanOptions d;
  apply_recipe(r, d, false, false);
  EXPECT_EQ(d.scheme, QuantScheme::FP8_DYNAMIC);
}

// ---- the plan -------------------------------------------------------------------------------------

/** The group vLLM gives each unit under the plan's own config, by group name. */
std::vector<std::string> vllm_groups(const QuantPlan& p) {
  const auto qc = parse_quant_config(p.config["quantization_config"]);
  EXPECT_TRUE(qc.ok());
  const auto gm = GroupMatcher::compile(*qc);
  EXPECT_TRUE(gm.ok());
  std::vector<std::string> out;
  for (const auto& u : p.units) {
    const GroupMatch m = gm->match(u.module, "Linear");
    out.push_back(m.group < 0 ? "none" : qc->groups[static_cast<std::size_t>(m.group)].name);
  }
  return out;
}

TEST(RecipePlan, AttentionInFp8WithNvfp4ElsewhereIsTwoGroups) {
  auto p = make_plan(fixture("llama"), with_rules("nvfp4a16", {"attention=fp8-dynamic"}));
  ASSERT_TRUE(p.ok()) << p.error().message;
  ASSERT_EQ(p->schemes.size(), 2u);
  EXPECT_EQ(p->scheme, "nvfp4a16+fp8-dynamic");
  EXPECT_EQ(p->schemes[0].group, "group_0");
  EXPECT_EQ(p->schemes[0].scheme, QuantScheme::NVFP4A16);
  EXPECT_THAT(p->schemes[0].targets, ElementsAre("Linear"));
  EXPECT_EQ(p->schemes[1].scheme, QuantScheme::FP8_DYNAMIC);
  EXPECT_THAT(p->schemes[1].rules, ElementsAre("--scheme-for 'attention=fp8-dynamic'"));
  // One `re:` target per name form, the fused qkv_proj vLLM looks up included (a Linear target would take it).
  // The prefix is not spelled: vLLM renames target prefixes with the model's mapper, which leaves patterns alone.
  EXPECT_THAT(p->schemes[1].targets,
              ElementsAre("re:(?:.*\\.)?layers\\.\\d+\\.self_attn\\.k_proj$", "re:(?:.*\\.)?layers\\.\\d+\\.self_attn\\.o_proj$",
                          "re:(?:.*\\.)?layers\\.\\d+\\.self_attn\\.q_proj$",
                          "re:(?:.*\\.)?layers\\.\\d+\\.self_attn\\.qkv_proj$",
                          "re:(?:.*\\.)?layers\\.\\d+\\.self_attn\\.v_proj$"));
  // A multimodal prefix as vLLM renames it (Qwen3-VL: model.language_model. -> language_model.model.) is still selected.
  {
    const auto qc = parse_quant_config(p->config["quantization_config"]);
    const auto gm = GroupMatcher::compile(*qc);
    EXPECT_EQ(qc->groups[static_cast<std::size_t>(gm->match("language_model.model.layers.1.self_attn.q_proj", "Linear").group)].name,
              "group_1");
  }
  const auto& qc = p->config["quantization_config"];
  EXPECT_EQ(qc["format"], "mixed-precision");
  EXPECT_EQ(qc["config_groups"]["group_0"]["format"], "nvfp4-pack-quantized");
  EXPECT_EQ(qc["config_groups"]["group_1"]["format"], "float-quantized");
  // Each group is its preset exactly as the one-scheme config writes it, but for its targets.
  for (const auto& [g, s] : {std::pair{"group_0", QuantScheme::NVFP4A16}, std::pair{"group_1", QuantScheme::FP8_DYNAMIC}}) {
    const std::size_t gi = std::string(g) == "group_0" ? 0 : 1;
    auto one = ct_quant_config(s, {}, p->schemes[gi].observer)["config_groups"]["group_0"];
    one["targets"] = qc["config_groups"][g]["targets"];
    EXPECT_EQ(one.dump(), qc["config_groups"][g].dump()) << g;
  }
  std::size_t fp8 = 0;
  const auto got = vllm_groups(*p);
  for (std::size_t i = 0; i < p->units.size(); ++i) {
    const bool attn = p->units[i].module.find("self_attn") != std::string::npos;
    EXPECT_EQ(got[i], attn ? "group_1" : "group_0") << p->units[i].module;
    EXPECT_EQ(p->units[i].scheme, attn ? 1u : 0u);
    fp8 += attn ? 1 : 0;
  }
  EXPECT_EQ(fp8, 8u);
  EXPECT_EQ(p->schemes[1].units, 8u);
  // NVFP4A16 shares a global scale over gate/up; FP8 units stand alone.
  for (const auto& g : p->groups) EXPECT_TRUE(g.kind == "single" || g.kind == "gate_up") << g.kind;
}

TEST(RecipePlan, ALayerSubsetIsNamedExactlyWhereAPatternWouldTakeOtherLayers) {
  auto p = make_plan(fixture("llama"), with_rules("nvfp4a16", {"last_n_layers=1=fp8-dynamic"}));
  ASSERT_TRUE(p.ok()) << p.error().message;
  ASSERT_EQ(p->schemes.size(), 2u);
  const auto& t = p->schemes[1].targets;
  EXPECT_NE(std::find(t.begin(), t.end(), "model.layers.1.self_attn.qkv_proj"), t.end());
  EXPECT_NE(std::find(t.begin(), t.end(), "model.layers.1.mlp.gate_up_proj"), t.end());
  EXPECT_EQ(std::find(t.begin(), t.end(), "model.layers.0.mlp.down_proj"), t.end());
  for (const auto& x : t) EXPECT_EQ(x.rfind("re:", 0), std::string::npos) << x;
  const auto got = vllm_groups(*p);
  for (std::size_t i = 0; i < p->units.size(); ++i)
    EXPECT_EQ(got[i], p->units[i].module.find("layers.1.") != std::string::npos ? "group_1" : "group_0");
}

TEST(RecipePlan, RoutedExpertsInTheirOwnGroupAreFoundAsFusedMoe) {
  auto p = make_plan(fixture("qwen3_moe"), with_rules("fp8-dynamic", {"experts=nvfp4a16"}));
  ASSERT_TRUE(p.ok()) << p.error().message;
  ASSERT_EQ(p->schemes.size(), 2u);
  const auto qc = parse_quant_config(p->config["quantization_config"]);
  const auto gm = GroupMatcher::compile(*qc);
  const auto ig = IgnoreMatcher::compile(qc->ignore);
  auto m = gm->moe(*ig, "model.layers.0.mlp.experts");
  ASSERT_TRUE(m.ok()) << m.error().message;
  EXPECT_EQ(qc->groups[static_cast<std::size_t>(m->group)].name, "group_1");
}

TEST(RecipePlan, ARuleThatSplitsAFusedSetOrALayersExpertsIsRefused) {
  auto fused = make_plan(fixture("llama"), with_rules("nvfp4a16", {"model.layers.0.self_attn.q_proj=fp8-dynamic"}));
  ASSERT_FALSE(fused.ok());
  EXPECT_EQ(fused.error().code, Errc::USAGE);
  EXPECT_THAT(fused.error().message, HasSubstr("fused set qkv of 'model.layers.0.self_attn' would get two schemes"));
  EXPECT_THAT(fused.error().message, HasSubstr("--scheme-for 'model.layers.0.self_attn.q_proj=fp8-dynamic'"));
  auto experts = make_plan(fixture("qwen3_moe"), with_rules("nvfp4a16", {"re:.*experts\\.0\\..*=fp8-dynamic"}));
  ASSERT_FALSE(experts.ok());
  EXPECT_EQ(experts.error().code, Errc::USAGE);
  EXPECT_THAT(experts.error().message, HasSubstr("would get two schemes"));
  EXPECT_THAT(experts.error().message, HasSubstr("F10"));
}

TEST(RecipePlan, SelectorsThatSelectNothing) {
  auto typo = make_plan(fixture("llama"), with_rules("nvfp4a16", {"model.layers.0.self_attn.qproj=fp8-dynamic"}));
  ASSERT_FALSE(typo.ok());
  EXPECT_EQ(typo.error().code, Errc::USAGE);
  EXPECT_THAT(typo.error().message, HasSubstr("matches no module of the checkpoint"));
  // A role the model lacks is a warning, and nothing takes its scheme: one group, the plain config.
  auto none = make_plan(fixture("llama"), with_rules("nvfp4a16", {"shared_experts=fp8-dynamic"}));
  ASSERT_TRUE(none.ok()) << none.error().message;
  EXPECT_EQ(none->schemes.size(), 1u);
  EXPECT_THAT(none->warnings, testing::Contains(HasSubstr("selects no module")));
  auto plain = make_plan(fixture("llama"), PlanOptions{});
  EXPECT_EQ(none->config_text, plain->config_text);
  // A rule shadowed by an earlier one selects nothing either.
  auto shadow = make_plan(fixture("llama"), with_rules("nvfp4a16", {"attention=fp8-dynamic", "re:.*q_proj=w4a16"}));
  ASSERT_TRUE(shadow.ok());
  EXPECT_THAT(shadow->warnings, testing::Contains(HasSubstr("'re:.*q_proj=w4a16' selects no module")));
}

TEST(RecipePlan, AllModulesInOneRuleGroupIsTheOneGroupConfigOfThatScheme) {
  auto p = make_plan(fixture("llama"),
                     with_rules("nvfp4a16", {"attention=fp8-dynamic", "dense_mlp=fp8-dynamic"}));
  ASSERT_TRUE(p.ok()) << p.error().message;
  ASSERT_EQ(p->schemes.size(), 1u);
  EXPECT_THAT(p->schemes[0].targets, ElementsAre("Linear"));
  auto fp8 = make_plan(fixture("llama"), with_rules("fp8-dynamic", {}));
  EXPECT_EQ(p->config_text, fp8->config_text);
}

TEST(RecipePlan, ThePolicyIsAskedUnderTheModulesOwnScheme) {
  // GatedDeltaNet projections are kept at 4 bits and quantized at 8 (model/scheme_policy.h).
  auto p = make_plan(fixture("qwen3_next"), with_rules("nvfp4a16", {"linear_attention=fp8-dynamic"}));
  ASSERT_TRUE(p.ok()) << p.error().message;
  std::size_t la = 0;
  for (const auto& u : p->units)
    if (u.role == Role::LINEAR_ATTN) {
      ++la;
      EXPECT_EQ(p->schemes[u.scheme].scheme, QuantScheme::FP8_DYNAMIC) << u.module;
    }
  EXPECT_GT(la, 0u);
  auto four = make_plan(fixture("qwen3_next"), PlanOptions{});
  for (const auto& u : four->units) EXPECT_NE(u.role, Role::LINEAR_ATTN) << u.module;
}

TEST(CtQuantConfig, GroupsInNameOrderAndTheSharedFormat) {
  const std::vector<CtGroupSpec> float8{{"group_1", QuantScheme::FP8_BLOCK, Observer::MINMAX, {"re:a"}},
                                        {"group_0", QuantScheme::FP8_DYNAMIC, Observer::MINMAX, {"Linear"}}};
  const auto j = ct_quant_config(float8, {"lm_head"});
  EXPECT_EQ(j["format"], "float-quantized");  // both groups are float-quantized
  std::vector<std::string> order;
  for (const auto& [k, v] : j["config_groups"].items()) order.push_back(k);
  EXPECT_THAT(order, ElementsAre("group_0", "group_1"));
  const CtGroupSpec one{"group_0", QuantScheme::W4A16, Observer::MEMORYLESS_MSE, {"Linear"}};
  EXPECT_EQ(ct_quant_config(std::span<const CtGroupSpec>(&one, 1), {"x"}).dump(),
            ct_quant_config(QuantScheme::W4A16, {"x"}, Observer::MEMORYLESS_MSE).dump());
  EXPECT_EQ(ct_quant_config(std::span<const CtGroupSpec>(), {})["format"], "dense");
}

}  // namespace
}  // namespace fp4forge::quant
