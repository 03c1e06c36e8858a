// Fuzzes recipe reading (quantize/recipe.h): a recipe file's YAML/JSON text, each of its rules compiled, and the
// text as a --scheme-for argument; every failure must be an error value (USAGE), never a crash or an exception.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fp4forge/quantize/plan.h"
#include "fp4forge/quantize/recipe.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto r = fp4forge::quant::parse_recipe(text, "fuzz.yaml"); r.ok()) {
    for (const auto& rule : r->rules) (void)fp4forge::quant::compile_rule(rule);
    fp4forge::quant::PlanOptions o;
    fp4forge::quant::apply_recipe(*r, o, false, false);
  }
  if (auto r = fp4forge::quant::parse_scheme_for(text); r.ok()) {
    if (auto c = fp4forge::quant::compile_rule(*r); c.ok()) {
      const fp4forge::quant::SelectorSubject s{{"model.layers.1.self_attn.q_proj"}, fp4forge::Role::ATTN_Q, 1};
      for (const auto& sel : c->selectors) (void)sel.matches(s, 4);
    }
  }
  return 0;
}
