// safetensors writer: golden header bytes (reference writer order and layout), round trips, and the
// writer's own refusals.
// GCC 12 reports a false -Wrestrict inside std::string concatenation at -O2 (GCC bug 105329).
#pragma GCC diagnostic ignored "-Wrestrict"
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "fp4forge/safetensors/shard_reader.h"
#include "fp4forge/safetensors/shard_writer.h"
#include "matchers.h"
#include "unit/safetensors_test_util.h"

namespace fp4forge::st {
namespace {

using testutil::ResultIs;

std::vector<std::byte> pattern(std::size_t n, unsigned seed) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i * 131 + seed * 17 + 7) & 0xff);
  return v;
}

std::string le64(std::uint64_t n) {
  std::string s;
  for (int i = 0; i < 8; ++i) s += static_cast<char>((n >> (8 * i)) & 0xff);
  return s;
}

// The NVFP4A16 shard shape from nvfp4a16-format.md §10: F32 first, then BF16, F8_E4M3, U8.
std::vector<OutTensor> mixed_tensors() {
  return {
      {"w.weight_packed", DType::U8, {2, 2}},
      {"norm", DType::BF16, {3}},
      {"w.weight_scale", DType::F8_E4M3, {2, 1}},
      {"w.weight_global_scale", DType::F32, {1}},
      {"a", DType::F32, {2}},
  };
}

TEST(SafetensorsWriter, GoldenHeaderMixedDtypes) {
  auto l = layout_shard(mixed_tensors(), {{"format", "pt"}});
  ASSERT_TRUE(l.ok()) << l.error().message;
  // Hand-computed: 362 bytes of JSON + 6 spaces = 368 = 0x170.
  const std::string json =
      R"({"__metadata__":{"format":"pt"},)"
      R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("w.weight_global_scale":{"dtype":"F32","shape":[1],"data_offsets":[8,12]},)"
      R"("norm":{"dtype":"BF16","shape":[3],"data_offsets":[12,18]},)"
      R"("w.weight_scale":{"dtype":"F8_E4M3","shape":[2,1],"data_offsets":[18,20]},)"
      R"("w.weight_packed":{"dtype":"U8","shape":[2,2],"data_offsets":[20,24]}})";
  ASSERT_EQ(json.size(), 362u);
  const std::string expected = std::string("\x70\x01\x00\x00\x00\x00\x00\x00", 8) + json + "      ";
  EXPECT_EQ(l->header_bytes, expected);
  EXPECT_EQ(l->header_bytes.size() % 8, 0u);
  EXPECT_EQ(l->file_size, 8u + 368u + 24u);
  ASSERT_EQ(l->tensors.size(), 5u);
  const char* order[] = {"a", "w.weight_global_scale", "norm", "w.weight_scale", "w.weight_packed"};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(l->tensors[i].name, order[i]);
  ASSERT_NE(l->find("norm"), nullptr);
  EXPECT_EQ(l->find("norm")->begin, 12u);
  EXPECT_EQ(l->find("norm")->end, 18u);
  EXPECT_EQ(l->find("w.weight_packed")->dtype, DType::U8);
  EXPECT_EQ(l->find("missing"), nullptr);
}

TEST(SafetensorsWriter, GoldenHeaderBytewiseNamesAndEscaping) {
  // No metadata; names sort bytewise ("B" < "a\"b" < "é"), JSON-escaped; 161 bytes + 7 spaces = 168.
  auto l = layout_shard({{"\xc3\xa9", DType::U8, {1}}, {"a\"b", DType::U8, {1}}, {"B", DType::U8, {1}}});
  ASSERT_TRUE(l.ok()) << l.error().message;
  const std::string json =
      R"({"B":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
      R"("a\"b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]},)"
      "\"\xc3\xa9\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[2,3]}}";
  ASSERT_EQ(json.size(), 161u);
  EXPECT_EQ(l->header_bytes, std::string("\xa8\0\0\0\0\0\0\0", 8) + json + std::string(7, ' '));
}

TEST(SafetensorsWriter, EmptyFileAndPaddingEdge) {
  auto l = layout_shard({});
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->header_bytes, le64(8) + "{}      ");
  // A scalar: {"s":{"dtype":"F32","shape":[],"data_offsets":[0,4]}} is 53 bytes -> 3 spaces.
  auto s = layout_shard({{"s", DType::F32, {}}});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->header_bytes, le64(56) + R"({"s":{"dtype":"F32","shape":[],"data_offsets":[0,4]}})" + "   ");
}

TEST(SafetensorsWriter, OrderFollowsTheDtypeEnumDescending) {
  // One tensor per dtype, all named "t": the spec's write order, first to last.
  std::vector<OutTensor> ts;
  for (int i = 0; i < kDTypeCount; ++i)
    ts.push_back({"t" + std::string(dtype_name(static_cast<DType>(i))), static_cast<DType>(i), {8}});
  auto l = layout_shard(ts);
  ASSERT_TRUE(l.ok()) << l.error().message;
  const char* spec_order[] = {"U64", "I64", "F64", "C64", "F32", "U32", "I32", "BF16",
                              "F16", "U16", "I16", "F8_E5M2FNUZ", "F8_E4M3FNUZ", "F8_E8M0",
                              "F8_E4M3", "F8_E5M2", "I8", "U8", "F6_E3M2", "F6_E2M3", "F4", "BOOL"};
  ASSERT_EQ(l->tensors.size(), 22u);
  std::uint64_t off = 0;
  for (int i = 0; i < 22; ++i) {
    EXPECT_EQ(dtype_name(l->tensors[i].dtype), spec_order[i]) << i;
    EXPECT_EQ(l->tensors[i].begin, off);
    off = l->tensors[i].end;
    EXPECT_EQ(l->find(l->tensors[i].name), &l->tensors[i]);
  }
}

TEST(SafetensorsWriter, LayoutRefusals) {
  EXPECT_THAT(layout_shard({{"x", DType::U8, {1}}, {"x", DType::F32, {1}}}),
              ResultIs(Errc::BAD_INPUT, "tensor 'x': name given twice for one safetensors file"));
  EXPECT_THAT(layout_shard({{"x", DType::F4, {3}}}),
              ResultIs(Errc::BAD_INPUT, "tensor 'x': F4 shape [3] is 12 bits, not a whole number of bytes"));
  EXPECT_THAT(layout_shard({{"x", DType::F32, {1ull << 62}}}),
              ResultIs(Errc::BAD_INPUT, "tensor 'x': F32 shape [4611686018427387904] byte size overflows 64 bits"));
  EXPECT_THAT(layout_shard({{"__metadata__", DType::U8, {1}}}),
              ResultIs(Errc::BAD_INPUT, "tensor name '__metadata__' is reserved by the safetensors format"));
  EXPECT_THAT(layout_shard({{"\xff", DType::U8, {1}}}),
              ResultIs(Errc::BAD_INPUT, "tensor name '\\xff' is not valid UTF-8; safetensors names must be UTF-8"));
  EXPECT_THAT(layout_shard({}, {{"k", "1"}, {"k", "2"}}),
              ResultIs(Errc::BAD_INPUT, "__metadata__ key 'k' given twice"));
}

TEST(SafetensorsWriter, RoundTripThroughTheReader) {
  testutil::TempDir dir;
  std::vector<std::pair<OutTensor, std::vector<std::byte>>> in;
  unsigned seed = 0;
  for (auto& t : mixed_tensors()) {
    std::uint64_t n = 1;
    for (auto d : t.shape) n *= d;
    n = n * dtype_bits(t.dtype) / 8;
    in.emplace_back(t, pattern(n, seed++));
  }
  in.emplace_back(OutTensor{"zero", DType::BF16, {0, 4}}, std::vector<std::byte>{});
  const auto path = dir / "model.safetensors";
  auto s = write_safetensors(path, in, {{"format", "pt"}});
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(testutil::list_dir(dir.path), std::vector<std::string>{"model.safetensors"});

  auto r = ShardReader::open(path);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->header().tensors.size(), in.size());
  ASSERT_EQ(r->header().metadata.size(), 1u);
  EXPECT_EQ(r->header().metadata[0].second, "pt");
  for (const auto& [t, bytes] : in) {
    const TensorInfo* info = r->find(t.name);
    ASSERT_NE(info, nullptr) << t.name;
    EXPECT_EQ(info->dtype, t.dtype);
    EXPECT_EQ(info->shape, t.shape);
    auto d = r->data(*info);
    EXPECT_TRUE(std::equal(d.begin(), d.end(), bytes.begin(), bytes.end())) << t.name;
  }
  // File order = the reference writer order.
  EXPECT_EQ(r->header().tensors.front().name, "a");
  EXPECT_EQ(r->header().tensors.back().name, "w.weight_packed");
  // The header bytes on disk are exactly the layout's.
  std::vector<OutTensor> outs;
  for (const auto& [t, bytes] : in) outs.push_back(t);
  auto l = layout_shard(outs, {{"format", "pt"}});
  ASSERT_TRUE(l.ok());
  const std::string disk = testutil::read_text(path);
  ASSERT_EQ(disk.size(), l->file_size);
  EXPECT_EQ(disk.substr(0, l->header_bytes.size()), l->header_bytes);
}

// Writes `ts` in order on one thread and out of order on four; both files must hold the same bytes.
void expect_concurrent_writes_identical(const std::vector<OutTensor>& ts) {
  testutil::TempDir dir;
  auto make = [&](const std::filesystem::path& p, bool threaded) {
    auto l = layout_shard(ts);
    ASSERT_TRUE(l.ok());
    auto w = ShardWriter::create(p, std::move(l).value());
    ASSERT_TRUE(w.ok()) << w.error().message;
    const auto& tensors = w->layout().tensors;
    if (threaded) {
      std::vector<std::thread> th;
      for (int k = 0; k < 4; ++k)
        th.emplace_back([&, k] {
          for (std::size_t i = tensors.size(); i-- > 0;)
            if (static_cast<int>(i % 4) == k) {
              auto st = w->write_tensor(tensors[i], pattern(tensors[i].nbytes(), static_cast<unsigned>(i)));
              EXPECT_TRUE(st.ok());
            }
        });
      for (auto& t : th) t.join();
    } else {
      for (std::size_t i = 0; i < tensors.size(); ++i)
        ASSERT_TRUE(w->write_tensor(tensors[i], pattern(tensors[i].nbytes(), static_cast<unsigned>(i))).ok());
    }
    auto c = w->commit();
    ASSERT_TRUE(c.ok()) << c.error().message;
  };
  make(dir / "a.safetensors", false);
  make(dir / "b.safetensors", true);
  EXPECT_EQ(testutil::read_text(dir / "a.safetensors"), testutil::read_text(dir / "b.safetensors"));
  EXPECT_EQ(testutil::list_dir(dir.path), (std::vector<std::string>{"a.safetensors", "b.safetensors"}));
}

TEST(SafetensorsWriter, ConcurrentOutOfOrderWritesGiveIdenticalBytes) {
  std::vector<OutTensor> ts;
  for (int i = 0; i < 16; ++i) ts.push_back({"t" + std::to_string(i), i % 2 ? DType::BF16 : DType::U8, {257}});
  expect_concurrent_writes_identical(ts);
}

// Writes of 1 MB and more start their writeback as they land (File::start_writeback): the bytes are the same.
TEST(SafetensorsWriter, LargeWritesStartingTheirWritebackGiveIdenticalBytes) {
  std::vector<OutTensor> ts;
  for (int i = 0; i < 6; ++i) ts.push_back({"w" + std::to_string(i), i % 2 ? DType::BF16 : DType::U8, {(1u << 20) + 77u * static_cast<unsigned>(i)}});
  expect_concurrent_writes_identical(ts);
}

TEST(SafetensorsWriter, IncompleteOrAbandonedWritesLeaveNothing) {
  testutil::TempDir dir;
  auto l = layout_shard({{"a", DType::U8, {4}}, {"b", DType::U8, {4}}});
  ASSERT_TRUE(l.ok());
  {
    auto w = ShardWriter::create(dir / "x.safetensors", *l);
    ASSERT_TRUE(w.ok());
    EXPECT_EQ(testutil::list_dir(dir.path), std::vector<std::string>{"x.safetensors.partial"});
    ASSERT_TRUE(w->write_tensor(*w->layout().find("a"), pattern(4, 1)).ok());
    // Wrong size and out-of-range writes are refused.
    auto bad = w->write_tensor(*w->layout().find("b"), pattern(3, 1));
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.error().code, Errc::INTERNAL);
    EXPECT_EQ(bad.error().message, "cannot write '" + (dir / "x.safetensors").string() +
                                       "': tensor 'b': got 3 bytes, expected 4 (U8 shape [4])");
    auto oob = w->write_at(6, pattern(4, 1));
    ASSERT_FALSE(oob.ok());
    EXPECT_EQ(oob.error().message, "cannot write '" + (dir / "x.safetensors").string() +
                                       "': data range [6,10) is outside the 8-byte data section");
    auto c = w->commit();
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.error().code, Errc::INTERNAL);
    EXPECT_EQ(c.error().message,
              "cannot commit '" + (dir / "x.safetensors").string() + "': 4 data bytes written, expected 8");
    EXPECT_TRUE(testutil::list_dir(dir.path).empty());
  }
  {
    auto w = ShardWriter::create(dir / "y.safetensors", *l);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(w->write_at(0, pattern(8, 2)).ok());
    // Destroyed without commit: the .partial goes.
  }
  EXPECT_TRUE(testutil::list_dir(dir.path).empty());
}

}  // namespace
}  // namespace fp4forge::st
