// The checkpoint index text (index.h).
#include "fp4forge/safetensors/index.h"

namespace fp4forge::st {

std::string index_text(const nlohmann::json& weight_map, std::uint64_t total_size, IndexForm form,
                       std::uint64_t total_parameters) {
  nlohmann::json idx = nlohmann::json::object();
  idx["metadata"] = nlohmann::json::object();
  if (form == IndexForm::TRANSFORMERS) idx["metadata"]["total_parameters"] = total_parameters;
  idx["metadata"]["total_size"] = total_size;
  idx["weight_map"] = weight_map;
  std::string text = idx.dump(2, ' ', false, nlohmann::detail::error_handler_t::replace);
  if (form == IndexForm::TRANSFORMERS) text += "\n";
  return text;
}

}  // namespace fp4forge::st
