// FP8 source expansion (codec/fp8_dequant.h): MB/s of FP8 source bytes per core (CPU time of one thread)
// to expand one 4096x4096 F8_E4M3 weight to bf16, per scale layout (128x128 F32 blocks as DeepSeek-V3 and
// Qwen3-FP8 store them, BF16 channel scales as compressed-tensors FP8_DYNAMIC, one F32 tensor scale as
// ModelOpt), next to a single-threaded memcpy of the expanded bytes; and the whole FP8 -> NVFP4A16 path of
// a row range (expand + encode on the best codec path), as quantize runs it per task. Packed E2M1 (DeepSeek-V4's
// FP4 experts, one E8M0 scale per 32) beside the per-element form it replaced (dequant_e2m1_bf16 per nibble).
#include <cstring>
#include <random>
#include <vector>

#include <benchmark/benchmark.h>

#include "fp4forge/codec/fp8_dequant.h"
#include "fp4forge/codec/half.h"
#include "fp4forge/codec/nvfp4.h"

namespace {

using fp4forge::DType;
namespace fp8 = fp4forge::fp8;
namespace nvfp4 = fp4forge::nvfp4;

constexpr std::uint64_t kRows = 4096, kCols = 4096;

const std::vector<std::byte>& codes() {
  static const std::vector<std::byte> c = [] {
    std::vector<std::byte> v(kRows * kCols);
    std::mt19937_64 rng(7);
    for (auto& b : v) {
      auto x = static_cast<std::uint8_t>(rng());
      if ((x & 0x7F) == 0x7F) x = 0x7E;  // no NaN codes
      b = static_cast<std::byte>(x);
    }
    return v;
  }();
  return c;
}

struct Layout {
  fp8::ScaleGrid grid;
  std::vector<std::byte> scales;
};

Layout layout(fp8::ScaleLayout l) {
  Layout o;
  o.grid.layout = l;
  o.grid.rows = kRows;
  o.grid.cols = kCols;
  o.grid.scale_dtype = l == fp8::ScaleLayout::CHANNEL ? DType::BF16 : DType::F32;
  const std::uint64_t n = o.grid.scales_per_matrix();
  o.scales.resize(n * (o.grid.scale_dtype == DType::F32 ? 4 : 2));
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(1e-5f, 1e-3f);
  for (std::uint64_t i = 0; i < n; ++i) {
    const float s = u(rng);
    if (o.grid.scale_dtype == DType::F32) {
      std::memcpy(o.scales.data() + 4 * i, &s, 4);
    } else {
      const std::uint16_t b = fp4forge::half::float_to_bf16(s);
      std::memcpy(o.scales.data() + 2 * i, &b, 2);
    }
  }
  return o;
}

void BM_Memcpy(benchmark::State& st) {
  std::vector<std::byte> a(kRows * kCols * 2, std::byte{1}), b(a.size());
  for (auto _ : st) {
    std::memcpy(b.data(), a.data(), a.size());
    benchmark::DoNotOptimize(b.data());
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(static_cast<std::int64_t>(st.iterations() * a.size()));
  st.SetLabel("memcpy of the bf16 bytes");
}

void BM_Expand(benchmark::State& st, fp8::ScaleLayout l) {
  const Layout o = layout(l);
  std::vector<std::uint16_t> out(kRows * kCols);
  for (auto _ : st) {
    benchmark::DoNotOptimize(fp8::dequant_range(codes().data(), o.scales.data(), o.grid, 0, kRows * kCols, out.data()));
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(static_cast<std::int64_t>(st.iterations() * kRows * kCols));  // FP8 source bytes
  st.SetLabel(l == fp8::ScaleLayout::BLOCK ? "block 128x128 F32" : l == fp8::ScaleLayout::CHANNEL ? "channel BF16" : "tensor F32");
}

fp8::ScaleGrid e2m1_grid() {
  fp8::ScaleGrid g;
  g.layout = fp8::ScaleLayout::BLOCK;
  g.payload = fp8::Payload::E2M1;
  g.rows = kRows;
  g.cols = kCols;
  g.block_rows = 1;
  g.block_cols = 32;
  g.scale_dtype = DType::F8_E8M0;
  return g;
}

std::vector<std::byte> e8m0_scales() {
  std::vector<std::byte> s(kRows * kCols / 32);
  std::mt19937 rng(5);
  for (auto& b : s) b = static_cast<std::byte>(110 + rng() % 15);
  return s;
}

// Payload bytes: kRows * kCols / 2 of the random codes (two E2M1 codes each).
void BM_ExpandE2m1(benchmark::State& st) {
  const fp8::ScaleGrid g = e2m1_grid();
  const auto sc = e8m0_scales();
  std::vector<std::uint16_t> out(kRows * kCols);
  for (auto _ : st) {
    benchmark::DoNotOptimize(fp8::dequant_range(codes().data(), sc.data(), g, 0, kRows * kCols, out.data()));
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(static_cast<std::int64_t>(st.iterations() * kRows * kCols / 2));
  st.SetLabel("E2M1, E8M0 per 32: 16 values per scale, looked up");
}

void BM_ExpandE2m1PerElement(benchmark::State& st) {
  const fp8::ScaleGrid g = e2m1_grid();
  const auto sc = e8m0_scales();
  const auto* c = reinterpret_cast<const std::uint8_t*>(codes().data());
  std::vector<std::uint16_t> out(kRows * kCols);
  for (auto _ : st) {
    for (std::uint64_t b = 0; b < kRows * kCols; b += 32) {  // the scale once per block, as the old loop
      const float s = fp8::scale_value(sc.data(), g.scale_index(b), g.scale_dtype);
      for (std::uint64_t j = b; j < b + 32; ++j) out[j] = fp8::dequant_e2m1_bf16((j & 1u) != 0 ? c[j >> 1] >> 4 : c[j >> 1] & 15u, s);
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(static_cast<std::int64_t>(st.iterations() * kRows * kCols / 2));
  st.SetLabel("E2M1 per element (dequant_e2m1_bf16)");
}

void BM_ExpandEncodeNvfp4(benchmark::State& st) {
  const Layout o = layout(fp8::ScaleLayout::BLOCK);
  constexpr std::uint64_t kTask = 256;  // rows per task
  std::vector<std::uint16_t> rows(kTask * kCols);
  std::vector<std::byte> packed(kTask * kCols / 2), scales(kTask * kCols / 16);
  for (auto _ : st) {
    for (std::uint64_t r = 0; r < kRows; r += kTask) {
      fp8::dequant_range(codes().data(), o.scales.data(), o.grid, r * kCols, kTask * kCols, rows.data());
      const nvfp4::WeightView v{reinterpret_cast<const std::byte*>(rows.data()), DType::BF16, kTask, kCols};
      benchmark::DoNotOptimize(nvfp4::encode_rows(v, 448.0f * 6.0f, 0, kTask, packed.data(), scales.data(), "bench").ok());
    }
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(static_cast<std::int64_t>(st.iterations() * kRows * kCols));
  st.SetLabel("expand + NVFP4A16 encode (best path)");
}

BENCHMARK(BM_Memcpy)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Expand, block, fp8::ScaleLayout::BLOCK)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Expand, channel, fp8::ScaleLayout::CHANNEL)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Expand, tensor, fp8::ScaleLayout::TENSOR)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ExpandEncodeNvfp4)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ExpandE2m1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ExpandE2m1PerElement)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
