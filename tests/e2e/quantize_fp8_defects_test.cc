// FP8 sources beyond the library-written fixtures (docs/fp8-sources.md): fp4forge's own FP8_DYNAMIC output
// requantized, the native and compressed-tensors dialects of the same values giving the same output, every
// corrupt FP8 source refused with exit 3 and no output, and the MTP of an FP8 release spliced back as its
// bf16 expansion.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "e2e/verify_test_util.h"
#include "fp4forge/codec/fp8_dequant.h"
#include "fp4forge/codec/scheme.h"
#include "fp4forge/model/classify.h"
#include "fp4forge/model/fp8_source.h"
#include "fp4forge/model/model_info.h"
#include "fp4forge/util/backup.h"
#include "test_util.h"
#include "unit/doctor_test_util.h"

namespace fp4forge {
namespace {

using namespace fp4forge::testutil;
using vtest::add_tensor;
using vtest::edit_config;
using vtest::open_ok;
using vtest::patch_tensor;
using vtest::rewrite_tensor;
namespace stdfs = std::filesystem;
using Json = nlohmann::ordered_json;

std::string diff_files(const stdfs::path& a, const stdfs::path& b) { return changed_names(file_contents(a), file_contents(b)); }

/** Error and reencode-mismatch findings of a --json report, one kind per line (test_util's failing_findings,
 * over ordered_json: GCC 12 reports a false null dereference when that one is inlined here). */
std::string failing(const std::string& text) {
  const Json j = Json::parse(text, nullptr, false);
  if (j.is_discarded()) return "unparseable --json output";
  std::string s;
  if (auto it = j.find("findings"); it != j.end())
    for (const auto& f : *it) {
      const std::string sev = f.at("severity").get<std::string>(), kind = f.at("kind").get<std::string>();
      if (sev == "error" || kind == "reencode-mismatch") s += kind + ": " + f.at("message").get<std::string>() + "\n";
    }
  return s;
}

/** llama (hidden 128) quantized once to FP8_DYNAMIC: a compressed-tensors float-quantized FP8 source. */
class Fp8Defects : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new TempDir();
    std::string err;
    ASSERT_EQ(run_cli("quantize " + q(kData + "/llama") + " " + q(root_->path / "fp8") + " --scheme fp8-dynamic -j 2",
                      nullptr, &err),
              0)
        << err;
  }
  static void TearDownTestSuite() {
    delete root_;
    root_ = nullptr;
  }
  static stdfs::path fp8() { return root_->path / "fp8"; }
  /** A fresh copy of the FP8 source. */
  stdfs::path copy(const std::string& name) {
    const auto d = tmp_.path / name;
    stdfs::copy(fp8(), d, stdfs::copy_options::recursive);
    return d;
  }
  static TempDir* root_;
  TempDir tmp_;
};
TempDir* Fp8Defects::root_ = nullptr;

TEST_F(Fp8Defects, OwnFp8DynamicOutputRequantizes) {
  std::string out, err;
  const auto dst = tmp_.path / "nvfp4";
  ASSERT_EQ(run_cli("quantize " + q(fp8()) + " " + q(dst) + " -j 2 --json", &out, &err), 0) << err;
  EXPECT_GT(Json::parse(out)["quantized_weights"].get<int>(), 0);
  const int rv = run_cli("verify " + q(dst) + " --against " + q(fp8()) + " --reencode-rows 1000000 --json", &out, &err);
  EXPECT_EQ(failing(out), "");
  EXPECT_EQ(rv, 0) << err;
  EXPECT_EQ(run_cli("doctor " + q(dst) + " --json", &out, &err), 0) << out;
  // No FP8 weight and no source scale left in the output: its F8_E4M3 tensors are NVFP4A16's block scales.
  const Checkpoint ck = open_ok(dst);
  for (const auto& t : ck.tensors()) {
    if (t.info->dtype == DType::F8_E4M3) {
      EXPECT_TRUE(t.name.ends_with(".weight_scale")) << t.name;
    }
  }
}

TEST_F(Fp8Defects, NativeDialectOfTheSameValuesGivesTheSameOutput) {
  // The same codes and scales, written as quant_method fp8 (per-channel `weight_scale_inv`).
  const auto n = copy("native");
  std::vector<std::string> scales;
  {
    const Checkpoint ck = open_ok(n);
    for (const auto& t : ck.tensors())
      if (t.name.ends_with(".weight_scale")) scales.push_back(t.name);
  }
  ASSERT_FALSE(scales.empty());
  for (const auto& s : scales) {
    std::vector<std::byte> bytes;
    st::OutTensor ot;
    {
      const Checkpoint ck = open_ok(n);
      const TensorRef* t = ck.find(s);
      bytes = vtest::bytes_of(ck.data(*t));
      ot = {s + "_inv", t->info->dtype, t->info->shape};
    }
    rewrite_tensor(n, s, std::nullopt);
    add_tensor(n, s.substr(0, s.size() - 6), ot, bytes);
  }
  edit_config(n, [](Json& c) {
    c["quantization_config"] = {{"activation_scheme", "dynamic"}, {"fmt", "e4m3"}, {"quant_method", "fp8"},
                                {"weight_block_size", nullptr}};
  });
  std::string out, err;
  ASSERT_EQ(run_cli("quantize " + q(n) + " " + q(tmp_.path / "a") + " -j 2", nullptr, &err), 0) << err;
  ASSERT_EQ(run_cli("quantize " + q(fp8()) + " " + q(tmp_.path / "b") + " -j 2", nullptr, &err), 0) << err;
  // The same tensors, config and index (the shards' __metadata__ follows each source's shards).
  const Checkpoint a = open_ok(tmp_.path / "a"), b = open_ok(tmp_.path / "b");
  ASSERT_EQ(a.tensors().size(), b.tensors().size());
  for (const auto& t : a.tensors()) {
    const TensorRef* o = b.find(t.name);
    ASSERT_NE(o, nullptr) << t.name;
    EXPECT_EQ(t.info->dtype, o->info->dtype) << t.name;
    EXPECT_EQ(t.info->shape, o->info->shape) << t.name;
    EXPECT_TRUE(std::ranges::equal(a.data(t), b.data(*o))) << t.name;
  }
  EXPECT_EQ(slurp(tmp_.path / "a/config.json"), slurp(tmp_.path / "b/config.json"));
  EXPECT_EQ(slurp(tmp_.path / "a/model.safetensors.index.json"), slurp(tmp_.path / "b/model.safetensors.index.json"));
  ASSERT_EQ(run_cli("doctor " + q(n) + " --json", &out, &err), 0) << out;
  EXPECT_NE(out.find("\"fp8-source\""), std::string::npos) << out;
}

struct Corrupt {
  const char* name;
  std::function<void(const stdfs::path&)> edit;
  const char* says;
  std::string extra = "";
};

TEST_F(Fp8Defects, CorruptSourcesAreRefusedWithNoOutput) {
  const std::string W = "model.layers.0.mlp.down_proj.weight";
  const std::byte nan[1] = {std::byte{0x7F}};
  const std::vector<Corrupt> cases{
      {"scale missing", [&](const stdfs::path& d) { rewrite_tensor(d, W + "_scale", std::nullopt); }, "has no scale"},
      {"scale shape", [&](const stdfs::path& d) {
         rewrite_tensor(d, W + "_scale", std::make_pair(st::OutTensor{W + "_scale", DType::BF16, {3, 1}},
                                                          std::vector<std::byte>(6, std::byte{0x3F})));
       }, "[N, 1] per channel"},
      {"NaN code, quantized", [&](const stdfs::path& d) { patch_tensor(d, W, 5, nan); }, "dequantizes to NaN"},
      {"NaN code, kept", [&](const stdfs::path& d) { patch_tensor(d, W, 5, nan); }, "dequantizes to NaN",
       " --ignore model.layers.0.mlp.down_proj"},
      // Issue 30: a weight passed through (its own FP8 form, never re-encoded) is scanned all the same.
      {"NaN code, passed through", [&](const stdfs::path& d) { patch_tensor(d, W, 5, nan); }, "dequantizes to NaN",
       " --scheme fp8-dynamic"},
      {"orphan scale", [&](const stdfs::path& d) {
         add_tensor(d, "model.norm.weight", {"model.norm.weight_scale", DType::F32, {1}}, std::vector<std::byte>(4));
       }, "belongs to no FP8 weight"},
      {"already NVFP4", [&](const stdfs::path& d) {
         edit_config(d, [](Json& c) { c["quantization_config"]["config_groups"]["group_0"]["format"] = "nvfp4-pack-quantized"; });
       }, "already quantized"},
      {"INT4", [&](const stdfs::path& d) {
         edit_config(d, [](Json& c) {
           auto& g = c["quantization_config"]["config_groups"]["group_0"];
           g["weights"]["type"] = "int";
           g["weights"]["num_bits"] = 4;
           g["format"] = "pack-quantized";
         });
       }, "INT4"},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const auto& c = cases[i];
    const auto src = copy(fmt::format("c{}", i));
    c.edit(src);
    const auto dst = tmp_.path / fmt::format("out{}", i);
    std::string out, err;
    const int rc = run_cli("quantize " + q(src) + " " + q(dst) + " -j 2" + c.extra, &out, &err);
    EXPECT_EQ(rc, 3) << c.name << ": " << err;
    EXPECT_NE(err.find(c.says), std::string::npos) << c.name << ": " << err;
    EXPECT_FALSE(stdfs::exists(dst)) << c.name;
    for (const auto& e : stdfs::directory_iterator(tmp_.path))
      EXPECT_EQ(e.path().filename().string().find("fp4forge-staging"), std::string::npos) << c.name;
    // Issue 27 #8: what quantize refuses for its values, verify and doctor do not call consistent.
    if (std::string_view(c.says) == "dequantizes to NaN") {
      EXPECT_EQ(run_cli("verify " + q(src) + " --json", &out, &err), 1) << c.name << out;
      EXPECT_NE(out.find("NaN"), std::string::npos) << out;
      EXPECT_EQ(run_cli("doctor " + q(src) + " --json", &out, &err), 1) << c.name << out;
      EXPECT_NE(out.find("NaN"), std::string::npos) << out;
    }
  }
}

// Issue 27 #8: verify and doctor called a native, ModelOpt or per-tensor FP8 release with a NaN code "consistent"
// (exit 0) while quantize refused it. They now run the same value scan.
TEST_F(Fp8Defects, NanCodesInEveryDialectAreErrorsForVerifyAndDoctor) {
  const std::byte nan[1] = {std::byte{0x7F}};
  for (const char* dialect : {"native-qwen3", "modelopt-fp8", "ct-fp8-tensor"}) {
    const auto d = tmp_.path / (std::string("nan-") + dialect);
    stdfs::copy(kData + "/fp8/" + dialect, d, stdfs::copy_options::recursive);
    std::string out, err;
    ASSERT_EQ(run_cli("verify " + q(d) + " --json", &out, &err), 0) << dialect << out;  // clean first
    patch_tensor(d, "model.layers.0.mlp.down_proj.weight", 5, nan);
    EXPECT_EQ(run_cli("verify " + q(d) + " --json", &out, &err), 1) << dialect << out;
    EXPECT_NE(out.find("\"fp8-source-invalid\""), std::string::npos) << dialect << out;
    EXPECT_NE(out.find("dequantizes to NaN"), std::string::npos) << dialect << out;
    EXPECT_EQ(run_cli("doctor " + q(d) + " --json", &out, &err), 1) << dialect << out;
    EXPECT_EQ(run_cli("quantize " + q(d) + " " + q(tmp_.path / (std::string("q-") + dialect)), &out, &err), 3)
        << dialect << err;
  }
}

// Issue 27 #13: doctor was silent on FP8 tensors whose quantization_config a re-save dropped, and on an
// hf_quant_config.json that claims FP8 over 16-bit weights.
TEST_F(Fp8Defects, DoctorNamesFp8WithoutConfigAndAStaleFp8Claim) {
  const auto d = tmp_.path / "noconfig";
  stdfs::copy(kData + "/fp8/native-qwen3", d, stdfs::copy_options::recursive);
  edit_config(d, [](Json& c) { c.erase("quantization_config"); });
  std::string out, err;
  EXPECT_EQ(run_cli("doctor " + q(d) + " --json", &out, &err), 1) << out;
  EXPECT_NE(out.find("\"fp8-without-config\""), std::string::npos) << out;
  const auto b = tmp_.path / "stale-claim";
  stdfs::copy(kData + "/llama", b, stdfs::copy_options::recursive);
  std::ofstream(b / "hf_quant_config.json") << R"({"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8"}})";
  EXPECT_EQ(run_cli("doctor " + q(b) + " --json", &out, &err), 1) << out;
  EXPECT_NE(out.find("\"fp8-claim-without-fp8-weights\""), std::string::npos) << out;
  // An NVFP4 output whose quantization_config was lost is no FP8 release: its FP8 tensors are group scales
  // (issue 55 tryout J: fp8-without-config beside quant-config-missing).
  const auto n = tmp_.path / "nvfp4-noconfig";
  ASSERT_EQ(run_cli("quantize " + q(kData + "/llama") + " " + q(n) + " --no-progress", &out, &err), 0) << err;
  edit_config(n, [](Json& c) { c.erase("quantization_config"); });
  EXPECT_EQ(run_cli("doctor " + q(n) + " --json", &out, &err), 1) << out;
  EXPECT_NE(out.find("\"quant-config-missing\""), std::string::npos) << out;
  EXPECT_EQ(out.find("fp8-without-config"), std::string::npos) << out;
  // The releases themselves stay clean of both.
  for (const char* ok : {"native-qwen3", "modelopt-fp8"}) {
    run_cli("doctor " + q(kData + "/fp8/" + ok) + " --json", &out, &err);
    EXPECT_EQ(out.find("fp8-without-config"), std::string::npos) << ok << out;
    EXPECT_EQ(out.find("fp8-claim-without"), std::string::npos) << ok << out;
  }
}

TEST(Fp8Selftest, SelftestChecksTheExpansionOnEveryPath) {
  std::string out, err;
  ASSERT_EQ(run_cli("selftest --json", &out, &err), 0) << err;
  const Json j = Json::parse(out);
  EXPECT_TRUE(j.at("ok").get<bool>());
  const auto paths = fp8::dequant_paths();
  ASSERT_EQ(j.at("fp8_expansion").size(), paths.size());
  for (std::size_t i = 0; i < paths.size(); ++i) {
    EXPECT_EQ(j["fp8_expansion"][i].at("path").get<std::string>(), std::string(paths[i]));
    EXPECT_EQ(j["fp8_expansion"][i].at("mismatches").get<int>(), 0);
    EXPECT_GT(j["fp8_expansion"][i].at("elements").get<int>(), 0);
  }
  ASSERT_EQ(run_cli("selftest", &out, &err), 0) << err;
  EXPECT_NE(out.find("FP8 source expansion: "), std::string::npos) << out;
}

TEST(Fp8Mtp, SplicedFromAnFp8ReleaseAsItsExpansion) {
  // An FP8 release of deepseek_v3 whose MTP layer (model.layers.2) holds FP8 weights (native dialect,
  // per-channel `weight_scale_inv`, the codes and scales of compressed-tensors' FP8_DYNAMIC math).
  doctor_test::Fixture release("deepseek_v3");
  const auto cfg = nlohmann::json::parse(slurp(release.path("config.json")));
  const std::string prefix = "model.layers." + std::to_string(cfg.at("num_hidden_layers").get<int>()) + ".";
  std::size_t converted = 0;
  release.rewrite_shard(release.shard_of(prefix + "eh_proj.weight"), [&](doctor_test::Fixture::Tensors& ts) {
    doctor_test::Fixture::Tensors out;
    for (auto& [name, t] : ts) {
      const bool linear = name.rfind(prefix, 0) == 0 && name.ends_with(".weight") && t.shape.size() == 2 &&
                          t.dtype == "BF16" && name.find("norm") == std::string::npos &&
                          !name.ends_with("mlp.gate.weight") && name.find("embed") == std::string::npos;
      if (!linear) {
        out[name] = t;
        continue;
      }
      const nvfp4::WeightView v{reinterpret_cast<const std::byte*>(t.bytes.data()), DType::BF16, t.shape[0], t.shape[1]};
      auto enc = encode_linear(QuantScheme::FP8_DYNAMIC, v, name);
      ASSERT_TRUE(enc.ok()) << enc.error().message;
      const auto& w = (*enc)[0];
      const auto& s = (*enc)[1];
      out[name] = {"F8_E4M3", w.shape, std::string(reinterpret_cast<const char*>(w.bytes.data()), w.bytes.size())};
      out[name + "_scale_inv"] = {"BF16", s.shape, std::string(reinterpret_cast<const char*>(s.bytes.data()), s.bytes.size())};
      ++converted;
    }
    ts = std::move(out);
  });
  ASSERT_GT(converted, 3u);
  release.edit_config([](nlohmann::ordered_json& c) {
    c["quantization_config"] = {{"activation_scheme", "dynamic"}, {"fmt", "e4m3"}, {"quant_method", "fp8"}};
  });
  doctor_test::Fixture stripped("deepseek_v3");
  stripped.remove_tensors(prefix);
  TempDir tmp;
  std::string out, err;
  const auto full = tmp.path / "full", t = tmp.path / "t", m = tmp.path / "m";
  ASSERT_EQ(run_cli("quantize " + q(release.dir()) + " " + q(full) + " -j 2", nullptr, &err), 0) << err;
  ASSERT_EQ(run_cli("quantize " + q(stripped.dir()) + " " + q(t) + " -j 2", nullptr, &err), 0) << err;
  ASSERT_EQ(run_cli("doctor " + q(t) + " --fix --mtp-from " + q(release.dir()) + " --json", &out, &err), 0) << out << err;
  EXPECT_EQ(diff_files(t, full), "") << "doctor --fix --mtp-from an FP8 release";
  ASSERT_EQ(run_cli("quantize " + q(stripped.dir()) + " " + q(m) + " -j 2 --mtp-from " + q(release.dir()), nullptr, &err), 0)
      << err;
  EXPECT_EQ(diff_files(m, full), "") << "quantize --mtp-from an FP8 release";
  // The spliced MTP weights are BF16 (the expansion), with no scale beside them; verify against the release.
  const Checkpoint ck = open_ok(t);
  for (const auto& tr : ck.tensors()) {
    if (tr.name.rfind(prefix, 0) != 0) continue;
    EXPECT_NE(tr.info->dtype, DType::F8_E4M3) << tr.name;
    EXPECT_FALSE(tr.name.ends_with("_scale_inv")) << tr.name;
  }
  const int rv = run_cli("verify " + q(t) + " --against " + q(release.dir()) + " --json", &out, &err);
  EXPECT_EQ(failing(out), "");
  EXPECT_EQ(rv, 0) << err;
}

}  // namespace
}  // namespace fp4forge
