// Golden NVFP4A16 vectors: strict loader and byte-exact runner.
#include "fp4forge/codec/golden.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "codec/nvfp4_internal.h"

namespace fp4forge::nvfp4 {
namespace detail {
extern const unsigned char kBuiltinGoldenJson[];
extern const std::size_t kBuiltinGoldenJsonSize;
}  // namespace detail

namespace {

using json = nlohmann::json;

struct Ctx {
  std::string_view source;
  std::string where;  // "case 3 ('name')" / "case 3 member 1"
  Error fail(const std::string& what) const {
    Error e{Errc::BAD_INPUT,
            fmt::format("golden file '{}': {}: {}; expected the nvfp4a16_golden.json schema "
                        "(see docs/cli/selftest.md)",
                        source, where, what),
            std::string(source),
            {}};
    return e;
  }
};

Result<std::vector<std::byte>> hex_field(const json& obj, const char* key, std::uint64_t want_bytes,
                                         const Ctx& ctx) {
  if (!obj.is_object() || !obj.contains(key) || !obj.at(key).is_string())
    return ctx.fail(fmt::format("missing or non-string \"{}\"", key));
  const std::string& s = obj.at(key).get_ref<const std::string&>();
  if (s.size() % 2 != 0) return ctx.fail(fmt::format("\"{}\" has an odd number of hex digits ({})", key, s.size()));
  if (s.size() / 2 != want_bytes)
    return ctx.fail(fmt::format("\"{}\" holds {} bytes, expected {} for the shape", key, s.size() / 2, want_bytes));
  std::vector<std::byte> out(s.size() / 2);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const int hi = detail::hex_digit(s[2 * i]), lo = detail::hex_digit(s[2 * i + 1]);
    if (hi < 0 || lo < 0) return ctx.fail(fmt::format("\"{}\" has a non-hex character at offset {}", key, 2 * i));
    out[i] = static_cast<std::byte>(hi << 4 | lo);
  }
  return out;
}

Result<std::uint64_t> dim(const json& shape, std::size_t i, const Ctx& ctx) {
  const json& v = shape.at(i);
  if (!v.is_number_unsigned()) return ctx.fail(fmt::format("shape[{}] is not a non-negative integer", i));
  const std::uint64_t d = v.get<std::uint64_t>();
  if (d == 0 || d > (1u << 20)) return ctx.fail(fmt::format("shape[{}] = {} is out of range [1, 2^20]", i, d));
  return d;
}

std::string hex_byte(std::byte b) { return fmt::format("0x{:02x}", static_cast<unsigned>(b)); }

// First differing byte of `got` vs `want`, described with its row and column; empty if equal.
std::string compare(const char* what, std::size_t member, const std::vector<std::byte>& want,
                    const std::vector<std::byte>& got, std::uint64_t row_bytes) {
  if (want.size() != got.size())
    return fmt::format("member {} {}: {} bytes, expected {}", member, what, got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (want[i] != got[i]) {
      std::size_t n = 0;
      for (std::size_t j = i; j < want.size(); ++j) n += want[j] != got[j];
      return fmt::format("member {} {} byte {} (row {}, byte {}): expected {}, got {} ({} byte(s) differ)",
                         member, what, i, i / row_bytes, i % row_bytes, hex_byte(want[i]), hex_byte(got[i]), n);
    }
  }
  return {};
}

}  // namespace

std::vector<WeightView> GoldenCase::views() const {
  std::vector<WeightView> v;
  v.reserve(members.size());
  for (const GoldenMember& m : members) v.push_back(WeightView{m.weight.data(), dtype, m.rows, m.cols});
  return v;
}

Result<GoldenSet> parse_golden(std::string_view json_text, std::string_view source) {
  Ctx ctx{source, "document"};
  json doc = json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return ctx.fail("not valid JSON");
  if (!doc.is_object() || !doc.contains("cases") || !doc.at("cases").is_array())
    return ctx.fail("no \"cases\" array at the top level");
  const json& cases = doc.at("cases");
  if (cases.empty()) return ctx.fail("\"cases\" is empty");
  GoldenSet set;
  set.source = std::string(source);
  for (std::size_t ci = 0; ci < cases.size(); ++ci) {
    const json& jc = cases.at(ci);
    ctx.where = fmt::format("case {}", ci);
    if (!jc.is_object()) return ctx.fail("not an object");
    GoldenCase c;
    if (!jc.contains("name") || !jc.at("name").is_string()) return ctx.fail("missing or non-string \"name\"");
    c.name = jc.at("name").get<std::string>();
    ctx.where = fmt::format("case {} ('{}')", ci, c.name);
    if (jc.contains("note") && jc.at("note").is_string()) c.note = jc.at("note").get<std::string>();
    if (!jc.contains("dtype") || !jc.at("dtype").is_string()) return ctx.fail("missing or non-string \"dtype\"");
    const auto dt = parse_dtype(jc.at("dtype").get<std::string>());
    if (!dt || !is_source_dtype(*dt))
      return ctx.fail(fmt::format("dtype \"{}\" is not BF16, F16 or F32", jc.at("dtype").get<std::string>()));
    c.dtype = *dt;
    if (!jc.contains("members") || !jc.at("members").is_array() || jc.at("members").empty())
      return ctx.fail("missing or empty \"members\" array");
    if (!jc.contains("expected") || !jc.at("expected").is_array())
      return ctx.fail("missing \"expected\" array");
    const json& jm = jc.at("members");
    const json& je = jc.at("expected");
    if (jm.size() != je.size())
      return ctx.fail(fmt::format("{} members but {} expected entries", jm.size(), je.size()));
    const std::string case_where = ctx.where;
    for (std::size_t mi = 0; mi < jm.size(); ++mi) {
      ctx.where = fmt::format("{} member {}", case_where, mi);
      const json& m = jm.at(mi);
      if (!m.is_object() || !m.contains("shape") || !m.at("shape").is_array() || m.at("shape").size() != 2)
        return ctx.fail("\"shape\" must be [N, K]");
      GoldenMember gm;
      FP4FORGE_ASSIGN_OR_RETURN(gm.rows, dim(m.at("shape"), 0, ctx));
      FP4FORGE_ASSIGN_OR_RETURN(gm.cols, dim(m.at("shape"), 1, ctx));
      if (gm.cols % kGroupSize != 0)
        return ctx.fail(fmt::format("K = {} is not a multiple of 16", gm.cols));
      const std::uint64_t n = gm.rows * gm.cols;
      FP4FORGE_ASSIGN_OR_RETURN(gm.weight, hex_field(m, "weight", n * detail::elem_size(c.dtype), ctx));
      const json& e = je.at(mi);
      FP4FORGE_ASSIGN_OR_RETURN(gm.packed, hex_field(e, "weight_packed", n / 2, ctx));
      FP4FORGE_ASSIGN_OR_RETURN(gm.scale, hex_field(e, "weight_scale", n / kGroupSize, ctx));
      FP4FORGE_ASSIGN_OR_RETURN(std::vector<std::byte> gsb, hex_field(e, "weight_global_scale", 4, ctx));
      std::memcpy(&gm.global_scale_bits, gsb.data(), 4);  // little-endian host (x86/arm64)
      c.members.push_back(std::move(gm));
    }
    set.cases.push_back(std::move(c));
  }
  return set;
}


std::string_view builtin_golden_json() noexcept {
  return {reinterpret_cast<const char*>(detail::kBuiltinGoldenJson), detail::kBuiltinGoldenJsonSize};
}

Result<GoldenSet> builtin_golden() { return parse_golden(builtin_golden_json(), "built-in"); }

GoldenOutcome run_golden_case(const GoldenCase& c, std::string_view path) {
  GoldenOutcome out{c.name, std::string(path), false, {}};
  const std::vector<WeightView> views = c.views();
  std::vector<std::string> names;
  for (std::size_t i = 0; i < c.members.size(); ++i) names.push_back(fmt::format("{}[{}]", c.name, i));
  auto enc = encode_fused(views, names, path);
  if (!enc.ok()) {
    out.detail = "encoder error: " + enc.error().message;
    return out;
  }
  const std::uint32_t gs_bits = std::bit_cast<std::uint32_t>(enc->global_scale);
  for (std::size_t i = 0; i < c.members.size(); ++i) {
    const GoldenMember& m = c.members[i];
    if (gs_bits != m.global_scale_bits) {
      out.detail = fmt::format("member {} weight_global_scale: expected {} (0x{:08x}), got {} (0x{:08x})", i,
                               std::bit_cast<float>(m.global_scale_bits), m.global_scale_bits,
                               enc->global_scale, gs_bits);
      return out;
    }
    std::string d = compare("weight_scale", i, m.scale, enc->members[i].scale, m.cols / kGroupSize);
    if (d.empty()) d = compare("weight_packed", i, m.packed, enc->members[i].packed, m.cols / 2);
    if (!d.empty()) {
      out.detail = std::move(d);
      return out;
    }
  }
  out.pass = true;
  return out;
}

GoldenReport run_golden(const GoldenSet& set, std::span<const std::string> paths) {
  GoldenReport r;
  r.source = set.source;
  r.best_path = best_path();
  r.paths.assign(paths.begin(), paths.end());
  for (const GoldenCase& c : set.cases) {
    r.cases.push_back({c.name, c.dtype, c.members.size()});
    for (const std::string& p : paths) {
      r.outcomes.push_back(run_golden_case(c, p));
      if (!r.outcomes.back().pass) ++r.failures;
    }
  }
  return r;
}

nlohmann::ordered_json to_json(const GoldenReport& r) {
  nlohmann::ordered_json j;
  j["ok"] = r.ok();
  j["source"] = r.source;
  j["best_path"] = r.best_path;
  j["paths"] = r.paths;
  j["runs"] = r.outcomes.size();
  j["failures"] = r.failures;
  auto cases = nlohmann::ordered_json::array();
  for (std::size_t c = 0; c < r.cases.size(); ++c) {
    nlohmann::ordered_json jc;
    jc["name"] = r.cases[c].name;
    jc["dtype"] = std::string(dtype_name(r.cases[c].dtype));
    jc["members"] = r.cases[c].members;
    auto results = nlohmann::ordered_json::array();
    for (std::size_t p = 0; p < r.paths.size(); ++p) {
      const auto& o = r.outcomes[c * r.paths.size() + p];
      results.push_back({{"path", o.path}, {"pass", o.pass}, {"detail", o.detail}});
    }
    jc["results"] = std::move(results);
    cases.push_back(std::move(jc));
  }
  j["cases"] = std::move(cases);
  auto schemes = nlohmann::ordered_json::array();
  for (const auto& o : r.scheme_outcomes)
    schemes.push_back({{"case", o.case_name}, {"path", o.path}, {"pass", o.pass}, {"detail", o.detail}});
  j["scheme_runs"] = r.scheme_outcomes.size();
  j["scheme_failures"] = r.scheme_failures;
  j["scheme_cases"] = std::move(schemes);
  return j;
}

namespace {
std::string rtrim(std::string s) {
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}
}  // namespace

std::string to_text(const GoldenReport& r) {
  std::string out = fmt::format("fp4forge selftest: {} golden cases ({}) x {} codec paths; this CPU dispatches to {}\n",
                                r.cases.size(), r.source, r.paths.size(), r.best_path);
  std::size_t w = 4;
  for (const auto& c : r.cases) w = std::max(w, c.name.size());
  std::string line = fmt::format("{:<{}}  {:<5}", "case", w, "dtype");
  for (const auto& p : r.paths) line += fmt::format("  {:<{}}", p, std::max<std::size_t>(p.size(), 4));
  out += rtrim(line) + "\n";
  for (std::size_t c = 0; c < r.cases.size(); ++c) {
    line = fmt::format("{:<{}}  {:<5}", r.cases[c].name, w, dtype_name(r.cases[c].dtype));
    for (std::size_t p = 0; p < r.paths.size(); ++p)
      line += fmt::format("  {:<{}}", r.outcomes[c * r.paths.size() + p].pass ? "ok" : "FAIL",
                          std::max<std::size_t>(r.paths[p].size(), 4));
    out += rtrim(line) + "\n";
  }
  if (!r.scheme_outcomes.empty()) {
    // One line per scheme: "MXFP4A16     30/30 case runs byte-exact to compressed-tensors (5 path(s): ...)".
    struct Tally {
      std::string scheme;
      std::size_t pass = 0, total = 0;
      std::vector<std::string> paths;  // in the order they ran
    };
    std::vector<Tally> per;
    for (const auto& o : r.scheme_outcomes) {
      const std::string s = o.case_name.substr(0, o.case_name.find('/'));
      if (per.empty() || per.back().scheme != s) per.push_back({s, 0, 0, {}});
      per.back().pass += o.pass;
      ++per.back().total;
      if (std::find(per.back().paths.begin(), per.back().paths.end(), o.path) == per.back().paths.end())
        per.back().paths.push_back(o.path);
    }
    for (const auto& t : per)
      out += fmt::format("{:<12} {}/{} case runs byte-exact to compressed-tensors ({} path(s): {}; refused shapes "
                         "refused)\n",
                         t.scheme, t.pass, t.total, t.paths.size(), fmt::join(t.paths, ", "));
  }
  const std::size_t runs = r.outcomes.size() + r.scheme_outcomes.size();
  if (r.ok()) return out + fmt::format("PASS: all {} runs byte-exact\n", runs);
  out += fmt::format("FAIL: {} of {} runs differ from the golden bytes\n", r.failures + r.scheme_failures, runs);
  for (const auto* v : {&r.outcomes, &r.scheme_outcomes})
    for (const auto& o : *v)
      if (!o.pass) out += fmt::format("  {} on {}: {}\n", o.case_name, o.path, o.detail);
  return out;
}

int exit_code(const GoldenReport& r) { return r.ok() ? 0 : 1; }

}  // namespace fp4forge::nvfp4
