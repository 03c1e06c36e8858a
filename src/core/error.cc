#include "fp4forge/error.h"

namespace fp4forge {

const char* errc_name(Errc c) noexcept {
  switch (c) {
    case Errc::CHECK_FAILED: return "check_failed";
    case Errc::USAGE: return "usage";
    case Errc::BAD_INPUT: return "bad_input";
    case Errc::IO: return "io";
    case Errc::INTERNAL: return "internal";
  }
  return "internal";
}

std::string Error::describe() const {
  std::string out;
  if (!file.empty() && message.find(file) == std::string::npos) out += file + ": ";
  if (!tensor.empty() && message.find(tensor) == std::string::npos) out += "tensor '" + tensor + "': ";
  out += message;
  return out;
}

}  // namespace fp4forge
