// fp4forge probe URL --model NAME: prove a served OpenAI-compatible endpoint (docs/cli/probe.md).
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "commands.h"
#include "fp4forge/probe/probe.h"
#include "fp4forge/probe/report.h"
#include "render.h"

namespace fp4forge::cli {

void add_probe(CLI::App& sub, Action& action) {
  struct Opts {
    std::string url, model, api_key_env, checks = "all";
    double timeout = 60.0, deadline = 0.0;
    int max_tokens = 1024, concurrency = 8;
    bool text_only = false, multimodal = false, json = false, json_lines = false;
  };
  auto o = std::make_shared<Opts>();
  sub.add_option("url", o->url, "server base URL, e.g. http://127.0.0.1:8000 (a trailing /v1 is fine)")->required();
  sub.add_option("--model", o->model, "served model name (as listed by /v1/models)")->required();
  sub.add_option("--api-key-env", o->api_key_env, "environment variable holding the API key (never printed)");
  sub.add_option("--checks", o->checks,
                 "comma-separated: models,prose,long,logprobs,vision,tools,multiturn,completions,reasoning (default all)");
  sub.add_option("--timeout", o->timeout, "deadline of each check in seconds (default 60)")->check(CLI::Range(0.1, 3600.0));
  sub.add_option("--max-tokens", o->max_tokens, "max_tokens a client would send (prose, vision, tools, reasoning; default 1024)")
      ->check(CLI::Range(16, 1 << 20));
  sub.add_flag("--text-only", o->text_only, "the model takes no images: skip the vision check");
  sub.add_flag("--multimodal", o->multimodal, "the model takes images: a rejected image fails the vision check");
  sub.add_option("--deadline", o->deadline, "one deadline for the whole probe in seconds (default: --timeout)")
      ->check(CLI::Range(0.1, 36000.0));
  sub.add_option("--concurrency", o->concurrency, "checks sent at once after the first (default 8; 1 = one by one)")
      ->check(CLI::Range(1, 64));
  sub.add_flag("--json", o->json, "print the report as JSON (schema in docs/cli/probe.md)");
  sub.add_flag("--json-lines", o->json_lines, "one JSON line per check as it finishes, then the report as a last line");
  sub.footer(
      "Exit: 0 no selected check failed, 1 a check failed, 2 usage, 4 server unreachable.\n"
      "Examples:\n"
      "  fp4forge probe http://127.0.0.1:8000 --model org/model-NVFP4A16\n"
      "  VLLM_KEY=... fp4forge probe http://gpu7:8000/v1 --model m --api-key-env VLLM_KEY --checks prose,logprobs\n"
      "  fp4forge probe http://127.0.0.1:8000 --model m --text-only --json > report.json");
  sub.callback([&action, o] {
    action = [o]() -> int {
      auto checks = probe::parse_checks(o->checks);
      if (!checks.ok()) return report_error(checks.error(), o->json);
      if (o->text_only && o->multimodal)
        return report_error(make_error(Errc::USAGE, "--text-only and --multimodal contradict each other; pick one"), o->json);
      probe::ProbeOptions po;
      po.timeout_s = o->timeout;
      po.max_tokens = o->max_tokens;
      po.client_max_tokens = o->max_tokens;
      po.vision = o->text_only ? probe::VisionMode::TEXT_ONLY
                               : o->multimodal ? probe::VisionMode::MULTIMODAL : probe::VisionMode::AUTO;
      auto key = api_key_from_env(o->api_key_env);
      if (!key.ok()) return report_error(key.error(), o->json);
      po.api_key = *key;
      if (o->json && o->json_lines)
        return report_error(make_error(Errc::USAGE, "--json and --json-lines contradict each other; pick one"), true);
      if (Status st = probe::check_base_url(o->url); !st) return report_error(std::move(st).error(), o->json || o->json_lines);
      po.total_timeout_s = o->deadline;
      po.concurrency = o->concurrency;
      // Results stream as each check finishes: a text line, or a JSON line ("event": "check").
      if (!o->json) {
        if (!o->json_lines) {
          probe::ProbeReport head;
          head.url = probe::normalize_base_url(o->url);
          head.model = o->model;
          fmt::print("{}", probe::header_line(head));
          std::fflush(stdout);
        }
        po.on_result = [json_lines = o->json_lines](const probe::CheckResult& c) {
          if (json_lines) {
            auto j = probe::to_json(c);
            j["event"] = "check";
            fmt::print("{}\n", j.dump());
          } else {
            fmt::print("{}", probe::check_line(c));
          }
          std::fflush(stdout);
        };
      }
      const probe::ProbeReport rep = probe::run_probe(o->url, o->model, *checks, po);
      if (o->json) {
        print_json(probe::to_json(rep));
      } else if (o->json_lines) {
        auto j = probe::to_json(rep);
        j["event"] = "report";
        fmt::print("{}\n", j.dump());
      } else {
        fmt::print("{}", probe::summary_line(rep));
      }
      return probe::exit_code(rep);
    };
  });
}

}  // namespace fp4forge::cli
