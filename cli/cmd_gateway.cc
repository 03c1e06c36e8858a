// fp4forge gateway show|swap|add|rollback|retire|check: LiteLLM proxy config.yaml edits (docs/cli/gateway.md).
#include <cstdlib>

#include <fmt/format.h>

#include "commands.h"
#include "validators.h"
#include "fp4forge/gateway/gateway.h"
#include "fp4forge/gateway/report.h"
#include "render.h"

namespace fp4forge::cli {

namespace {
struct GwOpts {
  std::string config, backend, alias, backend_model, api_base, to, checks = "all", api_key_env, probe_model, deployment,
      url;
  std::vector<std::string> params, model_info;
  double timeout = 60.0;
  bool no_probe = false, probe = false, dry_run = false, json = false, weak_gate = false, all_deployments = false,
       keep_api_key = false, multimodal = false, text_only = false, replica = false, no_tools = false;
};

// The probe settings swap, add and check share: --checks, --api-key-env, --timeout, --multimodal / --text-only.
Status probe_settings(const GwOpts& o, std::vector<probe::Check>& checks, probe::ProbeOptions& po) {
  FP4FORGE_ASSIGN_OR_RETURN(checks, probe::parse_checks(o.checks));
  FP4FORGE_ASSIGN_OR_RETURN(po.api_key, api_key_from_env(o.api_key_env));
  po.timeout_s = o.timeout;
  if (o.multimodal && o.text_only)
    return make_error(Errc::USAGE, "--text-only and --multimodal contradict each other; pick one");
  po.vision = o.text_only ? probe::VisionMode::TEXT_ONLY
                          : o.multimodal ? probe::VisionMode::MULTIMODAL : probe::VisionMode::AUTO;
  po.no_tools = o.no_tools;
  return {};
}

// KEY=VALUE arguments (--param, --model-info) as pairs; USAGE for one without '='.
Status key_values(const std::vector<std::string>& in, const char* option,
                  std::vector<std::pair<std::string, std::string>>& out) {
  for (const auto& kv : in) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      return make_error(Errc::USAGE, "{} '{}': expected KEY=VALUE", option, kv);
    out.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
  }
  return {};
}

// The new deployment's options swap and add share.
Status seat_settings(const GwOpts& o, gateway::SeatOptions& so) {
  if (o.probe && o.no_probe) return make_error(Errc::USAGE, "--probe and --no-probe contradict each other; pick one");
  so.alias = o.alias;
  so.backend_model = o.backend_model;
  so.api_base = o.api_base;
  so.probe = !o.no_probe;
  so.weak_gate = o.weak_gate;
  so.probe_model = o.probe_model;
  so.dry_run = o.dry_run;
  so.api_key_env = o.api_key_env;
  so.keep_api_key = o.keep_api_key;
  FP4FORGE_TRY(key_values(o.params, "--param", so.params));
  return probe_settings(o, so.checks, so.probe_options);
}

// A gateway result's warnings, then its JSON document or its text; its exit code.
template <class R>
int print_result(const GwOpts& o, const R& r) {
  for (const auto& w : r.warnings) warn(w);
  if (o.json) {
    print_json(with_schema(gateway::to_json(r), "gateway"));
  } else {
    print_report(gateway::to_text(r));
  }
  return gateway::exit_code(r);
}

int finish_edit(const GwOpts& o, Result<gateway::EditResult> r) {
  if (!r.ok()) return report_error(r.error(), o.json);
  const int rc = print_result(o, *r);
  if (!r->refused.empty()) error_line(fmt::format("{} refused: {}", r->command, r->refused));
  return rc;
}

int run_swap(const GwOpts& o) {
  gateway::SwapOptions so;
  if (Status st = seat_settings(o, so); !st) return report_error(st.error(), o.json);
  so.deployment = o.deployment;
  return finish_edit(o, gateway::gateway_swap(o.config, so));
}

int run_add(const GwOpts& o) {
  gateway::AddOptions ao;
  if (Status st = seat_settings(o, ao); !st) return report_error(st.error(), o.json);
  if (Status st = key_values(o.model_info, "--model-info", ao.model_info); !st) return report_error(st.error(), o.json);
  ao.replica = o.replica;
  return finish_edit(o, gateway::gateway_add(o.config, ao));
}

// The options of a new deployment (swap, add).
void add_seat_options(CLI::App* s, GwOpts& o) {
  s->add_option("--backend-model", o.backend_model, "litellm_params.model, e.g. hosted_vllm/org/m")->required();
  s->add_option("--api-base", o.api_base, "litellm_params.api_base, e.g. http://gpu7:8000/v1")->required();
  s->add_option("--param", o.params, "extra litellm_params KEY=VALUE (VALUE is YAML, one line); repeatable");
  s->add_flag("--probe", o.probe, "probe the backend first (the default)");
  s->add_flag("--no-probe", o.no_probe, "skip the probe (not recommended: F44)");
  s->add_option("--probe-model", o.probe_model,
                "model name at the backend: must be --backend-model without its "
                "provider prefix, the name LiteLLM sends (the default)");
  s->add_option("--checks", o.checks, "probe checks (default all; must keep prose and logprobs)");
  s->add_flag("--weak-gate", o.weak_gate, "allow --checks without prose or logprobs (the F1 checks)");
  s->add_option("--api-key-env", o.api_key_env, "environment variable with the backend's API key: the probe sends "
                                                "it, the deployment gets api_key: os.environ/NAME");
  s->add_flag("--multimodal", o.multimodal, "the alias takes images: the vision check must pass");
  s->add_flag("--text-only", o.text_only, "the alias takes no images: skip the vision check (warns for a vision alias)");
  s->add_flag("--no-tools", o.no_tools,
              "the backend serves no tools (plan's compose.yaml says so): skip the tools check");
  s->add_option("--timeout", o.timeout, "deadline of each probe check in seconds")->check(in_range(0.1, 3600.0));
  s->add_flag("--dry-run", o.dry_run, "probe and show the diff, write nothing");
}

int run_check(const GwOpts& o) {
  gateway::CheckOptions co;
  co.alias = o.alias;
  co.gateway_url = o.url;
  if (Status st = probe_settings(o, co.checks, co.probe_options); !st) return report_error(st.error(), o.json);
  auto r = gateway::gateway_check(o.config, co);
  if (!r.ok()) return report_error(r.error(), o.json);
  return print_result(o, *r);
}
}  // namespace

void add_gateway(CLI::App& sub, Action& action) {
  auto o = std::make_shared<GwOpts>();
  sub.require_subcommand(1);
  auto common = [&](CLI::App* s) {
    s->add_option("--config", o->config, "LiteLLM proxy config.yaml")->required();
    s->add_flag("--json", o->json, "print the result as JSON (schema in docs/cli/gateway.md)");
  };
  CLI::App* show = sub.add_subcommand("show", "aliases, their backends, wildcard warnings");
  common(show);
  show->add_option("--backend", o->backend, "also list the aliases that route to this base URL");
  CLI::App* swap = sub.add_subcommand("swap", "probe a backend, then repoint one alias to it (backup + diff)");
  common(swap);
  swap->add_option("--alias", o->alias, "model_name to repoint")->required();
  swap->add_option("--deployment", o->deployment, "which deployment of a load-balanced alias: N (1-based), its "
                                                  "model_info.id, its api_base or its model");
  add_seat_options(swap, *o);
  swap->add_flag(
      "--keep-api-key", o->keep_api_key,
      "keep the deployment's api_key as it is: with --api-key-env the probe still sends that variable's key; "
      "without, it says a literal key is meant for the new backend");
  CLI::App* add = sub.add_subcommand("add", "probe a backend, then create an alias for it (backup + diff)");
  common(add);
  add->add_option("--alias", o->alias, "model_name to create")->required();
  add_seat_options(add, *o);
  add->add_option("--model-info", o->model_info, "model_info KEY=VALUE (VALUE is YAML), e.g. id=chat-gpu9; repeatable");
  add->add_flag("--replica", o->replica, "the alias exists: add one more deployment LiteLLM load-balances with it");
  CLI::App* rollback = sub.add_subcommand("rollback", "restore a backup byte for byte (default: the newest)");
  common(rollback);
  rollback->add_option("--to", o->to, "backup file to restore");
  CLI::App* retire = sub.add_subcommand("retire", "comment an alias out (reversible), after a backup");
  common(retire);
  retire->add_option("--alias", o->alias, "model_name to retire")->required();
  retire->add_option("--deployment", o->deployment,
                     "retire one deployment of a load-balanced alias: N (1-based), its "
                     "model_info.id, its api_base or its model");
  retire->add_flag("--all-deployments", o->all_deployments, "retire every deployment of the alias");
  CLI::App* check = sub.add_subcommand("check", "probe an alias through the gateway itself, as its clients see it");
  common(check);
  check->add_option("--alias", o->alias, "model_name to probe")->required();
  check->add_option("--url", o->url, "the gateway's base URL (default http://127.0.0.1:4000)");
  check->add_option("--checks", o->checks, "probe checks (default all)");
  check->add_option("--api-key-env", o->api_key_env, "environment variable with a gateway key (default: the config's "
                                                     "general_settings.master_key)");
  check->add_option("--timeout", o->timeout, "deadline of each probe check in seconds")->check(in_range(0.1, 3600.0));
  check->add_flag("--multimodal", o->multimodal, "the alias takes images: a rejected image fails");
  check->add_flag("--text-only", o->text_only, "the alias takes no images: skip the vision check");
  check->add_flag("--no-tools", o->no_tools, "the alias serves no tools: skip the tools check");
  sub.footer(
      "Exit: 0 ok, 1 probe failed (file untouched), 2 usage, 3 bad config, 4 I/O or backend/gateway unreachable.\n"
      "Examples:\n"
      "  fp4forge gateway show --config litellm.yaml --backend http://gpu7:8000\n"
      "  fp4forge gateway swap --config litellm.yaml --alias chat --backend-model hosted_vllm/org/m-NVFP4A16 \\\n"
      "      --api-base http://gpu7:8000/v1 --param 'extra_body={chat_template_kwargs: {enable_thinking: false}}'\n"
      "  fp4forge gateway swap --config litellm.yaml --alias chat --deployment 2 --backend-model hosted_vllm/org/m \\\n"
      "      --api-base http://gpu8:8000/v1 --api-key-env GPU8_KEY\n"
      "  fp4forge gateway add --config litellm.yaml --alias char-rp-fast --backend-model hosted_vllm/org/m \\\n"
      "      --api-base http://gpu9:8000/v1 --api-key-env GPU9_KEY --model-info id=char-rp-fast-gpu9\n"
      "  fp4forge gateway check --config litellm.yaml --alias chat --url http://litellm:4000\n"
      "  fp4forge gateway rollback --config litellm.yaml");
  show->callback([&action, o] {
    action = [o]() -> int {
      auto s = gateway::gateway_show(o->config, o->backend);
      if (!s.ok()) return report_error(s.error(), o->json);
      for (const auto& w : s->warnings) warn(w);
      if (o->json) {
        print_json(with_schema(gateway::to_json(*s), "gateway"));
      } else {
        print_report(gateway::to_text(*s));
      }
      return 0;
    };
  });
  swap->callback([&action, o] { action = [o]() -> int { return run_swap(*o); }; });
  add->callback([&action, o] { action = [o]() -> int { return run_add(*o); }; });
  rollback->callback([&action, o] {
    action = [o]() -> int { return finish_edit(*o, gateway::gateway_rollback(o->config, o->to)); };
  });
  retire->callback([&action, o] {
    action = [o]() -> int {
      return finish_edit(*o, gateway::gateway_retire(o->config, o->alias, o->deployment, o->all_deployments));
    };
  });
  check->callback([&action, o] { action = [o]() -> int { return run_check(*o); }; });
}

}  // namespace fp4forge::cli
