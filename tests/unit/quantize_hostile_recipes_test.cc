// Round 4 (issue 53), the quantize/recipe part, one table per class of the report (/work/shared/reliability/round4.md
// lists the reproductions; each is a row here):
// - class 3, one parser policy per format: a recipe with duplicate keys, several documents, tags or control bytes is
//   refused naming the lines (R4-B6), as util/yaml_strict.h refuses them for every YAML fp4forge reads;
// - class 5, numbers and arguments: a module named twice is harmless and no message calls a 2-D weight "not 2-D"
//   (R4-B15); a rule that splits any fused set is a usage error naming the set and the rule (R4-B17); recipes are
//   bounded, and rules that select nothing are one warning (R4-B19); the plan's observer is every group's (R4-B23).
#include <sys/stat.h>

#include <fstream>
#include <ostream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fp4forge/quantize/plan.h"
#include "fp4forge/quantize/recipe.h"
#include "plan_test_util.h"

namespace fp4forge::quant {
namespace {

using ::testing::HasSubstr;
using ptest::fixture;
using testutil::TempDir;

// ---- class 3: one parser policy (R4-B6) ------------------------------------------------------------------------

struct ParseCase {
  std::string name, text, says;
};
void PrintTo(const ParseCase& c, std::ostream* os) { *os << c.name; }  // ctest lines name the row

class RecipeParserPolicy : public ::testing::TestWithParam<ParseCase> {};

TEST_P(RecipeParserPolicy, RefusedWithTheLinesNotReadOneWay) {
  const ParseCase& c = GetParam();
  const auto r = parse_recipe(c.text, "mixed.yaml");
  ASSERT_FALSE(r.ok()) << c.text;
  EXPECT_EQ(r.error().code, Errc::USAGE);
  EXPECT_EQ(r.error().message.rfind("mixed.yaml", 0), 0u) << r.error().message;
  EXPECT_THAT(r.error().message, HasSubstr(c.says));
}

using namespace std::string_literals;
INSTANTIATE_TEST_SUITE_P(
    Round4, RecipeParserPolicy,
    ::testing::Values(
        // the report's four (A2-*): yaml-cpp read the first, PyYAML the last or an error
        ParseCase{"b6a_scheme_twice", "scheme: fp8-dynamic\nscheme: nvfp4a16\n",
                  "line 2: duplicate key 'scheme' (first at line 1)"},
        ParseCase{"b6b_rules_twice",
                  "rules:\n  - match: attention\n    scheme: fp8-dynamic\nrules:\n  - match: dense_mlp\n    scheme: w4a16\n",
                  "line 4: duplicate key 'rules' (first at line 1)"},
        ParseCase{"b6c_two_documents", "scheme: fp8-dynamic\n---\nscheme: nvfp4a16\n", "line 2: a second YAML document"},
        ParseCase{"b6d_json_duplicate", "{\"scheme\": \"fp8-dynamic\", \"scheme\": \"nvfp4a16\"}",
                  "line 1: duplicate key 'scheme'"},
        // the same class at other depths and in other shapes
        ParseCase{"rule_key_twice", "rules:\n  - match: attention\n    scheme: fp8-block\n    scheme: w4a16\n",
                  "line 4: duplicate key 'scheme' (first at line 3)"},
        ParseCase{"json_rule_key_twice", "{\"rules\": [{\"match\": \"attention\", \"match\": \"experts\", \"scheme\": \"w4a16\"}]}",
                  "duplicate key 'match'"},
        ParseCase{"ignore_twice", "ignore: [lm_head]\nscheme: w4a16\nignore: [re:.*mtp.*]\n", "line 3: duplicate key 'ignore'"},
        ParseCase{"python_tag", "scheme: !!python/object/apply:os.system [ls]\n", "line 1: tag '!!python/object/apply:os.system'"},
        ParseCase{"nul_byte", "scheme: nvfp4a16\0\n"s, "character U+0000"},
        ParseCase{"invalid_utf8", "scheme: nvfp4a16 # \xff\n", "not valid UTF-8"},
        ParseCase{"list_as_key", "? [scheme]\n: w4a16\n", "a list used as a mapping key"},
        // merge keys: read by PyYAML, not by recipes: refused naming the key (the report's note)
        ParseCase{"merge_key_in_rule", "rules:\n  - <<: {scheme: fp8-block}\n    match: attention\n",
                  "rules[0]: merge key '<<' is not read in recipes"}),
    [](const auto& i) { return i.param.name; });

// ---- R4-B19: a recipe is bounded ---------------------------------------------------------------------------------

TEST(RecipeBounds, SizeEntriesAndFilesThatAreNotRecipes) {
  std::string big = "rules:\n";
  while (big.size() <= (1u << 20)) big += "  - {match: attention, scheme: fp8-dynamic}\n";
  const auto r = parse_recipe(big, "big.yaml");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::USAGE);
  EXPECT_THAT(r.error().message, HasSubstr("over the 1,048,576-byte limit of a recipe"));

  std::string many = "rules:\n  - scheme: fp8-dynamic\n    match: [";
  for (int i = 0; i < 10001; ++i) many += (i ? ",a." : "a.") + std::to_string(i);
  many += "]\n";
  ASSERT_LT(many.size(), 1u << 20);
  const auto m = parse_recipe(many, "many.yaml");
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.error().message, HasSubstr("more than 10,000 selectors and ignore entries"));
  std::string ignores = "ignore: [";
  for (int i = 0; i < 10001; ++i) ignores += (i ? ",a." : "a.") + std::to_string(i);
  EXPECT_FALSE(parse_recipe(ignores + "]\n", "i.yaml").ok());

  TempDir tmp;
  {
    std::ofstream f(tmp.path / "big.yaml");
    f << big;
  }
  const auto file = read_recipe(tmp.path / "big.yaml");  // the file reader's own cap: bad input, not a usage error
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.error().code, Errc::BAD_INPUT);
  ASSERT_EQ(::mkfifo((tmp.path / "fifo.yaml").c_str(), 0600), 0);
  const auto fifo = read_recipe(tmp.path / "fifo.yaml");  // never waited on: not a regular file
  ASSERT_FALSE(fifo.ok());
  EXPECT_EQ(fifo.error().code, Errc::BAD_INPUT);
  EXPECT_THAT(fifo.error().message, HasSubstr("not a regular file"));
}

TEST(RecipeBounds, RulesThatSelectNothingAreOneWarning) {
  PlanOptions o;
  for (int i = 0; i < 50; ++i) o.scheme_for.push_back(*parse_scheme_for("shared_experts=fp8-dynamic"));
  auto p = make_plan(fixture("llama"), o);
  ASSERT_TRUE(p.ok()) << p.error().message;
  std::size_t idle = 0;
  for (const auto& w : p->warnings) idle += w.find("select") != std::string::npos && w.find("no module") != std::string::npos;
  EXPECT_EQ(idle, 1u);
  EXPECT_THAT(p->warnings, testing::Contains(HasSubstr("50 rules select no module")));
  EXPECT_THAT(p->warnings, testing::Contains(HasSubstr("... (42 more)")));
}

// ---- R4-B15: a module named twice is harmless; the message says what the tensor is ---------------------------

struct PatternCase {
  std::string name, fixture;
  std::vector<std::string> ignore, force;
  std::string says;  ///< "" = planned; "warning:..." = planned with that warning; else the USAGE error's part
  std::string orientation = {};
};
void PrintTo(const PatternCase& c, std::ostream* os) { *os << c.name; }  // ctest lines name the row

class UserPatterns : public ::testing::TestWithParam<PatternCase> {};

TEST_P(UserPatterns, DuplicatesAreHarmlessAndNo2DWeightIsCalledNot2D) {
  const PatternCase& c = GetParam();
  PlanOptions o;
  o.ignore = c.ignore;
  o.force_quantize = c.force;
  if (!c.orientation.empty()) o.experts.orientation = parse_orientation(c.orientation);
  const auto p = make_plan(fixture(c.fixture), o);
  if (c.says.empty() || c.says.starts_with("warning:")) {
    ASSERT_TRUE(p.ok()) << p.error().message;
    for (const auto& w : p->warnings) {
      EXPECT_THAT(w, ::testing::Not(HasSubstr("matches no module"))) << w;
      EXPECT_THAT(w, ::testing::Not(HasSubstr("2-D"))) << w;
    }
    if (!c.says.empty()) {
      EXPECT_THAT(p->warnings, testing::Contains(HasSubstr(c.says.substr(8))));
    }
    return;
  }
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().code, Errc::USAGE);
  EXPECT_THAT(p.error().message, HasSubstr(c.says));
  EXPECT_THAT(p.error().message, ::testing::Not(HasSubstr("not a 2-D")));
}

INSTANTIATE_TEST_SUITE_P(
    Round4, UserPatterns,
    ::testing::Values(
        // A5-dup-name-*: the first copy took the module, the second was called "not a 2-D weight (shape [512, 128])"
        PatternCase{"ignore_twice", "llama", {"lm_head", "lm_head"}, {}, ""},
        PatternCase{"recipe_ignore_and_flag", "llama", {"lm_head", "lm_head"}, {}, ""},  // apply_recipe appends
        PatternCase{"force_twice", "llama", {}, {"lm_head", "lm_head"}, ""},
        PatternCase{"name_twice_with_weight",
                    "llama",
                    {"model.layers.0.mlp.down_proj", "model.layers.0.mlp.down_proj.weight"},
                    {},
                    ""},
        PatternCase{"regex_then_name", "llama", {"re:.*down_proj", "model.layers.0.mlp.down_proj"}, {}, ""},
        PatternCase{"name_then_regex",
                    "llama",
                    {"model.layers.0.mlp.down_proj", "re:model\\.layers\\.0\\.mlp\\.down_proj"},
                    {},
                    ""},
        // an experts block, as the R3 hint names it: per-expert and fused storage, healthy or not settled
        PatternCase{"experts_block_per_expert", "qwen3_moe", {"model.layers.0.mlp.experts"}, {}, ""},
        PatternCase{"experts_block_fused_hint",
                    "gpt_oss",
                    {"model.layers.0.mlp.experts", "model.layers.1.mlp.experts"},
                    {},
                    "",
                    "out-in"},
        PatternCase{"experts_block_and_tensor",
                    "gpt_oss",
                    {"re:.*experts", "model.layers.0.mlp.experts.gate_up_proj"},
                    {},
                    "",
                    "out-in"},
        // a tensor no Linear holds: kept anyway (a warning), or refused for --force-quantize, with its real shape
        PatternCase{"ignore_a_norm",
                    "llama",
                    {"model.norm"},
                    {},
                    "warning:'model.norm.weight' (shape [128]) is not a Linear weight"},
        PatternCase{
            "force_a_norm", "llama", {}, {"model.norm"}, "'model.norm.weight' (shape [128]) is not a Linear weight"},
        PatternCase{"typo",
                    "llama",
                    {"model.layers.0.mlp.downproj"},
                    {},
                    "matches no module of the checkpoint (did "
                    "you mean 'model.layers.0.mlp.down_proj'?)"},
        // issue 55 tryout: a case slip got another module (k_proj), a block name no hint
        PatternCase{"case_slip",
                    "llama",
                    {"model.layers.0.self_attn.Q_proj"},
                    {},
                    "(did you mean "
                    "'model.layers.0.self_attn.q_proj'?)"},
        PatternCase{"a_block",
                    "llama",
                    {"model.layers.0.mlp"},
                    {},
                    "'model.layers.0.mlp' names a block, not a module: "
                    "it holds 3 Linear module(s) (model.layers.0.mlp."},
        PatternCase{"a_block_hint",
                    "llama",
                    {"model.layers.0.mlp"},
                    {},
                    "hint: --ignore 're:^model\\.layers\\.0\\.mlp\\.' "
                    "names them all"},
        // tryout Q-M1: one routed expert: the regex hint would be refused next (experts are kept all or none), so
        // the hint names the layer's experts; a regex over one expert gets the same hint
        PatternCase{"one_expert",
                    "qwen3_moe",
                    {"model.layers.0.mlp.experts.1"},
                    {},
                    "names one routed expert of 'model.layers.0.mlp.experts': vLLM needs one scheme for all experts "
                    "of a layer (F10), so they are kept all or none; hint: --ignore model.layers.0.mlp.experts keeps "
                    "this layer's experts"},
        PatternCase{"one_expert_regex",
                    "qwen3_moe",
                    {"re:^model\\.layers\\.0\\.mlp\\.experts\\.1\\."},
                    {},
                    "match all of them or none; hint: --ignore model.layers.0.mlp.experts keeps this layer's experts"},
        // a Linear's weight tensor named instead of its module: refused with the module's name (it read "not a
        // Linear weight; nothing to ignore" and quantized the module, issue 55)
        PatternCase{"ignore_a_weight_tensor",
                    "llama",
                    {"model.layers.0.self_attn.q_proj.weight"},
                    {},
                    "'model.layers.0.self_attn.q_proj.weight' names the weight tensor of module "
                    "'model.layers.0.self_attn.q_proj'; --ignore takes module names"},
        PatternCase{"force_a_weight_tensor",
                    "llama",
                    {},
                    {"lm_head.weight"},
                    "names the weight tensor of module 'lm_head'; --force-quantize takes module names"}),
    [](const auto& i) { return i.param.name; });

TEST(UserPatternsPlan, AnExpertsBlockKeepsThatLayersExperts) {
  PlanOptions o;
  o.ignore = {"model.layers.0.mlp.experts"};
  const auto p = make_plan(fixture("qwen3_moe"), o);
  ASSERT_TRUE(p.ok()) << p.error().message;
  for (const auto& u : p->units) EXPECT_EQ(u.module.find("layers.0.mlp.experts."), std::string::npos) << u.module;
  const auto all = make_plan(fixture("qwen3_moe"), PlanOptions{});
  EXPECT_LT(p->units.size(), all->units.size());
}

// ---- R4-B17: one check for every fused set ----------------------------------------------------------------------

struct SplitCase {
  std::string name, fixture, rule, set;
};
void PrintTo(const SplitCase& c, std::ostream* os) { *os << c.name; }  // ctest lines name the row

class FusedSetSplit : public ::testing::TestWithParam<SplitCase> {};

TEST_P(FusedSetSplit, IsAUsageErrorNamingTheSetAndTheRule) {
  const SplitCase& c = GetParam();
  PlanOptions o;
  o.scheme_for.push_back(*parse_scheme_for(c.rule));
  const auto p = make_plan(fixture(c.fixture), o);
  ASSERT_FALSE(p.ok()) << c.rule;
  EXPECT_EQ(p.error().code, Errc::USAGE) << p.error().message;
  EXPECT_THAT(p.error().message, HasSubstr("fused set " + c.set));
  EXPECT_THAT(p.error().message, HasSubstr("would get two schemes"));
  EXPECT_THAT(p.error().message, HasSubstr("--scheme-for '" + c.rule + "'"));
}

INSTANTIATE_TEST_SUITE_P(
    Round4, FusedSetSplit,
    ::testing::Values(
        // A5-q35-*: exit 3 "its members have different roles" before
        SplitCase{"inproj_a", "qwen3_5-dense", "model.layers.0.linear_attn.in_proj_a=fp8-dynamic", "in_proj_ba"},
        SplitCase{"inproj_a_regex", "qwen3_5-dense", "re:.*in_proj_a=fp8-dynamic", "in_proj_ba"},
        SplitCase{"inproj_qkv", "qwen3_5-dense", "model.layers.0.linear_attn.in_proj_qkv=fp8-dynamic", "in_proj_qkvz"},
        // the sets that were already reported so
        SplitCase{"q_proj", "llama", "model.layers.0.self_attn.q_proj=fp8-dynamic", "qkv"},
        SplitCase{"gate_proj", "llama", "model.layers.0.mlp.gate_proj=w4a16", "gate_up"},
        SplitCase{"mla_q_a", "deepseek_v3", "model.layers.0.self_attn.q_a_proj=fp8-dynamic", ""}),
    [](const auto& i) { return i.param.name; });

// ---- R4-B23: the observer summary is every group's ---------------------------------------------------------------

TEST(PlanObservers, EveryGroupsObserverAsTheRunSaysIt) {
  auto r = parse_recipe("observer: minmax\nrules:\n  - match: attention\n    scheme: nvfp4a16\n    observer: mse\n", "b23");
  ASSERT_TRUE(r.ok()) << r.error().message;
  PlanOptions o;
  apply_recipe(*r, o, false, false);
  const auto p = make_plan(fixture("llama"), o);
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->scheme, "nvfp4a16+nvfp4a16");
  EXPECT_EQ(p->observers, "minmax+mse");
  // One group, and it is a rule's: its observer, not the default scheme's.
  PlanOptions all;
  all.observer = Observer::NVFP4_EXPANDED_MSE;
  for (const char* a : {"attention=w4a16:memoryless-mse", "dense_mlp=w4a16:memoryless-mse"})
    all.scheme_for.push_back(*parse_scheme_for(a));
  const auto one = make_plan(fixture("llama"), all);
  ASSERT_TRUE(one.ok()) << one.error().message;
  EXPECT_EQ(one->scheme, "w4a16");
  EXPECT_EQ(one->observers, "memoryless-mse");
  EXPECT_EQ(make_plan(fixture("llama"), PlanOptions{})->observers, "mse");
}

}  // namespace
}  // namespace fp4forge::quant
