// The NVFP4A16 searched observers (codec/nvfp4_search.h): million source elements per second per core (CPU
// time of one thread) of the search of one weight on each path (the scalar reference, the table path and
// every Highway target), beside the min-max encode of the same weight in the same binary (nvfp4 encode,
// best path); then the thread scaling of the best path over row ranges (parallel_for on a pool started
// before the timing; wall clock). The reference and table paths are timed on the first 64 rows.
//
// Environment: FP4FORGE_BENCH_SHAPES="NxK,..." (default 4096x4096), FP4FORGE_BENCH_OBSERVER=mse|memoryless-mse
// (default mse), FP4FORGE_BENCH_THREADS="1,2,..." (default: powers of two up to the hardware threads).
#include <algorithm>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>

#include "fp4forge/codec/half.h"
#include "fp4forge/codec/nvfp4.h"
#include "fp4forge/codec/scheme_search.h"
#include "fp4forge/codec/nvfp4_search.h"
#include "fp4forge/codec/observer.h"
#include "fp4forge/util/thread_pool.h"

namespace {

using fp4forge::DType;
namespace nvfp4 = fp4forge::nvfp4;

constexpr std::uint64_t kSlowRows = 64;

struct Shape {
  std::uint64_t rows, cols;
};

std::vector<Shape> shapes() {
  std::vector<Shape> out;
  const char* env = std::getenv("FP4FORGE_BENCH_SHAPES");
  std::stringstream ss(env ? env : "4096x4096");
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto x = item.find('x');
    if (x == std::string::npos) continue;
    out.push_back({std::stoull(item.substr(0, x)), std::stoull(item.substr(x + 1))});
  }
  return out;
}

fp4forge::SearchSpec spec() {
  const char* env = std::getenv("FP4FORGE_BENCH_OBSERVER");
  auto o = fp4forge::parse_observer(env ? env : "mse");
  return *fp4forge::search_spec(o.ok() ? *o : fp4forge::Observer::NVFP4_EXPANDED_MSE);
}

// BF16 N(0, 0.02) with rare outliers, once per shape.
const std::vector<std::uint16_t>& source(const Shape& s) {
  static std::vector<std::pair<std::uint64_t, std::vector<std::uint16_t>>> cache;
  const std::uint64_t key = s.rows * 1000003 + s.cols;
  for (const auto& [k, v] : cache)
    if (k == key) return v;
  std::vector<std::uint16_t> b(s.rows * s.cols);
  std::mt19937_64 rng(42);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  for (std::uint64_t i = 0; i < b.size(); ++i) b[i] = fp4forge::half::float_to_bf16(i % 100003 == 0 ? 0.75f : nd(rng));
  cache.emplace_back(key, std::move(b));
  return cache.back().second;
}

nvfp4::WeightView view(const Shape& s, std::uint64_t rows) {
  return {reinterpret_cast<const std::byte*>(source(s).data()), DType::BF16, rows, s.cols};
}

// `unpruned`: the caller needs the step mask (patience = the step count, which cannot stop a search whose first
// step always improves: the same maxima), so every step of every group runs in full: the kernel before pruning.
void search_path(benchmark::State& st, Shape s, std::string path, bool unpruned) {
  const bool slow = path == "scalar" || path == "table";
  const std::uint64_t rows = slow ? std::min(s.rows, kSlowRows) : s.rows;
  const auto w = view(s, rows);
  auto sp = spec();
  if (unpruned) sp.patience = sp.total_steps();
  std::vector<float> out(rows * s.cols / 16);
  fp4forge::StepMask mask;
  for (auto _ : st) {
    auto r = nvfp4::search_rows(w, sp, sp.total_steps(), 0, rows, out.data(), unpruned ? &mask : nullptr, "bench", path);
    if (!r) st.SkipWithError(r.error().message.c_str());
    benchmark::DoNotOptimize(out.data());
  }
  st.counters["Melem_per_s"] = benchmark::Counter(static_cast<double>(rows * s.cols) * static_cast<double>(st.iterations()) / 1e6,
                                                  benchmark::Counter::kIsRate);
}

void minmax_encode(benchmark::State& st, Shape s) {
  const auto w = view(s, s.rows);
  std::vector<std::byte> packed(s.rows * s.cols / 2), scale(s.rows * s.cols / 16);
  for (auto _ : st) {
    auto a = nvfp4::amax(w, "bench");
    auto r = nvfp4::encode_rows(w, nvfp4::global_scale(*a, DType::BF16), 0, s.rows, packed.data(), scale.data(), "bench");
    if (!r) st.SkipWithError(r.error().message.c_str());
    benchmark::DoNotOptimize(packed.data());
  }
  st.counters["Melem_per_s"] = benchmark::Counter(static_cast<double>(s.rows * s.cols) * static_cast<double>(st.iterations()) / 1e6,
                                                  benchmark::Counter::kIsRate);
}

void search_threads(benchmark::State& st, Shape s, unsigned threads, bool unpruned) {
  fp4forge::ThreadPool pool(threads);
  const auto w = view(s, s.rows);
  auto sp = spec();
  if (unpruned) sp.patience = sp.total_steps();  // as in search_path
  for (auto _ : st) {
    auto r = fp4forge::searched_group_maxima(fp4forge::QuantScheme::NVFP4A16, w, sp, "bench", &pool);
    if (!r) st.SkipWithError(r.error().message.c_str());
    benchmark::DoNotOptimize(r->data());
  }
  st.counters["Melem_per_s"] = benchmark::Counter(static_cast<double>(s.rows * s.cols) * static_cast<double>(st.iterations()) / 1e6,
                                                  benchmark::Counter::kIsRate);
}

std::vector<unsigned> thread_counts() {
  std::vector<unsigned> out;
  if (const char* env = std::getenv("FP4FORGE_BENCH_THREADS")) {
    std::stringstream ss(env);
    std::string item;
    while (std::getline(ss, item, ',')) out.push_back(static_cast<unsigned>(std::stoul(item)));
    return out;
  }
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned t = 1; t < hw; t *= 2) out.push_back(t);
  out.push_back(hw);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  for (const Shape& s : shapes()) {
    const std::string tag = std::to_string(s.rows) + "x" + std::to_string(s.cols) + "_bf16";
    for (const auto& p : nvfp4::search_paths())
      benchmark::RegisterBenchmark(("search/" + tag + "/" + p).c_str(), search_path, s, p, false)->MinTime(0.2)->UseRealTime()->Unit(benchmark::kMillisecond);
    for (const auto& p : nvfp4::search_paths())
      if (p != "scalar" && p != "table")
        benchmark::RegisterBenchmark(("search_unpruned/" + tag + "/" + p).c_str(), search_path, s, p, true)->MinTime(0.2)->UseRealTime()->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("minmax_encode/" + tag).c_str(), minmax_encode, s)->MinTime(0.2)->Unit(benchmark::kMillisecond);
    for (unsigned t : thread_counts())
      for (const bool unpruned : {false, true})
        benchmark::RegisterBenchmark(((unpruned ? "search_threads_unpruned/" : "search_threads/") + tag + "/" + std::to_string(t)).c_str(),
                                     search_threads, s, t, unpruned)
            ->MinTime(0.2)->UseRealTime()->Unit(benchmark::kMillisecond);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
