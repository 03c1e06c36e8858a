// NVFP4 encode throughput: GB/s of BF16 source bytes per core for the whole encode (amax pass +
// scales + codes + packing) of an 8192x8192 tensor, for each codec path, next to a per-core memcpy of
// the same bytes measured in the same binary. BM_Memcpy and BM_Encode are single-threaded, so their
// CPU-time rates are per core; BM_EncodeThreads/T shows thread scaling of the best path (wall clock).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>

#include "fp4forge/codec/half.h"
#include "fp4forge/codec/nvfp4.h"

namespace {

using fp4forge::DType;
namespace nvfp4 = fp4forge::nvfp4;

constexpr std::uint64_t kRows = 8192, kCols = 8192;

// N(0, 0.02)-like BF16 weights with a few outliers, generated once.
const std::vector<std::byte>& source() {
  static const std::vector<std::byte> data = [] {
    std::vector<std::uint16_t> v(kRows * kCols);
    std::mt19937_64 rng(42);
    std::normal_distribution<float> nd(0.0f, 0.02f);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = fp4forge::half::float_to_bf16(nd(rng));
    for (std::size_t i = 0; i < v.size(); i += 100003) v[i] = fp4forge::half::float_to_bf16(0.75f);
    std::vector<std::byte> b(v.size() * 2);
    std::memcpy(b.data(), v.data(), b.size());
    return b;
  }();
  return data;
}

// Source bytes per iteration as the "bytes_per_second" counter (what scripts/bench.sh reads), and the
// path name as the label.
void report_rate(benchmark::State& state, std::uint64_t bytes, const std::string& label) {
  state.counters["bytes_per_second"] = benchmark::Counter(
      static_cast<double>(bytes) * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.SetLabel(label);
}

void BM_Encode(benchmark::State& state, const std::string& path) {
  const auto& src = source();
  const nvfp4::WeightView w{src.data(), DType::BF16, kRows, kCols};
  std::vector<std::byte> packed(kRows * kCols / 2), scale(kRows * kCols / 16);
  for (auto _ : state) {
    auto a = nvfp4::amax_rows_with(path, w, 0, kRows, "bench");
    if (!a.ok()) {
      state.SkipWithError(a.error().message.c_str());
      return;
    }
    const float gs = nvfp4::global_scale(*a, DType::BF16);
    auto st = nvfp4::encode_rows_with(path, w, gs, 0, kRows, packed.data(), scale.data(), "bench");
    if (!st.ok()) {
      state.SkipWithError(st.error().message.c_str());
      return;
    }
    benchmark::DoNotOptimize(packed.data());
    benchmark::DoNotOptimize(scale.data());
    benchmark::ClobberMemory();
  }
  report_rate(state, src.size(), path);
}

// Parts of the encode, for profiling: the amax pass alone, and the encode pass alone over `rows`
// rows (rows = 8192: the whole tensor from DRAM; a few rows: cache-resident, pure compute).
void BM_AmaxOnly(benchmark::State& state, const std::string& path) {
  const auto& src = source();
  const nvfp4::WeightView w{src.data(), DType::BF16, kRows, kCols};
  for (auto _ : state) {
    auto a = nvfp4::amax_rows_with(path, w, 0, kRows, "bench");
    benchmark::DoNotOptimize(a);
  }
  report_rate(state, src.size(), path);
}

void BM_EncodeOnly(benchmark::State& state, const std::string& path) {
  const auto& src = source();
  const auto rows = static_cast<std::uint64_t>(state.range(0));
  const nvfp4::WeightView w{src.data(), DType::BF16, rows, kCols};
  std::vector<std::byte> packed(rows * kCols / 2), scale(rows * kCols / 16);
  const float gs = nvfp4::global_scale(*nvfp4::amax_rows(w, 0, rows, "bench"), DType::BF16);
  for (auto _ : state) {
    auto st = nvfp4::encode_rows_with(path, w, gs, 0, rows, packed.data(), scale.data(), "bench");
    benchmark::DoNotOptimize(st);
    benchmark::ClobberMemory();
  }
  report_rate(state, rows * kCols * 2, path);
}

void BM_Memcpy(benchmark::State& state) {
  const auto& src = source();
  std::vector<std::byte> dst(src.size());
  std::memset(dst.data(), 1, dst.size());  // fault the pages in before timing
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), src.size());
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  report_rate(state, src.size(), "memcpy");
}

// Thread scaling (best path): rows split into one contiguous range per thread, amax ranges in
// parallel, then the encode ranges in parallel (what quantize does). Wall-clock GB/s.
void BM_EncodeThreads(benchmark::State& state) {
  const auto& src = source();
  const auto threads = static_cast<std::uint64_t>(state.range(0));
  const nvfp4::WeightView w{src.data(), DType::BF16, kRows, kCols};
  std::vector<std::byte> packed(kRows * kCols / 2), scale(kRows * kCols / 16);
  std::vector<float> amax(threads);
  std::vector<int> ok(threads);
  const auto run = [&](auto&& fn) {
    std::vector<std::thread> pool;
    for (std::uint64_t t = 0; t < threads; ++t)
      pool.emplace_back([&, t] { fn(t, kRows * t / threads, kRows * (t + 1) / threads); });
    for (auto& th : pool) th.join();
  };
  for (auto _ : state) {
    run([&](std::uint64_t t, std::uint64_t r0, std::uint64_t r1) {
      auto a = nvfp4::amax_rows(w, r0, r1, "bench");
      amax[t] = a.ok() ? *a : 0.0f;
    });
    const float gs = nvfp4::global_scale(*std::max_element(amax.begin(), amax.end()), DType::BF16);
    run([&](std::uint64_t t, std::uint64_t r0, std::uint64_t r1) {
      ok[t] = nvfp4::encode_rows(w, gs, r0, r1, packed.data() + r0 * kCols / 2, scale.data() + r0 * kCols / 16,
                                 "bench").ok();
    });
    benchmark::DoNotOptimize(packed.data());
    benchmark::ClobberMemory();
  }
  report_rate(state, src.size(), nvfp4::best_path() + " x" + std::to_string(threads));
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::RegisterBenchmark("BM_Memcpy/8192x8192_bf16", BM_Memcpy)->Unit(benchmark::kMillisecond);
  for (const std::string& p : nvfp4::available_paths()) {
    // The literal scalar reference (arg-min E4M3 rounding) is a correctness oracle, not a fast path.
    benchmark::RegisterBenchmark(("BM_Encode/8192x8192_bf16/" + p).c_str(),
                                 [p](benchmark::State& s) { BM_Encode(s, p); })
        ->Unit(benchmark::kMillisecond);
  }
  if (std::getenv("FP4FORGE_BENCH_PARTS") != nullptr) {
    for (const std::string& p : nvfp4::available_paths()) {
      if (p == "scalar") continue;
      benchmark::RegisterBenchmark(("BM_AmaxOnly/8192x8192_bf16/" + p).c_str(),
                                   [p](benchmark::State& s) { BM_AmaxOnly(s, p); })
          ->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark(("BM_EncodeOnly/bf16/" + p).c_str(),
                                   [p](benchmark::State& s) { BM_EncodeOnly(s, p); })
          ->Unit(benchmark::kMillisecond)
          ->Arg(8192)
          ->Arg(16);
    }
  }
  auto* scaling = benchmark::RegisterBenchmark("BM_EncodeThreads/8192x8192_bf16", BM_EncodeThreads)
                      ->Unit(benchmark::kMillisecond)
                      ->UseRealTime();
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned t = 1; t <= hw; t *= 2) scaling->Arg(t);
  if (hw & (hw - 1)) scaling->Arg(hw);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
