#pragma once
/**
 * `gateway`: read and edit a LiteLLM proxy `config.yaml` without disturbing anything else in it.
 *
 * yaml-cpp does not keep comments, so edits are done as line-based text edits located with the parsed
 * structure (yaml-cpp marks give each key's line and column). Every edit is then re-parsed and checked:
 * the edited alias must carry exactly the intended `litellm_params`, and every other entry must parse
 * to the same values as before. Lines outside the edit are byte-identical by construction.
 *
 * Writes follow the cutover order of failure catalogue F44: probe the new seat first (swap), take a
 * named backup `FILE.bak-fp4forge-YYYYMMDD-HHMMSS` (same directory, same permissions), then replace
 * the file atomically (temp file + fsync + rename).
 */
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fp4forge/core/error.h"
#include "fp4forge/probe/probe.h"

namespace fp4forge::gateway {

/** One `model_list` entry (a LiteLLM "deployment"). */
struct GatewayRoute {
  std::string alias;     ///< model_name
  std::string model;     ///< litellm_params.model (e.g. "hosted_vllm/Qwen/Qwen3-8B")
  std::string api_base;  ///< litellm_params.api_base ("" when absent)
  int line = 0;          ///< 1-based line of the entry
  bool wildcard = false; ///< model_name contains '*'
  std::vector<std::pair<std::string, std::string>> params;  ///< other scalar litellm_params (api_key
                                                            ///< values shown as "***" unless os.environ/)
};

/** An alias that `gateway retire` commented out (found through its marker comment). */
struct RetiredAlias {
  std::string alias;
  int line = 0;  ///< 1-based line of the marker comment
};

struct GatewayShow {
  std::string path;
  std::vector<GatewayRoute> routes;
  std::vector<RetiredAlias> retired;
  std::string backend;                     ///< the --backend asked about ("" when none)
  std::vector<std::string> backend_aliases;  ///< aliases whose api_base routes to `backend`
  std::vector<std::string> warnings;       ///< wildcard routes, duplicate aliases, missing api_base ...
};

/** Parses a LiteLLM config text (`path` only names it in messages). */
Result<GatewayShow> gateway_show_text(const std::string& text, const std::string& path,
                                      const std::string& backend = {});
/** Reads and parses FILE (BAD_INPUT when it is not a LiteLLM config, IO when unreadable). */
Result<GatewayShow> gateway_show(const std::filesystem::path& config, const std::string& backend = {});

/** True when two base URLs name the same server (scheme, host, port; a trailing "/v1" or "/" ignored). */
bool same_backend(std::string_view a, std::string_view b);

/** A deployment to write (gateway swap, gateway add) and the probe it must pass first. */
struct SeatOptions {
  std::string alias;
  std::string backend_model;  ///< new litellm_params.model
  std::string api_base;       ///< new litellm_params.api_base
  std::vector<std::pair<std::string, std::string>> params;  ///< extra litellm_params KEY=VALUE (YAML)
  /** The environment variable holding the backend's key: the probe sends its value, and the deployment gets
   * `api_key: os.environ/NAME` (the secret itself is never written) unless keep_api_key. */
  std::string api_key_env;
  bool keep_api_key = false;  ///< swap: leave the deployment's api_key as it is (the probe still uses api_key_env)
  bool probe = true;          ///< probe the new backend first; refuse on any failed check
  std::string probe_model;    ///< model name at the backend (default: backend_model minus a provider
                              ///< prefix such as "hosted_vllm/" or "openai/")
  std::vector<probe::Check> checks;  ///< empty = all; without prose and logprobs refused unless weak_gate
  bool weak_gate = false;     ///< allow a probe without the checks that catch F1 (prose, logprobs)
  /** api_key: set = the key the probe sends (else api_key_env's value, else the deployment's own api_key);
   * vision: MULTIMODAL (--multimodal) requires the vision check, TEXT_ONLY (--text-only) skips it even for a
   * vision alias (with a warning), AUTO decides from the alias (model_info.supports_vision, or the backend it
   * replaces answering an image). */
  probe::ProbeOptions probe_options;
  probe::HttpClient* client = nullptr;  ///< nullptr = libcurl
  bool dry_run = false;       ///< compute and validate the edit (and probe), write nothing
};

struct SwapOptions : SeatOptions {
  /** Which deployment of a load-balanced alias (several `model_list` entries with one `model_name`) to
   * repoint: its number N (1-based, file order), its `model_info.id`, its `api_base` (same server) or its
   * `litellm_params.model` (with or without the provider prefix); "" when the alias has exactly one deployment. */
  std::string deployment;
};

/** gateway add: a new alias (or, with `replica`, one more deployment of an existing one). */
struct AddOptions : SeatOptions {
  std::vector<std::pair<std::string, std::string>> model_info;  ///< model_info KEY=VALUE (YAML), e.g. id=...
  /** Add a deployment to an alias that exists (LiteLLM load-balances them); without it an existing alias is
   * refused, so that a typo cannot turn a new alias into a second replica of an old one. */
  bool replica = false;
};

/** The LiteLLM providers that send the OpenAI API to an `api_base` (what swap's probe proves), e.g.
 * "hosted_vllm" (vLLM's LiteLLM guide: "hosted_vllm is prefix key word and necessary"). */
const std::vector<std::string>& openai_compatible_providers();

struct EditResult {
  std::string command;         ///< "swap", "add", "rollback" or "retire"
  std::string config;          ///< the config file edited
  bool changed = false;
  std::string backup;          ///< path of the backup taken ("" when none)
  std::string diff;            ///< unified diff old -> new
  std::vector<std::string> warnings;
  std::optional<probe::ProbeReport> probe;  ///< swap with probing only
  std::string refused;         ///< non-empty when the file was left untouched because of a check
  std::vector<std::string> next_steps;  ///< what the operator does next (reload LiteLLM, check the alias)
};

/** Probe the backend, then repoint `alias`. On a failed probe: `refused` is set, nothing is written. */
Result<EditResult> gateway_swap(const std::filesystem::path& config, const SwapOptions& opts);

/** Probe the backend, then append a `model_list` entry for `alias` (after the alias's last deployment with
 * `replica`, else at the end of model_list), with a backup. USAGE for an alias that exists without `replica`. */
Result<EditResult> gateway_add(const std::filesystem::path& config, const AddOptions& opts);

/** Restores `to` (default: the newest FILE.bak-fp4forge-*) byte for byte. The current content is saved
 * first as FILE.rollback-fp4forge-YYYYMMDD-HHMMSS (never picked as a default rollback source). */
Result<EditResult> gateway_rollback(const std::filesystem::path& config,
                                    const std::filesystem::path& to = {});

/** Comments out the entries of `alias` (after a backup), under a marker comment naming the alias. An alias
 * with several deployments needs `deployment` (as in SwapOptions: retire that one, the others keep serving)
 * or `all_deployments`; otherwise USAGE listing them (retiring every replica by accident leaves the alias
 * to whatever wildcard route matches it). */
Result<EditResult> gateway_retire(const std::filesystem::path& config, const std::string& alias,
                                  const std::string& deployment = {}, bool all_deployments = false);

/** `gateway check`: the probe sent through the gateway itself, as a client sees the alias. */
struct CheckOptions {
  std::string alias;
  /** The gateway's base URL; "" = http://127.0.0.1:4000 (LiteLLM's default port). */
  std::string gateway_url;
  std::vector<probe::Check> checks;  ///< empty = all
  /** api_key: "" = the config's `general_settings.master_key` (os.environ/NAME resolved as LiteLLM does);
   * vision: AUTO becomes MULTIMODAL for a vision alias (model_info.supports_vision). */
  probe::ProbeOptions probe_options;
  probe::HttpClient* client = nullptr;  ///< nullptr = libcurl
};

/** A backend that answered through the gateway, as LiteLLM's response headers name it. */
struct ServedBackend {
  probe::ServedBy by;
  std::vector<std::string> checks;  ///< the checks it answered
  std::string deployment;           ///< the live deployment of the alias it matches ("" = none)
};

struct CheckReport {
  std::string config;
  std::string alias;
  probe::ProbeReport probe;           ///< model = the alias, url = the gateway
  std::vector<std::string> warnings;  ///< e.g. a master key named but not set here, models kept in the database
  std::vector<ServedBackend> served;  ///< who answered (empty when the gateway sent no x-litellm-* headers)
  /** Non-empty when the alias answered from a backend no live deployment of it names (the proxy has not
   * reloaded the edited file, or serves the alias from its database): a failure. */
  std::string stale;
  /** Non-empty when a deployment of a load-balanced alias answered no check: half the traffic unproven is no pass
   * (issue 55 tryout G: "ok", exit 0, with the NOT PROVEN warning on stderr). */
  std::string not_proven;
  bool ok() const { return !probe.any_failed() && stale.empty() && not_proven.empty() && probe.not_proven().empty(); }
};

/** Refuses (BAD_INPUT) an alias the config does not route by name (absent, retired, or only matched by a
 * wildcard: a probe would then prove the wildcard's backend); then probes the gateway for it. */
Result<CheckReport> gateway_check(const std::filesystem::path& config, const CheckOptions& opts);

/** The backups of `config` (FILE.bak-fp4forge-*), oldest first. */
std::vector<std::filesystem::path> list_backups(const std::filesystem::path& config);

/** "hosted_vllm/Qwen/Qwen3-8B" -> "Qwen/Qwen3-8B"; names without a known provider prefix unchanged. */
std::string strip_provider_prefix(std::string_view litellm_model);

}  // namespace fp4forge::gateway
