// gateway, reliability round 4, one table per class: every edit holds the config's edit lock from its read to its
// rename, so concurrent edits never lose one (R4-B1); an edit removes what a killed edit left beside the config
// and nothing else (R4-B16); rollback restores only fp4forge's own timestamped backups and only what parses
// (R4-B8); no secret reaches show, a diff or an error, whatever its YAML shape (R4-B4, round-3 B3); URLs with a
// space, a control byte, a raw non-ASCII host or a bad port are usage errors (R4-B18, round-3 B14); the config and
// every value written into it are read as LiteLLM's PyYAML safe_load reads them (R4-B14).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "fp4forge/gateway/gateway.h"
#include "fp4forge/gateway/report.h"
#include "fp4forge/probe/probe.h"
#include "fp4forge/util/backup.h"
#include "fp4forge/util/fs.h"
#include "fp4forge/util/path_lock.h"
#include "fp4forge/util/strings.h"
#include "test_util.h"
#include "unit/gateway_test_util.h"

namespace fp4forge::gateway {
namespace {

namespace stdfs = std::filesystem;
using testutil::slurp;
using testutil::TempDir;

const char* kTwo =
    "model_list:\n  - model_name: chat\n    litellm_params:\n      model: hosted_vllm/org/a\n      api_base: "
    "http://127.0.0.1:1/v1\n  - model_name: other\n    litellm_params:\n      model: hosted_vllm/org/b\n      "
    "api_base: http://127.0.0.1:2/v1\n";

void put(const stdfs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }

SwapOptions unprobed(const std::string& alias, const std::string& model) {
  return gtest_util::unprobed<SwapOptions>(alias, model);
}

std::vector<std::string> names_in(const stdfs::path& dir) {
  std::vector<std::string> v;
  for (const auto& e : stdfs::directory_iterator(dir)) v.push_back(e.path().filename().string());
  std::sort(v.begin(), v.end());
  return v;
}

// ---- R4-B1: edits of one config at once ------------------------------------------------------------------

TEST(GatewayLock, ConcurrentSwapsOfTwoAliasesKeepBothEdits) {
  TempDir t;
  const stdfs::path cfg = t.path / "c.yaml";
  put(cfg, kTwo);
  for (int round = 0; round < 10; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const std::string a = "hosted_vllm/a/" + std::to_string(round), b = "hosted_vllm/b/" + std::to_string(round);
    Result<EditResult> ra = make_error(Errc::INTERNAL, "not run");
    std::thread th([&] { ra = gateway_swap(cfg, unprobed("chat", a)); });
    auto rb = gateway_swap(cfg, unprobed("other", b));
    th.join();
    ASSERT_TRUE(ra.ok()) << ra.error().message;
    ASSERT_TRUE(rb.ok()) << rb.error().message;
    const std::string now = slurp(cfg);
    EXPECT_NE(now.find("model: " + a + "\n"), std::string::npos) << now;  // exit 0 means the edit is in the file
    EXPECT_NE(now.find("model: " + b + "\n"), std::string::npos) << now;
  }
}

// Every edit waits for the lock another edit holds, then edits what that one wrote.
TEST(GatewayLock, EveryEditWaitsForTheLockAndReadsTheFileAfterIt) {
  struct Case {
    const char* name;
    std::function<Result<EditResult>(const stdfs::path&)> edit;
    const char* expect;  // in the file after the edit
  };
  const std::vector<Case> cases{
      {"swap", [](const stdfs::path& c) { return gateway_swap(c, unprobed("chat", "hosted_vllm/new")); },
       "model: hosted_vllm/new"},
      {"add",
       [](const stdfs::path& c) {
         AddOptions o;
         o.alias = "third";
         o.backend_model = "hosted_vllm/third";
         o.api_base = "http://127.0.0.1:9/v1";
         o.probe = false;
         return gateway_add(c, o);
       },
       "model_name: third"},
      {"retire", [](const stdfs::path& c) { return gateway_retire(c, "chat"); }, "# fp4forge-retired: alias 'chat'"},
      {"rollback", [](const stdfs::path& c) { return gateway_rollback(c); }, "hosted_vllm/org/backup"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    TempDir t;
    const stdfs::path cfg = t.path / "c.yaml";
    put(cfg, kTwo);
    std::string bak = kTwo;
    bak.replace(bak.find("hosted_vllm/org/a"), 17, "hosted_vllm/org/backup");
    put(t.path / "c.yaml.bak-fp4forge-20250101-000000", bak);
    fs::PathLock other;  // another process's edit, in the middle of its work
    ASSERT_TRUE(other.acquire(cfg));
    Result<EditResult> r = make_error(Errc::INTERNAL, "not run");
    std::thread th([&] { r = k.edit(cfg); });
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    EXPECT_EQ(slurp(cfg), kTwo) << "edited without the lock";
    // The other edit renames its result over the config, then lets go.
    std::string theirs = kTwo;
    theirs.replace(theirs.find("hosted_vllm/org/b"), 17, "hosted_vllm/theirs");
    ASSERT_TRUE(fs::edit_file_atomic(cfg, theirs));
    other.release();
    th.join();
    ASSERT_TRUE(r.ok()) << r.error().message;
    const std::string now = slurp(cfg);
    EXPECT_NE(now.find(k.expect), std::string::npos) << now;
    if (std::string(k.name) != "rollback") {
      EXPECT_NE(now.find("hosted_vllm/theirs"), std::string::npos) << "the other edit was lost:\n" << now;
    }
  }
}

TEST(GatewayLock, AWaitThatRunsOutIsAnIoErrorNamingTheFile) {
  TempDir t;
  const stdfs::path cfg = t.path / "c.yaml";
  put(cfg, kTwo);
  fs::PathLock held;
  ASSERT_TRUE(held.acquire(cfg));
  fs::PathLock second;
  auto st = second.acquire(cfg, std::chrono::milliseconds(60));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, Errc::IO);
  EXPECT_NE(st.error().message.find("another fp4forge edit of it still runs"), std::string::npos) << st.error().message;
  held.release();
  EXPECT_TRUE(second.acquire(cfg, std::chrono::milliseconds(60)));
}

// ---- R4-B16: what a killed edit left --------------------------------------------------------------------

TEST(GatewayTemporaries, AnEditRemovesOnlyTheTemporariesOfItsOwnConfig) {
  const std::vector<std::string> stale{
      "c.yaml.partial-abcd1234",
      "c.yaml.bak-fp4forge-20250101-000000.partial-0a1b2c3d",
      "c.yaml.bak-fp4forge-20250101-000000-12.partial-zzzzzzzz",
      "c.yaml.rollback-fp4forge-20250102-030405.partial-99999999",
  };
  const std::vector<std::string> kept{
      "c.yaml.partial-ABCD1234",                          // not the alphabet fs::edit_file_atomic uses
      "c.yaml.partial-abc123",                            // too short
      "c.yaml.partial-abcd12345",                         // too long
      "c.yaml.bak-fp4forge-before.partial-abcd1234",      // not a stamp fresh_name writes
      "c.yaml.old.partial-abcd1234",                      // not an infix of ours
      "other.yaml.partial-abcd1234",                      // another file's (its own edit may be running)
      "c.yaml.partial",                                   // a private-folder temporary, never made here
  };
  struct Case {
    const char* name;
    std::function<Result<EditResult>(const stdfs::path&)> edit;
    bool removes;
  };
  const std::vector<Case> cases{
      {"swap", [](const stdfs::path& c) { return gateway_swap(c, unprobed("chat", "hosted_vllm/new")); }, true},
      {"swap --dry-run",
       [](const stdfs::path& c) {
         auto o = unprobed("chat", "hosted_vllm/new");
         o.dry_run = true;
         return gateway_swap(c, o);
       },
       false},
      {"retire", [](const stdfs::path& c) { return gateway_retire(c, "chat"); }, true},
      {"rollback", [](const stdfs::path& c) { return gateway_rollback(c); }, true},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    TempDir t;
    const stdfs::path cfg = t.path / "c.yaml";
    put(cfg, kTwo);
    put(t.path / "c.yaml.bak-fp4forge-20240101-000000", kTwo);
    for (const auto& n : stale) put(t.path / n, "model_list: []\n");
    for (const auto& n : kept) put(t.path / n, "x\n");
    stdfs::create_symlink(t.path / "other.yaml.partial-abcd1234", t.path / "c.yaml.partial-1111aaaa");  // a link
    auto r = k.edit(cfg);
    ASSERT_TRUE(r.ok()) << r.error().message;
    const auto now = names_in(t.path);
    for (const auto& n : stale)
      EXPECT_EQ(std::count(now.begin(), now.end(), n), k.removes ? 0 : 1) << n;
    for (const auto& n : kept) EXPECT_EQ(std::count(now.begin(), now.end(), n), 1) << n;
    EXPECT_TRUE(stdfs::is_symlink(t.path / "c.yaml.partial-1111aaaa"));
    if (k.removes) {
      std::size_t said = 0;
      for (const auto& w : r->warnings) said += w.find("killed before it finished") != std::string::npos;
      EXPECT_EQ(said, stale.size());
    }
  }
}

// ---- R4-B8: what rollback restores ----------------------------------------------------------------------

TEST(GatewayRollback, OnlyOwnTimestampedBackupsAndOnlyWhatParses) {
  const std::string good = "model_list:\n  - model_name: chat\n    litellm_params:\n      model: hosted_vllm/org/good\n";
  const std::string now = "model_list:\n  - model_name: chat\n    litellm_params:\n      model: hosted_vllm/org/now\n";
  struct Case {
    const char* name;
    std::vector<std::pair<std::string, std::string>> backups;  // name suffix after "c.yaml", content
    std::string to;                                            // --to (a suffix too), "" = default
    bool ok;
    std::string restored_or_message;
  };
  const std::vector<Case> cases{
      {"hand-made names are not backups",
       {{".bak-fp4forge-20250101-000000", good}, {".bak-fp4forge-zzz", "x: [\n"},
        {".bak-fp4forge-before-upgrade", now}, {".bak-fp4forge-20250101-000000-0", now},
        {".bak-fp4forge-2025010-000000", now}, {".bak-fp4forge-20250101-000000-100", now}},
       "", true, good},
      {"-10 sorts after -9", {{".bak-fp4forge-20250101-000000-9", now}, {".bak-fp4forge-20250101-000000-10", good}},
       "", true, good},
      {"newest does not parse",
       {{".bak-fp4forge-20250101-000000", good}, {".bak-fp4forge-20250102-000000", "x: [\n"}}, "", false,
       "--to "},
      {"newest is not a LiteLLM config", {{".bak-fp4forge-20250102-000000", "general_settings: {}\n"}}, "", false,
       "no 'model_list' key"},
      {"newest has a duplicate key",
       {{".bak-fp4forge-20250102-000000", "model_list: []\nmodel_list:\n  - model_name: x\n"}}, "", false,
       "duplicate key"},
      {"--to names one that does not parse", {{".bak-fp4forge-zzz", "x: [\n"}}, ".bak-fp4forge-zzz", false,
       "invalid YAML"},
      {"--to names a hand-made one that parses", {{".bak-fp4forge-before-upgrade", good}}, ".bak-fp4forge-before-upgrade",
       true, good},
      {"no backup of ours", {{".bak-fp4forge-zzz", good}}, "", false, "no backups"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    TempDir t;
    const stdfs::path cfg = t.path / "c.yaml";
    put(cfg, now);
    for (const auto& [n, c] : k.backups) put(t.path / ("c.yaml" + n), c);
    auto r = gateway_rollback(cfg, k.to.empty() ? stdfs::path() : t.path / ("c.yaml" + k.to));
    if (k.ok) {
      ASSERT_TRUE(r.ok()) << r.error().message;
      EXPECT_EQ(slurp(cfg), k.restored_or_message);
    } else {
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.error().code, Errc::BAD_INPUT);
      EXPECT_NE(r.error().message.find(k.restored_or_message), std::string::npos) << r.error().message;
      EXPECT_EQ(r.error().message.find('\n'), std::string::npos);
      EXPECT_EQ(slurp(cfg), now) << "the config changed";
    }
  }
}

// ---- R4-B4, round-3 B3: secrets by shape ----------------------------------------------------------------

TEST(GatewaySecrets, NoShapePrintsTheSecret) {
  const std::string tail = "  - model_name: other\n    litellm_params:\n      model: x/y\n";
  const std::vector<std::pair<const char*, std::string>> cases{
      {"'#' in the URL password", "      api_base: http://admin:p#SECRETcccc@127.0.0.1:8000/v1\n"},
      {"'?' in the URL password", "      api_base: http://admin:p?SECRETcccc@127.0.0.1:8000/v1\n"},
      {"'/' in the URL password", "      api_base: http://admin:p/SECRETcccc@127.0.0.1:8000/v1\n"},
      {"flow list under a secret key", "      fallback_keys: [SECRETdddd, SECRETeeee]\n"},
      {"flow mapping under a secret key", "      extra_headers: {X-Api: SECRETdddd}\n"},
      {"flow list over lines", "      fallback_keys: [SECRETdddd,\n        SECRETeeee]\n"},
      {"nested flow", "      extra_body: {api_key: [SECRETdddd], n: 1}\n"},
  };
  for (const auto& [name, line] : cases) {
    SCOPED_TRACE(name);
    TempDir t;
    const stdfs::path cfg = t.path / "c.yaml";
    const std::string text =
        "model_list:\n  - model_name: chat\n    litellm_params:\n      model: hosted_vllm/org/old\n" + line + tail;
    put(cfg, text);
    auto s = gateway_show(cfg);
    ASSERT_TRUE(s.ok()) << s.error().message;
    std::string shown = to_text(*s) + to_json(*s).dump();
    auto sw = gateway_swap(cfg, unprobed("chat", "hosted_vllm/x"));
    ASSERT_TRUE(sw.ok()) << sw.error().message;
    shown += sw->diff + to_json(*sw).dump();
    auto re = gateway_retire(cfg, "chat");
    ASSERT_TRUE(re.ok()) << re.error().message;
    shown += re->diff;
    auto rb = gateway_rollback(cfg);
    ASSERT_TRUE(rb.ok()) << rb.error().message;
    shown += rb->diff;
    EXPECT_EQ(shown.find("SECRET"), std::string::npos) << shown;
  }
}

// A quote left open swallows the following lines, api_key and all, into the alias (round-3 B3).
TEST(GatewaySecrets, AQuoteLeftOpenDoesNotCarryTheKeyIntoShowOrAnError) {
  for (const char q : {'"', '\''}) {
    for (const char* key_line : {"      api_key: sk-SECRETaaaa\n", "      api_key: \"sk-SECRETaaaa\"\n",
                                 "      vertex_credentials: {private_key: SECRETbbbb}\n",
                                 "      api_base: http://u:SECRETcc@h/v1\n", "      api_key: |\n        SECRETdd\n"}) {
      SCOPED_TRACE(std::string(1, q) + key_line);
      TempDir t;
      const stdfs::path cfg = t.path / "c.yaml";
      put(cfg, std::string("model_list:\n  - model_name: ") + q + "chat\n    litellm_params:\n      model: m/a\n" +
                   key_line + "  - model_name: other" + q + "\n    litellm_params:\n      model: x/y\n");
      std::string shown;
      if (auto s = gateway_show(cfg); s.ok())
        shown += to_text(*s) + to_json(*s).dump();
      else
        shown += s.error().message;
      for (const char* alias : {"chat", "nope"}) {
        auto sw = gateway_swap(cfg, unprobed(alias, "hosted_vllm/x"));
        shown += sw.ok() ? sw->diff : sw.error().message;
        auto re = gateway_retire(cfg, alias);
        shown += re.ok() ? re->diff : re.error().message;
      }
      EXPECT_EQ(shown.find("SECRET"), std::string::npos) << shown;
    }
  }
}

// ---- R4-B18, round-3 B14: URLs ----------------------------------------------------------------------------

TEST(GatewayUrls, WhatCurlWouldMisreadIsAUsageErrorOnOneLine) {
  const std::vector<std::pair<std::string, bool>> cases{
      {"http://127.0.0.1:8000/v1", true},
      {"https://h.example/v1", true},
      {"http://[::1]:8000/v1", true},
      {"http://u:p%23w@h:1/v1", true},
      {"http://xn--bcher-kva.example:65535", true},
      {"http://h /v1", false},
      {"http://h:99999/v1", false},
      {"http://h:0/v1", false},
      {"http://h:80a/v1", false},
      {"http://h:/v1", false},
      {"http://h:123456789012345678901234567890/v1", false},
      {"http://b\xc3\xbc" "cher.example/v1", false},
      {"http://127.0.0.1:1/v1\r\nX-Injected: 1", false},
      {"http://h/v1\n", false},
      {"http://h/v1\t", false},
      {std::string("http://h/v1\0x", 13), false},
      {"http://[::1/v1", false},
      {"http://[::1]x/v1", false},
      {"http://u:p@:80/v1", false},
  };
  for (const auto& [url, ok] : cases) {
    SCOPED_TRACE(util::printable(url));
    const Status st = probe::check_base_url(url);
    EXPECT_EQ(st.ok(), ok) << (st.ok() ? "" : st.error().message);
    if (st.ok()) continue;
    EXPECT_EQ(st.error().code, Errc::USAGE);
    for (const char c : st.error().message) EXPECT_TRUE(static_cast<unsigned char>(c) >= 0x20) << st.error().message;
    // swap's --api-base goes through the same rule: refused before the file is read.
    TempDir t;
    put(t.path / "c.yaml", kTwo);
    SwapOptions o = unprobed("chat", "hosted_vllm/x");
    o.api_base = url;
    auto r = gateway_swap(t.path / "c.yaml", o);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, Errc::USAGE);
    EXPECT_EQ(slurp(t.path / "c.yaml"), kTwo);
  }
}

// ---- R4-B14: the config read as LiteLLM reads it --------------------------------------------------------

// A value fp4forge writes must load in PyYAML's safe_load (a `!!python/...` tag breaks the proxy); a config
// PyYAML refuses (several documents, a NUL, a non-core tag) is not shown or edited. Values PyYAML takes pass.
TEST(GatewayStrictYaml, ParamValuesAreWhatSafeLoadTakes) {
  const std::vector<std::pair<std::string, bool>> cases{
      {"!!python/object:os.system 1", false},
      {"!!python/object/apply:os.system [\"id\"]", false},
      {"!local 1", false},
      {"!<tag:yaml.org,2002:python/none> x", false},
      {"{a: 1, a: 2}", false},
      {std::string("a\0b", 3), false},
      {"\x01x", false},
      {"1", true},
      {"!!str 1", true},
      {"{enable_thinking: false}", true},
      {"[a, b]", true},
      {"'quoted: text'", true},
  };
  for (const auto& [v, ok] : cases) {
    SCOPED_TRACE(util::printable(v));
    TempDir t;
    put(t.path / "c.yaml", kTwo);
    SwapOptions o = unprobed("chat", "hosted_vllm/x");
    o.params = {{"x", v}};
    auto r = gateway_swap(t.path / "c.yaml", o);
    EXPECT_EQ(r.ok(), ok) << (r.ok() ? "" : r.error().message);
    AddOptions a;
    a.alias = "new";
    a.backend_model = "hosted_vllm/y";
    a.api_base = "http://127.0.0.1:9/v1";
    a.probe = false;
    a.model_info = {{"x", v}};
    TempDir t2;
    put(t2.path / "c.yaml", kTwo);
    auto ra = gateway_add(t2.path / "c.yaml", a);
    EXPECT_EQ(ra.ok(), ok) << (ra.ok() ? "" : ra.error().message);
    if (ok) {
      EXPECT_TRUE(gateway_show(t.path / "c.yaml").ok());  // what was written reads back
      EXPECT_TRUE(gateway_show(t2.path / "c.yaml").ok());
      continue;
    }
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, Errc::USAGE);
    EXPECT_EQ(slurp(t.path / "c.yaml"), kTwo);
    ASSERT_FALSE(ra.ok());
    EXPECT_EQ(ra.error().code, Errc::USAGE);
    EXPECT_EQ(slurp(t2.path / "c.yaml"), kTwo);
    for (const char c : r.error().message) EXPECT_TRUE(static_cast<unsigned char>(c) >= 0x20) << r.error().message;
  }
}

TEST(GatewayStrictYaml, AConfigSafeLoadRefusesIsNeitherShownNorEdited) {
  const std::string base(kTwo);
  const std::vector<std::pair<std::string, std::string>> cases{
      {"two documents", base + "---\nmodel_list: []\n"},
      {"a NUL byte", base + std::string("# x\0y\n", 6)},
      {"a python tag", base + "general_settings: !!python/object:os.system 1\n"},
      {"a local tag", base + "general_settings: !env X\n"},
      {"a duplicate nested key", "model_list:\n  - model_name: chat\n    litellm_params:\n      model: a/b\n      "
                                 "model: a/c\n"},
      {"yes and true as one key", base + "x:\n  yes: 1\n  true: 2\n"},
  };
  for (const auto& [what, text] : cases) {
    SCOPED_TRACE(what);
    TempDir t;
    put(t.path / "c.yaml", text);
    auto s = gateway_show(t.path / "c.yaml");
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().code, Errc::BAD_INPUT);
    EXPECT_NE(s.error().message.find("c.yaml"), std::string::npos) << s.error().message;
    EXPECT_NE(s.error().message.find("line "), std::string::npos) << s.error().message;
    auto r = gateway_swap(t.path / "c.yaml", unprobed("chat", "hosted_vllm/x"));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, Errc::BAD_INPUT);
    EXPECT_EQ(slurp(t.path / "c.yaml"), text);
    EXPECT_FALSE(gateway_retire(t.path / "c.yaml", "other").ok());
    EXPECT_EQ(slurp(t.path / "c.yaml"), text);
  }
  // What PyYAML and yaml-cpp read alike still works: core tags, anchors, comments, a document start.
  TempDir t;
  put(t.path / "c.yaml", "---\n# gateway\n" + base + "general_settings: !!map {master_key: !!str 1}\n");
  EXPECT_TRUE(gateway_show(t.path / "c.yaml").ok());
  EXPECT_TRUE(gateway_swap(t.path / "c.yaml", unprobed("chat", "hosted_vllm/x")).ok());
}

}  // namespace
}  // namespace fp4forge::gateway
