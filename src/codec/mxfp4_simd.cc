// Highway kernels of the MXFP4A16 encoder (mxfp4.h), compiled once per x86 target and chosen at run
// time, like nvfp4_simd.cc. Every target writes the bytes of the scalar reference (mxfp4_ref.cc).
//
// Groups of 32 are contiguous in memory across rows, so a row range is one run of groups, encoded in
// chunks of kChunkGroups (16 KiB of BF16, in L1):
//   pass 1: every group's max |w| as magnitude bits in the source domain (lanes of the source's own
//           width, folded across groups by a transposing max tree, no per-group horizontal reduction);
//   pass 2: per group, round_to_power_2 is integer arithmetic on those bits (add a quarter exponent
//           step, keep the exponent field) and everything else about the scale depends on that field
//           alone: one entry of scheme_fast::mxfp4_entries (built with mxfp4::group_scale) gives the
//           stored byte and the FP4 decision bounds;
//   pass 3: per weight, the E2M1 index is the number of bounds its magnitude bits exceed (seven integer
//           compares, no division: the bounds are the reference's own decisions), the sign bit is set
//           when w < 0 and q != 0; two codes per byte, low nibble first.
#ifndef HWY_COMPILE_ALL_ATTAINABLE
#define HWY_COMPILE_ALL_ATTAINABLE
#endif
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL
#endif

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "codec/scheme_fast.h"
#include "fp4forge/codec/mxfp4.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "codec/mxfp4_simd.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "codec/scheme_simd_inl.h"

HWY_BEFORE_NAMESPACE();
namespace fp4forge::scheme_simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr std::size_t kMx4Group = mxfp4::kGroupSize;
constexpr std::size_t kMx4ChunkGroups = 256;

// Lane type of the comparisons: the source bits (int16 for BF16/F16, int32 for F32); magnitudes are
// non-negative, so signed compares order them like the values.
template <Src S>
using Mx4LaneT = std::conditional_t<S == Src::F32, std::int32_t, std::int16_t>;

// round_to_power_2 on magnitude bits m: the exponent field of (m + a quarter step) (mxfp4_ref.cc).
template <Src S>
HWY_INLINE std::uint32_t Mx4Pow2Field(std::uint32_t b) {
  if constexpr (S == Src::F32) {
    return ((b + (1u << 21)) & 0x7F800000u) >> 23;
  } else if constexpr (S == Src::BF16) {
    return ((b + (1u << 5)) & 0x7F80u) >> 7;
  } else {
    return ((b + (1u << 8)) & 0x7C00u) >> 10;
  }
}

// Reduces N vectors (one per group, lanes = partial maxima) to one vector whose lane g is the max of
// vector g: log2(N) levels of Max(ConcatEven, ConcatOdd) keep the group order (as nvfp4_simd.cc).
template <class D, std::size_t kN>
HWY_INLINE hn::Vec<D> Mx4MaxTree(D d, hn::Vec<D> (&v)[kN]) {
#if HWY_TARGET != HWY_SCALAR
  for (std::size_t n = kN; n > 1; n /= 2)
    for (std::size_t i = 0; i < n / 2; ++i)
      v[i] = hn::Max(hn::ConcatEven(d, v[2 * i + 1], v[2 * i]), hn::ConcatOdd(d, v[2 * i + 1], v[2 * i]));
#else
  static_assert(kN == 1);
  (void)d;
#endif
  return v[0];
}

// Pass 1: magnitude-bit maxima of groups [0, ng) at src into gmax[] (padded with zeros to a multiple
// of Lanes). False if a group holds a NaN/Inf.
template <Src S>
HWY_INLINE bool Mx4GroupMaxima(const std::byte* src, std::size_t ng, Mx4LaneT<S>* gmax) {
  using T = Mx4LaneT<S>;
  const hn::ScalableTag<T> d;
  constexpr std::size_t N = hn::MaxLanes(d);
  static_assert(N <= kMx4Group, "one group spans at least one vector");
  constexpr std::size_t kVecs = kMx4Group / N;
  const auto mask = hn::Set(d, static_cast<T>(kMagMask<S>));
  const T* p = reinterpret_cast<const T*>(src);
  auto bad = hn::Zero(d);
  for (std::size_t g0 = 0; g0 < ng; g0 += N) {
    hwy::Prefetch(reinterpret_cast<const std::byte*>(p + (g0 + N) * kMx4Group) + kPrefetchAhead);
    hn::Vec<decltype(d)> v[N];
    for (std::size_t j = 0; j < N; ++j) {
      if (g0 + j < ng) {
        const T* q = p + (g0 + j) * kMx4Group;
        auto m = hn::And(hn::LoadU(d, q), mask);
        for (std::size_t k = 1; k < kVecs; ++k) m = hn::Max(m, hn::And(hn::LoadU(d, q + k * N), mask));
        v[j] = m;
      } else {
        v[j] = hn::Zero(d);
      }
    }
    const auto m = Mx4MaxTree(d, v);
    bad = hn::Max(bad, m);
    hn::StoreU(m, d, gmax + g0);
  }
  return static_cast<RawT<S>>(hn::GetLane(hn::MaxOfLanes(d, bad))) < kNonFinite<S>;
}

// Pass 3 for Lanes(d) weights at p with the group's bounds thr (8 vectors of 64 bytes): the codes
// (0..15) in the lanes.
template <Src S, class D>
HWY_INLINE hn::Vec<D> Mx4Codes(D d, const Mx4LaneT<S>* p, const Mx4LaneT<S>* thr) {
  using T = Mx4LaneT<S>;
  constexpr std::size_t kL = 64 / sizeof(T);  // copies of each bound
  const auto x = hn::LoadU(d, p);
  const auto mag = hn::And(x, hn::Set(d, static_cast<T>(kMagMask<S>)));
  auto idx = hn::VecFromMask(d, hn::Gt(mag, hn::LoadU(d, thr)));  // minus the bounds exceeded
  for (std::size_t b = 1; b < 7; ++b) idx = hn::Add(idx, hn::VecFromMask(d, hn::Gt(mag, hn::LoadU(d, thr + b * kL))));
  const auto nonzero = hn::VecFromMask(d, hn::Gt(mag, hn::LoadU(d, thr + 7 * kL)));
  const auto sign8 = hn::And(hn::And(nonzero, hn::ShiftRight<sizeof(T) * 8 - 1>(x)), hn::Set(d, T{8}));
  return hn::Or(hn::Neg(idx), sign8);
}

#if HWY_TARGET != HWY_SCALAR
// Bytes of Lanes(d) int16 codes: one byte per pair of lanes, low nibble = even lane.
template <class D16>
HWY_INLINE void Mx4StorePacked16(D16 /*d16: the lane type only*/, hn::Vec<D16> c, std::uint8_t* out) {
  const hn::Repartition<std::uint32_t, D16> du32;
  const hn::RebindToSigned<decltype(du32)> di32;
  const hn::Rebind<std::uint8_t, decltype(du32)> du8;
  const auto u = hn::BitCast(du32, c);  // c_even | c_odd << 16
  const auto b = hn::And(hn::Or(u, hn::ShiftRight<12>(u)), hn::Set(du32, 0xFFu));
  hn::StoreU(hn::DemoteTo(du8, hn::BitCast(di32, b)), du8, out);
}
#endif

template <Src S>
int Mx4EncodeT(const std::byte* data, std::uint64_t rows, std::uint64_t cols, std::byte* packed,
               std::byte* scale) {
  using T = Mx4LaneT<S>;
  const hn::ScalableTag<T> d;
  constexpr std::size_t N = hn::MaxLanes(d);
  const scheme_fast::MxEntry* table = scheme_fast::mxfp4_entries(kDt<S>);
  HWY_ALIGN T gmax[kMx4ChunkGroups + N];
  const scheme_fast::MxEntry* ent[kMx4ChunkGroups];
  const std::uint64_t groups = rows * (cols / kMx4Group);
  auto* out = reinterpret_cast<std::uint8_t*>(packed);
  for (std::uint64_t c0 = 0; c0 < groups; c0 += kMx4ChunkGroups) {
    const std::size_t ng = static_cast<std::size_t>(groups - c0 < kMx4ChunkGroups ? groups - c0 : kMx4ChunkGroups);
    const std::byte* src = data + c0 * kMx4Group * kEsz<S>;
    if (!Mx4GroupMaxima<S>(src, ng, gmax)) return scheme_fast::kNonFinite;
    for (std::size_t g = 0; g < ng; ++g) {
      const scheme_fast::MxEntry& e = table[Mx4Pow2Field<S>(static_cast<std::uint32_t>(gmax[g]))];
      if (!e.ok) return scheme_fast::kOverflow;
      scale[c0 + g] = static_cast<std::byte>(e.code);
      ent[g] = &e;
    }
    const T* p = reinterpret_cast<const T*>(src);
    std::uint8_t* o = out + c0 * (kMx4Group / 2);
    for (std::size_t g = 0; g < ng; ++g) {
      const T* thr = reinterpret_cast<const T*>(ent[g]->bounds);
      const T* q = p + g * kMx4Group;
      std::uint8_t* og = o + g * (kMx4Group / 2);
#if HWY_TARGET == HWY_SCALAR
      HWY_ALIGN std::int32_t codes[kMx4Group];
      for (std::size_t j = 0; j < kMx4Group; ++j) codes[j] = hn::GetLane(Mx4Codes<S>(d, q + j, thr));
      PackNibblesScalar(codes, kMx4Group, og);
#else
      if constexpr (S == Src::F32) {
        for (std::size_t j = 0; j < kMx4Group; j += 2 * N)
          StorePackedNibbles(d, Mx4Codes<S>(d, q + j, thr), Mx4Codes<S>(d, q + j + N, thr), og + j / 2);
      } else {
        for (std::size_t j = 0; j < kMx4Group; j += N) Mx4StorePacked16(d, Mx4Codes<S>(d, q + j, thr), og + j / 2);
      }
#endif
    }
  }
  return scheme_fast::kOk;
}

int Mxfp4Encode(const std::byte* data, DType dt, std::uint64_t rows, std::uint64_t cols, std::byte* packed,
                std::byte* scale) {
  switch (dt) {
    case DType::BF16: return Mx4EncodeT<Src::BF16>(data, rows, cols, packed, scale);
    case DType::F16: return Mx4EncodeT<Src::F16>(data, rows, cols, packed, scale);
    default: return Mx4EncodeT<Src::F32>(data, rows, cols, packed, scale);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace fp4forge::scheme_simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "codec/scheme_simd_table.h"

namespace fp4forge::scheme_simd {

HWY_EXPORT(Mxfp4Encode);

int mxfp4_dispatched(const std::byte* data, DType dt, std::uint64_t rows, std::uint64_t cols, std::byte* packed,
                     std::byte* scale) {
  return HWY_DYNAMIC_DISPATCH(Mxfp4Encode)(data, dt, rows, cols, packed, scale);
}

const std::vector<scheme_fast::PathKernel>& mxfp4_kernels() {
  static const std::vector<scheme_fast::PathKernel> k = scheme_fast::supported({FP4FORGE_SCHEME_TARGETS(Mxfp4Encode)});
  return k;
}

}  // namespace fp4forge::scheme_simd
#endif  // HWY_ONCE
