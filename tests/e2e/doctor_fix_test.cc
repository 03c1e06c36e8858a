// `fp4forge doctor --fix / --dry-run` end to end through the CLI: for each fixable kind, a fixture variant
// that triggers it; the fix removes it, the backup equals the original byte for byte, a second --fix is a
// no-op, --dry-run writes nothing, and no .safetensors file changes.
#include <sys/wait.h>

#include <cstdio>
#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "fp4forge/util/udiff.h"
#include "test_util.h"
#include "unit/doctor_test_util.h"

namespace {

using doctor_test::Fixture;
using doctor_test::Json;

struct CliRun {
  int rc = -1;
  std::string out;
};

CliRun run_cli(const std::string& args) {
  const std::string cmd = std::string(FP4FORGE_CLI) + " " + args + " 2>/dev/null";
  CliRun r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = ::pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

Json run_json(const Fixture& fx, const std::string& flags, int* rc = nullptr) {
  CliRun r = run_cli("doctor " + fx.dir().string() + " --json " + flags);
  if (rc != nullptr) *rc = r.rc;
  Json j;
  try {
    j = Json::parse(r.out);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "doctor " << flags << " printed no JSON (rc " << r.rc << "): " << e.what() << "\n" << r.out;
  }
  return j;
}

bool has_kind(const Json& findings, const std::string& kind) {
  for (const auto& f : findings)
    if (f["kind"] == kind) return true;
  return false;
}

struct FixCase {
  const char* name;
  const char* fixture;
  const char* kind;
  const char* file;  // the file the fix changes or creates
  std::function<void(Fixture&)> setup;
  int rc_before, rc_after;
  std::function<void(const Fixture&, const std::string& before, const std::string& after)> verify;
  std::string flags = {};  // given to every doctor run (e.g. --vllm-version 0.26)
};

void exercise(const FixCase& c) {
  SCOPED_TRACE(c.name);
  Fixture fx(c.fixture);
  c.setup(fx);
  const auto s0 = fx.snapshot();
  const auto h0 = fx.safetensors_hash();
  const bool existed = s0.count(c.file) > 0;

  // check: reports the kind with a fix, writes nothing
  int rc = 0;
  Json j = run_json(fx, c.flags, &rc);
  EXPECT_EQ(rc, c.rc_before);
  EXPECT_EQ(j["mode"], "check");
  ASSERT_TRUE(has_kind(j["findings"], c.kind)) << j.dump(2);
  for (const auto& f : j["findings"]) {
    if (f["kind"] == c.kind) {
      EXPECT_FALSE(f["fix"].is_null());
    }
  }
  EXPECT_EQ(fx.snapshot(), s0);

  // dry run: the diff, nothing written
  Json d = run_json(fx, "--fix --dry-run " + c.flags, &rc);
  EXPECT_EQ(rc, c.rc_before);
  EXPECT_EQ(d["mode"], "dry-run");
  bool seen = false;
  for (const auto& ch : d["changes"]) {
    EXPECT_FALSE(ch["written"].get<bool>());
    EXPECT_TRUE(ch["backup"].is_null());
    if (ch["file"] == c.file) {
      seen = true;
      EXPECT_NE(ch["diff"].get<std::string>().find("+++ b/" + std::string(c.file)), std::string::npos);
    }
  }
  EXPECT_TRUE(seen) << d.dump(2);
  EXPECT_EQ(fx.snapshot(), s0) << "--dry-run wrote something";
  EXPECT_EQ(run_json(fx, "--dry-run " + c.flags)["changes"], d["changes"]);  // --dry-run alone is the same

  // fix
  Json f = run_json(fx, "--fix " + c.flags, &rc);
  EXPECT_EQ(rc, c.rc_after) << f.dump(2);
  EXPECT_EQ(f["mode"], "fix");
  EXPECT_FALSE(has_kind(f["remaining"], c.kind)) << f.dump(2);
  std::string backup;
  for (const auto& ch : f["changes"]) {
    EXPECT_TRUE(ch["written"].get<bool>());
    if (ch["file"] != c.file) continue;
    EXPECT_EQ(ch["created"].get<bool>(), !existed);
    EXPECT_NE(std::find(ch["kinds"].begin(), ch["kinds"].end(), c.kind), ch["kinds"].end());
    if (existed) {
      backup = ch["backup"].get<std::string>();
      EXPECT_EQ(backup.rfind(std::string(c.file) + ".bak-fp4forge-", 0), 0u) << backup;
      EXPECT_EQ(backup.size(), std::string(c.file).size() + 14 + 15) << backup;  // .bak-fp4forge-YYYYMMDD-HHMMSS
    } else {
      EXPECT_TRUE(ch["backup"].is_null());
    }
  }
  const auto s1 = fx.snapshot();
  ASSERT_TRUE(s1.count(c.file));
  if (existed) {
    ASSERT_TRUE(s1.count(backup)) << backup;
    EXPECT_EQ(s1.at(backup), s0.at(c.file)) << "backup differs from the original";
  }
  EXPECT_EQ(fx.safetensors_hash(), h0) << ".safetensors changed";
  for (const auto& [name, bytes] : s0) {
    if (name.find(".safetensors") != std::string::npos) {
      EXPECT_EQ(s1.at(name), bytes) << name;
    }
  }
  c.verify(fx, existed ? s0.at(c.file) : std::string(), s1.at(c.file));

  // re-run: gone
  Json again = run_json(fx, c.flags, &rc);
  EXPECT_FALSE(has_kind(again["findings"], c.kind)) << again.dump(2);
  EXPECT_EQ(rc, c.rc_after);

  // second --fix: no-op
  Json f2 = run_json(fx, "--fix " + c.flags, &rc);
  EXPECT_EQ(f2["changes"].size(), 0u) << f2.dump(2);
  EXPECT_EQ(fx.snapshot(), s1) << "second --fix changed files";
}

TEST(DoctorFixE2E, Gemma4MissingGlobalKvFields) {
  exercise({"gemma4 globals", "gemma4-dense-mm", "gemma4-missing-global-kv-fields", "config.json",
            [](Fixture& fx) { fx.edit_config([](Json& c) { c["text_config"].erase("per_layer_config"); }); }, 1, 0,
            [](const Fixture&, const std::string& before, const std::string& after) {
              Json a = Json::parse(after), b = Json::parse(before);
              EXPECT_EQ(a["text_config"]["global_head_dim"], 64);
              EXPECT_EQ(a["text_config"]["num_global_key_value_heads"], 1);
              a["text_config"].erase("global_head_dim");
              a["text_config"].erase("num_global_key_value_heads");
              EXPECT_EQ(a, b);
              // formatting kept: exactly two lines added, none removed or changed
              const auto st = fp4forge::util::diff_stat(before, after);
              EXPECT_EQ(st.added, 2u);
              EXPECT_EQ(st.removed, 0u);
              EXPECT_NE(after.find("\n    \"global_head_dim\": 64,\n"), std::string::npos) << after;
            }});
}

// doctor --vllm-version below the first release that builds Gemma-4's per_layer_config-only form (issue 55): an error
// whose fix writes the flat keys the tensors prove and removes per_layer_config, proven to repeat them; without a
// target, or with one that builds it, an info without a fix, nothing written.
TEST(DoctorFixE2E, PerLayerConfigOnlyUnderAnOldVllmTarget) {
  exercise({"per_layer_config only, vLLM 0.26", "gemma4-dense-mm", "gemma4-per-layer-config-only", "config.json",
            [](Fixture&) {}, 1, 0,
            [](const Fixture&, const std::string& before, const std::string& after) {
              Json a = Json::parse(after), b = Json::parse(before);
              EXPECT_EQ(a["text_config"]["global_head_dim"], 64);
              EXPECT_EQ(a["text_config"]["num_global_key_value_heads"], 1);
              EXPECT_FALSE(a["text_config"].contains("per_layer_config"));
              a["text_config"].erase("global_head_dim");
              a["text_config"].erase("num_global_key_value_heads");
              b["text_config"].erase("per_layer_config");
              EXPECT_EQ(a, b);
            },
            "--vllm-version 0.26"});
  for (const char* flags : {"", "--vllm-version 0.28", "--vllm-version v0.34.1"}) {
    SCOPED_TRACE(flags);
    Fixture fx("gemma4-dense-mm");
    const auto s0 = fx.snapshot();
    int rc = 0;
    Json j = run_json(fx, std::string("--fix ") + flags, &rc);
    EXPECT_EQ(rc, 0) << j.dump(2);
    for (const auto& f : j["findings"])
      if (f["kind"] == "gemma4-per-layer-config-only") {
        EXPECT_EQ(f["severity"], "info");
        EXPECT_TRUE(f["fix"].is_null());
      }
    for (const auto& ch : j["changes"]) EXPECT_NE(ch["file"], "config.json") << j.dump(2);
  }
  // Qwen3_5ForCausalLM is registered from about 0.28: an error under an older target, a warning otherwise.
  Fixture q("qwen3_5-dense");
  int rc = 0;
  Json old = run_json(q, "--vllm-version 0.26", &rc);
  EXPECT_EQ(rc, 1);
  bool seen = false;
  for (const auto& f : old["findings"])
    if (f["kind"] == "architecture-needs-recent-vllm") {
      seen = true;
      EXPECT_EQ(f["severity"], "error");
    }
  EXPECT_TRUE(seen) << old.dump(2);
  EXPECT_EQ(run_json(q, "--vllm-version 0.30", &rc)["ok"], true);
  EXPECT_EQ(rc, 0);
  {  // newer than any release read: checked, and said (issue 55 tryout F: plan refuses 0.35, doctor was silent)
    std::string out, err;
    EXPECT_EQ(fp4forge::testutil::run_cli("doctor " + q.dir().string() + " --vllm-version 0.40", &out, &err), 0) << err;
    EXPECT_NE(err.find("--vllm-version 0.40: newer than the newest vLLM fp4forge has read (0.34)"), std::string::npos)
        << err;
  }
  for (const char* bad : {"1.0", "0.", "0.x", "latest", "0.26.", "0.26.1rc"}) {
    CliRun r = run_cli("doctor " + q.dir().string() + " --vllm-version " + bad);
    EXPECT_EQ(r.rc, 2) << bad;
  }
  for (const char* bad : {"5", "5.", "x.14", "latest", "5.14.x", "0.9"}) {
    CliRun r = run_cli("doctor " + q.dir().string() + " --transformers-version " + bad);
    EXPECT_EQ(r.rc, 2) << bad;
  }
}

// --transformers-version: a target that cannot read per_layer_config (≤ 5.14) makes the per_layer_config-only form an
// error whose --fix writes the flat keys, as an old vLLM target does (issue 55 audit: the option did not exist).
TEST(DoctorFixE2E, PerLayerConfigOnlyUnderAnOldTransformersTarget) {
  exercise({"per_layer_config only, transformers 5.14", "gemma4-dense-mm", "gemma4-per-layer-config-only",
            "config.json", [](Fixture&) {}, 1, 0,
            [](const Fixture&, const std::string&, const std::string& after) {
              const Json a = Json::parse(after);
              EXPECT_EQ(a["text_config"]["global_head_dim"], 64);
              EXPECT_FALSE(a["text_config"].contains("per_layer_config"));
            },
            "--transformers-version 5.14"});
  for (const char* flags : {"--transformers-version 5.15", "--transformers-version v5.17.0"}) {
    SCOPED_TRACE(flags);
    Fixture fx("gemma4-dense-mm");
    int rc = 0;
    Json j = run_json(fx, std::string("--fix ") + flags, &rc);
    EXPECT_EQ(rc, 0) << j.dump(2);
    for (const auto& f : j["findings"]) {
      if (f["kind"] == "gemma4-per-layer-config-only") {
        EXPECT_EQ(f["severity"], "info");
      }
    }
  }
  Fixture fx("gemma4-dense-mm");
  int rc = 0;
  Json j = run_json(fx, "--transformers-version 4.57.1", &rc);
  EXPECT_EQ(rc, 1);
  bool said = false;
  for (const auto& f : j["findings"])
    said = said || (f["kind"] == "gemma4-per-layer-config-only" &&
                    f["message"].get<std::string>().find("the target, transformers 4.57, is one of those") !=
                        std::string::npos);
  EXPECT_TRUE(said) << j.dump(2);
}

TEST(DoctorFixE2E, PerLayerConfigRedundant) {
  exercise({"redundant per_layer_config", "gemma4-moe-mm", "per-layer-config-redundant", "config.json",
            [](Fixture& fx) {
              fx.edit_config([](Json& c) {
                c["text_config"]["global_head_dim"] = 64;
                c["text_config"]["num_global_key_value_heads"] = 1;
              });
            },
            0, 0,
            [](const Fixture&, const std::string& before, const std::string& after) {
              Json a = Json::parse(after), b = Json::parse(before);
              EXPECT_FALSE(a["text_config"].contains("per_layer_config"));
              b["text_config"].erase("per_layer_config");
              EXPECT_EQ(a, b);
              const auto st = fp4forge::util::diff_stat(before, after);
              EXPECT_EQ(st.added, 0u);
              EXPECT_EQ(st.removed, 6u);  // the 6-line per_layer_config member
              EXPECT_NE(after.find("\"rms_norm_eps\": 1e-06"), std::string::npos);
            }});
}

TEST(DoctorFixE2E, MissingPreprocessorConfig) {
  for (const char* fixture : {"qwen3_5-dense-mm", "gemma4-moe-mm"}) {
    exercise({fixture, fixture, "missing-preprocessor-config", "preprocessor_config.json", [](Fixture&) {}, 0, 0,
              [](const Fixture& fx, const std::string&, const std::string& after) {
                const std::string src = doctor_test::read(fx.path("processor_config.json"));
                const Json ip = Json::parse(src)["image_processor"];
                EXPECT_EQ(Json::parse(after), ip);
                // verbatim: the source file's style (indent 2, numbers as written), and a trailing newline as
                // transformers writes every JSON file (the fixtures' processor_config.json has none)
                EXPECT_EQ(after, ip.dump(2) + "\n");
                EXPECT_NE(after.find("0.00392156862745098"), std::string::npos);
              }});
  }
}

TEST(DoctorFixE2E, TokenizerTruncation) {
  exercise({"tokenizer truncation", "llama", "tokenizer-truncation", "tokenizer.json",
            [](Fixture& fx) {
              doctor_test::write(fx.path("tokenizer.json"),
                                 "{\n  \"version\": \"1.0\",\n  \"truncation\": {\n    \"direction\": \"Right\",\n"
                                 "    \"max_length\": 8192,\n    \"strategy\": \"LongestFirst\",\n    \"stride\": 0\n  },\n"
                                 "  \"padding\": {\n    \"strategy\": \"BatchLongest\"\n  },\n  \"added_tokens\": [],\n"
                                 "  \"model\": {\n    \"type\": \"BPE\",\n    \"vocab\": {\n      \"\xc3\xa9\": 0\n    }\n  }\n}");
            },
            0, 0,
            [](const Fixture&, const std::string&, const std::string& after) {
              EXPECT_EQ(after,
                        "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n  \"added_tokens\": [],\n"
                        "  \"model\": {\n    \"type\": \"BPE\",\n    \"vocab\": {\n      \"\xc3\xa9\": 0\n    }\n  }\n}");
            }});
}

TEST(DoctorFixE2E, SeveralFixesInOneRunAndBackupNamesDoNotCollide) {
  Fixture fx("gemma4-dense-mm");
  fx.edit_config([](Json& c) { c["text_config"].erase("per_layer_config"); });
  doctor_test::write(fx.path("tokenizer.json"), "{\"truncation\": {\"max_length\": 8}, \"padding\": null}");
  const auto h0 = fx.safetensors_hash();
  int rc = 0;
  Json f = run_json(fx, "--fix", &rc);
  EXPECT_EQ(rc, 0) << f.dump(2);
  EXPECT_EQ(f["changes"].size(), 3u);  // config.json, preprocessor_config.json, tokenizer.json
  EXPECT_EQ(f["summary"]["errors"], 0);
  // Break config.json again in the same second: the second backup gets a distinct name.
  fx.edit_config([](Json& c) { c["text_config"].erase("global_head_dim"); });
  Json g = run_json(fx, "--fix", &rc);
  ASSERT_EQ(g["changes"].size(), 1u) << g.dump(2);
  const std::string b1 = f["changes"][0]["file"] == "config.json" ? f["changes"][0]["backup"].get<std::string>()
                                                                   : std::string();
  EXPECT_NE(g["changes"][0]["backup"], b1);
  std::size_t backups = 0;
  for (const auto& [name, bytes] : fx.snapshot())
    if (name.rfind("config.json.bak-fp4forge-", 0) == 0) ++backups;
  EXPECT_EQ(backups, 2u);
  EXPECT_EQ(fx.safetensors_hash(), h0);
}

TEST(DoctorFixE2E, UnfixableErrorsKeepExitOne) {
  Fixture fx("gemma4-dense-mm");
  fx.edit_config([](Json& c) {
    c["text_config"]["global_head_dim"] = 128;
    c["text_config"]["num_global_key_value_heads"] = 1;
  });
  const auto s0 = fx.snapshot();
  int rc = 0;
  Json f = run_json(fx, "--fix", &rc);
  EXPECT_EQ(rc, 1);
  EXPECT_TRUE(has_kind(f["remaining"], "per-layer-config-conflict"));
  // only the preprocessor file was created; config.json untouched (no fix for a conflict)
  const auto s1 = fx.snapshot();
  EXPECT_EQ(s1.at("config.json"), s0.at("config.json"));
  EXPECT_EQ(s1.size(), s0.size() + 1);
}

TEST(DoctorFixE2E, TextOutputShowsDiffAndExitCodes) {
  Fixture fx("llama");
  doctor_test::write(fx.path("tokenizer.json"), "{\n  \"truncation\": {\"max_length\": 8},\n  \"padding\": null\n}\n");
  CliRun dry = run_cli("doctor " + fx.dir().string() + " --dry-run");
  EXPECT_EQ(dry.rc, 0);
  EXPECT_NE(dry.out.find("tokenizer-truncation"), std::string::npos) << dry.out;
  EXPECT_NE(dry.out.find("-  \"truncation\": {\"max_length\": 8},"), std::string::npos) << dry.out;
  EXPECT_NE(dry.out.find("+  \"truncation\": null,"), std::string::npos) << dry.out;

  Fixture clean("llama");
  EXPECT_EQ(run_cli("doctor " + clean.dir().string()).rc, 0);
  Fixture broken("llama");
  doctor_test::write(broken.path("config.json"), "{\"architectures\": [");
  EXPECT_EQ(run_cli("doctor " + broken.dir().string()).rc, 3);
  EXPECT_EQ(run_cli("doctor " + clean.path("config.json").string()).rc, 3);  // not a directory
  Fixture err("llama");
  err.edit_config([](Json& c) { c["num_key_value_heads"] = 4; });
  EXPECT_EQ(run_cli("doctor " + err.dir().string()).rc, 1);
  EXPECT_EQ(run_cli("doctor").rc, 2);
}

}  // namespace

// Found by fuzz_doctor_config on the 16-core machine: a non-boolean attention_k_eq_v (null, a string)
// made the gemma4 globals fixer throw (nlohmann value() type_error) and doctor die with "internal
// error". It is read as "not true", like every other boolean key.
TEST(DoctorFixE2E, NonBooleanAttentionKEqVDoesNotCrashTheFixer) {
  for (const Json& v : {Json(nullptr), Json("true"), Json(1)}) {
    SCOPED_TRACE(v.dump());
    Fixture fx("gemma4-dense-mm");
    fx.edit_config([&](Json& c) {
      c["text_config"].erase("per_layer_config");
      c["text_config"]["attention_k_eq_v"] = v;
    });
    const auto s0 = fx.snapshot();
    for (const char* flags : {"", "--fix --dry-run"}) {
      int rc = -1;
      Json j = run_json(fx, flags, &rc);
      EXPECT_TRUE(rc == 0 || rc == 1) << flags << " rc " << rc;
      EXPECT_TRUE(has_kind(j["findings"], "gemma4-missing-global-kv-fields")) << j.dump(2);
    }
    EXPECT_EQ(fx.snapshot(), s0);
    int rc = -1;
    Json f = run_json(fx, "--fix", &rc);
    EXPECT_TRUE(rc == 0 || rc == 1) << rc;
    const Json after = Json::parse(fx.snapshot().at("config.json"));
    EXPECT_EQ(after["text_config"]["global_head_dim"], 64) << f.dump(2);
    EXPECT_EQ(after["text_config"]["attention_k_eq_v"], v);  // the fixer does not touch it
  }
}
