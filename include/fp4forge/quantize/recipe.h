#pragma once
/**
 * Recipes of several schemes (issue 30, docs/recipes.md): which scheme each quantized module gets.
 *
 * A rule maps a selector to a scheme (and optionally its observer); the first rule that selects a module wins
 * (llm-compressor's model-free matching: the first group whose targets match), and a module no rule selects
 * gets the default scheme (`--scheme`). Selectors:
 * - a module name as on disk (`model.layers.0.self_attn.q_proj`) or `re:REGEX` (compressed-tensors matching:
 *   re.match, anchored at the start only); a fused 3-D expert tensor is selected by its own name or by the
 *   per-expert module it splits into;
 * - a role: `attention`, `dense_mlp`, `experts` (routed), `shared_experts`, `linear_attention`;
 * - a layer range of the text stack: `last_n_layers=K`, `first_n_layers=K`.
 * A rule never quantizes a module the policy keeps (routers, embeddings, towers, ...): it picks the scheme of
 * what is quantized, and the policy is asked with that scheme (GatedDeltaNet projections at 8 bits).
 *
 * Sources of rules: `--scheme-for SELECTOR=SCHEME[:OBSERVER]` (repeatable) and `--recipe FILE` (YAML or JSON):
 *
 *     scheme: nvfp4a16            # the default scheme (optional; --scheme given on the command line wins)
 *     observer: mse               # the default scheme's observer (optional; likewise)
 *     rules:                      # in order; the first whose `match` selects a module wins
 *       - match: attention        # one selector or a list
 *         scheme: fp8-block
 *       - match: [last_n_layers=2, "re:.*shared_experts.*"]
 *         scheme: fp8-dynamic
 *         observer: minmax        # optional: the scheme's default observer otherwise
 *     ignore: ["re:.*mtp.*"]      # optional: added to --ignore
 *
 * `--scheme-for` rules come before the recipe's. Unknown keys, a scheme or observer fp4forge does not write,
 * an observer the scheme does not take, or an empty `match` are USAGE errors naming the file and the rule.
 */
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fp4forge/codec/observer.h"
#include "fp4forge/codec/scheme.h"
#include "fp4forge/core/error.h"
#include "fp4forge/model/tensor_role.h"
#include "fp4forge/quantize/name_pattern.h"

namespace fp4forge::quant {

/** One rule: its selectors, the scheme and observer (parsed where the text was read: --scheme-for, the recipe
 * file), and where it came from (for messages). */
struct SchemeRule {
  /** Selectors ("attention", "re:.*mlp.*", "model.layers.3.self_attn.o_proj", "last_n_layers=2"): any selects. */
  std::vector<std::string> match;
  QuantScheme scheme = QuantScheme::NVFP4A16;
  std::optional<Observer> observer;  ///< nullopt: the scheme's default_observer
  std::string origin;    ///< "--scheme-for attention=fp8-block", "recipe.yaml rules[1]"
};

/** A recipe file, read. */
struct Recipe {
  std::optional<QuantScheme> scheme;  ///< the default scheme, when the file sets one
  std::optional<Observer> observer;   ///< the default scheme's observer, when the file sets one
  std::vector<SchemeRule> rules;
  std::vector<std::string> ignore;
};

struct PlanOptions;  // quantize/plan.h

/**
 * Folds a recipe into the plan options the command line gave: its scheme and observer become the defaults
 * unless the command line named them (`scheme_given` / `observer_given`: the command line wins), its rules go
 * after the `--scheme-for` rules already in `opts`, its ignore entries after `--ignore`'s.
 */
void apply_recipe(const Recipe& r, PlanOptions& opts, bool scheme_given, bool observer_given);

/** `SELECTOR=SCHEME[:OBSERVER]` of `--scheme-for`; USAGE when malformed (the selector and scheme are checked
 * when compiled). */
Result<SchemeRule> parse_scheme_for(std::string_view arg);

/** A recipe from YAML or JSON text; `where` names it in messages. USAGE for anything malformed. */
Result<Recipe> parse_recipe(std::string_view text, std::string_view where);

/** parse_recipe of a file; IO when it cannot be read. */
Result<Recipe> read_recipe(const std::filesystem::path& file);

/** What a selector is shown one module as. `names`: the module and, for a split expert, its source tensor. */
struct SelectorSubject {
  std::vector<std::string> names;
  Role role = Role::OTHER;  ///< the module's role (a split expert's: EXPERT_GATE/UP/DOWN)
  int layer = -1;           ///< text-stack decoder layer, -1 outside the text stack
};

/** One compiled selector. */
class Selector {
 public:
  /** USAGE naming the selector for an unknown role, a bad K or a regex that does not compile. */
  static Result<Selector> parse(std::string_view text);
  /** Whether the selector selects the module; `num_layers` is the text stack's layer count. */
  bool matches(const SelectorSubject& m, std::int64_t num_layers) const;
  const std::string& text() const noexcept { return text_; }
  /** An exact module name (a typo is an error when it selects nothing). */
  bool is_exact() const noexcept { return kind_ == Kind::NAME && !pattern_->is_regex(); }

 private:
  enum class Kind { NAME, ROLE, LAST_N, FIRST_N };
  std::string text_;
  Kind kind_ = Kind::NAME;
  std::optional<NamePattern> pattern_;
  std::vector<Role> roles_;
  std::int64_t n_ = 0;
};

/** The role selectors and what each selects, for messages and docs ("attention", "dense_mlp", ...). */
std::vector<std::string_view> selector_roles();

/** A rule compiled: its selectors (a `--scheme-for` has one), scheme and observer. */
struct CompiledRule {
  std::vector<Selector> selectors;
  QuantScheme scheme = QuantScheme::NVFP4A16;
  Observer observer = Observer::MINMAX;
  std::string origin;
};

/** Compiles a rule: its selectors, scheme and observer (check_observer). USAGE naming the rule's origin. */
Result<CompiledRule> compile_rule(const SchemeRule& r);

}  // namespace fp4forge::quant
