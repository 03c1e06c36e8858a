// JsonDocument: byte-identical round trips, style detection, minimal edits.
#include <filesystem>

#include <gtest/gtest.h>

#include "fp4forge/util/json_edit.h"
#include "unit/doctor_test_util.h"

namespace {

using fp4forge::detect_json_style;
using fp4forge::encode_json_string;
using fp4forge::JsonDocument;
using Json = nlohmann::ordered_json;

std::vector<std::filesystem::path> fixture_json_files() {
  std::vector<std::filesystem::path> v;
  for (const auto& e : std::filesystem::recursive_directory_iterator(FP4FORGE_TEST_DATA))
    if (e.is_regular_file() && e.path().extension() == ".json") v.push_back(e.path());
  std::sort(v.begin(), v.end());
  return v;
}

JsonDocument parse(const std::string& s) {
  auto d = JsonDocument::parse(s, "test.json");
  EXPECT_TRUE(d.ok()) << (d.ok() ? "" : d.error().message);
  return std::move(d).value();
}

TEST(DoctorJsonEdit, EveryFixtureJsonRoundTripsByteIdentical) {
  const auto files = fixture_json_files();
  ASSERT_GE(files.size(), 15u);
  for (const auto& f : files) {
    const std::string text = doctor_test::read(f);
    auto d = JsonDocument::parse(text, f.string());
    ASSERT_TRUE(d.ok()) << f;
    EXPECT_EQ(d->dump(), text) << f;
    // Lookups expand nodes; the output must still be identical.
    (void)d->get({"text_config", "rms_norm_eps"});
    (void)d->has({"weight_map", "lm_head.weight"});
    EXPECT_EQ(d->dump(), text) << f;
    EXPECT_FALSE(d->modified());
  }
}

TEST(DoctorJsonEdit, StyleDetectionRegeneratesEveryFixtureExactly) {
  // All fixtures were written by Python's json.dump (indent 1 or 2, with or without a final newline):
  // regenerating the whole document from the detected style must reproduce the file byte for byte.
  for (const auto& f : fixture_json_files()) {
    const std::string text = doctor_test::read(f);
    auto d = JsonDocument::parse(text, f.string());
    ASSERT_TRUE(d.ok()) << f;
    EXPECT_EQ(*d->dump_styled(), text) << f;
  }
}

TEST(DoctorJsonEdit, DetectsStyles) {
  auto s2 = detect_json_style("{\n  \"a\": 1,\n  \"b\": [\n    1\n  ]\n}\n");
  EXPECT_EQ(s2.indent, "  ");
  EXPECT_TRUE(s2.trailing_newline);
  EXPECT_EQ(s2.key_sep, ": ");
  auto s4 = detect_json_style("{\n    \"a\": {\n        \"b\": 1\n    }\n}");
  EXPECT_EQ(s4.indent, "    ");
  EXPECT_FALSE(s4.trailing_newline);
  auto tab = detect_json_style("{\n\t\"a\": 1\n}");
  EXPECT_EQ(tab.indent, "\t");
  auto compact = detect_json_style("{\"a\":1,\"b\":2}");
  EXPECT_FALSE(compact.multiline());
  EXPECT_EQ(compact.item_sep, ",");
  EXPECT_EQ(compact.key_sep, ":");
  auto py = detect_json_style("{\"a\": 1, \"b\": 2}");
  EXPECT_EQ(py.item_sep, ", ");
  EXPECT_EQ(py.key_sep, ": ");
  EXPECT_TRUE(detect_json_style("{\"a\": \"\\u00e9\"}").ensure_ascii);
  EXPECT_FALSE(detect_json_style("{\"a\": \"\xc3\xa9\"}").ensure_ascii);
  EXPECT_TRUE(detect_json_style("{\"a\": \"\\u00E9\"}").upper_hex);
}

TEST(DoctorJsonEdit, EncodesStringsLikePython) {
  EXPECT_EQ(encode_json_string("a\"b\\c\n", true), "\"a\\\"b\\\\c\\n\"");
  EXPECT_EQ(encode_json_string("\xc3\xa9", true), "\"\\u00e9\"");
  EXPECT_EQ(encode_json_string("\xc3\xa9", false), "\"\xc3\xa9\"");
  EXPECT_EQ(encode_json_string("\xf0\x9f\x98\x80", true), "\"\\ud83d\\ude00\"");  // surrogate pair
  EXPECT_EQ(encode_json_string(std::string("\x01", 1), true), "\"\\u0001\"");
}

TEST(DoctorJsonEdit, InsertKeepsNumbersOrderAndIndent) {
  const std::string text =
      "{\n  \"b\": 1e-06,\n  \"d\": {\n    \"x\": 1.0,\n    \"z\": 3\n  },\n  \"f\": [1, 2]\n}\n";
  auto d = parse(text);
  ASSERT_TRUE(d.set({"d", "y"}, 512).ok());
  EXPECT_EQ(d.dump(),
            "{\n  \"b\": 1e-06,\n  \"d\": {\n    \"x\": 1.0,\n    \"y\": 512,\n    \"z\": 3\n  },\n  \"f\": [1, 2]\n}\n");
  // a key sorting last is appended after the last member
  ASSERT_TRUE(d.set({"g"}, Json{{"k", "v"}}).ok());
  EXPECT_EQ(d.dump(),
            "{\n  \"b\": 1e-06,\n  \"d\": {\n    \"x\": 1.0,\n    \"y\": 512,\n    \"z\": 3\n  },\n  \"f\": [1, 2],\n"
            "  \"g\": {\n    \"k\": \"v\"\n  }\n}\n");
}

TEST(DoctorJsonEdit, UnsortedObjectsAppend) {
  auto d = parse("{\"z\": 1, \"a\": 2}");
  ASSERT_TRUE(d.set({"m"}, true).ok());
  EXPECT_EQ(d.dump(), "{\"z\": 1, \"a\": 2, \"m\": true}");
}

TEST(DoctorJsonEdit, CompactAndTabStyles) {
  auto c = parse("{\"a\":{\"b\":1}}");
  ASSERT_TRUE(c.set({"a", "c"}, Json::array({1, 2})).ok());
  EXPECT_EQ(c.dump(), "{\"a\":{\"b\":1,\"c\":[1,2]}}");
  auto t = parse("{\n\t\"a\": {}\n}");
  ASSERT_TRUE(t.set({"a", "k"}, 1).ok());
  EXPECT_EQ(t.dump(), "{\n\t\"a\": {\n\t\t\"k\": 1\n\t}\n}");
}

TEST(DoctorJsonEdit, ReplaceAndEraseTouchOnlyTheirLines) {
  const std::string text =
      "{\n  \"padding\": {\n    \"strategy\": \"BatchLongest\"\n  },\n  \"truncation\": {\n    \"max_length\": 8\n  },\n"
      "  \"version\": \"1.0\"\n}";
  auto d = parse(text);
  ASSERT_TRUE(d.set({"truncation"}, nullptr).ok());
  ASSERT_TRUE(d.set({"padding"}, nullptr).ok());
  EXPECT_EQ(d.dump(), "{\n  \"padding\": null,\n  \"truncation\": null,\n  \"version\": \"1.0\"\n}");
  auto e = parse(text);
  EXPECT_TRUE(e.erase({"truncation"}));
  EXPECT_FALSE(e.erase({"truncation"}));
  EXPECT_EQ(e.dump(), "{\n  \"padding\": {\n    \"strategy\": \"BatchLongest\"\n  },\n  \"version\": \"1.0\"\n}");
  auto last = parse(text);
  EXPECT_TRUE(last.erase({"version"}));
  EXPECT_EQ(last.dump(),
            "{\n  \"padding\": {\n    \"strategy\": \"BatchLongest\"\n  },\n  \"truncation\": {\n    \"max_length\": 8\n  }\n}");
}

TEST(DoctorJsonEdit, SettingAnEqualValueChangesNothing) {
  const std::string text = "{\n  \"a\": 1.0e0\n}";
  auto d = parse(text);
  ASSERT_TRUE(d.set({"a"}, 1.0).ok());
  EXPECT_FALSE(d.modified());
  EXPECT_EQ(d.dump(), text);
}

TEST(DoctorJsonEdit, ExtractsSubtreeInFileStyle) {
  const std::string text = "{\n  \"image_processor\": {\n    \"b\": 0.00392156862745098,\n    \"a\": [\n      0.0\n    ]\n  }\n}\n";
  auto d = parse(text);
  EXPECT_EQ(*d.dump_styled({"image_processor"}), "{\n  \"b\": 0.00392156862745098,\n  \"a\": [\n    0.0\n  ]\n}\n");
  EXPECT_FALSE(d.dump_styled({"nope"}).has_value());
}

TEST(DoctorJsonEdit, RejectsInvalidJsonWithPosition) {
  for (const char* bad : {"{", "{\"a\": 01}", "{\"a\": 1,}", "[1 2]", "{\"a\": \"\x01\"}", "{} x", "", "{'a': 1}",
                          "{\"a\": NaN}"}) {
    auto d = JsonDocument::parse(bad, "bad.json");
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_EQ(d.error().code, fp4forge::Errc::BAD_INPUT);
    EXPECT_NE(d.error().message.find("bad.json"), std::string::npos);
    EXPECT_NE(d.error().message.find("line"), std::string::npos);
  }
}

TEST(DoctorJsonEdit, SetIntoMissingParentFails) {
  auto d = parse("{\"a\": 1}");
  EXPECT_FALSE(d.set({"x", "y"}, 1).ok());
  EXPECT_FALSE(d.set({"a", "y"}, 1).ok());  // parent is not an object
  EXPECT_FALSE(d.modified());
}

// A duplicate key is refused, as every JSON reader of fp4forge refuses it (readers disagree on which one
// wins), at any depth and however the key is escaped.
TEST(DoctorJsonEdit, DuplicateKeysAreRefused) {
  for (const char* bad : {"{\"a\": 1, \"a\": 2}", "{\"x\": {\"b\": 1, \"b\": 1}}", "[{\"a\": 1, \"\\u0061\": 2}]"}) {
    auto d = JsonDocument::parse(bad, "dup.json");
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_EQ(d.error().code, fp4forge::Errc::BAD_INPUT);
    EXPECT_NE(d.error().message.find("dup.json: invalid JSON at line 1"), std::string::npos) << d.error().message;
    EXPECT_NE(d.error().message.find("duplicate key"), std::string::npos) << d.error().message;
  }
  EXPECT_TRUE(JsonDocument::parse("{\"a\": {\"a\": 1}, \"b\": [{\"a\": 1}, {\"a\": 2}]}", "ok.json").ok());
}

}  // namespace
