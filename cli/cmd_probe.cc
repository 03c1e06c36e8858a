// fp4forge probe URL --model NAME: prove a served OpenAI-compatible endpoint (docs/cli/probe.md).
#include <cstdio>
#include <cstdint>
#include <cstdlib>

#include <fmt/format.h>

#include "commands.h"
#include "validators.h"
#include "fp4forge/probe/kv_pool.h"
#include "fp4forge/probe/probe.h"
#include "fp4forge/probe/report.h"
#include "fp4forge/util/format.h"
#include "render.h"

namespace fp4forge::cli {

namespace {

// --expect-kv-tokens N, or the pool of a plan --json seat (--expect-kv-from FILE [--seat NAME]).
template <class Opts>
Status expected_kv(const Opts& o, probe::ProbeOptions& po) {
  if (!o.seat.empty() && o.expect_kv_from.empty())
    return make_error(Errc::USAGE, "--seat names a seat of --expect-kv-from PLAN.json, which is not given");
  if (o.expect_kv_from.empty()) {
    po.expect_kv_tokens = o.expect_kv_tokens;
    return {};
  }
  if (o.expect_kv_tokens > 0)
    return make_error(Errc::USAGE, "--expect-kv-tokens and --expect-kv-from both give the expected pool; pick one");
  FP4FORGE_ASSIGN_OR_RETURN(probe::PlanKv kv, probe::kv_from_plan(o.expect_kv_from, o.seat, o.model));
  po.expect_kv_tokens = kv.tokens;
  po.expect_kv_from = fmt::format("{} seat '{}': {} blocks x {}", o.expect_kv_from, kv.seat,
                                  format_count(static_cast<std::uint64_t>(kv.num_blocks)), kv.block_size);
  return {};
}

}  // namespace

void add_probe(CLI::App& sub, Action& action) {
  struct Opts {
    std::string url, model, api_key_env, checks = "all", expect_kv_from, seat;
    double timeout = 60.0, deadline = 0.0;
    int max_tokens = 1024, concurrency = 8, context_tokens = 0;
    std::int64_t expect_kv_tokens = 0;
    std::uint64_t seed = 0;
    bool text_only = false, multimodal = false, json = false, json_lines = false, no_tools = false;
  };
  auto o = std::make_shared<Opts>();
  sub.add_option("url", o->url, "server base URL, e.g. http://127.0.0.1:8000 (a trailing /v1 is fine)")->required();
  sub.add_option("--model", o->model, "served model name (as listed by /v1/models)")->required();
  sub.add_option("--api-key-env", o->api_key_env, "environment variable holding the API key (never printed)");
  sub.add_option("--checks", o->checks,
                 "comma-separated: models,prose,long,logprobs,vision,tools,multiturn,completions,reasoning,context,kv "
                 "(default all)");
  sub.add_option("--timeout", o->timeout, "deadline of each check in seconds (default 60)")
      ->check(in_range(0.1, 3600.0));
  CLI::Option* max_tokens = sub.add_option("--max-tokens", o->max_tokens,
                                           "max_tokens a client would send (prose, vision, tools, reasoning; default "
                                           "1024, or half the served max_model_len when that is smaller)")
                                ->check(in_range(16, 1 << 20));
  sub.add_flag("--text-only", o->text_only, "the model takes no images: skip the vision check");
  sub.add_flag("--multimodal", o->multimodal, "the model takes images: a rejected image fails the vision check");
  sub.add_flag("--no-tools", o->no_tools,
               "the seat serves no tools (plan's compose.yaml says so): skip the tools check");
  sub.add_option("--deadline", o->deadline, "one deadline for the whole probe in seconds (default: --timeout)")
      ->check(in_range(0.1, 36000.0));
  sub.add_option("--concurrency", o->concurrency, "checks sent at once after the first (default 8; 1 = one by one)")
      ->check(in_range(1, 64));
  sub.add_option("--context-tokens", o->context_tokens,
                 "context: the long prompt's size in tokens (default 16384, or "
                 "less to fit the served max_model_len)")
      ->check(in_range(256, 1 << 24));
  CLI::Option* seed = sub.add_option("--seed", o->seed, "context: the seed of the hidden code and its depth (default: random, reported)");
  sub.add_option("--expect-kv-tokens", o->expect_kv_tokens,
                 "kv: the KV pool expected in tokens (num_gpu_blocks x "
                 "block_size); a difference over 2 % fails")
      ->check(in_range(std::int64_t{1}, std::int64_t{1} << 50));
  sub.add_option("--expect-kv-from", o->expect_kv_from, "kv: take the expected pool from this 'fp4forge plan --json' "
                 "file (placement.num_blocks x kv.attention_block_size)");
  sub.add_option("--seat", o->seat, "with --expect-kv-from: the plan's seat (default: the only one, or the one whose "
                 "served name is --model)");
  sub.add_flag("--json", o->json, "print the report as JSON (schema in docs/cli/probe.md)");
  sub.add_flag("--json-lines", o->json_lines, "one JSON line per check as it finishes, then the report as a last line");
  sub.footer(
      "Exit: 0 no selected check failed, 1 a check failed, 2 usage, 4 server unreachable.\n"
      "Examples:\n"
      "  fp4forge probe http://127.0.0.1:8000 --model org/model-NVFP4A16\n"
      "  VLLM_KEY=... fp4forge probe http://gpu7:8000/v1 --model m --api-key-env VLLM_KEY --checks prose,logprobs\n"
      "  fp4forge probe http://127.0.0.1:8000 --model m --text-only --json > report.json\n"
      "  fp4forge probe http://127.0.0.1:8000 --model m --checks context,kv --expect-kv-from plan.json --seat m");
  sub.callback([&action, o, seed, max_tokens] {
    action = [o, seed, max_tokens]() -> int {
      auto checks = probe::parse_checks(o->checks);
      if (!checks.ok()) return report_error(checks.error(), o->json);
      if (o->text_only && o->multimodal)
        return report_error(make_error(Errc::USAGE, "--text-only and --multimodal contradict each other; pick one"), o->json);
      probe::ProbeOptions po;
      po.timeout_s = o->timeout;
      po.max_tokens = o->max_tokens;
      po.client_max_tokens = o->max_tokens;
      po.max_tokens_given = max_tokens->count() > 0;
      po.vision = o->text_only ? probe::VisionMode::TEXT_ONLY
                               : o->multimodal ? probe::VisionMode::MULTIMODAL : probe::VisionMode::AUTO;
      po.no_tools = o->no_tools;
      auto key = api_key_from_env(o->api_key_env);
      if (!key.ok()) return report_error(key.error(), o->json);
      po.api_key = *key;
      if (o->json && o->json_lines)
        return report_error(make_error(Errc::USAGE, "--json and --json-lines contradict each other; pick one"), true);
      if (Status st = probe::check_base_url(o->url); !st)
        return report_error(std::move(st).error(), o->json || o->json_lines);
      po.total_timeout_s = o->deadline;
      po.concurrency = o->concurrency;
      po.context_tokens = o->context_tokens;
      if (seed->count() > 0) po.seed = o->seed;
      if (Status st = expected_kv(*o, po); !st) return report_error(std::move(st).error(), o->json || o->json_lines);
      // Results stream as each check finishes: a text line, or a JSON line ("event": "check").
      auto lines = std::make_shared<probe::CheckLines>();
      if (!o->json) {
        if (!o->json_lines) {
          probe::ProbeReport head;
          head.url = probe::normalize_base_url(o->url);
          head.model = o->model;
          print_report(probe::header_line(head));
        }
        po.on_result = [json_lines = o->json_lines, lines](const probe::CheckResult& c) {
          if (json_lines) {
            auto j = probe::to_json(c);
            j["event"] = "check";
            fmt::print("{}\n", j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
          } else {
            print_report(lines->add(c));
          }
          std::fflush(stdout);
        };
      }
      const probe::ProbeReport rep = probe::run_probe(o->url, o->model, *checks, po);
      if (o->json) {
        print_json(with_schema(probe::to_json(rep), "probe"));
      } else if (o->json_lines) {
        auto j = with_schema(probe::to_json(rep), "probe");
        j["event"] = "report";
        fmt::print("{}\n", j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
      } else {
        print_report(lines->finish() + probe::summary_line(rep));
      }
      return probe::exit_code(rep);
    };
  });
}

}  // namespace fp4forge::cli
