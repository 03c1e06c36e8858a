#include "fp4forge/kvplan/placement.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <tuple>

#include "fp4forge/util/checked.h"
#include "fp4forge/util/format.h"
#include "fp4forge/util/size.h"

namespace fp4forge::kvplan {
namespace {

constexpr std::size_t kSearchNodeLimit = 200'000;

/** Figures of a seat on a GPU set whose rank 0 is `rank0` (batch defaults and overhead depend on it). */
struct Eval {
  std::int64_t batched = 0;
  bool batched_default = true;
  std::int64_t seqs = 0;
  bool seqs_default = true;
  OverheadTerms terms;
  std::uint64_t overhead = 0;   // in the budget
  bool overhead_default = true;
  std::uint64_t outside = 0;    // beside the budget
  KvDemand demand;
  std::uint64_t kv_need = 0;
  std::uint64_t need = 0;  // per GPU, inside the budget
  bool async = true;       // async scheduling (the sliding-window reserve counts two batches from 0.26)
  std::optional<CalibratedOverhead> calibration;  // log=FILE: the measured overhead, carried
};

Eval evaluate(const SeatModel& s, const GpuSpec* rank0) {
  Eval e;
  const VllmRules& r = s.rules;
  // Without a GPU, assume the common >= 70 GiB non-A100 case.
  const std::uint64_t total = rank0 ? rank0->total_bytes : 80 * kGiB;
  const std::string_view name = rank0 ? std::string_view(rank0->name) : std::string_view();
  if (s.arg.max_num_batched_tokens) {
    e.batched = *s.arg.max_num_batched_tokens;
    e.batched_default = false;
  } else {
    e.batched = default_max_num_batched_tokens(total, name);
    if (r.big_gpu_batched_16k && total >= 160 * kGiB) e.batched = 16384;
  }
  if (s.arg.max_num_seqs) {
    e.seqs = *s.arg.max_num_seqs;
    e.seqs_default = false;
  } else {
    e.seqs = default_max_num_seqs(total, name);
  }
  const ProfileShape shape = seat_profile_shape(s, e.batched, e.seqs, name);
  e.terms = estimate_overhead(s.info, shape, r);
  e.outside = e.terms.outside_budget();
  if (s.overhead) {
    e.overhead = *s.overhead;
    e.overhead_default = false;
  } else if (s.logged) {  // the seat's own log: its measured overhead, carried to these settings
    CalibrationInput in;
    in.logged = &*s.logged;
    in.info = &s.info;
    in.layout = &s.layout;
    in.planned = shape;
    in.planned_rules = &r;
    in.planned_terms = e.terms;
    in.gpu_torch_total = rank0 ? rank0->torch_total() : 0;
    in.gpu_id = rank0 ? rank0->id : std::string();
    const std::uint64_t logged_total =
        s.logged->log.torch_total_bytes ? s.logged->log.torch_total_bytes->value : total;
    in.default_batched = s.logged->batched.value_or(default_max_num_batched_tokens(logged_total, name));
    in.default_seqs = default_max_num_seqs(logged_total, name);
    const auto tp = static_cast<std::uint64_t>(std::max(1, s.arg.kv.tp));
    in.weights_estimate = s.weights_from_log ? (s.weights.bytes + tp - 1) / tp : s.weight_bytes_per_rank;
    in.weights_from_log = s.weights_from_log;
    in.has_tower = s.info.has_vision_config || s.info.has_audio_config;
    e.calibration = calibrate_overhead(in);
    e.overhead = e.calibration->bytes;
    e.overhead_default = !e.calibration->measured;
  } else {
    e.overhead = e.terms.in_budget();
  }
  e.async = s.arg.async_scheduling.value_or(true);
  e.demand = kv_demand(s.layout, s.max_model_len, sliding_in_flight_tokens(r, e.batched, e.async));
  e.kv_need = kv_bytes_for_concurrency(s.layout, e.demand, s.arg.concurrency);
  e.need = util::sat_add(util::sat_add(s.weight_bytes_per_rank, e.overhead), e.kv_need);
  return e;
}

}  // namespace

ProfileShape seat_profile_shape(const SeatModel& s, std::int64_t batched, std::int64_t seqs, std::string_view gpu_name) {
  ProfileShape shape;
  shape.batched_tokens = batched;
  shape.max_num_seqs = seqs;
  shape.tp = s.arg.kv.tp;
  shape.spec_tokens = s.arg.kv.spec_tokens;
  shape.multimodal = s.arg.mm && (s.info.has_vision_config || s.info.has_audio_config);
  shape.enforce_eager = s.arg.enforce_eager;
  shape.v2_runner = v2_model_runner(s.rules, s.info.architecture,
                                    s.info.text_model_type.empty() ? s.info.model_type : s.info.text_model_type,
                                    s.info.num_experts > 0, s.layout.has_state_layers());
  shape.sm100 = sm100_family(gpu_name);
  return shape;
}

namespace {

/** vLLM's requested memory: util * torch total, rounded up since 0.14 (the float's floor before). */
std::uint64_t util_bytes(double util, const GpuSpec& g, const VllmRules& r) {
  const double x = util * static_cast<double>(g.torch_total());
  return static_cast<std::uint64_t>(r.requested_ceil ? std::ceil(x) : std::floor(x));
}

std::string gpu_list(const std::vector<GpuSpec>& gpus, const std::vector<std::size_t>& set) {
  std::string s;
  for (std::size_t k = 0; k < set.size(); ++k) {
    if (k) s += (k + 1 == set.size()) ? " and " : ", ";
    s += gpus[set[k]].id;
  }
  return s;
}

/** ", keeping its headroom of H" for the reasons of a seat that does not fit ("" without headroom). */
std::string headroom_text(const std::vector<GpuSpec>& gpus, const std::vector<std::size_t>& set) {
  std::uint64_t h = 0;
  for (std::size_t g : set) h = std::max(h, gpus[g].headroom_bytes);
  return h == 0 ? std::string()
                : fmt::format(" and its headroom of {} (kept free: headroom= or --headroom sets it)", format_bytes(h));
}

struct Placer {
  const std::vector<SeatModel>& seats;
  const std::vector<GpuSpec>& gpus;
  std::vector<std::vector<std::size_t>> pins;  // per seat: pinned GPU indices (empty = free)
  std::vector<std::uint64_t> initial;           // per GPU: free memory before any seat (a GPU below it holds one)
  std::vector<bool> stops;                      // per seat: replaced (replaces=), so not placed
  bool out(std::size_t s) const { return !seats[s].refusal.empty() || (s < stops.size() && stops[s]); }

  /** What seat s holds on GPU g: its budget (util * torch total, or just what it needs when the planner
   * chooses the utilization) plus what it holds beside the budget. */
  std::uint64_t reserve_on(std::size_t s, std::size_t g, const Eval& e) const {
    const auto& u = seats[s].arg.gpu_memory_utilization;
    return util::sat_add(u ? util_bytes(*u, gpus[g], seats[s].rules) : e.need, e.outside);
  }
  std::uint64_t budget_on(std::size_t s, std::size_t g, const Eval& e) const { return reserve_on(s, g, e) - e.outside; }

  /** Shortfall of seat s on set (0 = fits), given remaining free memory per GPU. */
  std::uint64_t shortfall(std::size_t s, const std::vector<std::size_t>& set,
                          const std::vector<std::uint64_t>& remaining) const {
    const Eval e = evaluate(seats[s], &gpus[set.front()]);
    std::uint64_t worst = 0;
    for (std::size_t g : set) {
      const std::uint64_t res = reserve_on(s, g, e);
      if (res > remaining[g]) worst = std::max(worst, res - remaining[g]);
      const std::uint64_t budget = budget_on(s, g, e);
      if (budget < e.need) worst = std::max(worst, e.need - budget);  // explicit util too small
    }
    return worst;
  }

  /** Candidate GPU sets of seat s, roomiest first. */
  std::vector<std::vector<std::size_t>> candidates(std::size_t s, const std::vector<std::uint64_t>& remaining) const {
    if (!pins[s].empty()) return {pins[s]};
    const auto k = static_cast<std::size_t>(seats[s].arg.kv.tp);
    std::vector<std::vector<std::size_t>> out;
    if (k > gpus.size()) return out;
    std::vector<std::size_t> idx(k);
    std::iota(idx.begin(), idx.end(), 0);
    for (;;) {
      out.push_back(idx);
      std::size_t i = k;
      while (i > 0 && idx[i - 1] == gpus.size() - k + i - 1) --i;
      if (i == 0) break;
      ++idx[i - 1];
      for (std::size_t j = i; j < k; ++j) idx[j] = idx[j - 1] + 1;
    }
    // Spread first: a set of GPUs no seat uses yet before one a seat already shares (an operator never wants
    // one GPU crowded while another stands empty), then the roomiest.
    auto key = [&](const std::vector<std::size_t>& set) {
      std::uint64_t mn = UINT64_MAX, sum = 0;
      std::size_t busy = 0;
      for (std::size_t g : set) {
        mn = std::min(mn, remaining[g]);
        sum += remaining[g];
        if (g < initial.size() && remaining[g] < initial[g]) ++busy;
      }
      return std::tuple(set.size() - busy, mn, sum);
    };
    std::stable_sort(out.begin(), out.end(), [&](const auto& a, const auto& b) { return key(a) > key(b); });
    // Rank 0 first within a set: the roomiest GPU.
    for (auto& set : out)
      std::stable_sort(set.begin(), set.end(),
                       [&](std::size_t a, std::size_t b) { return remaining[a] > remaining[b]; });
    return out;
  }

  void take(std::size_t s, const std::vector<std::size_t>& set, std::vector<std::uint64_t>& remaining) const {
    const Eval e = evaluate(seats[s], &gpus[set.front()]);
    for (std::size_t g : set) remaining[g] -= std::min(remaining[g], reserve_on(s, g, e));
  }

  bool search(const std::vector<std::size_t>& order, std::size_t pos, std::vector<std::uint64_t>& remaining,
              std::vector<std::vector<std::size_t>>& assign, std::size_t& nodes) const {
    if (pos == order.size()) return true;
    const std::size_t s = order[pos];
    if (out(s)) return search(order, pos + 1, remaining, assign, nodes);  // takes no room
    for (const auto& set : candidates(s, remaining)) {
      if (++nodes > kSearchNodeLimit) return false;
      if (shortfall(s, set, remaining) != 0) continue;
      std::vector<std::uint64_t> saved = remaining;
      take(s, set, remaining);
      assign[s] = set;
      if (search(order, pos + 1, remaining, assign, nodes)) return true;
      remaining = std::move(saved);
      assign[s].clear();
    }
    return false;
  }
};

double ceil_to(double x, double step) { return std::ceil(x / step - 1e-12) * step; }

/** KV memory of a seat on one GPU with budget b: b - weights - overhead. Before 0.9.1 vLLM also charged
 * everything already on the GPU (its CUDA context, other tenants) against the budget. */
std::uint64_t kv_memory(const SeatModel& m, const Eval& e, const GpuSpec& g, std::uint64_t b) {
  std::uint64_t fixed = util::sat_add(m.weight_bytes_per_rank, e.overhead);
  if (!m.rules.budget_from_snapshot) fixed = util::sat_add(fixed, util::sat_add(e.outside, g.used_bytes));
  return b > fixed ? b - fixed : 0;
}

/** The figures of an evaluation every placement reports. */
void record(SeatPlacement& p, const Eval& e) {
  p.max_num_batched_tokens = e.batched;
  p.batched_default = e.batched_default;
  p.max_num_seqs = e.seqs;
  p.seqs_default = e.seqs_default;
  p.terms = e.terms;
  p.overhead_bytes = e.overhead;
  p.overhead_default = e.overhead_default;
  p.outside_bytes = e.outside;
  p.demand = e.demand;
  p.kv_needed_bytes = e.kv_need;
  p.need_bytes = e.need;
  p.async_scheduling = e.async;
  p.calibration = e.calibration;
}


/** What the placement steps share: the seats' order, each one's GPU set (or the best one tried), and the
 * room the GPUs have left. */
struct Placing {
  Plan& plan;
  const std::vector<GpuSpec>& gpus;
  Placer& placer;
  std::vector<std::uint64_t> remaining;  ///< free memory of each GPU before any seat
  std::size_t roomiest = 0;
  std::vector<std::size_t> order;
  std::vector<std::vector<std::size_t>> assign, tried;
  std::vector<std::uint64_t> short_by, free_at_turn;
  std::vector<Eval> evals;
  std::vector<std::uint64_t> spare;
  /** Each seat's share of each GPU's spare memory above its need (bytes; seats without a given utilization),
   * filled in proportion to KV demand and capped at vLLM's default utilization, the excess of a capped seat going
   * to the others (share_spare). */
  std::vector<std::vector<double>> extra;
};

/** Water-filling of each GPU's spare memory among the seats on it whose utilization plan chooses: in proportion to
 * their KV demand, a seat's share capped where its utilization would pass vLLM's default, and what a capped seat
 * leaves shared again among the rest (issue 55 tryout G: a seat beside a capped one got 0.01 while 4.29 GiB stayed
 * free on the GPU). */
void share_spare(Placing& pl) {
  const Plan& plan = pl.plan;
  const std::size_t ns = plan.seats.size();
  pl.extra.assign(ns, std::vector<double>(pl.gpus.size(), 0.0));
  for (std::size_t g = 0; g < pl.gpus.size(); ++g) {
    const double total = static_cast<double>(pl.gpus[g].torch_total());
    std::vector<std::size_t> active;
    for (std::size_t s = 0; s < ns; ++s)
      if (!plan.seats[s].arg.gpu_memory_utilization &&
          std::find(pl.assign[s].begin(), pl.assign[s].end(), g) != pl.assign[s].end())
        active.push_back(s);
    double left = static_cast<double>(pl.spare[g]);
    while (!active.empty()) {
      double w = 0;
      for (std::size_t s : active) w += static_cast<double>(std::max<std::uint64_t>(pl.evals[s].kv_need, 1));
      std::vector<std::size_t> next;
      bool capped = false;
      for (std::size_t s : active) {
        const double need = static_cast<double>(pl.evals[s].need);
        const double room = std::max(plan.seats[s].rules.default_util * total, need) - need;
        const double share = left * static_cast<double>(std::max<std::uint64_t>(pl.evals[s].kv_need, 1)) / w;
        if (share > room) {
          pl.extra[s][g] = room;
          capped = true;
        } else {
          next.push_back(s);
        }
      }
      if (!capped) {
        for (std::size_t s : active)
          pl.extra[s][g] = left * static_cast<double>(std::max<std::uint64_t>(pl.evals[s].kv_need, 1)) / w;
        break;
      }
      for (std::size_t s : active)
        if (std::find(next.begin(), next.end(), s) == next.end()) left -= pl.extra[s][g];
      left = std::max(left, 0.0);
      active = std::move(next);
    }
  }
}

/** Greedy: each seat, in order, takes the roomiest GPU set that fits; when one is left without room, a
 * search over the assignments. */
void place_seats(Placing& pl) {
  Plan& plan = pl.plan;
  Placer& placer = pl.placer;
  const std::size_t ns = plan.seats.size();
  auto& assign = pl.assign;
  auto& tried = pl.tried;
  auto& short_by = pl.short_by;
  auto& free_at_turn = pl.free_at_turn;
  const auto& order = pl.order;
  const auto& remaining = pl.remaining;
  assign.assign(ns, {});
  tried.assign(ns, {});
  short_by.assign(ns, 0);
  free_at_turn.assign(ns, 0);
  // Greedy: each seat takes the roomiest GPU set that fits.
  {
    std::vector<std::uint64_t> rem = remaining;
    for (std::size_t s : order) {
      if (placer.out(s)) continue;  // refused whatever the memory, or replaced: it takes no room
      const auto cands = placer.candidates(s, rem);
      if (cands.empty()) continue;
      std::uint64_t best_short = UINT64_MAX;
      for (const auto& set : cands) {
        const std::uint64_t sf = placer.shortfall(s, set, rem);
        if (sf == 0) {
          assign[s] = set;
          free_at_turn[s] = UINT64_MAX;
          for (std::size_t g : set) free_at_turn[s] = std::min(free_at_turn[s], rem[g]);
          break;
        }
        if (sf < best_short) {
          best_short = sf;
          tried[s] = set;
        }
      }
      if (!assign[s].empty())
        placer.take(s, assign[s], rem);
      else
        short_by[s] = best_short;
    }
  }
  bool greedy_ok = true;
  for (std::size_t s = 0; s < ns; ++s)
    if (assign[s].empty() && !placer.out(s)) greedy_ok = false;
  if (!greedy_ok) {
    std::vector<std::vector<std::size_t>> alt(ns);
    std::vector<std::uint64_t> rem = remaining;
    std::size_t nodes = 0;
    if (placer.search(order, 0, rem, alt, nodes)) {
      assign = std::move(alt);
      std::fill(short_by.begin(), short_by.end(), 0);
      plan.searched = true;
    }
  }

}

/** The smallest utilization (0.001 steps) that gives the seat its need on every rank of `set`. */
double min_utilization(const Placing& pl, const SeatModel& m, const Eval& e, const std::vector<std::size_t>& set) {
  const auto& gpus = pl.gpus;
  const std::size_t roomiest = pl.roomiest;
  // Smallest utilization meeting the target on every rank.
  double mu = 0.0;
  for (std::size_t g : (set.empty() ? std::vector<std::size_t>{roomiest} : set))
    mu = std::max(mu, ceil_to(static_cast<double>(e.need) / static_cast<double>(gpus[g].torch_total()), 0.001));
  while (mu <= 1.0 && [&] {
    for (std::size_t g : (set.empty() ? std::vector<std::size_t>{roomiest} : set))
      if (util_bytes(mu, gpus[g], m.rules) < e.need) return true;
    return false;
  }()) mu += 0.001;
  return mu;
}

/** >= 0.34, Model Runner V2 (inferred): the KV memory vLLM sizes from the memory free after warm-up, less its margin,
 * on a GPU with `before` bytes free for the seat; UINT64_MAX where the rules do not size it so. The one rule for a
 * placed seat and for the length offered to one that is not (issue 55 tryout: a length offered that then failed). */
std::uint64_t kv_margin_cap(const SeatModel& m, const Eval& e, std::uint64_t before) {
  if (!(m.rules.kv_from_free_memory && e.terms.v2_runner)) return UINT64_MAX;
  const std::uint64_t non_kv = util::sat_add(util::sat_add(e.outside, m.weight_bytes_per_rank), e.overhead);
  const std::uint64_t headroom = before > non_kv ? before - non_kv : 0;
  const auto margin = std::max(m.rules.kv_margin_floor,
                               static_cast<std::uint64_t>(static_cast<double>(headroom) * m.rules.kv_margin_fraction));
  return headroom > margin ? headroom - margin : 0;
}

/** The largest max_model_len worth offering: the model's own limit when vLLM refuses the asked one (issue 55 tryout:
 * LARGEST LEN 32,768 for a model that refuses anything above 8,192), else the larger of it and the asked. */
std::int64_t length_upper(const SeatModel& m) {
  const std::int64_t own = m.derived_max_model_len > 0 ? m.derived_max_model_len : m.max_position_embeddings;
  return !m.refusal.empty() && own > 0 ? own : std::max(m.max_position_embeddings, m.max_model_len);
}

/** A seat without room: the best GPU set given the placed seats, the largest max_model_len that would fit
 * there, vLLM's start-up refusal when the utilization is given, and why it does not fit. */
void explain_unplaced(Placing& pl, std::size_t s, const Eval& e, double mu) {
  Plan& plan = pl.plan;
  const auto& gpus = pl.gpus;
  const auto& spare = pl.spare;
  const auto& short_by = pl.short_by;
  auto& p = plan.placements[s];
  const SeatModel& m = plan.seats[s];
  const auto& set = pl.tried[s];
  p.util = m.arg.gpu_memory_utilization.value_or(0.0);
  p.short_by_bytes = short_by[s];
  if (!set.empty()) {  // what would fit in the room the placed seats leave: the largest max_model_len
    std::uint64_t avail = UINT64_MAX;
    for (std::size_t g : set) {
      std::uint64_t room = spare[g] > e.outside ? spare[g] - e.outside : 0;
      if (m.arg.gpu_memory_utilization) room = std::min(room, util_bytes(*m.arg.gpu_memory_utilization, gpus[g], m.rules));
      avail = std::min({avail, kv_memory(m, e, gpus[g], room), kv_margin_cap(m, e, spare[g])});
    }
    p.available_kv_bytes = avail;
    p.largest_max_model_len =
        largest_max_model_len(m.layout, avail, e.demand.in_flight_tokens, length_upper(m), m.arg.concurrency);
  }
  // vLLM's start-up check first: with a given utilization it refuses before anything else is measured.
  std::string refusal;
  if (!set.empty() && p.util_explicit && m.rules.startup_check) {
    const std::uint64_t own = e.terms.cuda_context + e.terms.nccl;  // created before vLLM's snapshot
    for (std::size_t g : set) {
      // vLLM sees the headroom as free: its check is against everything free.
      const std::uint64_t actual = std::min(spare[g] + gpus[g].headroom_bytes, gpus[g].torch_free());
      const std::uint64_t free_start = actual > own ? actual - own : 0;
      const std::uint64_t req = util_bytes(*m.arg.gpu_memory_utilization, gpus[g], m.rules);
      if (req <= free_start) continue;
      double pass = std::floor(static_cast<double>(free_start) / static_cast<double>(gpus[g].torch_total()) * 1000.0) / 1000.0;
      while (pass > 0.0 && util_bytes(pass, gpus[g], m.rules) > free_start) pass -= 0.001;
      p.startup_refused = true;
      p.startup_free_bytes = free_start;
      p.startup_max_util = std::max(0.0, pass);
      refusal = fmt::format("vLLM will refuse at start-up on GPU {}: gpu_memory_utilization {} requests {} "
                            "({} x torch total {}), but it finds {} free after its own CUDA context{} (other "
                            "tenants and seats hold the rest); ",
                            gpus[g].id, *m.arg.gpu_memory_utilization, format_bytes(req),
                            *m.arg.gpu_memory_utilization, format_bytes(gpus[g].torch_total()),
                            format_bytes(free_start), e.terms.nccl ? " and NCCL" : "");
      refusal += p.startup_max_util >= mu
                     ? fmt::format("utilization {:.3f} to {:.3f} passes the check and fits the seat ({:.3f} needed)",
                                   mu, p.startup_max_util, mu)
                     : fmt::format("utilization <= {:.3f} passes the check, but the seat needs {:.3f} "
                                   "(weights {} + overhead {} + KV {} = {}): it does not fit on this GPU",
                                   p.startup_max_util, mu, format_bytes(m.weight_bytes_per_rank),
                                   format_bytes(e.overhead), format_bytes(e.kv_need), format_bytes(e.need));
      break;
    }
  }
  if (set.empty()) {
    p.blocker = fmt::format("tp={} needs {} GPUs, {} given", m.arg.kv.tp, m.arg.kv.tp, gpus.size());
    p.reason = "does not fit: " + p.blocker;
    p.short_by_bytes = 0;  // not a matter of bytes
  } else if (!refusal.empty()) {
    p.blocker = fmt::format("vLLM refuses at start-up (<= {:.3f} passes)", p.startup_max_util);
    p.reason = "does not fit: " + refusal;
  } else if (p.util_explicit && util_bytes(*m.arg.gpu_memory_utilization, gpus[set.front()], m.rules) < e.need) {
    p.reason = fmt::format("does not fit: gpu_memory_utilization {} gives {} on GPU {}, but weights {} + "
                           "overhead {} + KV {} need {} (min utilization {:.3f}): short by {}",
                           *m.arg.gpu_memory_utilization,
                           format_bytes(util_bytes(*m.arg.gpu_memory_utilization, gpus[set.front()], m.rules)),
                           gpus[set.front()].id, format_bytes(m.weight_bytes_per_rank), format_bytes(e.overhead),
                           format_bytes(e.kv_need), format_bytes(e.need), mu, format_bytes(p.short_by_bytes));
  } else if (p.util_explicit) {
    std::uint64_t free_now = UINT64_MAX;
    for (std::size_t g : set) free_now = std::min(free_now, spare[g]);
    // The utilization asked is too large for the room, not the length: the largest that fits, and the range with
    // the smallest (issue 55 tryout: "short by" then "max_model_len=8192 would fit" for a seat that fits no length
    // at that utilization; the figures added up only with the beside-budget line).
    double top = 0;
    for (double u = *m.arg.gpu_memory_utilization; u >= 0.001 && top == 0; u -= 0.001) {
      bool ok = true;
      for (std::size_t g : set) ok = ok && util::sat_add(util_bytes(u, gpus[g], m.rules), e.outside) <= spare[g];
      if (ok) top = std::floor(u * 1000 + 1e-6) / 1000;
    }
    p.reason = fmt::format(
        "does not fit: gpu_memory_utilization {} asks {} (and {} beside the budget) on GPU {}, "
        "which has {} free after other tenants and seats{}: short by {}{}",
        *m.arg.gpu_memory_utilization,
        format_bytes(util_bytes(*m.arg.gpu_memory_utilization, gpus[set.front()], m.rules)), format_bytes(e.outside),
        gpu_list(gpus, set), format_bytes(free_now), headroom_text(gpus, set), format_bytes(p.short_by_bytes),
        top >= mu && mu <= 1.0 ? fmt::format("; a utilization from {:.3f} to {:.3f} fits", mu, top) : std::string());
    if (top > 0 && p.largest_max_model_len > 0 && p.short_by_bytes > 0)
      p.reason +=
          fmt::format("; at gpu_memory_utilization {:.3f}, max_model_len={} would fit", top, p.largest_max_model_len);
    if (top == 0) p.largest_max_model_len = 0;  // no utilization leaves room for the budget: no length fits
    return;
  } else {
    // With no shortfall, memory is not what keeps the seat out (a blocker finish_plan says first): said as fitting.
    std::uint64_t free_now = UINT64_MAX, empty = UINT64_MAX;
    for (std::size_t g : set) {
      free_now = std::min(free_now, spare[g]);
      empty = std::min(empty, pl.remaining[g]);
    }
    const bool fits = p.short_by_bytes == 0;
    const std::string need = fmt::format(
        "needs {} per GPU (weights {} + overhead {} + KV {} for {} x {} tokens)", format_bytes(e.need),
        format_bytes(m.weight_bytes_per_rank), format_bytes(e.overhead), format_bytes(e.kv_need), m.arg.concurrency,
        format_count(static_cast<std::uint64_t>(m.max_model_len)));
    // A seat larger than the GPU with no other seat on it: the other seats are not what keeps it out (issue 55
    // tryout: "free after the other seats ... short by" beside a table whose other seat held most of the GPU).
    if (const std::uint64_t whole = util::sat_add(e.need, e.outside); !fits && whole > empty) {
      p.short_by_bytes = whole - empty;  // what no placement of the others can give back
      p.reason = fmt::format(
          "does not fit: {} and {} beside the budget; GPU {} offers {} with no seat on it (net of "
          "other tenants{}): short by {} on an empty GPU",
          need, format_bytes(e.outside), gpu_list(gpus, set), format_bytes(empty), headroom_text(gpus, set),
          format_bytes(p.short_by_bytes));
    } else
      p.reason = fmt::format("{}: {}; GPU {} has {} beside what the placed seats need{} (a placed seat's KV cache "
                             "then takes its share of that room){}", fits ? "fits" : "does not fit", need,
                             gpu_list(gpus, set), format_bytes(free_now), headroom_text(gpus, set),
                             fits ? "" : ": short by " + format_bytes(p.short_by_bytes));
  }
  if (!set.empty() && p.largest_max_model_len > 0 && p.short_by_bytes > 0)
    p.reason += fmt::format("; in the room left{}, max_model_len={} would fit",
                            p.util_explicit ? " (at the largest utilization that fits)" : "", p.largest_max_model_len);
}

/** A placed seat: its utilization (given, or its need plus a share of the spare memory by KV demand), the
 * KV memory and concurrency that gives, and why it went where it did. */
void settle_placed(Placing& pl, std::size_t s, const Eval& e) {
  Plan& plan = pl.plan;
  const auto& gpus = pl.gpus;
  const Placer& placer = pl.placer;
  const auto& spare = pl.spare;
  const auto& order = pl.order;
  const auto& free_at_turn = pl.free_at_turn;
  auto& p = plan.placements[s];
  const SeatModel& m = plan.seats[s];
  const auto& set = pl.assign[s];
  // Utilization.
  double util = 0.0;
  if (p.util_explicit) {
    util = *m.arg.gpu_memory_utilization;
  } else {
    util = 1.0;
    for (std::size_t g : set) {
      const double share = pl.extra[s][g];  // share_spare
      const double total = static_cast<double>(gpus[g].torch_total());
      const double target = static_cast<double>(e.need) + std::floor(share);
      const double cap = std::max(m.rules.default_util * total, static_cast<double>(e.need));
      util = std::min(util, std::min(target, cap) / total);
    }
    double chosen = util;
    for (double step : {0.01, 0.001, 0.0001}) {
      const double u = std::floor(util / step + 1e-9) * step;
      bool ok = u > 0.0;
      for (std::size_t g : set) ok = ok && util_bytes(u, gpus[g], m.rules) >= e.need;
      if (ok) {
        chosen = u;
        break;
      }
    }
    util = chosen;
  }
  p.util = util;
  std::uint64_t budget = UINT64_MAX, avail = UINT64_MAX;
  for (std::size_t g : set) {
    const std::uint64_t b = util_bytes(util, gpus[g], m.rules);
    budget = std::min(budget, b);
    avail = std::min(avail, kv_memory(m, e, gpus[g], b));
  }
  if (m.rules.kv_from_free_memory && e.terms.v2_runner) {  // >= 0.34, Model Runner V2 (inferred): the margin
    for (std::size_t g : set) {
      const std::uint64_t cap = kv_margin_cap(m, e, util::sat_add(spare[g], placer.reserve_on(s, g, e)));
      if (cap < avail) {
        p.kv_margin_bytes = std::max(p.kv_margin_bytes, avail - cap);
        avail = cap;
      }
    }
  }
  p.budget_bytes = budget;
  p.available_kv_bytes = avail;
  p.num_blocks = kv_num_blocks(m.layout, avail);
  const KvReport rep = kv_report(m.layout, e.demand, p.num_blocks, m.rules);
  p.max_concurrency = rep.max_concurrency;
  p.kv_cache_tokens = rep.tokens;
  p.largest_max_model_len =
      largest_max_model_len(m.layout, avail, e.demand.in_flight_tokens, length_upper(m), m.arg.concurrency);
  p.fits = avail >= e.kv_need;  // kv_need holds `concurrency` requests of max_model_len
  for (std::size_t g : set) {
    const std::uint64_t b = util_bytes(util, gpus[g], m.rules);
    // The KV the blocks hold, as the text and --json say it; the margin 0.34 keeps out of it is its own share
    // (issue 55 tryout H: the picture drew the KV before the margin, 52.55 GiB against the text's 51.88).
    const std::uint64_t kv_all = kv_memory(m, e, gpus[g], b);
    const std::uint64_t kv = std::min(kv_all, avail);
    plan.gpus[g].shares.push_back(GpuShare{s, b, std::min(m.weight_bytes_per_rank, b), kv,
                                           std::min(e.overhead, b - std::min(m.weight_bytes_per_rank, b)), e.outside,
                                           kv_all - kv});
  }
  // Why here.
  if (!placer.pins[s].empty()) {
    p.reason = fmt::format("pinned by gpu={}", gpu_list(gpus, set));
  } else {
    std::size_t free_rank = 0;  // position among the unpinned seats in placement order
    for (std::size_t k : order) {
      if (k == s) break;
      if (placer.pins[k].empty()) ++free_rank;
    }
    p.reason = fmt::format("KV demand {} of {} ({} for {} x {} tokens): {} {}", free_rank + 1,
                           std::count_if(placer.pins.begin(), placer.pins.end(),
                                         [](const auto& v) { return v.empty(); }),
                           format_bytes(e.kv_need), m.arg.concurrency,
                           format_count(static_cast<std::uint64_t>(m.max_model_len)),
                           set.size() > 1 ? fmt::format("tp={} spread over GPUs", m.arg.kv.tp) : std::string("on GPU"),
                           gpu_list(gpus, set));
    if (plan.searched)
      p.reason += " (found by search: heaviest-first on the roomiest GPU left a seat without room)";
    else
      p.reason += fmt::format(", the roomiest with {} free when its turn came", format_bytes(free_at_turn[s]));
  }
  if (!p.fits)
    p.reason += fmt::format("; KV memory {} is short of the {} needed", format_bytes(avail), format_bytes(e.kv_need));
  if (!p.fits) p.short_by_bytes = e.kv_need > avail ? e.kv_need - avail : 0;
}

/** What vLLM refuses whatever the memory, host ports two seats would both bind, each GPU's free memory,
 * and the notes. */
void finish_plan(Plan& plan) {
  const std::size_t ns = plan.seats.size();
  // What vLLM refuses whatever the memory, and host ports two seats would both bind.
  for (std::size_t s = 0; s < ns; ++s) {
    SeatPlacement& p = plan.placements[s];
    const SeatModel& m = plan.seats[s];
    if (!p.replaced_by.empty()) continue;  // it stops: its port and memory go to the seat that replaces it
    std::string why = m.refusal;
    // Each seat's compose stack binds its host port (port=, else 8000 + its index): two on one port clash.
    const int port = host_port(m.arg, s);
    for (std::size_t k = 0; k < ns && why.empty(); ++k)
      if (k != s && host_port(plan.seats[k].arg, k) == port && plan.placements[k].replaced_by.empty()) {
        const auto origin = [&](std::size_t i) {
          return plan.seats[i].arg.port ? fmt::format("port={}", port)
                                        : fmt::format("the default, {} + its index {}", kBasePort, i);
        };
        const std::size_t a = std::min(s, k), b = std::max(s, k);
        why = fmt::format("host port {} clash: seats '{}' ({}) and '{}' ({}) both bind it; give each seat its own "
                          "port=", port, plan.seats[a].arg.name, origin(a), plan.seats[b].arg.name, origin(b));
      }
    if (why.empty()) continue;
    p.fits = false;
    p.cannot_start = true;
    p.blocker = why;
    // The memory verdict in brackets, without its own "does not fit: " (it read "(memory: does not fit: ...
    // short by 0 B)" for a seat whose memory fits).
    std::string memory = p.reason;
    if (constexpr std::string_view kNo = "does not fit: "; memory.rfind(kNo, 0) == 0) memory.erase(0, kNo.size());
    // Not a matter of memory: the seat cannot start (issue 55 tryout: a port clash read "NO FIT does not fit").
    p.reason = "cannot start: " + why + (memory.empty() ? "" : " (memory: " + memory + ")");
  }
  // A seat the planned vLLM cannot start (serving blockers other than a folder only sized): cannot_start whatever
  // its memory, so --json's placement and serving agree (issue 55 tryout: cannot_start false, can_start false).
  for (std::size_t s = 0; s < ns; ++s) {
    const auto& b = plan.seats[s].serving.blockers;
    if (std::any_of(b.begin(), b.end(), [](const StartBlocker& x) { return !x.sized_only; }))
      plan.placements[s].cannot_start = true;
    if (plan.placements[s].cannot_start) plan.all_start = false;
  }
  for (auto& g : plan.gpus) {
    std::uint64_t seats = 0;
    for (const auto& sh : g.shares) seats = util::sat_add(seats, util::sat_add(sh.budget, sh.outside));
    const std::uint64_t free_before = g.gpu.torch_free();  // less other tenants, or free= when given
    g.free_bytes = free_before > seats ? free_before - seats : 0;
  }
  plan.all_fit = ns > 0 && std::all_of(plan.placements.begin(), plan.placements.end(),
                                       [](const SeatPlacement& p) { return p.fits; });
  for (std::size_t s = 0; s < ns; ++s)
    if (!plan.placements[s].fits)
      plan.notes.push_back(fmt::format(
          "seat '{}' {}: {}", plan.seats[s].arg.name, plan.placements[s].cannot_start ? "cannot start" : "does not fit",
          plan.placements[s].blocker.empty() ? "short by " + format_bytes(plan.placements[s].short_by_bytes)
                                             : plan.placements[s].blocker));
  if (plan.all_fit) {
    // Fitting is memory; a seat vLLM cannot start as it stands, or one sized from a folder no stack starts from,
    // is said beside it (it read "all seats fit" under a "cannot start" line).
    std::vector<std::string> cannot, sized;
    for (const auto& m : plan.seats) {
      if (m.serving.blockers.empty()) continue;
      const bool only = std::all_of(m.serving.blockers.begin(), m.serving.blockers.end(),
                                    [](const StartBlocker& b) { return b.sized_only; });
      (only ? sized : cannot).push_back("'" + m.arg.name + "'");
    }
    std::string note = plan.searched ? "all seats fit (placement found by search)" : "all seats fit";
    if (!sized.empty())
      note += fmt::format("; sized only: {} (a folder no stack starts from)", fmt::join(sized, ", "));
    if (!cannot.empty())
      note += fmt::format("; {} cannot start as {} stand{} (the cannot start lines say what to fix)",
                          fmt::join(cannot, ", "), cannot.size() == 1 ? "it" : "they", cannot.size() == 1 ? "s" : "");
    plan.notes.push_back(std::move(note));
  }
}

/** replaces= and frees=: the memory a seat frees before it starts comes off its GPUs' other tenants (used=).
 * replaces=OLD: OLD is another --seat, pinned (gpu=) at the utilization it runs with; its budget and CUDA
 * context are part of used= now and are freed, and OLD itself is not placed. frees=SIZE: that much of a
 * pinned seat's GPUs' used= is freed. */
Status free_replaced(Plan& plan, std::vector<GpuSpec>& gpus, Placer& placer) {
  const std::size_t ns = plan.seats.size();
  placer.stops.assign(ns, false);
  for (std::size_t s = 0; s < ns; ++s) {
    const SeatModel& m = plan.seats[s];
    std::vector<std::pair<std::size_t, std::uint64_t>> frees;  // GPU, bytes
    std::string what;
    if (!m.arg.replaces.empty()) {
      const auto it = std::find_if(plan.seats.begin(), plan.seats.end(),
                                   [&](const SeatModel& o) { return o.arg.name == m.arg.replaces; });
      if (it == plan.seats.end())
        return make_error(Errc::USAGE, "seat '{}': replaces={} names no --seat; hint: describe the running seat too, as "
                          "--seat {}=DIR:gpu=ID,gpu_memory_utilization=U", m.arg.name, m.arg.replaces, m.arg.replaces);
      const auto old = static_cast<std::size_t>(it - plan.seats.begin());
      if (placer.pins[old].empty() || !it->arg.gpu_memory_utilization)
        return make_error(Errc::USAGE, "seat '{}': replaces={}, but seat '{}' has no gpu= and gpu_memory_utilization=; "
                          "hint: give the GPU and utilization it runs with now", m.arg.name, m.arg.replaces,
                          m.arg.replaces);
      if (placer.stops[old])
        return make_error(Errc::USAGE, "seat '{}' is replaced twice (replaces={} on two seats)", it->arg.name,
                          it->arg.name);
      placer.stops[old] = true;
      const Eval e = evaluate(*it, &gpus[placer.pins[old].front()]);
      for (std::size_t g : placer.pins[old])
        frees.push_back({g, util::sat_add(util_bytes(*it->arg.gpu_memory_utilization, gpus[g], it->rules), e.outside)});
      plan.placements[old].replaced_by = m.arg.name;
      what = fmt::format("seat '{}' stops (replaces=)", it->arg.name);
    }
    if (m.arg.frees) {
      if (placer.pins[s].empty())
        return make_error(Errc::USAGE, "seat '{}': frees={} needs gpu= (which GPU's tenants it frees)", m.arg.name,
                          format_bytes(*m.arg.frees));
      for (std::size_t g : placer.pins[s]) frees.push_back({g, *m.arg.frees});
      what += (what.empty() ? "" : " and ") + fmt::format("frees={}", format_bytes(*m.arg.frees));
    }
    for (const auto& [g, bytes] : frees) {
      GpuSpec& gpu = gpus[g];
      if (bytes > gpu.used_bytes)
        return make_error(Errc::USAGE, "seat '{}': {} frees {} on GPU {}, but its used= is {}; hint: used= must hold "
                          "what runs there now, the replaced seat included", m.arg.name, what, format_bytes(bytes),
                          gpu.id, format_bytes(gpu.used_bytes));
      plan.notes.push_back(fmt::format("GPU {}: {} frees {} before seat '{}' starts: others {} -> {}", gpu.id, what,
                                       format_bytes(bytes), m.arg.name, format_bytes(gpu.used_bytes),
                                       format_bytes(gpu.used_bytes - bytes)));
      gpu.used_bytes -= bytes;
      if (gpu.free_given) gpu.free_given = std::min(gpu.torch_total(), util::sat_add(*gpu.free_given, bytes));
      plan.placements[s].freed_bytes += bytes;
    }
  }
  return {};
}

}  // namespace

Result<Plan> make_plan(std::vector<SeatModel> seats, std::vector<GpuSpec> gpus) {
  Plan plan;
  plan.seats = std::move(seats);
  const std::size_t ns = plan.seats.size();
  plan.placements.resize(ns);
  for (auto& g : gpus) plan.gpus.push_back(GpuPlan{g, {}, 0});
  for (std::size_t i = 0; i < gpus.size(); ++i)
    for (std::size_t j = i + 1; j < gpus.size(); ++j)
      if (gpus[i].id == gpus[j].id)
        return make_error(Errc::USAGE, "GPU id '{}' is given twice", gpus[i].id);
  for (std::size_t i = 0; i < ns; ++i)
    for (std::size_t j = i + 1; j < ns; ++j)
      if (plan.seats[i].arg.name == plan.seats[j].arg.name)
        return make_error(Errc::USAGE, "seat name '{}' is given twice", plan.seats[i].arg.name);

  Placer placer{plan.seats, gpus, std::vector<std::vector<std::size_t>>(ns), {}, {}};
  for (std::size_t s = 0; s < ns; ++s) {
    for (const auto& id : plan.seats[s].arg.gpus) {
      auto it = std::find_if(gpus.begin(), gpus.end(), [&](const GpuSpec& g) { return g.id == id; });
      if (it == gpus.end())
        return make_error(Errc::USAGE, "seat '{}' is pinned to gpu={}, but no --gpu has that ID",
                          plan.seats[s].arg.name, id);
      const auto gi = static_cast<std::size_t>(it - gpus.begin());
      if (std::find(placer.pins[s].begin(), placer.pins[s].end(), gi) != placer.pins[s].end())
        return make_error(Errc::USAGE, "seat '{}' pins GPU {} twice", plan.seats[s].arg.name, id);
      placer.pins[s].push_back(gi);
    }
  }

  FP4FORGE_TRY(free_replaced(plan, gpus, placer));
  for (std::size_t g = 0; g < gpus.size(); ++g) plan.gpus[g].gpu = gpus[g];
  if (gpus.empty()) {
    for (std::size_t s = 0; s < ns; ++s) {
      const Eval e = evaluate(plan.seats[s], nullptr);
      auto& p = plan.placements[s];
      record(p, e);
      p.util_explicit = plan.seats[s].arg.gpu_memory_utilization.has_value();
      p.util = plan.seats[s].arg.gpu_memory_utilization.value_or(0.0);
      p.reason = "no GPU given: sizing only (max_num_batched_tokens assumes a >= 70 GiB non-A100 GPU)";
    }
    plan.notes.push_back("no GPU given: per-seat sizing only; add --gpu ID=TOTAL[:used=SIZE] to place seats");
    return plan;
  }

  // Order: pinned seats first (as given), then heaviest KV demand first on the roomiest GPU.
  std::vector<std::uint64_t> remaining(gpus.size());
  // The headroom is never given to a seat: placement works in what is free above it.
  for (std::size_t g = 0; g < gpus.size(); ++g)
    remaining[g] = gpus[g].torch_free() > gpus[g].headroom_bytes ? gpus[g].torch_free() - gpus[g].headroom_bytes : 0;
  placer.initial = remaining;
  const std::size_t roomiest = static_cast<std::size_t>(
      std::max_element(remaining.begin(), remaining.end()) - remaining.begin());
  std::vector<std::uint64_t> demand(ns), need(ns);
  for (std::size_t s = 0; s < ns; ++s) {
    const Eval e = evaluate(plan.seats[s], &gpus[roomiest]);
    demand[s] = e.kv_need;
    need[s] = e.need;
  }
  Placing pl{plan, gpus, placer, remaining, roomiest, std::vector<std::size_t>(ns), {}, {}, {}, {}, {}, {}, {}};
  std::vector<std::size_t>& order = pl.order;
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const bool pa = !placer.pins[a].empty(), pb = !placer.pins[b].empty();
    if (pa != pb) return pa;
    if (pa) return false;
    if (demand[a] != demand[b]) return demand[a] > demand[b];
    return need[a] > need[b];
  });

  place_seats(pl);
  // Utilizations: explicit, or need + a share of the GPU's spare memory proportional to KV demand.
  auto& assign = pl.assign;
  auto& evals = pl.evals;
  auto& spare = pl.spare;
  evals.assign(ns, Eval{});
  spare = remaining;
  for (std::size_t s = 0; s < ns; ++s) {
    if (assign[s].empty()) continue;
    evals[s] = evaluate(plan.seats[s], &gpus[assign[s].front()]);
    for (std::size_t g : assign[s]) spare[g] -= std::min(spare[g], placer.reserve_on(s, g, evals[s]));
  }
  share_spare(pl);
  for (std::size_t s = 0; s < ns; ++s) {
    auto& p = plan.placements[s];
    const SeatModel& m = plan.seats[s];
    const bool placed = !assign[s].empty();
    if (placer.stops[s]) {  // replaced: it stops when the seat that replaces it starts
      p.fits = true;
      p.gpus = placer.pins[s];
      p.util_explicit = true;
      p.util = *m.arg.gpu_memory_utilization;
      p.reason = fmt::format("stops for seat '{}' (replaces=): its memory on GPU {} is freed first", p.replaced_by,
                             gpu_list(gpus, p.gpus));
      continue;
    }
    if (!placed) {  // the best GPU set given what the placed seats hold
      std::uint64_t best = UINT64_MAX;
      for (const auto& c : placer.candidates(s, spare))
        if (const std::uint64_t sf = placer.shortfall(s, c, spare); sf < best) {
          best = sf;
          pl.tried[s] = c;
          pl.short_by[s] = sf;
        }
    }
    const auto& set = placed ? assign[s] : pl.tried[s];
    const Eval e = placed ? evals[s] : evaluate(m, set.empty() ? &gpus[roomiest] : &gpus[set.front()]);
    p.placed = placed;
    p.gpus = set;
    record(p, e);
    p.util_explicit = m.arg.gpu_memory_utilization.has_value();
    const double mu = min_utilization(pl, m, e, set);
    p.min_util = mu;
    if (placed) {
      settle_placed(pl, s, e);
      p.sensitivity = seat_sensitivity(m, p, gpus[assign[s].front()]);
    } else {
      explain_unplaced(pl, s, e, mu);
    }
  }
  finish_plan(plan);
  return plan;
}

}  // namespace fp4forge::kvplan
