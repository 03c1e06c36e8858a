#pragma once
// A small HTTP/1.1 server for the probe tests: 127.0.0.1 on a random free port, one thread, one
// connection at a time (Connection: close), bounded in requests and lifetime, stops by itself.
// It answers in vLLM's response shapes (/v1/models, /v1/chat/completions with tools, logprobs, streaming
// and reasoning_content, /v1/completions) and can be told to misbehave in the ways production servers do.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace fp4forge::testing {

enum class Fault {
  NONE,                  // a healthy multimodal, tool-calling, non-reasoning model
  NAN_LOGPROBS,          // logprobs requests: HTTP 400 "Out of range float values are not JSON compliant: nan"
  CONTENT_NULL_LENGTH,   // F1: every chat answer content null, finish_reason length, full token count
  EMPTY_TOOL_CALLS,      // tool requests: tool_calls [] with finish_reason tool_calls
  LOOP,                  // every answer is a repetition loop
  SLOW,                  // POSTs answer after slow_s seconds
  SERVER_ERROR,          // POSTs: HTTP 500
  MALFORMED_JSON,        // POSTs: HTTP 200 with a broken JSON body
  CUT_OFF,               // POSTs: the connection closes mid-body (streams: without the last chunk)
  TEXT_ONLY,             // image requests: HTTP 400 "... is not a multimodal model"
  REASONING,             // a healthy thinking model (reasoning_content, then content)
  REASONING_NO_CONTENT,  // thinking never ends: reasoning_content only, content null, finish length
  AUTH_ECHO,             // HTTP 401 whose message echoes the received API key (as some gateways do)
  CONTEXT_COLLAPSE,      // prompts over 2,000 characters are answered without recalling anything
  OVERRUN_STREAM,        // streams run 40 chunks past max_tokens (usage says so too)
  NAN_BODY,              // POSTs: HTTP 200 whose body carries a bare NaN (Python's json.dumps of a NaN logprob)
};

struct FakeServerOptions {
  Fault fault = Fault::NONE;
  std::string model = "fake-org/fake-model-nvfp4";
  std::string listed_model;        // served id in /v1/models ("" = model)
  double slow_s = 3.0;
  int max_requests = 64;
  double max_lifetime_s = 30.0;
  std::string expect_api_key;      // when set, requests without "Bearer <key>" get auth_status
  int auth_status = 401;           // 401 or 403
  int max_model_len = 8192;        // listed in /v1/models; longer prompts (4 chars a token) are refused as vLLM does
  std::int64_t kv_blocks = 2048;   // vllm:cache_config_info num_gpu_blocks in /metrics (0: no metrics, 404)
  int block_size = 16;
  // LiteLLM proxy headers on every chat/completions answer (x-litellm-model-api-base, -model-id, -model-group);
  // none when empty: a fake gateway in front of a seat
  std::string litellm_api_base, litellm_model_id, litellm_model_group;
  int completion_tokens = -1;  // usage.completion_tokens of every plain chat answer (-1: its words + 1)
  int port = 0;                // 127.0.0.1 port to listen on (0: a free one the kernel picks)
};

class FakeServer {
 public:
  explicit FakeServer(FakeServerOptions opts) : opts_(std::move(opts)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw std::runtime_error("fake server: socket() failed");
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<std::uint16_t>(opts_.port));
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd_, 8) != 0) {
      const int err = errno;
      ::close(fd_);
      throw std::runtime_error(fmt::format("cannot listen on 127.0.0.1:{}: {}", opts_.port, std::strerror(err)));
    }
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { loop(); });
  }
  ~FakeServer() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    ::close(fd_);
  }
  FakeServer(const FakeServer&) = delete;
  FakeServer& operator=(const FakeServer&) = delete;

  /** Blocks until the server stops by itself (its lifetime or request budget spent). */
  void wait() {
    if (thread_.joinable()) thread_.join();
  }

  int port() const { return port_; }
  std::string url() const { return fmt::format("http://127.0.0.1:{}", port_); }
  /** "METHOD PATH" of every request handled so far. */
  std::vector<std::string> requests() const {
    std::lock_guard<std::mutex> g(mu_);
    return log_;
  }
  /** Authorization header values seen. */
  std::vector<std::string> auth_headers() const {
    std::lock_guard<std::mutex> g(mu_);
    return auth_;
  }
  /** The bodies of the requests handled so far (in the order of requests()). */
  std::vector<std::string> bodies() const {
    std::lock_guard<std::mutex> g(mu_);
    return bodies_;
  }

  /** A port on 127.0.0.1 where nothing listens (bound, then closed). */
  static int free_port() {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    socklen_t len = sizeof addr;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    ::close(fd);
    return ntohs(addr.sin_port);
  }

 private:
  using json = nlohmann::json;
  using Clock = std::chrono::steady_clock;

  struct Request {
    std::string method, path, body, auth;
  };

  void loop() {
    const auto end = Clock::now() + std::chrono::milliseconds(static_cast<long>(opts_.max_lifetime_s * 1000));
    int handled = 0;
    while (!stop_ && handled < opts_.max_requests && Clock::now() < end) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      Request req;
      if (read_request(c, req)) {
        {
          std::lock_guard<std::mutex> g(mu_);
          log_.push_back(req.method + " " + req.path);
          auth_.push_back(req.auth);
          bodies_.push_back(req.body);
        }
        handle(c, req);
        ++handled;
      }
      ::close(c);
    }
  }

  bool read_request(int c, Request& req) {
    std::string buf;
    const auto end = Clock::now() + std::chrono::seconds(5);
    std::size_t header_end = std::string::npos;
    std::size_t content_length = 0;
    char tmp[16384];
    while (Clock::now() < end && buf.size() < (16u << 20)) {
      if (header_end == std::string::npos) {
        header_end = buf.find("\r\n\r\n");
        if (header_end != std::string::npos) {
          std::string head = buf.substr(0, header_end);
          std::string lower = head;
          for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
          const std::size_t sp1 = head.find(' ');
          const std::size_t sp2 = head.find(' ', sp1 + 1);
          if (sp1 == std::string::npos || sp2 == std::string::npos) return false;
          req.method = head.substr(0, sp1);
          req.path = head.substr(sp1 + 1, sp2 - sp1 - 1);
          if (std::size_t p = lower.find("\r\ncontent-length:"); p != std::string::npos)
            content_length = std::stoul(head.substr(p + 17));
          if (std::size_t p = lower.find("\r\nauthorization:"); p != std::string::npos) {
            std::size_t b = p + 16;
            while (b < head.size() && head[b] == ' ') ++b;
            req.auth = head.substr(b, head.find("\r\n", b) - b);
          }
        }
      }
      if (header_end != std::string::npos && buf.size() >= header_end + 4 + content_length) {
        req.body = buf.substr(header_end + 4, content_length);
        return true;
      }
      pollfd p{c, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const ssize_t n = ::recv(c, tmp, sizeof tmp, 0);
      if (n <= 0) return false;
      buf.append(tmp, static_cast<std::size_t>(n));
    }
    return false;
  }

  static void send_all(int c, std::string_view s) {
    while (!s.empty()) {
      const ssize_t n = ::send(c, s.data(), s.size(), MSG_NOSIGNAL);
      if (n <= 0) return;
      s.remove_prefix(static_cast<std::size_t>(n));
    }
  }

  void respond(int c, int status, const std::string& body, const char* type = "application/json",
               std::size_t declared = 0) {
    const char* reason = status == 200 ? "OK" : status == 400 ? "Bad Request" : status == 401 ? "Unauthorized"
                         : status == 403 ? "Forbidden" : status == 404 ? "Not Found" : "Internal Server Error";
    send_all(c, fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n{}Connection: close\r\n\r\n",
                            status, reason, type, declared ? declared : body.size(), litellm_headers()));
    send_all(c, body);
  }

  // The LiteLLM proxy's response headers naming the deployment that answered (when configured).
  std::string litellm_headers() const {
    std::string h;
    if (!llm_answer_) return h;  // LiteLLM names the deployment on model calls, not on /v1/models
    if (!opts_.litellm_api_base.empty()) h += "x-litellm-model-api-base: " + opts_.litellm_api_base + "\r\n";
    if (!opts_.litellm_model_id.empty()) h += "x-litellm-model-id: " + opts_.litellm_model_id + "\r\n";
    if (!opts_.litellm_model_group.empty()) h += "X-LiteLLM-Model-Group: " + opts_.litellm_model_group + "\r\n";
    return h;
  }

  // vLLM's Prometheus text: a comment, another metric, then vllm:cache_config_info with escaped label values.
  std::string metrics_text() const {
    return fmt::format(
        "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
        "# TYPE vllm:num_requests_running gauge\n"
        "vllm:num_requests_running{{engine=\"0\",model_name=\"{0}\"}} 0.0\n"
        "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
        "# TYPE vllm:cache_config_info gauge\n"
        "vllm:cache_config_info{{block_size=\"{1}\",cache_dtype=\"auto\",calculate_kv_scales=\"False\","
        "cpu_offload_gb=\"0\",enable_prefix_caching=\"True\",engine=\"0\",gpu_memory_utilization=\"0.9\","
        "is_attention_free=\"False\",num_cpu_blocks=\"None\",num_gpu_blocks=\"{2}\","
        "num_gpu_blocks_override=\"None\",prefix_caching_hash_algo=\"builtin\",sliding_window=\"None\","
        "swap_space=\"4\",note=\"a \\\"quoted\\\" value, a \\\\ and a\\nline\"}} 1.0\n",
        opts_.model, opts_.block_size, opts_.kv_blocks);
  }

  static std::string error_body(int code, const std::string& msg, const char* type) {
    return json{{"object", "error"}, {"message", msg}, {"type", type}, {"param", nullptr}, {"code", code}}.dump();
  }

  void sleep_interruptible(double s) {
    const auto end = Clock::now() + std::chrono::milliseconds(static_cast<long>(s * 1000));
    while (!stop_ && Clock::now() < end) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

  static std::string essay(int words) {
    std::string s;
    for (int i = 1; (i - 1) * 12 < words; ++i)
      s += fmt::format("Sentence {}: the keeper number {} lit lamp {} near harbor {}. ", i, i, i * 7 + 3, i * 13 + 1);
    return s;
  }
  static std::string loop_text(int words) {
    std::string s;
    for (int i = 0; i < words / 4; ++i) s += "I am a lighthouse. ";
    return s;
  }

  static std::string last_user_text(const json& req) {
    const json& msgs = req["messages"];
    for (auto it = msgs.rbegin(); it != msgs.rend(); ++it) {
      if ((*it)["role"] != "user") continue;
      const json& c = (*it)["content"];
      if (c.is_string()) return c.get<std::string>();
      std::string t;
      for (const json& p : c)
        if (p.value("type", "") == "text") t += p.value("text", "");
      return t;
    }
    return {};
  }
  static bool has_image(const json& req) {
    for (const json& m : req["messages"]) {
      const json& c = m["content"];
      if (!c.is_array()) continue;
      for (const json& p : c)
        if (p.value("type", "") == "image_url") {
          const std::string url = p["image_url"].value("url", "");
          // the data URL must carry a PNG: base64 of "\x89PNG" starts with "iVBORw0KGgo"
          return url.rfind("data:image/png;base64,iVBORw0KGgo", 0) == 0;
        }
    }
    return false;
  }

  /** The prompt's tokens as this seat counts them: 4 characters of the request a token, an image's data URL
   * not as text but as kImageTokens (vLLM counts an image by its processor's patches, never by its base64 bytes;
   * tryout N-M5: a 64 x 64 PNG read as 4,205 tokens failed a 4,096-token seat). */
  static constexpr int kImageTokens = 64;
  static int prompt_tokens_of(const std::string& raw, const json& req) {
    std::size_t chars = raw.size();
    int images = 0;
    if (req.contains("messages") && req["messages"].is_array())
      for (const json& m : req["messages"]) {
        if (!m.is_object() || !m.contains("content") || !m["content"].is_array()) continue;
        for (const json& p : m["content"])
          if (p.is_object() && p.value("type", "") == "image_url" && p.contains("image_url") &&
              p["image_url"].is_object()) {
            const std::string url = p["image_url"].value("url", "");
            chars -= std::min(chars, url.size());
            ++images;
          }
      }
    return static_cast<int>(chars / 4) + images * kImageTokens;
  }

  json completion(const std::string& content, const json& message_extra, const std::string& finish, int tokens,
                  int prompt_tokens = 24) const {
    json msg{{"role", "assistant"}, {"content", content.empty() ? json(nullptr) : json(content)},
             {"tool_calls", json::array()}};
    for (auto& [k, v] : message_extra.items()) msg[k] = v;
    if (opts_.fault == Fault::REASONING || opts_.fault == Fault::REASONING_NO_CONTENT) {
      if (!msg.contains("reasoning_content")) msg["reasoning_content"] = nullptr;
    }
    return json{{"id", "chatcmpl-fake"}, {"object", "chat.completion"}, {"created", 1700000000}, {"model", opts_.model},
                {"choices", json::array({json{{"index", 0}, {"message", msg}, {"logprobs", nullptr},
                                              {"finish_reason", finish}, {"stop_reason", nullptr}}})},
                {"usage", json{{"prompt_tokens", prompt_tokens}, {"total_tokens", prompt_tokens + tokens},
                               {"completion_tokens", tokens}, {"prompt_tokens_details", nullptr}}}};
  }

  static int count_words(const std::string& s) {
    int n = 0;
    bool in = false;
    for (char ch : s) {
      const bool sp = std::isspace(static_cast<unsigned char>(ch)) != 0;
      if (!sp && !in) ++n;
      in = !sp;
    }
    return n;
  }

  void handle(int c, const Request& req) {
    const Fault f = opts_.fault;
    llm_answer_ = req.method == "POST";
    if (req.method == "GET" && req.path == "/metrics") {  // vLLM serves it without the API key
      if (opts_.kv_blocks <= 0) return respond(c, 404, json{{"detail", "Not Found"}}.dump());
      return respond(c, 200, metrics_text(), "text/plain; version=0.0.4; charset=utf-8");
    }
    if (!opts_.expect_api_key.empty() && req.auth != "Bearer " + opts_.expect_api_key) {
      return respond(c, opts_.auth_status,
                     json{{"error", json{{"message", "Unauthorized"}, {"code", std::to_string(opts_.auth_status)}}}}.dump());
    }
    if (f == Fault::AUTH_ECHO) {
      return respond(c, 401, json{{"error", json{{"message", "Authentication Error, Invalid proxy server token passed. "
                                                             "Received API Key = " + req.auth.substr(std::min<std::size_t>(7, req.auth.size()))},
                                                 {"type", "auth_error"}, {"code", "401"}}}}.dump());
    }
    if (req.method == "GET" && req.path == "/v1/models") {
      const std::string id = opts_.listed_model.empty() ? opts_.model : opts_.listed_model;
      return respond(c, 200, json{{"object", "list"},
                                  {"data", json::array({json{{"id", id}, {"object", "model"}, {"created", 1700000000},
                                                             {"owned_by", "vllm"}, {"root", id}, {"parent", nullptr},
                                                             {"max_model_len", opts_.max_model_len}}})}}.dump());
    }
    if (req.method != "POST" || (req.path != "/v1/chat/completions" && req.path != "/v1/completions"))
      return respond(c, 404, json{{"detail", "Not Found"}}.dump());
    if (f == Fault::SLOW) sleep_interruptible(opts_.slow_s);
    if (f == Fault::SERVER_ERROR)
      return respond(c, 500, error_body(500, "EngineCore encountered an issue. See stack trace for the root cause.",
                                        "InternalServerError"));
    if (f == Fault::MALFORMED_JSON) return respond(c, 200, R"({"id": "chatcmpl-1", "object": "chat.completion", "choices": [{)");
    if (f == Fault::NAN_BODY)
      return respond(c, 200, R"({"id": "chatcmpl-1", "object": "chat.completion", "choices": [{"index": 0, )"
                             R"("message": {"role": "assistant", "content": "x"}, "logprobs": {"content": [{"token": "x", )"
                             R"("logprob": NaN}]}, "finish_reason": "stop"}]})");
    const json body = json::parse(req.body, nullptr, false);
    if (body.is_discarded() || !body.is_object())
      return respond(c, 400, error_body(400, "request body is not JSON", "BadRequestError"));
    if (body.value("model", "") != opts_.model)
      return respond(c, 404, error_body(404, fmt::format("The model `{}` does not exist.", body.value("model", "")),
                                        "NotFoundError"));
    const int max_tokens = body.value("max_tokens", 16);

    if (req.path == "/v1/completions") {
      std::string text = f == Fault::CONTENT_NULL_LENGTH ? "" : f == Fault::LOOP ? loop_text(max_tokens) : " Paris, a city on the Seine.";
      const json out{{"id", "cmpl-fake"}, {"object", "text_completion"}, {"model", opts_.model},
                     {"choices", json::array({json{{"index", 0}, {"text", text}, {"logprobs", nullptr},
                                                   {"finish_reason", f == Fault::NONE ? "stop" : "length"}}})},
                     {"usage", json{{"prompt_tokens", 5}, {"completion_tokens", f == Fault::NONE ? 8 : max_tokens},
                                    {"total_tokens", 5 + (f == Fault::NONE ? 8 : max_tokens)}}}};
      return send_body(c, out.dump());
    }

    if (body.value("logprobs", false) && (f == Fault::NAN_LOGPROBS || f == Fault::CONTENT_NULL_LENGTH))
      return respond(c, 400, error_body(400, "Out of range float values are not JSON compliant: nan", "BadRequestError"));
    if (has_image(body) && f == Fault::TEXT_ONLY)
      return respond(c, 400, error_body(400, "Qwen3ForCausalLM is not a multimodal model", "BadRequestError"));
    // vLLM's refusal of a prompt longer than max_model_len (4 characters a token here, an image kImageTokens).
    const int prompt_tokens = prompt_tokens_of(req.body, body);
    if (prompt_tokens + max_tokens > opts_.max_model_len)
      return respond(c, 400, error_body(400, fmt::format("This model's maximum context length is {} tokens. However, "
                                                         "you requested {} tokens ({} in the messages, {} in the "
                                                         "completion). Please reduce the length of the messages or "
                                                         "completion.", opts_.max_model_len, prompt_tokens + max_tokens,
                                                         prompt_tokens, max_tokens), "BadRequestError"));

    // What a healthy model would say.
    const std::string q = last_user_text(body);
    std::string answer = "I can help with that.";
    json extra = json::object();
    std::string finish = "stop";
    if (q.find("17 + 25") != std::string::npos) answer = "42";
    else if (q.find("lighthouses") != std::string::npos) answer = essay(std::min(max_tokens, 320));
    else if (q.find("primary colors") != std::string::npos) answer = "Red, green and blue.";
    else if (q.find("locker code is") != std::string::npos) answer = "OK";
    else if (q.find("capital of France") != std::string::npos) answer = "Paris";
    else if (q.find("my locker code") != std::string::npos) {
      answer = "I do not know.";
      for (const json& m : body["messages"])
        if (m["content"].is_string() && m["content"].get<std::string>().find("locker code is 4817") != std::string::npos)
          answer = "4817";
    } else if (q.find("train") != std::string::npos) answer = "The train arrives at 6:15 pm.";
    if (std::size_t at = q.find("The secret code is "); at != std::string::npos) {
      const std::size_t b = at + 19, e = q.find('.', b);
      answer = f == Fault::CONTEXT_COLLAPSE && q.size() > 2000 ? "I am not sure what you mean."
                                                               : q.substr(b, e == std::string::npos ? 0 : e - b);
    }
    if (has_image(body)) answer = "A red circle on a white background.";
    if (body.contains("tools")) {
      answer = "";
      extra["tool_calls"] = json::array({json{{"id", "chatcmpl-tool-1"}, {"type", "function"},
                                              {"function", json{{"name", "get_weather"},
                                                                {"arguments", R"({"city": "Paris", "unit": "celsius"})"}}}}});
      finish = "tool_calls";
      if (f == Fault::EMPTY_TOOL_CALLS) extra["tool_calls"] = json::array();
    }
    int tokens = opts_.completion_tokens >= 0 ? opts_.completion_tokens : std::max(1, count_words(answer) + 1);
    if (f == Fault::REASONING) {
      extra["reasoning_content"] = "The user asks a question. Let me think step by step about it before answering. " + q;
      tokens += 40;
    }
    if (f == Fault::LOOP) {
      answer = loop_text(max_tokens);
      finish = "length";
      tokens = max_tokens;
    }
    if (f == Fault::CONTENT_NULL_LENGTH) {
      answer = "";
      finish = "length";
      tokens = max_tokens;
      extra.erase("tool_calls");
    }
    if (f == Fault::REASONING_NO_CONTENT) {
      extra["reasoning_content"] = essay(max_tokens);
      answer = "";
      finish = "length";
      tokens = max_tokens;
      extra.erase("tool_calls");
    }
    if (f == Fault::OVERRUN_STREAM && body.value("stream", false)) {
      answer = essay(max_tokens + 40 + 20);
      tokens = max_tokens + 40;
      finish = "length";
    }
    json out = completion(answer, extra, finish, tokens, std::max(24, prompt_tokens));
    if (body.value("logprobs", false)) {
      json content = json::array();
      for (const char* t : {"Red", ",", " green", " and", " blue", "."}) {
        json top = json::array({json{{"token", t}, {"logprob", -0.01}}, json{{"token", " x"}, {"logprob", -5.2}}});
        content.push_back(json{{"token", t}, {"logprob", -0.01}, {"bytes", json::array()}, {"top_logprobs", top}});
      }
      out["choices"][0]["logprobs"] = json{{"content", content}};
    }
    if (body.value("stream", false)) return send_stream(c, out, f == Fault::CUT_OFF);
    send_body(c, out.dump());
  }

  void send_body(int c, const std::string& s) {
    if (opts_.fault != Fault::CUT_OFF) return respond(c, 200, s);
    if (opts_.fault == Fault::CUT_OFF) {
      // Declare the full length, send half, close.
      send_all(c, fmt::format("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n"
                              "Connection: close\r\n\r\n", s.size()));
      send_all(c, std::string_view(s).substr(0, s.size() / 2));
      return;
    }
    respond(c, 200, s);
  }

  // vLLM-style SSE over chunked transfer encoding: one chunk per word, a usage chunk, then [DONE].
  void send_stream(int c, const json& full, bool cut) {
    send_all(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\nTransfer-Encoding: chunked\r\n" +
                    litellm_headers() + "Connection: close\r\n\r\n");
    auto chunk = [&](const std::string& data) {
      const std::string ev = "data: " + data + "\n\n";
      send_all(c, fmt::format("{:x}\r\n", ev.size()));
      send_all(c, ev);
      send_all(c, "\r\n");
    };
    const json& msg = full["choices"][0]["message"];
    auto emit = [&](const char* key) {
      if (!msg.contains(key) || !msg[key].is_string()) return;
      std::string text = msg[key].get<std::string>();
      while (!text.empty() && text.back() == ' ') text.pop_back();  // no whitespace-only last chunk: a chunk is a token
      std::size_t pos = 0;
      while (pos < text.size()) {
        std::size_t next = text.find(' ', pos + 1);
        if (next == std::string::npos) next = text.size();
        json delta{{key, text.substr(pos, next - pos)}};
        chunk(json{{"id", "chatcmpl-fake"}, {"object", "chat.completion.chunk"},
                   {"choices", json::array({json{{"index", 0}, {"delta", delta}, {"finish_reason", nullptr}}})}}.dump());
        pos = next;
      }
    };
    emit("reasoning_content");
    emit("content");
    if (cut) return;  // no final chunks, no terminating 0-chunk: the peer sees a cut-off body
    chunk(json{{"id", "chatcmpl-fake"}, {"object", "chat.completion.chunk"},
               {"choices", json::array({json{{"index", 0}, {"delta", json::object()},
                                             {"finish_reason", full["choices"][0]["finish_reason"]}}})}}.dump());
    chunk(json{{"id", "chatcmpl-fake"}, {"object", "chat.completion.chunk"}, {"choices", json::array()},
               {"usage", full["usage"]}}.dump());
    chunk("[DONE]");
    send_all(c, "0\r\n\r\n");
  }

  FakeServerOptions opts_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  mutable std::mutex mu_;
  std::vector<std::string> log_;
  std::vector<std::string> auth_;
  std::vector<std::string> bodies_;
  bool llm_answer_ = false;  // the request being answered is a model call (server thread only)
};

}  // namespace fp4forge::testing
