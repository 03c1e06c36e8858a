// The seat key vllm_args= (vllm_args.h): shell-like words, and the flags plan refuses.
#include "fp4forge/kvplan/vllm_args.h"

#include <algorithm>

#include "fp4forge/util/strings.h"

namespace fp4forge::kvplan {
namespace {

Error args_error(std::string_view text, const std::string& why) {
  return make_error(Errc::USAGE, "vllm_args='{}': {}", util::printable(text, 120), why);
}

/** A flag plan sets or models, and what to use instead. */
struct Refused {
  std::string_view flag;
  std::string_view instead;
};
constexpr Refused kRefused[] = {
    {"model", "the stack mounts the seat's DIR and passes it"},
    {"served-model-name", "use the seat key served_name="},
    {"host", "the stack listens on 0.0.0.0 inside the container"},
    {"port", "use the seat key port= (the host port; the container listens on 8000)"},
    {"gpu-memory-utilization", "use the seat key gpu_memory_utilization= (plan sizes the KV cache from it)"},
    {"max-model-len", "use the seat key max_model_len="},
    {"kv-cache-dtype", "use the seat key kv_cache_dtype="},
    {"max-num-batched-tokens", "use the seat key max_num_batched_tokens="},
    {"tensor-parallel-size", "use the seat key tp="},
    {"max-num-seqs", "use the seat key max_num_seqs="},
    {"dtype", "use the seat key dtype="},
    {"enforce-eager", "use the seat key enforce_eager=on"},
    {"enable-prefix-caching", "use the seat key prefix_caching="},
    {"no-enable-prefix-caching", "use the seat key prefix_caching=off"},
    {"speculative-config", "use the seat key spec_tokens= (MTP; other speculation is not modelled)"},
    {"limit-mm-per-prompt", "use the seat key mm=off"},
    {"block-size", "use the seat key block_size="},
    {"mamba-ssm-cache-dtype", "use the seat key mamba_ssm_dtype="},
    {"mamba-cache-dtype", "use the seat key mamba_cache_dtype="},
    {"disable-hybrid-kv-cache-manager", "use the seat key hybrid_manager=off"},
    {"pipeline-parallel-size", "plan does not model pipeline parallelism"},
    {"data-parallel-size", "plan does not model data parallelism (give each replica its own seat)"},
    {"kv-cache-memory", "plan sizes the KV cache from gpu_memory_utilization"},
    {"kv-cache-memory-bytes", "plan sizes the KV cache from gpu_memory_utilization"},
    {"num-gpu-blocks-override", "plan sizes the KV cache from gpu_memory_utilization"},
    {"cpu-offload-gb", "plan does not model weights offloaded to the CPU"},
    {"quantization", "vLLM reads the scheme from the checkpoint's config (plan sizes what is stored)"},
    {"cuda-graph-sizes",
     "plan estimates the CUDA graphs from vLLM's default capture sizes (enforce_eager=on for none)"},
    {"max-cudagraph-capture-size", "plan estimates the CUDA graphs from vLLM's default capture sizes"},
    {"compilation-config", "plan estimates the CUDA graphs from vLLM's default compilation config"},
    // Tryout O-M1: a key here was written in clear into compose.yaml, and neither the LiteLLM entry nor the header's
    // probe carried it (both got 401).
    {"api-key",
     "use the seat key api_key_env=VAR: the stack passes --api-key from VAR when compose starts it (the key "
     "is never written), the LiteLLM entry sends os.environ/VAR and the header's probe --api-key-env VAR"},
};

/** vLLM's short aliases of long flags. */
constexpr std::pair<std::string_view, std::string_view> kShort[] = {
    {"tp", "tensor-parallel-size"}, {"pp", "pipeline-parallel-size"}, {"dp", "data-parallel-size"},
    {"q", "quantization"}, {"O", "compilation-config"}};

}  // namespace

std::string vllm_flag_name(std::string_view word) {
  if (word.size() < 2 || word[0] != '-') return {};
  const bool long_form = word[1] == '-';
  std::string_view n = word.substr(long_form ? 2 : 1);
  if (n.empty() || (n[0] >= '0' && n[0] <= '9') || n[0] == '.') return {};  // "-1", "-.5": a negative value
  n = n.substr(0, std::min(n.find('='), n.find('.')));
  std::string name(n);
  std::replace(name.begin(), name.end(), '_', '-');
  if (!long_form) {
    for (const auto& [s, l] : kShort)
      if (name == s) return std::string(l);
    if (name.size() > 1 && name[0] == 'O') return "compilation-config";  // -O3
  }
  return name;
}

bool has_vllm_flag(const std::vector<std::string>& args, std::string_view name) {
  return std::any_of(args.begin(), args.end(), [&](const std::string& w) { return vllm_flag_name(w) == name; });
}

Result<std::vector<std::string>> parse_vllm_args(std::string_view text) {
  std::vector<std::string> words;
  std::string cur;
  bool in_word = false;
  char quote = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (static_cast<unsigned char>(c) < 0x20 && !(quote == 0 && (c == '\t'))) {
      return args_error(text, fmt::format("control character \\x{:02x} at offset {}; expected printable flags "
                                          "separated by spaces", static_cast<unsigned char>(c), i));
    }
    if (quote == '\'') {
      if (c == '\'') quote = 0; else cur += c;
      continue;
    }
    if (quote == '"') {
      if (c == '"') {
        quote = 0;
      } else if (c == '\\' && i + 1 < text.size() && (text[i + 1] == '"' || text[i + 1] == '\\')) {
        cur += text[++i];
      } else {
        cur += c;
      }
      continue;
    }
    if (c == ' ' || c == '\t') {
      if (in_word) words.push_back(std::move(cur));
      cur.clear();
      in_word = false;
      continue;
    }
    const bool starts = !in_word;
    in_word = true;
    // A quote opens quoting only at the start of a word: inside one it is literal, so JSON such as
    // {"temperature":0.6} passes as written.
    if ((c == '\'' || c == '"') && starts) {
      quote = c;
    } else if (c == '\\') {
      if (i + 1 == text.size()) return args_error(text, "a trailing backslash escapes nothing");
      cur += text[++i];
    } else {
      cur += c;
    }
  }
  if (quote) return args_error(text, fmt::format("unterminated {} quote", quote == '"' ? "double" : "single"));
  if (in_word) words.push_back(std::move(cur));
  if (words.empty()) return args_error(text, "no flag given; expected e.g. vllm_args=--enable-chunked-prefill");
  if (vllm_flag_name(words.front()).empty())
    return args_error(text, fmt::format("'{}' is not a flag; expected the words to start with --FLAG",
                                        util::printable(words.front(), 60)));
  for (const auto& w : words) {
    const std::string name = vllm_flag_name(w);
    if (name.empty()) continue;
    for (const Refused& r : kRefused)
      if (name == r.flag)
        return args_error(text, fmt::format("--{} is set by plan, not passed through; hint: {}", name, r.instead));
  }
  return words;
}

}  // namespace fp4forge::kvplan
