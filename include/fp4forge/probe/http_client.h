#pragma once
/**
 * A minimal HTTP client seam for `probe`: one request in, one classified exchange out.
 *
 * `make_curl_client()` is the libcurl implementation used in production; tests may substitute their
 * own `HttpClient`. A client never throws and never hangs: every request has a total deadline and a
 * connect timeout, and the response body is capped. Transport failures are classified (connection
 * refused, timeout, cut-off body, ...) rather than reported as free text, so the probe can map them to
 * stable classification ids. Request headers (which may carry an API key) are never logged or echoed.
 */
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fp4forge::probe {

struct HttpRequest {
  std::string method = "GET";  ///< GET or POST
  std::string url;
  std::vector<std::pair<std::string, std::string>> headers;  ///< e.g. {"Authorization", "Bearer ..."}
  std::string body;                                          ///< sent when non-empty (POST)
  double timeout_s = 60.0;                                   ///< total deadline for the exchange
  double connect_timeout_s = 5.0;                            ///< TCP connect deadline (within timeout_s)
  std::size_t max_response_bytes = 16u << 20;                ///< larger bodies fail as TOO_LARGE
};

/** How the exchange ended at the transport level (before any HTTP status is considered). */
enum class Transport {
  OK,                  ///< a complete HTTP response was received (any status)
  CONNECTION_REFUSED,  ///< nothing listens at the address
  UNREACHABLE,         ///< DNS failure, no route, connect timeout: the server cannot be reached at all
  TIMEOUT,             ///< connected, but the response did not complete before the deadline
  CUT_OFF,             ///< the connection closed before the body was complete (or sent nothing)
  TOO_LARGE,           ///< the body exceeded max_response_bytes
  FAILED,              ///< any other transport error (TLS, protocol, bad URL)
};

/** Stable lower-case-with-dashes name of a Transport value ("connection-refused", ...). */
const char* transport_name(Transport t) noexcept;

struct HttpResponse {
  Transport transport = Transport::FAILED;
  int status = 0;             ///< HTTP status; 0 when no status line was received
  std::string body;           ///< what was received (possibly partial on CUT_OFF/TIMEOUT)
  std::string content_type;   ///< Content-Type header value, if any
  std::string error;          ///< one-line transport error (never contains request headers)
  double elapsed_s = 0.0;     ///< wall time of the exchange
  /** The final response's headers, names lower-cased, values trimmed; at most 100 of them, 64 KiB in all. */
  std::vector<std::pair<std::string, std::string>> headers;
  /** The value of header `lower_name` ("" when absent; the first of repeated ones). */
  std::string header(std::string_view lower_name) const {
    for (const auto& [k, v] : headers)
      if (k == lower_name) return v;
    return {};
  }
};

/** The seam. Implementations must be usable from one thread at a time. */
class HttpClient {
 public:
  virtual ~HttpClient() = default;
  virtual HttpResponse send(const HttpRequest& request) = 0;
};

/** The libcurl client (proxies are honoured from the environment except for loopback hosts). */
std::unique_ptr<HttpClient> make_curl_client();

}  // namespace fp4forge::probe
