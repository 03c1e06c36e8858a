// The MTP splice as a library call (quantize/mtp_splice.h), and doctor's shape checks of MTP layers: the report,
// the dry run, the ignore entries (equal to what quantize's planner lists for the MTP of the original), and
// the refusals' error codes; for each MTP form, a damaged MTP tensor is a config-shape-mismatch naming it.
#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fp4forge/doctor/doctor.h"
#include "fp4forge/quantize/mtp_splice.h"
#include "fp4forge/quantize/plan.h"
#include "fp4forge/quantize/run.h"
#include "fp4forge/safetensors/checkpoint.h"
#include "unit/doctor_test_util.h"

namespace {

using doctor_test::Fixture;
using doctor_test::Json;
namespace dr = fp4forge::doctor;
namespace stdfs = std::filesystem;

std::string data(const std::string& fx) { return std::string(FP4FORGE_TEST_DATA) + "/" + fx; }

/** The ignore entries quantize writes for the original fixture that name MTP modules. */
std::vector<std::string> planned_mtp_ignore(const std::string& fx, const std::string& prefix) {
  auto ck = fp4forge::Checkpoint::open(data(fx));
  EXPECT_TRUE(ck.ok());
  auto plan = fp4forge::quant::make_plan(*ck, {});
  EXPECT_TRUE(plan.ok()) << (plan.ok() ? "" : plan.error().describe());
  std::vector<std::string> out;
  for (const auto& e : plan->ignore)
    if (e.rfind(prefix, 0) == 0) out.push_back(e);
  return out;
}

fp4forge::Status quantize(const stdfs::path& src, const stdfs::path& dst) {
  fp4forge::quant::QuantizeParams p;
  p.src = src;
  p.dst = dst;
  p.run.jobs = 1;
  auto r = fp4forge::quant::quantize(p);
  if (!r) return r.error();
  return {};
}

TEST(MtpSplice, ReportDryRunAndIgnoreEntriesAsQuantizeWritesThem) {
  for (const auto& [fx, prefix] : std::vector<std::pair<std::string, std::string>>{
           {"qwen3_5-moe-mm", "mtp."}, {"qwen3_5-moe-mm-mtp2d", "mtp."}, {"qwen3_next", "mtp."},
           {"deepseek_v3", "model.layers.2."}}) {
    SCOPED_TRACE(fx);
    Fixture stripped(fx);
    stripped.remove_tensors(prefix);
    const auto q = stripped.dir().parent_path() / "q";
    ASSERT_TRUE(quantize(stripped.dir(), q).ok());
    fp4forge::quant::MtpSpliceOptions dry;
    dry.dry_run = true;
    auto d = fp4forge::quant::splice_mtp(q, data(fx), dry);
    ASSERT_TRUE(d.ok()) << d.error().describe();
    const auto before = doctor_test::read(q / "config.json");
    auto r = fp4forge::quant::splice_mtp(q, data(fx));
    ASSERT_TRUE(r.ok()) << r.error().describe();
    EXPECT_EQ(r->status, "spliced");
    EXPECT_EQ(r->shard, fp4forge::quant::kMtpShardName);
    EXPECT_EQ(r->layers, 1);
    EXPECT_EQ(r->form, prefix == "mtp." ? "mtp.*" : "extra decoder layers");
    EXPECT_GT(r->tensors, 0u);
    EXPECT_GT(r->bytes, 0u);
    EXPECT_EQ(r->shard_bytes, stdfs::file_size(q / fp4forge::quant::kMtpShardName));
    // quantize's planner decides the entries: equal to what quantizing the original lists for MTP.
    EXPECT_EQ(r->ignore_added, planned_mtp_ignore(fx, prefix));
    EXPECT_FALSE(r->ignore_added.empty());
    if (fx == "qwen3_5-moe-mm") {  // fused 3-D MTP experts: one FusedMoE module, the block key
      EXPECT_NE(std::find(r->ignore_added.begin(), r->ignore_added.end(), "mtp.layers.0.mlp.experts"),
                r->ignore_added.end());
    }
    // The dry run announced exactly this, and wrote nothing.
    EXPECT_EQ(d->ignore_added, r->ignore_added);
    EXPECT_EQ(d->tensors, r->tensors);
    ASSERT_EQ(d->changes.size(), r->changes.size());
    for (std::size_t i = 0; i < d->changes.size(); ++i) {
      EXPECT_EQ(d->changes[i].file, r->changes[i].file);
      EXPECT_EQ(d->changes[i].diff, r->changes[i].diff);
      EXPECT_FALSE(d->changes[i].written);
      EXPECT_TRUE(r->changes[i].written);
    }
    EXPECT_EQ(r->changes.size(), 3u);  // config.json, the shard, the index
    EXPECT_NE(doctor_test::read(q / "config.json"), before);
    const Json j = fp4forge::quant::to_json(*r);
    for (const char* k : {"target", "source", "family", "form", "layers", "status", "dry_run", "shard", "tensors",
                          "bytes", "shard_bytes", "shard_adopted", "dtypes", "ignore_added", "index_created",
                          "backups", "files", "warnings", "message"})
      EXPECT_TRUE(j.contains(k)) << k;
    EXPECT_EQ(j["backups"].size(), 2u);
    // Again: nothing to do.
    auto again = fp4forge::quant::splice_mtp(q, data(fx));
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->status, "already-present");
    EXPECT_TRUE(again->changes.empty());
  }
}

// QuantizeParams::mtp_from (issue 31 #2): the library call does what `quantize --mtp-from` did through the CLI's
// glue: the splice is proven against SRC first (a refusal writes nothing), the dry run reports it, and the run
// commits DST with the MTP spliced, the same bytes as quantizing then splicing.
TEST(MtpSplice, QuantizeParamsMtpFrom) {
  Fixture stripped("qwen3_5-moe-mm");
  stripped.remove_tensors("mtp.");
  const auto root = stripped.dir().parent_path();
  fp4forge::quant::QuantizeParams p;
  p.src = stripped.dir();
  p.dst = root / "q";
  p.run.jobs = 1;
  p.mtp_from = data("qwen3_5-moe-mm");
  p.dry_run = true;
  auto dry = fp4forge::quant::quantize(p);
  ASSERT_TRUE(dry.ok()) << dry.error().describe();
  ASSERT_TRUE(dry->mtp_splice.has_value());
  EXPECT_TRUE(dry->mtp_splice->dry_run);
  EXPECT_FALSE(stdfs::exists(p.dst));
  EXPECT_TRUE(fp4forge::quant::to_json(*dry).contains("mtp_splice"));
  p.dry_run = false;
  auto r = fp4forge::quant::quantize(p);
  ASSERT_TRUE(r.ok()) << r.error().describe();
  ASSERT_TRUE(r->mtp_splice.has_value());
  EXPECT_EQ(r->mtp_splice->status, "spliced");
  EXPECT_EQ(r->mtp_splice->target, p.dst.string());  // DST, not the staging folder it was done in
  EXPECT_NE(fp4forge::quant::to_text(*r).find("spliced"), std::string::npos);
  // The same as quantizing, then splicing.
  const auto q2 = root / "q2";
  ASSERT_TRUE(quantize(stripped.dir(), q2).ok());
  ASSERT_TRUE(fp4forge::quant::splice_mtp(q2, data("qwen3_5-moe-mm")).ok());
  for (const char* f : {"config.json", "model.safetensors.index.json", "model-mtp.safetensors"})
    EXPECT_EQ(doctor_test::read(p.dst / f), doctor_test::read(q2 / f)) << f;
  // A source the splice refuses (a different model): refused before anything is written.
  p.dst = root / "q3";
  p.mtp_from = data("qwen3_next");
  auto bad = fp4forge::quant::quantize(p);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, fp4forge::Errc::BAD_INPUT) << bad.error().describe();
  EXPECT_FALSE(stdfs::exists(p.dst));
}

TEST(MtpSplice, CompletesMissingIgnoreEntriesOfPresentTensors) {
  // The MTP tensors are there but the ignore list lost their entries (an interrupted or hand-edited splice).
  Fixture stripped("qwen3_5-moe-mm-mtp2d");
  stripped.remove_tensors("mtp.");
  const auto q = stripped.dir().parent_path() / "q";
  ASSERT_TRUE(quantize(stripped.dir(), q).ok());
  ASSERT_TRUE(fp4forge::quant::splice_mtp(q, data("qwen3_5-moe-mm-mtp2d")).ok());
  const std::string spliced = doctor_test::read(q / "config.json");
  Json cfg = Json::parse(spliced);
  Json kept = Json::array();
  for (const auto& e : cfg["quantization_config"]["ignore"])
    if (e.get<std::string>().rfind("mtp.", 0) != 0) kept.push_back(e);
  cfg["quantization_config"]["ignore"] = kept;
  doctor_test::write(q / "config.json", cfg.dump(2) + "\n");
  auto r = fp4forge::quant::splice_mtp(q, data("qwen3_5-moe-mm-mtp2d"));
  ASSERT_TRUE(r.ok()) << r.error().describe();
  EXPECT_EQ(r->status, "completed");
  EXPECT_EQ(r->tensors, 0u);
  EXPECT_FALSE(r->ignore_added.empty());
  ASSERT_EQ(r->changes.size(), 1u);
  EXPECT_EQ(r->changes[0].file, "config.json");
  EXPECT_EQ(doctor_test::read(q / "config.json"), spliced);
}

TEST(MtpSplice, RefusalCodes) {
  Fixture t("qwen3_5-moe-mm-mtp2d");
  t.remove_tensors("mtp.");
  auto code = [&](const stdfs::path& target, const stdfs::path& src) {
    auto r = fp4forge::quant::splice_mtp(target, src);
    EXPECT_FALSE(r.ok());
    return r.ok() ? fp4forge::Errc::INTERNAL : r.error().code;
  };
  EXPECT_EQ(code(t.dir(), t.dir()), fp4forge::Errc::USAGE);
  EXPECT_EQ(code(t.dir(), data("deepseek_v3")), fp4forge::Errc::BAD_INPUT);
  EXPECT_EQ(code(t.dir(), t.dir().parent_path() / "absent"), fp4forge::Errc::IO);  // cannot open the folder
  Fixture none("qwen3_5-moe-mm-mtp2d");
  none.edit_config([](Json& c) { c["text_config"]["mtp_num_hidden_layers"] = 0; });
  EXPECT_EQ(code(none.dir(), data("qwen3_5-moe-mm-mtp2d")), fp4forge::Errc::BAD_INPUT);
  // SRC declares two MTP layers but holds one: incomplete (its config also disagrees).
  Fixture two("qwen3_5-moe-mm-mtp2d");
  two.remove_tensors("mtp.");
  two.edit_config([](Json& c) { c["text_config"]["mtp_num_hidden_layers"] = 2; });
  Fixture src2("qwen3_5-moe-mm-mtp2d");
  src2.edit_config([](Json& c) { c["text_config"]["mtp_num_hidden_layers"] = 2; });
  auto r = fp4forge::quant::splice_mtp(two.dir(), src2.dir());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("no tensors of MTP layer 1"), std::string::npos) << r.error().message;
  // A quantized MTP in SRC is refused (fp4forge splices unquantized MTP only).
  Fixture qsrc("qwen3_5-moe-mm-mtp2d");
  qsrc.rewrite_shard("model-mtp.safetensors", [](Fixture::Tensors& ts) {
    ts["mtp.fc.weight_scale"] = Fixture::Tensor{"F8_E4M3", {64, 8}, {}};
  });
  r = fp4forge::quant::splice_mtp(t.dir(), qsrc.dir());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("unquantized MTP"), std::string::npos) << r.error().message;
}

// doctor's shape rules reach every MTP layer: a damaged MTP tensor is a config-shape-mismatch (or, for fused
// experts, expert-layout) naming it.
TEST(MtpSplice, DoctorChecksTheShapesOfMtpLayers) {
  struct Case {
    const char* fixture;
    const char* tensor;
    std::vector<std::uint64_t> shape;
    const char* rule;
    const char* kind = "config-shape-mismatch";
  };
  for (const Case& c : std::vector<Case>{
           {"qwen3_5-moe-mm-mtp2d", "mtp.layers.0.mlp.experts.1.gate_proj.weight", {40, 64}, "experts.{e}.gate/up"},
           {"qwen3_5-moe-mm", "mtp.layers.0.mlp.experts.gate_up_proj", {3, 96, 64}, "fused expert shapes", "expert-layout"},
           {"qwen3_5-dense", "mtp.layers.0.mlp.down_proj.weight", {64, 40}, "MTP mlp.down_proj"},
           {"qwen3_next", "mtp.layers.0.mlp.gate.weight", {3, 64}, "router == [num_experts, hidden_size]"},
           {"qwen3_next", "mtp.norm.weight", {32}, "MTP norms length == hidden_size"},
           {"deepseek_v3", "model.layers.2.eh_proj.weight", {64, 64}, "MTP eh_proj == [hidden_size, 2·hidden_size]"},
           {"deepseek_v3", "model.layers.2.self_attn.kv_b_proj.weight", {100, 32}, "kv_b_proj"},
           {"glm4_moe", "model.layers.2.shared_head.head.weight", {100, 64}, "MTP shared_head.head"},
           {"glm4_moe", "model.layers.2.self_attn.q_proj.weight", {48, 64}, "q_proj =="},
       }) {
    SCOPED_TRACE(std::string(c.fixture) + " " + c.tensor);
    Fixture fx(c.fixture);
    const std::string shard = fx.shard_of(c.tensor);
    fx.rewrite_shard(shard, [&](Fixture::Tensors& ts) {
      ASSERT_TRUE(ts.count(c.tensor));
      ts[c.tensor].shape = c.shape;
    });
    auto r = dr::run_doctor(fx.dir());
    ASSERT_TRUE(r.ok()) << r.error().describe();
    bool found = false;
    for (const auto& f : r->findings) {
      if (f.kind != c.kind || f.message.find(c.rule) == std::string::npos) continue;
      for (const auto& t : f.tensors)
        if (std::string(c.tensor).rfind(t, 0) == 0) found = true;  // the module or the tensor itself
    }
    EXPECT_TRUE(found) << dr::to_text(*r);
  }
}

}  // namespace
