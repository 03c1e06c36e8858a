// Repo ids on the command line (issue 18): a fake Hugging Face hub cache built from tests/data/llama (blobs
// + snapshot links), then inspect / doctor / quantize (default DST) / verify / diff / plan name it as
// acme/tiny-llama; the cache is byte-for-byte unchanged afterwards (no new file, no mtime moved). Errors:
// a repo that is not cached, a partial download, doctor --fix on the cache, a DST inside the cache.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "hf_cache_fake.h"
#include "test_util.h"

namespace fp4forge {
namespace {

namespace sfs = std::filesystem;
using testutil::q;
using Json = nlohmann::json;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

class HfCacheCli : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_ = tmp_.path / "hub";
    work_ = tmp_.path / "work";
    sfs::create_directories(work_);
    repo_ = testutil::make_fake_hub_repo(cache_, "acme", "tiny-llama", testutil::kData + "/llama",
                                         testutil::fake_commit(11));
  }
  /** Runs the CLI in work_ with HF_HUB_CACHE=cache_ (and no other cache variable from the caller). */
  int run(const std::string& args, std::string* out, std::string* err) {
    return testutil::run_cli_with("cd " + q(work_) + " && env -u HUGGINGFACE_HUB_CACHE -u HF_HOME HF_HUB_CACHE=" + q(cache_),
                                  args, out, err);
  }
  testutil::TempDir tmp_;
  sfs::path cache_, work_;
  testutil::FakeHubRepo repo_;
};

TEST_F(HfCacheCli, EveryReadingCommandTakesARepoIdAndNeverWritesTheCache) {
  const auto before = testutil::tree_state(cache_);
  std::string out, err;

  ASSERT_EQ(run("inspect acme/tiny-llama --json", &out, &err), 0) << err;
  auto j = Json::parse(out);
  EXPECT_EQ(j["dir"], repo_.snapshot.string());
  EXPECT_EQ(j["family"], "llama");
  EXPECT_EQ(j["hub"]["repo_id"], "acme/tiny-llama");
  EXPECT_EQ(j["hub"]["revision"], "main");
  EXPECT_EQ(j["hub"]["commit"], repo_.commit);
  EXPECT_EQ(j["hub"]["cache_dir_from"], "HF_HUB_CACHE");
  EXPECT_EQ(j["hub"]["snapshot"], repo_.snapshot.string());
  ASSERT_EQ(run("inspect acme/tiny-llama@" + repo_.commit, &out, &err), 0) << err;
  EXPECT_TRUE(contains(out, "checkpoint   " + repo_.snapshot.string())) << out;
  EXPECT_TRUE(contains(err, "fp4forge: note: acme/tiny-llama@" + repo_.commit + ": Hugging Face cache snapshot")) << err;
  // A folder argument: the same report, "hub": null.
  ASSERT_EQ(run("inspect " + q(testutil::kData + "/llama") + " --json", &out, &err), 0) << err;
  EXPECT_TRUE(Json::parse(out)["hub"].is_null());

  ASSERT_EQ(run("doctor acme/tiny-llama --json", &out, &err), 0) << out << err;
  EXPECT_EQ(Json::parse(out)["hub"]["repo_id"], "acme/tiny-llama");
  ASSERT_EQ(run("doctor acme/tiny-llama --fix --dry-run", &out, &err), 0) << err;

  // quantize ORG/NAME without DST writes ./NAME-NVFP4A16 in the current folder.
  ASSERT_EQ(run("quantize acme/tiny-llama --json --no-progress", &out, &err), 0) << err;
  j = Json::parse(out);
  EXPECT_EQ(j["destination"], (work_ / "tiny-llama-NVFP4A16").string());
  EXPECT_EQ(j["source"], repo_.snapshot.string());
  EXPECT_EQ(j["source_hub"]["repo_id"], "acme/tiny-llama");
  ASSERT_TRUE(sfs::is_regular_file(work_ / "tiny-llama-NVFP4A16" / "config.json"));
  // The copied side file is a file, not a link into the cache.
  EXPECT_TRUE(sfs::is_regular_file(sfs::symlink_status(work_ / "tiny-llama-NVFP4A16" / "generation_config.json")));
  ASSERT_EQ(run("quantize acme/tiny-llama --dry-run --json", &out, &err), 0) << err;
  EXPECT_EQ(Json::parse(out)["source_hub"]["commit"], repo_.commit);
  // With rules, every scheme asked for names the default DST (the default first, each once).
  ASSERT_EQ(run("quantize acme/tiny-llama --json --no-progress --scheme-for attention=fp8-dynamic "
                "--scheme-for dense_mlp=nvfp4a16",
                &out, &err),
            0)
      << err;
  EXPECT_EQ(Json::parse(out)["destination"], (work_ / "tiny-llama-NVFP4A16-FP8_DYNAMIC").string());
  // A DST the user gives is echoed as given, relative like the argument (docs/cli/README.md "Paths").
  ASSERT_EQ(run("quantize acme/tiny-llama rel-out --json --no-progress", &out, &err), 0) << err;
  EXPECT_EQ(Json::parse(out)["destination"], "rel-out");
  EXPECT_TRUE(sfs::is_regular_file(work_ / "rel-out" / "config.json"));
  // A second run refuses the existing default DST, like any DST.
  EXPECT_EQ(run("quantize acme/tiny-llama", &out, &err), 3);
  EXPECT_TRUE(contains(err, "tiny-llama-NVFP4A16' already exists")) << err;

  ASSERT_EQ(run("verify tiny-llama-NVFP4A16 --against acme/tiny-llama --json", &out, &err), 0) << out.substr(0, 600) << err;
  j = Json::parse(out);
  EXPECT_TRUE(j["hub"].is_null());
  EXPECT_EQ(j["against_hub"]["repo_id"], "acme/tiny-llama");

  ASSERT_EQ(run("diff acme/tiny-llama " + q(testutil::kData + "/llama") + " --json", &out, &err), 0) << out.substr(0, 600);
  j = Json::parse(out);
  EXPECT_EQ(j["a_hub"]["commit"], repo_.commit);
  EXPECT_TRUE(j["b_hub"].is_null());

  ASSERT_EQ(run("plan --seat s=acme/tiny-llama:max_model_len=1024 --gpu 0=24GiB --json --emit-compose deploy", &out, &err), 0)
      << out.substr(0, 600) << err;
  j = Json::parse(out);
  EXPECT_EQ(j["seats"][0]["dir"], repo_.snapshot.string());
  EXPECT_EQ(j["seats"][0]["hub"]["repo_id"], "acme/tiny-llama");
  // The container sees the whole repo folder, so the snapshot's links into ../../blobs resolve there.
  const std::string compose = testutil::slurp(work_ / "deploy" / "s" / "compose.yaml");
  EXPECT_TRUE(contains(compose, sfs::canonical(repo_.repo_dir).string() + ":/models/s:ro")) << compose;
  EXPECT_TRUE(contains(compose, "\"/models/s/snapshots/" + repo_.commit + "\"")) << compose;

  EXPECT_EQ(testutil::tree_state(cache_), before) << "the cache was written";
}

TEST_F(HfCacheCli, TheCacheIsReadOnly) {
  const auto before = testutil::tree_state(cache_);
  std::string out, err;
  // doctor --fix on a snapshot: refused before anything is read or written, with the way out.
  EXPECT_EQ(run("doctor acme/tiny-llama --fix --json", &out, &err), 2) << err;
  EXPECT_TRUE(contains(err, "is a snapshot in the Hugging Face cache")) << err;
  EXPECT_TRUE(contains(err, "--dry-run")) << err;
  EXPECT_TRUE(contains(err, "cp -rL")) << err;
  EXPECT_EQ(Json::parse(out)["error"]["code"], "usage");
  // The same for the snapshot given as a path.
  EXPECT_EQ(run("doctor " + q(repo_.snapshot) + " --fix", &out, &err), 2) << err;
  // quantize into the cache is refused, for a repo id and for a snapshot path.
  EXPECT_EQ(run("quantize acme/tiny-llama " + q(cache_ / "out"), &out, &err), 3) << err;
  EXPECT_TRUE(contains(err, "is inside the Hugging Face cache '" + sfs::canonical(cache_).string() + "'")) << err;
  EXPECT_EQ(run("quantize " + q(repo_.snapshot) + " " + q(repo_.repo_dir / "q"), &out, &err), 3) << err;
  EXPECT_EQ(testutil::tree_state(cache_), before) << "the cache was written";
  EXPECT_TRUE(sfs::is_empty(work_));
}

TEST_F(HfCacheCli, LookupErrorsSayWhereTheyLooked) {
  std::string out, err;
  EXPECT_EQ(run("inspect acme/not-cached --json", &out, &err), 4);
  EXPECT_TRUE(contains(err, "fp4forge: error: 'acme/not-cached' is no local folder, and not in the Hugging Face cache: "
                                "no repo folder '" + (cache_ / "models--acme--not-cached").string() + "' (HF_HUB_CACHE='" +
                                cache_.string() + "')"))
      << err;
  EXPECT_TRUE(contains(err, "hf download acme/not-cached")) << err;
  EXPECT_EQ(Json::parse(out)["error"]["code"], "io");
  // A repo id the cache holds in another spelling, or a typo away: named as cached, no download offered.
  EXPECT_EQ(run("inspect ACME/Tiny-Llama", &out, &err), 4);
  EXPECT_TRUE(contains(err, "but the cache holds 'acme/tiny-llama'; hint: name it as cached, acme/tiny-llama")) << err;
  EXPECT_FALSE(contains(err, "hf download")) << err;
  EXPECT_EQ(run("inspect acme/tiny-lama@main", &out, &err), 4);
  EXPECT_TRUE(contains(err, "hint: name it as cached, acme/tiny-llama@main")) << err;
  EXPECT_EQ(run("verify acme/tiny-llama@v9", &out, &err), 4);
  EXPECT_TRUE(contains(err, "no ref file '" + (repo_.repo_dir / "refs" / "v9").string() + "' (cached refs: main")) << err;
  EXPECT_EQ(run("plan --seat s=acme/not-cached", &out, &err), 4);
  EXPECT_TRUE(contains(err, "seat 's': 'acme/not-cached' is no local folder")) << err;
  // A missing relative folder that is no repo id keeps the old message.
  EXPECT_EQ(run("inspect missing-dir", &out, &err), 4);
  EXPECT_TRUE(contains(err, "cannot open checkpoint 'missing-dir': No such file or directory")) << err;
  // A local folder named like the repo id wins (documented rule).
  sfs::create_directories(work_ / "acme");
  sfs::copy(testutil::kData + "/qwen3", work_ / "acme" / "tiny-llama", sfs::copy_options::recursive);
  ASSERT_EQ(run("inspect acme/tiny-llama --json", &out, &err), 0) << err;
  EXPECT_EQ(Json::parse(out)["family"], "qwen3");
  EXPECT_TRUE(Json::parse(out)["hub"].is_null());
}

TEST_F(HfCacheCli, PartialDownloadsAreReportedNotCrashed) {
  std::string out, err;
  // A shard whose blob never arrived: a warning naming it, then the checkpoint error for that shard.
  const std::string shard = "model-00002-of-00004.safetensors";
  sfs::remove(repo_.snapshot / sfs::read_symlink(repo_.snapshot / shard));
  EXPECT_EQ(run("inspect acme/tiny-llama", &out, &err), 3) << err;
  EXPECT_TRUE(contains(err, "link to blobs missing from the cache: " + shard)) << err;
  EXPECT_TRUE(contains(err, "shard '" + shard + "' is a symlink that does not resolve")) << err;
  // The index names a shard that is not in the snapshot at all.
  sfs::remove(repo_.snapshot / shard);
  EXPECT_EQ(run("quantize acme/tiny-llama --dry-run", &out, &err), 3) << err;
  EXPECT_TRUE(contains(err, "shard '" + shard + "' does not exist in '" + repo_.snapshot.string() + "'")) << err;
}

}  // namespace
}  // namespace fp4forge
