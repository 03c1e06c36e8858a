#pragma once
// The gate a deployment passes before gateway swap or gateway add writes it (private to the gateway module): the
// probe sent as LiteLLM will send requests after the reload — the key the deployment will carry, the alias's
// litellm_params extras in the body — and, for an alias that takes images, the vision check required. Swap and
// add share it, so a promise the alias makes (its key, its extras, its images) is proven the same way by both.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "config_text.h"

namespace fp4forge::gateway::detail {

/** What LiteLLM adds to a request body from a deployment's litellm_params: `defaults` are sent unless the
 * client's request sets the key (LiteLLM's router spreads the request over the deployment's params), `overrides`
 * (the `extra_body` mapping) are merged over the body by the OpenAI client. Keys LiteLLM consumes itself (model,
 * api_base, api_key, timeouts, rpm/tpm, costs, credentials, ...) are not sent; docs/cli/gateway.md lists them. */
struct RequestExtras {
  nlohmann::json defaults = nlohmann::json::object();
  nlohmann::json overrides = nlohmann::json::object();
};
RequestExtras litellm_request_extras(const YAML::Node& litellm_params);

/** A YAML value as PyYAML (YAML 1.1, what LiteLLM loads its config with) reads it, as JSON: plain scalars become
 * booleans (true/yes/on ...), null, integers or floats where they read as such; quoted scalars stay strings. */
nlohmann::json yaml_to_json(const YAML::Node& n, int depth = 0);

/** The deployment an edit writes and the alias it joins. */
struct Gate {
  std::string path;
  std::string alias;
  YAML::Node new_params;                     // litellm_params as the edited file reads
  YAML::Node new_model_info;                 // add: the new entry's model_info (may be undefined)
  std::vector<const Entry*> alias_entries;   // the alias's deployments before the edit
  const Entry* replaced = nullptr;           // swap: the deployment repointed
};

/** USAGE for contradicting or malformed options shared by swap and add (`command` names the subcommand). */
Status check_seat_options(const SeatOptions& o, const char* command);

/** The warnings of a new deployment before any request: an api_base without /v1, NOT PROVEN with --no-probe. */
void seat_warnings(const SeatOptions& o, std::vector<std::string>& warnings);

/** The probe a deployment must pass: decides whether the alias takes images, sends the probe with the key and
 * extras the deployment will carry, and on a failed check sets out.refused. Fills out.probe and out.warnings, and
 * `check_flags` with the flags of `gateway check` that ask the same (--checks, --multimodal / --text-only, --no-tools).
 * USAGE when the alias takes images and the checks leave vision out (without --text-only). */
Status run_gate(const Gate& g, const SeatOptions& o, EditResult& out, std::string* check_flags = nullptr);

/** The end of swap and add: the gate (unless --no-probe), then, when it passed, write_edit (config_text.h). */
Status gate_and_write(const Gate& g, const SeatOptions& o, const stdfs::path& config, const std::string& text,
                      const std::string& new_text, EditResult& out);

/** Warns when the proxy keeps its models in a database (general_settings.store_model_in_db, or STORE_MODEL_IN_DB
 * in the config's environment_variables or in this environment): a deployment added there does not change when
 * the file does. */
void warn_store_model_in_db(const Parsed& p, const std::string& alias, std::vector<std::string>& warnings);

}  // namespace fp4forge::gateway::detail
