#pragma once
/**
 * `model.safetensors.index.json` as fp4forge writes it, in one place: `{"metadata": {...}, "weight_map":
 * {tensor: shard, ...}}` with the weight map's keys sorted, indent 2, in one of the two forms the reference
 * writers use:
 * - MODEL_FREE (llm-compressor `model_free_ptq`, what quantize and the MTP splice write): metadata holds
 *   `total_size` only; no trailing newline.
 * - TRANSFORMERS (`save_pretrained`, what synth writes): metadata holds `total_parameters` and
 *   `total_size`; a trailing newline.
 */
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace fp4forge::st {

enum class IndexForm { MODEL_FREE, TRANSFORMERS };

/** The index text for `weight_map` (an object tensor name -> shard file; nlohmann::json sorts its keys). */
std::string index_text(const nlohmann::json& weight_map, std::uint64_t total_size, IndexForm form = IndexForm::MODEL_FREE,
                       std::uint64_t total_parameters = 0);

}  // namespace fp4forge::st
