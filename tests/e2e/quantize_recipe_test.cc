// Recipes of several schemes end to end (issue 30; quantize/recipe.h, docs/recipes.md):
// - every fixture x three recipes: quantize -> verify -> verify --against -> doctor, no error and no warning but
//   the documented ones; every module's tensors byte-identical to what the one-scheme run of its group's scheme
//   writes (each group's bytes are that preset's, which the golden tests prove against compressed-tensors);
// - --recipe FILE writes the same bytes as the same rules given as --scheme-for;
// - verify catches a mixed config whose targets give a module or a fused layer another group than its tensors.
#include <cctype>
#include <fstream>
#include <map>
#include <set>
#include <regex>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fp4forge/model/quant_config.h"
#include "fp4forge/verify/verify.h"
#include "test_util.h"
#include "verify_test_util.h"

namespace fp4forge {
namespace {

using namespace fp4forge::testutil;
using namespace fp4forge::vtest;

struct RecipeCase {
  std::string name;
  std::string flags;  // after SRC DST
};

const std::vector<RecipeCase> kRecipes = {
    {"nvfp4_fp8attn", "--scheme nvfp4a16 --scheme-for attention=fp8-dynamic"},
    {"fp8_nvfp4experts", "--scheme fp8-dynamic --scheme-for experts=nvfp4a16 --scheme-for shared_experts=mxfp4a16"},
    {"lastlayer_fp8", "--scheme nvfp4a16 --scheme-for last_n_layers=1=fp8-dynamic"},
};

int quantize(const std::string& src, const sfs::path& dst, const std::string& flags, std::string* out,
             std::string* err) {
  return quantize_json(src, dst, flags, out, err);
}

bool allowed_warning(const std::string& k) {
  return k == "low-quantized-share" || k == "geometry-unchecked" || k == "zero-experts-stored" ||
         k == "quant-config-multi-group";
}

/** module -> the preset of the group vLLM gives it, for every quantized module of `dir`. */
std::map<std::string, std::string> module_presets(const Checkpoint& ck) {
  const auto qc = parse_quant_config(ck.config()["quantization_config"]);
  EXPECT_TRUE(qc.ok());
  const auto gm = GroupMatcher::compile(*qc);
  EXPECT_TRUE(gm.ok());
  std::map<std::string, std::string> out;
  for (const auto& t : ck.tensors()) {
    const std::size_t dot = t.name.rfind('.');
    const std::string param = t.name.substr(dot + 1);
    if (param != "weight_packed" && !(param == "weight" && t.info->dtype == DType::F8_E4M3)) continue;
    const std::string mod = t.name.substr(0, dot);
    const GroupMatch m = gm->match(mod, "Linear");
    out[mod] = m.group < 0 ? "none" : scheme_label(qc->groups[static_cast<std::size_t>(m.group)], qc->format);
  }
  return out;
}

class RecipeOwnOutput : public ::testing::TestWithParam<std::tuple<std::string, std::size_t>> {};

TEST_P(RecipeOwnOutput, CleanAndEachGroupIsItsSchemesBytes) {
  const auto& [fx, ri] = GetParam();
  const RecipeCase& rc = kRecipes[ri];
  const std::string src = kData + "/" + fx;
  TempDir tmp;
  const sfs::path dst = tmp.path / "mixed";
  std::string out, err;
  const int code = quantize(src, dst, rc.flags, &out, &err);
  if (code == 3 && err.find("nothing to quantize") != std::string::npos) {
    EXPECT_FALSE(sfs::exists(dst)) << fx << " " << rc.name;
    return;
  }
  ASSERT_EQ(code, 0) << fx << " " << rc.name << ": " << err;
  const auto sum = nlohmann::json::parse(out);

  EXPECT_EQ(run_cli("verify " + q(dst) + " --json", &out, &err), 0) << err << out;
  EXPECT_EQ(failing_findings(out), "") << fx << " " << rc.name << " verify";
  ASSERT_EQ(run_cli("verify " + q(dst) + " --against " + q(src) + " --json", &out, &err), 0) << err << out;
  EXPECT_EQ(failing_findings(out), "") << fx << " " << rc.name << " verify --against";
  const auto vj = nlohmann::json::parse(out);
  EXPECT_EQ(vj["stats"]["quantized_modules"], sum["quantized_weights"]) << fx << " " << rc.name;
  EXPECT_EQ(vj["stats"]["against"]["compared_quantized"], vj["stats"]["quantized_modules"]);
  EXPECT_EQ(vj["stats"]["against"]["reencode_mismatched_rows"], 0);
  // verify's experts-order-assumed only where quantize said it first (a family outside the registry).
  const bool order_assumed = sum.dump().find("experts-order-assumed") != std::string::npos;
  // Warnings the source already has (doctor's, which verify reports too: an architecture class outside the table).
  std::string sout;
  run_cli("doctor " + q(src) + " --json", &sout, &err);
  const auto source_warnings = warning_kinds(nlohmann::json::parse(sout));
  for (const auto& k : warning_kinds(vj))
    EXPECT_TRUE(allowed_warning(k) || source_warnings.count(k) || (k == "experts-order-assumed" && order_assumed))
        << fx << " " << rc.name << ": " << k;

  EXPECT_EQ(run_cli("doctor " + q(dst) + " --json", &out, &err), 0) << err << out;
  EXPECT_EQ(failing_findings(out), "") << fx << " " << rc.name << " doctor";
  const auto dj = nlohmann::json::parse(out);
  for (const auto& k : warning_kinds(dj))
    EXPECT_TRUE(allowed_warning(k) || source_warnings.count(k)) << fx << " " << rc.name << " doctor: " << k;

  // Each group's bytes: every tensor of a quantized module equals the one-scheme run of the module's scheme.
  const Checkpoint mixed = open_ok(dst);
  const auto presets = module_presets(mixed);
  std::map<std::string, std::optional<Checkpoint>> single;  // preset -> its one-scheme output (nullopt: refused)
  for (const auto& [mod, preset] : presets) {
    ASSERT_NE(preset, "none") << mod;
    if (single.count(preset)) continue;
    const sfs::path one = tmp.path / preset;
    std::string o1, e1;
    if (quantize(src, one, "--scheme " + preset, &o1, &e1) != 0) {
      single[preset] = std::nullopt;  // nothing of this scheme alone (shapes): compared by verify --against only
      continue;
    }
    single[preset] = open_ok(one);
  }
  std::size_t compared = 0;
  for (const auto& t : mixed.tensors()) {
    const std::string mod = t.name.substr(0, t.name.rfind('.'));
    const auto it = presets.find(mod);
    if (it == presets.end() || !single.at(it->second)) continue;
    const Checkpoint& one = *single.at(it->second);
    const TensorRef* u = one.find(t.name);
    if (u == nullptr) continue;  // kept by that run alone (a partner outside the recipe's selection)
    EXPECT_EQ(t.info->dtype, u->info->dtype) << t.name;
    EXPECT_EQ(t.info->shape, u->info->shape) << t.name;
    const auto a = mixed.data(t), b = one.data(*u);
    EXPECT_TRUE(a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin()))
        << fx << " " << rc.name << ": " << t.name << " differs from the " << it->second << " run's";
    ++compared;
  }
  if (!presets.empty()) {
    EXPECT_GT(compared, 0u) << fx << " " << rc.name;
  }
}

std::vector<std::tuple<std::string, std::size_t>> cases() {
  std::vector<std::tuple<std::string, std::size_t>> out;
  for (const auto& fx : fixture_names())
    for (std::size_t i = 0; i < kRecipes.size(); ++i) out.emplace_back(fx, i);
  return out;
}

INSTANTIATE_TEST_SUITE_P(AllFixtures, RecipeOwnOutput, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<std::tuple<std::string, std::size_t>>& p) { return testutil::test_name(std::get<0>(p.param) + "_" + kRecipes[std::get<1>(p.param)].name); });

// quantize says what verify will say of a mostly-16-bit output (issue 55 tryout J: silent at quantize, a
// low-quantized-share warning at verify): the same warning, in --dry-run too, and none for a well-quantized one.
TEST(Recipe, QuantizeWarnsTheLowQuantizedShareVerifyReports) {
  TempDir tmp;
  std::string out, err;
  const std::string src = kData + "/qwen3_moe";
  ASSERT_EQ(
      run_cli("quantize " + q(src) + " " + q(tmp.path / "m") + " --scheme mxfp4a16 --no-progress --json", &out, &err),
      0)
      << err;
  const auto j = nlohmann::json::parse(out);
  std::size_t low = 0;
  for (const auto& w : j["warnings"])
    if (w.get<std::string>().find("of the text stack's Linear parameters are quantized") != std::string::npos) ++low;
  EXPECT_EQ(low, 1u) << out;
  EXPECT_EQ(run_cli("verify " + q(tmp.path / "m") + " --json", &out, &err), 0) << err;
  EXPECT_NE(out.find("\"low-quantized-share\""), std::string::npos) << out;
  ASSERT_EQ(run_cli("quantize " + q(src) + " --dry-run --scheme mxfp4a16", &out, &err), 0) << err;
  EXPECT_NE((out + err).find("of the text stack's Linear parameters are quantized"), std::string::npos) << out << err;
  ASSERT_EQ(run_cli("quantize " + q(src) + " --dry-run", &out, &err), 0) << err;
  EXPECT_EQ((out + err).find("Linear parameters are quantized"), std::string::npos) << out << err;
}

TEST(Recipe, RecipeFileWritesTheSameBytesAsSchemeFor) {
  TempDir tmp;
  const std::string src = kData + "/qwen3_moe";
  {
    std::ofstream f(tmp.path / "r.yaml");
    f << "scheme: fp8-dynamic\nrules:\n  - match: experts\n    scheme: nvfp4a16\n";
  }
  std::string out, err;
  ASSERT_EQ(run_cli("quantize " + q(src) + " " + q(tmp.path / "a") + " --recipe " + q(tmp.path / "r.yaml") +
                        " --no-progress",
                    &out, &err),
            0)
      << err;
  ASSERT_EQ(run_cli("quantize " + q(src) + " " + q(tmp.path / "b") +
                        " --scheme fp8-dynamic --scheme-for experts=nvfp4a16 --no-progress",
                    &out, &err),
            0)
      << err;
  EXPECT_EQ(changed_names(file_contents(tmp.path / "a"), file_contents(tmp.path / "b")), "");
  // --scheme on the command line wins over the recipe's default.
  ASSERT_EQ(run_cli("quantize " + q(src) + " --dry-run --json --scheme w4a16 --recipe " + q(tmp.path / "r.yaml"),
                    &out, &err),
            0)
      << err;
  const auto j = nlohmann::json::parse(out)["plan"];
  EXPECT_EQ(j["schemes"][0]["scheme"], "nvfp4a16");  // experts (the default w4a16 has nothing: hidden 64)
  // Bad rules are usage errors (exit 2), nothing written.
  EXPECT_EQ(run_cli("quantize " + q(src) + " " + q(tmp.path / "c") + " --scheme-for attn=fp8-block", &out, &err), 2);
  EXPECT_NE(err.find("neither a role nor a module name"), std::string::npos) << err;
  EXPECT_EQ(run_cli("quantize " + q(src) + " " + q(tmp.path / "c") + " --scheme-for 're:.*experts\\.0\\..*=fp8-dynamic'",
                    &out, &err),
            2);
  EXPECT_NE(err.find("would get two schemes"), std::string::npos) << err;
  EXPECT_FALSE(sfs::exists(tmp.path / "c"));
  EXPECT_EQ(run_cli("quantize " + q(src) + " " + q(tmp.path / "c") + " --recipe " + q(tmp.path / "none.yaml"), &out,
                    &err),
            4);
}

/** llama quantized NVFP4A16 with attention in FP8_DYNAMIC, then its targets edited. */
class MixedTargets : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string out, err;
    ASSERT_EQ(run_cli("quantize " + q(kData + "/llama") + " " + q(dir()) +
                          " --scheme nvfp4a16 --scheme-for attention=fp8-dynamic --no-progress",
                      &out, &err),
              0)
        << err;
  }
  sfs::path dir() const { return tmp_.path / "q"; }
  VerifyReport verify() const {
    Checkpoint ck = open_ok(dir());
    auto r = verify_checkpoint(ck, nullptr, VerifyOptions{});
    EXPECT_TRUE(r.ok());
    return std::move(r).value();
  }
  TempDir tmp_;
};

TEST_F(MixedTargets, AsWrittenItIsClean) {
  const VerifyReport r = verify();
  EXPECT_TRUE(r.ok()) << dump(r.findings);
  EXPECT_EQ(r.stats.scheme, "FP8_DYNAMIC+NVFP4A16");
}

TEST_F(MixedTargets, AFusedLayerLeftToTheLinearGroupIsCaught) {
  // Without the qkv_proj target, vLLM matches the fused layer by class (Linear) and loads FP8 tensors as NVFP4.
  edit_config(dir(), [](Json& c) {
    auto& t = c["quantization_config"]["config_groups"]["group_1"]["targets"];
    Json kept = Json::array();
    for (const auto& x : t)
      if (x.get<std::string>().find("qkv_proj") == std::string::npos) kept.push_back(x);
    t = kept;
  });
  const VerifyReport r = verify();
  const Finding* f = find_kind(r, "quant-config-invalid");
  ASSERT_NE(f, nullptr) << dump(r.findings);
  EXPECT_NE(f->message.find("fused layer 'model.layers.0.self_attn.qkv_proj' takes group 'group_0'"), std::string::npos)
      << f->message;
  EXPECT_FALSE(r.ok());
}

TEST_F(MixedTargets, AModuleTheTargetsGiveAnotherSchemeIsCaught) {
  // Attention targets dropped altogether: vLLM gives the FP8 attention group_0 (NVFP4) and finds no weight_packed.
  edit_config(dir(), [](Json& c) {
    auto& g = c["quantization_config"]["config_groups"];
    g["group_1"]["targets"] = Json::array({"model.layers.0.mlp.nothing"});
  });
  const VerifyReport r = verify();
  const Finding* f = find_kind(r, "orphan-scale");
  ASSERT_NE(f, nullptr) << dump(r.findings);
  EXPECT_NE(f->message.find("its tensors are FP8_DYNAMIC's, but vLLM gives it config group 'group_0'"), std::string::npos)
      << f->message;
  EXPECT_FALSE(r.ok());
}

}  // namespace
}  // namespace fp4forge

namespace fp4forge {
namespace {

using namespace fp4forge::testutil;

/** Weight bytes `plan` gives a seat. */
std::uint64_t planned_weights(const std::string& seat) {
  std::string out, err;
  EXPECT_EQ(run_cli("plan --seat '" + seat + "' --json", &out, &err), 0) << err;
  return nlohmann::json::parse(out)["seats"][0]["weights"]["bytes"].get<std::uint64_t>();
}

TEST(RecipePlanSeat, RecipeSizesWhatQuantizeWritesWithIt) {
  TempDir tmp;
  const std::string src = kData + "/qwen3_moe";
  const sfs::path r = tmp.path / "r.yaml";
  {
    std::ofstream f(r);
    f << "scheme: fp8-dynamic\nrules:\n  - match: experts\n    scheme: nvfp4a16\n";
  }
  std::string out, err;
  ASSERT_EQ(run_cli("quantize " + q(src) + " " + q(tmp.path / "q") + " --recipe " + q(r) + " --no-progress", &out, &err),
            0)
      << err;
  const std::uint64_t written = planned_weights("m=" + (tmp.path / "q").string());
  EXPECT_EQ(planned_weights("m=" + src + ":recipe=" + r.string()), written);
  EXPECT_NE(planned_weights("m=" + src + ":assume=fp8-dynamic"), written);  // the rules change the size
  // A recipe that cannot be read is the seat's error, not a silent unquantized size.
  EXPECT_NE(run_cli("plan --seat 'm=" + src + ":recipe=" + (tmp.path / "none.yaml").string() + "'", &out, &err), 0);
  EXPECT_NE(err.find("recipe="), std::string::npos) << err;
}

}  // namespace
}  // namespace fp4forge

namespace fp4forge {
namespace {

using namespace fp4forge::testutil;

// Issue 30: a DeepSeek FP8 release to NVFP4A16 experts with its attention kept in FP8 (FP8_BLOCK): the attention's
// payload and scales pass through untouched, the rest is quantized from the bf16 expansion; verify proves both.
TEST(RecipeFp8Source, AttentionPassesThroughAndTheRestIsQuantized) {
  TempDir tmp;
  const std::string src = kData + "/fp8/native-deepseek_v3";
  std::string out, err;
  ASSERT_EQ(quantize_json(src, tmp.path / "q", "--scheme nvfp4a16 --scheme-for attention=fp8-block", &out, &err), 0)
      << err;
  const auto sum = nlohmann::json::parse(out);
  ASSERT_EQ(run_cli("verify " + q(tmp.path / "q") + " --against " + q(src) + " --json", &out, &err), 0) << out;
  EXPECT_EQ(failing_findings(out), "");
  const auto vj = nlohmann::json::parse(out);
  EXPECT_EQ(vj["scheme"], "FP8_BLOCK+NVFP4A16");
  const auto passed = vj["stats"]["against"]["passthrough_modules"].get<std::uint64_t>();
  EXPECT_GT(passed, 0u);
  EXPECT_EQ(vj["stats"]["against"]["compared_quantized"], sum["quantized_weights"]);
  // Every FP8_BLOCK module is a passthrough here (the release's 128 x 128 blocks), none of the NVFP4 ones.
  std::uint64_t fp8_modules = 0;
  for (const auto& t : vj["stats"]["against"]["per_tensor"])
    if (t["module"].get<std::string>().find("self_attn") != std::string::npos) ++fp8_modules;
  EXPECT_EQ(passed, fp8_modules);
  EXPECT_EQ(run_cli("doctor " + q(tmp.path / "q") + " --json", &out, &err), 0) << out;
  EXPECT_EQ(failing_findings(out), "");
  // The plan says so before anything is written; --requantize-fp8 re-encodes them from the expansion instead
  // (verify may still find a re-encoded module identical to the source: its block scales round-trip).
  for (const auto& [flag, want] : {std::pair{std::string(), passed}, std::pair{std::string(" --requantize-fp8"), std::uint64_t{0}}}) {
    ASSERT_EQ(run_cli("quantize " + q(src) + " --dry-run --json --scheme nvfp4a16 --scheme-for attention=fp8-block" + flag,
                      &out, &err),
              0)
        << err;
    EXPECT_EQ(nlohmann::json::parse(out)["plan"]["passthrough_weights"].get<std::uint64_t>(), want) << flag;
  }
}

// What a group's scheme was chosen for and cannot take by shape stays in 16 bits, said in that group's summary line
// and counted by rule in --json (issue 55: `--scheme-for attention=fp8-block` on 64-wide k/v kept them silently).
TEST(RecipeShapes, WhatAGroupKeepsIsSaidPerGroup) {
  std::string out, err;
  const std::string src = kData + "/gemma4-dense-mm";
  ASSERT_EQ(run_cli("quantize " + q(src) + " --dry-run --json --scheme-for attention=fp8-block", &out, &err), 0) << err;
  const auto plan = nlohmann::json::parse(out)["plan"];
  ASSERT_EQ(plan["schemes"].size(), 2u) << plan["schemes"].dump();
  const auto& dflt = plan["schemes"][0];
  const auto& fp8 = plan["schemes"][1];
  EXPECT_EQ(dflt["scheme"], "nvfp4a16");
  EXPECT_EQ(dflt["kept"], nlohmann::json::object());
  EXPECT_EQ(fp8["scheme"], "fp8-block");
  std::uint64_t kept_rows = 0;  // the plan's own kept[] list agrees with the group's counts
  for (const auto& k : plan["kept"])
    if (k["rule"] == "n_not_multiple_of_128") ++kept_rows;
  ASSERT_GT(kept_rows, 0u);
  EXPECT_EQ(fp8["kept"]["n_not_multiple_of_128"].get<std::uint64_t>(), kept_rows);
  ASSERT_TRUE(fp8["kept"].contains("fused_set")) << fp8.dump();
  const std::uint64_t fused = fp8["kept"]["fused_set"].get<std::uint64_t>();
  ASSERT_EQ(run_cli("quantize " + q(src) + " --dry-run --scheme-for attention=fp8-block", &out, &err), 0) << err;
  EXPECT_NE(out.find(fmt::format("group_1: {} FP8_BLOCK weight", fp8["quantized_weights"].get<std::uint64_t>())),
            std::string::npos) << out;
  EXPECT_NE(out.find(fmt::format("(--scheme-for 'attention=fp8-block'); {} more kept in 16 bits: {} out_features not a "
                                 "multiple of 128, {} fused with a member kept",
                                 kept_rows + fused, kept_rows, fused)),
            std::string::npos)
      << out;
  // A group left with nothing to quantize is dropped; its warning says what kept the modules it selected.
  ASSERT_EQ(run_cli("quantize " + q(src) + " --dry-run --scheme-for 're:.*self_attn\\.(q|k|v)_proj=fp8-block'", &out, &err),
            0) << err;
  EXPECT_NE(out.find(fmt::format("no quantized module takes FP8_BLOCK (the modules it selects are kept: {} out_features "
                                 "not a multiple of 128, {} fused with a member kept)",
                                 kept_rows, fused)),
            std::string::npos)
      << out;
  // ... and is said in the summary and in --json unused_schemes (issue 55 tryout: it vanished from both).
  EXPECT_NE(out.find(fmt::format("--scheme-for 're:.*self_attn\\.(q|k|v)_proj=fp8-block': no FP8_BLOCK weight, no "
                                 "config group ({} module(s) it selects kept in 16 bits:", kept_rows + fused)),
            std::string::npos) << out;
  ASSERT_EQ(run_cli("quantize " + q(src) + " --dry-run --json --scheme-for 're:.*self_attn\\.(q|k|v)_proj=fp8-block'",
                    &out, &err), 0) << err;
  const auto unused = nlohmann::json::parse(out)["plan"]["unused_schemes"];
  ASSERT_EQ(unused.size(), 1u) << out;
  EXPECT_EQ(unused[0]["scheme"], "fp8-block");
  EXPECT_EQ(unused[0]["kept"]["n_not_multiple_of_128"].get<std::uint64_t>(), kept_rows);
  EXPECT_EQ(nlohmann::json::parse(out)["plan"]["schemes"].size(), 1u);
}

// verify --strict of a mixed output fails on its one documented warning; --allow KIND accepts that kind (reported as
// info, said so in the message) and nothing else: an error kind stays an error, a kind with nothing to allow is a
// note (issue 55). doctor takes --allow the same way.
TEST(RecipeStrictGate, AllowAcceptsAKnownWarningKindAndNeverAnError) {
  TempDir tmp;
  const sfs::path dst = tmp.path / "mixed";
  std::string out, err;
  ASSERT_EQ(quantize(kData + "/llama", dst, "--scheme nvfp4a16 --scheme-for attention=fp8-dynamic", &out, &err), 0)
      << err;
  const std::string v = "verify " + q(dst) + " --against " + q(kData + "/llama") + " --strict";
  EXPECT_EQ(run_cli(v + " --json", &out, &err), 1) << err;
  // Scheme and observer pair up (issue 55: they were joined in two orders), one line per group in the text.
  EXPECT_EQ(nlohmann::json::parse(out)["scheme"], "FP8_DYNAMIC+NVFP4A16");
  EXPECT_EQ(nlohmann::json::parse(out)["observer"], "memoryless_minmax+nvfp4_expanded_mse");
  EXPECT_EQ(run_cli(v, &out, &err), 1) << err;
  EXPECT_NE(out.find("group_0 NVFP4A16, observer nvfp4_expanded_mse (quantize --scheme nvfp4a16 --observer mse)"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find(", observer memoryless_minmax (quantize --scheme fp8-dynamic --observer minmax)"),
            std::string::npos)
      << out;
  // Each group's error against min-max on its own line, never the two averaged under one label (issue 55 audit:
  // "every group's modules together" diluted NVFP4's gain with FP8's nothing).
  EXPECT_NE(out.find("  scheme 2 config groups (below) · "), std::string::npos) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex("\\n  group_0 \\(\\d+ tensors\\): rel RMS [0-9.]+ where min-max gives "
                                                "[0-9.]+: error -[0-9.]+ % vs min-max\\n")))
      << out;
  // The FP8 group's encoding is min-max's own: said so, as the picture says it, not "+0.0 %"; no mean over both
  // schemes in the vs-source line; its kind rows n/a (issue 55 tryout).
  EXPECT_TRUE(std::regex_search(out, std::regex("\\n  group_1 \\(\\d+ tensors\\): rel RMS [0-9.]+ \\(its encoding is "
                                                "min-max's: nothing to compare\\)\\n")))
      << out;
  EXPECT_NE(out.find("quantized tensors, rel RMS per group below, max "), std::string::npos) << out;
  EXPECT_EQ(out.find("rel RMS mean"), std::string::npos) << out;
  EXPECT_NE(out.find("n/a (min-max is its observer)"), std::string::npos) << out;
  EXPECT_EQ(out.find("every group's modules together"), std::string::npos) << out;
  EXPECT_EQ(out.find("scheme FP8_DYNAMIC+NVFP4A16"), std::string::npos) << out;
  // The quality table's header pairs the observers with their schemes (tryout M-L5: the observers alone read as the
  // reverse of the group lines).
  EXPECT_NE(out.find("quality by module kind (schemes FP8_DYNAMIC+NVFP4A16 with observers "
                     "memoryless_minmax+nvfp4_expanded_mse;"),
            std::string::npos)
      << out;
  {
    std::string jo;
    ASSERT_EQ(run_cli(v + " --allow quant-config-multi-group --json", &jo, &err), 0) << err;
    const auto ge = nlohmann::json::parse(jo)["stats"]["against"]["group_errors"];
    ASSERT_EQ(ge.size(), 2u) << jo.substr(0, 400);
    EXPECT_EQ(ge[0]["group"], "group_0");
    EXPECT_LT(ge[0]["mean_rel_rms"].get<double>(), ge[0]["mean_minmax_rel_rms"].get<double>());
  }
  EXPECT_EQ(run_cli(v + " --allow quant-config-multi-group --json", &out, &err), 0) << out << err;
  const auto j = nlohmann::json::parse(out);
  bool seen = false;
  for (const auto& f : j["findings"])
    if (f["kind"] == "quant-config-multi-group") {
      seen = true;
      EXPECT_EQ(f["severity"], "info");
      EXPECT_NE(f["message"].get<std::string>().find("allowed by --allow quant-config-multi-group"), std::string::npos);
    }
  EXPECT_TRUE(seen) << out;
  EXPECT_EQ(run_cli(v + " --allow quant-config-multi-group --allow no-such-kind", &out, &err), 0) << err;
  // A name that is no kind is said as one (issue 55 tryout: "no warning of that kind to allow"); an error kind too.
  EXPECT_NE(err.find("--allow no-such-kind: no finding kind has that name; the kinds are in docs/cli/doctor.md"),
            std::string::npos)
      << err;
  EXPECT_EQ(err.find("did you mean"), std::string::npos) << err;  // nothing near: no guess
  EXPECT_EQ(run_cli(v + " --allow quant-config-multi-group --allow missing-tensor", &out, &err), 0) << err;
  EXPECT_NE(err.find("--allow missing-tensor: an error kind, never allowed"), std::string::npos) << err;
  // A typo of a kind this run found: strict still fails, and the note names the kind it most likely meant.
  EXPECT_EQ(run_cli(v + " --strict --allow quant-config-multi-grup", &out, &err), 1) << err;
  EXPECT_NE(err.find("--allow quant-config-multi-grup: no finding kind has that name (did you mean "
                     "'quant-config-multi-group'?)"),
            std::string::npos)
      << err;
  // The kind's words in another order (issue 55 tryout F: the help's own example read `multi-group-scheme`).
  EXPECT_EQ(run_cli(v + " --strict --allow multi-group-scheme", &out, &err), 1) << err;
  EXPECT_NE(err.find("--allow multi-group-scheme: no finding kind has that name (did you mean "
                     "'quant-config-multi-group'?)"),
            std::string::npos)
      << err;
  EXPECT_EQ(run_cli("verify --help", &out, &err), 0);
  EXPECT_NE(out.find("a recipe output's quant-config-multi-group"), std::string::npos) << out;
  EXPECT_EQ(run_cli("doctor " + q(dst) + " --strict --allow quant-config-multi-group", &out, &err), 0) << out << err;
  // An error is never allowed: a mixed output whose source is another model fails whatever --allow says.
  ASSERT_EQ(run_cli("verify " + q(dst) + " --json", &out, &err), 0) << out << err;
  const sfs::path broken = tmp.path / "broken";
  sfs::copy(dst, broken, sfs::copy_options::recursive);
  {
    auto cfg = nlohmann::json::parse(slurp(broken / "config.json"));
    cfg["quantization_config"]["config_groups"]["group_0"]["targets"] = nlohmann::json::array();
    std::ofstream(broken / "config.json") << cfg.dump(2);
  }
  EXPECT_EQ(run_cli("verify " + q(broken) + " --json", &out, &err), 1) << out;
  std::string kind;
  const auto broken_report = nlohmann::json::parse(out);  // kept alive: a range-for over a temporary's member dangles
  for (const auto& f : broken_report["findings"])
    if (f["severity"] == "error" && kind.empty()) kind = f["kind"].get<std::string>();
  ASSERT_FALSE(kind.empty()) << out;
  EXPECT_EQ(run_cli("verify " + q(broken) + " --allow " + kind, &out, &err), 1) << out;
  EXPECT_NE(err.find("--allow " + kind + ": "), std::string::npos) << err;
  EXPECT_NE(err.find("stay errors (an error is never allowed)"), std::string::npos) << err;
}

}  // namespace
}  // namespace fp4forge
