// verify --against's re-encode findings (internal.h): the rows of an NVFP4 module compared byte for byte with the
// reference encoding (codes-damaged, reencode-mismatch), the members of another scheme's re-encoding, a scale stored
// in another dtype than its source weight's. Split from against.cc, which computes what these judge.
#include "verify/internal.h"
#include "verify/source_view.h"

#include <cstdlib>
#include <cstring>

namespace fp4forge::verify_internal {
namespace {

/** An E2M1 code as a signed step on the grid (0, 0.5, 1, 1.5, 2, 3, 4, 6 are steps 0..7; -0 is 0). */
int e2m1_step(unsigned code) { return (code & 8u) ? -static_cast<int>(code & 7u) : static_cast<int>(code & 7u); }

}  // namespace

/** Rows r0..r1 of an NVFP4 module: the stored codes and scales (`packed`, `scales`, the module's) against the
 * reference encoding of the same rows (`pk`, `sc`, the chunk's). A row differs when any byte does; it differs
 * "far" when a code is more than one grid step from the reference's, or a scale more than one E4M3 step (or of
 * the other sign): what rounding (another machine's numerics, F18) never gives and damaged bytes do. */
void compare_row_bytes(const std::byte* packed, const std::byte* scales, const std::byte* pk, const std::byte* sc,
                       std::uint64_t r0, std::uint64_t r1, std::uint64_t k, RowCompare& out) {
  for (std::uint64_t r = r0; r < r1; ++r) {
    const std::byte* a = packed + r * k / 2;
    const std::byte* b = pk + (r - r0) * k / 2;
    const std::byte* as = scales + r * k / 16;
    const std::byte* bs = sc + (r - r0) * k / 16;
    const bool codes = std::memcmp(a, b, k / 2) != 0, scales_differ = std::memcmp(as, bs, k / 16) != 0;
    if (!codes && !scales_differ) continue;
    out.codes = out.codes || codes;
    out.scales = out.scales || scales_differ;
    ++out.bad;
    out.first = std::min(out.first, r);
    bool far = false;
    for (std::uint64_t i = 0; i < k / 2 && !far; ++i) {
      const auto x = std::to_integer<unsigned>(a[i]), y = std::to_integer<unsigned>(b[i]);
      far =
          std::abs(e2m1_step(x & 15u) - e2m1_step(y & 15u)) > 1 || std::abs(e2m1_step(x >> 4) - e2m1_step(y >> 4)) > 1;
    }
    for (std::uint64_t i = 0; i < k / 16 && !far; ++i) {
      const auto x = std::to_integer<int>(as[i]), y = std::to_integer<int>(bs[i]);
      far = ((x ^ y) & 0x80) != 0 || std::abs(x - y) > 1;
    }
    if (far) ++out.far;
  }
}

/** compare_reencoded's findings: the members whose bytes differ from the re-encoding (reencode-mismatch, a
 * warning, with the rows they touch) and an error far above the reference's (error-outlier). */
void report_reencoded(const Layout& L, const Module& m, const std::vector<LinearTensorSpec>& specs,
                      const std::vector<MemberDiff>& diffs, const std::vector<const TensorRef*>& stored,
                      std::vector<char>& row_bad, const TensorError& te, const VerifyOptions& opts, FindingSink& sink,
                      VerifyStats& st) {
  const std::uint64_t n = m.n;
  std::vector<std::string> details;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    if (!diffs[i].what.empty()) {
      details.push_back(fmt::format("{} is {}", specs[i].suffix, diffs[i].what));
      std::fill(row_bad.begin(), row_bad.end(), 1);
    } else if (diffs[i].elements) {
      std::uint64_t total = 1;
      for (auto d : specs[i].shape) total *= d;
      details.push_back(fmt::format("{}: {} of {} elements differ, first at {}", specs[i].suffix, diffs[i].elements,
                                    total, index_str(specs[i].shape, diffs[i].first)));
    }
  }
  if (!details.empty()) {
    const auto bad = static_cast<std::uint64_t>(std::count(row_bad.begin(), row_bad.end(), 1));
    st.reencode_mismatched_rows += bad;
    std::vector<std::string> ts;
    for (const TensorRef* t : stored)
      if (t) ts.push_back(t->name);
    sink.add(
        finding_kind("reencode-mismatch"),
        {.group = family_of(m.name),
         .message = fmt::format("'{}': {} of {} rows differ from the {} reference encoding of the source ({})", m.name,
                                bad, n, L.word, fmt::join(details, "; ")),
         .tensors = ts,
         .expected = fmt::format("byte-identical to compressed-tensors 0.18's {} (docs/schemes.md)", L.word),
         .actual = fmt::format("{}", fmt::join(details, "; ")),
         .hint =
             "another quantizer (GPTQ, an MSE observer), an upstream GPU run of an F16/F32 source (docs/schemes.md, "
             "'CPU and GPU differ upstream'), or corrupted bytes; error-outlier tells whether the values are far off"});
  }
  const double limit = std::max(opts.outlier_factor * te.ref_rel_rms, opts.outlier_floor);
  if (!(te.rel_rms <= limit)) {
    std::vector<std::string> ts;
    for (const TensorRef* t : stored)
      if (t) ts.push_back(t->name);
    sink.add(finding_kind("error-outlier"),
             {.group = family_of(m.name),
              .message = fmt::format(
                  "'{}' relative RMS error vs source is {:.4g}, the reference {} encoding of the same source "
                  "gives {:.4g} (limit {:.4g})",
                  m.name, te.rel_rms, L.word, te.ref_rel_rms, limit),
              .tensors = ts,
              .expected = fmt::format("<= {:.4g}", limit),
              .actual = fmt::format("{:.4g}", te.rel_rms),
              .hint = "corrupt scales or codes, or a tensor quantized from other data"});
  }
}

/** R4-B10: a module's scale stored in another dtype than its source weight's, which compressed-tensors writes it in
 * (compare_reencoded: said unless the module is the source's values exactly). */
/* compressed-tensors' initialize_qparams: scale_dtype = observed_dtype, the module's weight dtype, which quantize
 * writes; the structural pass can only compare with the model's dtype. */
void report_scale_dtype(const Module& m, const TensorRef& scale, const SourceView& src, DType want, FindingSink& sink) {
  sink.add(finding_kind("scale-dtype-mismatch"),
           {.group = family_of(m.name),
            .message = fmt::format("'{}' is {} but its source weight '{}' is {}: compressed-tensors writes a module's "
                                   "scale in its own weight's dtype",
                                   scale.name, dtype_name(scale.info->dtype), src.label, dtype_name(src.dtype)),
            .tensors = {scale.name},
            .expected = std::string(dtype_name(want)),
            .actual = std::string(dtype_name(scale.info->dtype)),
            .hint = "a re-save or an edit changed the scale's dtype; " + std::string(kHintRequant)});
}

/** compare_nvfp4's re-encode proof over every row (RowCompare). A few rows far off in a module whose other rows are
 * byte-identical are damaged bytes: an error (another quantizer differs in most rows, another machine's numerics by
 * a rounding step). Any other difference is reencode-mismatch's warning, as for the sample. */
void report_row_compare(const Module& m, const std::string& observer, const RowCompare& rc, FindingSink& sink) {
  if (rc.bad == 0) return;
  const std::uint64_t n = m.n;
  // The tensors whose bytes differ, not always the codes (issue 55 tryout G: a scale's flipped bit was laid on
  // weight_packed).
  std::vector<std::string> tensors;
  if (rc.codes) tensors.push_back(m.payload->name);
  if (rc.scales) tensors.push_back(m.scale->name);
  // A few rows of an otherwise byte-identical module: damaged bytes, whatever the step (issue 55 tryout G: one flipped
  // bit read as a rounding difference, result OK). Upstream's CPU and CUDA runs wrote the same NVFP4 bytes on every
  // vector (docs/schemes.md, "Proof"), and another quantizer differs in most rows.
  const bool few = rc.bad < n && (rc.bad * 10 <= n || (rc.bad <= 2 && rc.bad * 2 < n));
  if (few) {
    sink.add(finding_kind("codes-damaged"),
             {.group = family_of(m.name),
              .message = fmt::format("'{}': {} of {} rows differ from the reference encoding of the source ({}), the "
                                     "other {} byte-identical (first row {})",
                                     m.name, rc.bad, n,
                                     rc.far > 0 ? fmt::format("{} by more than a rounding step", rc.far)
                                                : std::string("each by one rounding step"),
                                     n - rc.bad, rc.first),
              .tensors = tensors,
              .expected = fmt::format("every row byte-identical to compressed-tensors' RTN with observer {}", observer),
              .actual = fmt::format("{} row(s) differ", rc.bad),
              .hint = "damaged bytes (a bad copy, disk or transfer; a flipped low bit is one rounding step), not "
                      "another quantizer (which differs in most rows): restore the shard from a good copy (`fp4forge "
                      "diff DIR OTHER --values` finds the bytes) or quantize again"});
    return;
  }
  sink.add(finding_kind("reencode-mismatch"),
           {.group = family_of(m.name),
            .message = fmt::format("'{}': {} of {} rows differ from the reference encoding of the source with the "
                                   "checkpoint's own global scale and observer {} (first row {}{})",
                                   m.name, rc.bad, n, observer, rc.first,
                                   rc.far == 0 ? "; each by a rounding step at most" : ""),
            .tensors = tensors,
            .expected = fmt::format(
                "byte-identical to compressed-tensors' RTN with observer {} (nvfp4a16-format.md §2)", observer),
            .actual = fmt::format("{} rows differ", rc.bad),
            .hint = fmt::format("another quantizer than observer {} says (ModelOpt, GPTQ, a patched llm-compressor), "
                                "environment-dependent numerics (F18), or corrupted bytes (`fp4forge diff DIR OTHER "
                                "--values` against another copy finds them)",
                                observer)});
}

}  // namespace fp4forge::verify_internal
