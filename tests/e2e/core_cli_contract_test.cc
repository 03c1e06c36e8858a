// One pattern for every command (issue 15): a table walks all commands and checks that
// - `fp4forge --help` lists exactly the commands of the table (a new command must join it);
// - `help CMD` and `CMD --help` print the same help, with the full usage line "Usage: fp4forge CMD";
// - every command (every gateway subcommand) takes --json;
// - a parse error is one line `fp4forge: error: ...` on stderr, exit 2, and with --json the documented
//   error object on stdout: {"ok": false, "error": {"code": "usage", "exit_code": 2, ...}}.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "test_util.h"

namespace fp4forge {
namespace {

using testutil::run_cli;

const std::vector<std::string> kCommands = {"inspect", "doctor", "quantize", "verify", "diff",
                                            "plan",    "probe",  "gateway",  "synth",  "selftest"};

TEST(CliContract, TopLevelHelpListsExactlyTheTable) {
  std::string out, err;
  ASSERT_EQ(run_cli("--help", &out, &err), 0) << err;
  const auto subs = out.find("Subcommands:");
  ASSERT_NE(subs, std::string::npos) << out;
  std::vector<std::string> listed;
  std::size_t pos = out.find('\n', subs);
  while (pos != std::string::npos && pos + 1 < out.size()) {
    const std::size_t end = out.find('\n', pos + 1);
    const std::string line = out.substr(pos + 1, end == std::string::npos ? std::string::npos : end - pos - 1);
    pos = end;
    if (line.rfind("  ", 0) != 0) break;
    const std::string name = line.substr(2, line.find(' ', 2) - 2);
    if (name != "help") listed.push_back(name);
  }
  EXPECT_EQ(listed, kCommands) << out;
}

TEST(CliContract, EveryCommandFollowsOnePattern) {
  for (const std::string& cmd : kCommands) {
    SCOPED_TRACE(cmd);
    std::string help_a, help_b, err;
    ASSERT_EQ(run_cli("help " + cmd, &help_a, &err), 0) << err;
    ASSERT_EQ(run_cli(cmd + " --help", &help_b, &err), 0) << err;
    EXPECT_EQ(help_a, help_b);
    EXPECT_NE(help_a.find("Usage: fp4forge " + cmd), std::string::npos) << help_a.substr(0, 200);
    if (cmd != "gateway") {
      EXPECT_NE(help_a.find("--json"), std::string::npos) << "no --json";
    }
    for (const std::string& args : {cmd + " --no-such-option --json", cmd + " --json --no-such-option x y z w"}) {
      SCOPED_TRACE(args);
      std::string out;
      EXPECT_EQ(run_cli(args, &out, &err), 2);
      EXPECT_EQ(err.rfind("fp4forge: error: ", 0), 0u) << err;
      EXPECT_EQ(err.find('\n'), err.size() - 1) << "not one line: " << err;
      const auto j = nlohmann::json::parse(out, nullptr, false);
      ASSERT_FALSE(j.is_discarded()) << "stdout is not JSON: " << out;
      EXPECT_EQ(j["ok"], false);
      EXPECT_EQ(j["error"]["code"], "usage");
      EXPECT_EQ(j["error"]["exit_code"], 2);
      // Without --json nothing goes to stdout.
      EXPECT_EQ(run_cli(cmd + " --no-such-option", &out, &err), 2);
      EXPECT_EQ(out, "");
    }
  }
  for (const char* sub : {"show", "swap", "rollback", "retire"}) {
    SCOPED_TRACE(sub);
    std::string out, err;
    ASSERT_EQ(run_cli(std::string("gateway ") + sub + " --help", &out, &err), 0) << err;
    EXPECT_NE(out.find("--json"), std::string::npos);
    EXPECT_NE(out.find(std::string("Usage: fp4forge gateway ") + sub), std::string::npos) << out.substr(0, 200);
  }
}

// Every command's successful --json report has "ok" (issue 55: diff's had none), true exactly when it exits 0, and a
// "schema" tag "fp4forge.COMMAND/1" (tryout Q-L5: inspect, plan and synth had one, the others none).
TEST(CliContract, EveryJsonReportSaysOk) {
  testutil::TempDir t;
  const std::string llama = testutil::q(testutil::kData + "/llama");
  const std::vector<std::pair<std::string, int>> cases{
      {"inspect " + llama, 0},
      {"doctor " + llama, 0},
      {"diff " + llama + " " + llama, 0},
      {"diff " + llama + " " + testutil::q(testutil::kData + "/qwen3_moe"), 3},
      {"plan --seat a=" + llama + " --gpu 0=80GiB", 0},
      // A plan whose seat does not fit exits 1 and says ok false (issue 55 tryout: it said ok true).
      {"plan --seat a=" + llama + ":weights=90GiB --gpu 0=80GiB", 1},
      {"quantize " + llama + " " + testutil::q(t.path / "q") + " --no-progress", 0},
      {"verify " + testutil::q(t.path / "q") + " --against " + llama + " --no-progress", 0},
      {"synth --arch llama --size tiny --out " + testutil::q(t.path / "s"), 0},
      {"selftest", 0},
  };
  for (const auto& [args, code] : cases) {
    SCOPED_TRACE(args);
    std::string out, err;
    ASSERT_EQ(run_cli(args + " --json", &out, &err), code) << err;
    const auto j = nlohmann::json::parse(out, nullptr, false);
    ASSERT_TRUE(j.is_object()) << out.substr(0, 300);
    ASSERT_TRUE(j.contains("ok")) << out.substr(0, 300);
    EXPECT_EQ(j["ok"].get<bool>(), code == 0);
    if (j.contains("error")) continue;  // an error document (docs/errors.md) has none
    const std::string command = args.substr(0, args.find(' '));
    ASSERT_TRUE(j.contains("schema")) << out.substr(0, 300);
    EXPECT_EQ(j["schema"].dump(), "\"fp4forge." + command + "/1\"") << out.substr(0, 300);
  }
}

TEST(CliContract, UnknownCommandIsAUsageError) {
  std::string out, err;
  EXPECT_EQ(run_cli("frobnicate --json", &out, &err), 2);
  EXPECT_EQ(err.rfind("fp4forge: error: ", 0), 0u) << err;
  EXPECT_EQ(nlohmann::json::parse(out, nullptr, false).value("ok", true), false) << out;
  EXPECT_EQ(run_cli("help frobnicate", &out, &err), 2);
  EXPECT_EQ(err.rfind("fp4forge: error: unknown command 'frobnicate'", 0), 0u) << err;
  // A typo of a command gets the nearest name, in `help TOPIC` as on the command line (issue 55); `help help` is
  // the command list, exit 0.
  EXPECT_EQ(run_cli("help quantise", &out, &err), 2);
  EXPECT_NE(err.find("unknown command 'quantise' (did you mean 'quantize'?)"), std::string::npos) << err;
  EXPECT_EQ(run_cli("quantise", &out, &err), 2);
  EXPECT_NE(err.find("(did you mean 'quantize'?)"), std::string::npos) << err;
  // A word near no command is said as an unknown command with the list; an unknown option as itself, not as the
  // positional CLI11 finds missing first (issue 55 tryout).
  // Extra words are said in the order typed (CLI11 lists them in reverse; issue 55 tryout).
  EXPECT_EQ(run_cli("quantise src dst", &out, &err), 2);
  EXPECT_NE(err.find("not expected: quantise src dst (did you mean 'quantize'?)"), std::string::npos) << err;
  EXPECT_EQ(run_cli("frobnicate", &out, &err), 2);
  EXPECT_NE(err.find("unknown command 'frobnicate' (commands: inspect, "), std::string::npos) << err;
  EXPECT_EQ(run_cli("quantize --bogus", &out, &err), 2);
  EXPECT_NE(err.find("unknown option '--bogus'"), std::string::npos) << err;
  EXPECT_EQ(err.find("is required"), std::string::npos) << err;
  EXPECT_EQ(run_cli("quantize --dry-rn", &out, &err), 2);
  EXPECT_NE(err.find("unknown option '--dry-rn' (did you mean '--dry-run'?)"), std::string::npos) << err;
  EXPECT_EQ(run_cli("help help", &out, &err), 0) << err;
  EXPECT_NE(out.find("Usage: fp4forge"), std::string::npos) << out.substr(0, 200);
  // A scheme typed as operators type it names the nearest one fp4forge makes, and why W4A4 is not one.
  testutil::TempDir t;
  const std::string src = testutil::q(testutil::kData + "/llama"), dst = testutil::q(t.path / "q");
  EXPECT_EQ(run_cli("quantize " + src + " " + dst + " --scheme nvfp4", &out, &err), 2);
  EXPECT_NE(err.find("did you mean nvfp4a16"), std::string::npos) << err;
  EXPECT_EQ(run_cli("quantize " + src + " " + dst + " --scheme w4a4", &out, &err), 2);
  EXPECT_NE(err.find("calibration data"), std::string::npos) << err;
  EXPECT_FALSE(std::filesystem::exists(t.path / "q"));
}

// Issue 29 / 51: servable means servable: quantize refuses before writing anything a source without a tokenizer (the
// fixtures' tokenizer files removed here: doctor's missing-tokenizer, naming --tokenizer-from), and warns that a
// tokenizer without a chat template leaves the chat endpoint refusing. doctor on that folder is an error, and names
// --tokenizer for a tokenizer served from elsewhere.
TEST(CliContract, QuantizeWarnsBeforeWritingWhenTheSourceIsNotServable) {
  testutil::TempDir t;
  const auto src = t.path / "m";
  std::filesystem::copy(testutil::kData + "/llama", src);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja"}) std::filesystem::remove(src / f);
  std::string out, err;
  EXPECT_EQ(run_cli("doctor " + testutil::q(src), &out, &err), 1) << out << err;
  EXPECT_NE(out.find("missing-tokenizer"), std::string::npos) << out;
  EXPECT_NE(out.find("--tokenizer SRC"), std::string::npos) << out;
  EXPECT_EQ(run_cli("doctor " + testutil::q(src) + " --tokenizer " + testutil::q(testutil::kData + "/llama"), &out,
                    &err), 0) << out << err;
  ASSERT_EQ(run_cli("quantize " + testutil::q(src) + " --dry-run --json", &out, &err), 3) << err;
  EXPECT_NE(out.find("missing-tokenizer"), std::string::npos) << out.substr(0, 400);
  EXPECT_NE(err.find("--tokenizer-from REF"), std::string::npos) << err;
  std::ofstream(src / "tokenizer.json") << R"({"version": "1.0", "model": {}})";
  ASSERT_EQ(run_cli("quantize " + testutil::q(src) + " " + testutil::q(t.path / "q"), &out, &err), 0) << err;
  EXPECT_NE(err.find("preflight: missing-chat-template: no chat template"), std::string::npos) << err;
  EXPECT_EQ(err.find("no tokenizer file"), std::string::npos) << err;
}

// Issue 29: a typo gets the nearest name; no command at all is a usage error (help on stderr, exit 2).
TEST(CliContract, TyposGetTheNearestNameAndNoCommandIsAUsageError) {
  std::string out, err;
  // Each typo, exit 2, and the nearest name in the message: commands, options, subcommands (the word typed named as
  // the command it did not know: it read "A subcommand is required"), and values from a list (schemes, observers,
  // synth's --arch, whose model_type spelling is taken as it is).
  const std::vector<std::pair<std::string, std::string>> typos = {
      {"quantise a b", "(did you mean 'quantize'?)"},
      {"quantize a b --obsever mse", "(did you mean '--observer'?)"},
      {"gateway swpa --config x", "(did you mean 'swap'?)"},
      {"gateway swop", "unknown 'gateway' command 'swop' (did you mean 'swap'?)"},
      {"quantize a b --scheme nvfp4a1", "unknown scheme 'nvfp4a1' (did you mean 'nvfp4a16'?)"},
      {"quantize a b --observer min-max", "unknown observer 'min-max' (did you mean 'minmax'?)"},
      {"synth --arch qwen3-mo --out x", "unknown --arch 'qwen3-mo' (did you mean 'qwen3-moe'?)"},
      {"gateway retire --config x --alias a --deploymnet 2", "(did you mean '--deployment'?)"},
      {"probe http://127.0.0.1:9 --model m --api-key sk-SECRET-77", "(did you mean '--api-key-env'?)"},
  };
  for (const auto& [cmd, want] : typos) {
    EXPECT_EQ(run_cli(cmd, &out, &err), 2) << cmd;
    EXPECT_NE(err.find(want), std::string::npos) << cmd << ": " << err;
    EXPECT_EQ(err.find("A subcommand is required"), std::string::npos) << err;
  }
  // The value of an option named like a secret is never echoed (issue 55 tryout F).
  EXPECT_EQ(run_cli("probe http://127.0.0.1:9 --model m --api-key sk-SECRET-77", &out, &err), 2);
  EXPECT_EQ(err.find("SECRET"), std::string::npos) << err;
  EXPECT_NE(err.find("--api-key ***"), std::string::npos) << err;
  EXPECT_EQ(run_cli("probe http://127.0.0.1:9 --model m --api-key=sk-SECRET-77", &out, &err), 2);
  EXPECT_EQ(err.find("SECRET"), std::string::npos) << err;
  EXPECT_EQ(run_cli("frobnicate", &out, &err), 2);
  EXPECT_EQ(err.find("did you mean"), std::string::npos) << err;  // nothing near: no guess
  EXPECT_EQ(run_cli("", &out, &err), 2);
  EXPECT_TRUE(out.empty()) << out;
  EXPECT_NE(err.find("Subcommands:"), std::string::npos) << err;
  EXPECT_EQ(run_cli("help", &out, &err), 0);
  EXPECT_NE(out.find("Subcommands:"), std::string::npos);
}

}  // namespace
}  // namespace fp4forge

namespace fp4forge {
namespace {
// Issue 15 tryout items: doctor/verify --strict (warnings fail), quantize skips backups and stray weight
// files with a note, quantize --no-progress exists and the bar's count equals its total.
TEST(CliContract, StrictSideFilesAndProgress) {
  using testutil::q;
  using testutil::slurp;
  testutil::TempDir t;
  const auto src = t.path / "m";
  std::filesystem::copy(testutil::kData + "/llama", src);
  // A stale total_size: a warning for every command (HostileFiles.StaleTotalSizeIsAWarning).
  {
    auto j = nlohmann::json::parse(slurp(src / "model.safetensors.index.json"));
    j["metadata"]["total_size"] = 1;
    std::ofstream(src / "model.safetensors.index.json", std::ios::trunc) << j.dump(2);
  }
  { std::ofstream(src / "config.json.bak-fp4forge-20261201-120000") << "{}"; }
  { std::ofstream(src / "pytorch_model.bin") << "pickle"; }
  { std::ofstream(src / "tokenizer.json.partial-AbCd1234") << "{}"; }
  { std::ofstream(src / "notes.partial_draft.md") << "kept: not a temporary"; }
  // A safetensors file the index does not name (Mistral's consolidated.safetensors): never loaded, never copied.
  std::filesystem::copy_file(src / "model-00001-of-00004.safetensors", src / "consolidated.safetensors");
  std::string out, err;
  EXPECT_EQ(run_cli("doctor " + q(src) + " --json", &out, &err), 0) << err;
  {
    const auto d = nlohmann::json::parse(out);
    std::size_t stray = 0;
    for (const auto& f : d["findings"])
      if (f["kind"] == "shard-not-in-index") {
        ++stray;
        EXPECT_EQ(f["severity"], "info");
        EXPECT_EQ(f["key"], "consolidated.safetensors");
      }
    EXPECT_EQ(stray, 1u) << out;
  }
  EXPECT_EQ(run_cli("doctor " + q(src) + " --strict --json", &out, &err), 1) << err;
  EXPECT_EQ(nlohmann::json::parse(out)["strict"], true);
  ASSERT_EQ(run_cli("quantize " + q(src) + " " + q(t.path / "q") + " --no-progress --json", &out, &err), 0) << err;
  const auto sum = nlohmann::json::parse(out);
  EXPECT_EQ(sum["bytes_read"], sum["bytes_in"]);
  for (const char* skipped : {"config.json.bak-fp4forge-20261201-120000", "pytorch_model.bin",
                              "tokenizer.json.partial-AbCd1234", "consolidated.safetensors"}) {
    EXPECT_FALSE(std::filesystem::exists(t.path / "q" / skipped)) << skipped;
    EXPECT_NE(out.find(std::string("not copied: '") + skipped + "'"), std::string::npos) << skipped;
  }
  EXPECT_TRUE(std::filesystem::exists(t.path / "q" / "generation_config.json"));
  EXPECT_TRUE(std::filesystem::exists(t.path / "q" / "notes.partial_draft.md"));
  EXPECT_EQ(run_cli("verify " + q(t.path / "q") + " --against " + q(src) + " --json", &out, &err), 0) << err;
  EXPECT_EQ(run_cli("verify " + q(t.path / "q") + " --against " + q(src) + " --strict --json", &out, &err), 1);
  const auto v = nlohmann::json::parse(out);
  EXPECT_EQ(v["ok"], false);
  EXPECT_EQ(v["strict"], true);
}
}  // namespace
}  // namespace fp4forge

namespace fp4forge {
namespace {
// Issue 15: verify --against a source of another model says so first (as diff does) and compares nothing.
TEST(CliContract, VerifyAgainstAnotherModelSaysSoFirst) {
  using testutil::q;
  testutil::TempDir t;
  std::string out, err;
  ASSERT_EQ(run_cli("quantize " + q(testutil::kData + "/llama") + " " + q(t.path / "q"), &out, &err), 0) << err;
  EXPECT_EQ(run_cli("verify " + q(t.path / "q") + " --against " + q(testutil::kData + "/qwen3_moe") + " --json", &out,
                    &err), 1);
  const auto j = nlohmann::json::parse(out);
  ASSERT_FALSE(j["findings"].empty());
  EXPECT_EQ(j["findings"][0]["kind"], "against-other-model") << out.substr(0, 400);
  EXPECT_NE(j["findings"][0]["message"].get<std::string>().find("family llama vs qwen3_moe"), std::string::npos);
  for (const auto& f : j["findings"]) EXPECT_NE(f["kind"], "missing-tensor") << "compared anyway";
  EXPECT_EQ(run_cli("verify " + q(t.path / "q") + " --against " + q(testutil::kData + "/llama") + " --json", &out,
                    &err), 0) << out.substr(0, 400);
}
}  // namespace
}  // namespace fp4forge

namespace fp4forge {
namespace {
// Issue 15: `quantize --dry-run -v` lists dtype, shape and bytes per tensor, like llama-quantize.
TEST(CliContract, DryRunVerboseListsDtypeShapeAndBytes) {
  std::string out, err;
  ASSERT_EQ(run_cli("quantize " + testutil::q(testutil::kData + "/llama") + " --dry-run -v", &out, &err), 0) << err;
  EXPECT_NE(out.find("model.layers.0.mlp.down_proj.weight  BF16 [128, 256]  64.00 KiB -> 18.00 KiB"), std::string::npos)
      << out;
  EXPECT_NE(out.find("model.layers.0.input_layernorm.weight  BF16 [128]  256 B"), std::string::npos) << out;
}

// The ignore list's length is not the count of Linear-like weights kept (verify's figure): fused expert blocks are
// entries too, said apart (tryout note: quantize's 6 "Linear-like" beside verify's 4 on gpt-oss).
TEST(CliContract, DryRunIgnoreLineCountsLinearLikeWeightsApart) {
  std::string out, err;
  ASSERT_EQ(run_cli("quantize " + testutil::q(testutil::kData + "/gpt_oss") + " --dry-run --ignore 're:.*experts'",
                    &out, &err),
            0)
      << err;
  EXPECT_NE(out.find("ignore: 6 entries in quantization_config.ignore: 4 Linear-like weight(s) kept in 16 bits, and "
                     "the fused expert blocks kept"),
            std::string::npos)
      << out;
  ASSERT_EQ(run_cli("quantize " + testutil::q(testutil::kData + "/qwen3") + " --dry-run", &out, &err), 0) << err;
  EXPECT_NE(out.find("ignore: 2 entries in quantization_config.ignore: 2 Linear-like weight(s) kept in 16 bits\n"),
            std::string::npos)
      << out;
}
}  // namespace
// The text reports of quantize, synth and verify in one unit family: binary sizes, counts with separators, never a
// raw byte count or a decimal GB (issue 55 audit: "(853248 bytes)", "235093634560 params", "of 2266368 parameters").
TEST(CliContract, TextReportsUseOneUnitFamily) {
  using testutil::kData;
  using testutil::q;
  testutil::TempDir t;
  std::string out, err, all;
  const std::string src = kData + "/llama";
  ASSERT_EQ(run_cli("quantize " + q(src) + " " + q(t.path / "q"), &out, &err), 0) << err;
  all += out;
  // The observer in both spellings, what the files count (issue 55 tryouts F and G).
  EXPECT_NE(out.find("(nvfp4a16, observer mse, in config.json nvfp4_expanded_mse)"), std::string::npos) << out;
  EXPECT_NE(out.find(" of shard files from "), std::string::npos) << out;
  ASSERT_EQ(run_cli("synth --arch llama --size tiny --no-progress --out " + q(t.path / "s"), &out, &err), 0) << err;
  all += out;
  ASSERT_EQ(run_cli("verify " + q(t.path / "q") + " --against " + q(src) + " --no-progress", &out, &err), 0) << out;
  all += out;
  EXPECT_FALSE(std::regex_search(all, std::regex("\\d{5,} (bytes|params|parameters|Linear-like)"))) << all;
  EXPECT_FALSE(std::regex_search(all, std::regex("\\d GB\\b"))) << all;
  EXPECT_NE(all.find(" params, "), std::string::npos) << all;
}

}  // namespace fp4forge
