// Killed edits of a user's files (R4-B16, round-3 B9): a gateway edit (swap, add, retire, rollback) or a doctor
// --fix killed at any rename (the fs:: seam exits the process there, as SIGKILL would) leaves its temporaries
// beside the user's files; the next run of the same edit finishes it and removes them, so that after a
// successful rerun no `.partial` name is left and the files are those of an uninterrupted run.
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "fp4forge/doctor/doctor.h"
#include "fp4forge/gateway/gateway.h"
#include "fp4forge/util/fs.h"
#include "test_util.h"
#include "unit/gateway_test_util.h"

namespace fp4forge {
namespace {

namespace stdfs = std::filesystem;
using testutil::slurp;
using testutil::TempDir;

class KillAtRename : public fs::Ops {
 public:
  explicit KillAtRename(int at) : at_(at) {}
  int rename(const char* from, const char* to) override {
    if (renames++ == at_) ::_exit(42);
    return Ops::rename(from, to);
  }
  int renames = 0;

 private:
  int at_;
};

/** Runs `edit` in a child killed at rename `k`; true when the kill landed (the edit reached that rename). */
bool killed_at(int k, const std::function<void()>& edit) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    KillAtRename f(k);
    fs::set_ops(&f);
    edit();
    ::_exit(0);
  }
  int st = 0;
  EXPECT_EQ(::waitpid(pid, &st, 0), pid);
  return WIFEXITED(st) && WEXITSTATUS(st) == 42;
}

std::vector<std::string> partials(const stdfs::path& dir) {
  std::vector<std::string> v;
  for (const auto& e : stdfs::directory_iterator(dir))
    if (fs::is_partial_name(e.path().filename().string())) v.push_back(e.path().filename().string());
  return v;
}

using gateway::gtest_util::unprobed;

const char* kConfig =
    "model_list:\n  - model_name: chat\n    litellm_params:\n      model: hosted_vllm/org/a\n      api_base: "
    "http://127.0.0.1:1/v1\n  - model_name: other\n    litellm_params:\n      model: hosted_vllm/org/b\n";

TEST(GatewayEditFault, AKillAtAnyRenameIsFinishedAndCleanedByTheRerun) {
  struct Case {
    const char* name;
    std::function<Result<gateway::EditResult>(const stdfs::path&)> edit;
    const char* expect;  // in the config after the rerun
  };
  const std::vector<Case> cases{
      {"swap",
       [](const stdfs::path& c) { return gateway::gateway_swap(c, unprobed<gateway::SwapOptions>("chat", "hosted_vllm/new")); },
       "model: hosted_vllm/new"},
      {"add",
       [](const stdfs::path& c) { return gateway::gateway_add(c, unprobed<gateway::AddOptions>("third", "hosted_vllm/third")); },
       "model_name: third"},
      {"retire", [](const stdfs::path& c) { return gateway::gateway_retire(c, "chat"); }, "fp4forge-retired"},
      {"rollback", [](const stdfs::path& c) { return gateway::gateway_rollback(c); }, "hosted_vllm/org/backup"},
  };
  for (const Case& k : cases) {
    int landed = 0;
    for (int at = 0; at < 4; ++at) {
      SCOPED_TRACE(std::string(k.name) + " killed at rename " + std::to_string(at));
      TempDir t;
      const stdfs::path cfg = t.path / "litellm.yaml";
      std::ofstream(cfg, std::ios::binary) << kConfig;
      std::string bak = kConfig;
      bak.replace(bak.find("hosted_vllm/org/a"), 17, "hosted_vllm/org/backup");
      std::ofstream(t.path / "litellm.yaml.bak-fp4forge-20250101-000000", std::ios::binary) << bak;
      if (!killed_at(at, [&] { (void)k.edit(cfg); })) continue;  // fewer renames than `at`
      ++landed;
      EXPECT_FALSE(partials(t.path).empty()) << "the kill left nothing: the case tests nothing";
      auto r = k.edit(cfg);
      ASSERT_TRUE(r.ok()) << r.error().message;
      EXPECT_NE(slurp(cfg).find(k.expect), std::string::npos) << slurp(cfg);
      EXPECT_EQ(partials(t.path), std::vector<std::string>{});
    }
    EXPECT_EQ(landed, 2) << k.name << ": a backup and the config";
  }
}

TEST(DoctorFixFault, AKillAtAnyRenameIsFinishedAndCleanedByTheRerun) {
  auto prepare = [](const stdfs::path& d) {
    stdfs::copy(stdfs::path(testutil::kData) / "llama", d, stdfs::copy_options::recursive);
    const stdfs::path idx = d / "model.safetensors.index.json";
    auto j = nlohmann::json::parse(slurp(idx));
    j["metadata"]["total_size"] = 1;
    std::ofstream(idx, std::ios::binary) << j.dump();
    const stdfs::path tok = d / "tokenizer.json";
    auto tj = nlohmann::json::parse(slurp(tok));
    tj["truncation"] = {{"max_length", 8}, {"strategy", "LongestFirst"}, {"stride", 0}, {"direction", "Right"}};
    std::ofstream(tok, std::ios::binary) << tj.dump();
  };
  doctor::DoctorOptions fix;
  fix.fix = true;
  int landed = 0;
  for (int at = 0; at < 6; ++at) {
    SCOPED_TRACE("killed at rename " + std::to_string(at));
    TempDir t;
    const stdfs::path d = t.path / "ckpt";
    prepare(d);
    if (!killed_at(at, [&] { (void)doctor::run_doctor(d, fix); })) continue;
    ++landed;
    EXPECT_FALSE(partials(d).empty()) << "the kill left nothing: the case tests nothing";
    auto r = doctor::run_doctor(d, fix);
    ASSERT_TRUE(r.ok()) << r.error().describe();
    EXPECT_EQ(doctor::exit_code(*r), 0) << doctor::to_text(*r);
    EXPECT_EQ(partials(d), std::vector<std::string>{});
    auto again = doctor::run_doctor(d, doctor::DoctorOptions{});
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(doctor::exit_code(*again), 0) << doctor::to_text(*again);
  }
  EXPECT_EQ(landed, 4);  // two backups, two files
}

}  // namespace
}  // namespace fp4forge
