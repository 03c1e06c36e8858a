// hf_cache: repo ids resolved offline in a fake Hugging Face hub cache built in a temp dir: the repo-id
// grammar, the cache folder's environment precedence, refs, commits, every way a lookup fails (and where the
// message says it looked), partial downloads, local folders beating repo ids, and no write into the cache.
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "fp4forge/util/hf_cache.h"
#include "hf_cache_fake.h"
#include "test_util.h"

namespace fp4forge {
namespace {

namespace sfs = std::filesystem;
using testutil::fake_commit;
using testutil::make_fake_hub_repo;

hf_cache::EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(HfCacheRepoId, TheGrammarOfValidateRepoId) {
  for (const std::string ok : {"org/name", "Qwen/Qwen3-8B", "a/b", "meta-llama/Llama-3.1-8B-Instruct", "user_1/x.y_z-9",
                               "_a/b_", "a.b/c", "1/2"}) {
    EXPECT_EQ(hf_cache::repo_id_problem(ok), "") << ok;
  }
  EXPECT_EQ(hf_cache::repo_id_problem("a/" + std::string(96, 'x')), "");
  const std::map<std::string, std::string> bad = {
      {"name", "exactly one '/'"},
      {"a/b/c", "exactly one '/'"},
      {"/b", "namespace is empty"},
      {"a/", "name is empty"},
      {"-a/b", "starts or ends"},
      {"a/b-", "starts or ends"},
      {"a/.b", "starts or ends"},
      {"a./b", "starts or ends"},
      {"a--b/c", "'--' and '..'"},
      {"a/b--c", "'--' and '..'"},
      {"a/b..c", "'--' and '..'"},
      {"a/b.git", "'.git'"},
      {"a/b c", "holds ' '"},
      {"a/b@main", "holds '@'"},
      {"a/" + std::string(97, 'x'), "97 characters"},
  };
  for (const auto& [id, why] : bad) EXPECT_TRUE(contains(hf_cache::repo_id_problem(id), why)) << id << ": " << hf_cache::repo_id_problem(id);
}

TEST(HfCacheDir, EnvironmentPrecedenceAsHuggingfaceHub) {
  const std::map<std::string, std::string> all = {{"HF_HUB_CACHE", "/c/hub-cache"},
                                                  {"HUGGINGFACE_HUB_CACHE", "/c/legacy"},
                                                  {"HF_HOME", "/c/home"},
                                                  {"XDG_CACHE_HOME", "/c/xdg"},
                                                  {"HOME", "/home/u"}};
  auto pick = [&](std::initializer_list<const char*> keep) {
    std::map<std::string, std::string> m;
    for (const char* k : keep) m[k] = all.at(k);
    return hf_cache::cache_dir(env_of(m));
  };
  auto c = pick({"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "HOME"});
  EXPECT_EQ(c.dir, "/c/hub-cache");
  EXPECT_EQ(c.chosen_by, "HF_HUB_CACHE");
  c = pick({"HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "HOME"});
  EXPECT_EQ(c.dir, "/c/legacy");
  EXPECT_EQ(c.chosen_by, "HUGGINGFACE_HUB_CACHE");
  c = pick({"HF_HOME", "XDG_CACHE_HOME", "HOME"});
  EXPECT_EQ(c.dir, "/c/home/hub");
  EXPECT_EQ(c.chosen_by, "HF_HOME");
  EXPECT_TRUE(contains(c.how, "HF_HUB_CACHE and HUGGINGFACE_HUB_CACHE unset, HF_HOME='/c/home'")) << c.how;
  c = pick({"XDG_CACHE_HOME", "HOME"});
  EXPECT_EQ(c.dir, "/c/xdg/huggingface/hub");
  EXPECT_EQ(c.chosen_by, "XDG_CACHE_HOME");
  c = pick({"HOME"});
  EXPECT_EQ(c.dir, "/home/u/.cache/huggingface/hub");
  EXPECT_EQ(c.chosen_by, "default");
  EXPECT_TRUE(contains(c.how, "XDG_CACHE_HOME unset: the default")) << c.how;
}

TEST(HfCacheDir, TildeAndVariablesExpandAsPython) {
  auto dir = [](std::map<std::string, std::string> m) { return hf_cache::cache_dir(env_of(std::move(m))).dir.string(); };
  EXPECT_EQ(dir({{"HOME", "/home/u/"}, {"HF_HOME", "~/hf"}}), "/home/u/hf/hub");
  EXPECT_EQ(dir({{"HOME", "/home/u"}, {"HF_HUB_CACHE", "~"}}), "/home/u");
  EXPECT_EQ(dir({{"HOME", "/home/u"}, {"BASE", "/b"}, {"HF_HUB_CACHE", "$BASE/c"}}), "/b/c");
  EXPECT_EQ(dir({{"HOME", "/home/u"}, {"BASE", "/b"}, {"HF_HUB_CACHE", "${BASE}x/c"}}), "/bx/c");
  EXPECT_EQ(dir({{"HOME", "/home/u"}, {"HF_HUB_CACHE", "$UNSET/c${ALSO}"}}), "$UNSET/c${ALSO}");  // kept, as Python does
  EXPECT_EQ(dir({{"HOME", "/home/u"}, {"HF_HUB_CACHE", "/a$/b"}}), "/a$/b");
  // The legacy variable is expanded too (HF_HUB_CACHE's default goes through expanduser / expandvars).
  EXPECT_EQ(dir({{"HOME", "/home/u"}, {"HUGGINGFACE_HUB_CACHE", "~/legacy"}}), "/home/u/legacy");
  // XDG_CACHE_HOME is joined before HF_HOME's expansion.
  EXPECT_EQ(dir({{"HOME", "/home/u"}, {"XDG_CACHE_HOME", "~/xdg"}}), "/home/u/xdg/huggingface/hub");
}

/** A fake cache with org/name at refs/main and refs/v1 (two commits) and a nested refs/pr/1. */
class HfCacheResolve : public ::testing::Test {
 protected:
  void SetUp() override {
    src_ = tmp_.path / "src";
    sfs::create_directories(src_);
    std::ofstream(src_ / "config.json") << "{\"model_type\":\"llama\"}";
    std::ofstream(src_ / "model.safetensors") << "weights";
    std::ofstream(src_ / "tokenizer.json") << "{}";
    cache_ = tmp_.path / "hub";
    main_ = make_fake_hub_repo(cache_, "org", "name", src_, fake_commit(1), "main");
    v1_ = make_fake_hub_repo(cache_, "org", "name", src_, fake_commit(2), "v1");
    sfs::create_directories(main_.repo_dir / "refs" / "pr");
    std::ofstream(main_.repo_dir / "refs" / "pr" / "1", std::ios::binary) << fake_commit(2);
    env_ = env_of({{"HF_HUB_CACHE", cache_.string()}, {"HOME", (tmp_.path / "home").string()}});
  }
  testutil::TempDir tmp_;
  sfs::path src_, cache_;
  testutil::FakeHubRepo main_, v1_;
  hf_cache::EnvLookup env_;
};

TEST_F(HfCacheResolve, RepoIdReadsTheSnapshotOfRefsMain) {
  const auto before = testutil::tree_state(cache_);
  auto r = hf_cache::resolve("org/name", env_);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->arg, "org/name");
  EXPECT_EQ(r->path, main_.snapshot);
  ASSERT_TRUE(r->hub);
  EXPECT_EQ(r->hub->repo_id, "org/name");
  EXPECT_EQ(r->hub->name(), "name");
  EXPECT_EQ(r->hub->revision, "main");
  EXPECT_EQ(r->hub->commit, fake_commit(1));
  EXPECT_EQ(r->hub->cache_dir, cache_);
  EXPECT_EQ(r->hub->cache_dir_from, "HF_HUB_CACHE");
  EXPECT_EQ(r->hub->repo_dir, cache_ / "models--org--name");
  EXPECT_EQ(r->hub->ref_file, cache_ / "models--org--name" / "refs" / "main");
  EXPECT_TRUE(r->warnings.empty());
  // The snapshot's links read through into the blobs.
  EXPECT_EQ(testutil::slurp(r->path / "model.safetensors"), "weights");
  const auto j = hf_cache::to_json(r->hub);
  EXPECT_EQ(j["repo_id"], "org/name");
  EXPECT_EQ(j["commit"], fake_commit(1));
  EXPECT_EQ(j["snapshot"], main_.snapshot.string());
  EXPECT_TRUE(hf_cache::to_json(std::nullopt).is_null());
  EXPECT_TRUE(contains(hf_cache::to_text(*r->hub), "org/name@main: Hugging Face cache snapshot")) << hf_cache::to_text(*r->hub);
  EXPECT_EQ(testutil::tree_state(cache_), before) << "the cache was written";
}

TEST_F(HfCacheResolve, RevisionsByRefAndByCommit) {
  auto v1 = hf_cache::resolve("org/name@v1", env_);
  ASSERT_TRUE(v1.ok()) << v1.error().message;
  EXPECT_EQ(v1->path, v1_.snapshot);
  EXPECT_EQ(v1->hub->revision, "v1");
  auto pr = hf_cache::resolve("org/name@pr/1", env_);
  ASSERT_TRUE(pr.ok()) << pr.error().message;
  EXPECT_EQ(pr->path, v1_.snapshot);
  // A 40-hex commit names its snapshot directly, with or without a ref naming it.
  const std::string c = fake_commit(2);
  sfs::remove(v1_.repo_dir / "refs" / "v1");
  auto byc = hf_cache::resolve("org/name@" + c, env_);
  ASSERT_TRUE(byc.ok()) << byc.error().message;
  EXPECT_EQ(byc->path, v1_.snapshot);
  EXPECT_EQ(byc->hub->commit, c);
  EXPECT_TRUE(byc->hub->ref_file.empty());
  EXPECT_TRUE(hf_cache::to_json(byc->hub)["ref_file"].is_null());
  // A ref written by hand with a trailing newline is read.
  std::ofstream(main_.repo_dir / "refs" / "main", std::ios::binary | std::ios::trunc) << fake_commit(1) << "\n";
  auto nl = hf_cache::resolve("org/name", env_);
  ASSERT_TRUE(nl.ok()) << nl.error().message;
  EXPECT_EQ(nl->path, main_.snapshot);
}

TEST_F(HfCacheResolve, CacheFolderFromHfHomeAndTheDefault) {
  // HF_HOME/hub and ~/.cache/huggingface/hub are searched when HF_HUB_CACHE is unset.
  const sfs::path home = tmp_.path / "hfhome";
  sfs::create_directories(home);
  sfs::rename(cache_, home / "hub");
  auto r = hf_cache::resolve("org/name", env_of({{"HF_HOME", home.string()}, {"HOME", "/nonexistent"}}));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->path, home / "hub" / "models--org--name" / "snapshots" / fake_commit(1));
  EXPECT_EQ(r->hub->cache_dir_from, "HF_HOME");
  const sfs::path user = tmp_.path / "user";
  sfs::create_directories(user / ".cache" / "huggingface");
  sfs::rename(home / "hub", user / ".cache" / "huggingface" / "hub");
  auto d = hf_cache::resolve("org/name", env_of({{"HOME", user.string()}}));
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(d->hub->cache_dir_from, "default");
  // HF_HUB_CACHE wins even when the repo is only in the default cache: one cache, as huggingface_hub reads it.
  auto e = hf_cache::resolve("org/name", env_of({{"HOME", user.string()}, {"HF_HUB_CACHE", (tmp_.path / "empty").string()}}));
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().code, Errc::IO);
}

TEST_F(HfCacheResolve, MissingRepoSaysWhereItLooked) {
  auto r = hf_cache::resolve("org/other", env_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::IO);
  const std::string& m = r.error().message;
  EXPECT_TRUE(contains(m, "'org/other' is no local folder, and not in the Hugging Face cache")) << m;
  EXPECT_TRUE(contains(m, "no repo folder '" + (cache_ / "models--org--other").string() + "'")) << m;
  EXPECT_EQ(r.error().describe(), m) << "the file is in the message";
  EXPECT_TRUE(contains(m, "HF_HUB_CACHE='" + cache_.string() + "'")) << m;
  EXPECT_TRUE(contains(m, "hint: download it with 'hf download org/other'")) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos);
  // No cache folder at all.
  auto none = hf_cache::resolve("org/name", env_of({{"HOME", (tmp_.path / "nohome").string()}}));
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code, Errc::IO);
  EXPECT_TRUE(contains(none.error().message, "the cache folder '" + (tmp_.path / "nohome/.cache/huggingface/hub").string() +
                                                 "' does not exist (HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE, HF_HOME and "
                                                 "XDG_CACHE_HOME unset: the default"))
      << none.error().message;
}

TEST_F(HfCacheResolve, MissingRefListsTheCachedOnes) {
  auto r = hf_cache::resolve("org/name@v2", env_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::IO);
  const std::string& m = r.error().message;
  EXPECT_TRUE(contains(m, "at revision 'v2': no ref file '" + (main_.repo_dir / "refs" / "v2").string() + "'")) << m;
  EXPECT_TRUE(contains(m, "cached refs: main, pr/1, v1")) << m;
  EXPECT_TRUE(contains(m, fake_commit(1))) << m;
  EXPECT_TRUE(contains(m, "'hf download org/name --revision v2'")) << m;
  EXPECT_EQ(r.error().file, (main_.repo_dir / "refs" / "v2").string());
}

TEST_F(HfCacheResolve, MissingSnapshotAndDamagedRef) {
  sfs::remove_all(main_.snapshot);
  auto r = hf_cache::resolve("org/name", env_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::IO);
  EXPECT_TRUE(contains(r.error().message, "no snapshot '" + main_.snapshot.string() + "' (ref '" +
                                              (main_.repo_dir / "refs" / "main").string() + "' names commit " +
                                              fake_commit(1) + "; snapshots present: " + fake_commit(2) + ")"))
      << r.error().message;
  auto c = hf_cache::resolve("org/name@" + fake_commit(7), env_);
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(contains(c.error().message, "commit " + fake_commit(7) + " given")) << c.error().message;
  // A ref that does not hold a commit (never a path: "../../x" would leave the repo folder).
  std::ofstream(main_.repo_dir / "refs" / "main", std::ios::trunc) << "../../../etc";
  auto bad = hf_cache::resolve("org/name", env_);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, Errc::BAD_INPUT);
  EXPECT_TRUE(contains(bad.error().message, "not a 40-hex commit hash")) << bad.error().message;
}

TEST_F(HfCacheResolve, PartialDownloadIsAWarningNamingTheFiles) {
  // A link to a blob that never arrived: resolution works and says so; opening the file is what fails.
  const sfs::path blob = sfs::read_symlink(main_.snapshot / "tokenizer.json");
  sfs::remove(main_.snapshot / blob);
  auto r = hf_cache::resolve("org/name", env_);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_TRUE(contains(r->warnings[0], "1 file(s) of snapshot '" + main_.snapshot.string() +
                                           "' link to blobs missing from the cache: tokenizer.json")) << r->warnings[0];
  EXPECT_TRUE(contains(r->warnings[0], "hf download org/name")) << r->warnings[0];
}

TEST_F(HfCacheResolve, WhatIsAPath) {
  // Path-like arguments and other shapes are paths, untouched, even when missing.
  for (const std::string p : {"./org/name", "../org/name", "/org/name", "~/org/name", ".", "..", "a/b/c", "name"}) {
    auto r = hf_cache::resolve(p, env_);
    ASSERT_TRUE(r.ok()) << p << ": " << r.error().message;
    EXPECT_EQ(r->path, sfs::path(p)) << p;
    EXPECT_FALSE(r->hub) << p;
  }
  // NAMESPACE/NAME that is not a valid repo id: the missing-folder error, saying why the cache was not searched.
  auto r = hf_cache::resolve("org/na--me", env_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::IO);
  EXPECT_EQ(r.error().message, "cannot open checkpoint 'org/na--me': No such file or directory; not a Hugging Face "
                               "repo id either ('--' and '..' are not allowed in a repo id), so the cache was not "
                               "searched");
  // Unsafe or empty revisions are usage errors.
  for (const std::string p : {"org/name@", "org/name@../main", "org/name@/etc/x", "org/name@a//b", "org/name@./a"}) {
    auto u = hf_cache::resolve(p, env_);
    ASSERT_FALSE(u.ok()) << p;
    EXPECT_EQ(u.error().code, Errc::USAGE) << p;
  }
}

TEST_F(HfCacheResolve, ALocalFolderBeatsTheRepoId) {
  struct Cwd {
    sfs::path old = sfs::current_path();
    ~Cwd() { sfs::current_path(old); }
  } keep;
  const sfs::path work = tmp_.path / "work";
  sfs::create_directories(work / "org" / "name");
  sfs::current_path(work);
  auto r = hf_cache::resolve("org/name", env_);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->path, sfs::path("org/name"));
  EXPECT_FALSE(r->hub);
  // A file of that name is a path too (Checkpoint::open says it is not a folder).
  sfs::remove(work / "org" / "name");
  std::ofstream(work / "org" / "name") << "x";
  auto f = hf_cache::resolve("org/name", env_);
  ASSERT_TRUE(f.ok());
  EXPECT_FALSE(f->hub);
  // Gone: the cache.
  sfs::remove(work / "org" / "name");
  auto h = hf_cache::resolve("org/name", env_);
  ASSERT_TRUE(h.ok()) << h.error().message;
  EXPECT_TRUE(h->hub);
}

TEST_F(HfCacheResolve, SnapshotRepoDirIsStructural) {
  const sfs::path repo = sfs::canonical(main_.repo_dir);  // links resolved (a /tmp that is a link)
  EXPECT_EQ(hf_cache::snapshot_repo_dir(main_.snapshot), repo);
  EXPECT_EQ(hf_cache::snapshot_repo_dir(main_.snapshot.string() + "/"), repo);
  EXPECT_FALSE(hf_cache::snapshot_repo_dir(main_.repo_dir));
  EXPECT_FALSE(hf_cache::snapshot_repo_dir(main_.repo_dir / "snapshots"));
  // Through a link to the snapshot.
  sfs::create_directory_symlink(main_.snapshot, tmp_.path / "linked");
  EXPECT_EQ(hf_cache::snapshot_repo_dir(tmp_.path / "linked"), repo);
  // A user's own "snapshots" folder is not the cache.
  sfs::create_directories(tmp_.path / "backups" / "snapshots" / "2024");
  EXPECT_FALSE(hf_cache::snapshot_repo_dir(tmp_.path / "backups" / "snapshots" / "2024"));
  EXPECT_FALSE(hf_cache::snapshot_repo_dir(src_));
}

}  // namespace
}  // namespace fp4forge
