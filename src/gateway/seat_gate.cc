// The gate of gateway swap and gateway add (seat_gate.h): the probe of a new deployment sent the way LiteLLM will
// send requests to it, and the promises the alias already makes (its key, its extras, its images) kept.
#include "seat_gate.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fp4forge/util/yaml_strict.h"
#include "fp4forge/util/redact.h"
#include "fp4forge/util/strings.h"

namespace fp4forge::gateway::detail {

using probe::Check;
using probe::CheckStatus;
using probe::VisionMode;

namespace {

/** litellm_params keys LiteLLM consumes instead of sending: `all_litellm_params` (litellm/types/utils.py) and
 * completion()'s own arguments that configure the client, not the request (litellm/main.py), read in BerriAI/litellm
 * main in 2026. Provider credentials (aws_*, vertex_*, azure_*, watsonx_*) and secret-named keys are consumed too. */
bool consumed_by_litellm(const std::string& k) {
  static const std::set<std::string> kConsumed{
      // client and routing
      "model", "api_base", "base_url", "api_key", "api_version", "organization", "timeout", "stream_timeout",
      "request_timeout", "max_retries", "num_retries", "rpm", "tpm", "max_parallel_requests", "weight", "order",
      "model_info", "custom_llm_provider", "extra_headers", "headers", "provider_specific_header", "deployment_id",
      "use_in_pass_through", "use_litellm_proxy", "litellm_credential_name", "region_name", "allowed_model_region",
      "base_model", "hf_model_name", "model_list", "client", "use_client", "id", "azure", "force_timeout",
      "cooldown_time", "fallbacks", "context_window_fallback_dict", "retry_policy", "retry_strategy", "fallback_depth",
      "max_fallbacks",
      // request shaping done by LiteLLM itself
      "drop_params", "additional_drop_params", "allowed_openai_params", "merge_reasoning_content_in_choices",
      "supports_system_message", "ensure_alternating_roles", "user_continue_message", "assistant_continue_message",
      "roles", "final_prompt_value", "bos_token", "eos_token", "configurable_clientside_auth_params",
      "disable_add_transform_inline_image_block", "mock_response", "mock_timeout", "prompt_id", "prompt_variables",
      "prompt_label",
      // logging, caching, budgets, costs
      "metadata", "litellm_metadata", "litellm_trace_id", "litellm_session_id", "tags", "caching", "cache", "ttl",
      "no-log", "cache_key", "preset_cache_key", "caching_groups", "logger_fn", "verbose", "input_cost_per_token",
      "output_cost_per_token", "input_cost_per_second", "output_cost_per_second", "max_budget", "budget_duration",
      "tenant_id", "client_id", "client_secret", "turn_off_message_logging"};
  if (kConsumed.count(k)) return true;
  for (std::string_view prefix : {"aws_", "vertex_", "azure_", "watsonx_", "langfuse_", "gcs_", "langsmith_"})
    if (k.rfind(prefix, 0) == 0) return true;
  return is_secret_key(k);
}

/** Keys that change the answer's shape, which the probe's checks read: left to the probe (a deployment that streams
 * every answer would fail the checks that read one JSON body; what LiteLLM makes of them is not modelled). */
bool shapes_the_answer(const std::string& k) {
  static const std::set<std::string> kShape{"stream", "stream_options", "n", "response_format", "tools", "tool_choice",
                                            "functions", "function_call", "logprobs", "top_logprobs", "messages",
                                            "prompt", "echo"};
  return kShape.count(k) > 0;
}

bool truthy(const YAML::Node& n) {
  if (!n || !n.IsScalar()) return false;
  const nlohmann::json j = yaml_to_json(n);
  return (j.is_boolean() && j.get<bool>()) || (j.is_string() && util::ascii_lower(j.get<std::string>()) == "true");
}

/** Why `alias` takes images ("" when nothing says so): model_info.supports_vision of a deployment. */
std::string vision_by_config(const Gate& g) {
  for (const Entry* e : g.alias_entries)
    if (truthy(child(child(e->node, "model_info"), "supports_vision")))
      return fmt::format("model_info.supports_vision of its deployment at line {}", e->dash_line + 1);
  if (truthy(child(g.new_model_info, "supports_vision")))
    return "model_info.supports_vision of the new deployment";
  return {};
}

/** Asks every deployment the alias has today whether it takes images (one vision request each): the reason when one
 * answered the image, "" when all that could be asked refused it as text-only; a warning for each that could not
 * tell. Every deployment, not the first: LiteLLM spreads the alias's traffic over all of them, so one that answers
 * images makes it a vision alias (tryout N-M1: the answer changed with the order of the file's entries). */
std::string vision_by_backend(const Gate& g, const SeatOptions& o, std::vector<std::string>& warnings) {
  std::vector<const Entry*> asked;
  if (g.replaced != nullptr &&
      std::find(g.alias_entries.begin(), g.alias_entries.end(), g.replaced) == g.alias_entries.end())
    asked.push_back(g.replaced);
  for (const Entry* e : g.alias_entries)
    if (e != nullptr) asked.push_back(e);
  std::vector<std::string> unknown;
  for (const Entry* e : asked) {
    const YAML::Node lp = e->view["litellm_params"];
    const std::string base = scalar_or(lp, "api_base"), model = scalar_or(lp, "model");
    if (base.empty() || !probe::check_base_url(base)) continue;
    const std::string who = asked.size() > 1 ? fmt::format("the deployment at line {}", e->dash_line + 1)
                                             : std::string("the current deployment");
    probe::ProbeOptions po = o.probe_options;
    po.vision = VisionMode::AUTO;
    po.on_result = nullptr;
    po.api_key = resolve_secret(scalar_or(lp, "api_key"), who + "'s litellm_params.api_key", warnings);
    po.api_key_source = who + "'s litellm_params.api_key";
    const RequestExtras x = litellm_request_extras(lp);
    po.request_defaults = x.defaults;
    po.request_overrides = x.overrides;
    const auto rep = o.client != nullptr
                         ? probe::run_probe(*o.client, base, strip_provider_prefix(model), {Check::VISION}, po)
                         : probe::run_probe(base, strip_provider_prefix(model), {Check::VISION}, po);
    const probe::CheckResult& c = rep.checks.front();
    if (c.status == CheckStatus::PASS)
      return fmt::format("{} backend {} answered an image ('{}')", asked.size() > 1 ? "its" : "its current",
                         util::redact_url(base), c.content.substr(0, 60));
    if (c.status == CheckStatus::FAIL)
      unknown.push_back(fmt::format("{} {} answered the vision check with {} ({})", who, util::redact_url(base),
                                    c.classification, util::printable(c.detail, 300)));
  }
  // With --text-only given, the question is only whether the swap takes images away: not a flag to pass (issue 55
  // tryout: "pass --multimodal or --text-only" after --text-only).
  for (const std::string& u : unknown)
    warnings.push_back(fmt::format("could not tell whether alias '{}' takes images today: {}; {}", g.alias, u,
                                   o.probe_options.vision == VisionMode::TEXT_ONLY
                                       ? "--text-only moves it to a text-only seat as asked (check that its clients "
                                         "send no images)"
                                       : "pass --multimodal or --text-only to decide"));
  return {};
}

/** USAGE unless `m` starts with a LiteLLM provider that sends the OpenAI API to an api_base (what the probe
 * proves) and names a model after it. */
Status check_backend_model(const std::string& m) {
  const std::size_t slash = m.find('/');
  const std::string head = slash == std::string::npos ? std::string() : m.substr(0, slash);
  const auto& k = openai_compatible_providers();
  if (slash != std::string::npos && slash + 1 < m.size() && std::find(k.begin(), k.end(), head) != k.end()) return {};
  const std::string rest = slash == std::string::npos ? m : m.substr(slash + 1);
  if (rest.empty())
    return make_error(Errc::USAGE, "--backend-model '{}' names no model after the provider; expected '{}<model name "
                      "at the backend>'", m, m);
  const std::string want = "hosted_vllm/" + (head == "vllm" || std::find(k.begin(), k.end(), head) != k.end() ? rest : m);
  if (slash == std::string::npos)
    return make_error(Errc::USAGE, "--backend-model '{}' has no LiteLLM provider prefix: LiteLLM picks its client by "
                      "the prefix and cannot route a bare name to an api_base; expected '{}' (vLLM's LiteLLM guide: "
                      "'hosted_vllm is prefix key word and necessary')",
                      m, want);
  return make_error(Errc::USAGE, "--backend-model '{}': '{}' is not one of the LiteLLM providers that send the OpenAI API "
                    "to an api_base ({}), which is what the probe proves; expected '{}'",
                    m, head, fmt::join(k, ", "), want);
}

}  // namespace

nlohmann::json yaml_to_json(const YAML::Node& n, int depth) {
  if (!n || n.IsNull() || depth > 64) return nullptr;
  if (n.IsSequence()) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& e : n) a.push_back(yaml_to_json(e, depth + 1));
    return a;
  }
  if (n.IsMap()) {
    nlohmann::json o = nlohmann::json::object();
    for (auto it = n.begin(); it != n.end(); ++it) o[it->first.Scalar()] = yaml_to_json(it->second, depth + 1);
    return o;
  }
  const std::string& v = n.Scalar();
  if (n.Tag() == "!") return v;  // quoted: a string whatever it reads like
  static const std::set<std::string> kTrue{"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"};
  static const std::set<std::string> kFalse{"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"};
  if (kTrue.count(v)) return true;
  if (kFalse.count(v)) return false;
  if (v.empty() || v == "~" || v == "null" || v == "Null" || v == "NULL") return nullptr;
  const bool digits = v.find_first_not_of("+-0123456789") == std::string::npos &&
                      v.find_first_of("0123456789") != std::string::npos && v.find_first_of("+-", 1) == std::string::npos;
  if (digits && v.size() < 19) return std::strtoll(v.c_str(), nullptr, 10);
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  const bool number = end == v.c_str() + v.size() && v.find_first_of("0123456789") != std::string::npos &&
                      v.find_first_not_of("+-.0123456789eE") == std::string::npos;
  // Out of a double's range (`1e999`): JSON has no infinity and nlohmann would write null; the text is sent as a
  // string, never a silently different value.
  if (number && std::isfinite(d)) return d;
  return v;
}

RequestExtras litellm_request_extras(const YAML::Node& lp) {
  RequestExtras x;
  if (!lp || !lp.IsMap()) return x;
  for (auto it = lp.begin(); it != lp.end(); ++it) {
    const std::string k = it->first.Scalar();
    if (k == "extra_body") {
      if (it->second.IsMap())
        for (auto e = it->second.begin(); e != it->second.end(); ++e)
          if (!shapes_the_answer(e->first.Scalar())) x.overrides[e->first.Scalar()] = yaml_to_json(e->second);
      continue;
    }
    if (!consumed_by_litellm(k) && !shapes_the_answer(k)) x.defaults[k] = yaml_to_json(it->second);
  }
  return x;
}

Status check_seat_options(const SeatOptions& o, const char* command) {
  if (!o.api_base.empty()) FP4FORGE_TRY(probe::check_base_url(o.api_base));
  if (o.alias.empty() || o.backend_model.empty() || o.api_base.empty())
    return make_error(Errc::USAGE, "gateway {}: --alias, --backend-model and --api-base are all required", command);
  FP4FORGE_TRY(check_backend_model(o.backend_model));
  // The probe proves the name LiteLLM sends, or nothing: every provider check_backend_model accepts sends MODEL without
  // its prefix (tryout P-H1: --probe-model chat proved 'chat', the file then sent 'chat2', every request a 404).
  if (const std::string sent = strip_provider_prefix(o.backend_model); !o.probe_model.empty() && o.probe_model != sent)
    return make_error(
        Errc::USAGE,
        "--probe-model '{}' is not the name LiteLLM will send: --backend-model '{}' sends '{}'; the probe "
        "would prove a model the alias never asks for. Drop --probe-model, or give --backend-model "
        "'{}/{}' if the backend serves '{}'",
        util::printable(o.probe_model, 120), util::printable(o.backend_model, 120), util::printable(sent, 120),
        o.backend_model.substr(0, o.backend_model.find('/')), util::printable(o.probe_model, 120),
        util::printable(o.probe_model, 120));
  for (const auto& [k, v] : o.params) {
    if (k.empty() || k == "model" || k == "api_base")
      return make_error(Errc::USAGE, "--param '{}={}': use --backend-model / --api-base for model and api_base", k, v);
    if (k == "api_key" && !o.api_key_env.empty())
      return make_error(Errc::USAGE, "--param api_key and --api-key-env {} both set the deployment's key; pick one "
                        "(--api-key-env writes api_key: os.environ/{})", o.api_key_env, o.api_key_env);
    if (v.find('\n') != std::string::npos)
      return make_error(Errc::USAGE, "--param {}: the value must be one line (use YAML flow style: {{a: 1}})", k);
    // "0,7": a decimal comma, which YAML reads as the string "0,7" and vLLM refuses (issue 55 tryout: it passed the
    // gate, whose probe sends its own temperature).
    if (const std::size_t comma = v.find(','); comma != std::string::npos && comma > 0 && comma + 1 < v.size() &&
                                               v.find_first_not_of("-0123456789,") == std::string::npos &&
                                               std::count(v.begin(), v.end(), ',') == 1 && v[0] != ',')
      return make_error(Errc::USAGE,
                        "--param {}={}: a decimal comma, which YAML reads as the string \"{}\"; write {}.{} (or quote "
                        "it, --param '{}=\"{}\"', if the string is meant)",
                        util::printable(k, 80), util::printable(v, 40), util::printable(v, 40), v.substr(0, comma),
                        v.substr(comma + 1), util::printable(k, 80), util::printable(v, 40));
    // The value is written into the file LiteLLM reads with PyYAML's safe_load: only what that reader takes as
    // yaml-cpp does (no `!!python/...` or other non-core tag, no control byte; util/yaml_strict.h, R4-B14).
    const std::string shown = is_secret_key(k) ? std::string("***") : util::printable(v, 120);
    FP4FORGE_TRY(util::load_yaml_strict(v, fmt::format("--param {}={}", util::printable(k, 80), shown), Errc::USAGE));
  }
  const bool env_name = !o.api_key_env.empty() && !std::isdigit(static_cast<unsigned char>(o.api_key_env[0])) &&
                        std::all_of(o.api_key_env.begin(), o.api_key_env.end(), [](char c) {
                          return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
                        });
  if (!o.api_key_env.empty() && !env_name)
    return make_error(Errc::USAGE, "--api-key-env '{}' is not an environment variable name; expected letters, digits "
                      "and '_'", util::printable(o.api_key_env, 80));
  if (o.probe && !o.weak_gate && !o.checks.empty()) {
    std::vector<std::string> missing;
    for (Check c : {Check::PROSE, Check::LOGPROBS})
      if (std::find(o.checks.begin(), o.checks.end(), c) == o.checks.end()) missing.push_back(probe::check_name(c));
    if (!missing.empty())
      return make_error(Errc::USAGE, "gateway {} --checks leaves out {}: the checks that catch a seat serving "
                        "garbage while every health check is green (F1); add them, or pass --weak-gate to {} on "
                        "the reduced probe",
                        command, fmt::format("{}", fmt::join(missing, " and ")), command);
  }
  return {};
}

void seat_warnings(const SeatOptions& o, std::vector<std::string>& warnings) {
  std::string base = o.api_base;
  while (!base.empty() && base.back() == '/') base.pop_back();
  if (probe::normalize_base_url(base) == base)
    warnings.push_back(fmt::format("api_base {} has no /v1: LiteLLM's OpenAI client posts to API_BASE/chat/"
                                   "completions, which vLLM serves under /v1 (inferred from the OpenAI client's URL "
                                   "rule); expected {}/v1",
                                   util::redact_url(o.api_base), util::redact_url(base)));
  if (!o.probe)
    warnings.push_back(
        fmt::format("NOT PROVEN: '{}' {} {} without a probe (--no-probe); a seat can pass "
                    "every health check and still serve garbage (F1): run 'fp4forge probe {} --model "
                    "{}' before traffic arrives",
                    o.alias, o.dry_run ? "would route to" : "now routes to",  // nothing routes on a dry run
                    util::redact_url(o.api_base), util::redact_url(o.api_base),
                    o.probe_model.empty() ? strip_provider_prefix(o.backend_model) : o.probe_model));
}

namespace {

// The flags of `gateway check` that ask what the gate asked: the next step after a swap must not fail a check the
// gate skipped (tryout note: --no-tools left out of the suggested command).
std::string gateway_check_flags(const std::vector<Check>& checks, const probe::ProbeOptions& po) {
  std::string f;
  if (!checks.empty()) {
    // What --no-tools / --text-only skip is not listed (tryout R-L1: "--checks ...,tools,... --no-tools"), and a
    // list of every other check is no list at all.
    std::vector<std::string> names;
    std::size_t skipped = 0;
    for (Check c : probe::all_checks()) {
      const bool off = (c == Check::TOOLS && po.no_tools) || (c == Check::VISION && po.vision == VisionMode::TEXT_ONLY);
      if (off) ++skipped;
      if (!off && std::find(checks.begin(), checks.end(), c) != checks.end()) names.emplace_back(probe::check_name(c));
    }
    if (names.size() + skipped < probe::all_checks().size()) f += fmt::format(" --checks {}", fmt::join(names, ","));
  }
  if (po.vision == VisionMode::MULTIMODAL) f += " --multimodal";
  if (po.vision == VisionMode::TEXT_ONLY) f += " --text-only";
  if (po.no_tools) f += " --no-tools";
  return f;
}

}  // namespace

Status run_gate(const Gate& g, const SeatOptions& o, EditResult& out, std::string* check_flags) {
  const std::string model = o.probe_model.empty() ? strip_provider_prefix(o.backend_model) : o.probe_model;
  const auto checks = o.checks.empty() ? probe::all_checks() : o.checks;
  const bool with_vision = std::find(checks.begin(), checks.end(), Check::VISION) != checks.end();
  probe::ProbeOptions po = o.probe_options;
  // Images: the alias's clients send them if its config says so, or if the backend it has today answers them.
  std::string vision = vision_by_config(g);
  // With --text-only too, so the move away from a backend that answers images is said (issue 55 tryout: silent);
  // and whatever the checks: a gate without vision must still learn that the alias takes images, or it moves a
  // vision alias to a text-only seat in silence (tryout M-M1: `--checks prose,logprobs`, exit 0).
  if (vision.empty() && po.vision != VisionMode::MULTIMODAL) vision = vision_by_backend(g, o, out.warnings);
  if (!vision.empty() && po.vision == VisionMode::TEXT_ONLY)
    out.warnings.push_back(fmt::format(
        "alias '{}' takes images ({}), but --text-only: the vision check is skipped, and clients that send images get "
        "errors if the new backend is text-only{}", g.alias, vision,
        vision.starts_with("model_info.supports_vision")
            ? "; model_info.supports_vision is left as it is, so LiteLLM still advertises images: remove it if the "
              "new backend takes none"
            : ""));
  if (!vision.empty() && po.vision == VisionMode::AUTO) {
    po.vision = VisionMode::MULTIMODAL;
    out.warnings.push_back(fmt::format("alias '{}' takes images ({}): the new backend must pass the vision check "
                                       "(--text-only overrides)", g.alias, vision));
  }
  if (po.vision == VisionMode::MULTIMODAL && !with_vision)
    return make_error(Errc::USAGE, "alias '{}' takes images ({}), and --checks leaves out vision; add vision, or pass "
                      "--text-only to move it to a backend that may not take them",
                      g.alias, vision.empty() ? "--multimodal" : vision);
  // The key LiteLLM will send: the one this edit writes (os.environ/NAME), else the deployment's own.
  if (po.api_key.empty() && !o.api_key_env.empty()) {
    const char* v = std::getenv(o.api_key_env.c_str());
    if (v == nullptr || *v == '\0')
      return make_error(Errc::USAGE, "--api-key-env {}: the variable is not set or empty", o.api_key_env);
    po.api_key = v;
  }
  if (po.api_key.empty()) {
    po.api_key = resolve_secret(scalar_or(g.new_params, "api_key"), "the alias's litellm_params.api_key", out.warnings);
    po.api_key_source = "the alias's litellm_params.api_key";
  }
  if (check_flags != nullptr) *check_flags = gateway_check_flags(o.checks, po);
  const RequestExtras x = litellm_request_extras(g.new_params);
  po.request_defaults = x.defaults;
  po.request_overrides = x.overrides;
  probe::ProbeReport rep = o.client != nullptr ? probe::run_probe(*o.client, o.api_base, model, checks, po)
                                               : probe::run_probe(o.api_base, model, checks, po);
  // The alias's own temperature / max_tokens are never what the probe sends: said as unproven (issue 55 tryout:
  // "with the alias's temperature" for a temperature=-1 the backend never received).
  if (!rep.request_not_sent.empty())
    out.warnings.push_back(fmt::format(
        "NOT PROVEN: the alias's {} (litellm_params) {} not sent by the probe, which sets its own: a client that "
        "leaves {} unset gets the alias's value, which no check here tried",
        fmt::join(rep.request_not_sent, ", "), rep.request_not_sent.size() == 1 ? "is" : "are",
        rep.request_not_sent.size() == 1 ? "it" : "them"));
  if (rep.any_failed()) {
    std::string why;
    for (const auto& c : rep.checks)
      if (c.status == CheckStatus::FAIL)
        why += fmt::format("{}{}: {}", why.empty() ? "" : "; ", probe::check_name(c.check), c.classification);
    out.refused = fmt::format("probe of {} (model '{}') failed ({}); {} left untouched", rep.url, model, why, g.path);
  }
  // The alias's promised context against the backend's (tryout S-M2: model_info.max_input_tokens 4096, written by
  // plan, kept after a swap to a seat of 1024: LiteLLM lets through prompts vLLM refuses).
  const YAML::Node info = g.replaced != nullptr ? child(g.replaced->view, "model_info") : g.new_model_info;
  const std::string declared = scalar_or(info, "max_input_tokens");
  std::int64_t promised = -1;
  if (!declared.empty() && declared.find_first_not_of("0123456789") == std::string::npos && declared.size() < 18)
    promised = std::stoll(declared);
  if (rep.served_max_model_len > 0 && promised > rep.served_max_model_len)
    out.warnings.push_back(fmt::format(
        "alias '{}' declares model_info.max_input_tokens {}, but the new backend serves max_model_len {}: LiteLLM "
        "lets through prompts of up to {} tokens that vLLM refuses (HTTP 400); lower max_input_tokens in {} to at "
        "most {}, or serve a longer max_model_len",
        g.alias, promised, rep.served_max_model_len, promised, g.path, rep.served_max_model_len));
  out.probe = std::move(rep);
  return {};
}

Status gate_and_write(const Gate& g, const SeatOptions& o, const stdfs::path& config, const std::string& text,
                      const std::string& new_text, EditResult& out) {
  std::string check_flags;
  if (o.probe) {
    FP4FORGE_TRY(run_gate(g, o, out, &check_flags));
    if (!out.refused.empty()) return {};
  }
  return write_edit(config, text, new_text, o.alias, o.dry_run, out, check_flags);
}

void warn_store_model_in_db(const Parsed& p, const std::string& alias, std::vector<std::string>& warnings) {
  std::string where;
  if (truthy(child(child(p.root, "general_settings"), "store_model_in_db"))) where = "general_settings.store_model_in_db is true";
  else if (truthy(child(child(p.root, "environment_variables"), "STORE_MODEL_IN_DB")))
    where = "environment_variables.STORE_MODEL_IN_DB is true";
  else if (const char* e = std::getenv("STORE_MODEL_IN_DB"); e != nullptr && util::ascii_lower(e) == "true")
    where = "STORE_MODEL_IN_DB=True in this environment (the proxy's may differ)";
  if (where.empty()) return;
  warnings.push_back(fmt::format("the proxy keeps models in its database ({}): a deployment of '{}' added or edited "
                                 "there (Admin UI, /model/new) is not changed by this file; check the alias in the UI "
                                 "or with GET /model/info, and gateway check it after the reload",
                                 where, alias));
}

}  // namespace fp4forge::gateway::detail
