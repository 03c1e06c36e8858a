// verify's report as text and JSON (verify.h to_json / to_text).
#include "verify/internal.h"

#include "fp4forge/util/format.h"
#include "fp4forge/util/strings.h"

namespace fp4forge {
using verify_internal::Json;

// ---- rendering -----------------------------------------------------------------------------------

namespace {

Json tensor_error_json(const TensorError& e) {
  Json j;
  j["module"] = e.module;
  j["source"] = e.source;
  j["shape"] = {e.rows, e.cols};
  auto num = [](double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); };
  j["rel_rms"] = num(e.rel_rms);
  j["ref_rel_rms"] = num(e.ref_rel_rms);
  j["minmax_rel_rms"] = num(e.minmax_rel_rms);
  j["global_scale"] = num(e.global_scale);
  j["expected_global_scale"] = num(e.expected_global_scale);
  return j;
}

std::array<std::size_t, 3> severity_counts(const std::vector<Finding>& fs) {
  std::array<std::size_t, 3> c{0, 0, 0};
  for (const auto& f : fs) ++c[static_cast<std::size_t>(f.severity)];
  return c;
}

}  // namespace

nlohmann::ordered_json to_json(const VerifyReport& r) {
  const std::string& qdir = r.qdir;
  const std::string& against = r.against;
  Json j;
  const auto c = severity_counts(r.findings);
  j["ok"] = r.ok();
  j["strict"] = r.strict;
  j["values_scanned"] = r.values_scanned;
  j["qdir"] = qdir;
  j["against"] = against.empty() ? Json(nullptr) : Json(against);
  j["against_format"] = r.against_format;
  j["scheme"] = r.stats.scheme;
  j["observer"] = r.stats.observer.empty() ? Json(nullptr) : Json(r.stats.observer);
  j["counts"] = {{"error", c[0]}, {"warning", c[1]}, {"info", c[2]}};
  Json fs = Json::array();
  for (const auto& f : r.findings) fs.push_back(to_json(f));
  j["findings"] = std::move(fs);
  const VerifyStats& s = r.stats;
  Json st;
  st["tensors"] = s.tensors;
  st["quantized_modules"] = s.quantized_modules;
  st["kept_tensors"] = s.kept_tensors;
  st["kept_linear"] = s.kept_linear;
  st["quantized_params"] = s.quantized_params;
  st["total_params"] = s.total_params;
  st["quantized_share"] = s.quantized_share();
  st["text_linear_params"] = s.text_linear_params;
  st["text_quantized_share"] = s.text_quantized_share();
  st["fused_sets"] = s.fused_sets;
  st["scale_bytes_scanned"] = s.scale_bytes_scanned;
  st["payload_bytes_scanned"] = s.payload_bytes_scanned;
  st["kept_values_scanned"] = s.kept_values_scanned;
  if (s.against) {
    Json a;
    a["compared_quantized"] = s.compared_quantized;
    a["compared_kept"] = s.compared_kept;
    a["mean_rel_rms"] = s.mean_rel_rms;
    a["max_rel_rms"] = std::isfinite(s.max_rel_rms) ? Json(s.max_rel_rms) : Json(nullptr);
    a["nonfinite_tensors"] = s.nonfinite_tensors;
    a["mean_ref_rel_rms"] = s.mean_ref_rel_rms;
    a["mean_minmax_rel_rms"] = s.mean_minmax_rel_rms;
    a["reencoded_rows"] = s.reencoded_rows;
    a["reencode_mismatched_rows"] = s.reencode_mismatched_rows;
    a["passthrough_modules"] = s.passthrough_modules;
    a["cast_modules"] = s.cast_modules;
    a["exact_modules"] = s.exact_modules;
    Json ge = Json::array();
    for (const auto& g : s.group_errors)
      ge.push_back({{"group", g.group},
                    {"tensors", g.tensors},
                    {"mean_rel_rms", g.mean_rel_rms},
                    {"mean_minmax_rel_rms", g.mean_minmax_rel_rms},
                    {"exact_tensors", g.exact_tensors}});
    a["group_errors"] = std::move(ge);
    a["jobs"] = s.jobs;
    Json w = Json::array();
    for (const auto& e : s.worst) w.push_back(tensor_error_json(e));
    a["worst"] = std::move(w);
    Json p = Json::array();
    for (const auto& e : s.per_tensor) p.push_back(tensor_error_json(e));
    a["per_tensor"] = std::move(p);
    a["quality"] = to_json(quality_report(s));
    st["against"] = std::move(a);
  } else {
    st["against"] = nullptr;
  }
  j["stats"] = std::move(st);
  return j;
}

std::string to_text(const VerifyReport& r) {
  // Paths, config values, module names and the findings that quote them come from files: escaped (R4-B5).
  const auto esc = [](std::string_view x) { return util::printable(x, util::kReportLine); };
  const std::string qdir = esc(r.qdir);
  const std::string against = esc(r.against);
  std::string out;
  const VerifyStats& s = r.stats;
  out += fmt::format("verify {}{}\n", qdir, against.empty() ? std::string() : "  (against " + against + ")");
  if (r.against_format.is_object())
    out += fmt::format("  against an FP8 source, compared as its bf16 expansion: {}\n",
                       esc(r.against_format.value("label", std::string())));
  // Several groups: each on its own line below, with quantize's spellings (not one joined label).
  const std::string scheme = s.groups.size() > 1 ? fmt::format("{} config groups (below)", s.groups.size())
                             : esc(s.scheme) + (s.observer.empty() ? std::string() : " (observer " + esc(s.observer) + ")");
  // A format fp4forge does not read has no scheme, share or parameters here: said as such (issue 55 tryout: it read
  // "scheme  · ... quantized share 0.0% of 0 parameters").
  const bool foreign = std::any_of(r.findings.begin(), r.findings.end(), [](const Finding& f) {
    return is_kind(f, finding_kind("quant-format-foreign"));
  });
  // An FP8 release (a source quantize reads, not a scheme it writes): said so, not "scheme  · 0 quantized modules".
  const bool fp8_source = std::any_of(r.findings.begin(), r.findings.end(),
                                      [](const Finding& f) { return is_kind(f, finding_kind("fp8-source")); });
  if (foreign && s.quantized_modules == 0)
    out += fmt::format("  scheme not read: a quantization format fp4forge does not read (below) · {} tensors\n",
                       s.tensors);
  else if (fp8_source && s.quantized_modules == 0)
    out += fmt::format("  scheme none written by fp4forge: an FP8 release, a source to quantize (below) · {} tensors\n",
                       s.tensors);
  else
    out += fmt::format("  scheme {} · {} tensors · {} quantized modules · {} kept tensors ({} Linear-like) · "
                       "quantized share {:.1f}% of {} parameters · {} fused sets\n",
                       scheme, s.tensors, s.quantized_modules, s.kept_tensors, s.kept_linear,
                       100.0 * s.quantized_share(), format_count(s.total_params), s.fused_sets);
  if (s.groups.size() > 1)  // one line per config group: its scheme and observer paired, with quantize's spellings
    for (const std::string& g : s.groups) out += fmt::format("    {}\n", esc(g));
  if (s.text_linear_params > 0)
    out += fmt::format("  text stack: {:.1f}% of {} Linear-like parameters quantized\n", 100.0 * s.text_quantized_share(),
                       format_count(s.text_linear_params));
  if (s.against) {
    // Two or more groups: no mean over schemes (the lines per group below give each; issue 55 tryout).
    const bool per_group = s.group_errors.size() > 1;
    // The mean is over the tensors not reproduced exactly (issue 55 tryout E-8: exact tensors' zeros diluted it).
    const std::uint64_t exact = s.exact_modules + s.passthrough_modules + s.cast_modules;
    const std::uint64_t measured = s.compared_quantized > exact ? s.compared_quantized - exact : 0;
    std::string over = exact == 0 ? std::string() : fmt::format(" over the {} not reproduced exactly", measured);
    // A non-finite error is no part of the mean, and said beside it (issue 55 tryout I: "mean 0.0819" next to
    // "max inf" read as a healthy checkpoint).
    if (s.nonfinite_tensors > 0)
      over +=
          fmt::format(" ({} tensor(s) with a non-finite error left out: see the errors below)", s.nonfinite_tensors);
    out += fmt::format(
        "  vs source: {} quantized tensors, {}max {:.4f}; {} kept tensors bit-compared; {} rows "
        "re-encoded, {} differ\n",
        s.compared_quantized,
        per_group                    ? std::string("rel RMS per group below, ")
        : measured == 0 && exact > 0 ? std::string("every one the source's values exactly (rel RMS 0), ")
                                     : fmt::format("rel RMS mean {:.4f} (reference encoding {:.4f}){}, ",
                                                   s.mean_rel_rms, s.mean_ref_rel_rms, over),
        s.max_rel_rms, s.compared_kept, s.reencoded_rows, s.reencode_mismatched_rows);
    if (s.passthrough_modules > 0)
      out += fmt::format("  {} FP8 module(s) passed through losslessly: the source's payload bytes, dequantized values "
                         "equal to its expansion\n",
                         s.passthrough_modules);
    if (s.cast_modules > 0)
      out += fmt::format("  {} module(s) cast losslessly from packed FP4: the source's codes, dequantized values "
                         "equal to its expansion\n",
                         s.cast_modules);
    if (s.exact_modules > 0)
      out += fmt::format(
          "  {} module(s) reproduce the source exactly (error 0: values the scheme represents, a "
          "lossless cast): no global scale or re-encoding to judge, no observer gain\n",
          s.exact_modules);
    if (per_group) {
      // One line per group: an NVFP4 group's gain is not averaged with an FP8 group's nothing, and a group whose
      // encoding is min-max's own says so, as the picture does (issue 55).
      for (const auto& g : s.group_errors) {
        const std::string also_exact =
            g.exact_tensors == 0 ? std::string()
                                 : fmt::format("; {} more reproduce the source exactly (left out)", g.exact_tensors);
        if (g.tensors == 0) {  // every tensor exact: a lossless pass-through or cast, nothing to measure
          out += fmt::format(
              "  {} ({} tensors): every one reproduces the source exactly (a lossless pass-through or "
              "cast): no error to measure\n",
              esc(g.group), g.exact_tensors);
          continue;
        }
        out +=
            g.mean_minmax_rel_rms != g.mean_rel_rms && g.mean_minmax_rel_rms > 0
                ? fmt::format(
                      "  {} ({} tensors): rel RMS {:.4f} where min-max gives {:.4f}: error {:+.1f} % vs "
                      "min-max{}\n",
                      esc(g.group), g.tensors, g.mean_rel_rms, g.mean_minmax_rel_rms,
                      100.0 * (g.mean_rel_rms - g.mean_minmax_rel_rms) / g.mean_minmax_rel_rms, also_exact)
                : fmt::format("  {} ({} tensors): rel RMS {:.4f} (its encoding is min-max's: nothing to compare){}\n",
                              esc(g.group), g.tensors, g.mean_rel_rms, also_exact);
      }
    } else if (s.mean_minmax_rel_rms != s.mean_ref_rel_rms && s.mean_minmax_rel_rms > 0) {
      out += fmt::format("  observer {}: rel RMS {:.4f} where min-max gives {:.4f}: error {:+.1f} % vs min-max\n",
                         esc(s.observer), s.mean_rel_rms, s.mean_minmax_rel_rms,
                         100.0 * (s.mean_rel_rms - s.mean_minmax_rel_rms) / s.mean_minmax_rel_rms);
    }
    if (s.mean_minmax_rel_rms != s.mean_ref_rel_rms && s.mean_minmax_rel_rms > 0) out += to_text(quality_report(s));
    if (!s.worst.empty()) {
      out += "  worst tensors (rel RMS / reference):\n";
      for (const auto& e : s.worst)
        out += fmt::format("    {:.4f} / {:.4f}  {}\n", e.rel_rms, e.ref_rel_rms, esc(e.module));
    }
  }
  for (const auto& f : r.findings) {
    out += fmt::format("{:<7} {}: {}\n", severity_name(f.severity), esc(f.kind), esc(f.message));
    if (!f.tensors.empty()) {
      const std::size_t show = std::min<std::size_t>(f.tensors.size(), 5);
      std::vector<std::string> shown;
      for (std::size_t i = 0; i < show; ++i) shown.push_back(esc(f.tensors[i]));
      out += fmt::format("        tensors: {}{}\n", fmt::join(shown, ", "),
                         f.tensors.size() > show ? fmt::format(" (+{} more)", f.tensors.size() - show) : "");
    }
    if (!f.hint.empty()) out += fmt::format("        hint: {}\n", esc(f.hint));
  }
  const auto c = severity_counts(r.findings);
  // --no-values: a pass that did not read the scale bytes, global scales or kept tensors says so (tryout M-L1).
  out += fmt::format("result: {} ({} error(s), {} warning(s), {} info){}\n", r.ok() ? "OK" : "FAILED", c[0], c[1], c[2],
                     r.values_scanned ? ""
                                      : "; values not scanned (--no-values): scale bytes, global scales and "
                                        "kept tensors were not read");
  return out;
}

int exit_code(const VerifyReport& r) { return r.ok() ? 0 : 1; }

}  // namespace fp4forge
