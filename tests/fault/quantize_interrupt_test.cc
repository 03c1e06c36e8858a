// quantize under faults: SIGKILL at several points (no DST; --resume gives identical bytes), and injected
// file-system failures through fs::set_ops (ENOSPC midway, fsync failure, rename failure): Errc::IO, no DST,
// no staging folder left. Also the destination refusals.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <chrono>
#include <cstring>
#include <functional>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "../e2e/quantize_test_util.h"
#include "fp4forge/safetensors/checkpoint.h"
#include "fp4forge/codec/half.h"
#include "fp4forge/quantize/plan.h"
#include "fp4forge/quantize/run.h"
#include "fp4forge/quantize/staging.h"
#include "fp4forge/safetensors/shard_writer.h"
#include "fp4forge/util/fs.h"
#include "spawn_cli.h"

namespace fp4forge::quant {
namespace {

using namespace fp4forge::qtest;
using ::testing::HasSubstr;

/** A llama-layout checkpoint big enough (~90 MB, 8 shards) that a kill can land mid-run, with the tokenizer of
 * tests/data/tokenizer (48 ids under vocab_size 8192), so quantize's preflight (doctor's checks) passes it. */
void make_llama(const stdfs::path& dir) {
  const std::uint64_t H = 1024, I = 2048, V = 8192, L = 4;
  stdfs::create_directories(dir);
  nlohmann::ordered_json cfg = {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"},
                                {"hidden_size", H}, {"intermediate_size", I}, {"num_hidden_layers", L},
                                {"num_attention_heads", 8}, {"num_key_value_heads", 8}, {"head_dim", 128},
                                {"vocab_size", V}, {"tie_word_embeddings", false}, {"torch_dtype", "bfloat16"}};
  std::ofstream(dir / "config.json") << cfg.dump(2) << "\n";
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja"})
    stdfs::copy_file(kData + "/tokenizer/" + f, dir / f);
  std::uint64_t x = 0x9E3779B97F4A7C15ULL;
  auto tensor = [&](const std::string& name, std::vector<std::uint64_t> shape) {
    std::uint64_t n = 1;
    for (auto d : shape) n *= d;
    std::vector<std::byte> b(n * 2);
    for (std::uint64_t i = 0; i < n; ++i) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      const float v = (static_cast<float>(x >> 40) / 16777216.0f - 0.5f) * 0.08f;
      const std::uint16_t h = half::float_to_bf16(v);
      std::memcpy(b.data() + 2 * i, &h, 2);
    }
    return std::make_pair(st::OutTensor{name, DType::BF16, std::move(shape)}, std::move(b));
  };
  nlohmann::json wm = nlohmann::json::object();
  std::uint64_t total = 0;
  auto write = [&](const std::string& shard, std::vector<std::pair<st::OutTensor, std::vector<std::byte>>> ts) {
    for (const auto& [t, b] : ts) {
      wm[t.name] = shard;
      total += b.size();
    }
    ASSERT_TRUE(st::write_safetensors(dir / shard, ts, {{"format", "pt"}}).ok());
  };
  const std::string of = "-of-00010.safetensors";
  write("model-00001" + of, {tensor("model.embed_tokens.weight", {V, H})});
  for (std::uint64_t l = 0; l < L; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    write("model-0000" + std::to_string(2 + 2 * l) + of,
          {tensor(p + "self_attn.q_proj.weight", {H, H}), tensor(p + "self_attn.k_proj.weight", {H, H}),
           tensor(p + "self_attn.v_proj.weight", {H, H}), tensor(p + "self_attn.o_proj.weight", {H, H}),
           tensor(p + "input_layernorm.weight", {H})});
    write("model-0000" + std::to_string(3 + 2 * l) + of,
          {tensor(p + "mlp.gate_proj.weight", {I, H}), tensor(p + "mlp.up_proj.weight", {I, H}),
           tensor(p + "mlp.down_proj.weight", {H, I}), tensor(p + "post_attention_layernorm.weight", {H})});
  }
  write("model-00010" + of, {tensor("lm_head.weight", {V, H}), tensor("model.norm.weight", {H})});
  nlohmann::json idx = {{"metadata", {{"total_size", total}}}, {"weight_map", wm}};
  std::ofstream(dir / "model.safetensors.index.json") << idx.dump(2);
}

/** Starts `fp4forge ARGS...` without waiting; stdout to /dev/null, stderr to `log` (or /dev/null). */
using testutil::spawn_cli;

pid_t spawn_quantize(const stdfs::path& src, const stdfs::path& dst, bool resume) {
  std::vector<std::string> args = {"quantize", src.string(), dst.string(), "-j", "1", "--max-memory", "1M"};
  if (resume) args.push_back("--resume");
  return spawn_cli(std::move(args));
}

TEST(QuantizeInterrupt, SigkillLeavesNoDestinationAndResumeIsByteIdentical) {
  TempDir tmp;
  const stdfs::path src = tmp.path / "src";
  make_llama(src);
  const auto src_before = dir_contents(src);
  const stdfs::path ref = tmp.path / "ref";
  const auto t0 = std::chrono::steady_clock::now();
  int st = 0;
  pid_t pid = spawn_quantize(src, ref, false);
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  const double full = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto want = dir_contents(ref);

  int interrupted = 0, resumed_ok = 0;
  for (double frac : {0.15, 0.4, 0.7, 0.9}) {
    SCOPED_TRACE(frac);
    const stdfs::path dst = tmp.path / ("out" + std::to_string(static_cast<int>(frac * 100)));
    pid = spawn_quantize(src, dst, false);
    std::this_thread::sleep_for(std::chrono::duration<double>(full * frac));
    ::kill(pid, SIGKILL);
    ASSERT_EQ(::waitpid(pid, &st, 0), pid);
    if (WIFEXITED(st)) continue;  // finished before the kill landed: nothing to check at this point
    if (stdfs::exists(dst)) {
      // Killed after its commit point (the staging -> DST rename), while fsyncing the directory or
      // exiting: the destination must then be complete, byte for byte, with no staging left.
      // (A kill between the rename and the marker's removal leaves the marker inside: see
      // FinishedRunKilledBeforeItsMarkerWasRemoved.)
      auto got = dir_contents(dst);
      got.erase(".fp4forge-staging");
      EXPECT_TRUE(got == want) << "a killed run left an incomplete destination";
      EXPECT_FALSE(stdfs::exists(staging_path(dst)));
      continue;
    }
    ++interrupted;
    // Resume reuses the finished shards and produces exactly the bytes of an uninterrupted run.
    std::string out, err;
    ASSERT_EQ(run_cli("quantize " + q(src) + " " + q(dst) + " --resume --json", &out, &err), 0) << err;
    const auto j = nlohmann::json::parse(out);
    resumed_ok += j["shards_resumed"].get<int>() > 0 ? 1 : 0;
    EXPECT_TRUE(dir_contents(dst) == want);
    EXPECT_FALSE(stdfs::exists(staging_path(dst)));
  }
  EXPECT_GT(interrupted, 0) << "no kill landed mid-run (full run took " << full << " s)";
  EXPECT_EQ(dir_contents(src), src_before);
  RecordProperty("interrupted", interrupted);
  RecordProperty("resumed_with_reuse", resumed_ok);
}

/** A staging folder for `dst` as an earlier run left it: the marker and one more file. */
void plant_staging(const stdfs::path& dst, const std::string& file, const std::string& content) {
  stdfs::create_directories(staging_path(dst));
  std::ofstream(staging_path(dst) / ".fp4forge-staging") << "fp4forge quantize staging folder\n";
  std::ofstream(staging_path(dst) / file) << content;
}

// Tryout M-L3: the count said is the shards the resume manifest records (what --resume reuses), a shard file without
// a record said apart.
TEST(QuantizeInterrupt, FinishedShardsAreCountedAsTheManifestRecordsThem) {
  TempDir tmp;
  const stdfs::path dst = tmp.path / "out";
  plant_staging(dst, "model-00001-of-00002.safetensors", "x");
  std::ofstream(staging_path(dst) / "model-00002-of-00002.safetensors") << "y";
  std::ofstream(staging_path(dst) / ".fp4forge-resume.json")
      << R"({"plan": "0000000000000000", "shards": {"model-00001-of-00002.safetensors": {"size": 1, "digest": "0"}}})";
  const StagedShards s = staged_shards(staging_path(dst));
  EXPECT_EQ(s.count, 2u);
  EXPECT_EQ(s.recorded, 1u);
  std::string err;
  EXPECT_EQ(run_cli("quantize " + q(kData + "/llama") + " " + q(dst), nullptr, &err), 3);
  EXPECT_THAT(err, HasSubstr("holds 2 finished shard(s)"));
  EXPECT_THAT(err, HasSubstr("1 of them recorded in its resume manifest"));
  EXPECT_THAT(err, HasSubstr("expected --resume to reuse the 1 recorded"));
  // A damaged manifest records nothing (and never throws).
  std::ofstream(staging_path(dst) / ".fp4forge-resume.json") << "{\"shards\": [";
  EXPECT_EQ(staged_shards(staging_path(dst)).recorded, 0u);
  // Tryout Q-L2: finished shards none of which is recorded are rewritten by --resume anyway: a plain run is not
  // refused "to reuse them", it removes the folder and says why.
  ASSERT_EQ(run_cli("quantize " + q(kData + "/llama") + " " + q(dst), nullptr, &err), 0) << err;
  EXPECT_THAT(err, HasSubstr("none of its 2 finished shard(s) was recorded in its resume manifest, so none could "
                             "be reused"));
  EXPECT_FALSE(stdfs::exists(staging_path(dst)));
}

// Tryout N-M3: --resume over shards of another source or plan (a typo in SRC, a changed option) is refused and
// deletes nothing, as a run without --resume refuses them; --restart discards them.
TEST(QuantizeInterrupt, AResumeOfAnotherPlansShardsIsRefusedAndDeletesNothing) {
  TempDir tmp;
  const stdfs::path dst = tmp.path / "out";
  plant_staging(dst, "model.safetensors", "hours of work");
  std::ofstream(staging_path(dst) / ".fp4forge-resume.json")
      << R"({"plan": "0123456789abcdef", "shards": {"model.safetensors": {"size": 13, "digest": "0"}}})";
  const auto before = dir_contents(staging_path(dst));
  std::string err;
  EXPECT_EQ(run_cli("quantize " + q(kData + "/llama") + " " + q(dst) + " --resume", nullptr, &err), 3) << err;
  EXPECT_THAT(err, HasSubstr("--resume: the 1 finished shard(s)"));
  EXPECT_THAT(err, HasSubstr("come from another source or plan"));
  EXPECT_THAT(err, HasSubstr("nothing was deleted"));
  EXPECT_THAT(err, HasSubstr("--restart to discard them"));
  EXPECT_TRUE(dir_contents(staging_path(dst)) == before);
  EXPECT_FALSE(stdfs::exists(dst));
  EXPECT_EQ(run_cli("quantize " + q(kData + "/llama") + " " + q(dst) + " --restart", nullptr, &err), 0) << err;
  // Another plan's manifest with no finished shard: nothing to lose, a fresh start (a warning).
  const stdfs::path dst2 = tmp.path / "out2";
  plant_staging(dst2, ".fp4forge-resume.json", R"({"plan": "0123456789abcdef", "shards": {}})");
  EXPECT_EQ(run_cli("quantize " + q(kData + "/llama") + " " + q(dst2) + " --resume", nullptr, &err), 0) << err;
  EXPECT_THAT(err, HasSubstr("holds no finished shard; starting afresh"));
}

TEST(QuantizeInterrupt, StaleStagingWithoutResumeIsReplaced) {
  TempDir tmp;
  const stdfs::path dst = tmp.path / "out";
  plant_staging(dst, "junk", "x");
  std::string err;
  ASSERT_EQ(run_cli("quantize " + q(kData + "/llama") + " " + q(dst), nullptr, &err), 0) << err;
  EXPECT_THAT(err, HasSubstr("interrupted run"));
  EXPECT_FALSE(stdfs::exists(dst / "junk"));
  // A foreign folder in the staging place is never deleted.
  const stdfs::path dst2 = tmp.path / "out2";
  stdfs::create_directories(staging_path(dst2));
  std::ofstream(staging_path(dst2) / "precious") << "x";
  EXPECT_EQ(run_cli("quantize " + q(kData + "/llama") + " " + q(dst2), nullptr, &err), 3);
  EXPECT_TRUE(stdfs::exists(staging_path(dst2) / "precious"));
  // An empty one (a run killed right after creating it) is taken over.
  const stdfs::path dst3 = tmp.path / "out3";
  stdfs::create_directories(staging_path(dst3));
  EXPECT_EQ(run_cli("quantize " + q(kData + "/llama") + " " + q(dst3) + " --resume", nullptr, &err), 0) << err;
}

// Issue 14 #9: a run killed just before its final rename (staging complete) is finished by --resume
// and redone by a plain rerun; one killed just after it leaves a complete DST whose only extra is the
// marker, and a rerun says so instead of "not made by fp4forge".
TEST(QuantizeInterrupt, KilledAroundTheFinalRename) {
  TempDir tmp;
  const stdfs::path src = kData + "/llama";
  const stdfs::path ref = tmp.path / "ref";
  std::string err;
  ASSERT_EQ(run_cli("quantize " + q(src) + " " + q(ref), nullptr, &err), 0) << err;
  const auto want = dir_contents(ref);
  struct KillAt : fs::Ops {
    stdfs::path dst;
    bool after = false;
    int rename(const char* a, const char* b) override {
      if (stdfs::path(b) != dst) return fs::Ops::rename(a, b);
      if (!after) ::_exit(9);  // "killed" just before the commit point
      const int r = fs::Ops::rename(a, b);
      ::_exit(r == 0 ? 9 : 10);
    }
  };
  for (const bool after : {false, true}) {
    for (const bool resume : {false, true}) {
      SCOPED_TRACE(std::string(after ? "after" : "before") + (resume ? ", --resume" : ", rerun"));
      const stdfs::path dst = tmp.path / fmt::format("out-{}-{}", after, resume);
      const pid_t pid = ::fork();
      if (pid == 0) {
        auto ck = Checkpoint::open(src);
        auto plan = ck ? make_plan(*ck, {}) : Result<QuantPlan>(Error{});
        if (!plan) ::_exit(11);
        KillAt k;
        k.dst = dst;
        k.after = after;
        fs::set_ops(&k);
        (void)run_plan(*ck, *plan, dst, RunOptions{});
        ::_exit(12);
      }
      int st = 0;
      ASSERT_EQ(::waitpid(pid, &st, 0), pid);
      ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 9) << st;
      if (!after) {
        ASSERT_FALSE(stdfs::exists(dst));
        ASSERT_TRUE(stdfs::exists(staging_path(dst) / ".fp4forge-staging"));
        if (!resume) {
          // Issue 29: finished shards are never deleted unannounced: a plain rerun names --resume and --restart.
          ASSERT_EQ(run_cli("quantize " + q(src) + " " + q(dst), nullptr, &err), 3) << err;
          EXPECT_THAT(err, HasSubstr("finished shard(s)"));
          EXPECT_THAT(err, HasSubstr("expected --resume to reuse them"));
          EXPECT_TRUE(stdfs::exists(staging_path(dst) / ".fp4forge-staging"));
        }
        ASSERT_EQ(run_cli("quantize " + q(src) + " " + q(dst) + (resume ? " --resume" : " --restart"), nullptr, &err), 0)
            << err;
        EXPECT_TRUE(dir_contents(dst) == want);
        EXPECT_FALSE(stdfs::exists(staging_path(dst)));
      } else {
        EXPECT_FALSE(stdfs::exists(staging_path(dst)));
        auto got = dir_contents(dst);
        EXPECT_EQ(got.erase(".fp4forge-staging"), 1u);
        // R4-B2: the resume manifest stays until the rename succeeded (a failed rename keeps every shard), so a kill
        // just after it leaves the manifest too; the rerun names both.
        EXPECT_EQ(got.erase(".fp4forge-resume.json"), 1u);
        EXPECT_TRUE(got == want);
        EXPECT_EQ(run_cli("quantize " + q(src) + " " + q(dst) + (resume ? " --resume" : ""), nullptr, &err), 3);
        EXPECT_THAT(err, HasSubstr("the output is complete"));
        EXPECT_THAT(err, HasSubstr(".fp4forge-resume.json' to finish it"));
      }
    }
  }
}

// Issue 14 #10: two runs to one DST. One wins, the other exits 3 naming the holder and touches nothing
// of the winner's; the result equals a single run's bytes.
TEST(QuantizeInterrupt, TwoRunsToOneDestination) {
  TempDir tmp;
  const stdfs::path src = tmp.path / "src";
  make_llama(src);
  const stdfs::path ref = tmp.path / "ref";
  std::string err;
  ASSERT_EQ(run_cli("quantize " + q(src) + " " + q(ref) + " -j 1", nullptr, &err), 0) << err;
  const auto want = dir_contents(ref);
  for (int round = 0; round < 4; ++round) {
    SCOPED_TRACE(round);
    const stdfs::path dst = tmp.path / ("out" + std::to_string(round));
    const stdfs::path log_a = tmp.path / "a.log", log_b = tmp.path / "b.log";
    auto spawn = [&](const stdfs::path& log) {
      return spawn_cli({"quantize", src.string(), dst.string(), "-j", "1"}, log);
    };
    const pid_t a = spawn(log_a);
    if (round % 2) std::this_thread::sleep_for(std::chrono::milliseconds(30 * round));
    const pid_t b = spawn(log_b);
    int sa = 0, sb = 0;
    ASSERT_EQ(::waitpid(a, &sa, 0), a);
    ASSERT_EQ(::waitpid(b, &sb, 0), b);
    ASSERT_TRUE(WIFEXITED(sa) && WIFEXITED(sb));
    const int ea = WEXITSTATUS(sa), eb = WEXITSTATUS(sb);
    EXPECT_TRUE((ea == 0 && eb == 3) || (ea == 3 && eb == 0)) << ea << " " << eb << "\n"
                                                               << slurp(log_a) << slurp(log_b);
    const std::string loser = slurp(ea == 0 ? log_b : log_a);
    EXPECT_TRUE(loser.find("another fp4forge quantize run holds destination") != std::string::npos ||
                loser.find("already exists") != std::string::npos)
        << loser;
    EXPECT_TRUE(dir_contents(dst) == want);
    EXPECT_FALSE(stdfs::exists(staging_path(dst)));
  }
}

// `ulimit -f` below the output size: the write fails with EFBIG (SIGXFSZ is ignored), exit 4, and the
// staging folder is removed.
TEST(QuantizeInterrupt, FileSizeLimitIsAnIoErrorNotASignal) {
  TempDir tmp;
  const stdfs::path src = tmp.path / "src";
  make_llama(src);
  const stdfs::path dst = tmp.path / "out", err = tmp.path / "err.log";
  const std::string cmd = "ulimit -f 2048 && " + q(kCli) + " quantize " + q(src) + " " + q(dst) + " -j 1 2>" + q(err);
  const int st = std::system(cmd.c_str());  // /bin/sh -c
  ASSERT_TRUE(WIFEXITED(st)) << "killed by a signal: " << st;
  EXPECT_EQ(WEXITSTATUS(st), 4) << slurp(err);
  EXPECT_THAT(slurp(err), HasSubstr("File too large"));
  EXPECT_FALSE(stdfs::exists(dst));
  EXPECT_FALSE(stdfs::exists(staging_path(dst)));
}

// The lock is what decides: a staging folder held by a live run is neither resumed, replaced nor removed.
TEST(QuantizeInterrupt, LockedStagingIsLeftAlone) {
  TempDir tmp;
  const stdfs::path dst = tmp.path / "out";
  plant_staging(dst, "model-00001-of-00004.safetensors", "in progress");
  const int fd = ::open((staging_path(dst) / ".fp4forge-staging").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  const auto before = dir_contents(staging_path(dst));
  std::string err;
  for (const char* extra : {"", " --resume"}) {
    EXPECT_EQ(run_cli("quantize " + q(kData + "/llama") + " " + q(dst) + extra, nullptr, &err), 3);
    EXPECT_THAT(err, HasSubstr("another fp4forge quantize run holds destination"));
    EXPECT_TRUE(dir_contents(staging_path(dst)) == before);
    EXPECT_FALSE(stdfs::exists(dst));
  }
  ::close(fd);
  // Unlocked, its "finished" shard (recorded: one --resume could reuse) is not deleted unannounced (issue 29):
  // --restart discards it.
  std::ofstream(staging_path(dst) / ".fp4forge-resume.json")
      << R"({"plan": "0000000000000000", "shards": {"model-00001-of-00004.safetensors": {"size": 11, "digest": "0"}}})";
  EXPECT_EQ(run_cli("quantize " + q(kData + "/llama") + " " + q(dst), nullptr, &err), 3) << err;
  EXPECT_EQ(run_cli("quantize " + q(kData + "/llama") + " " + q(dst) + " --restart", nullptr, &err), 0) << err;
}

// A damaged or hand-edited resume manifest (wrong JSON types) is never trusted and never crashes:
// --resume redoes the shards and the output equals a clean run.
TEST(QuantizeInterrupt, DamagedResumeManifestIsIgnored) {
  TempDir tmp;
  const stdfs::path clean = tmp.path / "clean";
  std::string err;
  ASSERT_EQ(run_cli("quantize " + q(kData + "/llama") + " " + q(clean), nullptr, &err), 0) << err;
  const char* manifests[] = {
      R"({"plan": 12, "shards": {}})",
      R"({"plan": null})",
      R"([1, 2, 3])",
      R"({"plan": "0", "shards": {"model.safetensors": {"size": "big", "digest": 7}}})",
      R"({"plan": "0", "shards": {"model.safetensors": {"size": -1, "digest": "zz"}}})",
      "not json at all",
  };
  int i = 0;
  for (const char* m : manifests) {
    SCOPED_TRACE(m);
    const stdfs::path dst = tmp.path / ("out" + std::to_string(i++));
    stdfs::create_directories(staging_path(dst));
    std::ofstream(staging_path(dst) / ".fp4forge-staging") << "x";
    std::ofstream(staging_path(dst) / ".fp4forge-resume.json") << m;
    ASSERT_EQ(run_cli("quantize " + q(kData + "/llama") + " " + q(dst) + " --resume", nullptr, &err), 0) << err;
    EXPECT_THAT(err, ::testing::Not(HasSubstr("internal error")));
    for (const auto& e : stdfs::directory_iterator(clean))
      EXPECT_EQ(slurp(dst / e.path().filename()), slurp(e.path())) << e.path().filename();
  }
}

// ---- injected file-system faults, library run() ---------------------------------------------------

class FaultOps : public fs::Ops {
 public:
  std::atomic<long> write_budget{LONG_MAX};  ///< bytes that may be written before ENOSPC
  std::atomic<int> fsync_ok{INT_MAX};        ///< fsyncs that succeed before EIO
  std::atomic<int> rename_ok{INT_MAX};       ///< renames that succeed before EIO
  std::atomic<int> failures{0};

  ssize_t write(int fd, const void* buf, std::size_t n) override {
    if (!take(n)) return fail(ENOSPC);
    return fs::Ops::write(fd, buf, n);
  }
  ssize_t pwrite(int fd, const void* buf, std::size_t n, off_t off) override {
    if (!take(n)) return fail(ENOSPC);
    return fs::Ops::pwrite(fd, buf, n, off);
  }
  int fsync(int fd) override {
    if (fsync_ok.fetch_sub(1) <= 0) return static_cast<int>(fail(EIO));
    return fs::Ops::fsync(fd);
  }
  int rename(const char* a, const char* b) override {
    if (rename_ok.fetch_sub(1) <= 0) return static_cast<int>(fail(EIO));
    return fs::Ops::rename(a, b);
  }

 private:
  bool take(std::size_t n) {
    return write_budget.fetch_sub(static_cast<long>(n)) >= static_cast<long>(n);
  }
  ssize_t fail(int e) {
    failures.fetch_add(1);
    errno = e;
    return -1;
  }
};

struct OpsGuard {
  fs::Ops* prev;
  explicit OpsGuard(fs::Ops* o) : prev(fs::set_ops(o)) {}
  ~OpsGuard() { fs::set_ops(prev); }
};

/** The llama fixture's plan and the bytes of a clean run of it (made once). */
struct LlamaRun {
  Checkpoint ck;
  QuantPlan plan;
  std::map<std::string, std::string> clean;
};
const LlamaRun& llama_run() {
  static const LlamaRun* r = [] {
    auto ck = Checkpoint::open(kData + "/llama");
    EXPECT_TRUE(ck.ok());
    auto plan = make_plan(*ck, {});
    EXPECT_TRUE(plan.ok());
    auto* out = new LlamaRun{std::move(*ck), std::move(*plan), {}};
    TempDir tmp;
    EXPECT_TRUE(run_plan(out->ck, out->plan, tmp.path / "clean", RunOptions{}).ok());
    out->clean = dir_contents(tmp.path / "clean");
    return out;
  }();
  return *r;
}

/** R4-B2: after a failed run, what DST's parent holds: nothing, or a staging folder of finished shards only (no
 * temporary), which the error names and a --resume without the fault turns into the bytes of a clean run. */
void expect_kept_or_nothing(const stdfs::path& parent, const stdfs::path& dst, const Error& e) {
  const LlamaRun& L = llama_run();
  EXPECT_FALSE(stdfs::exists(dst));
  const stdfs::path staging = staging_path(dst);
  if (!stdfs::exists(staging)) {
    EXPECT_TRUE(stdfs::is_empty(parent));
    EXPECT_THAT(e.message, ::testing::Not(HasSubstr("kept in")));
    return;
  }
  std::size_t shards = 0;
  for (const auto& f : stdfs::directory_iterator(staging)) {
    const std::string n = f.path().filename().string();
    EXPECT_FALSE(fs::is_partial_name(n) && n != ".fp4forge-staging.partial") << "temporary left: " << n;
    shards += n.ends_with(".safetensors") ? 1 : 0;
  }
  EXPECT_GT(shards, 0u) << "a staging folder without finished shards is removed";
  EXPECT_THAT(e.message, HasSubstr(fmt::format("{} of {} shard(s) finished", shards, L.plan.shards.size())));
  EXPECT_THAT(e.message, HasSubstr("kept in '" + staging.string() + "' for the next --resume"));
  RunOptions ro;
  ro.resume = true;
  auto r = run_plan(L.ck, L.plan, dst, ro);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->shards_resumed, shards);
  EXPECT_TRUE(dir_contents(dst) == L.clean) << "resumed output differs from a clean run";
}

void expect_io_failure(FaultOps& ops, const char* what) {
  SCOPED_TRACE(what);
  TempDir tmp;
  const LlamaRun& L = llama_run();
  const auto before = dir_contents(kData + "/llama");
  const stdfs::path dst = tmp.path / "out";
  RunOptions ro;
  ro.jobs = 2;
  ro.max_memory = 64 << 10;
  Result<RunSummary> r = Error{};
  {
    OpsGuard g(&ops);
    r = run_plan(L.ck, L.plan, dst, ro);
  }
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::IO) << r.error().message;
  EXPECT_GT(ops.failures.load(), 0);
  expect_kept_or_nothing(tmp.path, dst, r.error());
  EXPECT_EQ(dir_contents(kData + "/llama"), before);
}

// R4-B2: a --resume that fails (its free-space check, ENOSPC midway) keeps the finished shards it was asked to reuse
// (they were deleted with the staging folder, so freeing space and resuming started from zero), says so, and the
// next --resume reuses them.
TEST(QuantizeFaults, AFailedResumeKeepsTheFinishedShards) {
  const LlamaRun& L = llama_run();
  ASSERT_GT(L.plan.shards.size(), 2u);
  TempDir tmp;
  const stdfs::path dst = tmp.path / "out";
  // A fresh run that finishes some shards, then meets ENOSPC (one worker: shards finish in order).
  FaultOps enospc;
  enospc.write_budget = static_cast<long>(L.plan.shards[0].layout.file_size + L.plan.shards[1].layout.file_size + 32768);
  RunOptions one;
  one.jobs = 1;
  Result<RunSummary> r = Error{};
  {
    OpsGuard g(&enospc);
    r = run_plan(L.ck, L.plan, dst, one);
  }
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::IO);
  EXPECT_THAT(r.error().message, HasSubstr("kept in '" + staging_path(dst).string() + "' for the next --resume"));
  const auto staged = staged_shards(staging_path(dst));
  ASSERT_GE(staged.count, 2u);
  // Without --resume the kept shards are refused, never deleted unannounced (as after an interrupt).
  r = run_plan(L.ck, L.plan, dst, RunOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("--resume"));
  // --resume on a disk that filled meanwhile: its free-space check fails; the shards stay, and the message says so.
  struct Full : fs::Ops {
    int statvfs(const char* path, struct statvfs* st) override {
      const int rc = fs::Ops::statvfs(path, st);
      st->f_bavail = 0;
      return rc;
    }
  } full;
  RunOptions resume;
  resume.resume = true;
  resume.jobs = 1;
  {
    OpsGuard g(&full);
    r = run_plan(L.ck, L.plan, dst, resume);
  }
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::IO);
  EXPECT_THAT(r.error().message, HasSubstr("not enough free space"));
  EXPECT_THAT(r.error().message, HasSubstr(fmt::format("{} of {} shard(s) finished", staged.count, L.plan.shards.size())));
  EXPECT_EQ(staged_shards(staging_path(dst)).count, staged.count);
  // --resume with ENOSPC midway (after the reused shards): still kept, more of them or as many.
  FaultOps again;
  again.write_budget = 8192;
  {
    OpsGuard g(&again);
    r = run_plan(L.ck, L.plan, dst, resume);
  }
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::IO) << r.error().message;
  EXPECT_GE(staged_shards(staging_path(dst)).count, staged.count);
  // Space back: the resume reuses them and writes the bytes of a clean run.
  expect_kept_or_nothing(tmp.path, dst, r.error());
}

// The source changes while quantize runs (another process rewrites or touches a file): the size/mtime
// stamps taken at open differ at the end, the output is discarded (BAD_INPUT, no DST, no staging).
// The change is made from inside the run, at its first output fsync, through the I/O seam.
TEST(QuantizeFaults, SourceChangedDuringTheRunIsDetected) {
  struct Touch : fs::Ops {
    std::function<void()> change;
    std::atomic<bool> done{false};
    int fsync(int fd) override {
      if (!done.exchange(true)) change();
      return fs::Ops::fsync(fd);
    }
  };
  const std::pair<const char*, std::function<void(const stdfs::path&)>> cases[] = {
      {"shard mtime", [](const stdfs::path& src) {
         const timespec ts[2] = {{0, UTIME_OMIT}, {1'000'000'000, 0}};  // mtime := 2001-09-09
         ASSERT_EQ(::utimensat(AT_FDCWD, (src / "model-00002-of-00004.safetensors").c_str(), ts, 0), 0);
       }},
      {"shard truncated (read through the mapping after it shrank: no SIGBUS)", [](const stdfs::path& src) {
         for (const char* n : {"model-00003-of-00004.safetensors", "model-00004-of-00004.safetensors"})
           ASSERT_EQ(::truncate((src / n).c_str(), 2048), 0);
       }},
      {"copied file grows", [](const stdfs::path& src) {
         std::ofstream(src / "generation_config.json", std::ios::app) << " ";
       }},
  };
  for (const auto& [what, change] : cases) {
    SCOPED_TRACE(what);
    TempDir tmp;
    const stdfs::path src = tmp.path / "src";
    stdfs::copy(kData + "/llama", src, stdfs::copy_options::recursive);
    auto ck = Checkpoint::open(src);
    ASSERT_TRUE(ck.ok());
    auto plan = make_plan(*ck, {});
    ASSERT_TRUE(plan.ok());
    const stdfs::path dst = tmp.path / "out";
    Touch ops;
    ops.change = [&, change = change] { change(src); };
    Result<RunSummary> r = Error{};
    {
      OpsGuard g(&ops);
      r = run_plan(*ck, *plan, dst, RunOptions{});
    }
    ASSERT_TRUE(ops.done.load());
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, Errc::BAD_INPUT);
    EXPECT_THAT(r.error().message, HasSubstr("changed during the run"));
    EXPECT_FALSE(stdfs::exists(dst));
    EXPECT_FALSE(stdfs::exists(staging_path(dst))) << "staging left behind";
  }
}

TEST(QuantizeFaults, EnospcMidway) {
  FaultOps ops;
  ops.write_budget = 300 << 10;  // the llama fixture writes ~1 MB
  expect_io_failure(ops, "ENOSPC");
  EXPECT_THAT(std::string(std::strerror(ENOSPC)), HasSubstr("space"));
}

TEST(QuantizeFaults, FsyncFailure) {
  for (int ok : {0, 3}) {
    FaultOps ops;
    ops.fsync_ok = ok;
    expect_io_failure(ops, ok == 0 ? "first fsync" : "fourth fsync");
  }
}

TEST(QuantizeFaults, RenameFailure) {
  for (int ok : {0, 2, 8}) {
    FaultOps ops;
    ops.rename_ok = ok;
    expect_io_failure(ops, "rename");
  }
}

// Issue 29: a destination without room for the output is refused before any shard is written (IO, exit 4),
// with the sizes; nothing is left behind.
TEST(QuantizeFaults, NotEnoughFreeSpaceIsRefusedBeforeWriting) {
  TempDir tmp;
  auto ck = Checkpoint::open(kData + "/llama");
  ASSERT_TRUE(ck.ok());
  auto plan = make_plan(*ck, {});
  ASSERT_TRUE(plan.ok());
  struct Full : fs::Ops {
    std::atomic<int> writes{0};
    int statvfs(const char* path, struct statvfs* st) override {
      const int r = fs::Ops::statvfs(path, st);
      st->f_bavail = 3;  // three blocks left
      return r;
    }
    ssize_t pwrite(int fd, const void* b, std::size_t n, off_t off) override {
      ++writes;
      return fs::Ops::pwrite(fd, b, n, off);
    }
  } full;
  Result<RunSummary> r = Error{};
  {
    OpsGuard g(&full);
    r = run_plan(*ck, *plan, tmp.path / "out", RunOptions{});
  }
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::IO);
  EXPECT_THAT(r.error().message, HasSubstr("not enough free space for '" + (tmp.path / "out").string() +
                                           "': the output needs "));
  EXPECT_EQ(full.writes.load(), 0);
  EXPECT_TRUE(stdfs::is_empty(tmp.path));
}

// Issue 29: Ctrl-C / SIGTERM end with one line saying what was kept and how to continue (exit 128 + signal), and
// the kept shards resume to the bytes of an uninterrupted run.
TEST(QuantizeInterrupt, SigintSaysWhatWasKeptAndResumeFinishes) {
  TempDir tmp;
  const stdfs::path src = tmp.path / "src";
  make_llama(src);
  const stdfs::path ref = tmp.path / "ref";
  int st = 0;
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = spawn_quantize(src, ref, false);
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  const double full = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto want = dir_contents(ref);
  int seen = 0;
  for (const int sig : {SIGINT, SIGTERM}) {
    for (double frac : {0.3, 0.6}) {
      const stdfs::path dst = tmp.path / fmt::format("out-{}-{}", sig, static_cast<int>(frac * 10));
      const stdfs::path log = tmp.path / "err.log";
      // SIGTERM runs with --json: stdout carries the error document (tryout note: it printed nothing).
      const stdfs::path json_log = tmp.path / "out.json";
      std::vector<std::string> args{"quantize", src.string(), dst.string(), "-j", "1", "--max-memory", "1M"};
      if (sig == SIGTERM) args.emplace_back("--json");
      pid = spawn_cli(std::move(args), log, json_log);
      std::this_thread::sleep_for(std::chrono::duration<double>(full * frac));
      ::kill(pid, sig);
      ASSERT_EQ(::waitpid(pid, &st, 0), pid);
      if (WIFEXITED(st) && WEXITSTATUS(st) == 0) continue;  // finished first
      ASSERT_TRUE(WIFEXITED(st)) << "killed by the signal instead of exiting with a message";
      EXPECT_EQ(WEXITSTATUS(st), 128 + sig);
      const std::string err = slurp(log);
      EXPECT_THAT(err, HasSubstr(sig == SIGINT ? "interrupted (SIGINT)" : "interrupted (SIGTERM)"));
      if (sig == SIGTERM) {
        const auto j = nlohmann::json::parse(slurp(json_log), nullptr, false);
        ASSERT_FALSE(j.is_discarded()) << slurp(json_log);
        EXPECT_EQ(j["error"]["code"], "interrupted");
        EXPECT_EQ(j["error"]["exit_code"], 143);
        EXPECT_THAT(j["error"]["message"].get<std::string>(), HasSubstr("interrupted (SIGTERM)"));
      }
      if (stdfs::exists(dst)) continue;  // the output was complete (its own message)
      std::string out, err2;
      // None finished, or none recorded (tryout Q-L2: one written, not recorded, promised "to reuse them").
      if (err.find("before any shard was finished") != std::string::npos ||
          err.find("before any shard was recorded") != std::string::npos) {
        // Nothing to resume (tryout M-L4: "0 of N shard(s) finished, kept ... --resume to reuse them"): a plain
        // rerun takes the folder over.
        EXPECT_THAT(err, HasSubstr("nothing to resume; the next run removes " + staging_path(dst).string()));
        EXPECT_EQ(staged_shards(staging_path(dst)).recorded, 0u);
        ASSERT_EQ(run_cli("quantize " + q(src) + " " + q(dst), &out, &err2), 0) << err2;
        EXPECT_TRUE(dir_contents(dst) == want);
        continue;
      }
      ++seen;
      EXPECT_THAT(err, HasSubstr("shard(s) finished, kept in " + staging_path(dst).string()));
      EXPECT_THAT(err, HasSubstr("--resume"));
      ASSERT_EQ(run_cli("quantize " + q(src) + " " + q(dst) + " --resume", &out, &err2), 0) << err2;
      EXPECT_TRUE(dir_contents(dst) == want);
    }
  }
  EXPECT_GT(seen, 0) << "no signal landed mid-run (full run took " << full << " s)";
}

TEST(QuantizeFaults, FinalRenameFailure) {
  // Count the renames of a clean run, then fail exactly the last one (staging -> DST).
  TempDir tmp;
  auto ck = Checkpoint::open(kData + "/llama");
  ASSERT_TRUE(ck.ok());
  auto plan = make_plan(*ck, {});
  ASSERT_TRUE(plan.ok());
  struct Count : fs::Ops {
    std::atomic<int> n{0};
    int rename(const char* a, const char* b) override {
      ++n;
      return fs::Ops::rename(a, b);
    }
  } count;
  {
    OpsGuard g(&count);
    ASSERT_TRUE(run_plan(*ck, *plan, tmp.path / "clean", RunOptions{}).ok());
  }
  FaultOps ops;
  ops.rename_ok = count.n.load() - 1;
  TempDir tmp2;
  Result<RunSummary> r = Error{};
  {
    OpsGuard g(&ops);
    r = run_plan(*ck, *plan, tmp2.path / "out", RunOptions{});
  }
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::IO);
  expect_kept_or_nothing(tmp2.path, tmp2.path / "out", r.error());  // every shard kept: the resume reuses all
}

// The staging locks go through the seam: a file system without flock (ENOLCK) is an IO error that
// leaves nothing behind.
TEST(QuantizeFaults, LockFailureIsIo) {
  struct NoLocks : fs::Ops {
    int fail_from = 0;  // flock calls before the failure
    std::atomic<int> n{0};
    int flock(int fd, int op) override {
      if (!(op & LOCK_UN) && n++ >= fail_from) {
        errno = ENOLCK;
        return -1;
      }
      return fs::Ops::flock(fd, op);
    }
  };
  auto ck = Checkpoint::open(kData + "/llama");
  ASSERT_TRUE(ck.ok());
  auto plan = make_plan(*ck, {});
  ASSERT_TRUE(plan.ok());
  for (int from : {0, 1}) {  // the parent-folder lock, then the staging marker's
    SCOPED_TRACE(from);
    TempDir tmp;
    NoLocks ops;
    ops.fail_from = from;
    Result<RunSummary> r = Error{};
    {
      OpsGuard g(&ops);
      r = run_plan(*ck, *plan, tmp.path / "out", RunOptions{});
    }
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, Errc::IO);
    EXPECT_THAT(r.error().message, HasSubstr("No locks available"));
    EXPECT_TRUE(stdfs::is_empty(tmp.path));
  }
}

// Tryout O-M2: `DST/` (shell completion's trailing slash) is the folder DST, as SRC/ is SRC.
TEST(QuantizeFaults, ADestinationWithATrailingSlashIsThatFolder) {
  TempDir tmp;
  std::string out, err;
  const std::string dst = (tmp.path / "out").string() + "//";
  ASSERT_EQ(run_cli("quantize " + q(kData + "/llama/") + " " + q(dst) + " --dry-run", &out, &err), 0) << err;
  ASSERT_EQ(run_cli("quantize " + q(kData + "/llama/") + " " + q(dst), &out, &err), 0) << err;
  EXPECT_TRUE(stdfs::exists(tmp.path / "out" / "config.json"));
  EXPECT_FALSE(stdfs::exists(staging_path(tmp.path / "out")));
  // Again: it exists now, refused as such (exit 3), not as a name it lacks.
  EXPECT_EQ(run_cli("quantize " + q(kData + "/llama") + " " + q(dst), &out, &err), 3) << err;
  EXPECT_THAT(err, HasSubstr("already exists"));
  EXPECT_EQ(run_cli("quantize " + q(kData + "/llama") + " /", &out, &err), 2) << err;
  EXPECT_THAT(err, HasSubstr("names no folder of its own"));
}

TEST(QuantizeFaults, DestinationRefusals) {
  TempDir tmp;
  auto ck = Checkpoint::open(kData + "/llama");
  ASSERT_TRUE(ck.ok());
  auto plan = make_plan(*ck, {});
  ASSERT_TRUE(plan.ok());
  auto r = run_plan(*ck, *plan, tmp.path, RunOptions{});  // exists
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::BAD_INPUT);
  EXPECT_THAT(r.error().message, HasSubstr("already exists"));
  r = run_plan(*ck, *plan, kData + "/llama/q", RunOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::BAD_INPUT);
  EXPECT_THAT(r.error().message, HasSubstr("inside the source"));
  r = run_plan(*ck, *plan, kData + "/llama/", RunOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::BAD_INPUT);
  EXPECT_FALSE(stdfs::exists(kData + "/llama/q"));
}

}  // namespace
}  // namespace fp4forge::quant
