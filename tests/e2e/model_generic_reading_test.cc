// Issue 26's "matches a name-generic reading byte for byte": every fixture in tests/data is quantized twice,
// as it is and as a copy whose config names no family the registry knows (model_type, text_config.model_type
// and architectures renamed; tensors and every other key untouched). The structure-first reading alone must
// write the same files byte for byte (config.json aside, which differs by the renamed keys: its
// quantization_config must be equal), and its output must pass verify --against and doctor with no error.
// The registry may only add what structure cannot know; the one such difference in tests/data is a family
// whose routed experts vLLM cannot load quantized (registry experts_refusal, gpt-oss): the registry refuses
// them, the generic reading quantizes them and says which assumption it made (experts-order-assumed), and
// with the experts kept both readings write the same bytes. The same under FP8_DYNAMIC, where the registry also
// quantizes GatedDeltaNet's projections at 8 bits (mixer_quant_bits) and the generic reading keeps them.
#include <cctype>
#include <filesystem>
#include <set>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fp4forge/model/model_info.h"
#include "test_util.h"

namespace fp4forge {
namespace {

using namespace fp4forge::testutil;

/** Copies fixture `fx` to `dst` with its family names replaced by names no registry row lists. */
void generic_copy(const std::string& fx, const stdfs::path& dst) {
  stdfs::copy(kData + "/" + fx, dst, stdfs::copy_options::recursive);
  auto cfg = nlohmann::ordered_json::parse(slurp(dst / "config.json"));
  cfg["model_type"] = "fp4forge_generic";
  cfg["architectures"] = nlohmann::ordered_json::array({"Fp4forgeGenericForCausalLM"});
  if (auto it = cfg.find("text_config"); it != cfg.end() && it->is_object() && it->contains("model_type"))
    (*it)["model_type"] = "fp4forge_generic_text";
  std::ofstream(dst / "config.json", std::ios::binary | std::ios::trunc) << cfg.dump(2);
}

nlohmann::json quant_config(const stdfs::path& out) {
  const auto cfg = nlohmann::json::parse(slurp(out / "config.json"));
  const auto& text = cfg.contains("text_config") && cfg["text_config"].contains("quantization_config")
                         ? cfg["text_config"] : cfg;
  return text.value("quantization_config", nlohmann::json());
}

/** Quantizes fixture `fx` with `scheme_flags` as it is and as its generic copy and compares the outputs. When
 * `mixer_differs`, the files may differ (the registry quantizes the family's sequence mixer where the generic
 * reading keeps it) but the generic output must still be clean. */
void compare_readings(const std::string& fx, const std::string& scheme_flags, bool mixer_differs) {
  TempDir tmp;
  const stdfs::path gsrc = tmp.path / "generic-src", rout = tmp.path / "registry", gout = tmp.path / "generic";
  generic_copy(fx, gsrc);
  std::string out, err, gjson, gerr;
  std::string flags = "-j 2 --json " + scheme_flags;
  int rr = run_cli("quantize " + q(kData + "/" + fx) + " " + q(rout) + " " + flags, &out, &err);
  int rg = run_cli("quantize " + q(gsrc) + " " + q(gout) + " " + flags, &gjson, &gerr);
  if (rr == 3 && rg == 3 && err.find("nothing to quantize") != std::string::npos &&
      gerr.find("nothing to quantize") != std::string::npos)
    return;  // the scheme fits no weight of this tiny fixture, under either reading
  ASSERT_EQ(rg, 0) << fx << " generic: " << gerr;
  if (rr == 3 && err.find("cannot be served quantized") != std::string::npos) {
    // The registry knows vLLM cannot load these experts quantized; the generic reading cannot know it and
    // must say what it assumed about them.
    EXPECT_NE(gjson.find("experts-order-assumed"), std::string::npos) << fx << ": " << gjson;
    stdfs::remove_all(gout);
    flags += " --ignore 're:.*experts'";
    rr = run_cli("quantize " + q(kData + "/" + fx) + " " + q(rout) + " " + flags, &out, &err);
    rg = run_cli("quantize " + q(gsrc) + " " + q(gout) + " " + flags, &gjson, &gerr);
    ASSERT_EQ(rg, 0) << fx << " generic: " << gerr;
  }
  ASSERT_EQ(rr, 0) << fx << ": " << err;
  if (!mixer_differs) {
    EXPECT_EQ(nlohmann::json::parse(out)["quantized_weights"], nlohmann::json::parse(gjson)["quantized_weights"]) << fx;
    auto rfiles = file_contents(rout), gfiles = file_contents(gout);
    rfiles.erase("config.json");
    gfiles.erase("config.json");
    EXPECT_EQ(changed_names(rfiles, gfiles), "") << fx << ": files the generic reading writes differently";
    // quantization_config: equal, except that the registry may add vLLM's names for kept modules to `ignore`
    // (Granite-4's `mixer.*` for the stored `mamba.*`): names of no tensor on disk, which structure cannot know.
    auto rq = quant_config(rout), gq = quant_config(gout);
    const auto names = nlohmann::json::parse(slurp(kData + "/" + fx + ".tensors.json"));
    std::set<std::string> gign;
    for (const auto& e : gq["ignore"]) gign.insert(e.get<std::string>());
    nlohmann::json kept = nlohmann::json::array();
    for (const auto& e : rq["ignore"]) {
      const std::string n = e.get<std::string>();
      if (gign.count(n) != 0 || names.contains(n + ".weight") || n.rfind("re:", 0) == 0) kept.push_back(n);
    }
    rq["ignore"] = kept;
    EXPECT_EQ(rq, gq) << fx;
  }

  // The generic output is clean: verify --against its (generic) source, doctor on it. Where quantize assumed a
  // fused gate_up order, verify, comparing by the same assumption, says so too.
  int rv = run_cli("verify " + q(gout) + " --against " + q(gsrc) + " --json", &out, &err);
  EXPECT_EQ(failing_findings(out), "") << fx << " verify";
  EXPECT_EQ(gjson.find("experts-order-assumed") != std::string::npos,
            out.find("\"experts-order-assumed\"") != std::string::npos)
      << fx << ": quantize and verify disagree on the assumed expert order: " << out;
  EXPECT_EQ(rv, 0) << fx << " verify: " << err;
  rv = run_cli("doctor " + q(gout) + " --json", &out, &err);
  EXPECT_EQ(failing_findings(out), "") << fx << " doctor";
  EXPECT_EQ(rv, 0) << fx << " doctor: " << err;
}

/** The fixture's registry row quantizes its sequence mixer at 8 bits (GatedDeltaNet: mixer_quant_bits 8), which
 * the generic reading, not knowing the mixer vLLM builds, keeps (and says so in the summary). */
bool mixer_quantized_at_8_bits(const std::string& fx) {
  const auto info = read_model_info(nlohmann::ordered_json::parse(slurp(kData + "/" + fx + "/config.json")));
  return info.ok() && info->spec().mixer_quant_bits > 0 && info->spec().mixer_quant_bits <= 8;
}

class GenericReading : public ::testing::TestWithParam<std::string> {};

TEST_P(GenericReading, WritesTheRegistryReadingsBytes) { compare_readings(GetParam(), "", false); }

// An 8-bit scheme without the 128 multiples FP8_BLOCK needs (which the tiny fixtures lack): the same bytes,
// except the GatedDeltaNet projections the registry quantizes at 8 bits.
TEST_P(GenericReading, WritesTheRegistryReadingsBytesUnderFp8Dynamic) {
  compare_readings(GetParam(), "--scheme fp8-dynamic", mixer_quantized_at_8_bits(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(AllFixtures, GenericReading, ::testing::ValuesIn(fixture_names()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return testutil::test_name(i.param); });

}  // namespace
}  // namespace fp4forge
