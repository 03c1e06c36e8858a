// util/yaml_strict.h: YAML read the way PyYAML's safe_load would accept it (round 4, class 3: one parser policy
// per format, as strict as the strictest consumer). One table of texts: accepted (with what they read as) or
// refused (with the line the message names). The expectations of the refused rows were checked against PyYAML 6.0
// (safe_load raises) and yaml-cpp 0.7 (Load reads something else, silently).
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fp4forge/util/yaml_strict.h"

namespace fp4forge::util {
namespace {

struct Case {
  std::string name;
  std::string text;
  std::string error;  ///< "" = accepted; else a part of the message
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }  // ctest lines name the row

std::vector<Case> cases() {
  using namespace std::string_literals;
  return {
      // duplicate keys, at any depth and in any style
      {"dup_top", "scheme: fp8-dynamic\nscheme: nvfp4a16\n", "line 2: duplicate key 'scheme' (first at line 1)"},
      {"dup_block_list", "rules:\n  - match: a\n    scheme: x\nrules:\n  - match: b\n", "line 4: duplicate key 'rules' (first at line 1)"},
      {"dup_nested", "a:\n  b: 1\n  c: 2\n  b: 3\n", "line 4: duplicate key 'b' (first at line 2)"},
      {"dup_in_list_item", "r:\n  - {m: 1, m: 2}\n", "line 2: duplicate key 'm'"},
      {"dup_json", "{\"scheme\": \"fp8-dynamic\", \"scheme\": \"nvfp4a16\"}", "duplicate key 'scheme'"},
      {"dup_bool_spellings", "yes: 1\nTrue: 2\n", "duplicate key 'True' (first at line 1, as 'yes')"},
      {"dup_true_is_one", "1: a\ntrue: b\n", "duplicate key 'true'"},
      {"dup_null_spellings", "~: 1\nnull: 2\n", "duplicate key 'null'"},
      {"dup_int_spellings", "0x1F: a\n31: b\n", "duplicate key '31'"},
      {"dup_octal_underscore", "037: a\n3_1: b\n", "duplicate key '3_1'"},
      {"dup_float_int", "1: a\n1.0: b\n", "duplicate key '1.0'"},
      {"dup_sexagesimal", "1:20: a\n80: b\n", "duplicate key '80'"},
      {"quoted_is_a_string", "2: a\n\"2\": b\n'true': c\ntrue: d\n", ""},
      {"nan_keys_are_one", ".nan: a\n.NaN: b\n", "duplicate key '.NaN'"},
      {"merge_keys_may_repeat", "a: &a {x: 1}\nb: &b {y: 2}\nc:\n  <<: *a\n  <<: *b\n", ""},
      {"list_as_key", "? [1]\n: 2\n", "a list used as a mapping key"},
      {"map_as_key", "? {a: 1}\n: 2\n", "a mapping used as a mapping key"},
      // documents
      {"two_documents", "scheme: fp8-dynamic\n---\nscheme: nvfp4a16\n", "line 2: a second YAML document"},
      {"empty_second_document", "a: 1\n---\n", "line 2: a second YAML document"},
      {"end_marker_then_document", "a: 1\n...\n---\nb: 2\n", "line 3: a second YAML document"},
      {"end_marker_alone", "a: 1\n...\n", ""},
      {"leading_marker", "---\na: 1\n", ""},
      {"empty_text", "", ""},
      {"only_comments", "# nothing\n", ""},
      // tags
      {"python_tag", "x: !!python/object:os.system 1\n", "line 1: tag '!!python/object:os.system' is not one PyYAML"},
      {"local_tag", "x: !secret y\n", "tag '!secret'"},
      {"verbatim_tag", "x: !<tag:example.com,2000:x> y\n", "tag 'tag:example.com,2000:x'"},
      {"python_tag_on_key", "!!python/name:os.system x: 1\n", "tag '!!python/name:os.system'"},
      {"core_tags", "a: !!str 1\nb: !!int 0x1F\nc: !!float 5\nd: !!bool yes\ne: !!null x\nf: !!seq [1]\ng: !!map {a: 1}\n", ""},
      {"int_tag_on_a_word", "x: !!int abc\n", "'abc' is not a int value"},
      {"bool_tag_on_a_word", "x: !!bool maybe\n", "'maybe' is not a bool value"},
      {"map_tag_on_a_scalar", "x: !!map 1\n", "tag '!!map' on a scalar; expected it on a mapping"},
      // characters
      {"nul_byte", "a: 1\nb: x\0y\n"s, "line 2, column 5: character U+0000 is not allowed"},
      {"nul_in_comment", "a: 1 # \0\n"s, "character U+0000"},
      {"escape_byte", "a: \x1b[31m\n", "character U+001B"},
      {"del_byte", "a: \x7f\n", "character U+007F"},
      {"c1_control", "a: \xc2\x80\n", "character U+0080"},
      {"nonchar_fffe", "a: \xef\xbf\xbe\n", "character U+FFFE"},
      {"invalid_utf8", "a: \xff\n", "byte 0xff is not valid UTF-8"},
      {"overlong_utf8", "a: \xc0\xaf\n", "byte 0xc0 is not valid UTF-8"},
      {"bom_nel_and_unicode", "\xef\xbb\xbf" "a: caf\xc3\xa9 \xc2\x85 \xf0\x9f\x98\x80\n", ""},
      {"tab_and_crlf", "a: 1\r\nb: \"x\ty\"\r\n", ""},
      // malformed
      {"unclosed_flow", "a: [1, 2\n", "invalid YAML"},
      {"deep_nesting", std::string(100000, '['), "invalid YAML"},
      // yaml-cpp 0.7's LoadAll never returned on these (the fuzzer's first finding): a document each time, no token eaten
      {"stray_flow_entry", ", \"scheme\": \"fp8-block\"}], \"ignore\": [\"re:.*a:b: 2\n", "a second YAML document"},
      {"stray_flow_entry_short", ", a: 1}]", "a second YAML document"},
  };
}

class YamlStrict : public ::testing::TestWithParam<Case> {};

TEST_P(YamlStrict, AcceptsWhatPyYamlReadsTheSameAndRefusesTheRest) {
  const Case& c = GetParam();
  const auto r = load_yaml_strict(c.text, "f.yaml", Errc::USAGE);
  if (c.error.empty()) {
    EXPECT_TRUE(r.ok()) << r.error().message;
    return;
  }
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::USAGE);
  EXPECT_EQ(r.error().message.rfind("f.yaml: ", 0), 0u) << r.error().message;
  EXPECT_NE(r.error().message.find(c.error), std::string::npos) << r.error().message;
  EXPECT_EQ(r.error().message.find('\n'), std::string::npos) << r.error().message;
}

INSTANTIATE_TEST_SUITE_P(Table, YamlStrict, ::testing::ValuesIn(cases()),
                         [](const auto& i) { return i.param.name; });

TEST(YamlStrictLoad, TheCodeIsTheCallers) {
  const auto r = load_yaml_strict("a: 1\na: 2\n", "config.yaml", Errc::BAD_INPUT);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::BAD_INPUT);
}

TEST(YamlStrictLoad, ReadsTheDocument) {
  const auto r = load_yaml_strict("a: 1\nb: [x, y]\n", "f.yaml", Errc::USAGE);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["a"].as<std::string>(), "1");
  EXPECT_EQ((*r)["b"].size(), 2u);
  EXPECT_TRUE(load_yaml_strict("", "f.yaml", Errc::USAGE)->IsNull());
}

// Aliases are walked once per anchored collection: a cycle ends, and a billion-laughs tree of aliases (2^30 leaves
// if expanded) is checked in its written size. A duplicate key behind an alias is still found.
TEST(YamlStrictLoad, AliasesAreWalkedOnce) {
  EXPECT_TRUE(load_yaml_strict("a: &a\n  x: 1\n  <<: *a\n", "f.yaml", Errc::USAGE).ok());
  std::string laughs = "l0: &l0 [x, x]\n";
  for (int i = 1; i <= 30; ++i) laughs += fmt::format("l{}: &l{} [*l{}, *l{}]\n", i, i, i - 1, i - 1);
  EXPECT_TRUE(load_yaml_strict(laughs, "f.yaml", Errc::USAGE).ok());
  const auto dup = load_yaml_strict("a: &a {x: 1, x: 2}\nb: *a\n", "f.yaml", Errc::USAGE);
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.error().message.find("duplicate key 'x'"), std::string::npos);
}

}  // namespace
}  // namespace fp4forge::util
