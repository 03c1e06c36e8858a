// How a planned seat is served (kvplan/serving.h, vllm_args.h; issue 51 #3): the image tag of the planned version,
// the parser table with its first releases and chat-template markers, the vllm_args= words and refusals, and the
// seat syntax around them (round 4, R4-B20).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "fp4forge/kvplan/seat.h"
#include "fp4forge/kvplan/serving.h"
#include "fp4forge/kvplan/vllm_args.h"
#include "fp4forge/model/vllm_parsers.h"

namespace fp4forge::kvplan {
namespace {

namespace stdfs = std::filesystem;

VllmRules rules(const char* v) {
  auto r = vllm_rules(v);
  EXPECT_TRUE(r.ok()) << v;
  return *r;
}

TEST(KvplanServing, ImageTagIsTheReleaseOfThePlannedVersion) {
  EXPECT_EQ(vllm_image_tag(rules("0.33")), "v0.33.0");
  EXPECT_EQ(vllm_image_tag(rules("0.28")), "v0.28.0");
  EXPECT_EQ(vllm_image_tag(rules("0.9.1")), "v0.9.1");
  EXPECT_EQ(vllm_image_tag(rules("v0.11.2")), "v0.11.2");
}

// Every row names a registered family, a first release and a source; a family lists one kind's names so that the
// preferred (newest) comes first.
TEST(KvplanServing, ParserTableRowsAreComplete) {
  std::set<std::pair<int, int>> seen;
  for (const VllmParser& p : vllm_parsers()) {
    EXPECT_NE(p.family, Family::UNKNOWN);
    EXPECT_FALSE(p.name.empty());
    EXPECT_FALSE(p.source.empty()) << p.name;
    EXPECT_TRUE(p.first_major > 0 || p.first_minor > 0) << p.name;
    EXPECT_FALSE(p.markers[0].empty()) << p.name << ": a row without a chat-template marker";
  }
}

TEST(KvplanServing, QwenTemplatesPickTheirToolFormatAndThinkingTheReasoningParser) {
  std::vector<std::string> notes;
  const std::string json_thinks = "{% if enable_thinking %}...<tool_call>\n{\"name\": ...}</tool_call>";
  const std::string xml = "<tool_call>\n<function=name>\n<parameter=x>";
  EXPECT_EQ(choose_parser(Family::QWEN3, ParserKind::TOOL, rules("0.33"), json_thinks, notes).name, "hermes");
  EXPECT_EQ(choose_parser(Family::QWEN3, ParserKind::REASONING, rules("0.33"), json_thinks, notes).name, "qwen3");
  EXPECT_EQ(choose_parser(Family::QWEN3_5_MOE, ParserKind::TOOL, rules("0.33"), xml + "enable_thinking", notes).name,
            "qwen3_coder");
  EXPECT_TRUE(notes.empty());
  // An instruct template that does not think gets no reasoning parser, silently (Qwen3-Instruct-2507).
  EXPECT_EQ(choose_parser(Family::QWEN3_MOE, ParserKind::REASONING, rules("0.33"), "<tool_call>", notes).name, "");
  EXPECT_TRUE(notes.empty());
  // Below qwen3_coder's first release an XML template gets no tool parser, never hermes (another format).
  const auto old = choose_parser(Family::QWEN3_MOE, ParserKind::TOOL, rules("0.9"), xml, notes);
  EXPECT_EQ(old.name, "");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("vLLM 0.9 has no 'qwen3_coder' tool-call parser (first in 0.10.0, inferred)"),
            std::string::npos) << notes[0];
  EXPECT_NE(notes[0].find("probe's tools check would fail"), std::string::npos) << notes[0];
  notes.clear();
  const auto qwen3_08 = choose_parser(Family::QWEN3, ParserKind::REASONING, rules("0.8"), json_thinks, notes);
  EXPECT_EQ(qwen3_08.name, "");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("no 'qwen3' reasoning parser (first in 0.9.0, inferred)"), std::string::npos) << notes[0];
}

TEST(KvplanServing, AnOlderNameOfTheSameFormatServesOlderReleases) {
  std::vector<std::string> notes;
  const std::string glm = "{%- if tools -%}<tool_call>{{ name }}<arg_key>k</arg_key>{% if enable_thinking %}";
  EXPECT_EQ(choose_parser(Family::GLM4_MOE, ParserKind::TOOL, rules("0.33"), glm, notes).name, "glm45");
  EXPECT_EQ(choose_parser(Family::GLM4_MOE, ParserKind::TOOL, rules("0.10"), glm, notes).name, "glm4_moe");
  EXPECT_EQ(choose_parser(Family::GLM4_MOE, ParserKind::REASONING, rules("0.10.1"), glm, notes).name, "glm45");
  EXPECT_EQ(choose_parser(Family::GLM4_MOE, ParserKind::REASONING, rules("0.10"), glm, notes).name, "glm4_moe");
  EXPECT_TRUE(notes.empty());
  const auto gpt = choose_parser(Family::GPT_OSS, ParserKind::TOOL, rules("0.10.2"), "{% if tools %}", notes);
  EXPECT_EQ(gpt.name, "openai");
  EXPECT_EQ(gpt.first_version, "0.10.2");
  EXPECT_FALSE(gpt.inferred);
  EXPECT_EQ(choose_parser(Family::GPT_OSS, ParserKind::TOOL, rules("0.10.1"), "{% if tools %}", notes).name, "");
}

TEST(KvplanServing, FamiliesWithoutAParserOrATemplateWithoutToolsSaySo) {
  std::vector<std::string> notes;
  EXPECT_EQ(choose_parser(Family::GEMMA3, ParserKind::TOOL, rules("0.33"), "{% if tools %}", notes).name, "");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("no vLLM tool-call parser is recorded for family gemma3"), std::string::npos) << notes[0];
  EXPECT_NE(notes[0].find("vllm_args=--enable-auto-tool-choice --tool-call-parser NAME"), std::string::npos);
  notes.clear();
  EXPECT_EQ(choose_parser(Family::GEMMA3, ParserKind::REASONING, rules("0.33"), "", notes).name, "");
  EXPECT_TRUE(notes.empty());  // a family without a reasoning parser: nothing to say
  EXPECT_EQ(choose_parser(Family::LLAMA, ParserKind::TOOL, rules("0.33"), "{{ bos_token }}", notes).name, "");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("the chat template renders no tool calls (none of 'tools' in it)"), std::string::npos)
      << notes[0];
}

TEST(KvplanVllmArgs, ShellWordsAndRefusedFlags) {
  auto a = parse_vllm_args("--enable-chunked-prefill --override-generation-config '{\"temperature\": 0.6}' "
                           "--chat-template \"/models/a b/t.jinja\" --x a\\ b --y {\"k\":\"v\"}");
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_EQ(*a, (std::vector<std::string>{"--enable-chunked-prefill", "--override-generation-config",
                                           "{\"temperature\": 0.6}", "--chat-template", "/models/a b/t.jinja", "--x",
                                           "a b", "--y", "{\"k\":\"v\"}"}));
  EXPECT_EQ(vllm_flag_name("--max_model_len=4096"), "max-model-len");
  EXPECT_EQ(vllm_flag_name("-tp"), "tensor-parallel-size");
  EXPECT_EQ(vllm_flag_name("--speculative-config.method"), "speculative-config");
  EXPECT_EQ(vllm_flag_name("-1"), "");
  EXPECT_EQ(vllm_flag_name("value"), "");
  for (const char* bad : {"--max-model-len 4096", "--max_model_len=4096", "--gpu-memory-utilization 0.5", "-tp 2",
                          "--kv-cache-memory-bytes 8G", "--speculative-config.method ngram", "--port 9000",
                          "--served-model-name x", "--enable-prefix-caching"}) {
    const auto r = parse_vllm_args(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.error().code, Errc::USAGE);
    EXPECT_NE(r.error().message.find("is set by plan"), std::string::npos) << r.error().message;
  }
  for (const char* bad : {"'--x", "--x \"y", "--x y\\", "", "   ", "value --x", "--x\ny"}) {
    const auto r = parse_vllm_args(bad);
    EXPECT_FALSE(r.ok()) << bad;
  }
}

TEST(KvplanSeatArg, VllmArgsIsTheLastKeyAndKeepsCommasAndColons) {
  const auto a = parse_seat_arg("s=./m:tp=1,vllm_args=--override-generation-config {\"a\":1,\"b\":2} --x=y:z");
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_EQ(a->dir, stdfs::path("./m"));
  EXPECT_EQ(a->kv.tp, 1);
  EXPECT_EQ(a->vllm_args, (std::vector<std::string>{"--override-generation-config", "{\"a\":1,\"b\":2}", "--x=y:z"}));
  const auto b = parse_seat_arg("s=./m:vllm-args=--enable-chunked-prefill");
  ASSERT_TRUE(b.ok()) << b.error().message;
  EXPECT_EQ(b->dir, stdfs::path("./m"));
  EXPECT_EQ(b->vllm_args, std::vector<std::string>{"--enable-chunked-prefill"});
  const auto c = parse_seat_arg("s=./m:vllm_args=--max-model-len 8");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().message.find("use the seat key max_model_len="), std::string::npos) << c.error().message;
}

// Round 4, R4-B20: a key list that does not parse after a folder is a usage error about the key list, not a path.
TEST(KvplanSeatArg, AMalformedKeyListAfterAFolderIsAUsageError) {
  const stdfs::path dir = stdfs::temp_directory_path() / ("fp4forge-serving-" + std::to_string(::getpid()));
  stdfs::create_directories(dir);
  const std::string d = dir.string();
  const std::pair<std::string, std::string> cases[] = {
      {"a=" + d + ":tp", "'tp' is not key=value"},
      {"a=" + d + ":=4", "'=4'"},
      // a decimal comma: said as one, with the point (issue 55 tryout: "'0' is invalid", no hint)
      {"a=" + d + ":util=0,5", "'util=0,5': ',' separates seat keys, so this reads as two; write the decimal with a "
                               "point (0.5)"},
      {"a=" + d + ":max-num-seq=4", "unknown key 'max_num_seq' (did you mean 'max_num_seqs'?)"},
      {"a=" + d + ":maxmodellen=4096", "(did you mean 'max_model_len'?)"},
      {"a=" + d + ":served_name=a: b", "' b' is not key=value"},
      {"a=" + d + ":served_name=a\nb", "control character"},
      {"a=" + d + ":", "nothing follows"},
      {"a=./no-such-dir:tp", "'tp' is not key=value"},  // a seat key after the ':' names the problem too
  };
  for (const auto& [spec, want] : cases) {
    const auto r = parse_seat_arg(spec);
    ASSERT_FALSE(r.ok()) << spec;
    EXPECT_EQ(r.error().code, Errc::USAGE) << spec;
    EXPECT_NE(r.error().message.find(want), std::string::npos) << spec << ": " << r.error().message;
  }
  // A folder whose name holds a colon is still a folder.
  stdfs::create_directories(dir / "a:b");
  const auto ok = parse_seat_arg("a=" + (dir / "a:b").string());
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok->dir, dir / "a:b");
  stdfs::remove_all(dir);
}

}  // namespace
}  // namespace fp4forge::kvplan
