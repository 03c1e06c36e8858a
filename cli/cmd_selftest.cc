// fp4forge selftest [--golden FILE]... [--path NAME]... [--json]: the golden vectors of
// every scheme (NVFP4A16: codec/golden.h; the others: codec/scheme_golden.h) and of NVFP4A16's searched
// observers through every codec path this CPU runs, and the FP8-source expansion on each of its paths. Exit 0
// all byte-exact, 1 a mismatch, 3 a malformed golden file, 2 an unknown --path.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.h"
#include "fp4forge/codec/fp8_dequant.h"
#include "fp4forge/codec/golden.h"
#include "fp4forge/codec/nvfp4.h"
#include "fp4forge/codec/nvfp4_search.h"
#include "fp4forge/codec/scheme_golden.h"
#include "render.h"

namespace fp4forge::cli {

namespace {
struct SelftestOpts {
  std::vector<std::string> golden;         ///< --golden: files of any scheme
  std::vector<std::string> scheme_golden;  ///< --scheme-golden: its older name, the same files (read after them)
  std::vector<std::string> paths;
  bool json = false;
};

int run_selftest(const SelftestOpts& o) {
  // Every file through the one loader, keyed by the scheme it holds. NVFP4A16's built-in vectors run unless a file of
  // NVFP4A16 is given; the other schemes' built-in vectors and the observers' only when no file is.
  nvfp4::GoldenSet nv{"", {}};
  std::vector<SchemeGoldenSet> schemes;
  std::vector<std::string> files = o.golden;
  files.insert(files.end(), o.scheme_golden.begin(), o.scheme_golden.end());
  for (const auto& f : files) {
    auto v = load_golden_vectors(f);
    if (!v) return report_error(v.error(), o.json);
    if (v->other) {
      schemes.push_back(std::move(*v->other));
      continue;
    }
    nv.source += (nv.source.empty() ? "" : ", ") + v->nvfp4->source;
    for (auto& c : v->nvfp4->cases) nv.cases.push_back(std::move(c));
  }
  if (nv.source.empty()) {
    auto b = nvfp4::builtin_golden();
    if (!b) return report_error(b.error(), o.json);
    nv = std::move(*b);
  }
  const std::vector<std::string> available = nvfp4::available_paths();
  std::vector<std::string> paths = o.paths.empty() ? available : o.paths;
  for (const auto& p : paths) {
    if (std::find(available.begin(), available.end(), p) == available.end())
      return report_error(make_error(Errc::USAGE, "--path '{}' is not a codec path on this CPU/build; expected one of: {}",
                                     p, fmt::join(available, ", ")),
                          o.json);
  }
  nvfp4::GoldenReport r = nvfp4::run_golden(nv, paths);
  if (files.empty()) {
    auto b = builtin_scheme_golden();
    if (!b) return report_error(b.error(), o.json);
    schemes = std::move(*b);
  }
  run_scheme_golden(schemes, r, paths);  // every scheme through the same codec paths
  // The searched observers (NVFP4A16): the built-in vectors on every search path.
  if (files.empty()) {
    auto obs = nvfp4::builtin_observer_golden();
    if (!obs) return report_error(obs.error(), o.json);
    nvfp4::run_observer_golden(*obs, r);
  }
  // The FP8-source expansion loops (codec/fp8_dequant.h): their own paths, checked against the formula.
  const std::vector<fp8::DequantCheck> fp8 = fp8::dequant_selfcheck();
  bool fp8_ok = true;
  for (const auto& c : fp8) fp8_ok = fp8_ok && c.mismatches == 0;
  if (o.json) {
    auto j = nvfp4::to_json(r);
    nlohmann::ordered_json a = nlohmann::ordered_json::array();
    for (const auto& c : fp8)
      a.push_back({{"path", c.path}, {"elements", c.elements}, {"mismatches", c.mismatches},
                   {"first", c.first.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(c.first)}});
    j["fp8_expansion"] = std::move(a);
    if (!fp8_ok) j["ok"] = false;
    print_json(with_schema(j, "selftest"));
  } else {
    print_report(nvfp4::to_text(r));
    std::vector<std::string> names;
    std::uint64_t elements = 0, bad = 0;
    for (const auto& c : fp8) {
      names.push_back(c.path);
      elements += c.elements;
      bad += c.mismatches;
    }
    fmt::print("FP8 source expansion: {}/{} elements equal to the formula of docs/fp8-sources.md ({} path(s): {})\n",
               elements - bad, elements, fp8.size(), fmt::join(names, ", "));
    for (const auto& c : fp8)
      if (c.mismatches) fmt::print("FAIL fp8 expansion on {}: {} mismatch(es), first: {}\n", c.path, c.mismatches, c.first);
    std::fflush(stdout);
  }
  return fp8_ok ? nvfp4::exit_code(r) : 1;
}
}  // namespace

void add_selftest(CLI::App& sub, Action& action) {
  auto opts = std::make_shared<SelftestOpts>();
  sub.add_option("--golden", opts->golden,
                 "golden-vector JSON file of any scheme, repeatable: NVFP4A16's schema or a scheme file "
                 "(\"scheme\": PRESET; docs/cli/selftest.md), read by one loader keyed by its scheme; default: the "
                 "vectors built into this binary (NVFP4A16's always run unless a file of it is given)");
  sub.add_option("--scheme-golden", opts->scheme_golden, "the same as --golden (its older name), repeatable");
  sub.add_option("--path", opts->paths,
                 "run only this codec path (repeatable): scalar, or a Highway target such as AVX3_DL, "
                 "AVX2, SSE4");
  sub.add_flag("--json", opts->json, "print the report as JSON (schema: docs/cli/selftest.md)");
  sub.footer(
      "Examples:\n"
      "  fp4forge selftest\n"
      "  fp4forge selftest --golden src/codec/nvfp4a16_golden.json --json | jq .failures\n"
      "  fp4forge selftest --path scalar --path AVX2");
  sub.callback([&action, opts] { action = [opts] { return run_selftest(*opts); }; });
}

}  // namespace fp4forge::cli
