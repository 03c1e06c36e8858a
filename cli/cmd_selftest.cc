// fp4forge selftest [--golden FILE] [--path NAME]... [--json]: golden NVFP4A16 vectors through every
// codec path this CPU runs (library: codec/golden.h). Exit 0 all byte-exact, 1 a mismatch, 3 a
// malformed golden file, 2 an unknown --path.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "commands.h"
#include "fp4forge/codec/golden.h"
#include "fp4forge/codec/nvfp4.h"
#include "render.h"

namespace fp4forge::cli {

namespace {
struct SelftestOpts {
  std::string golden;
  std::vector<std::string> paths;
  bool json = false;
};

nlohmann::ordered_json report_json(const nvfp4::GoldenSet& set, const nvfp4::GoldenReport& r) {
  nlohmann::ordered_json j;
  j["ok"] = r.ok();
  j["source"] = r.source;
  j["best_path"] = nvfp4::best_path();
  j["paths"] = r.paths;
  j["runs"] = r.outcomes.size();
  j["failures"] = r.failures;
  auto cases = nlohmann::ordered_json::array();
  for (std::size_t c = 0; c < set.cases.size(); ++c) {
    nlohmann::ordered_json jc;
    jc["name"] = set.cases[c].name;
    jc["dtype"] = std::string(dtype_name(set.cases[c].dtype));
    jc["members"] = set.cases[c].members.size();
    auto results = nlohmann::ordered_json::array();
    for (std::size_t p = 0; p < r.paths.size(); ++p) {
      const auto& o = r.outcomes[c * r.paths.size() + p];
      results.push_back({{"path", o.path}, {"pass", o.pass}, {"detail", o.detail}});
    }
    jc["results"] = std::move(results);
    cases.push_back(std::move(jc));
  }
  j["cases"] = std::move(cases);
  return j;
}

std::string rtrim(std::string s) {
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

void print_table(const nvfp4::GoldenSet& set, const nvfp4::GoldenReport& r) {
  fmt::print("fp4forge selftest: {} golden cases ({}) x {} codec paths; this CPU dispatches to {}\n",
             set.cases.size(), r.source, r.paths.size(), nvfp4::best_path());
  std::size_t w = 4;
  for (const auto& c : set.cases) w = std::max(w, c.name.size());
  std::string line = fmt::format("{:<{}}  {:<5}", "case", w, "dtype");
  for (const auto& p : r.paths) line += fmt::format("  {:<{}}", p, std::max<std::size_t>(p.size(), 4));
  fmt::print("{}\n", rtrim(line));
  for (std::size_t c = 0; c < set.cases.size(); ++c) {
    line = fmt::format("{:<{}}  {:<5}", set.cases[c].name, w, dtype_name(set.cases[c].dtype));
    for (std::size_t p = 0; p < r.paths.size(); ++p)
      line += fmt::format("  {:<{}}", r.outcomes[c * r.paths.size() + p].pass ? "ok" : "FAIL",
                          std::max<std::size_t>(r.paths[p].size(), 4));
    fmt::print("{}\n", rtrim(line));
  }
  if (r.ok()) {
    fmt::print("PASS: all {} runs byte-exact (weight_packed, weight_scale, weight_global_scale)\n",
               r.outcomes.size());
    return;
  }
  fmt::print("FAIL: {} of {} runs differ from the golden bytes\n", r.failures, r.outcomes.size());
  for (const auto& o : r.outcomes)
    if (!o.pass) fmt::print("  {} on {}: {}\n", o.case_name, o.path, o.detail);
}

int run_selftest(const SelftestOpts& o) {
  auto set = o.golden.empty() ? nvfp4::builtin_golden() : nvfp4::load_golden(o.golden);
  if (!set) return report_error(set.error(), o.json);
  const std::vector<std::string> available = nvfp4::available_paths();
  std::vector<std::string> paths = o.paths.empty() ? available : o.paths;
  for (const auto& p : paths) {
    if (std::find(available.begin(), available.end(), p) == available.end())
      return report_error(make_error(Errc::USAGE, "--path '{}' is not a codec path on this CPU/build; expected one of: {}",
                                     p, fmt::join(available, ", ")),
                          o.json);
  }
  const nvfp4::GoldenReport r = nvfp4::run_golden(*set, paths);
  if (o.json) {
    print_json(report_json(*set, r));
  } else {
    print_table(*set, r);
    std::fflush(stdout);
  }
  return r.ok() ? 0 : 1;
}
}  // namespace

void add_selftest(CLI::App& sub, Action& action) {
  auto opts = std::make_shared<SelftestOpts>();
  sub.add_option("--golden", opts->golden,
                 "golden-vector JSON file (schema: docs/cli/selftest.md); default: the vectors built into "
                 "this binary");
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
