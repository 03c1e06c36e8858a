#pragma once
/**
 * The one way fp4forge reads YAML that people write (recipes, LiteLLM configs): a text is accepted only where
 * PyYAML's `safe_load` (LiteLLM's loader, and what most tooling reads YAML with) would read the same values as
 * yaml-cpp. Where the two readers part, the text is refused with the line, never read one way silently
 * (round 4, R4-B6 / R4-B14):
 *
 * - **characters**: UTF-8 (a BOM allowed) holding only what PyYAML's reader takes: tab, LF, CR and printable
 *   characters (no NUL or other C0 control, no DEL, no C1 control but NEL, no U+FFFE / U+FFFF); ill-formed
 *   UTF-8 is refused too;
 * - **one document**: a second document (`---` after the first) is refused; PyYAML's safe_load refuses a stream
 *   of several, yaml-cpp's Load would read the first;
 * - **keys**: a key repeated in one mapping, at any depth, is refused naming both lines (yaml-cpp keeps the first,
 *   PyYAML the last). Keys compare as PyYAML constructs them: `true`, `True`, `yes` and `on` are one key (and equal
 *   `1`, as Python's True == 1), `~`, `null` and an empty key are one, `0x1F`, `31`, `037` (YAML 1.1 octal), `3_1`
 *   and `31.0` are one, and so are two `.nan` (PyYAML's one NaN object); a quoted key is a string (`"1"` is not
 *   `1`). Merge keys (`<<`) may repeat, as PyYAML merges each. A list or a mapping used as a key is refused
 *   (PyYAML: "unhashable key");
 * - **tags**: untagged nodes and YAML 1.1's core tags only (`!!str`, `!!int`, `!!float`, `!!bool`, `!!null`,
 *   `!!binary`, `!!timestamp`, `!!seq`, `!!map`, `!!omap`, `!!pairs`, `!!set`, `!!merge`): any other tag
 *   (`!!python/object:...`, `!local`, `!<tag:...>`) is refused, as safe_load has no constructor for it. A core tag
 *   must fit its node (`!!map` on a mapping, `!!int` on an integer's text, `!!bool` on a boolean word);
 *   the text under `!!binary` and `!!timestamp` is not checked.
 *
 * Not covered: whitespace the two grammars treat differently (a tab after `key:` separates to yaml-cpp and is an
 * error to PyYAML): such a text is accepted.
 *
 * Aliases are followed once per anchored collection (a cyclic `<<: *a` inside `&a` ends), and the walk has no
 * depth or size cut: what yaml-cpp parsed is checked whole. yaml-cpp's own parse errors (and its limit on
 * nesting) are refused as invalid YAML with their line and column.
 */
#include <string_view>

#include <yaml-cpp/yaml.h>

#include "fp4forge/core/error.h"

namespace fp4forge::util {

/**
 * `text` as one YAML document under the policy above; an empty text (or only comments) is a null node.
 * Every refusal is one line `WHERE: line L[, column C]: what; expected ...` with code `errc` (a recipe is an
 * argument: USAGE; a LiteLLM config is input: BAD_INPUT).
 */
Result<YAML::Node> load_yaml_strict(std::string_view text, std::string_view where, Errc errc);

}  // namespace fp4forge::util
