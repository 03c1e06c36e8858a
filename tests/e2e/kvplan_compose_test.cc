// `plan --emit-compose` writes stacks vLLM can start (issue 51 #3): the image of the planned version, the family's
// parser flags by chat template and version, vllm_args=, the refusal of every seat vLLM could not start (config-only,
// no tokenizer, no chat template, MTP gone under spec_tokens, a config form the version cannot build), the
// headroom, the --api-host note; and round 4's R4-B12 (YAML scalars LiteLLM would retype) and R4-B20 (a malformed
// key list is a usage error).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <algorithm>
#include <map>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "test_util.h"

namespace {

namespace stdfs = std::filesystem;
using fp4forge::testutil::kData;
using fp4forge::testutil::q;
using fp4forge::testutil::run_cli;
using fp4forge::testutil::slurp;
using fp4forge::testutil::warning_kinds;

constexpr const char* kGpu = " --gpu '0=80GiB:name=NVIDIA H100 80GB HBM3'";
// A Qwen3 template that renders JSON tool calls and can think (the markers of model/vllm_parsers.cc).
constexpr const char* kQwenTemplate =
    "{%- if tools %}<tools>{{ tools }}</tools>{%- endif %}{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
    "{{ m['content'] }}<|im_end|>{% endfor %}{%- if enable_thinking is defined and not enable_thinking %}<think>\n\n"
    "</think>{% endif %}<tool_call>";

class KvplanCompose : public ::testing::Test {
 protected:
  void SetUp() override {
    if (fp4forge::testutil::kCli.empty()) GTEST_SKIP() << "CLI not built";
    tmp_ = stdfs::temp_directory_path() / ("fp4forge-compose-e2e-" + std::to_string(::getpid()) + "-" +
                                           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    stdfs::remove_all(tmp_);
    stdfs::create_directories(tmp_);
  }
  void TearDown() override {
    std::error_code ec;
    if (!tmp_.empty()) stdfs::remove_all(tmp_, ec);
  }
  /** tests/data/NAME copied to tmp/AS (the fixtures are small; a shard linked from outside the folder is refused),
   * `drop` left out. */
  stdfs::path copy(const std::string& name, const std::string& as, const std::vector<std::string>& drop = {}) {
    const stdfs::path d = tmp_ / as;
    stdfs::create_directories(d);
    for (const auto& e : stdfs::directory_iterator(kData + "/" + name)) {
      const std::string f = e.path().filename().string();
      if (std::find(drop.begin(), drop.end(), f) != drop.end()) continue;
      stdfs::copy_file(e.path(), d / f);
    }
    return d;
  }
  void write(const stdfs::path& p, const std::string& text) { std::ofstream(p) << text; }
  /** Runs plan; `err` gets stderr. */
  int plan(const std::string& args, std::string* out, std::string* err = nullptr) {
    std::string e;
    const int rc = run_cli("plan " + args, out, &e);
    if (err) *err = e;
    return rc;
  }
  static std::vector<std::string> command(const stdfs::path& compose, const std::string& service) {
    std::vector<std::string> v;
    for (const auto& n : YAML::LoadFile(compose.string())["services"][service]["command"]) v.push_back(n.as<std::string>());
    return v;
  }
  static bool has(const std::vector<std::string>& v, const std::string& w) {
    return std::find(v.begin(), v.end(), w) != v.end();
  }
  static std::string after(const std::vector<std::string>& v, const std::string& w) {
    auto it = std::find(v.begin(), v.end(), w);
    return (it == v.end() || it + 1 == v.end()) ? "<none>" : *(it + 1);
  }
  stdfs::path tmp_;
};

TEST_F(KvplanCompose, TheImageIsThePlannedReleaseAndTheParsersTheFamilys) {
  const stdfs::path q3 = copy("qwen3", "q3");
  write(q3 / "chat_template.jinja", kQwenTemplate);
  std::string out, err;
  const stdfs::path d = tmp_ / "deploy";
  ASSERT_EQ(plan("--seat q=" + q(q3) + kGpu + " --emit-compose " + q(d) + " --json", &out, &err), 0) << err << out;
  const auto cmd = command(d / "q" / "compose.yaml", "q");
  EXPECT_EQ(YAML::LoadFile((d / "q" / "compose.yaml").string())["services"]["q"]["image"].as<std::string>(),
            "vllm/vllm-openai:v0.34.0");
  EXPECT_TRUE(has(cmd, "--enable-auto-tool-choice"));
  EXPECT_EQ(after(cmd, "--tool-call-parser"), "hermes");
  EXPECT_EQ(after(cmd, "--reasoning-parser"), "qwen3");
  const auto j = nlohmann::json::parse(out);
  const auto& sv = j["seats"][0]["serving"];
  EXPECT_EQ(sv["image"], "vllm/vllm-openai:v0.34.0");
  EXPECT_EQ(sv["can_start"], true);
  EXPECT_EQ(sv["tool_call_parser"]["name"], "hermes");
  EXPECT_EQ(sv["tool_call_parser"]["first_vllm"], "0.6.0");
  EXPECT_EQ(sv["reasoning_parser"]["name"], "qwen3");
  EXPECT_EQ(sv["reasoning_parser"]["inferred"], true);
  EXPECT_EQ(sv["chat_template"], "chat_template.jinja");

  // The version pins the tag; a patch release is its own tag; a mirror keeps the tags; --image replaces them.
  const stdfs::path d2 = tmp_ / "d2";
  ASSERT_EQ(plan("--seat 'q=" + q3.string() + ":vllm_version=0.28' --seat 'p=" + q3.string() +
                 ":vllm_version=0.9.1'" + kGpu + " --emit-compose " + q(d2) + " --image-repo registry.local/vllm-openai",
                 &out, &err), 0) << err << out;
  EXPECT_EQ(YAML::LoadFile((d2 / "q" / "compose.yaml").string())["services"]["q"]["image"].as<std::string>(),
            "registry.local/vllm-openai:v0.28.0");
  EXPECT_EQ(YAML::LoadFile((d2 / "p" / "compose.yaml").string())["services"]["p"]["image"].as<std::string>(),
            "registry.local/vllm-openai:v0.9.1");
  const stdfs::path d3 = tmp_ / "d3";
  ASSERT_EQ(plan("--seat q=" + q(q3) + kGpu + " --emit-compose " + q(d3) + " --image my/vllm:patched", &out, &err), 0);
  EXPECT_EQ(YAML::LoadFile((d3 / "q" / "compose.yaml").string())["services"]["q"]["image"].as<std::string>(),
            "my/vllm:patched");
}

TEST_F(KvplanCompose, AVersionBeforeTheParserGetsNoFlagAndANote) {
  const stdfs::path q3 = copy("qwen3", "q3");
  write(q3 / "chat_template.jinja", kQwenTemplate);
  std::string out, err;
  const stdfs::path d = tmp_ / "deploy";
  ASSERT_EQ(plan("--seat 'q=" + q3.string() + ":vllm_version=0.8'" + kGpu + " --emit-compose " + q(d), &out, &err), 0)
      << err;
  const auto cmd = command(d / "q" / "compose.yaml", "q");
  EXPECT_FALSE(has(cmd, "--reasoning-parser"));
  EXPECT_EQ(after(cmd, "--tool-call-parser"), "hermes");  // hermes is older than 0.8
  // A GPU id Docker does not take is said (issue 55 tryout F: `gpuA` written without a word).
  EXPECT_EQ(err.find("compose device_id"), std::string::npos) << err;
  {
    std::string o2, e2;
    ASSERT_EQ(plan("--seat q=" + q3.string() + " --gpu gpuA=80GiB --emit-compose " + q(tmp_ / "ids"), &o2, &e2), 0)
        << e2;
    EXPECT_NE(e2.find("GPU 'gpuA' is written as a compose device_id"), std::string::npos) << e2;
  }
  const std::string qy = slurp(d / "q" / "compose.yaml");  // it serves tools: the plain probe proves it
  EXPECT_NE(qy.find("# prove it before traffic: fp4forge probe http://localhost:"), std::string::npos) << qy;
  // The KV pool is said to be outside that proof, with the comparison as the plan's JSON gives it (tryout S-M3).
  {
    std::string jo, je;
    ASSERT_EQ(plan("--seat 'q=" + q3.string() + ":vllm_version=0.8'" + kGpu + " --json", &jo, &je), 0) << je;
    const auto pj = nlohmann::json::parse(jo);
    const std::uint64_t tokens = pj["seats"][0]["placement"]["num_blocks"].get<std::uint64_t>() *
                                 pj["seats"][0]["kv"]["attention_block_size"].get<std::uint64_t>();
    EXPECT_NE(qy.find("# the probe above does not compare the KV pool with this plan; to compare: fp4forge probe "
                      "http://localhost:"),
              std::string::npos)
        << qy;
    EXPECT_NE(qy.find("--model q --checks kv --expect-kv-tokens " + std::to_string(tokens) + " "), std::string::npos)
        << qy;
  }
  EXPECT_EQ(qy.find("--no-tools"), std::string::npos) << qy;
  EXPECT_NE(out.find("vLLM 0.8 has no 'qwen3' reasoning parser (first in 0.9.0, inferred)"), std::string::npos) << out;
}

TEST_F(KvplanCompose, AFamilyWithoutAParserOrATemplateWithoutToolsSaysProbeWillFail) {
  std::string out, err;
  const stdfs::path d = tmp_ / "deploy";
  ASSERT_EQ(plan("--seat g=" + q(kData + "/gemma3") + " --seat l=" + q(kData + "/llama") + kGpu + " --emit-compose " +
                     q(d) + " --json",
                 &out, &err), 0) << err << out;
  EXPECT_FALSE(has(command(d / "g" / "compose.yaml", "g"), "--enable-auto-tool-choice"));
  EXPECT_FALSE(has(command(d / "l" / "compose.yaml", "l"), "--tool-call-parser"));
  const auto j = nlohmann::json::parse(out);
  EXPECT_TRUE(j["seats"][0]["serving"]["tool_call_parser"].is_null());
  const std::string gn = j["seats"][0]["serving"]["notes"].dump(), ln = j["seats"][1]["serving"]["notes"].dump();
  EXPECT_NE(gn.find("no vLLM tool-call parser is recorded for family gemma3"), std::string::npos) << gn;
  EXPECT_NE(gn.find("probe's tools check would fail"), std::string::npos) << gn;
  EXPECT_NE(ln.find("the chat template renders no tool calls"), std::string::npos) << ln;
  // The stack names the probe that proves it as written: without tools, --no-tools (issue 55 tryout F: a stack
  // was written beside a note that probe would fail it); one that serves tools, the plain probe.
  const std::string gy = slurp(d / "g" / "compose.yaml");
  EXPECT_NE(gy.find("# prove it before traffic: fp4forge probe http://localhost:"), std::string::npos) << gy;
  EXPECT_NE(gy.find(" --model g --no-tools (the stack passes no tool-call parser"), std::string::npos) << gy;
}

// A stack an earlier plan wrote for a seat this one does not have stays, and is named (issue 55 tryout H: --force
// with fewer seats left it silently).
TEST_F(KvplanCompose, AnEarlierPlansStackOfAGoneSeatIsNamed) {
  std::string out, err;
  const stdfs::path d = tmp_ / "deploy";
  ASSERT_EQ(
      plan("--seat a=" + q(kData + "/llama") + " --seat b=" + q(kData + "/qwen3") + kGpu + " --emit-compose " + q(d),
           &out, &err),
      0)
      << err;
  ASSERT_EQ(plan("--seat a=" + q(kData + "/llama") + kGpu + " --emit-compose " + q(d) + " --force", &out, &err), 0)
      << err;
  EXPECT_TRUE(stdfs::exists(d / "b" / "compose.yaml"));
  EXPECT_NE(err.find((d / "b" / "compose.yaml").string() + " is an earlier plan's stack of seat 'b', which this plan "
                                                           "does not have: left in place"),
            std::string::npos)
      << err;
}

TEST_F(KvplanCompose, VllmArgsPassThroughAfterPlansFlagsAndContradictionsAreRefused) {
  const stdfs::path q3 = copy("qwen3", "q3");
  write(q3 / "chat_template.jinja", kQwenTemplate);
  std::string out, err;
  const stdfs::path d = tmp_ / "deploy";
  ASSERT_EQ(plan("--seat 'q=" + q3.string() + ":tp=1,vllm_args=--enable-chunked-prefill --override-generation-config "
                 "{\"temperature\":0.6,\"top_p\":0.95} --reasoning-parser deepseek_r1'" + kGpu + " --emit-compose " +
                     q(d),
                 &out, &err), 0) << err;
  const auto cmd = command(d / "q" / "compose.yaml", "q");
  EXPECT_EQ(after(cmd, "--override-generation-config"), "{\"temperature\":0.6,\"top_p\":0.95}");
  EXPECT_TRUE(has(cmd, "--enable-chunked-prefill"));
  EXPECT_EQ(after(cmd, "--reasoning-parser"), "deepseek_r1");  // the user's parser wins
  EXPECT_EQ(std::count(cmd.begin(), cmd.end(), "--reasoning-parser"), 1);
  EXPECT_EQ(after(cmd, "--tool-call-parser"), "hermes");
  EXPECT_LT(std::find(cmd.begin(), cmd.end(), "--max-model-len"), std::find(cmd.begin(), cmd.end(), "--enable-chunked-prefill"));
  EXPECT_EQ(plan("--seat 'q=" + q3.string() + ":vllm_args=--max-model-len 4096'" + kGpu, &out, &err), 2);
  EXPECT_NE(err.find("--max-model-len is set by plan, not passed through; hint: use the seat key max_model_len="),
            std::string::npos) << err;
  EXPECT_EQ(plan("--seat 'q=" + q3.string() + ":vllm_args=--x \"unterminated'" + kGpu, &out, &err), 2);
  EXPECT_NE(err.find("unterminated double quote"), std::string::npos) << err;
}

// Tryout O-M1: a seat that requires a key: api_key_env=VAR reaches the stack (read from VAR when compose starts it,
// never written), the LiteLLM entry and the header's probe; a key in vllm_args is refused with that hint.
TEST_F(KvplanCompose, ASeatKeyIsCarriedByNameNeverWritten) {
  const stdfs::path q3 = copy("qwen3", "q3");
  write(q3 / "chat_template.jinja", kQwenTemplate);
  std::string out, err;
  EXPECT_EQ(plan("--seat 'q=" + q3.string() + ":vllm_args=--api-key sk-plan-123'" + kGpu + " --emit-compose " +
                     q(tmp_ / "no"),
                 &out, &err),
            2);
  EXPECT_NE(err.find("use the seat key api_key_env=VAR"), std::string::npos) << err;
  EXPECT_FALSE(stdfs::exists(tmp_ / "no"));
  EXPECT_EQ(plan("--seat 'q=" + q3.string() + ":api_key_env=sk-123!'" + kGpu, &out, &err), 2) << err;
  const stdfs::path d = tmp_ / "deploy";
  ASSERT_EQ(plan("--seat 'q=" + q3.string() + ":api_key_env=SEAT_KEY'" + kGpu + " --emit-compose " + q(d) +
                     " --api-host gpu-host-1",
                 &out, &err),
            0)
      << err;
  const auto cmd = command(d / "q" / "compose.yaml", "q");
  EXPECT_EQ(after(cmd, "--api-key"), "${SEAT_KEY:?set SEAT_KEY to the seat's API key}");
  const auto entry = YAML::LoadFile((d / "litellm.yaml").string())["model_list"][0];
  EXPECT_EQ(entry["litellm_params"]["api_key"].as<std::string>(), "os.environ/SEAT_KEY");
  std::ifstream f(d / "q" / "compose.yaml");
  std::string header;
  for (std::string line; std::getline(f, line);)
    if (line.find("prove it before traffic") != std::string::npos) header = line;
  EXPECT_NE(header.find("--model q --api-key-env SEAT_KEY"), std::string::npos) << header;
}

// Tryout R-H1: a stack was written (exit 0) for folders verify and doctor reject. With --emit-compose every check
// doctor runs gates the stack: a NaN scale byte in fp4forge's own output, a tokenizer cap below the context.
TEST_F(KvplanCompose, AFolderDoctorRejectsGetsNoStack) {
  const stdfs::path qd = tmp_ / "q";
  std::string out, err;
  ASSERT_EQ(fp4forge::testutil::run_cli("quantize " + q(kData + "/llama") + " " + q(qd) + " --no-progress", &out, &err),
            0)
      << err;
  // One E4M3 NaN byte (0x7F) in the first weight_scale of the first shard that holds one.
  bool patched = false;
  for (const auto& e : stdfs::directory_iterator(qd)) {
    if (patched || e.path().extension() != ".safetensors") continue;
    std::string bytes = slurp(e.path());
    std::uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    const auto h = nlohmann::json::parse(bytes.substr(8, n));
    for (const auto& [name, t] : h.items())
      if (name.ends_with(".weight_scale") && !patched) {
        bytes[8 + n + t["data_offsets"][0].get<std::size_t>()] = static_cast<char>(0x7F);
        patched = true;
      }
    if (patched) std::ofstream(e.path(), std::ios::binary) << bytes;
  }
  ASSERT_TRUE(patched);
  const stdfs::path d = tmp_ / "deploy";
  EXPECT_EQ(plan("--seat n=" + q(qd) + kGpu + " --emit-compose " + q(d) + " --json", &out, &err), 1) << err;
  EXPECT_FALSE(stdfs::exists(d));
  EXPECT_NE(err.find("seat 'n' fails doctor's checks: doctor: scale-nan-byte:"), std::string::npos) << err;
  EXPECT_NE(err.find("could not start or serve"), std::string::npos) << err;
  const auto j = nlohmann::json::parse(out);
  ASSERT_EQ(j["outputs"]["compose_refused"].size(), 1u) << out;
  EXPECT_EQ(j["outputs"]["compose_refused"][0]["kind"], "doctor-error");
  // Sizing alone reads no scale: the plan is still the answer (exit 0).
  EXPECT_EQ(plan("--seat n=" + q(qd) + kGpu, &out, &err), 0) << err;
  // A tokenizer cap below the context: refused, unless the container brings its own tokenizer.
  const stdfs::path tl = copy("llama", "capped");
  auto tc = nlohmann::json::parse(slurp(tl / "tokenizer_config.json"));
  tc["model_max_length"] = 64;
  write(tl / "tokenizer_config.json", tc.dump());
  EXPECT_EQ(plan("--seat t=" + q(tl) + kGpu + " --emit-compose " + q(d), &out, &err), 1) << err;
  EXPECT_NE(err.find("seat 't' fails doctor's checks: doctor: tokenizer-max-length:"), std::string::npos) << err;
  EXPECT_FALSE(stdfs::exists(d));
  EXPECT_EQ(plan("--seat 't=" + tl.string() + ":vllm_args=--tokenizer /models/tok'" + kGpu + " --emit-compose " + q(d),
                 &out, &err),
            0)
      << err;
  EXPECT_TRUE(stdfs::exists(d / "t" / "compose.yaml"));
}

// Tryout R-M1: a seat that stops for another (replaces=) was warned about as "does not fit (short by 0 B)" and listed
// in compose_skipped; it is a note and compose_stopped.
TEST_F(KvplanCompose, ASeatThatStopsForAnotherIsNotASeatThatDoesNotFit) {
  std::string out, err;
  const stdfs::path d = tmp_ / "swap";
  ASSERT_EQ(plan("--seat old=" + q(kData + "/llama") +
                     ":gpu=0,gpu_memory_utilization=0.45 --seat new=" + q(kData + "/qwen3") +
                     ":gpu=0,replaces=old,port=18965 --gpu 0=24GiB:used=12GiB --emit-compose " + q(d) + " --json",
                 &out, &err),
            0)
      << err;
  EXPECT_EQ(err.find("does not fit"), std::string::npos) << err;
  const auto j = nlohmann::json::parse(out);
  EXPECT_TRUE(j["outputs"]["compose_skipped"].empty()) << out;
  ASSERT_EQ(j["outputs"]["compose_stopped"].size(), 1u) << out;
  EXPECT_EQ(j["outputs"]["compose_stopped"][0], "old");
  EXPECT_TRUE(stdfs::exists(d / "new" / "compose.yaml"));
  EXPECT_FALSE(stdfs::exists(d / "old"));
  bool noted = false;
  for (const auto& n : j["notes"])
    noted |=
        n.get<std::string>().find("seat 'old' stops for seat 'new' (replaces=): no stack written") != std::string::npos;
  EXPECT_TRUE(noted) << j["notes"].dump();
}

// Each seat vLLM could not start: exit 1, one error line with the reason and the fix, nothing written.
TEST_F(KvplanCompose, ASeatThatCannotStartRefusesTheWholeStack) {
  const stdfs::path cfg = tmp_ / "cfg-only";
  stdfs::create_directories(cfg);
  for (const char* f : {"config.json", "tokenizer.json", "chat_template.jinja"})  // weights are all it lacks
    stdfs::copy_file(kData + "/llama/" + f, cfg / f);
  const stdfs::path notok = copy("llama", "no-tokenizer", {"tokenizer.json"});
  const stdfs::path notpl = copy("llama", "no-template", {"chat_template.jinja"});
  const stdfs::path mtp = copy("qwen3_5-dense", "mtp-gone");
  auto c = nlohmann::json::parse(slurp(mtp / "config.json"));
  c["mtp_num_hidden_layers"] = 2;  // the fixture holds mtp.layers.0 only
  write(mtp / "config.json", c.dump());
  // A header-only synth (its data reads as zeros), with the serving files a seat needs beside it.
  const stdfs::path ho = tmp_ / "header-only";
  {
    std::string o, e;
    ASSERT_EQ(fp4forge::testutil::run_cli("synth --arch llama --size tiny --header-only --no-progress --out " + q(ho), &o, &e),
              0) << e;
    for (const char* f : {"tokenizer.json", "chat_template.jinja"})
      if (!stdfs::exists(ho / f)) stdfs::copy_file(kData + "/llama/" + f, ho / f);
  }
  struct Case {
    std::string seat, kind, reason, fix;
  };
  const std::vector<Case> cases = {
      {"h=" + ho.string(), "header-only", "DIR was written by `synth --header-only`: its tensor data reads as zeros",
       "serve the release (or fp4forge quantize of it) instead of"},
      {"c=" + cfg.string() + ":weights=2GiB", "config-only", "DIR holds no safetensors weights", "fp4forge quantize SRC"},
      {"t=" + notok.string(), "no-tokenizer", "DIR holds no tokenizer file", "--tokenizer-from REF"},
      {"p=" + notpl.string(), "no-chat-template", "DIR holds no chat template", "--chat-template PATH"},
      {"m=" + mtp.string() + ":spec_tokens=1", "mtp-missing", "spec_tokens=1 asks for MTP speculative decoding",
       "--fix --mtp-from RELEASE"},
      {"g=" + kData + "/gemma4-dense-mm:vllm_version=0.27", "config-form",
       "Gemma-4's full-attention geometry only in per_layer_config (transformers >= 5.15 form): vLLM 0.27 cannot "
       "build it, 0.28 and newer can",
       "vllm_version=0.28 or newer"},
  };
  for (const auto& k : cases) {
    SCOPED_TRACE(k.kind);
    std::string out, err;
    const stdfs::path d = tmp_ / ("d-" + k.kind);
    // A good seat beside it: all or nothing.
    EXPECT_EQ(plan("--seat '" + k.seat + "' --seat ok=" + q(kData + "/llama") + kGpu + " --emit-compose " + q(d) + " --json",
                   &out, &err), 1) << err << out;
    EXPECT_FALSE(stdfs::exists(d)) << "a refused stack wrote files";
    EXPECT_NE(err.find("cannot start: " + k.reason), std::string::npos) << err;
    EXPECT_NE(err.find(k.fix), std::string::npos) << err;
    EXPECT_NE(err.find("nothing written"), std::string::npos) << err;
    {  // the text report says it too, last (issue 55 tryout F: it ended "all seats fit" under exit 1)
      std::string text, e2;
      EXPECT_EQ(plan("--seat '" + k.seat + "' --seat ok=" + q(kData + "/llama") + kGpu + " --emit-compose " + q(d),
                     &text, &e2),
                1);
      EXPECT_NE(text.find("--emit-compose: nothing written: seat(s) '" + k.seat.substr(0, 1) + "' cannot start"),
                std::string::npos)
          << text;
    }
    const auto j = nlohmann::json::parse(out);
    ASSERT_EQ(j["outputs"]["compose_refused"].size(), 1u) << out;
    EXPECT_EQ(j["outputs"]["compose_refused"][0]["kind"], k.kind);
    EXPECT_TRUE(j["outputs"]["compose_files"].empty());
    EXPECT_EQ(j["seats"][0]["serving"]["can_start"], false);
    EXPECT_EQ(j["seats"][1]["serving"]["can_start"], true);
    // A folder that only sizes the seat (config-only, header-only) offers the plan as its answer.
    const bool sized_only = k.kind == "config-only" || k.kind == "header-only";
    EXPECT_EQ(j["seats"][0]["serving"]["blockers"][0]["sized_only"], sized_only) << out;
    EXPECT_EQ(err.find("or plan without --emit-compose to size it") != std::string::npos, sized_only) << err;
    // Without --emit-compose the plan still says why (text); a seat that cannot start fails it whatever its memory,
    // a folder only sized does not (issue 55 tryout: exit 0 and ok:true for a seat it said cannot start); the
    // summary says it beside "all seats fit" (it said "all seats fit" alone under a "cannot start" line).
    EXPECT_EQ(plan("--seat '" + k.seat + "'" + kGpu, &out, &err), sized_only ? 0 : 1) << err;
    {
      std::string jo;
      plan("--seat '" + k.seat + "'" + kGpu + " --json", &jo, &err);
      const auto pj = nlohmann::json::parse(jo);
      EXPECT_EQ(pj["ok"], sized_only) << jo.substr(0, 300);
      EXPECT_EQ(pj["all_start"], sized_only);
      EXPECT_EQ(pj["all_fit"], true);
      EXPECT_EQ(pj["seats"][0]["placement"]["cannot_start"], !sized_only);
    }
    if (sized_only) {
      EXPECT_NE(out.find("sized only       " + k.reason.substr(0, 20)), std::string::npos) << out;
      const std::string flat = std::regex_replace(out, std::regex("\n +"), " ");  // the report's wrapped prose
      EXPECT_NE(flat.find("this plan sizes the seat, no stack starts from DIR; to serve it: "), std::string::npos) << out;
      EXPECT_EQ(out.find("cannot start"), std::string::npos) << out;
      EXPECT_NE(out.find("all seats fit; sized only: '" + k.seat.substr(0, 1) + "' (a folder no stack starts from)"),
                std::string::npos) << out;
    } else {
      EXPECT_NE(out.find("cannot start     " + k.reason.substr(0, 20)), std::string::npos) << out;
      EXPECT_NE(out.find("all seats fit; '" + k.seat.substr(0, 1) + "' cannot start as it stands"), std::string::npos)
          << out;
    }
  }
  // The fix works: a planned version that builds the form, vllm_args naming a tokenizer or a template.
  std::string out, err;
  EXPECT_EQ(plan("--seat 'g=" + kData + "/gemma4-dense-mm:vllm_version=0.28'" + kGpu + " --emit-compose " +
                     q(tmp_ / "ok-g"), &out, &err), 0) << err;
  EXPECT_EQ(plan("--seat 't=" + notok.string() + ":vllm_args=--tokenizer /models/tok' --seat 'p=" + notpl.string() +
                     ":vllm_args=--chat-template /models/p/t.jinja'" + kGpu + " --emit-compose " + q(tmp_ / "ok-t"),
                 &out, &err), 0) << err;
  EXPECT_TRUE(stdfs::exists(tmp_ / "ok-t" / "t" / "compose.yaml"));
}

// The serving-file blockers are doctor's check (model/serving_files.h): a folder without a tokenizer or a template is
// refused as no-tokenizer alone, as doctor reports it (missing-tokenizer, no missing-chat-template: vLLM reads the
// template with the tokenizer), and the reasons name doctor's kinds.
TEST_F(KvplanCompose, TheServingFileBlockersAreDoctorsCheck) {
  const stdfs::path bare = copy("llama", "bare", {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja"});
  std::string out, err;
  ASSERT_EQ(run_cli("doctor " + q(bare) + " --json", &out, &err), 1) << out;
  EXPECT_EQ(warning_kinds(nlohmann::json::parse(out)).count("missing-chat-template"), 0u) << out;
  EXPECT_EQ(plan("--seat 'b=" + bare.string() + "'" + kGpu + " --emit-compose " + q(tmp_ / "d") + " --json", &out, &err),
            1) << err;
  const auto j = nlohmann::json::parse(out);
  ASSERT_EQ(j["seats"][0]["serving"]["blockers"].size(), 1u) << out;
  EXPECT_EQ(j["seats"][0]["serving"]["blockers"][0]["kind"], "no-tokenizer");
  EXPECT_NE(j["seats"][0]["serving"]["blockers"][0]["reason"].get<std::string>().find("(doctor: missing-tokenizer)"),
            std::string::npos);
  const stdfs::path notpl = copy("llama", "no-template", {"chat_template.jinja"});
  std::ofstream(notpl / "tokenizer_config.json", std::ios::trunc) << "{}\n";  // its chat_template gone too
  ASSERT_EQ(run_cli("doctor " + q(notpl) + " --json", &out, &err), 0) << out;
  EXPECT_EQ(warning_kinds(nlohmann::json::parse(out)).count("missing-chat-template"), 1u) << out;
  EXPECT_EQ(plan("--seat 'p=" + notpl.string() + "'" + kGpu + " --emit-compose " + q(tmp_ / "d") + " --json", &out,
                 &err), 1) << err;
  EXPECT_NE(err.find("(doctor: missing-chat-template)"), std::string::npos) << err;
  EXPECT_FALSE(stdfs::exists(tmp_ / "d"));
}

TEST_F(KvplanCompose, HeadroomIsKeptFreeOnEveryGpu) {
  std::string out, err;
  const std::string seat = " --seat 'a=" + kData + "/llama:max_model_len=2048'";
  ASSERT_EQ(plan(seat + " --gpu 0=24GiB:reserved=0 --json", &out, &err), 0) << err;
  auto j = nlohmann::json::parse(out);
  EXPECT_EQ(j["gpus"][0]["headroom_bytes"], 1ull << 30);  // the default
  EXPECT_GE(j["gpus"][0]["free_bytes"].get<std::uint64_t>(), 1ull << 30);
  ASSERT_EQ(plan(seat + " --gpu 0=24GiB:reserved=0:headroom=5GiB --gpu 1=24GiB:reserved=0 --headroom 3GiB --json", &out,
                 &err), 0) << err;
  j = nlohmann::json::parse(out);
  EXPECT_EQ(j["gpus"][0]["headroom_bytes"], 5ull << 30);  // the GPU key beats --headroom
  EXPECT_EQ(j["gpus"][1]["headroom_bytes"], 3ull << 30);
  for (const auto& g : j["gpus"]) EXPECT_GE(g["free_bytes"].get<std::uint64_t>(), g["headroom_bytes"].get<std::uint64_t>());
  // A seat that needs all but the headroom does not fit, and says the headroom is why.
  ASSERT_EQ(plan(seat + ",gpu_memory_utilization=0.9 --gpu 0=24GiB:reserved=0:headroom=4GiB --json", &out, &err), 1);
  j = nlohmann::json::parse(out);
  EXPECT_NE(j["seats"][0]["placement"]["reason"].get<std::string>().find("headroom of 4.00 GiB"), std::string::npos)
      << j["seats"][0]["placement"]["reason"];
  EXPECT_EQ(plan(seat + ",gpu_memory_utilization=0.9 --gpu 0=24GiB:reserved=0:headroom=0", &out, &err), 0) << err;
  EXPECT_EQ(plan(seat + " --gpu 0=24GiB --headroom 30GiB", &out, &err), 2);
  EXPECT_EQ(plan(seat + " --gpu 0=24GiB:headroom=lots", &out, &err), 2);
}

TEST_F(KvplanCompose, ALoopbackApiHostIsANote) {
  std::string out, err;
  ASSERT_EQ(plan("--seat a=" + q(kData + "/llama") + kGpu + " --emit-compose " + q(tmp_ / "a") + " --json", &out, &err), 0);
  EXPECT_NE(nlohmann::json::parse(out)["notes"].dump().find("cannot reach localhost"), std::string::npos) << out;
  ASSERT_EQ(plan("--seat a=" + q(kData + "/llama") + kGpu + " --emit-compose " + q(tmp_ / "b"), &out, &err), 0);
  EXPECT_NE(out.find("pass --api-host"), std::string::npos) << out;
  ASSERT_EQ(plan("--seat a=" + q(kData + "/llama") + kGpu + " --emit-compose " + q(tmp_ / "c") +
                     " --api-host gpu-host-1 --json", &out, &err), 0);
  EXPECT_EQ(nlohmann::json::parse(out)["notes"].dump().find("cannot reach"), std::string::npos) << out;
  EXPECT_EQ(YAML::LoadFile((tmp_ / "c" / "litellm.yaml").string())["model_list"][0]["litellm_params"]["api_base"]
                .as<std::string>(), "http://gpu-host-1:8000/v1");
}

// Tryout M-L6: a seat served with images says so in its LiteLLM entry (model_info.supports_vision), which gateway
// reads to keep a later swap of the alias on a backend that answers images; mm=off and a text model do not.
TEST_F(KvplanCompose, ASeatServedWithImagesSaysSoToLiteLLM) {
  std::string out, err;
  const stdfs::path d = tmp_ / "d";
  ASSERT_EQ(plan("--seat g=" + q(kData + "/gemma3-mm") + " --seat 'n=" + kData + "/gemma3-mm:mm=off' --seat t=" +
                     q(kData + "/llama") + kGpu + " --emit-compose " + q(d) + " --api-host gpu-host-1",
                 &out, &err),
            0)
      << err << out;
  std::map<std::string, YAML::Node> info;
  for (const auto& e : YAML::LoadFile((d / "litellm.yaml").string())["model_list"])
    info[e["model_name"].as<std::string>()] = e["model_info"];
  ASSERT_EQ(info.size(), 3u);
  ASSERT_TRUE(info["g"]["supports_vision"]) << out;
  EXPECT_TRUE(info["g"]["supports_vision"].as<bool>());
  EXPECT_FALSE(info["n"]["supports_vision"]);
  EXPECT_FALSE(info["t"]["supports_vision"]);
  // The probe the stack's header names applies the gate gateway applies to that entry (tryout N-M2).
  auto header_probe = [&](const std::string& seat) {
    std::ifstream f(d / seat / "compose.yaml");
    for (std::string line; std::getline(f, line);)
      if (line.find("prove it before traffic") != std::string::npos) return line;
    return std::string();
  };
  EXPECT_NE(header_probe("g").find("--model g --multimodal"), std::string::npos) << header_probe("g");
  EXPECT_EQ(header_probe("n").find("--multimodal"), std::string::npos) << header_probe("n");
  EXPECT_EQ(header_probe("t").find("--multimodal"), std::string::npos) << header_probe("t");
}

// R4-B12: a served name a YAML 1.1 reader would retype is quoted in both files; one yaml-cpp reads as a string.
TEST_F(KvplanCompose, ServedNamesAYamlReaderWouldRetypeAreQuoted) {
  int i = 0;
  for (const std::string name : {"yes", "Off", "y", "1.5", "0x1F", "012", "1_000", ".inf", "2024-01-01", "null", "~", "7"}) {
    SCOPED_TRACE(name);
    std::string out, err;
    const stdfs::path d = tmp_ / "d" / std::to_string(i++);
    ASSERT_EQ(plan("--seat 'a=" + kData + "/llama:served_name=" + name + "'" + kGpu + " --emit-compose " + q(d), &out,
                   &err), 0) << err;
    for (const stdfs::path& f : {d / "litellm.yaml", d / "a" / "litellm.yaml"}) {
      const YAML::Node n = YAML::LoadFile(f.string())["model_list"][0]["model_name"];
      EXPECT_EQ(n.Tag(), "!") << f << ": written plain:\n" << slurp(f);
      EXPECT_EQ(n.as<std::string>(), name);
    }
    EXPECT_EQ(after(command(d / "a" / "compose.yaml", "a"), "--served-model-name"), name);
  }
}

// R4-B20: a key list that does not parse is a usage error about the key list (exit 2), not a path (exit 4).
TEST_F(KvplanCompose, AMalformedKeyListIsAUsageError) {
  const std::string dir = kData + "/llama";
  for (const auto& [spec, want] : std::vector<std::pair<std::string, std::string>>{
           {"a=" + dir + ":tp", "'tp' is not key=value"},
           {"a=" + dir + ":=4", "'=4' is not key=value"},
           {"a=" + dir + ":util=0,5", "write the decimal with a point (0.5)"},
           {"a=" + dir + ":served_name=a: b", "' b' is not key=value"}}) {
    std::string out, err;
    EXPECT_EQ(plan("--seat '" + spec + "'" + kGpu, &out, &err), 2) << spec;
    EXPECT_NE(err.find(want), std::string::npos) << err;
    EXPECT_EQ(err.find("cannot open"), std::string::npos) << err;
  }
}

}  // namespace
