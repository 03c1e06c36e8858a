// A seat planned from its own start-up log (seat key log=FILE): the options the log states fill the keys
// the seat did not give, and the loaded seat takes the log's weights and sliding-window reserve (seat.h).
#include <algorithm>

#include <fmt/format.h>

#include "fp4forge/kvplan/seat.h"
#include "fp4forge/util/size.h"

namespace fp4forge::kvplan {

Result<SeatArg> merge_logged_options(const SeatArg& arg, const StartupLog& log) {
  const LoggedOptions o = logged_options(log);
  std::vector<std::string> pieces = arg.given;
  auto given = [&](std::string_view key) {
    return std::any_of(arg.given.begin(), arg.given.end(), [&](const std::string& p) {
      return p.size() > key.size() && p.compare(0, key.size(), key) == 0 && p[key.size()] == '=';
    });
  };
  for (const std::string& k : o.keys)
    if (!given(std::string_view(k).substr(0, k.find('=')))) pieces.push_back(k);
  if (!given("vllm_version") && log.version) {
    const LoggedSeat ls = read_logged_seat(log);
    if (ls.rules) {
      pieces.push_back("vllm_version=" + ls.rules->version);
    } else {
      std::string v = log.version->value;
      const std::size_t end = v.find_first_not_of("0123456789.");
      auto r = vllm_rules(v.substr(0, end == std::string::npos ? v.size() : end));
      if (!r.ok())
        return make_error(Errc::USAGE, "seat '{}': log={} is from vLLM {} (line {}): {}; or give vllm_version= to plan it "
                          "under another version's rules", arg.name, arg.log, log.version->value, log.version->line,
                          r.error().message);
    }
  }
  std::string text = arg.name + "=" + arg.dir.string();
  for (std::size_t i = 0; i < pieces.size(); ++i) text += (i == 0 ? ":" : ",") + pieces[i];
  auto merged = parse_seat_arg(text);
  if (!merged.ok()) {
    Error e = std::move(merged).error();
    e.message = fmt::format("seat '{}': an option of log={} is not one plan takes: {}", arg.name, arg.log, e.message);
    return e;
  }
  merged->given = arg.given;  // what the operator gave; the rest came from the log
  return merged;
}

void apply_logged_seat(SeatModel& m, LoggedSeat logged) {
  const StartupLog& log = logged.log;
  // max_num_batched_tokens: the args', else vLLM's default for the logged card when the log prints its total.
  if (!logged.batched && log.torch_total_bytes) {
    logged.batched = default_max_num_batched_tokens(log.torch_total_bytes->value, "");
    if (m.rules.big_gpu_batched_16k && log.torch_total_bytes->value >= 160 * kGiB) logged.batched = 16384;
  }
  measure_sliding_reserve(logged, m.layout, logged.rules ? *logged.rules : m.rules);
  if (!logged.sliding_note.empty()) m.notes.push_back("log: " + logged.sliding_note);
  if (logged.sliding_in_flight_batches && !m.arg.async_scheduling) {
    m.arg.async_scheduling = *logged.sliding_in_flight_batches == 2;
  } else if (logged.sliding_in_flight_batches && (*logged.sliding_in_flight_batches == 2) != *m.arg.async_scheduling) {
    m.notes.push_back(fmt::format("log: async_scheduling={} is given, but the log's concurrency shows the other "
                                  "sliding-window reserve", *m.arg.async_scheduling ? "on" : "off"));
  }
  const int logged_tp = logged.tp.value_or(1);
  if (log.weights_bytes && !m.arg.weights && logged_tp == m.arg.kv.tp) {
    m.weights_from_log = true;
    m.weight_bytes_per_rank = log.weights_bytes->value;
    m.weight_bytes = log.weights_bytes->value * static_cast<std::uint64_t>(m.arg.kv.tp);
  } else if (log.weights_bytes) {
    m.notes.push_back(fmt::format("log: its weights ({} per GPU at tp={}) are not carried ({}): plan's are used",
                                  format_bytes(log.weights_bytes->value), logged_tp,
                                  m.arg.weights ? "weights= is given" : fmt::format("the seat runs at tp={}", m.arg.kv.tp)));
  }
  for (const std::string& n : log.notes) m.notes.push_back("log: " + n);
  const LoggedOptions o = logged_options(log);
  if (!o.ignored.empty()) {
    std::string names;
    for (const auto& k : o.ignored) names += (names.empty() ? "" : ", ") + k;
    m.notes.push_back("log: args plan does not model or that change no memory figure: " + names);
  }
  m.logged = std::move(logged);
}

}  // namespace fp4forge::kvplan
