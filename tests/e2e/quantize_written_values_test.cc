// Issue 53, class 2 (round 4: every path that writes values scans them), one table per rule:
//  - what quantize refuses on a source, verify and doctor report (exit 1): a packed FP4 block whose expansion is
//    infinite under the MXFP4 / NVFP4 cast (R4-B3), a dropped packed FP4 scale and a payload stored in a shape beside
//    the experts that quantize cannot read (R4-B7), zero and negative FP8 source scales in every dialect (R4-B11);
//  - what quantize writes, verify accepts: a mixed-dtype source (one F16 or F32 Linear among BF16) under every
//    scheme with float scales (R4-B10), and the searched observer's refusal of weights it cannot quantize, named with
//    the fix that works (R4-B21).
// Each row reproduces a case of the round-4 adversarial report (docs/reliability.md) with the C++ editors of
// e2e/verify_test_util.h.
#include <cstddef>
#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "e2e/verify_test_util.h"
#include "test_util.h"

namespace fp4forge {
namespace {

using namespace fp4forge::testutil;
namespace stdfs = std::filesystem;
using vtest::patch_tensor;
using vtest::relabel_tensor;
using vtest::rewrite_tensor;
using vtest::write_values;

const std::string kFp4W1 = "model.layers.0.ffn.experts.0.w1.weight";

/** The finding kinds of a --json report with the given severity. */
std::set<std::string> kinds_of(const std::string& json_text, const std::string& severity) {
  std::set<std::string> k;
  const auto j = nlohmann::json::parse(json_text, nullptr, false);
  if (j.is_discarded() || !j.contains("findings")) return k;
  for (const auto& f : j["findings"])
    if (str_field(f, "severity") == severity) k.insert(str_field(f, "kind"));
  return k;
}

/** No staging folder or DST beside `dst`. */
void expect_nothing_written(const stdfs::path& dst, const std::string& what) {
  EXPECT_FALSE(stdfs::exists(dst)) << what;
  for (const auto& e : stdfs::directory_iterator(dst.parent_path()))
    EXPECT_EQ(e.path().filename().string().find("fp4forge-staging"), std::string::npos) << what;
}

struct Refused {
  const char* name;
  const char* fixture;  ///< under tests/data
  std::function<void(const stdfs::path&)> edit;
  std::vector<std::string> quantize_flags;  ///< each a run: every one refused
  const char* says;                         ///< in quantize's error and in verify's / doctor's finding
  const char* verify_kind;                  ///< the error finding verify (and doctor) report for the source
};

// Rule 1: what quantize refuses on a source, verify and doctor report (exit 1), and quantize writes nothing.
TEST(WrittenValues, WhatQuantizeRefusesVerifyAndDoctorReport) {
  const std::byte fe[1] = {std::byte{0xFE}}, fd[1] = {std::byte{0xFD}};
  const std::string gate = "model.layers.0.mlp.gate_proj.weight";
  const std::vector<Refused> cases{
      // R4-B3: E8M0 2^127 / 2^126 on a block whose codes reach +-6: the expansion is infinite; the lossless MXFP4A16
      // cast copied it (exit 0), now scanned like every other path.
      {"e8m0 0xFE, mxfp4a16 cast", "fp8/dsv4-fp8-fp4", [&](const stdfs::path& d) { patch_tensor(d, kFp4W1 + "_scale_inv", 0, fe); },
       {"--scheme mxfp4a16", "", "--requantize-fp8", "--scheme fp8-block"}, "dequantizes to NaN or infinity",
       "fp8-source-invalid"},
      {"e8m0 0xFD, mxfp4a16 cast", "fp8/dsv4-fp8-fp4", [&](const stdfs::path& d) { patch_tensor(d, kFp4W1 + "_scale_inv", 0, fd); },
       {"--scheme mxfp4a16", ""}, "dequantizes to NaN or infinity", "fp8-source-invalid"},
      // R4-B7: the packed FP4 payload without its scale (then an I8 tensor), and one stored 3-D beside per-expert 2-D
      // experts: doctor and verify called both "consistent and finite".
      {"packed FP4 scale dropped", "fp8/dsv4-fp8-fp4", [&](const stdfs::path& d) { rewrite_tensor(d, kFp4W1 + "_scale_inv", std::nullopt); },
       {"", "--scheme mxfp4a16"}, "has no scale", "fp8-source-invalid"},
      {"packed FP4 payload 3-D", "fp8/dsv4-fp8-fp4", [&](const stdfs::path& d) { relabel_tensor(d, kFp4W1, {1, 256, 192}); },
       {"", "--scheme mxfp4a16"}, "not a storage form fp4forge reads as experts", "fp8-source-invalid"},
      // R4-B11: a zero or negative FP8 scale: passed through by fp8-block (its own verify then said scale-invalid),
      // silent in verify of the native source. One rule: refused by quantize on every path, an error for verify and
      // doctor of every dialect.
      {"native scale zero", "fp8/native-qwen3", [&](const stdfs::path& d) { write_values(d, gate + "_scale_inv", DType::F32, {0}); },
       {"--scheme fp8-block", "", "--requantize-fp8"}, "is zero", "fp8-source-invalid"},
      {"native scale negative", "fp8/native-qwen3", [&](const stdfs::path& d) { write_values(d, gate + "_scale_inv", DType::F32, {-0.5}); },
       {"--scheme fp8-block", ""}, "is negative", "fp8-source-invalid"},
      {"modelopt scale zero", "fp8/modelopt-fp8", [&](const stdfs::path& d) { write_values(d, gate + "_scale", DType::F32, {0}); },
       {"", "--scheme fp8-dynamic"}, "is zero", "fp8-source-invalid"},
      {"compressed-tensors per-tensor scale negative", "fp8/ct-fp8-tensor",
       [&](const stdfs::path& d) { write_values(d, gate + "_scale", DType::F32, {-1}); }, {""}, "is negative",
       "fp8-source-invalid"},
      // The compressed-tensors per-block dialect is also an FP8_BLOCK checkpoint: verify's value check says it.
      {"compressed-tensors block scale zero", "fp8/ct-fp8-block",
       [&](const stdfs::path& d) { write_values(d, gate + "_scale", DType::BF16, {0}); }, {"", "--scheme fp8-block"},
       "is zero", "scale-invalid"},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Refused& c = cases[i];
    SCOPED_TRACE(c.name);
    TempDir tmp;
    const stdfs::path src = tmp.path / "src";
    stdfs::copy(kData + "/" + c.fixture, src, stdfs::copy_options::recursive);
    std::string out, err;
    run_cli("verify " + q(src) + " --json", &out, &err);
    ASSERT_FALSE(kinds_of(out, "error").count(c.verify_kind)) << "the fixture has no " << c.verify_kind << " first: " << out;
    c.edit(src);
    for (const std::string& flags : c.quantize_flags) {
      const stdfs::path dst = tmp.path / fmt::format("out{}", &flags - c.quantize_flags.data());
      EXPECT_EQ(run_cli("quantize " + q(src) + " " + q(dst) + " -j 2 " + flags, &out, &err), 3) << flags << ": " << err;
      EXPECT_NE(err.find(c.says), std::string::npos) << flags << ": " << err;
      expect_nothing_written(dst, flags);
    }
    EXPECT_EQ(run_cli("verify " + q(src) + " --json", &out, &err), 1) << out;
    EXPECT_TRUE(kinds_of(out, "error").count(c.verify_kind)) << out;
    EXPECT_EQ(run_cli("doctor " + q(src) + " --json", &out, &err), 1) << out;
    EXPECT_TRUE(kinds_of(out, "error").count(c.verify_kind)) << out;
    // The text reports name it too, never "consistent and finite".
    run_cli("verify " + q(src), &out, &err);
    EXPECT_EQ(out.find("consistent and finite"), std::string::npos) << out;
  }
}

// Rule 2 (R4-B10): a source with one F16 or F32 Linear among BF16 ones. compressed-tensors writes each module's scale
// in its own weight's dtype (initialize_qparams: scale_dtype = observed_dtype; docs/schemes.md "Scale dtype"), as
// quantize does: verify --against accepts the output (it failed with scale-dtype-mismatch), verify alone warns that it
// cannot tell, doctor passes.
TEST(WrittenValues, AMixedDtypeSourceQuantizesToWhatVerifyAccepts) {
  const std::string down = "model.layers.0.mlp.down_proj.weight";
  for (const DType dt : {DType::F16, DType::F32}) {
    TempDir tmp;
    const stdfs::path src = tmp.path / "src";
    stdfs::copy(kData + "/llama", src, stdfs::copy_options::recursive);
    write_values(src, down, dt, {0.01, -0.02, 0.03, 0.015});
    for (const char* flags : {"--scheme w4a16", "--scheme w4a16 --observer memoryless-mse", "--scheme fp8-dynamic",
                              "--scheme fp8-block", "", "--scheme mxfp4a16"}) {
      SCOPED_TRACE(fmt::format("{} {}", dtype_name(dt), flags));
      const stdfs::path dst = tmp.path / fmt::format("q{}", std::string(flags).size());
      std::string out, err;
      ASSERT_EQ(run_cli("quantize " + q(src) + " " + q(dst) + " -j 2 " + flags, &out, &err), 0) << err;
      EXPECT_EQ(run_cli("verify " + q(dst) + " --against " + q(src) + " --json", &out, &err), 0) << failing_findings(out);
      EXPECT_FALSE(kinds_of(out, "warning").count("scale-dtype-mismatch")) << out;
      EXPECT_EQ(run_cli("verify " + q(dst) + " --json", &out, &err), 0) << failing_findings(out);
      EXPECT_EQ(run_cli("doctor " + q(dst) + " --json", &out, &err), 0) << failing_findings(out);
      stdfs::remove_all(dst);
    }
  }
}

// R4-B10's other side: a scale re-saved in another dtype than its weight's is still caught, exactly with the source
// (an error) and as a warning without it.
TEST(WrittenValues, AScaleInAnotherDtypeThanItsWeightIsAnErrorAgainstTheSource) {
  TempDir tmp;
  const stdfs::path dst = tmp.path / "q";
  std::string out, err;
  ASSERT_EQ(run_cli("quantize " + q(kData + "/llama") + " " + q(dst) + " --scheme w4a16 -j 2", &out, &err), 0) << err;
  const std::string scale = "model.layers.1.mlp.up_proj.weight_scale";
  {
    std::vector<double> v;
    const Checkpoint c = vtest::open_ok(dst);
    const TensorRef* t = c.find(scale);
    ASSERT_NE(t, nullptr);
    ASSERT_EQ(t->info->dtype, DType::BF16);
    for (std::uint64_t i = 0; i < t->info->numel(); ++i) v.push_back(half::bf16_to_float(reinterpret_cast<const std::uint16_t*>(c.data(*t).data())[i]));
    write_values(dst, scale, DType::F16, v);
  }
  EXPECT_EQ(run_cli("verify " + q(dst) + " --against " + q(kData + "/llama") + " --json", &out, &err), 1) << out;
  EXPECT_TRUE(kinds_of(out, "error").count("scale-dtype-mismatch")) << out;
  EXPECT_EQ(run_cli("verify " + q(dst) + " --json", &out, &err), 0) << out;
  EXPECT_TRUE(kinds_of(out, "warning").count("scale-dtype-mismatch")) << out;
}

// R4-B21: finite weights above ~1.88e38 overflow the mse observer's expanded range (max|w| x 1.8): upstream's searched
// maximum is infinite there too. Refused naming the tensor, the element, the value and the fix, never "global scale 0";
// the fix works and its output verifies.
TEST(WrittenValues, TheSearchedObserverRefusesWhatItCannotQuantizeNamingTheFix) {
  const std::string down = "model.layers.0.mlp.down_proj.weight";
  for (const DType dt : {DType::BF16, DType::F32}) {
    for (const char* scheme : {"nvfp4a16", "w4a16"}) {
      SCOPED_TRACE(fmt::format("{} {}", dtype_name(dt), scheme));
      TempDir tmp;
      const stdfs::path src = tmp.path / "src";
      stdfs::copy(kData + "/llama", src, stdfs::copy_options::recursive);
      write_values(src, down, dt, {0.01, 2e38, -0.02});
      std::string out, err;
      const stdfs::path dst = tmp.path / "mse";
      const int rc = run_cli("quantize " + q(src) + " " + q(dst) + " -j 2 --observer mse --scheme " + scheme, &out, &err);
      if (std::string(scheme) == "w4a16" && rc == 2) continue;  // a scheme without the searched observer
      EXPECT_EQ(rc, 3) << err;
      EXPECT_NE(err.find("'" + down + "'"), std::string::npos) << err;
      EXPECT_NE(err.find("element [0, 1] = "), std::string::npos) << err;
      EXPECT_NE(err.find("--observer minmax"), std::string::npos) << err;
      EXPECT_EQ(err.find("global scale 0 is invalid"), std::string::npos) << err;
      expect_nothing_written(dst, "mse");
      const stdfs::path mm = tmp.path / "minmax";
      ASSERT_EQ(run_cli("quantize " + q(src) + " " + q(mm) + " -j 2 --observer minmax --scheme " + scheme, &out, &err), 0)
          << err;
      EXPECT_EQ(run_cli("verify " + q(mm) + " --against " + q(src) + " --json", &out, &err), 0) << failing_findings(out);
    }
  }
}

}  // namespace
}  // namespace fp4forge
