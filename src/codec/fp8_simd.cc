// Highway kernels of the FP8 E4M3 encoders (FP8_DYNAMIC: one scale per row; FP8_BLOCK: one per
// 128x128 block), compiled once per x86 target and chosen at run time, like nvfp4_simd.cc. Every
// target writes the bytes of the scalar references (fp8_ref.cc):
//   a = max |w| (exact, in the source domain), s = flD(a / 448) (eps when 0): scalar, with the
//   reference's own helpers (scheme_ref_internal.h);
//   code = e4m3_rne(min(flD(|w / s|), 448)) | sign(w / s): per lane, with the IEEE division (the
//   quotient must be the correctly rounded one: a reciprocal multiply differs at rounding boundaries).
// FP8_DYNAMIC reads each row twice (max, then codes; a row stays in L1). FP8_BLOCK works block by
// block (128 rows x 128 columns), prefetching the next block's rows while taking the current max.
#ifndef HWY_COMPILE_ALL_ATTAINABLE
#define HWY_COMPILE_ALL_ATTAINABLE
#endif
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "codec/scheme_fast.h"
#include "codec/scheme_ref_internal.h"
#include "fp4forge/codec/fp8.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "codec/fp8_simd.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "codec/scheme_simd_inl.h"

HWY_BEFORE_NAMESPACE();
namespace fp4forge::scheme_simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// fp8_ref.cc scale_of: flD(a / 448), a zero scale replaced by finfo(D).eps.
template <Src S>
HWY_INLINE float Fp8ScaleOf(RawT<S> amax_bits) {
  float s = scheme_ref::round_d(MagToFloat<S>(amax_bits) / fp8::kE4m3Max, kDt<S>);
  if (s == 0.0f) s = scheme_ref::eps_d(kDt<S>);
  return s;
}

// FP8 codes of the Lanes(df) values x for the scale vs (fp8_ref.cc code_of).
template <Src S, class DF>
HWY_INLINE hn::Vec<hn::Rebind<std::uint8_t, DF>> Fp8Codes(DF df, hn::Vec<DF> x, hn::Vec<DF> vs) {
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<std::uint8_t, DF> du8;
  const auto q = hn::Div(x, vs);                                            // fl32(w / s)
  const auto mag = hn::Min(RoundMag<S>(df, hn::Abs(q)), hn::Set(df, fp8::kE4m3Max));  // clamp(flD(q))
  const auto code = hn::Or(E4m3Code(df, mag), hn::ShiftRight<24>(SignBits(df, q)));   // sign kept
  return hn::DemoteTo(du8, hn::BitCast(di, code));
}

// Codes of n consecutive elements at p with scale s into out[0, n).
template <Src S>
HWY_INLINE void Fp8EncodeRun(const std::byte* p, std::size_t n, float s, std::uint8_t* out) {
  const hn::ScalableTag<float> df;
  const hn::Rebind<std::uint8_t, decltype(df)> du8;
  const std::size_t N = hn::Lanes(df);
  const auto vs = hn::Set(df, s);
  std::size_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    const auto c0 = Fp8Codes<S>(df, LoadF32<S>(df, p + i * kEsz<S>), vs);
    const auto c1 = Fp8Codes<S>(df, LoadF32<S>(df, p + (i + N) * kEsz<S>), vs);
    hn::StoreU(c0, du8, out + i);
    hn::StoreU(c1, du8, out + i + N);
  }
  for (; i + N <= n; i += N) hn::StoreU(Fp8Codes<S>(df, LoadF32<S>(df, p + i * kEsz<S>), vs), du8, out + i);
  if (i < n) {
    HWY_ALIGN std::byte buf[hn::MaxLanes(df) * 4];
    HWY_ALIGN std::uint8_t codes[hn::MaxLanes(df)];
    LoadTail<S>(df, p + i * kEsz<S>, n - i, buf);
    hn::Store(Fp8Codes<S>(df, LoadF32<S>(df, buf), vs), du8, codes);
    std::memcpy(out + i, codes, n - i);
  }
}

template <Src S>
int Fp8ChannelT(const std::byte* data, std::uint64_t rows, std::uint64_t cols, std::byte* wout, std::byte* sout) {
  for (std::uint64_t r = 0; r < rows; ++r) {
    const std::byte* row = data + r * cols * kEsz<S>;
    const RawT<S> m = MaxMag<S>(row, cols);
    if (m >= kNonFinite<S>) return scheme_fast::kNonFinite;
    const float s = Fp8ScaleOf<S>(m);
    scheme_ref::store_elem(sout, kDt<S>, r, s);
    Fp8EncodeRun<S>(row, cols, s, reinterpret_cast<std::uint8_t*>(wout) + r * cols);
  }
  return scheme_fast::kOk;
}

template <Src S>
int Fp8BlockT(const std::byte* data, std::uint64_t rows, std::uint64_t cols, std::byte* wout, std::byte* sout) {
  constexpr std::uint64_t B = fp8::kBlock;
  const hn::ScalableTag<RawT<S>> d;
  const std::uint64_t bcols = fp8::block_scale_cols(cols);
  const std::size_t row_bytes = cols * kEsz<S>;
  for (std::uint64_t r0 = 0; r0 < rows; r0 += B) {
    const std::uint64_t nr = std::min(B, rows - r0);
    for (std::uint64_t bc = 0; bc < bcols; ++bc) {
      const std::uint64_t c0 = bc * B, nc = std::min(B, cols - c0);
      const std::byte* blk = data + (r0 * cols + c0) * kEsz<S>;
      const bool prefetch = bc + 1 < bcols;
      const std::size_t next = std::min(B, cols - std::min(cols, c0 + B)) * kEsz<S>;
      auto acc = hn::Zero(d);
      for (std::uint64_t r = 0; r < nr; ++r) {
        const std::byte* p = blk + r * row_bytes;
        if (prefetch) PrefetchRange(p + nc * kEsz<S>, next);
        AccumulateMaxMag<S>(d, p, nc, acc);
      }
      const RawT<S> m = hn::GetLane(hn::MaxOfLanes(d, acc));
      if (m >= kNonFinite<S>) return scheme_fast::kNonFinite;
      const float s = Fp8ScaleOf<S>(m);
      scheme_ref::store_elem(sout, kDt<S>, (r0 / B) * bcols + bc, s);
      for (std::uint64_t r = 0; r < nr; ++r)
        Fp8EncodeRun<S>(blk + r * row_bytes, nc, s, reinterpret_cast<std::uint8_t*>(wout) + (r0 + r) * cols + c0);
    }
  }
  return scheme_fast::kOk;
}

int Fp8Channel(const std::byte* data, DType dt, std::uint64_t rows, std::uint64_t cols, std::byte* wout,
               std::byte* sout) {
  switch (dt) {
    case DType::BF16: return Fp8ChannelT<Src::BF16>(data, rows, cols, wout, sout);
    case DType::F16: return Fp8ChannelT<Src::F16>(data, rows, cols, wout, sout);
    default: return Fp8ChannelT<Src::F32>(data, rows, cols, wout, sout);
  }
}

int Fp8Block(const std::byte* data, DType dt, std::uint64_t rows, std::uint64_t cols, std::byte* wout,
             std::byte* sout) {
  switch (dt) {
    case DType::BF16: return Fp8BlockT<Src::BF16>(data, rows, cols, wout, sout);
    case DType::F16: return Fp8BlockT<Src::F16>(data, rows, cols, wout, sout);
    default: return Fp8BlockT<Src::F32>(data, rows, cols, wout, sout);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace fp4forge::scheme_simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "codec/scheme_simd_table.h"

namespace fp4forge::scheme_simd {

HWY_EXPORT(Fp8Channel);
HWY_EXPORT(Fp8Block);

int fp8_channel_dispatched(const std::byte* data, DType dt, std::uint64_t rows, std::uint64_t cols,
                           std::byte* wout, std::byte* sout) {
  return HWY_DYNAMIC_DISPATCH(Fp8Channel)(data, dt, rows, cols, wout, sout);
}

int fp8_block_dispatched(const std::byte* data, DType dt, std::uint64_t rows, std::uint64_t cols,
                         std::byte* wout, std::byte* sout) {
  return HWY_DYNAMIC_DISPATCH(Fp8Block)(data, dt, rows, cols, wout, sout);
}

const std::vector<scheme_fast::PathKernel>& fp8_channel_kernels() {
  static const std::vector<scheme_fast::PathKernel> k = scheme_fast::supported({FP4FORGE_SCHEME_TARGETS(Fp8Channel)});
  return k;
}

const std::vector<scheme_fast::PathKernel>& fp8_block_kernels() {
  static const std::vector<scheme_fast::PathKernel> k = scheme_fast::supported({FP4FORGE_SCHEME_TARGETS(Fp8Block)});
  return k;
}

}  // namespace fp4forge::scheme_simd
#endif  // HWY_ONCE
