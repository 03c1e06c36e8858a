// Issue 31 #3 / issue 27: every command fed configs whose fields have the wrong JSON types (a string where a count
// goes, an array, an object, null, a negative, a huge float, a bool): each ends in a clean exit 0-4 with at most a
// one-line error, never 5 (internal error), never a signal, never a hang. Sources (inspect, doctor, quantize
// --dry-run, plan) and a quantized output's quantization_config (verify, verify --against, doctor, inspect, diff).
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace fp4forge {
namespace {

namespace stdfs = std::filesystem;
using Json = nlohmann::ordered_json;
using testutil::kData;
using testutil::q;
using testutil::run_cli;
using testutil::slurp;
using testutil::TempDir;

const std::vector<Json>& wrong_values() {
  static const std::vector<Json> v{Json("x"), Json::array({1, 2}), Json::object({{"a", 1}}), Json(nullptr),
                                   Json(-5), Json(1e300), Json(true)};
  return v;
}

/** `config.json` of `dir` with the value at `path` replaced (objects created along the way). */
void set_path(const stdfs::path& dir, const std::vector<std::string>& path, const Json& value) {
  Json c = Json::parse(slurp(dir / "config.json"));
  Json* at = &c;
  for (std::size_t i = 0; i + 1 < path.size(); ++i) {
    if (!at->is_object()) *at = Json::object();
    at = &(*at)[path[i]];
  }
  if (!at->is_object()) *at = Json::object();
  (*at)[path.back()] = value;
  std::ofstream(dir / "config.json", std::ios::trunc) << c.dump(2);
}

std::string joined(const std::vector<std::string>& p) {
  std::string s;
  for (const auto& x : p) s += (s.empty() ? "" : ".") + x;
  return s;
}

/** Runs every command line of `cmds` (with DIR replaced) and checks the exit code and the error's shape. */
void expect_clean(const std::vector<std::string>& cmds, const stdfs::path& dir, const std::string& what) {
  for (std::string c : cmds) {
    for (std::size_t at; (at = c.find("DIR")) != std::string::npos;) c.replace(at, 3, q(dir));
    std::string out, err;
    const auto t0 = std::chrono::steady_clock::now();
    const int rc = run_cli(c, &out, &err);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_TRUE(rc >= 0 && rc <= 4) << what << ": '" << c << "' exited " << rc << "\n" << err.substr(0, 600);
    EXPECT_EQ(err.find("internal error"), std::string::npos) << what << ": " << c << "\n" << err.substr(0, 600);
    EXPECT_LT(s, 20.0) << what << ": " << c;
  }
}

TEST(WrongTypes, SourceConfigFieldsNeverEndInAnInternalError) {
  TempDir t;
  const stdfs::path src = t.path / "src";
  stdfs::copy(kData + "/llama", src);
  const std::string pristine = slurp(src / "config.json");
  const std::vector<std::vector<std::string>> paths{
      {"num_hidden_layers"}, {"hidden_size"}, {"num_attention_heads"}, {"num_key_value_heads"}, {"head_dim"},
      {"intermediate_size"}, {"max_position_embeddings"}, {"rope_scaling"}, {"rope_theta"}, {"vocab_size"},
      {"architectures"}, {"model_type"}, {"torch_dtype"}, {"dtype"}, {"tie_word_embeddings"}, {"text_config"},
      {"sliding_window"}, {"layer_types"}, {"num_experts"}, {"num_local_experts"}, {"quantization_config"},
      {"rope_scaling", "factor"}, {"rope_scaling", "rope_type"}, {"text_config", "hidden_size"},
      {"vision_config"}, {"mtp_num_hidden_layers"}, {"num_nextn_predict_layers"}};
  const std::vector<std::string> cmds{"inspect DIR --json", "doctor DIR --json", "quantize DIR --dry-run --json",
                                      "plan --seat s=DIR --gpu 0=80GiB --json"};
  for (const auto& p : paths)
    for (const Json& v : wrong_values()) {
      std::ofstream(src / "config.json", std::ios::trunc) << pristine;
      set_path(src, p, v);
      expect_clean(cmds, src, joined(p) + " = " + v.dump());
    }
}

TEST(WrongTypes, QuantizationConfigFieldsNeverEndInAnInternalError) {
  TempDir t;
  const stdfs::path out = t.path / "q";
  std::string o, e;
  ASSERT_EQ(run_cli("quantize " + q(kData + "/llama") + " " + q(out) + " --observer minmax", &o, &e), 0) << e;
  const std::string pristine = slurp(out / "config.json");
  const std::vector<std::vector<std::string>> paths{
      {"quantization_config", "quant_method"},
      {"quantization_config", "format"},
      {"quantization_config", "config_groups"},
      {"quantization_config", "ignore"},
      {"quantization_config", "quantization_status"},
      {"quantization_config", "kv_cache_scheme"},
      {"quantization_config", "config_groups", "group_0"},
      {"quantization_config", "config_groups", "group_0", "targets"},
      {"quantization_config", "config_groups", "group_0", "weights"},
      {"quantization_config", "config_groups", "group_0", "weights", "num_bits"},
      {"quantization_config", "config_groups", "group_0", "weights", "group_size"},
      {"quantization_config", "config_groups", "group_0", "weights", "strategy"},
      {"quantization_config", "config_groups", "group_0", "weights", "type"},
      {"quantization_config", "config_groups", "group_0", "weights", "observer"},
      {"quantization_config", "config_groups", "group_0", "weights", "scale_dtype"},
      {"quantization_config", "config_groups", "group_0", "input_activations"}};
  const std::vector<std::string> cmds{"verify DIR --json", "verify DIR --against " + q(kData + "/llama") + " --json",
                                      "doctor DIR --json", "inspect DIR --json",
                                      "diff DIR " + q(kData + "/llama") + " --allow-class-mismatch --json"};
  for (const auto& p : paths)
    for (const Json& v : wrong_values()) {
      std::ofstream(out / "config.json", std::ios::trunc) << pristine;
      set_path(out, p, v);
      expect_clean(cmds, out, joined(p) + " = " + v.dump());
    }
}

}  // namespace
}  // namespace fp4forge
