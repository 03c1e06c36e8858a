#include "fp4forge/kvplan/report.h"

#include <algorithm>
#include <cmath>

#include "fp4forge/util/size.h"
#include "fp4forge/util/strings.h"
#include "fp4forge/util/svg.h"
#include "fp4forge/util/text_wrap.h"

namespace fp4forge::kvplan {
namespace {

using Json = nlohmann::ordered_json;

/** Round a ratio for JSON (4 decimals; concurrency is a logged "x" figure). */
double round4(double x) { return std::round(x * 10000.0) / 10000.0; }

std::string gpu_ids(const Plan& plan, const std::vector<std::size_t>& set) {
  std::string s;
  for (std::size_t g : set) {
    if (!s.empty()) s += "+";
    s += plan.gpus[g].gpu.id;
  }
  return s;
}

std::string group_summary(const KvLayout& l) {
  // e.g. "5 x sliding_window (block 16, window 1024) + 1 x full_attention (block 32)"
  std::vector<std::pair<std::string, int>> kinds;
  for (const auto& g : l.groups) {
    std::string k = std::string(layer_kind_name(g.kind)) + " (block " + std::to_string(g.block_size);
    if (g.kind == LayerKind::SLIDING) k += ", window " + std::to_string(g.window);
    if (g.kind == LayerKind::STATE) k += ", " + std::to_string(g.state_pages) + " page(s)/request";
    k += ")";
    auto it = std::find_if(kinds.begin(), kinds.end(), [&](const auto& p) { return p.first == k; });
    if (it == kinds.end())
      kinds.push_back({k, 1});
    else
      ++it->second;
  }
  std::string s;
  for (const auto& [k, n] : kinds) {
    if (!s.empty()) s += " + ";
    s += std::to_string(n) + " x " + k;
  }
  return s;
}


}  // namespace

std::string format_util(double util) {
  std::string s = fmt::format("{:.4f}", util);
  while (s.size() > 3 && s.back() == '0') s.pop_back();
  return s;
}

namespace {

/** A seat's KV layout (dtypes, grouping, pages, groups) and what a request of it needs. */
Json kv_json(const KvLayout& l, const SeatPlacement& p) {
  Json kv;
  kv["dtype_bytes"] = l.kv_dtype_bytes;
  kv["conv_state_dtype_bytes"] = l.conv_dtype_bytes;
  kv["ssm_state_dtype_bytes"] = l.ssm_dtype_bytes;
  kv["growing_bytes_per_token"] = l.growing_bytes_per_token;
  kv["naive_bytes_per_token"] = l.naive_bytes_per_token;
  kv["grouping"] = std::string(grouping_mode_name(l.mode));
  kv["page_bytes"] = l.page_bytes;
  kv["group_size"] = l.group_size;
  kv["min_block_size"] = l.min_block_size;
  kv["attention_block_size"] = l.attn_block_size;
  kv["state_bytes"] = l.state_bytes > 0 ? Json(l.state_bytes) : Json(nullptr);
  kv["state_padding_bytes"] = l.state_bytes > 0 ? Json(l.state_padding_bytes) : Json(nullptr);
  kv["layers_with_kv"] = l.layers.size();
  kv["kv_shared_layers"] = l.kv_shared_layers;
  Json groups = Json::array();
  for (std::size_t g = 0; g < l.groups.size(); ++g) {
    const KvGroup& grp = l.groups[g];
    Json jg;
    jg["kind"] = std::string(layer_kind_name(grp.kind));
    jg["block_size"] = grp.block_size;
    jg["window"] = grp.kind == LayerKind::SLIDING ? Json(grp.window) : Json(nullptr);
    jg["state_pages"] = grp.kind == LayerKind::STATE ? Json(grp.state_pages) : Json(nullptr);
    jg["layers"] = grp.layers;
    jg["blocks_per_request"] = g < p.demand.blocks_per_group.size() ? p.demand.blocks_per_group[g] : 0;
    groups.push_back(jg);
  }
  kv["groups"] = groups;
  kv["blocks_per_request"] = p.demand.blocks_per_request;
  kv["per_request_bytes"] = p.demand.bytes_per_request;
  kv["needed_bytes"] = p.kv_needed_bytes;
  return kv;
}

/** Where a seat went and what it gets there (null where it was not placed). */
Json placement_json(const Plan& plan, const SeatPlacement& p) {
  const bool have_gpus = !plan.gpus.empty();
  Json pl;
  pl["placed"] = p.placed;
  pl["fits"] = have_gpus ? Json(p.fits) : Json(nullptr);
  pl["cannot_start"] = p.cannot_start;  // not fitting is no matter of memory: blocker says why
  Json ids = Json::array();
  for (std::size_t g : p.gpus) ids.push_back(plan.gpus[g].gpu.id);
  pl["gpus"] = ids;
  pl["gpu_memory_utilization"] = p.placed ? Json(p.util) : Json(nullptr);
  pl["utilization_explicit"] = p.util_explicit;
  pl["need_bytes"] = p.need_bytes;
  pl["max_num_seqs"] = p.max_num_seqs;
  pl["max_num_seqs_default"] = p.seqs_default;
  pl["startup_free_needed_bytes"] = p.placed ? Json(p.budget_bytes + p.outside_bytes) : Json(nullptr);
  pl["budget_bytes"] = p.placed ? Json(p.budget_bytes) : Json(nullptr);
  pl["available_kv_bytes"] = p.placed ? Json(p.available_kv_bytes) : Json(nullptr);
  pl["num_blocks"] = p.placed ? Json(p.num_blocks) : Json(nullptr);
  pl["max_concurrency"] = p.placed ? Json(round4(p.max_concurrency)) : Json(nullptr);
  pl["kv_cache_tokens"] = p.placed ? Json(p.kv_cache_tokens) : Json(nullptr);
  pl["largest_max_model_len"] = (p.placed || p.largest_max_model_len > 0) ? Json(p.largest_max_model_len) : Json(nullptr);
  pl["min_gpu_memory_utilization"] = have_gpus ? Json(round4(p.min_util)) : Json(nullptr);
  pl["short_by_bytes"] = p.short_by_bytes;
  pl["blocker"] = p.blocker.empty() ? Json(nullptr) : Json(p.blocker);
  pl["startup_refused"] = p.startup_refused;
  pl["startup_free_bytes"] = p.startup_refused ? Json(p.startup_free_bytes) : Json(nullptr);
  pl["startup_max_gpu_memory_utilization"] = p.startup_refused ? Json(round4(p.startup_max_util)) : Json(nullptr);
  pl["reason"] = p.reason;
  pl["kv_margin_bytes"] = p.kv_margin_bytes;
  pl["replaced_by"] = p.replaced_by.empty() ? Json(nullptr) : Json(p.replaced_by);
  pl["freed_bytes"] = p.freed_bytes;
  return pl;
}

}  // namespace

Json to_json(const Plan& plan) {
  Json j;
  const bool have_gpus = !plan.gpus.empty();
  // the exit code's verdict (planner.cc exit_code adds --emit-compose's)
  j["ok"] = (!have_gpus || plan.all_fit) && plan.all_start;
  j["schema"] = kPlanSchema;
  j["all_fit"] = have_gpus ? Json(plan.all_fit) : Json(nullptr);
  j["all_start"] = plan.all_start;
  j["searched"] = plan.searched;
  Json seats = Json::array();
  for (std::size_t s = 0; s < plan.seats.size(); ++s) {
    const SeatModel& m = plan.seats[s];
    const SeatPlacement& p = plan.placements[s];
    const SeatArg& a = m.arg;
    Json js;
    js["name"] = a.name;
    js["dir"] = a.dir.string();
    js["served_name"] = a.served_name;
    js["architecture"] = m.info.architecture;
    js["family"] = std::string(family_name(m.info.family));
    js["model_type"] = m.info.text_model_type.empty() ? m.info.model_type : m.info.text_model_type;
    Json o;
    o["max_model_len"] = m.max_model_len;
    o["max_model_len_default"] = !a.max_model_len.has_value();
    o["kv_cache_dtype"] = kv_cache_dtype_name(a.kv.kv_cache_dtype);
    o["gpu_memory_utilization"] = a.gpu_memory_utilization ? Json(*a.gpu_memory_utilization) : Json(nullptr);
    o["max_num_batched_tokens"] = p.max_num_batched_tokens;
    o["max_num_batched_tokens_default"] = p.batched_default;
    o["tp"] = a.kv.tp;
    o["prefix_caching"] = a.kv.prefix_caching;
    o["spec_tokens"] = a.kv.spec_tokens;
    o["mm"] = a.mm;
    o["assume"] = a.assume ? Json(std::string(quant_scheme_name(*a.assume))) : Json(nullptr);
    o["recipe"] = a.recipe.empty() ? Json(nullptr) : Json(a.recipe);
    o["concurrency"] = a.concurrency;
    o["block_size"] = a.kv.block_size > 0 ? Json(a.kv.block_size) : Json(nullptr);
    o["mamba_ssm_dtype"] = state_dtype_name(a.kv.mamba_ssm_cache_dtype);
    o["mamba_cache_dtype"] = state_dtype_name(a.kv.mamba_cache_dtype);
    o["hybrid_manager"] = a.kv.hybrid_kv_cache_manager;
    o["pinned_gpus"] = a.gpus;
    js["options"] = o;
    Json w;
    w["bytes"] = m.weight_bytes;
    w["per_gpu_bytes"] = m.weight_bytes_per_rank;
    w["source"] = m.weights_from_log ? std::string("log")
                  : m.weights_given ? std::string("given")
                  : a.assume      ? "safetensors+" + std::string(quant_scheme_name(*a.assume))
                                  : std::string("safetensors");
    w["stored_bytes"] = m.weights_given ? Json(nullptr) : Json(m.weights.stored_bytes);
    w["quantization"] = m.quantization.empty() ? Json(nullptr) : Json(m.quantization);  // as stored (issue 55)
    w["duplicated_v_bytes"] = m.weights.duplicated_v_bytes;
    w["mtp_bytes"] = m.weights.mtp_bytes;
    w["mtp_included"] = a.kv.spec_tokens > 0 && !m.weights_given;
    w["upcast_saved_bytes"] = m.weights.upcast_saved_bytes;
    w["quantized_saved_bytes"] = m.weights.quantized_saved_bytes;
    w["nvfp4a16_saved_bytes"] = m.weights.quantized_saved_bytes;  // the same figure, under its 0.1 name
    w["nvfp4a16_linears"] = m.weights.quantized_linears;
    js["weights"] = w;
    const OverheadTerms& t = p.terms;
    js["vllm"] = {{"version", m.rules.version},
                  {"tokens_report", tokens_report_name(m.rules.tokens)},
                  {"default_gpu_memory_utilization", m.rules.default_util},
                  {"sliding_in_flight_tokens", p.demand.in_flight_tokens},
                  {"cuda_graphs_in_budget", m.rules.cuda_graphs_in_budget},
                  {"startup_check", m.rules.startup_check},
                  {"async_scheduling", p.async_scheduling},
                  {"kv_from_free_memory", m.rules.kv_from_free_memory && t.v2_runner}};
    js["overhead"] = {{"bytes", p.overhead_bytes},
                      {"source", p.overhead_default ? "estimate" : (p.calibration && p.calibration->measured) ? "log"
                                                                                                              : "explicit"},
                      {"estimate_bytes", t.in_budget()},
                      {"terms", {{"activation_bytes", t.activation},
                                 {"sampler_bytes", t.sampler},
                                 {"encoder_bytes", t.encoder},
                                 {"non_torch_bytes", t.non_torch},
                                 {"cuda_graphs_bytes", t.cuda_graphs},
                                 {"cuda_graph_sizes", t.cuda_graph_sizes},
                                 {"cuda_graphs_in_budget", t.cuda_graphs_in_budget},
                                 {"model_runner", t.v2_runner ? "v2" : "v1"},
                                 {"cuda_context_bytes", t.cuda_context},
                                 {"nccl_bytes", t.nccl}}},
                      {"outside_budget_bytes", p.outside_bytes}};
    js["kv"] = kv_json(m.layout, p);
    js["placement"] = placement_json(plan, p);
    js["calibration"] = m.logged ? to_json(*m.logged, p.calibration ? &*p.calibration : nullptr) : Json(nullptr);
    js["sensitivity"] = to_json(p.sensitivity);
    js["notes"] = m.notes;
    js["serving"] = to_json(m.serving);  // image, parsers, vllm_args, why vLLM could not start it (serving.h)
    js["hub"] = hf_cache::to_json(m.hub);
    seats.push_back(js);
  }
  j["seats"] = seats;
  Json gpus = Json::array();
  for (const auto& g : plan.gpus) {
    Json jg;
    jg["id"] = g.gpu.id;
    jg["name"] = g.gpu.name;
    jg["total_bytes"] = g.gpu.total_bytes;
    jg["reserved_bytes"] = g.gpu.reserved_bytes;
    jg["reserved_source"] = g.gpu.reserved_source;
    jg["torch_total_bytes"] = g.gpu.torch_total();
    jg["used_bytes"] = g.gpu.used_bytes;
    jg["unified"] = g.gpu.unified;
    jg["free_given_bytes"] = g.gpu.free_given ? Json(*g.gpu.free_given) : Json(nullptr);
    jg["free_bytes"] = g.free_bytes;
    jg["headroom_bytes"] = g.gpu.headroom_bytes;
    Json sh = Json::array();
    for (const auto& s : g.shares)
      sh.push_back({{"seat", plan.seats[s.seat].arg.name}, {"budget_bytes", s.budget},
                    {"weights_bytes", s.weights}, {"kv_bytes", s.kv}, {"overhead_bytes", s.overhead},
                    {"outside_bytes", s.outside}});
    jg["seats"] = sh;
    gpus.push_back(jg);
  }
  j["gpus"] = gpus;
  j["notes"] = plan.notes;
  return j;
}

namespace {

/** A memory figure in a table cell: GiB with two decimals, so a column reads in one unit (a figure below 0.01 GiB
 * keeps its own binary unit rather than show as 0.00). */
std::string gib_cell(std::uint64_t bytes) {
  if (bytes != 0 && bytes < kGiB / 100) return format_bytes(bytes);
  return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / static_cast<double>(kGiB));
}

/** A text table whose columns are as wide as their widest cell (issue 55: names over 16 characters pushed the
 * rest out of line). `right[i]`: column i is right-aligned. The last column is not padded. */
std::string table(const std::vector<std::vector<std::string>>& rows, const std::vector<bool>& right) {
  std::vector<std::size_t> w(right.size(), 0);
  for (const auto& r : rows)
    for (std::size_t c = 0; c < r.size() && c < w.size(); ++c) w[c] = std::max(w[c], util::text_cells(r[c]));
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (std::size_t c = 0; c < r.size() && c < w.size(); ++c) {
      const std::string pad(w[c] - util::text_cells(r[c]), ' ');
      if (c > 0) line += c + 1 == r.size() ? "  " : " ";
      line += right[c] ? pad + r[c] : (c + 1 == r.size() ? r[c] : r[c] + pad);
    }
    out += line + "\n";
  }
  return out;
}

/** Where the seat's vLLM version comes from: given, its log's, or the default (the newest modelled). */
std::string version_origin(const SeatModel& m) {
  const bool given = std::any_of(m.arg.given.begin(), m.arg.given.end(),
                                 [](const std::string& g) { return g.starts_with("vllm_version="); });
  if (given) return fmt::format("given: vllm_version={}", m.arg.vllm.version);
  if (m.logged && m.arg.vllm_version_given) return fmt::format("the version log={} prints", m.arg.log);
  return fmt::format("the default, the newest modelled; vllm_version= sets it");
}

/** A seat's "weights" line: the size, where it comes from, and per GPU under tensor parallelism. */
std::string weights_line(const SeatModel& m) {
  std::string wnote;
  if (m.weights_given) wnote = " (given)";
  if (m.weights.duplicated_v_bytes)
    wnote += fmt::format(", incl. {} duplicated V", format_bytes(m.weights.duplicated_v_bytes));
  if (m.weights.mtp_bytes)
    wnote += fmt::format(", MTP {} {}", format_bytes(m.weights.mtp_bytes),
                         m.arg.kv.spec_tokens > 0 ? "included" : "not loaded");
  if (m.arg.assume)
    wnote += m.arg.recipe.empty()
                 ? fmt::format(", {} assumed for {} Linears", quant_scheme_preset(*m.arg.assume),
                               format_count(m.weights.quantized_linears))
                 : fmt::format(", recipe {} (default {}) assumed for {} Linears", m.arg.recipe,
                               quant_scheme_preset(*m.arg.assume), format_count(m.weights.quantized_linears));
  if (!m.quantization.empty() && !m.weights_given && !m.weights_from_log)
    wnote += fmt::format(", stored {}", util::printable(m.quantization, util::kReportLine));
  std::string o = fmt::format("  weights          {}{}", format_bytes(m.weight_bytes), wnote);
  if (m.arg.kv.tp > 1) o += fmt::format("; {} per GPU (tp={})", format_bytes(m.weight_bytes_per_rank), m.arg.kv.tp);
  return o + "\n";
}

/** The summary table: a row per seat, columns as wide as their content, memory in GiB. */
std::string summary_table(const Plan& plan, bool have_gpus) {
  std::vector<std::vector<std::string>> rows{{"SEAT", "GPU", "UTIL", "WEIGHTS", "OVERHEAD", "KV/REQUEST", "KV MEMORY",
                                              "BLOCKS", "CONC", "MAX LEN", "LARGEST LEN", "FITS"}};
  for (std::size_t s = 0; s < plan.seats.size(); ++s) {
    const SeatModel& m = plan.seats[s];
    const SeatPlacement& p = plan.placements[s];
    if (!p.replaced_by.empty()) {  // it stops for another seat: nothing of it is sized
      rows.push_back({m.arg.name, "-", "-", gib_cell(m.weight_bytes_per_rank), "-", "-", "-", "-", "-", "-", "-",
                      "stops for " + util::fit_cells(util::printable(p.replaced_by, util::kReportLine), 30)});
      continue;
    }
    rows.push_back(
        {m.arg.name, p.placed ? gpu_ids(plan, p.gpus) : "-", p.placed ? format_util(p.util) : "-",
         gib_cell(m.weight_bytes_per_rank), gib_cell(p.overhead_bytes), gib_cell(p.demand.bytes_per_request),
         p.placed ? gib_cell(p.available_kv_bytes) : "-",
         p.placed ? format_count(static_cast<std::uint64_t>(p.num_blocks)) : "-",
         p.placed ? fmt::format("{:.2f}x", p.max_concurrency) : "-",
         // the planned length, then the largest that fits (issue 55 tryout: one column read as the other)
         format_count(static_cast<std::uint64_t>(m.max_model_len)),
         p.largest_max_model_len > 0 ? format_count(static_cast<std::uint64_t>(p.largest_max_model_len)) : "-",
         !have_gpus ? "n/a"
         : p.fits   ? (p.cannot_start ? "yes, cannot start" : "yes")
         // a long reason is cut here: the seat's lines and the notes below give it whole
         : !p.blocker.empty() ? "NO, " + util::fit_cells(util::printable(p.blocker, util::kReportLine), 40)
                              : "NO, short by " + format_bytes(p.short_by_bytes)});
  }
  return table(rows, {false, false, true, true, true, true, true, true, true, true, true, false});
}

}  // namespace

std::string to_text(const Plan& plan) {
  std::string o;
  const bool have_gpus = !plan.gpus.empty();
  for (std::size_t s = 0; s < plan.seats.size(); ++s) {
    const SeatModel& m = plan.seats[s];
    const SeatPlacement& p = plan.placements[s];
    const KvLayout& l = m.layout;
    o += fmt::format("seat {}  ({} {}, {})\n", m.arg.name, family_name(m.info.family),
                     m.info.architecture.empty() ? "-" : m.info.architecture, m.arg.dir.string());
    o += weights_line(m);
    if (!p.replaced_by.empty()) {
      // A seat that stops is not sized (no overhead, KV or serving figures: tryout note, they read as zeros); what
      // it frees is counted in used= and said under the GPU table.
      o += fmt::format("  {}\n\n", p.reason);
      continue;
    }
    o += fmt::format("  vLLM             {} rules ({}; GPU KV cache size as {}){}\n", m.rules.version,
                     version_origin(m), tokens_report_name(m.rules.tokens),
                     m.rules.sliding_in_flight_factor > 1 && std::any_of(l.groups.begin(), l.groups.end(), [](const KvGroup& g) {
                       return g.kind == LayerKind::SLIDING;
                     }) ? fmt::format("; async scheduling {}: sliding layers keep window - 1 + {} tokens",
                                      p.async_scheduling ? "on" : "off", p.demand.in_flight_tokens)
                        : std::string());
    // The terms add up to the estimate: the profile peak is the larger of activations and sampler, not their sum
    // (issue 55 tryout: the listed terms summed past the total).
    o += fmt::format(
        "  overhead         {} per GPU ({}): profile peak {} (the larger of activations {} and sampler {}){}, "
        "non-torch {}, CUDA graphs {} ({} sizes{})\n",
        format_bytes(p.overhead_bytes),
        p.overhead_default ? "estimate, docs/plan-overheads.md"
        : (p.calibration && p.calibration->measured)
            // Carried to other settings or rules, it is no longer the measurement: both said (tryout
            // L-L6: "measured" for 3.89 GiB measured plus CUDA graphs moved into the budget by newer rules).
            ? (p.calibration->bytes == p.calibration->measured_bytes
                   ? fmt::format("measured by the seat's log; the estimate is {}", format_bytes(p.terms.in_budget()))
                   : fmt::format("the seat's log measured {}, carried to these settings and rules below; "
                                 "the estimate is {}",
                                 format_bytes(p.calibration->measured_bytes), format_bytes(p.terms.in_budget())))
            : fmt::format("given; the estimate is {}", format_bytes(p.terms.in_budget())),
        format_bytes(p.terms.profile_peak), format_bytes(p.terms.activation), format_bytes(p.terms.sampler),
        p.terms.encoder ? ", encoder " + format_bytes(p.terms.encoder) : std::string(), format_bytes(p.terms.non_torch),
        format_bytes(p.terms.cuda_graphs), p.terms.cuda_graph_sizes,
        p.terms.cuda_graphs_in_budget ? ""
                                      : ", beside the budget: captured after the KV cache (before 0.21, "
                                        "and Model Runner V2 before 0.29)");
    if (m.logged) o += to_text(*m.logged, p.calibration ? &*p.calibration : nullptr);
    o += fmt::format("  beside budget    {} per GPU (CUDA context{}{}): must be free at start-up too\n",
                     format_bytes(p.outside_bytes), p.terms.nccl ? ", NCCL" : "",
                     p.terms.cuda_graphs_in_budget ? "" : ", CUDA graphs");
    o += fmt::format("  KV per token     {} growing (full attention), {} if every attention layer kept all tokens\n",
                     format_bytes(l.growing_bytes_per_token), format_bytes(l.naive_bytes_per_token));
    std::string layout = fmt::format("{}: page {}, {} pool(s) of {} group(s)", grouping_mode_name(l.mode),
                                     format_bytes(l.page_bytes), l.group_size, l.groups.size());
    if (l.state_bytes) layout += fmt::format("; state {} padded by {}", format_bytes(l.state_bytes),
                                             format_bytes(l.state_padding_bytes));
    if (!l.kv_shared_layers.empty()) layout += fmt::format("; {} KV-shared layers", l.kv_shared_layers.size());
    o += fmt::format("  KV layout        {}\n", layout);
    o += fmt::format("  groups           {}\n", group_summary(l));
    o += fmt::format("  per request      {} = {} blocks at max_model_len {}, max_num_batched_tokens {}{}, "
                     "max_num_seqs {}{}\n",
                     format_bytes(p.demand.bytes_per_request),
                     format_count(static_cast<std::uint64_t>(p.demand.blocks_per_request)),
                     format_count(static_cast<std::uint64_t>(m.max_model_len)), p.max_num_batched_tokens,
                     p.batched_default ? " (vLLM default for the GPU)" : "", p.max_num_seqs,
                     p.seqs_default ? " (default)" : "");
    if (p.placed) {
      o += fmt::format("  placement        GPU {}, gpu_memory_utilization {}{} -> budget {}\n", gpu_ids(plan, p.gpus),
                       format_util(p.util), p.util_explicit ? " (given)" : "", format_bytes(p.budget_bytes));
      o += fmt::format("  KV memory        {} -> num_blocks {}, maximum concurrency {:.2f}x at {} tokens, "
                       "KV cache size {} tokens\n", format_bytes(p.available_kv_bytes),
                       format_count(static_cast<std::uint64_t>(p.num_blocks)), p.max_concurrency,
                       format_count(static_cast<std::uint64_t>(m.max_model_len)),
                       format_count(static_cast<std::uint64_t>(p.kv_cache_tokens)));
      o += fmt::format("  largest max_model_len that fits  {}{}\n",
                       format_count(static_cast<std::uint64_t>(p.largest_max_model_len)),
                       m.arg.concurrency > 1.0 ? fmt::format(" (for {:g} requests, concurrency=)", m.arg.concurrency)
                                               : std::string());
      if (p.kv_margin_bytes)
        o += fmt::format("  KV margin        {} less KV: vLLM {} sizes the cache from the memory free after warm-up, "
                         "less a margin (inferred)\n", format_bytes(p.kv_margin_bytes), m.rules.version);
      o += to_text(p.sensitivity, p.max_concurrency);
    }
    if (have_gpus)
      o += fmt::format("  smallest utilization for {} x {} tokens  {}\n", m.arg.concurrency,
                       format_count(static_cast<std::uint64_t>(m.max_model_len)),
                       p.min_util > 1.0 ? std::string("none (needs more than the whole GPU)")
                                        : format_util(p.min_util));
    o += fmt::format("  {}  {}\n",
                     p.fits           ? "fits "
                     : !have_gpus     ? "why  "
                     : p.cannot_start ? "NO START"
                                      : "NO FIT",
                     p.reason);
    for (const auto& n : m.notes) o += fmt::format("  note: {}\n", n);
    o += to_text(m.serving);  // image, parsers, vllm_args, why vLLM could not start it (serving.h)
    o += "\n";
  }
  // Prose is one line per item: cli::print_report wraps it on a terminal (issue 55 tryout: wrapped at 100 columns
  // into a log, grep lost the continuation lines).
  o += summary_table(plan, have_gpus);
  if (have_gpus) {
    // The GPU table (a long product name is cut: the reserve lines below give it whole), then the driver reserve
    // each GPU's torch total leaves out and where that figure comes from.
    std::vector<std::vector<std::string>> gr{
        {"GPU", "NAME", "TOTAL", "RESERVE", "TORCH TOTAL", "OTHERS", "SEATS", "FREE", "HEADROOM", "SEATS ON IT"}};
    std::string reserves;
    for (const auto& g : plan.gpus) {
      std::uint64_t seats = 0;
      std::string names;
      for (const auto& sh : g.shares) {
        seats += sh.budget + sh.outside;
        if (!names.empty()) names += ", ";
        names += plan.seats[sh.seat].arg.name;
      }
      const std::string name = g.gpu.name.empty() ? "-" : util::printable(g.gpu.name, util::kReportLine);
      gr.push_back({util::printable(g.gpu.id, 64), util::fit_cells(name, 28), gib_cell(g.gpu.total_bytes),
                    gib_cell(g.gpu.reserved_bytes), gib_cell(g.gpu.torch_total()), gib_cell(g.gpu.used_bytes),
                    gib_cell(seats), gib_cell(g.free_bytes), gib_cell(g.gpu.headroom_bytes),
                    names.empty() ? "-" : names});
      const bool estimated = g.gpu.reserved_source == kReserveDefaultEstimate;
      const std::string card_hint = card_total_hint(g.gpu.total_bytes, g.gpu.name);
      reserves +=
          fmt::format("GPU {}: driver reserve {}, {}{}\n", util::printable(g.gpu.id, 64),
                      format_bytes(g.gpu.reserved_bytes), util::printable(g.gpu.reserved_source, util::kReportLine),
                      estimated ? fmt::format(" (614 MiB, at most a tenth of the total; {}: torch's total may differ); "
                                              "give reserved= or torch_total= (as torch "
                                              "prints it) when you know the card's figures",
                                              g.gpu.name.empty()  ? std::string("no name= to match a measured card")
                                              : card_hint.empty() ? fmt::format("no card measured matches '{}'", name)
                                                                  : card_hint)
                                : "");
    }
    o += "\n" + table(gr, {false, false, true, true, true, true, true, true, true, false});
    o += reserves;
  }
  o += "\n";
  for (const auto& n : plan.notes) o += n + "\n";
  return o;
}

}  // namespace fp4forge::kvplan
