#pragma once
/**
 * Typed reads of one key of a JSON object from an untrusted file (config.json, a processor or tokenizer file):
 * they never throw, whatever the value's type, and never coerce (a "4" is not 4, a 4.0 is not an integer). The one
 * home of these getters: doctor's checks, the shape rules, the registry and model info read keys through them.
 *
 * One integer policy per file: config.json's integers (what transformers reads into its config) are read with
 * integral_of everywhere (model info, the registry's MoE-layer and width keys, the shape rules, doctor's Gemma-4
 * checks, the KV planner), so no reader sees a `3.0` the others do not; files whose writers emit integers only
 * (processor and tokenizer files, vLLM's JSON, compressed-tensors' quantization_config) use int_of.
 */
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace fp4forge {

/** `j[key]` when `j` is an object and the value is a JSON integer; nullopt otherwise. */
std::optional<std::int64_t> int_of(const nlohmann::ordered_json& j, std::string_view key) noexcept;
/** int_of, or a float with an integral value below 2^63 in magnitude (a config written as `4.0`, read as 4 the way
 * Python's int() would); nullopt otherwise. */
std::optional<std::int64_t> integral_of(const nlohmann::ordered_json& j, std::string_view key) noexcept;
/** `j[key]` when `j` is an object and the value is a JSON boolean; nullopt otherwise. */
std::optional<bool> opt_bool_of(const nlohmann::ordered_json& j, std::string_view key) noexcept;
/** `j[key]` when `j` is an object and the value is a JSON string; "" otherwise. */
std::string str_of(const nlohmann::ordered_json& j, std::string_view key);
/** True only when `j` is an object whose `key` is the boolean true. */
bool bool_of(const nlohmann::ordered_json& j, std::string_view key) noexcept;
/** Whether `j` is an object holding `key` with a non-null value. */
bool has_non_null(const nlohmann::ordered_json& j, std::string_view key) noexcept;

}  // namespace fp4forge
