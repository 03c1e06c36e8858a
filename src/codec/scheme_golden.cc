// Golden vectors of the schemes beside NVFP4A16: strict loader and byte-exact runner (scheme_golden.h).
#include "fp4forge/codec/scheme_golden.h"

#include <nlohmann/json.hpp>

#include "codec/nvfp4_internal.h"
#include "fp4forge/util/format.h"
#include "fp4forge/util/fs.h"

namespace fp4forge {
namespace detail_schemes {
extern const unsigned char kBuiltinSchemesJson[];
extern const std::size_t kBuiltinSchemesJsonSize;
}  // namespace detail_schemes

namespace {

using json = nlohmann::json;

struct Ctx {
  std::string_view source;
  std::string where;
  Error fail(const std::string& what) const {
    return Error{Errc::BAD_INPUT,
                 fmt::format("scheme golden file '{}': {}: {}; expected the schema of docs/cli/selftest.md", source,
                             where, what),
                 std::string(source),
                 {}};
  }
};

Result<EncodedTensor> parse_tensor(const json& j, bool saved, const Ctx& ctx) {
  if (!j.is_object()) return ctx.fail("a tensor is not an object");
  EncodedTensor t;
  if (saved) {
    if (!j.contains("suffix") || !j.at("suffix").is_string()) return ctx.fail("missing or non-string \"suffix\"");
    t.suffix = j.at("suffix").get<std::string>();
  }
  if (!j.contains("dtype") || !j.at("dtype").is_string()) return ctx.fail("missing or non-string \"dtype\"");
  const auto dt = parse_dtype(j.at("dtype").get<std::string>());
  if (!dt) return ctx.fail(fmt::format("unknown dtype \"{}\"", j.at("dtype").get<std::string>()));
  t.dtype = *dt;
  if (!j.contains("shape") || !j.at("shape").is_array() || j.at("shape").empty() || j.at("shape").size() > 2)
    return ctx.fail("\"shape\" must be [N] or [N, K]");
  std::uint64_t n = 1;
  for (const json& d : j.at("shape")) {
    if (!d.is_number_unsigned() || d.get<std::uint64_t>() == 0 || d.get<std::uint64_t>() > (1u << 20))
      return ctx.fail("a shape entry is not an integer in [1, 2^20]");
    t.shape.push_back(d.get<std::uint64_t>());
    n *= t.shape.back();
  }
  if (!j.contains("hex") || !j.at("hex").is_string()) return ctx.fail("missing or non-string \"hex\"");
  const std::string& s = j.at("hex").get_ref<const std::string&>();
  if (s.size() * 4 != n * dtype_bits(t.dtype))
    return ctx.fail(fmt::format("\"hex\" holds {} digits, expected {} for the shape and dtype", s.size(),
                                n * dtype_bits(t.dtype) / 4));
  t.bytes.resize(s.size() / 2);
  for (std::size_t i = 0; i < t.bytes.size(); ++i) {
    const int hi = nvfp4::detail::hex_digit(s[2 * i]), lo = nvfp4::detail::hex_digit(s[2 * i + 1]);
    if (hi < 0 || lo < 0) return ctx.fail(fmt::format("\"hex\" has a non-hex character at offset {}", 2 * i));
    t.bytes[i] = static_cast<std::byte>(hi << 4 | lo);
  }
  return t;
}

Result<SchemeGoldenSet> parse_cases(QuantScheme scheme, const json& cases, Ctx& ctx) {
  if (!cases.is_array() || cases.empty()) return ctx.fail("missing or empty \"cases\" array");
  SchemeGoldenSet set;
  set.scheme = scheme;
  set.source = std::string(ctx.source);
  for (std::size_t ci = 0; ci < cases.size(); ++ci) {
    const json& jc = cases.at(ci);
    ctx.where = fmt::format("{} case {}", quant_scheme_preset(scheme), ci);
    if (!jc.is_object() || !jc.contains("name") || !jc.at("name").is_string())
      return ctx.fail("not an object with a string \"name\"");
    SchemeGoldenCase c;
    c.name = jc.at("name").get<std::string>();
    ctx.where = fmt::format("{} case {} ('{}')", quant_scheme_preset(scheme), ci, c.name);
    const std::string status = jc.contains("status") && jc.at("status").is_string() ? jc.at("status").get<std::string>() : "";
    if (status != "ok" && status != "refused") return ctx.fail("\"status\" must be \"ok\" or \"refused\"");
    c.ok = status == "ok";
    if (!jc.contains("inputs") || !jc.at("inputs").is_array() || jc.at("inputs").size() != 1)
      return ctx.fail("\"inputs\" must hold one tensor");
    FP4FORGE_ASSIGN_OR_RETURN(c.input, parse_tensor(jc.at("inputs").at(0), false, ctx));
    if (c.input.shape.size() != 2 || !is_source_dtype(c.input.dtype))
      return ctx.fail("the input must be a BF16, F16 or F32 matrix [N, K]");
    if (c.ok) {
      if (!jc.contains("saved") || !jc.at("saved").is_array() || jc.at("saved").empty())
        return ctx.fail("an \"ok\" case needs a \"saved\" array");
      for (const json& js : jc.at("saved")) {
        FP4FORGE_ASSIGN_OR_RETURN(EncodedTensor t, parse_tensor(js, true, ctx));
        c.saved.push_back(std::move(t));
      }
    }
    set.cases.push_back(std::move(c));
  }
  return set;
}

std::string first_difference(const EncodedTensor& want, const EncodedTensor& got) {
  if (want.suffix != got.suffix) return fmt::format("tensor '{}' where '{}' was expected", got.suffix, want.suffix);
  if (want.dtype != got.dtype || want.shape != got.shape)
    return fmt::format("{}: {} {} where {} {} was expected", want.suffix, dtype_name(got.dtype), fmt::format("[{}]", format_shape(got.shape)),
                       dtype_name(want.dtype), fmt::format("[{}]", format_shape(want.shape)));
  for (std::size_t i = 0; i < want.bytes.size(); ++i)
    if (want.bytes[i] != got.bytes[i])
      return fmt::format("{}: byte {} is 0x{:02x}, expected 0x{:02x}", want.suffix, i,
                         static_cast<unsigned>(got.bytes[i]), static_cast<unsigned>(want.bytes[i]));
  return {};
}

}  // namespace

const EncodedTensor* SchemeGoldenCase::find(std::string_view suffix) const {
  for (const auto& t : saved)
    if (t.suffix == suffix) return &t;
  return nullptr;
}

Result<SchemeGoldenSet> parse_scheme_golden(std::string_view json_text, std::string_view source) {
  Ctx ctx{source, "top level"};
  const json doc = json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) return ctx.fail("not a JSON object");
  if (!doc.contains("scheme") || !doc.at("scheme").is_string()) return ctx.fail("missing or non-string \"scheme\"");
  auto scheme = parse_quant_scheme(doc.at("scheme").get<std::string>());
  if (!scheme.ok() || *scheme == QuantScheme::NVFP4A16)
    return ctx.fail(fmt::format("\"scheme\" \"{}\" is not one of MXFP4A16, FP8_DYNAMIC, FP8_BLOCK, W4A16 (NVFP4A16 "
                                "vectors take the golden.h schema)",
                                doc.at("scheme").get<std::string>()));
  if (!doc.contains("cases")) return ctx.fail("no \"cases\" array");
  return parse_cases(*scheme, doc.at("cases"), ctx);
}

Result<GoldenVectors> load_golden_vectors(const std::filesystem::path& path) {
  FP4FORGE_ASSIGN_OR_RETURN(std::string text, fs::read_file(path, 64u << 20));
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  GoldenVectors v;
  if (doc.is_object() && doc.contains("scheme")) {
    FP4FORGE_ASSIGN_OR_RETURN(v.other, parse_scheme_golden(text, path.string()));
    v.scheme = v.other->scheme;
  } else {
    FP4FORGE_ASSIGN_OR_RETURN(v.nvfp4, nvfp4::parse_golden(text, path.string()));
  }
  return v;
}

namespace {
Error wrong_scheme(const std::filesystem::path& path, QuantScheme got, std::string_view want) {
  return make_error(Errc::BAD_INPUT, "golden file '{}' holds {} vectors; expected {}", path.string(),
                    quant_scheme_preset(got), want);
}
}  // namespace

Result<SchemeGoldenSet> load_scheme_golden(const std::filesystem::path& path) {
  FP4FORGE_ASSIGN_OR_RETURN(GoldenVectors v, load_golden_vectors(path));
  if (!v.other) return wrong_scheme(path, v.scheme, "a scheme other than NVFP4A16");
  return std::move(*v.other);
}

namespace nvfp4 {
Result<GoldenSet> load_golden(const std::filesystem::path& path) {
  FP4FORGE_ASSIGN_OR_RETURN(GoldenVectors v, load_golden_vectors(path));
  if (!v.nvfp4) return wrong_scheme(path, v.scheme, "NVFP4A16");
  return std::move(*v.nvfp4);
}
}  // namespace nvfp4

Result<std::vector<SchemeGoldenSet>> builtin_scheme_golden() {
  const std::string_view text(reinterpret_cast<const char*>(detail_schemes::kBuiltinSchemesJson),
                              detail_schemes::kBuiltinSchemesJsonSize);
  Ctx ctx{"built-in", "top level"};
  const json doc = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("schemes") || !doc.at("schemes").is_object())
    return ctx.fail("no \"schemes\" object");
  std::vector<SchemeGoldenSet> out;
  for (QuantScheme s : kQuantSchemes) {
    if (s == QuantScheme::NVFP4A16) continue;
    const std::string preset(quant_scheme_preset(s));
    if (!doc.at("schemes").contains(preset) || !doc.at("schemes").at(preset).contains("cases"))
      return ctx.fail(fmt::format("no cases for {}", preset));
    FP4FORGE_ASSIGN_OR_RETURN(SchemeGoldenSet set, parse_cases(s, doc.at("schemes").at(preset).at("cases"), ctx));
    out.push_back(std::move(set));
  }
  return out;
}

nvfp4::GoldenOutcome run_scheme_golden_case(QuantScheme s, const SchemeGoldenCase& c, std::string_view path) {
  nvfp4::GoldenOutcome out{fmt::format("{}/{}", quant_scheme_preset(s), c.name), std::string(path), false, {}};
  auto got = encode_linear(s, c.view(), c.name, path);
  if (!c.ok) {
    out.pass = !got.ok() && got.error().code == Errc::BAD_INPUT;
    if (!out.pass) out.detail = got.ok() ? "encoded a tensor upstream refuses" : got.error().message;
    return out;
  }
  if (!got.ok()) {
    out.detail = got.error().message;
    return out;
  }
  if (got->size() != c.saved.size()) {
    out.detail = fmt::format("{} tensors written, upstream saves {}", got->size(), c.saved.size());
    return out;
  }
  for (std::size_t i = 0; i < c.saved.size(); ++i)
    if (std::string d = first_difference(c.saved[i], (*got)[i]); !d.empty()) {
      out.detail = std::move(d);
      return out;
    }
  out.pass = true;
  return out;
}

void run_scheme_golden(const std::vector<SchemeGoldenSet>& sets, nvfp4::GoldenReport& report,
                       const std::vector<std::string>& paths) {
  for (const SchemeGoldenSet& set : sets)
    for (const std::string& p : paths)
      for (const SchemeGoldenCase& c : set.cases) {
        report.scheme_outcomes.push_back(run_scheme_golden_case(set.scheme, c, p));
        if (!report.scheme_outcomes.back().pass) ++report.scheme_failures;
      }
}

}  // namespace fp4forge
