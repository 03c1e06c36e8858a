// The libcurl HttpClient: one easy handle per request, hard deadlines, capped body, classified errors.
#include <curl/curl.h>

#include <cctype>
#include <cerrno>
#include <string_view>
#include <chrono>
#include <mutex>

#include <fmt/format.h>

#include "fp4forge/probe/http_client.h"
#include "fp4forge/util/redact.h"

namespace fp4forge::probe {

const char* transport_name(Transport t) noexcept {
  switch (t) {
    case Transport::OK: return "ok";
    case Transport::CONNECTION_REFUSED: return "connection-refused";
    case Transport::UNREACHABLE: return "unreachable";
    case Transport::TIMEOUT: return "timeout";
    case Transport::CUT_OFF: return "truncated";
    case Transport::TOO_LARGE: return "response-too-large";
    case Transport::FAILED: return "transport-error";
  }
  return "transport-error";
}

namespace {

struct Sink {
  std::string* body;
  std::size_t cap;
  bool overflow = false;
};

size_t write_cb(char* ptr, size_t size, size_t nmemb, void* user) {
  auto* s = static_cast<Sink*>(user);
  const size_t n = size * nmemb;
  if (s->body->size() + n > s->cap) {
    s->overflow = true;
    return 0;  // aborts the transfer with CURLE_WRITE_ERROR
  }
  s->body->append(ptr, n);
  return n;
}

// The final response's headers: a status line ("HTTP/1.1 100 Continue", a redirect's) starts them over.
struct HeaderSink {
  std::vector<std::pair<std::string, std::string>>* headers;
  std::size_t bytes = 0;
};

size_t header_cb(char* ptr, size_t size, size_t nmemb, void* user) {
  auto* s = static_cast<HeaderSink*>(user);
  const size_t n = size * nmemb;
  std::string_view line(ptr, n);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  if (line.rfind("HTTP/", 0) == 0) {
    s->headers->clear();
    s->bytes = 0;
    return n;
  }
  const std::size_t colon = line.find(':');
  if (colon == std::string_view::npos || colon == 0 || s->headers->size() >= 100 || s->bytes + line.size() > (64u << 10))
    return n;  // not a header line, or past the caps: ignored, the transfer goes on
  std::string name(line.substr(0, colon));
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string_view value = line.substr(colon + 1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == ' ' || value.back() == '\t')) value.remove_suffix(1);
  s->bytes += line.size();
  s->headers->emplace_back(std::move(name), std::string(value));
  return n;
}

class CurlClient final : public HttpClient {
 public:
  CurlClient() {
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  }

  HttpResponse send(const HttpRequest& req) override {
    HttpResponse resp;
    const auto t0 = std::chrono::steady_clock::now();
    CURL* h = curl_easy_init();
    if (h == nullptr) {
      resp.error = "cannot create a libcurl handle";
      return resp;
    }
    char errbuf[CURL_ERROR_SIZE] = {0};
    Sink sink{&resp.body, req.max_response_bytes};
    HeaderSink header_sink{&resp.headers};
    curl_slist* headers = nullptr;
    for (const auto& [k, v] : req.headers) headers = curl_slist_append(headers, (k + ": " + v).c_str());
    const long total_ms = std::max(1L, static_cast<long>(req.timeout_s * 1000.0));
    const long connect_ms = std::max(1L, std::min(total_ms, static_cast<long>(req.connect_timeout_s * 1000.0)));

    curl_easy_setopt(h, CURLOPT_URL, req.url.c_str());
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, total_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, connect_ms);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write_cb);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &sink);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, header_cb);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &header_sink);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");  // never file://, ftp://, ... (issue 27 #15)
    curl_easy_setopt(h, CURLOPT_NOPROXY, "localhost,127.0.0.1,::1");
    curl_easy_setopt(h, CURLOPT_USERAGENT, "fp4forge-probe/" FP4FORGE_VERSION);
    if (headers != nullptr) curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
    if (req.method == "POST" || !req.body.empty()) {
      curl_easy_setopt(h, CURLOPT_POST, 1L);
      curl_easy_setopt(h, CURLOPT_POSTFIELDS, req.body.c_str());
      curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
    }

    const CURLcode rc = curl_easy_perform(h);
    long status = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    resp.status = static_cast<int>(status);
    char* ct = nullptr;
    if (curl_easy_getinfo(h, CURLINFO_CONTENT_TYPE, &ct) == CURLE_OK && ct != nullptr) resp.content_type = ct;
    long os_errno = 0;
    curl_easy_getinfo(h, CURLINFO_OS_ERRNO, &os_errno);
    curl_off_t connect_us = 0;
    curl_easy_getinfo(h, CURLINFO_CONNECT_TIME_T, &connect_us);

    const std::string what = errbuf[0] != '\0' ? std::string(errbuf) : std::string(curl_easy_strerror(rc));
    switch (rc) {
      case CURLE_OK: resp.transport = Transport::OK; break;
      case CURLE_COULDNT_CONNECT:
        resp.transport = os_errno == ECONNREFUSED ? Transport::CONNECTION_REFUSED : Transport::UNREACHABLE;
        break;
      case CURLE_COULDNT_RESOLVE_HOST:
      case CURLE_COULDNT_RESOLVE_PROXY: resp.transport = Transport::UNREACHABLE; break;
      case CURLE_OPERATION_TIMEDOUT:
        // No completed connect means the server was never reached.
        resp.transport = connect_us == 0 ? Transport::UNREACHABLE : Transport::TIMEOUT;
        break;
      case CURLE_PARTIAL_FILE:
      case CURLE_GOT_NOTHING:
      case CURLE_RECV_ERROR:
      case CURLE_SEND_ERROR: resp.transport = Transport::CUT_OFF; break;
      case CURLE_WRITE_ERROR:
        resp.transport = sink.overflow ? Transport::TOO_LARGE : Transport::FAILED;
        break;
      default: resp.transport = Transport::FAILED; break;
    }
    if (rc == CURLE_WRITE_ERROR && sink.overflow) {
      resp.error = fmt::format("response from {} exceeds {} bytes", util::redact_url(req.url), req.max_response_bytes);
    } else if (rc != CURLE_OK) {
      resp.error = fmt::format("{} {}: {} (curl error {})", req.method, util::redact_url(req.url), what,
                               static_cast<int>(rc));
    }
    curl_slist_free_all(headers);
    curl_easy_cleanup(h);
    resp.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return resp;
  }
};

}  // namespace

std::unique_ptr<HttpClient> make_curl_client() { return std::make_unique<CurlClient>(); }

}  // namespace fp4forge::probe
