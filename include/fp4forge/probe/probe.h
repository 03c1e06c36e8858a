#pragma once
/**
 * `probe`: prove that a served OpenAI-compatible endpoint (vLLM, or LiteLLM in front of it) actually
 * works, not merely that it starts and answers /health (failure catalogue F1, F18, F40-F42, F44).
 *
 * Each check sends one to three requests under its own deadline and yields a `CheckResult` with a
 * status (pass / fail / skip), a stable classification id, a one-line detail and its latency. Nothing
 * throws; transport failures, HTTP errors and malformed bodies become classifications.
 *
 * Classification ids (stable, used in --json):
 *   ok                     the check passed
 *   connection-refused     nothing listens at the URL
 *   unreachable            DNS / routing / connect timeout
 *   timeout                connected, but no complete answer before the check's deadline
 *   truncated              the connection closed mid-body
 *   stream-cut-off         a streamed answer ended without its final event ("data: [DONE]")
 *   response-too-large     the body exceeded the size cap
 *   server-error           HTTP 5xx
 *   client-error           HTTP 4xx other than the specific cases below
 *   malformed-json         the body is not the JSON the API defines
 *   nan-logits             NaN/Inf reached the API: HTTP 400 "Out of range float values are not JSON
 *                          compliant: nan", a NaN literal in the body, or a non-finite logprob (F1)
 *   content-null-length    content null/empty with finish_reason "length" and no reasoning (F1)
 *   reasoning-no-content   a reasoning field was produced but the answer never reached `content`
 *   empty-content          content null/empty otherwise
 *   degenerate-output      all whitespace, or one repeated character/word (F18)
 *   degenerate-loop        repeated n-gram ratio above the limit in a long generation (F40)
 *   too-short              a long generation stopped before the required token count
 *   inconsistent-usage     finish_reason and usage token counts disagree
 *   runaway-generation     a one-number question did not end with finish_reason "stop" (F1)
 *   wrong-answer           a fixed-answer question was answered wrongly (F42)
 *   model-not-listed       /v1/models does not list the model
 *   missing-logprobs       logprobs were requested but not returned
 *   invalid-logprobs       a logprob is positive or otherwise impossible
 *   image-rejected         the server refused the image (vision forced on)
 *   text-only              (skip) the model does not take images
 *   vision-wrong-answer    the answer does not mention red and circle
 *   tools-not-enabled      the server refuses tool calls (e.g. vLLM without --enable-auto-tool-choice)
 *   no-tool-call           the model answered in text instead of calling the tool
 *   empty-tool-call        tool_calls empty, or a call without name/arguments
 *   invalid-tool-arguments the arguments are not a JSON object with the required field
 *   recall-failed          the fact from turn one was not recalled in turn three
 *   empty-completion       /v1/completions returned no text
 *   not-reasoning          (skip) the model emits no reasoning field
 *   unauthorized           HTTP 401/403: the key is missing or wrong; the checks not yet started are not sent
 *   not-run                (skip) not sent because an earlier request was refused as unauthorized
 *   exceeds-max-tokens     a streamed answer ran past the max_tokens asked (usage, or the chunks counted)
 *   context-recall-failed  the code hidden in a long prompt was not recalled (long-context collapse)
 *   context-refused        the server refused the long prompt for its length (max_model_len)
 *   kv-mismatch            the served KV pool differs from the expected one by more than the tolerance
 *   no-kv-metrics          (skip) /metrics has no vllm:cache_config_info with num_gpu_blocks: not checked
 */
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "fp4forge/core/error.h"
#include "fp4forge/probe/http_client.h"

namespace fp4forge::probe {

/** The checks, in the order they run. Names: models, prose, long, logprobs, vision, tools, multiturn,
 * completions, reasoning, context, kv. */
enum class Check { MODELS, PROSE, LONG, LOGPROBS, VISION, TOOLS, MULTITURN, COMPLETIONS, REASONING, CONTEXT, KV };

const char* check_name(Check c) noexcept;
/** Every check, in run order. */
std::vector<Check> all_checks();
/** Parses "models,prose,..." (or "all"); unknown names are a USAGE error listing the valid ones. */
Result<std::vector<Check>> parse_checks(std::string_view list);

enum class CheckStatus { PASS, FAIL, SKIP };
const char* status_name(CheckStatus s) noexcept;  ///< "pass", "fail", "skip"

/** Whether the model takes images: AUTO decides from the server's answer to the image request. */
enum class VisionMode { AUTO, MULTIMODAL, TEXT_ONLY };

struct CheckResult;

struct ProbeOptions {
  std::string api_key;               ///< sent as "Authorization: Bearer ..."; never printed or logged
  /** Where api_key came from, for a refusal's hint ("" = --api-key-env): "general_settings.master_key of the
   * config", "the alias's litellm_params.api_key", ... (issue 55 tryout: a refused master key blamed --api-key-env). */
  std::string api_key_source;
  /** What to do when the server does not serve the model under its name ("" = check --model, vLLM's
   * --served-model-name): gateway check names the alias and the proxy's reload (issue 55 tryout). */
  std::string model_not_served_hint;
  double timeout_s = 60.0;           ///< deadline of each check (all its requests together)
  double connect_timeout_s = 5.0;    ///< TCP connect deadline per request
  std::size_t max_response_bytes = 16u << 20;
  int max_tokens = 1024;             ///< budget of the short prompts (prose, vision, tools, multiturn)
  int long_max_tokens = 512;         ///< budget of the long generation
  int long_min_tokens = 256;         ///< the long generation must reach this many tokens
  double max_repeat_ratio = 0.30;    ///< repeated word 4-gram ratio above which output is a loop
  int client_max_tokens = 1024;      ///< the max_tokens a typical client sends (reasoning check)
  /** max_tokens was chosen (probe --max-tokens): kept as given. Otherwise a seat whose served max_model_len
   * (/v1/models) is under twice max_tokens gets half its max_model_len as the answer budget of every check, said in
   * each check's detail (tryout Q-H1: a 1024-token seat planned by plan failed its own probe, prompt + 1024 > 1024). */
  bool max_tokens_given = false;
  VisionMode vision = VisionMode::AUTO;
  /** The seat serves no tools (its chat template renders none, no tool-call parser): the tools check is skipped
   * as "no-tools" instead of failing tools-not-enabled (issue 55 tryout F: plan writes such stacks). */
  bool no_tools = false;
  /** Checks sent at once after the first (which proves something answers: an absent server costs one
   * connect); 1 = one after another. Only the libcurl run_probe (or one given a client factory) runs
   * checks concurrently; a single injected client is used serially. */
  int concurrency = 8;
  /** One deadline for the whole probe in seconds; 0 = timeout_s. A check still running at it fails with
   * "timeout"; one not started by then is not sent. A hung seat costs one deadline, not one per check. */
  double total_timeout_s = 0.0;
  /** Called as each check finishes (completion order), one call at a time; the report keeps the requested
   * order. Details are already masked. */
  std::function<void(const CheckResult&)> on_result;
  /** context: the prompt's size in tokens; 0 = 16,384, or less where the served max_model_len is smaller. */
  int context_tokens = 0;
  /** context: the seed of the hidden code and its depth; empty = a random seed (reported, to repeat a run). */
  std::optional<std::uint64_t> seed;
  /** kv: the KV pool expected, in tokens (num_gpu_blocks x block_size); 0 = report the served pool only. */
  std::int64_t expect_kv_tokens = 0;
  std::string expect_kv_from;        ///< where expect_kv_tokens came from, for the report ("plan.json seat 'a'")
  double kv_tolerance = 0.02;        ///< kv: the largest relative difference that passes
  /** Keys every POST body carries unless the probe sets them itself, and keys merged over it: what LiteLLM adds
   * to a request from the alias's litellm_params (gateway's litellm_request_extras). Empty objects by default. */
  nlohmann::json request_defaults = nlohmann::json::object();
  nlohmann::json request_overrides = nlohmann::json::object();
};

/** LiteLLM's response headers: which deployment answered (empty strings when the header was absent). */
struct ServedBy {
  std::string api_base;     ///< x-litellm-model-api-base (query string dropped by LiteLLM; redacted here)
  std::string model_id;     ///< x-litellm-model-id: the deployment's model_info.id (or LiteLLM's hash of it)
  std::string model_group;  ///< x-litellm-model-group: the alias that was asked for
  bool any() const { return !api_base.empty() || !model_id.empty() || !model_group.empty(); }
};

/** kv: the served KV pool read from vLLM's `vllm:cache_config_info` (-1 where unknown). */
struct KvPool {
  std::int64_t num_gpu_blocks = -1;
  std::int64_t block_size = -1;
  std::int64_t tokens = -1;                ///< num_gpu_blocks x block_size
  std::int64_t expected_tokens = -1;       ///< ProbeOptions::expect_kv_tokens, when given
  std::int64_t kv_cache_size_tokens = -1;  ///< the label newer vLLM adds ("GPU KV cache size" as it logs it)
  int engines = 0;                         ///< cache_config_info samples (one per engine)
};

/** context: how the long prompt was built (-1 where unknown). */
struct ContextProbe {
  std::int64_t max_model_len = -1;     ///< served, from /v1/models
  std::int64_t target_tokens = -1;     ///< the size aimed at
  std::int64_t estimated_tokens = -1;  ///< our upper estimate of the prompt (no tokenizer: see docs/cli/probe.md)
  double depth = -1.0;                 ///< where the code sits, 0 = start, 1 = end
  std::uint64_t seed = 0;
  std::string code;                    ///< the code hidden (not a secret: a random word and number)
};

struct CheckResult {
  Check check = Check::MODELS;
  CheckStatus status = CheckStatus::FAIL;
  std::string classification;        ///< see the list above; "ok" on pass
  std::string detail;                ///< one line, API key masked
  double latency_s = 0.0;            ///< wall time of the check's requests
  int http_status = 0;               ///< status of the last request (0: none received)
  std::string finish_reason;         ///< of the last chat/completion answer, if any
  int prompt_tokens = -1;            ///< usage of the last answer (-1: not reported)
  int completion_tokens = -1;
  int reasoning_tokens = -1;         ///< reported or estimated reasoning tokens (-1: none)
  std::string content;               ///< excerpt (<= 200 chars) of the answer's content
  std::string reasoning;             ///< excerpt (<= 200 chars) of reasoning_content / reasoning
  double metric = -1.0;              ///< check-specific number: repeat ratio (long), reasoning/content
                                     ///< token ratio (reasoning); -1 when not applicable
  ServedBy served_by;                ///< LiteLLM's headers of the last answer (through a gateway)
  std::optional<KvPool> kv;          ///< the kv check's reading
  std::optional<ContextProbe> context;  ///< the context check's prompt
};

struct ProbeReport {
  std::string url;    ///< base URL as probed (without a trailing /v1)
  std::string model;
  std::vector<CheckResult> checks;
  /** True when no request reached an HTTP server (every one refused / unreachable). */
  bool unreachable = false;
  /** The model's max_model_len as /v1/models lists it (vLLM does), when the probe read the listing (the models
   * check, or the listing read first to fit the answer budget); -1 otherwise. */
  std::int64_t served_max_model_len = -1;
  /** The keys of ProbeOptions::request_defaults / request_overrides sent with every POST (values not shown). */
  std::vector<std::string> request_extras;
  /** Keys of request_defaults the probe sets itself on every request (temperature, max_tokens): never sent, so
   * the checks do not prove the alias's values (issue 55 tryout: listed as sent). */
  std::vector<std::string> request_not_sent;
  bool all_passed() const;  ///< every check PASS (a SKIP counts as not failed: see any_failed)
  bool any_failed() const;  ///< at least one FAIL
  /** Why a report with no FAIL still proves nothing it was asked to ("" when it does, or when it failed or the
   * server was unreachable): no check passed (every one skipped), or an expectation given (--expect-kv-tokens,
   * --expect-kv-from) was not compared (issue 55 tryout F: "ok", exit 0, with nothing checked). */
  std::string not_proven() const;
};

/** Runs `checks` against `base_url` (with or without a trailing "/v1") for `model` using `client`.
 * Once a request is refused or unreachable, the remaining checks are not sent (status FAIL,
 * classification of that first failure) so an absent server costs one connect, not one per check. */
ProbeReport run_probe(HttpClient& client, std::string_view base_url, std::string_view model,
                      const std::vector<Check>& checks, const ProbeOptions& opts);

/** Same, with the libcurl client: one client per concurrent check (opts.concurrency). */
ProbeReport run_probe(std::string_view base_url, std::string_view model, const std::vector<Check>& checks,
                      const ProbeOptions& opts);

/** Same, with a client per concurrent check from `make_client` (tests: fake clients). */
ProbeReport run_probe(const std::function<std::unique_ptr<HttpClient>()>& make_client, std::string_view base_url,
                      std::string_view model, const std::vector<Check>& checks, const ProbeOptions& opts);

/** `text` with every occurrence of `secret` replaced by "***" (no-op for an empty secret). */
std::string mask_secret(std::string_view text, std::string_view secret);

/** Ratio of repeated word n-grams in `text`: 1 - distinct/total (0 when fewer than n words; falls back
 * to character 8-grams for text without spaces). 0 for varied prose, close to 1 for a loop. */
double repeated_ngram_ratio(std::string_view text, int n = 4);

/** The base URL without trailing '/' and '/v1' ("http://h:8000/v1/" -> "http://h:8000"). */
std::string normalize_base_url(std::string_view url);
/** USAGE unless `url` is an http:// or https:// URL with a host (probe and gateway talk HTTP only: `file://`,
 * `ftp://` and curl's other schemes are refused, never tried). */
Status check_base_url(std::string_view url);

/** Parses a server's JSON (a response body, an SSE event, tool-call arguments) without recursion
 * trouble: text nested deeper than `max_depth` arrays/objects is refused (a discarded value), as the file
 * parsers refuse it; other invalid JSON is discarded too. */
nlohmann::json parse_server_json(std::string_view text, std::size_t max_depth = 256);

/** The password of a `scheme://user:password@host` URL ("" when none). */
std::string url_password(std::string_view url);

}  // namespace fp4forge::probe
