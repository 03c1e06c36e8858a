// Round 4's recipe and quantize-argument reproductions through the CLI, as the report ran them
// (/work/shared/reliability/round4.md: R4-B6, R4-B15, R4-B17, R4-B19, R4-B22, R4-B23 and the notes on recipe files
// that are not regular files and on merge keys): one row per reproduction, with its exit code and message.
#include <sys/stat.h>

#include <fstream>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace fp4forge {
namespace {

using namespace fp4forge::testutil;

struct Row {
  std::string name;
  std::map<std::string, std::string> files;  ///< recipe files written into the temp dir ($R)
  std::string args;                           ///< after `quantize`; $R is the temp dir
  int exit_code;
  std::string says;  ///< part of stderr ("" = nothing asked)
};
void PrintTo(const Row& c, std::ostream* os) { *os << c.name; }  // ctest lines name the row

std::string expand(std::string s, const std::string& dir) {
  for (std::size_t p; (p = s.find("$R")) != std::string::npos;) s.replace(p, 2, dir);
  return s;
}

class RecipeCli : public ::testing::TestWithParam<Row> {};

TEST_P(RecipeCli, GivesTheExpectedResult) {
  const Row& r = GetParam();
  TempDir tmp;
  for (const auto& [name, text] : r.files) {
    std::ofstream f(tmp.path / name, std::ios::binary);
    f << text;
  }
  std::string out, err;
  const int rc = run_cli("quantize " + expand(r.args, tmp.path.string()), &out, &err);
  EXPECT_EQ(rc, r.exit_code) << err;
  EXPECT_NE(err.find(r.says), std::string::npos) << err;
  if (rc != 0) {
    // The refusal is one line, the last (warnings the preflight printed about the source may come before it).
    const std::size_t at = err.find("fp4forge: error: ");
    ASSERT_NE(at, std::string::npos) << err;
    EXPECT_EQ(err.find('\n', at), err.size() - 1) << "one line: " << err;
    EXPECT_EQ(err.find("fp4forge: error: ", at + 1), std::string::npos) << err;
  }
}

const std::string kLlama = kData + "/llama";
const std::string kQwen35 = kData + "/qwen3_5-dense";

INSTANTIATE_TEST_SUITE_P(
    Round4, RecipeCli,
    ::testing::Values(
        // R4-B6: first key / first document read silently (exit 0) before
        Row{"b6a_scheme_twice", {{"b6a.yaml", "scheme: fp8-dynamic\nscheme: nvfp4a16\n"}},
            q(kLlama) + " --dry-run --recipe $R/b6a.yaml", 2, "b6a.yaml: line 2: duplicate key 'scheme' (first at line 1)"},
        Row{"b6b_rules_twice",
            {{"b6b.yaml", "rules:\n  - match: attention\n    scheme: fp8-dynamic\nrules:\n  - match: dense_mlp\n    scheme: w4a16\n"}},
            q(kLlama) + " --dry-run --recipe $R/b6b.yaml", 2, "line 4: duplicate key 'rules' (first at line 1)"},
        Row{"b6c_two_documents", {{"b6c.yaml", "scheme: fp8-dynamic\n---\nscheme: nvfp4a16\n"}},
            q(kLlama) + " --dry-run --recipe $R/b6c.yaml", 2, "b6c.yaml: line 2: a second YAML document"},
        Row{"b6d_json", {{"b6d.json", "{\"scheme\": \"fp8-dynamic\", \"scheme\": \"nvfp4a16\"}"}},
            q(kLlama) + " --dry-run --recipe $R/b6d.json", 2, "b6d.json: line 1: duplicate key 'scheme'"},
        Row{"merge_key", {{"m.yaml", "rules:\n  - <<: {scheme: fp8-block}\n    match: attention\n"}},
            q(kLlama) + " --dry-run --recipe $R/m.yaml", 2, "merge key '<<' is not read in recipes"},
        // R4-B15: a false "is not a 2-D weight (shape [512, 128])", exit 2, before
        Row{"b15_recipe_and_flag", {{"b15.yaml", "ignore: [lm_head]\n"}},
            q(kLlama) + " --dry-run --recipe $R/b15.yaml --ignore lm_head", 0, ""},
        Row{"b15_ignore_twice", {}, q(kLlama) + " --dry-run --ignore lm_head --ignore lm_head", 0, ""},
        Row{"b15_force_twice", {}, q(kLlama) + " --dry-run --force-quantize lm_head --force-quantize lm_head", 0, ""},
        Row{"b15_force_a_norm", {}, q(kLlama) + " --dry-run --force-quantize model.norm", 2,
            "'model.norm.weight' (shape [128]) is not a Linear weight"},
        // R4-B17: exit 3 "its members have different roles" before
        Row{"b17_inproj_a", {}, q(kQwen35) + " --dry-run --scheme-for model.layers.0.linear_attn.in_proj_a=fp8-dynamic", 2,
            "fused set in_proj_ba of 'model.layers.0.linear_attn' would get two schemes"},
        Row{"b17_inproj_a_regex", {}, q(kQwen35) + " --dry-run --scheme-for 're:.*in_proj_a=fp8-dynamic'", 2,
            "(--scheme-for 're:.*in_proj_a=fp8-dynamic')"},
        Row{"b17_inproj_qkv", {}, q(kQwen35) + " --dry-run --scheme-for model.layers.0.linear_attn.in_proj_qkv=fp8-dynamic", 2,
            "fused set in_proj_qkvz"},
        // R4-B22: ignored before
        Row{"b22_empty_recipe_path", {}, q(kLlama) + " --dry-run --recipe ''", 2, "--recipe: an empty value"},
        Row{"b22_empty_mtp_from", {}, q(kLlama) + " --dry-run --mtp-from ''", 2, "--mtp-from: an empty value"},
        // recipe files that are not recipes: bad input (exit 3), a folder an I/O error (exit 4), as documented
        Row{"fifo_or_device", {}, q(kLlama) + " --dry-run --recipe /dev/null", 3, "is not a regular file"},
        Row{"folder", {}, q(kLlama) + " --dry-run --recipe $R", 4, "Is a directory"}),
    [](const auto& i) { return i.param.name; });

// R4-B19: ~60x the file in memory and one warning per rule before. A recipe is at most 1 MiB; a file of aliases to one
// rule that selects nothing is one warning line.
TEST(RecipeCliBounds, TheSizeCapAndOneWarningForIdleRules) {
  TempDir tmp;
  {
    std::ofstream f(tmp.path / "big.yaml");
    f << "rules:\n";
    for (int i = 0; i < 30000; ++i) f << "  - {match: attention, scheme: fp8-dynamic}\n";  // 1.3 MB
  }
  std::string out, err;
  EXPECT_EQ(run_cli("quantize " + q(kLlama) + " --dry-run --recipe " + q(tmp.path / "big.yaml"), &out, &err), 3) << err;
  EXPECT_NE(err.find("over the 1048576-byte limit"), std::string::npos) << err;
  {
    std::ofstream f(tmp.path / "alias.yaml");
    f << "rules:\n  - &r {match: shared_experts, scheme: fp8-dynamic}\n";
    for (int i = 0; i < 5000; ++i) f << "  - *r\n";
  }
  EXPECT_EQ(run_cli("quantize " + q(kLlama) + " --dry-run --recipe " + q(tmp.path / "alias.yaml"), &out, &err), 0) << err;
  EXPECT_NE(out.find("5,001 rules select no module"), std::string::npos) << out.substr(0, 2000);
  EXPECT_LT(out.size(), 8192u);
}

// A selector as large as the model leaves the default scheme nothing: said (issue 55 tryout: last_n_layers=5 on a
// 2-layer model made it all FP8 with no word of it); a smaller one says nothing of the kind.
TEST(RecipeCliBounds, ADefaultSchemeThatTakesNothingIsSaid) {
  std::string out, err;
  ASSERT_EQ(run_cli("quantize " + q(kLlama) + " --dry-run --scheme-for last_n_layers=5=fp8-dynamic", &out, &err), 0)
      << err;
  EXPECT_NE(out.find("the default scheme NVFP4A16 takes no module: --scheme-for 'last_n_layers=5=fp8-dynamic' selects "
                     "every module it would"),
            std::string::npos)
      << out;
  ASSERT_EQ(run_cli("quantize " + q(kLlama) + " --dry-run --scheme-for last_n_layers=1=fp8-dynamic", &out, &err), 0)
      << err;
  EXPECT_EQ(out.find("takes no module"), std::string::npos) << out;
}

// R4-B23: the dry run's observer was the first group's; the run's says each group's.
TEST(RecipeCliObserver, TheDryRunSaysWhatTheRunSays) {
  TempDir tmp;
  {
    std::ofstream f(tmp.path / "b23.yaml");
    f << "observer: minmax\nrules:\n  - match: attention\n    scheme: nvfp4a16\n    observer: mse\n";
  }
  const std::string recipe = " --recipe " + q(tmp.path / "b23.yaml");
  std::string out, err;
  ASSERT_EQ(run_cli("quantize " + q(kLlama) + " --dry-run --json" + recipe, &out, &err), 0) << err;
  const auto plan = nlohmann::json::parse(out)["plan"];
  EXPECT_EQ(plan["scheme"], "nvfp4a16+nvfp4a16");
  EXPECT_EQ(plan["observer"], "minmax+mse");
  ASSERT_EQ(quantize_json(kLlama, tmp.path / "out", recipe, &out, &err), 0) << err;
  const auto run = nlohmann::json::parse(out);
  EXPECT_EQ(run["scheme"], plan["scheme"]);
  EXPECT_EQ(run["observer"], plan["observer"]);
  ASSERT_EQ(run_cli("quantize " + q(kLlama) + " --dry-run" + recipe, &out, &err), 0) << err;
  EXPECT_NE(out.find("scheme nvfp4a16+nvfp4a16, observer minmax+mse"), std::string::npos) << out;
}

}  // namespace
}  // namespace fp4forge
