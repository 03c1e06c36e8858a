// Encode throughput of MXFP4A16, FP8_DYNAMIC, FP8_BLOCK and W4A16: MB/s of BF16 source bytes per core
// (CPU time of a single thread) for the whole encode of one weight (max pass + scales + codes + packing)
// on each path (the scalar reference and every Highway target), next to a single-threaded memcpy of the
// same bytes in the same binary; then the thread scaling of the best path (rows split in contiguous
// ranges of 128-row strips, on a pool of threads started before the timing; wall clock). The scalar references are literal transcriptions
// (FP8 rounds by an arg-min over all 127 codes), so they are timed on the first 256 rows only.
//
// Environment: FP4FORGE_BENCH_SHAPES="NxK,..." (default 4096x4096), FP4FORGE_BENCH_DTYPES="bf16,f16,f32"
// (default bf16), FP4FORGE_BENCH_SCALAR=0 skips the scalar paths, FP4FORGE_BENCH_THREADS="1,2,..."
// (default: powers of two up to the hardware threads, and that count).
#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>

#include "fp4forge/codec/fp8.h"
#include "fp4forge/codec/half.h"
#include "fp4forge/codec/mxfp4.h"
#include "fp4forge/codec/scheme.h"
#include "fp4forge/codec/w4a16.h"

namespace {

using fp4forge::DType;
using fp4forge::QuantScheme;
using fp4forge::Status;
namespace nvfp4 = fp4forge::nvfp4;

constexpr std::uint64_t kScalarRows = 256;

struct Shape {
  std::uint64_t rows, cols;
  DType dt;
  std::string text() const {
    return std::to_string(rows) + "x" + std::to_string(cols) + "_" +
           (dt == DType::BF16 ? "bf16" : dt == DType::F16 ? "f16" : "f32");
  }
  std::uint64_t bytes() const { return rows * cols * (dt == DType::F32 ? 4 : 2); }
};

// N(0, 0.02) weights with a few outliers, generated once per shape.
const std::vector<std::byte>& source(const Shape& s) {
  static std::vector<std::pair<std::string, std::vector<std::byte>>> cache;
  for (const auto& [k, v] : cache)
    if (k == s.text()) return v;
  std::vector<std::byte> b(s.bytes());
  std::mt19937_64 rng(42);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  for (std::uint64_t i = 0; i < s.rows * s.cols; ++i) {
    const float v = i % 100003 == 0 ? 0.75f : nd(rng);
    if (s.dt == DType::F32) {
      std::memcpy(b.data() + 4 * i, &v, 4);
    } else {
      const std::uint16_t h = s.dt == DType::BF16 ? fp4forge::half::float_to_bf16(v) : fp4forge::half::float_to_f16(v);
      std::memcpy(b.data() + 2 * i, &h, 2);
    }
  }
  cache.emplace_back(s.text(), std::move(b));
  return cache.back().second;
}

// The outputs of one scheme for `rows` rows, and the row-range encode on a path ("" = best).
struct Outputs {
  std::vector<std::byte> codes, scales;
};

Outputs outputs(QuantScheme q, std::uint64_t rows, std::uint64_t cols, DType dt) {
  switch (q) {
    case QuantScheme::MXFP4A16:
      return {std::vector<std::byte>(fp4forge::mxfp4::packed_bytes(rows, cols)),
              std::vector<std::byte>(fp4forge::mxfp4::scale_bytes(rows, cols))};
    case QuantScheme::FP8_DYNAMIC:
      return {std::vector<std::byte>(rows * cols), std::vector<std::byte>(fp4forge::fp8::channel_scale_bytes(rows, dt))};
    case QuantScheme::FP8_BLOCK:
      return {std::vector<std::byte>(rows * cols),
              std::vector<std::byte>(fp4forge::fp8::block_scale_bytes(rows, cols, dt))};
    default:
      return {std::vector<std::byte>(fp4forge::w4a16::packed_bytes(rows, cols)),
              std::vector<std::byte>(fp4forge::w4a16::scale_bytes(rows, cols, dt))};
  }
}

// Encodes rows [r0, r1) into o (offsets of row r0 applied here).
Status encode(QuantScheme q, const std::string& path, const nvfp4::WeightView& w, std::uint64_t r0, std::uint64_t r1,
              Outputs& o) {
  const std::uint64_t k = w.cols, esz = w.dtype == DType::F32 ? 4 : 2;
  switch (q) {
    case QuantScheme::MXFP4A16:
      return fp4forge::mxfp4::encode_rows_with(path, w, r0, r1, o.codes.data() + r0 * k / 2,
                                               o.scales.data() + r0 * (k / 32), "bench");
    case QuantScheme::FP8_DYNAMIC:
      return fp4forge::fp8::encode_channel_rows_with(path, w, r0, r1, o.codes.data() + r0 * k,
                                                     o.scales.data() + r0 * esz, "bench");
    case QuantScheme::FP8_BLOCK:
      return fp4forge::fp8::encode_block_rows_with(path, w, r0, r1, o.codes.data() + r0 * k,
                                                   o.scales.data() + r0 / 128 * fp4forge::fp8::block_scale_cols(k) * esz,
                                                   "bench");
    default:
      return fp4forge::w4a16::encode_rows_with(path, w, r0, r1, o.codes.data() + r0 * k / 2,
                                               o.scales.data() + r0 * (k / 128) * esz, "bench");
  }
}

void report_rate(benchmark::State& state, std::uint64_t bytes, const std::string& label) {
  state.counters["bytes_per_second"] = benchmark::Counter(
      static_cast<double>(bytes) * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.SetLabel(label);
}

void BM_Memcpy(benchmark::State& state, Shape s) {
  const auto& src = source(s);
  std::vector<std::byte> dst(src.size());
  std::memset(dst.data(), 1, dst.size());
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), src.size());
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  report_rate(state, src.size(), "memcpy");
}

void BM_Encode(benchmark::State& state, QuantScheme q, Shape s, std::string path) {
  const auto& src = source(s);
  const std::uint64_t rows = path == "scalar" ? std::min(s.rows, kScalarRows) : s.rows;
  const nvfp4::WeightView w{src.data(), s.dt, rows, s.cols};
  Outputs o = outputs(q, rows, s.cols, s.dt);
  if (!encode(q, path, w, 0, rows, o).ok()) {  // untimed: first touch of the outputs, per-thread tables
    state.SkipWithError("encode failed");
    return;
  }
  for (auto _ : state) {
    const Status st = encode(q, path, w, 0, rows, o);
    if (!st.ok()) {
      state.SkipWithError(st.error().message.c_str());
      return;
    }
    benchmark::DoNotOptimize(o.codes.data());
    benchmark::ClobberMemory();
  }
  report_rate(state, w.rows * w.cols * (s.dt == DType::F32 ? 4 : 2), path);
}

// A fixed set of worker threads that run one job each per round (so a round costs no thread start-up,
// as in the quantize runner's pool).
class Pool {
 public:
  explicit Pool(std::size_t n) {
    for (std::size_t i = 0; i < n; ++i)
      threads_.emplace_back([this, i] {
        std::uint64_t seen = 0;
        for (;;) {
          std::unique_lock<std::mutex> lk(m_);
          cv_.wait(lk, [&] { return stop_ || round_ != seen; });
          if (stop_) return;
          seen = round_;
          lk.unlock();
          job_(i);
          lk.lock();
          if (--pending_ == 0) done_.notify_one();
        }
      });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lk(m_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  // Runs job(i) on worker i for every worker and waits for all of them.
  void run(std::function<void(std::size_t)> job) {
    std::unique_lock<std::mutex> lk(m_);
    job_ = std::move(job);
    pending_ = threads_.size();
    ++round_;
    cv_.notify_all();
    done_.wait(lk, [&] { return pending_ == 0; });
  }

 private:
  std::vector<std::thread> threads_;
  std::mutex m_;
  std::condition_variable cv_, done_;
  std::function<void(std::size_t)> job_;
  std::uint64_t round_ = 0;
  std::size_t pending_ = 0;
  bool stop_ = false;
};

// Rows split into one contiguous range per thread (128-row strips for every scheme, so FP8_BLOCK's
// boundaries hold), each thread encoding its range on the best path, on a pool started before the
// timing. Wall clock.
void BM_EncodeThreads(benchmark::State& state, QuantScheme q, Shape s) {
  const auto& src = source(s);
  const auto threads = static_cast<std::uint64_t>(state.range(0));
  const nvfp4::WeightView w{src.data(), s.dt, s.rows, s.cols};
  Outputs o = outputs(q, s.rows, s.cols, s.dt);
  const std::uint64_t strips = (s.rows + 127) / 128;
  std::vector<int> ok(threads);
  Pool pool(threads);
  const auto job = [&](std::size_t t) {
    const std::uint64_t r0 = std::min(s.rows, strips * t / threads * 128);
    const std::uint64_t r1 = std::min(s.rows, strips * (t + 1) / threads * 128);
    ok[t] = encode(q, "", w, r0, r1, o).ok();
  };
  pool.run(job);  // first touch of the outputs, per-thread tables
  for (auto _ : state) {
    pool.run(job);
    benchmark::DoNotOptimize(o.codes.data());
    benchmark::ClobberMemory();
  }
  if (std::count(ok.begin(), ok.end(), 1) != static_cast<long>(threads)) state.SkipWithError("an encode failed");
  const std::vector<std::string> paths = fp4forge::encode_paths(q);  // "scalar", then the best target
  report_rate(state, src.size(), (paths.size() > 1 ? paths[1] : paths[0]) + " x" + std::to_string(threads));
}

std::vector<std::string> split(const char* env, const std::string& def) {
  std::string text = env != nullptr ? env : def;
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<Shape> shapes;
  for (const std::string& dts : split(std::getenv("FP4FORGE_BENCH_DTYPES"), "bf16")) {
    const DType dt = dts == "f32" ? DType::F32 : dts == "f16" ? DType::F16 : DType::BF16;
    for (const std::string& sh : split(std::getenv("FP4FORGE_BENCH_SHAPES"), "4096x4096")) {
      const auto x = sh.find('x');
      shapes.push_back({std::stoull(sh.substr(0, x)), std::stoull(sh.substr(x + 1)), dt});
    }
  }
  const bool scalar = std::getenv("FP4FORGE_BENCH_SCALAR") == nullptr ||
                      std::string(std::getenv("FP4FORGE_BENCH_SCALAR")) != "0";
  std::vector<long> threads;
  for (const std::string& t : split(std::getenv("FP4FORGE_BENCH_THREADS"), "")) threads.push_back(std::stol(t));
  if (threads.empty()) {
    const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
    for (unsigned t = 1; t <= hw; t *= 2) threads.push_back(t);
    if (hw & (hw - 1)) threads.push_back(hw);
  }
  const QuantScheme schemes[] = {QuantScheme::MXFP4A16, QuantScheme::FP8_DYNAMIC, QuantScheme::FP8_BLOCK,
                                 QuantScheme::W4A16};
  for (const Shape& s : shapes) {
    benchmark::RegisterBenchmark(("BM_Memcpy/" + s.text()).c_str(), [s](benchmark::State& st) { BM_Memcpy(st, s); })
        ->Unit(benchmark::kMillisecond);
    for (QuantScheme q : schemes) {
      const std::string pre(fp4forge::quant_scheme_preset(q));
      for (const std::string& p : fp4forge::encode_paths(q)) {
        if (p == "scalar" && !scalar) continue;
        benchmark::RegisterBenchmark(("BM_Encode/" + pre + "/" + s.text() + "/" + p).c_str(),
                                     [q, s, p](benchmark::State& st) { BM_Encode(st, q, s, p); })
            ->Unit(benchmark::kMillisecond);
      }
      auto* b = benchmark::RegisterBenchmark(("BM_EncodeThreads/" + pre + "/" + s.text()).c_str(),
                                             [q, s](benchmark::State& st) { BM_EncodeThreads(st, q, s); })
                    ->Unit(benchmark::kMillisecond)
                    ->UseRealTime();
      for (long t : threads) b->Arg(t);
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
