// The context check (internal.h): a code hidden at a random depth of a long prompt, which the answer must recall.
// Long-context collapse (a seat that answers short prompts well and loses the thread past some thousands of
// tokens) is what these seats run 16-bit activations to avoid, and no short probe shows it.
//
// The prompt is built here, without the model's tokenizer: filler sentences of common English words, sized with
// two bounds on characters per token (docs/cli/probe.md, "context"): a typical 4 to aim at the size asked, and a
// conservative 2.5 to stay under the served max_model_len (from /v1/models) with room for the answer. A server
// that still refuses the prompt for its length is a finding (context-refused), not a transport error; when the
// size was chosen here and the refusal names the limit, the prompt is rebuilt once to fit it.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <random>

#include <fmt/format.h>

#include "internal.h"

namespace fp4forge::probe::detail {

namespace {

constexpr int kDefaultTokens = 16384;
constexpr double kTypicalCharsPerToken = 4.0;   // aims the prompt at the size asked
constexpr double kMinCharsPerToken = 2.5;       // bounds it under max_model_len (inferred: common English words)
constexpr int kTemplateTokens = 64;             // the chat template's own tokens (inferred bound)

const char* const kWords[] = {
    "the",    "river",  "town",    "keeps",  "its",    "market", "open",    "on",     "most",   "days",  "and",
    "a",      "baker",  "sells",   "bread",  "near",   "old",    "stone",   "bridge", "where",  "boats", "wait",
    "for",    "morning", "tide",   "while",  "farmers", "bring", "apples",  "from",   "green",  "hills", "north",
    "of",     "valley", "walls",   "children", "read", "quiet",  "library", "with",   "tall",   "windows", "that",
    "face",   "harbor", "light",   "every",  "evening", "small", "lamps",   "glow",   "along",  "narrow", "streets",
    "people", "talk",   "about",   "weather", "roads", "trains", "letters", "gardens", "songs"};
const char* const kCodeWords[] = {"copper", "falcon", "meadow", "cobalt", "harbor", "saffron", "juniper", "quartz",
                                  "walnut", "ember",  "tundra", "violet", "marble", "cedar",   "lantern", "orchid"};

/** Deterministic for a seed on every platform: raw mt19937_64 output (the std distributions are not portable). */
struct Rng {
  std::mt19937_64 g;
  explicit Rng(std::uint64_t seed) : g(seed) {}
  std::uint64_t below(std::uint64_t n) { return g() % n; }
};

struct Prompt {
  std::string text;
  ContextProbe facts;
};

/** Filler of about `tokens` tokens (typical bound) with "The secret code is CODE." at a random depth. */
Prompt build_prompt(std::int64_t tokens, std::uint64_t seed) {
  Rng rng(seed);
  Prompt p;
  p.facts.seed = seed;
  p.facts.code = fmt::format("{}-{}", kCodeWords[rng.below(std::size(kCodeWords))], 1000 + rng.below(9000));
  p.facts.depth = 0.1 + 0.8 * static_cast<double>(rng.below(1001)) / 1000.0;
  const auto target_chars = static_cast<std::size_t>(static_cast<double>(tokens) * kTypicalCharsPerToken);
  const std::size_t code_at = static_cast<std::size_t>(p.facts.depth * static_cast<double>(target_chars));
  static constexpr std::string_view kQuestion =
      "\n\nWhat is the secret code given in the text above? Reply with the code only.";
  p.text = "Read the following text carefully. One sentence in it gives a secret code.\n\n";
  bool placed = false;
  // Whole prompt within target_chars: room left for the longest sentence (15 words), the code's and the question.
  while (p.text.size() + kQuestion.size() + 256 < target_chars) {
    if (!placed && p.text.size() >= code_at) {
      p.text += fmt::format("The secret code is {}. ", p.facts.code);
      placed = true;
    }
    const std::uint64_t n = 8 + rng.below(8);
    for (std::uint64_t w = 0; w < n; ++w) {
      std::string word = kWords[rng.below(std::size(kWords))];
      if (w == 0) word[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(word[0])));
      p.text += word;
      p.text += w + 1 == n ? ". " : " ";
    }
    if (rng.below(6) == 0) p.text += "\n\n";
  }
  if (!placed) p.text += fmt::format("The secret code is {}. ", p.facts.code);
  p.text += kQuestion;
  p.facts.target_tokens = tokens;
  p.facts.estimated_tokens =
      static_cast<std::int64_t>(std::ceil(static_cast<double>(p.text.size()) / kMinCharsPerToken));
  return p;
}

/** The prompt size that fits `max_model_len` with room for `answer` tokens, by the conservative bound. */
std::int64_t fitting_tokens(std::int64_t max_model_len, int answer) {
  const double room = static_cast<double>(max_model_len - answer - kTemplateTokens);
  return std::max<std::int64_t>(0, static_cast<std::int64_t>(room * kMinCharsPerToken / kTypicalCharsPerToken));
}

/** The number after `phrase` in `l` (lower case), skipping up to 16 non-digits; -1 when none. */
std::int64_t number_after(const std::string& l, std::string_view phrase) {
  std::size_t i = l.find(phrase);
  if (i == std::string::npos) return -1;
  i += phrase.size();
  for (std::size_t k = 0; i < l.size() && k < 16 && !std::isdigit(static_cast<unsigned char>(l[i])); ++k) ++i;
  std::int64_t v = -1;
  for (std::size_t k = 0; i < l.size() && k < 12 && std::isdigit(static_cast<unsigned char>(l[i])); ++i, ++k)
    v = (v < 0 ? 0 : v * 10) + (l[i] - '0');
  return v;
}

/** A refusal for length (vLLM: "This model's maximum context length is N tokens. However, you requested ...",
 * "... is longer than the maximum model length of N"; LiteLLM passes them through). Sets `limit` when named. */
bool length_refusal(const Call& c, std::int64_t& limit) {
  if (c.status < 400 || c.status >= 500) return false;
  std::string l = c.server_message;
  for (char& ch : l) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  const bool refused = contains_any(l, {"maximum context length", "maximum model length", "max_model_len",
                                        "context length", "context_length_exceeded", "too long", "longer than"});
  if (!refused) return false;
  limit = -1;
  for (std::string_view ph : {"maximum context length is", "maximum model length of", "maximum model length is",
                              "max_model_len"})
    if (limit <= 0) limit = number_after(l, ph);
  return true;
}

}  // namespace

std::int64_t max_model_len_of(const json& models, const std::string& model) {
  const json* data = field(models, "data");
  if (data == nullptr || !data->is_array()) return -1;
  for (const json& m : *data)
    if (str_field(m, "id") == model) {
      const json* v = field(m, "max_model_len");
      if (v != nullptr && v->is_number_integer() && v->get<std::int64_t>() > 0) return v->get<std::int64_t>();
    }
  return -1;
}

std::int64_t served_max_model_len(Ctx& ctx, Clock::time_point deadline) {
  Call c = exchange(ctx, "GET", "/v1/models", nullptr, deadline);
  return c.ok ? max_model_len_of(c.body, ctx.model) : -1;
}

void check_context(Ctx& ctx, CheckResult& r, Clock::time_point deadline) {
  int answer = ctx.opts.max_tokens;
  const bool asked = ctx.opts.context_tokens > 0;
  const std::int64_t served = served_max_model_len(ctx, deadline);
  if (ctx.shared.unauthorized) return fail(r, "unauthorized", "GET /v1/models was refused as unauthorized");
  // The answer is a short code: a short-context seat gets a smaller answer budget, said, rather than a refusal the
  // probe made itself (issue 55 tryout: max_model_len 1024 beside the default --max-tokens 1024 failed, nothing sent).
  std::string lowered;
  if (!asked && served > 0 && fitting_tokens(served, answer) < 256)
    if (const int cap = static_cast<int>(std::max<std::int64_t>(64, served / 4));
        cap < answer && fitting_tokens(served, cap) >= 256) {
      lowered = fmt::format(
          " (max_tokens {} for this check, not {}: the served max_model_len {} leaves no room for a "
          "long prompt beside it)",
          cap, answer, served);
      answer = cap;
    }
  std::int64_t tokens = asked ? ctx.opts.context_tokens : kDefaultTokens;
  if (!asked && served > 0) tokens = std::min(tokens, fitting_tokens(served, answer));
  if (tokens < 256)
    return fail(r, "context-refused",
                fmt::format("the served max_model_len {} leaves no room for a long prompt beside max_tokens {} "
                            "(nothing was sent); hint: lower --max-tokens",
                            served, answer));
  const std::uint64_t seed = ctx.opts.seed ? *ctx.opts.seed : std::random_device{}();
  Prompt p = build_prompt(tokens, seed);
  p.facts.max_model_len = served;
  Call c;
  for (int attempt = 0;; ++attempt) {
    r.context = p.facts;
    json body = chat_body(ctx, json::array({user_msg(p.text)}), answer);
    c = exchange(ctx, "POST", "/v1/chat/completions", &body, deadline);
    r.http_status = c.status;
    std::int64_t limit = -1;
    if (c.ok || !length_refusal(c, limit)) break;
    const std::int64_t fit = limit > 0 ? fitting_tokens(limit, answer) : -1;
    if (asked || attempt > 0 || fit < 256 || fit >= tokens)
      return fail(r, "context-refused",
                  fmt::format("a prompt of about {} tokens (at most ~{} by our bound; served max_model_len {}) was "
                              "refused for its length: {}; {}",
                              p.facts.target_tokens, p.facts.estimated_tokens, served > 0 ? std::to_string(served) : "not listed",
                              c.detail,
                              asked ? "lower --context-tokens, or serve a longer --max-model-len"
                                    : "the seat refuses prompts its max_model_len should take"));
    p = build_prompt(fit, seed);  // the limit the refusal named, with room for the answer
    p.facts.max_model_len = limit;
  }
  if (!c.ok) return fail(r, c.cls, c.detail);
  const Answer a = read_chat(c.body);
  record(r, a);
  if (fail_if_no_content(r, a, answer)) return;
  std::string got = a.content, want = p.facts.code;
  for (std::string* s : {&got, &want})
    for (char& ch : *s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  const std::string size = fmt::format("{} prompt tokens{}, code at depth {:.0f} %",
                                       a.prompt_tokens >= 0 ? std::to_string(a.prompt_tokens)
                                                            : fmt::format("~{}", p.facts.target_tokens),
                                       a.prompt_tokens >= 0 ? "" : " (estimated)", p.facts.depth * 100.0);
  if (got.find(want) == std::string::npos)
    return fail(r, "context-recall-failed",
                fmt::format("{}: expected '{}' in the answer, got '{}' (seed {}: --seed {} repeats this prompt); the "
                            "seat loses long contexts (F40: a defect that only shows in longer contexts)",
                            size, p.facts.code, excerpt(trim(a.content), 80), seed, seed));
  pass(r, fmt::format("recalled '{}' from {}{}", p.facts.code, size, lowered));
}

}  // namespace fp4forge::probe::detail
