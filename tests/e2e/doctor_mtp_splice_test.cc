// `doctor --fix --mtp-from SRC` and `quantize --mtp-from SRC` end to end through the CLI (issue 18): for
// every fixture with MTP (Qwen `mtp.*`, DeepSeek / GLM extra decoder layers), an MTP-stripped copy (what a
// transformers re-save leaves) is reported (mtp-declared-missing), spliced back from the original fixture,
// and then doctor and verify are clean and the spliced tensors are the source's bytes. A quantized target
// spliced afterwards, and `quantize --mtp-from` on the stripped source, both equal quantizing the original
// byte for byte. Every refusal has its exit code and leaves the target as it was (bytes and mtimes).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fp4forge/model/classify.h"
#include "fp4forge/model/model_info.h"
#include "fp4forge/safetensors/checkpoint.h"
#include "fp4forge/safetensors/shard_writer.h"
#include "fp4forge/util/backup.h"
#include "test_util.h"
#include "unit/doctor_test_util.h"

namespace fp4forge {
namespace {

using doctor_test::Fixture;
using testutil::q;
using testutil::run_cli;
using testutil::slurp;
using testutil::TempDir;
namespace stdfs = std::filesystem;
using Json = nlohmann::json;

const std::vector<std::string> kMtpFixtures = {"qwen3_5-dense",        "qwen3_5-dense-mm", "qwen3_5-moe-mm",
                                               "qwen3_5-moe-mm-mtp2d", "qwen3_next",       "deepseek_v3",
                                               "glm4_moe"};

std::string src_of(const std::string& fx) { return testutil::kData + "/" + fx; }

/** The MTP tensor names of a checkpoint (classify's Role::MTP). */
std::vector<std::string> mtp_names(const stdfs::path& dir) {
  auto ck = Checkpoint::open(dir);
  EXPECT_TRUE(ck.ok()) << (ck.ok() ? "" : ck.error().describe());
  if (!ck.ok()) return {};
  auto info = read_model_info(ck->config());
  std::vector<std::string> out;
  for (const auto& t : ck->tensors())
    if (classify(t.name, t.info->shape, *info).role == Role::MTP) out.push_back(t.name);
  return out;
}

/** The prefix that removes a fixture's MTP: `mtp.`, or the first extra decoder layer. */
std::string mtp_prefix(const std::string& fx) {
  const auto cfg = Json::parse(slurp(src_of(fx) + "/config.json"));
  if (cfg.contains("num_nextn_predict_layers"))
    return "model.layers." + std::to_string(cfg["num_hidden_layers"].get<int>()) + ".";
  return "mtp.";
}

/** Every file of a folder: name -> (bytes, mtime, is a link). */
using State = std::map<std::string, std::tuple<std::string, std::int64_t, bool>>;
State state(const stdfs::path& dir) {
  State s;
  for (const auto& e : stdfs::directory_iterator(dir)) {
    struct stat st {};
    ::lstat(e.path().c_str(), &st);
    const bool link = S_ISLNK(st.st_mode);
    s[e.path().filename().string()] = {link ? stdfs::read_symlink(e.path()).string() : slurp(e.path()),
                                       static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec,
                                       link};
  }
  return s;
}

/** The names whose bytes, mtime or kind differ between two states ("" when none). */
std::string changed(const State& a, const State& b) { return testutil::changed_names(a, b); }

/** Files of a folder without fp4forge's backups (name -> bytes). */
std::map<std::string, std::string> contents(const stdfs::path& dir) { return testutil::file_contents(dir); }

Json run_json(const std::string& args, int* rc, std::string* err = nullptr) {
  std::string out, e;
  *rc = run_cli(args + " --json", &out, &e);
  if (err) *err = e;
  Json j = Json::parse(out, nullptr, false);
  if (j.is_discarded()) ADD_FAILURE() << args << ": no JSON (rc " << *rc << "): " << out << e;
  return j;
}

bool has_kind(const Json& findings, const std::string& kind) {
  for (const auto& f : findings)
    if (f["kind"] == kind) return true;
  return false;
}

std::string errors_of(const Json& findings) {
  std::string s;
  for (const auto& f : findings)
    if (f["severity"] == "error") s += f["kind"].get<std::string>() + ": " + f["message"].get<std::string>() + "\n";
  return s;
}

/** Each spliced tensor of `dir` is the source's tensor, byte for byte (dtype, shape, data). */
void expect_same_tensors(const stdfs::path& dir, const stdfs::path& src, const std::vector<std::string>& names) {
  auto a = Checkpoint::open(dir);
  auto b = Checkpoint::open(src);
  ASSERT_TRUE(a.ok() && b.ok());
  for (const auto& n : names) {
    const TensorRef* x = a->find(n);
    const TensorRef* y = b->find(n);
    ASSERT_NE(x, nullptr) << n;
    ASSERT_NE(y, nullptr) << n;
    EXPECT_EQ(x->info->dtype, y->info->dtype) << n;
    EXPECT_EQ(x->info->shape, y->info->shape) << n;
    const auto dx = a->data(*x), dy = b->data(*y);
    EXPECT_TRUE(dx.size() == dy.size() && std::equal(dx.begin(), dx.end(), dy.begin())) << n << " differs";
  }
}

class MtpSplice : public ::testing::TestWithParam<std::string> {};

// Unquantized target: report, refuse without --mtp-from, dry run, splice, clean, idempotent.
TEST_P(MtpSplice, DoctorFixSplicesTheMtpBack) {
  const std::string fx = GetParam();
  const auto names = mtp_names(src_of(fx));
  ASSERT_FALSE(names.empty()) << fx;
  Fixture t(fx);
  t.remove_tensors(mtp_prefix(fx));
  ASSERT_TRUE(mtp_names(t.dir()).empty());
  const std::string T = q(t.dir()), S = q(src_of(fx));
  int rc = 0;

  Json c = run_json("doctor " + T, &rc);
  EXPECT_EQ(rc, 0);
  ASSERT_TRUE(has_kind(c["findings"], "mtp-declared-missing")) << c.dump(2);
  for (const auto& f : c["findings"])
    if (f["kind"] == "mtp-declared-missing") {
      EXPECT_TRUE(f["fix"].is_string()) << f.dump();
    }

  // --fix alone cannot fix it: refused.
  const State s0 = state(t.dir());
  Json nf = run_json("doctor " + T + " --fix --dry-run", &rc);
  EXPECT_EQ(rc, 0);
  ASSERT_EQ(nf["refused"].size(), 1u) << nf.dump(2);
  EXPECT_EQ(nf["refused"][0]["kind"], "mtp-declared-missing");
  EXPECT_TRUE(nf["mtp_splice"].is_null());
  EXPECT_EQ(changed(state(t.dir()), s0), "");
  // Tryout L-L2: the summary never leads into the loop "N fixable (run with --fix)" -> "refused: needs --mtp-from".
  for (const std::string extra : {"", " --fix --dry-run"}) {
    std::string text, e;
    EXPECT_EQ(run_cli("doctor " + T + extra, &text, &e), 0) << e;
    const std::string summary = text.substr(text.rfind("summary:"));
    EXPECT_NE(summary.find(", 1 fixable with --fix --mtp-from SRC"), std::string::npos) << extra << ": " << summary;
    // What --fix alone fixes is counted apart (other findings of the fixture), never the MTP.
    std::size_t n = 0;
    for (const auto& f : c["findings"]) n += f["fix"].is_string() && f["kind"] != "mtp-declared-missing";
    if (n > 0) {
      EXPECT_NE(
          summary.find(fmt::format(", {} fixable (run with --fix{})", n, extra.empty() ? "" : ", without --dry-run")),
          std::string::npos)
          << extra << ": " << summary;
    } else {
      EXPECT_EQ(summary.find("fixable (run with"), std::string::npos) << extra << ": " << summary;
    }
  }

  // --dry-run: the planned files, nothing written.
  Json d = run_json("doctor " + T + " --dry-run --mtp-from " + S, &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(d["mtp_splice"]["status"], "spliced") << d.dump(2);
  EXPECT_EQ(d["mtp_splice"]["dry_run"], true);
  ASSERT_FALSE(d["changes"].empty());
  for (const auto& ch : d["changes"]) EXPECT_FALSE(ch["written"].get<bool>());
  EXPECT_EQ(changed(state(t.dir()), s0), "") << "--dry-run wrote something";

  // --fix --mtp-from: spliced, clean.
  Json f = run_json("doctor " + T + " --fix --mtp-from " + S, &rc);
  EXPECT_EQ(rc, 0) << f.dump(2);
  const Json& sp = f["mtp_splice"];
  EXPECT_EQ(sp["status"], "spliced");
  EXPECT_EQ(sp["tensors"], names.size());
  EXPECT_EQ(sp["shard"], "model-mtp.safetensors");
  EXPECT_EQ(sp["ignore_added"].size(), 0u);  // unquantized: no ignore list
  EXPECT_EQ(sp["dtypes"], Json::array({"BF16"}));
  EXPECT_FALSE(sp["index_created"].get<bool>());
  ASSERT_EQ(sp["backups"].size(), 1u) << sp.dump(2);  // the index (config.json is unchanged)
  EXPECT_EQ(slurp(t.path(sp["backups"][0].get<std::string>())), std::get<0>(s0.at("model.safetensors.index.json")));
  EXPECT_FALSE(has_kind(f["remaining"], "mtp-declared-missing")) << f.dump(2);
  EXPECT_EQ(errors_of(f["remaining"]), "");
  for (const auto& ch : f["changes"]) EXPECT_TRUE(ch["written"].get<bool>());
  expect_same_tensors(t.dir(), src_of(fx), names);
  EXPECT_EQ(mtp_names(t.dir()), names);
  // The fixtures keep their MTP in its own model-mtp.safetensors: the splice writes that very file again,
  // and the index equals the original one.
  EXPECT_EQ(slurp(t.path("model-mtp.safetensors")), slurp(src_of(fx) + "/model-mtp.safetensors"));
  EXPECT_EQ(Json::parse(slurp(t.path("model.safetensors.index.json"))),
            Json::parse(slurp(src_of(fx) + "/model.safetensors.index.json")));
  EXPECT_EQ(slurp(t.path("config.json")), std::get<0>(s0.at("config.json")));

  // doctor is clean (verify is for quantized checkpoints: the next test).
  Json after = run_json("doctor " + T, &rc);
  EXPECT_EQ(rc, 0) << after.dump(2);
  EXPECT_EQ(errors_of(after["findings"]), "");
  EXPECT_FALSE(has_kind(after["findings"], "mtp-declared-missing"));
  EXPECT_FALSE(has_kind(after["findings"], "mtp-present-undeclared"));
  EXPECT_FALSE(has_kind(after["findings"], "index-total-size"));
  std::string err;

  // Twice: a no-op with a clear message.
  const State s1 = state(t.dir());
  Json g = run_json("doctor " + T + " --fix --mtp-from " + S, &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(g["changes"].size(), 0u) << g.dump(2);
  EXPECT_EQ(g["mtp_splice"]["status"], "already-present");
  EXPECT_NE(g["mtp_splice"]["message"].get<std::string>().find("nothing to splice"), std::string::npos);
  EXPECT_EQ(changed(state(t.dir()), s1), "");
  std::string text;
  EXPECT_EQ(run_cli("doctor " + T + " --fix --mtp-from " + S, &text, &err), 0) << err;
  EXPECT_NE(text.find("nothing to splice: the target already holds the " + std::to_string(names.size()) + " MTP tensors"),
            std::string::npos)
      << text;
}

// Quantized target: splicing into the quantization of the stripped source, and `quantize --mtp-from` of the
// stripped source, both give the quantization of the original source, byte for byte.
TEST_P(MtpSplice, QuantizedTargetsEqualQuantizingTheOriginal) {
  const std::string fx = GetParam();
  const auto names = mtp_names(src_of(fx));
  Fixture stripped(fx);
  stripped.remove_tensors(mtp_prefix(fx));
  TempDir tmp;
  const auto full = tmp.path / "full", qs = tmp.path / "qs", qm = tmp.path / "qm", qa = tmp.path / "qa";
  const std::string S = q(src_of(fx));
  std::string err;
  int rc = 0;
  ASSERT_EQ(run_cli("quantize " + S + " " + q(full) + " -j 2", nullptr, &err), 0) << err;
  ASSERT_EQ(run_cli("quantize " + q(stripped.dir()) + " " + q(qs) + " -j 2", nullptr, &err), 0) << err;

  // doctor --fix --mtp-from on the quantized target.
  Json c = run_json("doctor " + q(qs), &rc);
  EXPECT_TRUE(has_kind(c["findings"], "mtp-declared-missing")) << c.dump(2);
  Json f = run_json("doctor " + q(qs) + " --fix --mtp-from " + S, &rc);
  EXPECT_EQ(rc, 0) << f.dump(2);
  EXPECT_EQ(f["mtp_splice"]["status"], "spliced");
  EXPECT_FALSE(f["mtp_splice"]["ignore_added"].empty()) << f.dump(2);
  EXPECT_EQ(f["mtp_splice"]["backups"].size(), 2u);  // config.json and the index
  EXPECT_EQ(errors_of(f["remaining"]), "");
  EXPECT_FALSE(has_kind(f["remaining"], "mtp-declared-missing"));
  const auto want = contents(full);
  auto got = contents(qs);
  if (!want.count("preprocessor_config.json")) got.erase("preprocessor_config.json");  // doctor's other fix
  EXPECT_EQ(got.size(), want.size());
  for (const auto& [name, bytes] : want) {
    EXPECT_TRUE(got.count(name) && got.at(name) == bytes)
        << name << " differs from quantizing the original (doctor --fix --mtp-from)"
        << (name.ends_with(".json") && got.count(name) ? "\n" + got.at(name) + "\nvs\n" + bytes : "");
  }
  EXPECT_EQ(Json::parse(slurp(qs / "config.json"))["quantization_config"]["ignore"],
            Json::parse(slurp(full / "config.json"))["quantization_config"]["ignore"]);
  EXPECT_EQ(run_cli("verify " + q(qs), nullptr, &err), 0) << err;
  EXPECT_EQ(run_cli("verify " + q(qs) + " --against " + S, nullptr, &err), 0) << err;
  expect_same_tensors(qs, src_of(fx), names);

  // quantize --mtp-from: the stripped source plus the original's MTP.
  Json j = run_json("quantize " + q(stripped.dir()) + " " + q(qm) + " -j 2 --mtp-from " + S, &rc, &err);
  ASSERT_EQ(rc, 0) << err;
  EXPECT_EQ(j["mtp_splice"]["status"], "spliced");
  EXPECT_EQ(j["mtp_splice"]["tensors"], names.size());
  EXPECT_EQ(j["mtp_splice"]["target"], qm.string());
  EXPECT_EQ(j["mtp_splice"]["backups"].size(), 0u);  // written into quantize's own staging folder
  const auto got_m = contents(qm);
  EXPECT_EQ(got_m.size(), want.size());
  for (const auto& [name, bytes] : want) {
    EXPECT_TRUE(got_m.count(name) && got_m.at(name) == bytes)
        << name << " differs from quantizing the original (quantize --mtp-from)";
  }
  EXPECT_EQ(run_cli("verify " + q(qm) + " --against " + S, nullptr, &err), 0) << err;
  Json dq = run_json("doctor " + q(qm), &rc);
  EXPECT_EQ(rc, 0) << dq.dump(2);
  EXPECT_EQ(errors_of(dq["findings"]), "");
  EXPECT_FALSE(has_kind(dq["findings"], "mtp-declared-missing"));

  // A source that has its MTP: --mtp-from (a copy of the release) is a no-op; the source itself is a usage error.
  Fixture release(fx);
  Json a = run_json("quantize " + S + " " + q(qa) + " -j 2 --mtp-from " + q(release.dir()), &rc, &err);
  ASSERT_EQ(rc, 0) << err;
  EXPECT_EQ(a["mtp_splice"]["status"], "already-present");
  EXPECT_TRUE(contents(qa) == want);
  EXPECT_EQ(run_cli("quantize " + S + " " + q(tmp.path / "self") + " --mtp-from " + S, nullptr, &err), 2) << err;
  EXPECT_FALSE(stdfs::exists(tmp.path / "self"));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, MtpSplice, ::testing::ValuesIn(kMtpFixtures),
                         [](const ::testing::TestParamInfo<std::string>& p) { return testutil::test_name(p.param); });

// A single-file checkpoint (model.safetensors, no index): the splice creates the index.
TEST(MtpSpliceE2E, SingleFileTargetGetsAnIndex) {
  for (const std::string fx : {"qwen3_5-moe-mm-mtp2d", "deepseek_v3"}) {
    SCOPED_TRACE(fx);
    Fixture stripped(fx);
    stripped.remove_tensors(mtp_prefix(fx));
    TempDir tmp;
    const auto t = tmp.path / "single";
    stdfs::create_directories(t);
    {
      auto ck = Checkpoint::open(stripped.dir());
      ASSERT_TRUE(ck.ok());
      std::vector<std::pair<st::OutTensor, std::vector<std::byte>>> all;
      for (const auto& r : ck->tensors()) {
        const auto d = ck->data(r);
        all.push_back({{r.name, r.info->dtype, r.info->shape}, std::vector<std::byte>(d.begin(), d.end())});
      }
      ASSERT_TRUE(st::write_safetensors(t / "model.safetensors", all, {{"format", "pt"}}).ok());
      for (const auto& e : stdfs::directory_iterator(stripped.dir()))
        if (e.path().extension() == ".json" && e.path().filename() != "model.safetensors.index.json")
          stdfs::copy_file(e.path(), t / e.path().filename());
    }
    int rc = 0;
    Json f = run_json("doctor " + q(t) + " --fix --mtp-from " + q(src_of(fx)), &rc);
    EXPECT_EQ(rc, 0) << f.dump(2);
    EXPECT_EQ(f["mtp_splice"]["index_created"], true);
    EXPECT_EQ(f["mtp_splice"]["backups"].size(), 0u);
    ASSERT_TRUE(stdfs::exists(t / "model.safetensors.index.json"));
    const Json idx = Json::parse(slurp(t / "model.safetensors.index.json"));
    const Json orig = Json::parse(slurp(src_of(fx) + "/model.safetensors.index.json"));
    EXPECT_EQ(idx["metadata"]["total_size"], orig["metadata"]["total_size"]);
    EXPECT_EQ(idx["weight_map"].size(), orig["weight_map"].size());
    for (const auto& n : mtp_names(src_of(fx))) EXPECT_EQ(idx["weight_map"][n], "model-mtp.safetensors") << n;
    EXPECT_EQ(errors_of(f["remaining"]), "");
    expect_same_tensors(t, src_of(fx), mtp_names(src_of(fx)));
    const State s1 = state(t);
    Json g = run_json("doctor " + q(t) + " --fix --mtp-from " + q(src_of(fx)), &rc);
    EXPECT_EQ(g["mtp_splice"]["status"], "already-present");
    EXPECT_EQ(changed(state(t), s1), "");
  }
}

// Every refusal: its exit code, a one-line error, and the target exactly as it was.
TEST(MtpSpliceE2E, RefusalsLeaveTheTargetUnchanged) {
  const std::string fx = "qwen3_5-moe-mm-mtp2d";
  const State src0 = state(src_of(fx));
  TempDir tmp;
  std::string err;
  auto expect_refused = [&](const stdfs::path& target, const std::string& src, int code, const std::string& needle,
                            const std::string& extra = "--fix") {
    SCOPED_TRACE(needle);
    const State s0 = state(target);
    std::string out;
    EXPECT_EQ(run_cli("doctor " + q(target) + " " + extra + " --mtp-from " + src, &out, &err), code) << out << err;
    EXPECT_EQ(err.rfind("fp4forge: error: ", 0), 0u) << err;
    EXPECT_EQ(err.find('\n'), err.size() - 1) << "not one line: " << err;
    EXPECT_NE(err.find(needle), std::string::npos) << err;
    EXPECT_EQ(changed(state(target), s0), "") << "the target changed";
    int rc = 0;
    Json j = run_json("doctor " + q(target) + " " + extra + " --mtp-from " + src, &rc);
    EXPECT_EQ(rc, code);
    EXPECT_EQ(j["ok"], false);
    EXPECT_EQ(j["error"]["exit_code"], code);
    EXPECT_EQ(changed(state(target), s0), "");
  };
  Fixture t(fx);
  t.remove_tensors("mtp.");
  // also a stale total_size (fixable alone): nothing is written when the splice is refused
  t.edit_json("model.safetensors.index.json", [](doctor_test::Json& j) { j["metadata"]["total_size"] = 7; });

  // SRC whose config disagrees (hidden_size, vocab, layers, architecture).
  for (const auto& [key, value] : std::vector<std::pair<std::string, Json>>{
           {"hidden_size", 128}, {"vocab_size", 512}, {"num_hidden_layers", 8}}) {
    Fixture bad(fx);
    bad.edit_config([&](doctor_test::Json& c) { c["text_config"][key] = value; });
    expect_refused(t.dir(), q(bad.dir()), 3, key);
  }
  {
    Fixture bad("qwen3_5-moe-mm");  // same family, other architecture string
    bad.edit_config([](doctor_test::Json& c) { c["architectures"] = {"Qwen3_5MoeForCausalLM"}; });
    expect_refused(t.dir(), q(bad.dir()), 3, "architecture");
  }
  expect_refused(t.dir(), q(src_of("deepseek_v3")), 3, "describes a different model");
  // SRC without MTP.
  {
    Fixture none(fx);
    none.remove_tensors("mtp.");
    expect_refused(t.dir(), q(none.dir()), 3, "has no MTP tensors");
  }
  // SRC whose MTP breaks a shape rule (mtp.fc not [H, 2H]).
  {
    Fixture bad(fx);
    bad.rewrite_shard("model-mtp.safetensors", [](Fixture::Tensors& ts) { ts["mtp.fc.weight"].shape = {64, 64}; });
    expect_refused(t.dir(), q(bad.dir()), 3, "mtp.fc == [hidden_size, 2·hidden_size]");
  }
  // SRC is the target; --mtp-from without --fix.
  expect_refused(t.dir(), q(t.dir()), 2, "is the target checkpoint itself");
  expect_refused(t.dir(), q(src_of(fx)), 2, "--mtp-from needs --fix", "");
  // A family without MTP.
  {
    Fixture l("llama");
    expect_refused(l.dir(), q(src_of("llama")), 3, "has no MTP layers");
  }
  // A partial MTP in the target.
  {
    Fixture part(fx);
    part.remove_tensors("mtp.layers.");
    expect_refused(part.dir(), q(src_of(fx)), 3, "part of an MTP");
  }
  // A symbolic link where the splice writes: the index, config.json of a quantized target, the shard name.
  {
    Fixture l(fx);
    l.remove_tensors("mtp.");
    stdfs::rename(l.path("model.safetensors.index.json"), l.path("index-real.json"));
    stdfs::create_symlink("index-real.json", l.path("model.safetensors.index.json"));
    expect_refused(l.dir(), q(src_of(fx)), 3, "symbolic link");
  }
  {
    Fixture stripped(fx);
    stripped.remove_tensors("mtp.");
    const auto qd = tmp.path / "q";
    ASSERT_EQ(run_cli("quantize " + q(stripped.dir()) + " " + q(qd) + " -j 2", nullptr, &err), 0) << err;
    stdfs::rename(qd / "config.json", qd / "config-real.json");
    stdfs::create_symlink("config-real.json", qd / "config.json");
    expect_refused(qd, q(src_of(fx)), 3, "symbolic link");
  }
  {
    Fixture l(fx);
    l.remove_tensors("mtp.");
    doctor_test::write(tmp.path / "elsewhere.safetensors", "x");
    stdfs::create_symlink(tmp.path / "elsewhere.safetensors", l.path("model-mtp.safetensors"));
    expect_refused(l.dir(), q(src_of(fx)), 3, "symbolic link");
    EXPECT_EQ(slurp(tmp.path / "elsewhere.safetensors"), "x");
  }
  // A foreign file named model-mtp.safetensors outside the index.
  {
    Fixture l(fx);
    l.remove_tensors("mtp.");
    doctor_test::write(l.path("model-mtp.safetensors"), "not ours");
    expect_refused(l.dir(), q(src_of(fx)), 3, "not part of the checkpoint");
  }
  // A read-only target (root ignores permissions: the fault test injects EROFS instead).
  if (::geteuid() != 0) {
    Fixture ro(fx);
    ro.remove_tensors("mtp.");
    stdfs::permissions(ro.dir(), stdfs::perms::owner_write | stdfs::perms::group_write | stdfs::perms::others_write,
                       stdfs::perm_options::remove);
    expect_refused(ro.dir(), q(src_of(fx)), 4, "Permission denied");
    stdfs::permissions(ro.dir(), stdfs::perms::owner_write, stdfs::perm_options::add);
  }
  // SRC is never modified.
  EXPECT_EQ(changed(state(src_of(fx)), src0), "");
}

// After a crash between the shard's rename and the index (an unindexed, byte-identical model-mtp.safetensors),
// a rerun adopts the leftover and completes the splice.
TEST(MtpSpliceE2E, LeftoverShardOfAnInterruptedRunIsAdopted) {
  const std::string fx = "deepseek_v3";
  Fixture t(fx);
  t.remove_tensors(mtp_prefix(fx));
  stdfs::copy_file(src_of(fx) + "/model-mtp.safetensors", t.path("model-mtp.safetensors"));
  int rc = 0;
  Json f = run_json("doctor " + q(t.dir()) + " --fix --mtp-from " + q(src_of(fx)), &rc);
  EXPECT_EQ(rc, 0) << f.dump(2);
  EXPECT_EQ(f["mtp_splice"]["status"], "spliced");
  EXPECT_EQ(f["mtp_splice"]["shard_adopted"], true);
  EXPECT_EQ(errors_of(f["remaining"]), "");
  EXPECT_EQ(Json::parse(slurp(t.path("model.safetensors.index.json"))),
            Json::parse(slurp(src_of(fx) + "/model.safetensors.index.json")));
}

// quantize --mtp-from refuses before any work: no DST, no staging folder.
TEST(MtpSpliceE2E, QuantizeMtpFromRefusesFirst) {
  const std::string fx = "qwen3_5-moe-mm-mtp2d";
  Fixture stripped(fx);
  stripped.remove_tensors("mtp.");
  TempDir tmp;
  std::string out, err;
  EXPECT_EQ(run_cli("quantize " + q(stripped.dir()) + " " + q(tmp.path / "q") + " --mtp-from " +
                        q(src_of("deepseek_v3")),
                    &out, &err),
            3)
      << out;
  EXPECT_NE(err.find("describes a different model"), std::string::npos) << err;
  EXPECT_TRUE(stdfs::is_empty(tmp.path));
  int rc = 0;
  Json d = run_json("quantize " + q(stripped.dir()) + " --dry-run --mtp-from " + q(src_of(fx)), &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(d["dry_run"], true);
  EXPECT_EQ(d["mtp_splice"]["status"], "spliced");
  EXPECT_EQ(d["mtp_splice"]["dry_run"], true);
  // The splice gives the output its MTP layers: no warning that it has none (issue 55 tryout L); without
  // --mtp-from the warning stays.
  EXPECT_EQ(d.dump().find("has no MTP tensors"), std::string::npos) << d.dump();
  const Json bare = run_json("quantize " + q(stripped.dir()) + " --dry-run", &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_NE(bare.dump().find("has no MTP tensors"), std::string::npos) << bare.dump();
}

}  // namespace
}  // namespace fp4forge
