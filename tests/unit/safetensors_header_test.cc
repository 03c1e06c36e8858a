// safetensors header validation: a corrupt-file table (each defect with its exact message) and the
// accepted edge cases.
// GCC 12 reports a false -Wrestrict inside std::string concatenation at -O2 (GCC bug 105329).
#pragma GCC diagnostic ignored "-Wrestrict"
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fp4forge/safetensors/header.h"
#include "fp4forge/safetensors/shard_reader.h"
#include "unit/safetensors_test_util.h"

namespace fp4forge::st {
namespace {

using testutil::raw_file;
using testutil::st_file;

constexpr const char* kSrc = "bad.safetensors";
constexpr const char* kHint = "header corrupt or hand-edited?";

std::string entry(const std::string& name, const std::string& dtype, const std::string& shape,
                  std::uint64_t b, std::uint64_t e) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":[" +
         std::to_string(b) + "," + std::to_string(e) + "]}";
}

struct Corrupt {
  const char* what;
  std::vector<std::byte> file;
  std::string message;  // exact, without the "bad.safetensors: " prefix
  std::string tensor;   // expected Error::tensor
};

std::string nested(int depth) {
  std::string s = "{\"a\":";
  for (int i = 0; i < depth; ++i) s += '[';
  for (int i = 0; i < depth; ++i) s += ']';
  return s + "}";
}

std::vector<Corrupt> corrupt_table() {
  const std::string f32_1 = entry("a", "F32", "[1]", 0, 4);
  std::vector<Corrupt> t;
  t.push_back({"empty file", {}, "file is 0 bytes, smaller than the 8-byte header length; not a safetensors file?", ""});
  t.push_back({"shorter than the length prefix", testutil::to_bytes("{}   "),
               "file is 5 bytes, smaller than the 8-byte header length; not a safetensors file?", ""});
  t.push_back({"length 0", raw_file(0, ""),
               "header length 0 is too small (at least 2 for \"{}\"); not a safetensors file?", ""});
  t.push_back({"length 1", raw_file(1, "{"),
               "header length 1 is too small (at least 2 for \"{}\"); not a safetensors file?", ""});
  t.push_back({"huge header length", raw_file(std::uint64_t{1} << 63, "{}"),
               "header length 9223372036854775808 exceeds the 100000000-byte limit; not a safetensors "
               "file?",
               ""});
  t.push_back({"length just over the cap", raw_file(100'000'001, "{}"),
               "header length 100000001 exceeds the 100000000-byte limit; not a safetensors file?", ""});
  t.push_back({"length beyond the file", raw_file(100, "{\"a\":1}"),
               "header length 100 exceeds the 7 bytes after the length prefix; file truncated?", ""});
  t.push_back({"truncated header (JSON cut short)", st_file("{\"a\":{\"dtype\":\"F32\"", 0),
               "header is not valid JSON: parse error at line 1, column 20: syntax error while parsing "
               "object - unexpected end of input; expected '}'; not a safetensors file or " +
                   std::string(kHint),
               ""});
  t.push_back({"not JSON at all", st_file("hello, world", 0),
               "header is not valid JSON: parse error at line 1, column 1: syntax error while parsing "
               "value - invalid literal; last read: 'h'; not a safetensors file or " +
                   std::string(kHint),
               ""});
  t.push_back({"garbage after the object", st_file("{} x", 0),
               "header is not valid JSON: parse error at line 1, column 4: syntax error while parsing "
               "value - invalid literal; last read: '{} x'; expected end of input; not a safetensors "
               "file or " +
                   std::string(kHint),
               ""});
  t.push_back({"invalid UTF-8 in a name", st_file("{\"\xff\":1}", 0),
               "header is not valid JSON: parse error at line 1, column 3: syntax error while parsing "
               "object key - invalid string: ill-formed UTF-8 byte; last read: '\"\\xff'; expected "
               "string literal; not a safetensors file or " +
                   std::string(kHint),
               ""});
  t.push_back({"root is an array", st_file("[1,2]", 0),
               "header JSON is array [1,2], expected an object; not a safetensors file?", ""});
  t.push_back({"deeply nested JSON", st_file(nested(10000), 0),
               "header JSON is nested deeper than 8 levels; not a safetensors header", ""});
  t.push_back({"entry is not an object", st_file("{\"w\":[1]}", 0),
               "tensor 'w': entry is array [1], expected an object with dtype, shape, data_offsets",
               "w"});
  t.push_back({"missing dtype", st_file("{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4),
               "tensor 'w': missing key 'dtype'; an entry has dtype, shape, data_offsets", "w"});
  t.push_back({"missing data_offsets", st_file("{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4),
               "tensor 'w': missing key 'data_offsets'; an entry has dtype, shape, data_offsets", "w"});
  t.push_back({"unexpected key",
               st_file("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", 4),
               "tensor 'w': unexpected key 'x'; an entry has only dtype, shape, data_offsets", "w"});
  t.push_back({"dtype not a string", st_file("{\"w\":{\"dtype\":5,\"shape\":[1],\"data_offsets\":[0,4]}}", 4),
               "tensor 'w': dtype is number 5, expected a string such as \"BF16\"", "w"});
  t.push_back({"unknown dtype", st_file("{" + entry("w", "F128", "[1]", 0, 16) + "}", 16),
               "tensor 'w': unknown dtype 'F128'; known dtypes: BOOL F4 F6_E2M3 F6_E3M2 U8 I8 F8_E5M2 "
               "F8_E4M3 F8_E8M0 F8_E4M3FNUZ F8_E5M2FNUZ I16 U16 F16 BF16 I32 U32 F32 C64 F64 I64 U64",
               "w"});
  t.push_back({"lower-case dtype", st_file("{" + entry("w", "f32", "[1]", 0, 4) + "}", 4),
               "tensor 'w': unknown dtype 'f32'; known dtypes: BOOL F4 F6_E2M3 F6_E3M2 U8 I8 F8_E5M2 "
               "F8_E4M3 F8_E8M0 F8_E4M3FNUZ F8_E5M2FNUZ I16 U16 F16 BF16 I32 U32 F32 C64 F64 I64 U64",
               "w"});
  t.push_back({"shape not an array", st_file("{\"w\":{\"dtype\":\"F32\",\"shape\":\"3\",\"data_offsets\":[0,12]}}", 12),
               "tensor 'w': shape is string \"3\", expected an array of non-negative integers", "w"});
  t.push_back({"negative dimension", st_file("{" + entry("w", "F32", "[2,-1]", 0, 4) + "}", 4),
               "tensor 'w': shape[1] is -1, expected a non-negative integer", "w"});
  t.push_back({"fractional dimension", st_file("{" + entry("w", "F32", "[2.5]", 0, 4) + "}", 4),
               "tensor 'w': shape[0] is 2.5, expected a non-negative integer", "w"});
  t.push_back({"dimension beyond u64", st_file("{" + entry("w", "U8", "[18446744073709551616]", 0, 4) + "}", 4),
               "tensor 'w': shape[0] is 1.8446744073709552e+19, expected a non-negative integer", "w"});
  t.push_back({"size mismatch", st_file("{" + entry("x", "F32", "[3]", 0, 10) + "}", 10),
               "tensor 'x': data_offsets [0,10] span 10 bytes, expected 12 (F32 shape [3]); " + std::string(kHint),
               "x"});
  t.push_back({"element count overflow",
               st_file("{" + entry("w", "U8", "[4294967296,4294967296]", 0, 0) + "}", 0),
               "tensor 'w': shape [4294967296,4294967296] element count overflows 64 bits; " + std::string(kHint),
               "w"});
  t.push_back({"byte size overflow", st_file("{" + entry("w", "F32", "[4611686018427387904]", 0, 0) + "}", 0),
               "tensor 'w': F32 shape [4611686018427387904] byte size overflows 64 bits; " + std::string(kHint),
               "w"});
  t.push_back({"sub-byte dtype not byte aligned", st_file("{" + entry("w", "F4", "[3]", 0, 2) + "}", 2),
               "tensor 'w': F4 shape [3] is 12 bits, not a whole number of bytes; " + std::string(kHint), "w"});
  t.push_back({"F6 not byte aligned", st_file("{" + entry("w", "F6_E3M2", "[2]", 0, 2) + "}", 2),
               "tensor 'w': F6_E3M2 shape [2] is 12 bits, not a whole number of bytes; " + std::string(kHint),
               "w"});
  t.push_back({"data_offsets wrong arity", st_file("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4),
               "tensor 'w': data_offsets is [0], expected [begin,end] (two non-negative integers)", "w"});
  t.push_back({"data_offsets negative", st_file("{" + std::string("\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}") + "}", 4),
               "tensor 'w': data_offsets is [-4,0], expected [begin,end] (two non-negative integers)", "w"});
  t.push_back({"data_offsets not an array", st_file("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":{\"b\":0}}}", 4),
               "tensor 'w': data_offsets is {\"b\":0}, expected [begin,end] (two non-negative integers)", "w"});
  t.push_back({"begin after end", st_file("{" + entry("w", "F32", "[1]", 8, 4) + "}", 8),
               "tensor 'w': data_offsets [8,4] begin is after end; " + std::string(kHint), "w"});
  t.push_back({"gap between tensors",
               st_file("{" + f32_1 + "," + entry("b", "F32", "[1]", 8, 12) + "}", 12),
               "tensor 'b': data_offsets begin 8, expected 4 (end of 'a'): a 4-byte gap; " + std::string(kHint),
               "b"});
  t.push_back({"first tensor not at 0", st_file("{" + entry("a", "F32", "[1]", 4, 8) + "}", 8),
               "tensor 'a': data_offsets begin 4, expected 0 (start of the data section): a 4-byte gap; " +
                   std::string(kHint),
               "a"});
  t.push_back({"overlapping tensors",
               st_file("{" + entry("a", "F32", "[2]", 0, 8) + "," + entry("b", "F32", "[1]", 4, 8) + "}", 8),
               "tensor 'b': data_offsets begin 4, expected 8 (end of 'a'): overlaps by 4 bytes; " +
                   std::string(kHint),
               "b"});
  t.push_back({"two tensors at the same offsets",
               st_file("{" + entry("a", "F32", "[1]", 0, 4) + "," + entry("b", "F32", "[1]", 0, 4) + "}", 4),
               "tensor 'b': data_offsets begin 0, expected 4 (end of 'a'): overlaps by 4 bytes; " +
                   std::string(kHint),
               "b"});
  t.push_back({"data truncated", st_file("{" + entry("a", "F32", "[2]", 0, 8) + "}", 4),
               "data section is 4 bytes, but the tensors need 8 (last: 'a'); file truncated?", ""});
  t.push_back({"trailing bytes", st_file("{" + entry("a", "F32", "[2]", 0, 8) + "}", 12),
               "data section is 12 bytes, but the tensors end at 8: 4 trailing bytes; " + std::string(kHint), ""});
  t.push_back({"bytes after an empty header", st_file("{}", 3),
               "data section is 3 bytes, but the tensors end at 0: 3 trailing bytes; " + std::string(kHint), ""});
  t.push_back({"duplicate tensor name",
               st_file("{" + entry("a", "F32", "[1]", 0, 4) + "," + entry("a", "F32", "[1]", 4, 8) + "}", 8),
               "tensor 'a': name appears twice in the header; " + std::string(kHint), "a"});
  t.push_back({"duplicate key inside an entry",
               st_file("{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4),
               "tensor 'a': key 'dtype' appears twice in the entry; " + std::string(kHint), "a"});
  t.push_back({"__metadata__ not an object", st_file("{\"__metadata__\":\"pt\"}", 0),
               "__metadata__ is string \"pt\", expected an object of strings", ""});
  t.push_back({"__metadata__ value not a string", st_file("{\"__metadata__\":{\"format\":1}}", 0),
               "__metadata__ 'format' is number 1, expected a string", ""});
  t.push_back({"__metadata__ nested object", st_file("{\"__metadata__\":{\"a\":{\"b\":\"c\"}}}", 0),
               "__metadata__ 'a' is object {\"b\":\"c\"}, expected a string", ""});
  t.push_back({"__metadata__ duplicate key", st_file("{\"__metadata__\":{\"a\":\"1\",\"a\":\"2\"}}", 0),
               "__metadata__ key 'a' appears twice; " + std::string(kHint), ""});
  t.push_back({"control characters in a name are escaped",
               st_file("{" + entry("a\\nb", "F32", "[3]", 0, 4) + "}", 4),
               "tensor 'a\\x0ab': data_offsets [0,4] span 4 bytes, expected 12 (F32 shape [3]); " + std::string(kHint),
               "a\\x0ab"});
  t.push_back({"NUL byte after the JSON", st_file("{" + entry("a", "F32", "[1]", 0, 4) + std::string("}\0garbage", 9), 4),
               "header is not valid JSON: NUL byte at offset 54; JSON text cannot contain one; not a safetensors "
               "file or header corrupt or hand-edited?",
               ""});
  t.push_back({"long values are shortened",
               st_file("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]}}", 4),
               "tensor 'w': data_offsets is [0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,1..., expected "
               "[begin,end] (two non-negative integers)",
               "w"});
  return t;
}

TEST(SafetensorsHeader, CorruptFileTable) {
  auto table = corrupt_table();
  ASSERT_GE(table.size(), 24u);
  for (const auto& c : table) {
    SCOPED_TRACE(c.what);
    auto r = parse_header(c.file, kSrc);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, Errc::BAD_INPUT);
    EXPECT_EQ(r.error().message, std::string(kSrc) + ": " + c.message);
    EXPECT_EQ(r.error().file, kSrc);
    EXPECT_EQ(r.error().tensor, c.tensor);
    EXPECT_EQ(r.error().describe(), r.error().message) << "message already names file and tensor";
    EXPECT_EQ(r.error().message.find('\n'), std::string::npos) << "one line";
    // The in-memory reader gives the same verdict.
    auto b = ShardReader::from_buffer(c.file, kSrc);
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(b.error().message, r.error().message);
  }
}

TEST(SafetensorsHeader, PrefixParseMatchesWholeFileParse) {
  // parse_header_prefix only needs the header bytes; the data section size comes from file_size.
  auto f = st_file("{" + entry("a", "F32", "[2]", 0, 8) + "}", 8);
  std::span<const std::byte> prefix(f.data(), f.size() - 8);
  auto ok = parse_header_prefix(prefix, f.size(), "p");
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok->tensors.size(), 1u);
  auto trunc = parse_header_prefix(prefix, f.size() - 1, "p");
  ASSERT_FALSE(trunc.ok());
  EXPECT_EQ(trunc.error().message, "p: data section is 7 bytes, but the tensors need 8 (last: 'a'); file truncated?");
  // A prefix shorter than the header it announces is a caller bug.
  auto shortp = parse_header_prefix(std::span<const std::byte>(f.data(), 12), f.size(), "p");
  ASSERT_FALSE(shortp.ok());
  EXPECT_EQ(shortp.error().code, Errc::INTERNAL);
}

TEST(SafetensorsHeader, AcceptsEmptyTensorList) {
  for (const char* j : {"{}", "{}      ", "{\"__metadata__\":{}}"}) {
    auto r = parse_header(st_file(j, 0), "e");
    ASSERT_TRUE(r.ok()) << j << ": " << r.error().message;
    EXPECT_TRUE(r->tensors.empty());
    EXPECT_EQ(r->data_size(), 0u);
    EXPECT_EQ(r->header_len, std::string(j).size());
    EXPECT_EQ(r->data_start(), 8 + std::string(j).size());
  }
}

TEST(SafetensorsHeader, AcceptsScalarZeroSizeAndMetadata) {
  std::string j = "{\"__metadata__\":{\"z\":\"1\",\"format\":\"pt\"}," + entry("s", "F32", "[]", 0, 4) + "," +
                  entry("empty", "BF16", "[0,3]", 4, 4) + "," + entry("v", "BF16", "[3]", 4, 10) + "}";
  auto r = parse_header(st_file(j, 10), "m");
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->tensors.size(), 3u);
  EXPECT_EQ(r->tensors[0].name, "s");
  EXPECT_TRUE(r->tensors[0].shape.empty());
  EXPECT_EQ(r->tensors[0].numel(), 1u);
  EXPECT_EQ(r->tensors[0].nbytes(), 4u);
  EXPECT_EQ(r->tensors[1].name, "empty");
  EXPECT_EQ(r->tensors[1].numel(), 0u);
  EXPECT_EQ(r->tensors[1].nbytes(), 0u);
  EXPECT_EQ(r->tensors[2].name, "v");
  EXPECT_EQ(r->tensors[2].dtype, DType::BF16);
  ASSERT_EQ(r->metadata.size(), 2u);  // file order kept
  EXPECT_EQ(r->metadata[0], (std::pair<std::string, std::string>{"z", "1"}));
  EXPECT_EQ(r->metadata[1], (std::pair<std::string, std::string>{"format", "pt"}));
  EXPECT_EQ(r->data_size(), 10u);
  EXPECT_EQ(r->find("v"), &r->tensors[2]);
  EXPECT_EQ(r->find("nope"), nullptr);
}

TEST(SafetensorsHeader, SortsOutOfOrderOffsets) {
  // JSON order c, a, b; data order a, b, c.
  std::string j = "{" + entry("c", "U8", "[2]", 6, 8) + "," + entry("a", "F32", "[1]", 0, 4) + "," +
                  entry("b", "I16", "[1]", 4, 6) + "}";
  auto r = parse_header(st_file(j, 8), "o");
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->tensors.size(), 3u);
  EXPECT_EQ(r->tensors[0].name, "a");
  EXPECT_EQ(r->tensors[1].name, "b");
  EXPECT_EQ(r->tensors[2].name, "c");
}

TEST(SafetensorsHeader, AcceptsEveryDtype) {
  // 8 elements of each dtype: byte sizes 8 * bits / 8.
  std::string j = "{";
  std::uint64_t off = 0;
  std::vector<std::uint64_t> sizes;
  for (int i = 0; i < kDTypeCount; ++i) {
    DType d = static_cast<DType>(i);
    std::uint64_t n = dtype_bits(d);  // 8 elements * bits / 8
    if (i) j += ",";
    j += entry("t" + std::to_string(i), std::string(dtype_name(d)), "[2,4]", off, off + n);
    off += n;
    sizes.push_back(n);
  }
  j += "}";
  auto r = parse_header(st_file(j, off), "all");
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->tensors.size(), static_cast<std::size_t>(kDTypeCount));
  for (int i = 0; i < kDTypeCount; ++i) {
    const auto* t = r->find("t" + std::to_string(i));
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->dtype, static_cast<DType>(i));
    EXPECT_EQ(t->nbytes(), sizes[i]);
  }
  // Spot-check the sub-byte sizes against the format: F4 is 4 bits, F6 6 bits, BOOL one byte.
  EXPECT_EQ(r->find("t1")->nbytes(), 4u);   // F4 x8
  EXPECT_EQ(r->find("t2")->nbytes(), 6u);   // F6_E2M3 x8
  EXPECT_EQ(r->find("t0")->nbytes(), 8u);   // BOOL x8
  EXPECT_EQ(r->find("t18")->nbytes(), 64u);  // C64 x8
}

TEST(SafetensorsHeader, ReaderOpensFilesAndReportsIoErrors) {
  testutil::TempDir dir;
  auto missing = ShardReader::open(dir / "missing.safetensors");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, Errc::IO);
  EXPECT_EQ(missing.error().message,
            "cannot open '" + (dir / "missing.safetensors").string() + "': No such file or directory");

  auto isdir = ShardReader::open(dir.path);
  ASSERT_FALSE(isdir.ok());
  EXPECT_EQ(isdir.error().code, Errc::BAD_INPUT);
  EXPECT_EQ(isdir.error().message,
            "'" + dir.path.string() + "' is not a regular file; expected a .safetensors file");

  testutil::write_bytes(dir / "empty.safetensors", {});
  auto empty = ShardReader::open(dir / "empty.safetensors");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().code, Errc::BAD_INPUT);
  EXPECT_EQ(empty.error().message, (dir / "empty.safetensors").string() +
                                       ": file is 0 bytes, smaller than the 8-byte header length; not a "
                                       "safetensors file?");

  // A valid file: mmap'd data, lookup, release() keeps the data readable.
  std::string j = "{" + entry("a", "U8", "[5000]", 0, 5000) + "," + entry("b", "U8", "[9000]", 5000, 14000) + "}";
  auto bytes = st_file(j, 14000);
  for (std::size_t i = 0; i < 14000; ++i) bytes[8 + j.size() + i] = static_cast<std::byte>(i % 251);
  testutil::write_bytes(dir / "ok.safetensors", bytes);
  auto r = ShardReader::open(dir / "ok.safetensors");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->file_size(), bytes.size());
  EXPECT_EQ(r->path(), (dir / "ok.safetensors").string());
  const TensorInfo* b = r->find("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(r->find("zz"), nullptr);
  r->release(*b);
  auto d = r->data(*b);
  ASSERT_EQ(d.size(), 9000u);
  for (std::size_t i = 0; i < d.size(); ++i)
    ASSERT_EQ(d[i], static_cast<std::byte>((5000 + i) % 251)) << i;
  // Moving the reader keeps TensorInfo pointers valid.
  ShardReader moved = std::move(r).value();
  EXPECT_EQ(moved.find("b"), b);
}

}  // namespace
}  // namespace fp4forge::st
