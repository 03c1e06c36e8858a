#pragma once
/**
 * When a string may be written as a plain (unquoted) YAML scalar: the one rule for every YAML file fp4forge
 * writes (plan's compose.yaml and litellm.yaml). A reader resolves a plain scalar by its text: PyYAML (LiteLLM's
 * loader) follows YAML 1.1, where `yes`, `No`, `on`, `OFF`, `y`, `true`, `~`, `null`, `7`, `0x1F`, `012`,
 * `1_000`, `1.5`, `.inf`, `.NaN`, `1:20` (sexagesimal) and `2024-01-01` are booleans, nulls, numbers or dates;
 * YAML 1.2 adds `0o17`. A served model name that a loader retypes no longer matches the string clients send
 * (round 4, R4-B12). Rather than list every resolver, the rule admits only what no resolver of either version
 * can match: a string that starts with a letter, `_` or `/`, holds letters, digits and `_ . / @ + - :` only, does
 * not end with `:` and is none of the words y, n, yes, no, on, off, true, false, null, nan, inf in any case.
 * Everything else is written double-quoted (yaml-cpp's `YAML::DoubleQuoted`, which escapes `"`, `\` and
 * control characters).
 */
#include <string_view>

namespace fp4forge::util {

/** True when `s` reads back as the same string from a plain scalar under YAML 1.1 and 1.2 (see above). */
bool yaml_plain_safe(std::string_view s) noexcept;

}  // namespace fp4forge::util
