// plan's external calls go through the I/O seam (issue 14): nvidia-smi via Ops::popen, the compose
// output folders via fs::make_directories, so failures there are testable and reported, not crashes.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdio>
#include <string>

#include "fp4forge/kvplan/gpu.h"
#include "fp4forge/util/fs.h"

namespace fp4forge::kvplan {
namespace {

struct OpsGuard {
  fs::Ops* prev;
  explicit OpsGuard(fs::Ops* o) : prev(fs::set_ops(o)) {}
  ~OpsGuard() { fs::set_ops(prev); }
};

TEST(KvplanSeam, NvidiaSmiFailuresAreIoErrors) {
  struct FakeSmi : fs::Ops {
    std::string output;
    int exit_status = 0;
    bool fail_popen = false;
    std::string command;
    std::FILE* popen(const char* cmd, const char* mode) override {
      command = cmd;
      if (fail_popen) {
        errno = EMFILE;
        return nullptr;
      }
      const std::string sh = "printf '%s' '" + output + "'; exit " + std::to_string(exit_status);
      return fs::Ops::popen(sh.c_str(), mode);
    }
  };
  {
    FakeSmi f;
    f.fail_popen = true;
    OpsGuard g(&f);
    auto r = query_nvidia_smi();
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, Errc::IO);
    EXPECT_NE(r.error().message.find("--gpu ID=TOTAL"), std::string::npos) << r.error().message;
    EXPECT_NE(f.command.find("nvidia-smi"), std::string::npos);
  }
  {
    FakeSmi f;
    f.exit_status = 9;
    OpsGuard g(&f);
    auto r = query_nvidia_smi();
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, Errc::IO);
    EXPECT_NE(r.error().message.find("exit status 9"), std::string::npos) << r.error().message;
  }
  {
    FakeSmi f;
    f.output = "0, NVIDIA H200, 143771, 1024\n";
    OpsGuard g(&f);
    auto r = query_nvidia_smi();
    ASSERT_TRUE(r.ok()) << r.error().message;
    ASSERT_EQ(r->size(), 1u);
    EXPECT_EQ((*r)[0].total_bytes, 143771ull << 20);
  }
}

}  // namespace
}  // namespace fp4forge::kvplan
