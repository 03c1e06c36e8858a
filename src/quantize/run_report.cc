// The quantize run's report: its summary as JSON and as text (quantize/run.h), apart from the run itself.
#include "fp4forge/quantize/run.h"

#include <fmt/format.h>

#include "fp4forge/codec/observer.h"
#include "fp4forge/util/format.h"
#include "fp4forge/util/strings.h"

namespace fp4forge::quant {

nlohmann::ordered_json to_json(const RunSummary& s) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  j["ok"] = true;
  j["source"] = s.source;
  j["destination"] = s.destination;
  j["scheme"] = s.scheme;
  j["observer"] = s.observer;
  j["jobs"] = s.jobs;
  j["max_memory"] = s.max_memory;
  j["quantized_weights"] = s.quantized_weights;
  j["kept_tensors"] = s.kept_tensors;
  j["ignore_entries"] = s.ignore_entries;
  nlohmann::ordered_json roles = nlohmann::ordered_json::object();
  for (std::size_t r = 0; r < s.counts.size(); ++r) {
    const auto& c = s.counts[r];
    if (c.quantized == 0 && c.kept == 0) continue;
    roles[std::string(role_name(static_cast<Role>(r)))] = {{"quantized", c.quantized}, {"kept", c.kept}};
  }
  j["roles"] = std::move(roles);
  j["summary"] = s.summary;
  j["bytes_in"] = s.bytes_in;
  j["bytes_out"] = s.bytes_out;
  j["bits_per_weight"] = s.bits_per_weight;
  j["seconds"] = s.seconds;
  j["gb_per_s"] = s.gb_per_s;
  j["peak_rss_bytes"] = s.peak_rss_bytes;
  j["peak_inflight_bytes"] = s.peak_inflight_bytes;
  j["bytes_read"] = s.bytes_read;
  j["shards_written"] = s.shards_written;
  j["shards_resumed"] = s.shards_resumed;
  j["files_copied"] = s.files_copied;
  j["cast_weights"] = s.cast_weights;
  j["cast_refused"] = s.cast_refused;
  j["warnings"] = s.warnings;
  return j;
}

std::string to_text(const RunSummary& s) {
  const auto esc = [](std::string_view x) { return util::printable(x, util::kReportLine); };  // R4-B5
  std::string out;
  for (const auto& l : s.summary) out += fmt::format("  {}\n", esc(l));
  // The observer as --observer takes it and as config.json (and verify) names it (issue 55 tryout G: "observer
  // minmax" here, "memoryless_minmax" in verify).
  std::string config_names;
  for (std::string_view part : util::split(s.observer, '+')) {
    const auto o = parse_observer(part);
    if (!config_names.empty()) config_names += '+';
    config_names += o.ok() ? observer_config_name(*o) : part;
  }
  const std::string observer =
      config_names == s.observer ? s.observer : fmt::format("{}, in config.json {}", s.observer, config_names);
  // Shard files (headers included) from the source's tensor data: each said as what it counts (issue 55 tryout F).
  out += fmt::format(
      "wrote {} ({}, observer {}): {} shard(s) ({} resumed), {} of shard files from {} of tensor "
      "data, {:.3f} bits per quantized weight\n",
      esc(s.destination), s.scheme, observer, s.shards_written + s.shards_resumed, s.shards_resumed,
      format_bytes(s.bytes_out), format_bytes(s.bytes_in), s.bits_per_weight);
  // One unit family in the text (issue 55): binary sizes through format_bytes, the read rate too (--json keeps
  // gb_per_s, decimal, as docs/performance.md measures).
  const auto per_s = static_cast<std::uint64_t>(s.gb_per_s * 1e9);
  out += fmt::format("  {:.2f} s, {}/s read, -j {}, peak RSS {} (in-flight budget {}, peak {})\n", s.seconds,
                     format_bytes(per_s), s.jobs, format_bytes(s.peak_rss_bytes), format_bytes(s.max_memory),
                     format_bytes(s.peak_inflight_bytes));
  return out;
}

nlohmann::ordered_json to_json(const QuantizeResult& r) {
  nlohmann::ordered_json j;
  if (r.summary) {
    j = to_json(*r.summary);
  } else {
    j["ok"] = true;
    j["dry_run"] = true;
    j["plan"] = to_json(r.plan);
  }
  if (r.mtp_splice) j["mtp_splice"] = to_json(*r.mtp_splice);
  j["preflight"] = to_json(r.preflight);
  return j;
}

std::string to_text(const QuantizeResult& r, bool verbose) {
  // In the order it ran: the preflight first (issue 55 tryout F: it came after "wrote"), the verdict last.
  std::string s = to_text(r.preflight, !r.summary);
  s += r.summary ? to_text(*r.summary) : to_text(r.plan, verbose);
  if (r.mtp_splice) s += to_text(*r.mtp_splice);
  if (!r.summary) s += "dry run: nothing written\n";
  return s;
}

}  // namespace fp4forge::quant
