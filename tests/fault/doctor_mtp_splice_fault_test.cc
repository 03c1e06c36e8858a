// doctor's MTP splice under I/O faults (the fs:: seam) and crashes: a read-only target (EROFS) is an I/O
// error that writes nothing; a failure at any rename of the splice leaves the target as it was (changes
// undone, backups removed); a process killed at any rename leaves a checkpoint that loads as before or as
// spliced, and running the splice again completes it to exactly the result of an uninterrupted run.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "fp4forge/doctor/doctor.h"
#include "fp4forge/quantize/mtp_splice.h"
#include "fp4forge/quantize/run.h"
#include "fp4forge/safetensors/checkpoint.h"
#include "fp4forge/util/backup.h"
#include "fp4forge/util/fs.h"
#include "test_util.h"
#include "unit/doctor_test_util.h"

namespace fp4forge {
namespace {

namespace stdfs = std::filesystem;
using testutil::slurp;
using testutil::TempDir;

const std::string kFixture = "qwen3_5-moe-mm-mtp2d";
std::string source() { return testutil::kData + "/" + kFixture; }

class FaultOps : public fs::Ops {
 public:
  int create_errno = 0;      ///< open(O_CREAT) fails with this errno
  int fail_rename = -1;      ///< the rename with this index (0-based) fails with EIO
  int crash_at_rename = -1;  ///< the process exits (as if killed) instead of this rename
  int renames = 0;
  int open(const char* path, int flags, mode_t mode) override {
    if ((flags & O_CREAT) && create_errno) {
      errno = create_errno;
      return -1;
    }
    return Ops::open(path, flags, mode);
  }
  int rename(const char* from, const char* to) override {
    const int k = renames++;
    if (k == crash_at_rename) ::_exit(42);
    if (k == fail_rename) {
      errno = EIO;
      return -1;
    }
    return Ops::rename(from, to);
  }
};

struct OpsGuard {
  explicit OpsGuard(fs::Ops* o) : prev(fs::set_ops(o)) {}
  ~OpsGuard() { fs::set_ops(prev); }
  fs::Ops* prev;
};

/** name -> bytes of every regular file, without backups and unfinished temporaries when `clean`. */
std::map<std::string, std::string> files(const stdfs::path& dir, bool clean = false) {
  std::map<std::string, std::string> m;
  for (const auto& e : stdfs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (clean && (backup::is_backup_name(n) || n.find(".partial") != std::string::npos)) continue;
    if (e.is_regular_file()) m[n] = slurp(e.path());
  }
  return m;
}

std::set<std::string> tensor_names(const stdfs::path& dir) {
  std::set<std::string> s;
  auto ck = Checkpoint::open(dir);
  EXPECT_TRUE(ck.ok()) << (ck.ok() ? "" : ck.error().describe());
  if (ck.ok())
    for (const auto& t : ck->tensors()) s.insert(t.name);
  return s;
}

/** The quantization of the MTP-stripped fixture (the target), and of the original (the expected result). */
struct Targets {
  TempDir tmp;
  doctor_test::Fixture stripped{kFixture};
  stdfs::path quantized_stripped() const { return tmp.path / "qs"; }
  stdfs::path quantized_full() const { return tmp.path / "full"; }
  Targets() {
    stripped.remove_tensors("mtp.");
    for (auto [src, dst] : {std::pair{stripped.dir(), quantized_stripped()}, std::pair{stdfs::path(source()), quantized_full()}}) {
      quant::QuantizeParams p;
      p.src = src;
      p.dst = dst;
      p.run.jobs = 1;
      auto r = quant::quantize(p);
      EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().describe());
    }
  }
  /** A fresh copy of the quantized stripped checkpoint. */
  stdfs::path copy(const std::string& name) const {
    const auto d = tmp.path / name;
    stdfs::copy(quantized_stripped(), d);
    return d;
  }
};

int count_renames(const Targets& t) {
  const auto d = t.copy("count");
  FaultOps f;
  OpsGuard g(&f);
  auto r = quant::splice_mtp(d, source());
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().describe());
  return f.renames;
}

TEST(MtpSpliceFault, ReadOnlyTargetIsAnIoErrorAndWritesNothing) {
  Targets t;
  const auto d = t.copy("ro");
  const auto before = files(d);
  FaultOps f;
  f.create_errno = EROFS;
  {
    OpsGuard g(&f);
    doctor::DoctorOptions o;
    o.fix = true;
    o.mtp_from = source();
    auto r = doctor::run_doctor(d, o);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, Errc::IO);
    EXPECT_NE(r.error().message.find("Read-only file system"), std::string::npos) << r.error().message;
  }
  EXPECT_EQ(files(d), before);
}

TEST(MtpSpliceFault, AFailedRenameAnywhereLeavesTheTargetAsItWas) {
  Targets t;
  const int n = count_renames(t);
  EXPECT_EQ(n, 5);  // two backups, config.json, the shard, the index
  for (int k = 0; k < n; ++k) {
    SCOPED_TRACE("rename " + std::to_string(k));
    const auto d = t.copy("fail" + std::to_string(k));
    const auto before = files(d);
    {
      FaultOps f;
      f.fail_rename = k;
      OpsGuard g(&f);
      auto r = quant::splice_mtp(d, source());
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.error().code, Errc::IO) << r.error().message;
    }
    EXPECT_EQ(files(d), before) << "not restored";
    auto r = quant::splice_mtp(d, source());
    ASSERT_TRUE(r.ok()) << r.error().describe();
    EXPECT_EQ(files(d, true), files(t.quantized_full()));
  }
}

TEST(MtpSpliceFault, AKillAtAnyRenameIsCompletedByARerun) {
  Targets t;
  const int n = count_renames(t);
  const auto before = tensor_names(t.quantized_stripped());
  const auto after = tensor_names(t.quantized_full());
  for (int k = 0; k < n; ++k) {
    SCOPED_TRACE("killed at rename " + std::to_string(k));
    const auto d = t.copy("kill" + std::to_string(k));
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      FaultOps f;
      f.crash_at_rename = k;
      fs::set_ops(&f);
      (void)quant::splice_mtp(d, source());
      ::_exit(0);
    }
    int st = 0;
    ASSERT_EQ(::waitpid(pid, &st, 0), pid);
    ASSERT_TRUE(WIFEXITED(st));
    EXPECT_EQ(WEXITSTATUS(st), 42);
    // The checkpoint loads, as it was or as spliced.
    const auto now = tensor_names(d);
    EXPECT_TRUE(now == before || now == after);
    // A rerun completes it.
    auto r = quant::splice_mtp(d, source());
    ASSERT_TRUE(r.ok()) << r.error().describe();
    EXPECT_EQ(files(d, true), files(t.quantized_full()));
    for (const auto& [name, bytes] : files(d))  // round-3 B9, R4-B16: the kill's temporaries are gone
      EXPECT_TRUE(name.find(".partial") == std::string::npos) << name << " left after the rerun";
    doctor::DoctorOptions o;
    auto rep = doctor::run_doctor(d, o);
    ASSERT_TRUE(rep.ok());
    EXPECT_EQ(doctor::exit_code(*rep), 0) << doctor::to_text(*rep);
  }
}

}  // namespace
}  // namespace fp4forge
