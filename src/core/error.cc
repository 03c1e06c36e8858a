#include "fp4forge/core/error.h"

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
  // Hostile inputs (a 1 MB tensor name, a huge JSON string) must not turn into megabyte error lines:
  // keep the head and tail of an over-long message and say how much was elided.
  constexpr std::size_t kMax = 1536, kKeep = 700;
  if (out.size() > kMax) {
    std::size_t head = kKeep, tail = out.size() - kKeep;
    while (head > 0 && (static_cast<unsigned char>(out[head]) & 0xC0) == 0x80) --head;  // UTF-8 boundary
    while (tail < out.size() && (static_cast<unsigned char>(out[tail]) & 0xC0) == 0x80) ++tail;
    out = out.substr(0, head) + " [... " + std::to_string(tail - head) + " bytes elided ...] " + out.substr(tail);
  }
  return out;
}

}  // namespace fp4forge
