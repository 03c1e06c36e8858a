// Checkpoint: every fixture opens and matches its NAME.tensors.json; index/shard disagreements and
// unsafe shard names are refused with exact messages (on copies of the fixtures in a temp dir).
// GCC 12 reports a false -Wrestrict inside std::string concatenation at -O2 (GCC bug 105329).
#pragma GCC diagnostic ignored "-Wrestrict"
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp4forge/safetensors/checkpoint.h"
#include "fp4forge/safetensors/shard_writer.h"
#include "matchers.h"
#include "unit/safetensors_test_util.h"

namespace fp4forge {
namespace {

namespace sfs = std::filesystem;
using ojson = nlohmann::ordered_json;
using testutil::ResultIs;

const sfs::path kData = FP4FORGE_TEST_DATA;
constexpr const char* kIndex = "model.safetensors.index.json";
constexpr const char* kShard1 = "model-00001-of-00004.safetensors";
constexpr const char* kShard3 = "model-00003-of-00004.safetensors";
constexpr const char* kShard4 = "model-00004-of-00004.safetensors";

ojson load_json(const sfs::path& p) { return ojson::parse(testutil::read_text(p)); }

class FixtureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(FixtureTest, OpensAndMatchesTensorList) {
  const std::string name = GetParam();
  auto ck = Checkpoint::open(kData / name);
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  const ojson expected = load_json(kData / (name + ".tensors.json"));
  ASSERT_EQ(ck->tensors().size(), expected.size());
  for (auto it = expected.begin(); it != expected.end(); ++it) {
    SCOPED_TRACE(it.key());
    const TensorRef* t = ck->find(it.key());
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->name, it.key());
    EXPECT_EQ(ck->shard_names()[t->shard], it.value()[0].get<std::string>());
    EXPECT_EQ(dtype_name(t->info->dtype), it.value()[1].get<std::string>());
    EXPECT_EQ(t->info->shape, it.value()[2].get<std::vector<std::uint64_t>>());
    EXPECT_EQ(ck->data(*t).size(), t->info->nbytes());
  }
  // Sorted by name, index and metadata agree.
  for (std::size_t i = 1; i < ck->tensors().size(); ++i)
    EXPECT_LT(ck->tensors()[i - 1].name, ck->tensors()[i].name);
  ASSERT_TRUE(ck->index_file().has_value());
  EXPECT_EQ(*ck->index_file(), kIndex);
  const ojson idx = load_json(kData / name / kIndex);
  EXPECT_EQ(ck->total_tensor_bytes(), idx["metadata"]["total_size"].get<std::uint64_t>());
  EXPECT_TRUE(ck->has_config());
  EXPECT_TRUE(ck->config().contains("architectures"));
  const auto& other = ck->other_files();
  EXPECT_NE(std::find(other.begin(), other.end(), "config.json"), other.end());
  EXPECT_NE(std::find(other.begin(), other.end(), "generation_config.json"), other.end());
  for (const auto& s : ck->shard_names())
    EXPECT_EQ(std::find(other.begin(), other.end(), s), other.end()) << s;
  EXPECT_EQ(std::find(other.begin(), other.end(), kIndex), other.end());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FixtureTest,
                         ::testing::Values("gemma4-dense-mm", "gemma4-moe-mm", "qwen3_5-dense-mm", "llama"));

// A copy of the llama fixture under <tmp>/llama, to mutate.
struct LlamaCopy {
  testutil::TempDir tmp;
  sfs::path dir = tmp.path / "llama";
  std::string index = (dir / kIndex).string();
  LlamaCopy() { sfs::copy(kData / "llama", dir, sfs::copy_options::recursive); }
  void edit_index(const std::function<void(ojson&)>& f) {
    ojson j = load_json(dir / kIndex);
    f(j);
    testutil::write_text(dir / kIndex, j.dump(2));
  }
  std::string shard(const char* s) const { return (dir / s).string(); }
};

struct Disagreement {
  const char* what;
  std::function<void(LlamaCopy&)> mutate;
  std::function<std::string(const LlamaCopy&)> message;
  Errc code = Errc::BAD_INPUT;
};

std::vector<Disagreement> disagreement_table() {
  std::vector<Disagreement> t;
  t.push_back({"tensor listed but missing from its shard",
               [](LlamaCopy& c) { c.edit_index([](ojson& j) { j["weight_map"]["model.fake.weight"] = kShard1; }); },
               [](const LlamaCopy& c) {
                 return c.index + ": tensor 'model.fake.weight' is listed in shard '" + kShard1 +
                        "' but that shard does not contain it; index and shards disagree (stale index or "
                        "missing shard?)";
               }});
  t.push_back({"shard tensor not listed",
               [](LlamaCopy& c) { c.edit_index([](ojson& j) { j["weight_map"].erase("model.norm.weight"); }); },
               [](const LlamaCopy& c) {
                 return c.shard(kShard3) + ": tensor 'model.norm.weight' is not listed in " + kIndex +
                        "; index and shards disagree (stale index?)";
               }});
  t.push_back({"tensor listed in the wrong shard",
               [](LlamaCopy& c) { c.edit_index([](ojson& j) { j["weight_map"]["model.norm.weight"] = kShard1; }); },
               [](const LlamaCopy& c) {
                 return c.index + ": tensor 'model.norm.weight' is listed in shard '" + kShard1 +
                        "' but found in '" + kShard3 + "'; index and shards disagree (stale index?)";
               }});
  t.push_back({"tensor in two shards",
               [](LlamaCopy& c) {
                 // Rewrite shard 4 with lm_head.weight plus a copy of model.norm.weight (in shard 3).
                 auto s3 = st::ShardReader::open(c.dir / kShard3);
                 auto s4 = st::ShardReader::open(c.dir / kShard4);
                 ASSERT_TRUE(s3.ok() && s4.ok());
                 std::vector<std::pair<st::OutTensor, std::vector<std::byte>>> ts;
                 for (auto [r, n] : {std::pair{&*s4, "lm_head.weight"}, std::pair{&*s3, "model.norm.weight"}}) {
                   const st::TensorInfo* i = r->find(n);
                   auto d = r->data(*i);
                   ts.push_back({st::OutTensor{i->name, i->dtype, i->shape}, {d.begin(), d.end()}});
                 }
                 sfs::remove(c.dir / kShard4);
                 ASSERT_TRUE(st::write_safetensors(c.dir / kShard4, ts).ok());
               },
               [](const LlamaCopy& c) {
                 return c.shard(kShard4) + ": tensor 'model.norm.weight' is also in shard '" + kShard3 +
                        "'; a tensor must be in exactly one shard (the index lists it in '" + kShard3 + "')";
               }});
  t.push_back({"index names a missing shard",
               [](LlamaCopy& c) {
                 c.edit_index([](ojson& j) { j["weight_map"]["lm_head.weight"] = "model-00005-of-00004.safetensors"; });
               },
               [](const LlamaCopy& c) {
                 return c.index + ": shard 'model-00005-of-00004.safetensors' does not exist in '" + c.dir.string() +
                        "'; missing download or stale index?";
               }});
  t.push_back({"../ in a shard name",
               [](LlamaCopy& c) {
                 c.edit_index([](ojson& j) { j["weight_map"]["lm_head.weight"] = std::string("../llama/") + kShard4; });
               },
               [](const LlamaCopy& c) {
                 return c.index + ": tensor 'lm_head.weight': shard name '../llama/" + kShard4 +
                        "' is not a plain file name (path separators and '..' are refused); refusing to leave "
                        "the checkpoint directory";
               }});
  t.push_back({"shard name '..'",
               [](LlamaCopy& c) { c.edit_index([](ojson& j) { j["weight_map"]["lm_head.weight"] = ".."; }); },
               [](const LlamaCopy& c) {
                 return c.index + ": tensor 'lm_head.weight': shard name '..' is not a plain file name (path "
                                  "separators and '..' are refused); refusing to leave the checkpoint directory";
               }});
  t.push_back({"absolute shard path",
               [](LlamaCopy& c) { c.edit_index([](ojson& j) { j["weight_map"]["lm_head.weight"] = "/etc/passwd"; }); },
               [](const LlamaCopy& c) {
                 return c.index + ": tensor 'lm_head.weight': shard name '/etc/passwd' is an absolute path; shard "
                                  "names must be plain file names inside the checkpoint directory";
               }});
  t.push_back({"empty shard name",
               [](LlamaCopy& c) { c.edit_index([](ojson& j) { j["weight_map"]["lm_head.weight"] = ""; }); },
               [](const LlamaCopy& c) {
                 return c.index + ": tensor 'lm_head.weight': shard name is empty; expected a file name such as "
                                  "\"model-00001-of-00002.safetensors\"";
               }});
  t.push_back({"symlink leaving the directory",
               [](LlamaCopy& c) {
                 sfs::rename(c.dir / kShard4, c.tmp.path / "outside.safetensors");
                 sfs::create_symlink("../outside.safetensors", c.dir / kShard4);
               },
               [](const LlamaCopy& c) {
                 return c.index + ": shard '" + kShard4 + "' is a symlink to '" +
                        sfs::canonical(c.tmp.path / "outside.safetensors").string() +
                        "', outside the checkpoint directory '" + sfs::canonical(c.dir).string() + "'; refusing";
               }});
  t.push_back({"dangling symlink",
               [](LlamaCopy& c) {
                 sfs::remove(c.dir / kShard4);
                 sfs::create_symlink("nowhere.safetensors", c.dir / kShard4);
               },
               [](const LlamaCopy& c) {
                 return c.index + ": shard '" + kShard4 +
                        "' is a symlink that does not resolve: No such file or directory";
               }});
  t.push_back({"weight_map not an object",
               [](LlamaCopy& c) { c.edit_index([](ojson& j) { j["weight_map"] = ojson::array(); }); },
               [](const LlamaCopy& c) {
                 return c.index + ": weight_map is array [], expected an object of tensor name -> shard file";
               }});
  t.push_back({"weight_map missing",
               [](LlamaCopy& c) { c.edit_index([](ojson& j) { j.erase("weight_map"); }); },
               [](const LlamaCopy& c) {
                 return c.index + ": no \"weight_map\"; expected {\"metadata\":{...},\"weight_map\":{tensor: shard file}}";
               }});
  t.push_back({"weight_map value not a string",
               [](LlamaCopy& c) { c.edit_index([](ojson& j) { j["weight_map"]["lm_head.weight"] = 4; }); },
               [](const LlamaCopy& c) {
                 return c.index + ": weight_map['lm_head.weight'] is number 4, expected a shard file name";
               }});
  t.push_back({"empty weight_map",
               [](LlamaCopy& c) { c.edit_index([](ojson& j) { j["weight_map"] = ojson::object(); j.erase("metadata"); }); },
               [](const LlamaCopy& c) {
                 return c.index + ": the index lists no tensors; expected at least one shard";
               }});
  t.push_back({"index not JSON",
               [](LlamaCopy& c) { testutil::write_text(c.dir / kIndex, "{\"weight_map\": {"); },
               [](const LlamaCopy& c) {
                 return c.index + ": invalid JSON: parse error at line 1, column 17: syntax error while parsing "
                                  "object key - unexpected end of input; expected string literal";
               }});
  t.push_back({"index with a duplicate key",
               [](LlamaCopy& c) {
                 testutil::write_text(c.dir / kIndex, std::string("{\"weight_map\":{\"lm_head.weight\":\"") + kShard4 +
                                                          "\",\"lm_head.weight\":\"" + kShard1 + "\"}}");
               },
               [](const LlamaCopy& c) {
                 return c.index + ": key 'lm_head.weight' appears twice in '/weight_map'; ambiguous JSON (remove one)";
               }});
  t.push_back({"index root not an object",
               [](LlamaCopy& c) { testutil::write_text(c.dir / kIndex, "[]"); },
               [](const LlamaCopy& c) {
                 return c.index + ": top level is array, expected an object with \"weight_map\"";
               }});
  t.push_back({"two index files",
               [](LlamaCopy& c) { sfs::copy_file(c.dir / kIndex, c.dir / "other.safetensors.index.json"); },
               [](const LlamaCopy& c) {
                 return c.dir.string() + ": several index files (model.safetensors.index.json, "
                                         "other.safetensors.index.json); keep exactly one";
               }});
  t.push_back({"corrupt shard header",
               [](LlamaCopy& c) { sfs::resize_file(c.dir / kShard4, sfs::file_size(c.dir / kShard4) - 1); },
               [](const LlamaCopy& c) {
                 return c.shard(kShard4) +
                        ": data section is 131071 bytes, but the tensors need 131072 (last: 'lm_head.weight'); "
                        "file truncated?";
               }});
  t.push_back({"no config.json",
               [](LlamaCopy& c) { sfs::remove(c.dir / "config.json"); },
               [](const LlamaCopy& c) {
                 return c.dir.string() + ": no config.json; not a Hugging Face checkpoint folder?";
               }});
  t.push_back({"config.json not an object",
               [](LlamaCopy& c) { testutil::write_text(c.dir / "config.json", "[1]"); },
               [](const LlamaCopy& c) {
                 return (c.dir / "config.json").string() + ": top level is array, expected an object";
               }});
  t.push_back({"config.json nested too deep",
               [](LlamaCopy& c) { testutil::write_text(c.dir / "config.json", std::string(100, '[') + std::string(100, ']')); },
               [](const LlamaCopy& c) {
                 return (c.dir / "config.json").string() + ": JSON is nested deeper than 64 levels; refusing";
               }});
  t.push_back({"no weights at all",
               [](LlamaCopy& c) {
                 for (const auto& e : testutil::list_dir(c.dir))
                   if (e.find(".safetensors") != std::string::npos) sfs::remove(c.dir / e);
               },
               [](const LlamaCopy& c) {
                 return c.dir.string() + ": no *.safetensors file; only safetensors checkpoints are supported";
               }});
  t.push_back({"missing directory",
               [](LlamaCopy& c) { sfs::remove_all(c.dir); },
               [](const LlamaCopy& c) {
                 return "cannot open checkpoint '" + c.dir.string() + "': No such file or directory";
               },
               Errc::IO});
  return t;
}

TEST(SafetensorsCheckpoint, DisagreementTable) {
  for (const auto& d : disagreement_table()) {
    SCOPED_TRACE(d.what);
    LlamaCopy c;
    d.mutate(c);
    auto r = Checkpoint::open(c.dir);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, d.code);
    EXPECT_EQ(r.error().message, d.message(c));
    EXPECT_EQ(r.error().describe(), r.error().message);
  }
}

TEST(SafetensorsCheckpoint, OptionalConfigAndWeights) {
  LlamaCopy c;
  sfs::remove(c.dir / "config.json");
  auto r = Checkpoint::open(c.dir, {.require_config = false, .require_weights = true});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->has_config());
  EXPECT_TRUE(r->config().is_object());
  EXPECT_TRUE(r->config().empty());

  testutil::TempDir empty;
  testutil::write_text(empty / "config.json", "{\"a\":1}");
  auto e = Checkpoint::open(empty.path, {.require_config = true, .require_weights = false});
  ASSERT_TRUE(e.ok()) << e.error().message;
  EXPECT_TRUE(e->tensors().empty());
  EXPECT_EQ(e->other_files(), std::vector<std::string>{"config.json"});
}

TEST(SafetensorsCheckpoint, WithoutIndexEveryShardIsUsed) {
  LlamaCopy c;
  sfs::remove(c.dir / kIndex);
  auto r = Checkpoint::open(c.dir);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->index_file().has_value());
  EXPECT_EQ(r->tensors().size(), 21u);
  EXPECT_EQ(r->shard_names(), (std::vector<std::string>{"model-00001-of-00004.safetensors", "model-00002-of-00004.safetensors",
                                                        "model-00003-of-00004.safetensors", kShard4}));
  EXPECT_EQ(r->total_tensor_bytes(), 853248u);
}

TEST(SafetensorsCheckpoint, SingleFilesSharingATensorAreRefused) {
  testutil::TempDir d;
  testutil::write_text(d / "config.json", "{}");
  std::vector<std::pair<st::OutTensor, std::vector<std::byte>>> t{{{"x", DType::U8, {2}}, {std::byte{1}, std::byte{2}}}};
  ASSERT_TRUE(st::write_safetensors(d / "a.safetensors", t).ok());
  ASSERT_TRUE(st::write_safetensors(d / "b.safetensors", t).ok());
  auto r = Checkpoint::open(d.path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, (d / "b.safetensors").string() +
                                   ": tensor 'x' is also in shard 'a.safetensors'; a tensor must be in exactly one shard");
  sfs::remove(d / "b.safetensors");
  auto ok = Checkpoint::open(d.path);
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  ASSERT_NE(ok->find("x"), nullptr);
  EXPECT_EQ(ok->data(*ok->find("x"))[1], std::byte{2});
  EXPECT_EQ(ok->find("y"), nullptr);
}

TEST(SafetensorsCheckpoint, SymlinksInsideAndHubCacheBlobsAreAccepted) {
  // Inside the directory.
  LlamaCopy c;
  sfs::create_directory(c.dir / "store");
  sfs::rename(c.dir / kShard4, c.dir / "store" / "blob4");
  sfs::create_symlink("store/blob4", c.dir / kShard4);
  auto r = Checkpoint::open(c.dir);
  ASSERT_TRUE(r.ok()) << r.error().message;

  // Hugging Face hub cache: <repo>/snapshots/<rev>/x -> ../../blobs/<hash>.
  testutil::TempDir hub;
  const sfs::path repo = hub.path / "models--org--llama";
  const sfs::path snap = repo / "snapshots" / "0123abc";
  sfs::create_directories(repo / "blobs");
  sfs::create_directories(snap);
  int i = 0;
  for (const auto& e : testutil::list_dir(kData / "llama")) {
    const std::string blob = "blob" + std::to_string(i++);
    sfs::copy_file(kData / "llama" / e, repo / "blobs" / blob);
    sfs::create_symlink("../../blobs/" + blob, snap / e);
  }
  auto h = Checkpoint::open(snap);
  ASSERT_TRUE(h.ok()) << h.error().message;
  EXPECT_EQ(h->tensors().size(), 21u);
}

TEST(SafetensorsCheckpoint, ParseJsonBounded) {
  auto ok = parse_json_bounded("{\"b\":1,\"a\":[1,2]}", "x.json");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->begin().key(), "b");  // order kept
  auto deep = parse_json_bounded(std::string(10, '[') + std::string(10, ']'), "x.json", 4);
  EXPECT_THAT(deep, ResultIs(Errc::BAD_INPUT, "x.json: JSON is nested deeper than 4 levels; refusing"));
  auto syn = parse_json_bounded("{\n  \"a\": tru\n}", "x.json");
  ASSERT_FALSE(syn.ok());
  EXPECT_EQ(syn.error().message,
            "x.json: invalid JSON: parse error at line 3, column 0: syntax error while parsing value - invalid "
            "literal; last read: '\"a\": tru<U+000A>'");
  auto dup = parse_json_bounded("{\"a\":{\"b\":[{\"c\":1,\"c\":2}]}}", "x.json");
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.error().message, "x.json: key 'c' appears twice in '/a/b/[0]'; ambiguous JSON (remove one)");
  auto top = parse_json_bounded("{\"a\":1,\"a\":1}", "x.json");
  ASSERT_FALSE(top.ok());
  EXPECT_EQ(top.error().message, "x.json: key 'a' appears twice in the top-level object; ambiguous JSON (remove one)");
}

}  // namespace
}  // namespace fp4forge
