// `quantize --observer` end to end: whole fixtures through the CLI byte for byte against upstream (every
// tensor llm-compressor's model_free pipeline writes with nvfp4_expanded_mse / memoryless_mse, computed on
// the GPU host by its own functions: tests/data/golden/observers/fixtures/<fixture>.<observer>.json, made by
// scripts/observers/fixture_upstream.py as docs/schemes.md#observers tells), the config records the observer, verify
// --against re-encodes with the observer the config names (and so catches a config that lies about it),
// determinism across -j / --max-memory, and the refusals.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fp4forge/safetensors/checkpoint.h"
#include "test_util.h"

namespace fp4forge {
namespace {

using namespace fp4forge::testutil;

std::string hex_of(std::span<const std::byte> b) {
  static const char* d = "0123456789abcdef";
  std::string s(b.size() * 2, '0');
  for (std::size_t i = 0; i < b.size(); ++i) {
    s[2 * i] = d[static_cast<unsigned>(b[i]) >> 4];
    s[2 * i + 1] = d[static_cast<unsigned>(b[i]) & 15];
  }
  return s;
}

struct FixtureCase {
  const char* fixture;
  const char* option;       // --observer value
  const char* config_name;  // what llm-compressor writes
  const char* scheme = "";  // --scheme ("": the default, nvfp4a16)
};

const FixtureCase kCases[] = {
    {"llama", "mse", "nvfp4_expanded_mse"},           {"llama", "memoryless-mse", "memoryless_mse"},
    {"qwen3", "mse", "nvfp4_expanded_mse"},           {"qwen3", "memoryless-mse", "memoryless_mse"},
    {"phi3", "nvfp4_expanded_mse", "nvfp4_expanded_mse"}, {"phi3", "memoryless_mse", "memoryless_mse"},
    // memoryless_mse on the group schemes (W4A16 needs K % 128 = 0: llama is the fixture with hidden 128).
    {"llama", "memoryless-mse", "memoryless_mse", "w4a16"}, {"llama", "memoryless-mse", "memoryless_mse", "mxfp4a16"},
    {"qwen3", "memoryless-mse", "memoryless_mse", "mxfp4a16"}, {"phi3", "memoryless_mse", "memoryless_mse", "mxfp4a16"},
};

class ObserverFixture : public ::testing::TestWithParam<FixtureCase> {};

TEST_P(ObserverFixture, EveryTensorIsUpstreamsBytesAndTheConfigNamesTheObserver) {
  const auto c = GetParam();
  TempDir tmp;
  const auto dst = tmp.path / "q";
  std::string out, err;
  const std::string scheme = *c.scheme ? std::string(" --scheme ") + c.scheme : "";
  ASSERT_EQ(run_cli("quantize " + q(kData + "/" + c.fixture) + " " + q(dst) + scheme + " --observer " + c.option +
                        " -j 2 --json", &out, &err), 0) << err;
  // The summary names the observer by its option name, whichever spelling was given.
  EXPECT_EQ(nlohmann::json::parse(out)["observer"], std::string(c.config_name) == "memoryless_mse" ? "memoryless-mse" : "mse");
  const auto want = nlohmann::json::parse(
      slurp(kData + "/golden/observers/fixtures/" + std::string(c.fixture) + "." + (*c.scheme ? std::string(c.scheme) + "." : "") +
            c.config_name + ".json"));
  auto ck = Checkpoint::open(dst);
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  std::size_t ours = 0;
  for (const auto& t : ck->tensors()) {
    const std::string& n = t.name;
    if (!n.ends_with(".weight_packed") && !n.ends_with(".weight_scale") && !n.ends_with(".weight_global_scale")) continue;
    ++ours;
    ASSERT_TRUE(want.contains(n)) << n << " is not in upstream's output";
    EXPECT_EQ(hex_of(ck->data(t)), want[n].get<std::string>()) << n;
  }
  EXPECT_EQ(ours, want.size());
  EXPECT_GT(ours, 0u);
  const auto cfg = nlohmann::json::parse(slurp(dst / "config.json"));
  const auto& w = cfg["quantization_config"]["config_groups"]["group_0"]["weights"];
  EXPECT_EQ(w["observer"], c.config_name);
  EXPECT_EQ(w["observer_kwargs"], nlohmann::json::object());
  // verify --against re-encodes every row with the observer the config names: clean.
  ASSERT_EQ(run_cli("verify " + q(dst) + " --against " + q(kData + "/" + c.fixture) + " --reencode-rows 1000000 --strict --json",
                    &out, &err), 0) << out;
  const auto vj = nlohmann::json::parse(out);
  EXPECT_EQ(vj["observer"], c.config_name);
  EXPECT_EQ(vj["stats"]["against"]["reencode_mismatched_rows"], 0);
  EXPECT_GT(vj["stats"]["against"]["reencoded_rows"].get<int>(), 0);
}

INSTANTIATE_TEST_SUITE_P(Upstream, ObserverFixture, ::testing::ValuesIn(kCases), [](const auto& p) {
  return testutil::test_name(std::string(p.param.fixture) + "_" +
                             (*p.param.scheme ? std::string(p.param.scheme) + "_" : "") + p.param.config_name);
});

// Rewrites the weights' observer of a quantized folder's config.
void set_observer(const std::filesystem::path& dir, const nlohmann::json& name) {
  auto cfg = nlohmann::json::parse(slurp(dir / "config.json"));
  cfg["quantization_config"]["config_groups"]["group_0"]["weights"]["observer"] = name;
  std::ofstream(dir / "config.json") << cfg.dump(2) << "\n";
}

TEST(QuantizeObserver, VerifyProvesTheObserverTheConfigNames) {
  TempDir tmp;
  const std::string src = kData + "/llama";
  std::string out, err;
  ASSERT_EQ(run_cli("quantize " + q(src) + " " + q(tmp.path / "mm") + " --observer minmax -j 2", &out, &err), 0) << err;
  ASSERT_EQ(run_cli("quantize " + q(src) + " " + q(tmp.path / "mse") + " --observer mse -j 2", &out, &err), 0) << err;
  // Min-max bytes under a config that says nvfp4_expanded_mse: the re-encode proof finds them, --strict fails.
  set_observer(tmp.path / "mm", "nvfp4_expanded_mse");
  EXPECT_EQ(run_cli("verify " + q(tmp.path / "mm") + " --against " + q(src) + " --strict --json", &out, &err), 1);
  auto vj = nlohmann::json::parse(out);
  EXPECT_GT(vj["stats"]["against"]["reencode_mismatched_rows"].get<int>(), 0);
  EXPECT_NE(out.find("reencode-mismatch"), std::string::npos);
  // The hint names corrupted bytes first and the observer the re-encode used (issue 55 tryout: "MSE observer").
  EXPECT_NE(out.find("corrupted bytes (a damaged copy or shard"), std::string::npos) << out;
  EXPECT_NE(out.find("another quantizer than observer nvfp4_expanded_mse says"), std::string::npos) << out;
  // And the other way round.
  set_observer(tmp.path / "mse", "memoryless_minmax");
  EXPECT_EQ(run_cli("verify " + q(tmp.path / "mse") + " --against " + q(src) + " --strict --json", &out, &err), 1);
  EXPECT_NE(out.find("reencode-mismatch"), std::string::npos);
  // An observer fp4forge cannot reproduce: a warning that says what was not checked, never an error.
  set_observer(tmp.path / "mse", "imatrix_mse");
  EXPECT_EQ(run_cli("verify " + q(tmp.path / "mse") + " --against " + q(src) + " --json", &out, &err), 0) << out;
  vj = nlohmann::json::parse(out);
  EXPECT_EQ(failing_findings(out), "");
  EXPECT_NE(out.find("observer-unknown"), std::string::npos);
  EXPECT_EQ(vj["stats"]["against"]["reencoded_rows"], 0);
  // A known observer with non-default kwargs cannot be reproduced either: the same warning.
  auto cfg = nlohmann::json::parse(slurp(tmp.path / "mse" / "config.json"));
  auto& w = cfg["quantization_config"]["config_groups"]["group_0"]["weights"];
  w["observer"] = "nvfp4_expanded_mse";
  w["observer_kwargs"] = {{"grid", 100}};
  std::ofstream(tmp.path / "mse" / "config.json") << cfg.dump(2) << "\n";
  EXPECT_EQ(run_cli("verify " + q(tmp.path / "mse") + " --against " + q(src) + " --json", &out, &err), 0) << out;
  EXPECT_EQ(failing_findings(out), "");
  EXPECT_NE(out.find("nvfp4_expanded_mse with observer_kwargs"), std::string::npos) << out;
}

TEST(QuantizeObserver, TheSearchIsLowerErrorThanMinMaxAndReportedSo) {
  TempDir tmp;
  std::string out, err;
  for (const char* fx : {"llama", "qwen3", "mixtral", "gemma4-moe-mm"}) {
    const std::string src = kData + "/" + fx;
    const auto dst = tmp.path / fx;
    ASSERT_EQ(run_cli("quantize " + q(src) + " " + q(dst) + " --observer mse -j 2", &out, &err), 0) << err;
    ASSERT_EQ(run_cli("verify " + q(dst) + " --against " + q(src) + " --json", &out, &err), 0) << out;
    const auto a = nlohmann::json::parse(out)["stats"]["against"];
    EXPECT_LT(a["mean_rel_rms"].get<double>(), a["mean_minmax_rel_rms"].get<double>()) << fx;
    EXPECT_EQ(a["mean_rel_rms"].get<double>(), a["mean_ref_rel_rms"].get<double>()) << fx;
    for (const auto& t : a["per_tensor"]) EXPECT_LE(t["rel_rms"].get<double>(), t["minmax_rel_rms"].get<double>()) << t["module"];
    EXPECT_GT(a["quality"]["gain"].get<double>(), 0.0) << fx;
    EXPECT_FALSE(a["quality"]["kinds"].empty()) << fx;
    const auto svg = tmp.path / (std::string(fx) + ".svg");
    ASSERT_EQ(run_cli("verify " + q(dst) + " --against " + q(src) + " --svg " + q(svg), &out, &err), 0);
    EXPECT_NE(out.find("where min-max gives"), std::string::npos) << out;
    EXPECT_NE(out.find("quality by module kind"), std::string::npos) << out;
    EXPECT_NE(slurp(svg).find("</svg>"), std::string::npos);
  }
  // The drawing needs the comparison.
  EXPECT_EQ(run_cli("verify " + q(tmp.path / "llama") + " --svg " + q(tmp.path / "x.svg"), &out, &err), 2);
  EXPECT_FALSE(std::filesystem::exists(tmp.path / "x.svg"));
}

TEST(QuantizeObserver, BytesDoNotDependOnThreadsOrTheMemoryBudget) {
  // --max-memory 8K makes every fused set a big group: the search runs in row ranges across tasks and the
  // encode pass reads the stored maxima.
  TempDir tmp;
  std::string out, err;
  for (const char* obs : {"mse", "memoryless-mse"}) {
    const std::string a = std::string("a-") + obs, b = std::string("b-") + obs;
    ASSERT_EQ(run_cli("quantize " + q(kData + "/qwen3") + " " + q(tmp.path / a) + " --observer " + obs + " -j 1", &out, &err), 0) << err;
    ASSERT_EQ(run_cli("quantize " + q(kData + "/qwen3") + " " + q(tmp.path / b) + " --observer " + obs +
                          " -j 2 --max-memory 8K", &out, &err), 0) << err;
    EXPECT_EQ(file_contents(tmp.path / a), file_contents(tmp.path / b)) << obs;
  }
  // The group schemes' search takes the same two passes when a unit is bigger than a task.
  for (const char* scheme : {"w4a16", "mxfp4a16"}) {
    const std::string a = std::string("a-") + scheme, b = std::string("b-") + scheme;
    ASSERT_EQ(run_cli("quantize " + q(kData + "/llama") + " " + q(tmp.path / a) + " --scheme " + scheme +
                          " --observer memoryless-mse -j 1", &out, &err), 0) << err;
    ASSERT_EQ(run_cli("quantize " + q(kData + "/llama") + " " + q(tmp.path / b) + " --scheme " + scheme +
                          " --observer memoryless-mse -j 2 --max-memory 8K", &out, &err), 0) << err;
    EXPECT_EQ(file_contents(tmp.path / a), file_contents(tmp.path / b)) << scheme;
  }
}

TEST(QuantizeObserver, GroupSchemesVerifyTheObserverTheConfigNames) {
  TempDir tmp;
  const std::string src = kData + "/llama";
  std::string out, err;
  for (const char* scheme : {"w4a16", "mxfp4a16"}) {
    const auto mm = tmp.path / (std::string("mm-") + scheme), mse = tmp.path / (std::string("mse-") + scheme);
    ASSERT_EQ(run_cli("quantize " + q(src) + " " + q(mm) + " --scheme " + scheme + " -j 2", &out, &err), 0) << err;
    ASSERT_EQ(run_cli("quantize " + q(src) + " " + q(mse) + " --scheme " + scheme + " --observer memoryless-mse -j 2",
                      &out, &err), 0) << err;
    ASSERT_EQ(run_cli("verify " + q(mse) + " --against " + q(src) + " --strict --json", &out, &err), 0) << out;
    const auto a = nlohmann::json::parse(out)["stats"]["against"];
    EXPECT_LT(a["mean_rel_rms"].get<double>(), a["mean_minmax_rel_rms"].get<double>()) << scheme;
    EXPECT_EQ(run_cli("doctor " + q(mse) + " --json", &out, &err), 0) << out;
    // Min-max bytes under a config that names the search (and the other way round): the re-encode proof.
    set_observer(mm, "memoryless_mse");
    EXPECT_EQ(run_cli("verify " + q(mm) + " --against " + q(src) + " --strict --json", &out, &err), 1) << scheme;
    EXPECT_NE(out.find("reencode-mismatch"), std::string::npos) << scheme;
    set_observer(mse, "memoryless_minmax");
    EXPECT_EQ(run_cli("verify " + q(mse) + " --against " + q(src) + " --strict --json", &out, &err), 1) << scheme;
  }
}

TEST(QuantizeObserver, TheDefaultIsTheSearchForNvfp4AndMinMaxElsewhere) {
  TempDir tmp;
  std::string out, err;
  ASSERT_EQ(run_cli("quantize " + q(kData + "/qwen3") + " " + q(tmp.path / "d") + " -j 2 --json", &out, &err), 0) << err;
  EXPECT_EQ(nlohmann::json::parse(out)["observer"], "mse");
  ASSERT_EQ(run_cli("quantize " + q(kData + "/qwen3") + " " + q(tmp.path / "m") + " --observer mse -j 2", &out, &err), 0) << err;
  EXPECT_EQ(file_contents(tmp.path / "d"), file_contents(tmp.path / "m"));
  ASSERT_EQ(run_cli("quantize " + q(kData + "/qwen3_moe-wide") + " " + q(tmp.path / "w") + " --scheme w4a16 -j 2 --json", &out, &err), 0) << err;
  EXPECT_EQ(nlohmann::json::parse(out)["observer"], "minmax");
  EXPECT_EQ(nlohmann::json::parse(slurp(tmp.path / "w" / "config.json"))["quantization_config"]["config_groups"]["group_0"]
                ["weights"]["observer"], "memoryless_minmax");
  ASSERT_EQ(run_cli("quantize " + q(kData + "/qwen3") + " --dry-run --json", &out, &err), 0) << err;
  const auto plan = nlohmann::json::parse(out)["plan"];
  EXPECT_EQ(plan["observer"], "mse");
  // The dry run says what the search costs (issue 55): 111 trial encodes of every quantized element.
  EXPECT_EQ(plan["search_element_encodes"].get<std::uint64_t>(), 111 * plan["quantized_params"].get<std::uint64_t>());
  ASSERT_EQ(run_cli("quantize " + q(kData + "/qwen3") + " --dry-run", &out, &err), 0) << err;
  EXPECT_NE(out.find("cost: the searched observer tries up to 111 scales per group"), std::string::npos) << out;
  EXPECT_NE(out.find("an 8B NVFP4A16 with mse: about 62 s"), std::string::npos) << out;
  // Another search is said by its count, never with the mse run's measured time (issue 55 tryout).
  ASSERT_EQ(run_cli("quantize " + q(kData + "/qwen3") + " --dry-run --observer memoryless-mse", &out, &err), 0) << err;
  EXPECT_NE(out.find("cost: the searched observer"), std::string::npos) << out;
  EXPECT_EQ(out.find("62 s"), std::string::npos) << out;
  EXPECT_NE(out.find("no 8B run of this observer is measured"), std::string::npos) << out;
  ASSERT_EQ(run_cli("quantize " + q(kData + "/qwen3") + " --dry-run --observer minmax --json", &out, &err), 0) << err;
  EXPECT_EQ(nlohmann::json::parse(out)["plan"]["search_element_encodes"], 0);
  ASSERT_EQ(run_cli("quantize " + q(kData + "/qwen3") + " --dry-run --observer minmax", &out, &err), 0) << err;
  EXPECT_EQ(out.find("cost:"), std::string::npos) << out;
}

TEST(QuantizeObserver, WithoutJobsASearchRunsTwiceTheCoresOfWorkers) {
  // A searched run is CPU-bound with workers blocked in I/O part of the time: twice the cores by default
  // (quantize/run.h default_jobs); min-max, bound by the disk, all cores; -j always wins.
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  TempDir tmp;
  std::string out, err;
  ASSERT_EQ(run_cli("quantize " + q(kData + "/qwen3") + " " + q(tmp.path / "s") + " --json", &out, &err), 0) << err;
  EXPECT_EQ(nlohmann::json::parse(out)["jobs"], 2 * cores);
  ASSERT_EQ(run_cli("quantize " + q(kData + "/qwen3") + " " + q(tmp.path / "m") + " --observer minmax --json", &out, &err), 0) << err;
  EXPECT_EQ(nlohmann::json::parse(out)["jobs"], cores);
  // A recipe that searches only some modules still counts as a searched run.
  ASSERT_EQ(run_cli("quantize " + q(kData + "/qwen3") + " " + q(tmp.path / "r") +
                        " --observer minmax --scheme-for attention=nvfp4a16:mse --json", &out, &err), 0) << err;
  EXPECT_EQ(nlohmann::json::parse(out)["jobs"], 2 * cores);
  ASSERT_EQ(run_cli("quantize " + q(kData + "/qwen3") + " " + q(tmp.path / "j") + " -j 3 --json", &out, &err), 0) << err;
  EXPECT_EQ(nlohmann::json::parse(out)["jobs"], 3);
  // The worker count never changes the bytes.
  EXPECT_EQ(file_contents(tmp.path / "s"), file_contents(tmp.path / "j"));
}

TEST(QuantizeObserver, RefusesAnObserverTheSchemeDoesNotTake) {
  TempDir tmp;
  std::string out, err;
  EXPECT_EQ(run_cli("quantize " + q(kData + "/llama") + " " + q(tmp.path / "o") + " --scheme fp8-block --observer mse", &out, &err), 2);
  EXPECT_NE(err.find("observer 'mse' is not available for scheme fp8-block"), std::string::npos) << err;
  // The NVFP4-tuned search is NVFP4A16's only; the group schemes take memoryless-mse.
  EXPECT_EQ(run_cli("quantize " + q(kData + "/llama") + " " + q(tmp.path / "o") + " --scheme w4a16 --observer mse", &out, &err), 2);
  EXPECT_NE(err.find("w4a16 takes: minmax, memoryless-mse"), std::string::npos) << err;
  EXPECT_EQ(run_cli("quantize " + q(kData + "/llama") + " " + q(tmp.path / "o") + " --observer best", &out, &err), 2);
  EXPECT_NE(err.find("unknown observer 'best'"), std::string::npos) << err;
  EXPECT_FALSE(std::filesystem::exists(tmp.path / "o"));
}

}  // namespace
}  // namespace fp4forge
