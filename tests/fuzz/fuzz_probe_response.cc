// Fuzzes the probe's HTTP response handling: every request gets the fuzz input as its body, with a
// status chosen by the first byte. run_probe must classify, never crash or hang.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fp4forge/probe/http_client.h"
#include "fp4forge/probe/probe.h"

namespace {
class FuzzClient final : public fp4forge::probe::HttpClient {
 public:
  FuzzClient(const std::uint8_t* d, std::size_t n) : data_(d), size_(n) {}
  fp4forge::probe::HttpResponse send(const fp4forge::probe::HttpRequest&) override {
    fp4forge::probe::HttpResponse r;
    static const int kStatus[] = {200, 200, 200, 400, 500, 404, 200, 429};
    r.transport = fp4forge::probe::Transport::OK;
    r.status = size_ ? kStatus[data_[0] % 8] : 200;
    r.body.assign(reinterpret_cast<const char*>(data_), size_);
    r.content_type = "application/json";
    return r;
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzClient client(data, size);
  auto report = fp4forge::probe::run_probe(client, "http://127.0.0.1:1", "m", fp4forge::probe::all_checks(),
                                           fp4forge::probe::ProbeOptions{});
  (void)report;
  return 0;
}
