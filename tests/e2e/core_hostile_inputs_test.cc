// Hostile-input corpus for the CLI (issue 9): malformed checkpoints built in the test from the real
// tests/data/llama fixture (safetensors headers, indexes, config.json, quantization_config), each run
// through `inspect`, `doctor`, `verify` and `quantize` as a subprocess with a deadline. For every run:
// the documented exit code (3 for bad input, or 1 with the named finding for a checkpoint whose
// quantization_config is broken), no crash (not killed by a signal), no hang (a deadline), bounded
// memory (peak RSS), one precise line on stderr naming the offending file, a JSON error object on
// stdout (--json), the source tree byte-identical afterwards, and no DST / staging left by quantize.
// Also: quantize from a read-only source, DST already present, DST inside SRC, DST == SRC.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace {

namespace stdfs = std::filesystem;
using Json = nlohmann::ordered_json;

using fp4forge::testutil::kCli;
using fp4forge::testutil::kData;
using fp4forge::testutil::slurp;
using fp4forge::testutil::TempDir;

constexpr unsigned kDeadlineS = 30;                  // per CLI run; a hang is a failure
constexpr long kMaxRssKb = 1024L * 1024;             // 1 GiB: no run may allocate what a header declares
constexpr std::size_t kMaxErrLine = 2048;            // an error message is one readable line
const std::string kShard2 = "model-00002-of-00004.safetensors";
const std::string kIndex = "model.safetensors.index.json";

void spit(const stdfs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) std::abort();
}

/** FNV-1a 64 of a byte string (a content fingerprint for the unchanged-source check). */
std::uint64_t fnv(const std::string& s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

/** Every entry under `dir`: regular files by size + hash + mtime, symlinks by target, dirs by name. */
std::map<std::string, std::string> snapshot(const stdfs::path& dir) {
  std::map<std::string, std::string> m;
  for (const auto& e : stdfs::recursive_directory_iterator(dir)) {
    const std::string rel = stdfs::relative(e.path(), dir).native();
    if (e.is_symlink()) {
      m[rel] = "link:" + stdfs::read_symlink(e.path()).native();
    } else if (e.is_regular_file()) {
      struct stat st{};
      ::stat(e.path().c_str(), &st);
      // Sparse giant files are fingerprinted by size and mtime only (reading them would take long).
      const std::string content = st.st_size > (64 << 20) ? std::string() : slurp(e.path());
      m[rel] = "file:" + std::to_string(st.st_size) + ":" + std::to_string(fnv(content)) + ":" +
               std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
    } else {
      m[rel] = "other";
    }
  }
  return m;
}

struct RunResult {
  int exit = -1;        // exit status, or -1 when killed by a signal
  int signal = 0;       // terminating signal (SIGALRM: the deadline passed)
  long maxrss_kb = 0;
  double seconds = 0;
  std::string out, err;
  std::string describe() const {
    std::string s = signal ? "killed by signal " + std::to_string(signal) : "exit " + std::to_string(exit);
    return s + ", stderr: " + err.substr(0, 600) + (err.size() > 600 ? "...[" + std::to_string(err.size()) + " bytes]" : "");
  }
};

/** Runs the CLI (no shell: arguments may hold any bytes) with a deadline; captures stdout/stderr. */
RunResult run_cli(const std::vector<std::string>& args, const stdfs::path& scratch) {
  const stdfs::path out = scratch / "stdout", err = scratch / "stderr";
  std::vector<std::string> argv_s{kCli};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) std::abort();
  if (pid == 0) {
    // The alarm survives execv: a run that outlives the deadline dies of SIGALRM.
    ::alarm(kDeadlineS);
    const int in = ::open("/dev/null", O_RDONLY);
    const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || o < 0 || e < 0) ::_exit(120);
    ::dup2(in, 0);
    ::dup2(o, 1);
    ::dup2(e, 2);
    ::execv(kCli.c_str(), argv.data());
    ::_exit(121);
  }
  int status = 0;
  struct rusage ru{};
  if (::wait4(pid, &status, 0, &ru) != pid) std::abort();
  RunResult r;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.maxrss_kb = ru.ru_maxrss;
  if (WIFEXITED(status)) r.exit = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

// --- safetensors surgery -------------------------------------------------------------------------

struct RawShard {
  std::string header;  // the JSON text (padding included)
  std::string data;
};

RawShard read_shard(const stdfs::path& p) {
  const std::string b = slurp(p);
  std::uint64_t n = 0;
  std::memcpy(&n, b.data(), 8);  // little-endian host (x86-64 / aarch64)
  return {b.substr(8, n), b.substr(8 + n)};
}

std::string le64(std::uint64_t n) {
  std::string s(8, '\0');
  std::memcpy(s.data(), &n, 8);
  return s;
}

/** Writes a shard from header text (padded to 8 with spaces) and data. */
void write_shard(const stdfs::path& p, std::string header, const std::string& data) {
  while (header.size() % 8) header.push_back(' ');
  spit(p, le64(header.size()) + header + data);
}

/** Parses shard 2's header, lets `edit` change it, writes it back compact with the same data. */
void edit_header(const stdfs::path& dir, const std::function<void(Json&, std::string&)>& edit) {
  RawShard s = read_shard(dir / kShard2);
  Json h = Json::parse(s.header);
  edit(h, s.data);
  write_shard(dir / kShard2, h.dump(), s.data);
}

/** Replaces the first occurrence of `from` in shard 2's header text (raw byte surgery). */
void edit_header_text(const stdfs::path& dir, const std::string& from, const std::string& to) {
  RawShard s = read_shard(dir / kShard2);
  const auto pos = s.header.find(from);
  if (pos == std::string::npos) std::abort();
  s.header.replace(pos, from.size(), to);
  write_shard(dir / kShard2, s.header, s.data);
}

void edit_json(const stdfs::path& p, const std::function<void(Json&)>& edit) {
  Json j = Json::parse(slurp(p));
  edit(j);
  spit(p, j.dump(2));
}

const char* const kLn0 = "model.layers.0.input_layernorm.weight";
const char* const kQ1 = "model.layers.1.self_attn.q_proj.weight";

// --- the corpus --------------------------------------------------------------------------------------

enum class Base { SOURCE, QUANTIZED };

struct Expect {
  std::string cmd;  // inspect, doctor, verify, quantize
  int code;
  std::string finding;  // for code 1: a finding kind expected in the --json report
};

struct Case {
  std::string name;
  Base base;
  std::function<void(const stdfs::path& dir, const stdfs::path& root)> make;
  std::string names;    // the offending file, as it must appear in the error line
  std::string keyword;  // a word the error line must contain (what is wrong)
  std::vector<Expect> expect;
};

// gtest prints a failing parameter: the case name is enough.
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::vector<Expect> all3() { return {{"inspect", 3, ""}, {"doctor", 3, ""}, {"verify", 3, ""}, {"quantize", 3, ""}}; }
std::vector<Expect> bad_qc() {
  return {{"inspect", 0, ""},
          {"doctor", 1, "quant-config-invalid"},
          {"verify", 1, "quant-config-invalid"},
          {"quantize", 3, ""}};
}

using Dir = const stdfs::path&;

std::vector<Case> corpus() {
  std::vector<Case> c;
  auto add = [&c](std::string name, std::string names, std::string keyword,
                  std::function<void(Dir, Dir)> make, Base base = Base::SOURCE,
                  std::vector<Expect> expect = all3()) {
    c.push_back({std::move(name), base, std::move(make), std::move(names), std::move(keyword), std::move(expect)});
  };
  // ---- safetensors headers (shard 2 of 4) ----
  add("shard_shorter_than_8_bytes", kShard2, "8-byte", [](Dir d, Dir) { spit(d / kShard2, "\x01\x02\x03"); });
  add("header_length_zero", kShard2, "too small", [](Dir d, Dir) { spit(d / kShard2, le64(0) + "{}"); });
  add("header_length_2_pow_63", kShard2, "limit", [](Dir d, Dir) {
    const RawShard s = read_shard(d / kShard2);
    spit(d / kShard2, le64(1ull << 63) + s.header + s.data);
  });
  add("header_length_beyond_file_under_cap", kShard2, "truncated", [](Dir d, Dir) {
    const RawShard s = read_shard(d / kShard2);
    spit(d / kShard2, le64(99'999'992) + s.header + s.data);  // 100 MB declared, 247 KB present
  });
  add("header_not_json", kShard2, "JSON", [](Dir d, Dir) {
    write_shard(d / kShard2, "{\"a\": {\"dtype\": BF16", read_shard(d / kShard2).data);
  });
  add("header_root_array", kShard2, "object", [](Dir d, Dir) { write_shard(d / kShard2, "[1,2]", read_shard(d / kShard2).data); });
  add("header_nested_deep", kShard2, "deeper", [](Dir d, Dir) {
    // Raw text (a 5000-deep nlohmann value would overflow this test's own stack under ASan).
    edit_header_text(d, "{", "{\"deep\":" + std::string(5000, '[') + "1" + std::string(5000, ']') + ",");
  });
  add("header_entry_not_object", kShard2, "expected an object", [](Dir d, Dir) {
    edit_header(d, [](Json& h, std::string&) { h[kLn0] = Json::array({1}); });
  });
  add("header_missing_dtype", kShard2, "dtype", [](Dir d, Dir) {
    edit_header(d, [](Json& h, std::string&) { h[kLn0].erase("dtype"); });
  });
  add("header_unknown_dtype", kShard2, "unknown dtype", [](Dir d, Dir) {
    edit_header(d, [](Json& h, std::string&) { h[kLn0]["dtype"] = "F128"; });
  });
  add("header_negative_dim", kShard2, "shape", [](Dir d, Dir) {
    edit_header(d, [](Json& h, std::string&) { h[kLn0]["shape"] = Json::array({-128}); });
  });
  add("header_element_count_overflow", kShard2, "overflow", [](Dir d, Dir) {
    edit_header(d, [](Json& h, std::string&) { h[kLn0]["shape"] = Json::array({1ull << 32, 1ull << 32}); });
  });
  add("header_begin_after_end", kShard2, "after end", [](Dir d, Dir) {
    edit_header(d, [](Json& h, std::string&) { h[kQ1]["data_offsets"] = Json::array({246272, 213504}); });
  });
  add("header_huge_declared_tensor", kShard2, "truncated", [](Dir d, Dir) {
    // 2^40 x 128 BF16 = 256 TiB declared in a 247 KB file: must be refused without allocating.
    edit_header(d, [](Json& h, std::string&) {
      h[kQ1]["shape"] = Json::array({1ull << 40, 128});
      h[kQ1]["data_offsets"] = Json::array({213504, 213504 + (1ull << 48)});
    });
  });
  add("header_size_mismatch", kShard2, "expected", [](Dir d, Dir) {
    edit_header(d, [](Json& h, std::string&) { h[kLn0]["data_offsets"] = Json::array({0, 255}); });
  });
  add("header_gap", kShard2, "gap", [](Dir d, Dir) {
    edit_header(d, [](Json& h, std::string&) {
      h[kLn0]["shape"] = Json::array({127});
      h[kLn0]["data_offsets"] = Json::array({0, 254});
    });
  });
  add("header_overlap", kShard2, "overlap", [](Dir d, Dir) {
    edit_header(d, [](Json& h, std::string&) {
      h[kLn0]["shape"] = Json::array({129});
      h[kLn0]["data_offsets"] = Json::array({0, 258});
    });
  });
  add("header_trailing_bytes", kShard2, "trailing", [](Dir d, Dir) {
    edit_header(d, [](Json&, std::string& data) { data.append(8, '\0'); });
  });
  add("header_duplicate_tensor_name", kShard2, "twice", [](Dir d, Dir) {
    edit_header_text(d, "\"model.layers.0.post_attention_layernorm.weight\"", "\"model.layers.0.input_layernorm.weight\"");
  });
  add("header_metadata_not_string", kShard2, "__metadata__", [](Dir d, Dir) {
    edit_header(d, [](Json& h, std::string&) { h["__metadata__"]["format"] = 1; });
  });
  add("header_non_utf8_tensor_name", kShard2, "JSON", [](Dir d, Dir) {
    edit_header_text(d, "model.layers.0.input_layernorm.weight", "model.layers.0.\xff\xfe_layernorm.weight");
  });
  add("header_control_byte_in_name", kShard2, "JSON", [](Dir d, Dir) {
    edit_header_text(d, "model.layers.0.input_layernorm.weight", std::string("model.layers.0.\x01nput_layernorm.weight"));
  });
  add("header_enormous_tensor_name", kShard2, "not listed", [](Dir d, Dir) {
    // A 1 MB name (valid header): the index does not list it. The message must stay short.
    edit_header(d, [](Json& h, std::string&) {
      Json e = h[kLn0];
      h.erase(kLn0);
      h[std::string(1 << 20, 'N')] = e;
    });
  });
  add("shard_truncated", kShard2, "truncated", [](Dir d, Dir) { stdfs::resize_file(d / kShard2, 1000); });
  add("shard_empty_file", kShard2, "8-byte", [](Dir d, Dir) { spit(d / kShard2, ""); });
  // ---- index ----
  add("index_not_json", kIndex, "JSON", [](Dir d, Dir) { spit(d / kIndex, "{\"weight_map\": {"); });
  add("index_root_array", kIndex, "object", [](Dir d, Dir) { spit(d / kIndex, "[]"); });
  add("index_no_weight_map", kIndex, "weight_map", [](Dir d, Dir) { spit(d / kIndex, "{\"metadata\": {}}"); });
  add("index_weight_map_is_list", kIndex, "weight_map", [](Dir d, Dir) {
    edit_json(d / kIndex, [](Json& j) { j["weight_map"] = Json::array({"a", "b"}); });
  });
  add("index_shard_name_not_string", kIndex, "expected a shard file name", [](Dir d, Dir) {
    edit_json(d / kIndex, [](Json& j) { j["weight_map"]["lm_head.weight"] = 4; });
  });
  add("index_empty_weight_map", kIndex, "", [](Dir d, Dir) {
    edit_json(d / kIndex, [](Json& j) { j["weight_map"] = Json::object(); });  // total_size still 853248
  });
  add("index_empty_weight_map_no_metadata", kIndex, "no tensors", [](Dir d, Dir) {
    spit(d / kIndex, "{\"weight_map\": {}}");  // four shards on disk, none listed
  });
  add("index_points_to_missing_shard", kIndex, "does not exist", [](Dir d, Dir) {
    stdfs::remove(d / "model-00003-of-00004.safetensors");
  });
  add("index_path_traversal", kIndex, "plain file name", [](Dir d, Dir) {
    edit_json(d / kIndex, [](Json& j) { j["weight_map"]["lm_head.weight"] = "../model-00004-of-00004.safetensors"; });
  });
  add("index_absolute_shard_path", kIndex, "absolute", [](Dir d, Dir) {
    edit_json(d / kIndex, [](Json& j) { j["weight_map"]["lm_head.weight"] = "/etc/passwd"; });
  });
  add("index_symlinked_shard_outside_dir", kIndex, "outside", [](Dir d, Dir root) {
    stdfs::rename(d / "model-00003-of-00004.safetensors", root / "elsewhere.safetensors");
    stdfs::create_symlink(root / "elsewhere.safetensors", d / "model-00003-of-00004.safetensors");
  });
  // (A wrong metadata.total_size is a warning, not a refusal: HostileFiles.StaleTotalSizeIsAWarning.)
  add("index_nul_then_garbage", kIndex, "NUL byte", [](Dir d, Dir) {
    spit(d / kIndex, slurp(d / kIndex) + std::string("\0{\"weight_map\": 7}", 18));
  });
  add("index_duplicate_key", kIndex, "twice", [](Dir d, Dir) {
    std::string t = slurp(d / kIndex);
    const std::string line = "\"lm_head.weight\": \"model-00004-of-00004.safetensors\",";
    t.insert(t.find(line), line);
    spit(d / kIndex, t);
  });
  add("index_lists_tensor_in_wrong_shard", kIndex, "disagree", [](Dir d, Dir) {
    edit_json(d / kIndex, [](Json& j) { j["weight_map"]["lm_head.weight"] = "model-00001-of-00004.safetensors"; });
  });
  add("index_lists_absent_tensor", kIndex, "does not contain", [](Dir d, Dir) {
    edit_json(d / kIndex, [](Json& j) { j["weight_map"]["model.ghost.weight"] = "model-00004-of-00004.safetensors"; });
  });
  add("index_non_utf8_bytes", kIndex, "JSON", [](Dir d, Dir) {
    std::string t = slurp(d / kIndex);
    t.replace(t.find("lm_head"), 7, "lm\xff\xfehead");
    spit(d / kIndex, t);
  });
  add("index_two_index_files", "other.safetensors.index.json", "several index files", [](Dir d, Dir) {
    stdfs::copy_file(d / kIndex, d / "other.safetensors.index.json");
  });
  add("index_huge_sparse_file", kIndex, "limit", [](Dir d, Dir) {
    stdfs::resize_file(d / kIndex, 300ull << 20);  // sparse 300 MiB: over the JSON-file cap, never read
  });
  add("no_index_non_utf8_shard_name", "\\xff\\xfe", "", [](Dir d, Dir) {
    stdfs::remove(d / kIndex);
    spit(d / "\xff\xfe.safetensors", "not a safetensors file at all");  // the name must come out escaped
  });
  // ---- config.json ----
  add("config_not_json", "config.json", "JSON", [](Dir d, Dir) { spit(d / "config.json", "{\"model_type\": \"llama\",}"); });
  add("config_nul_then_garbage", "config.json", "NUL byte", [](Dir d, Dir) {
    spit(d / "config.json", slurp(d / "config.json") + std::string("\0garbage", 8));
  });
  add("config_not_an_object", "config.json", "object", [](Dir d, Dir) { spit(d / "config.json", "[\"llama\"]"); });
  add("config_deeply_nested", "config.json", "deeper", [](Dir d, Dir) {
    spit(d / "config.json", std::string(200000, '[') + std::string(200000, ']'));
  });
  add("config_duplicate_key", "config.json", "twice", [](Dir d, Dir) {
    std::string t = slurp(d / "config.json");
    t.insert(1, "\n  \"num_hidden_layers\": 7,");
    spit(d / "config.json", t);
  });
  add("config_text_config_wrong_type", "config.json", "text_config", [](Dir d, Dir) {
    edit_json(d / "config.json", [](Json& j) { j["text_config"] = "llama"; });
  });
  add("config_num_hidden_layers_negative", "config.json", "num_hidden_layers", [](Dir d, Dir) {
    edit_json(d / "config.json", [](Json& j) { j["num_hidden_layers"] = -1; });
  });
  add("config_num_hidden_layers_huge", "config.json", "num_hidden_layers", [](Dir d, Dir) {
    edit_json(d / "config.json", [](Json& j) { j["num_hidden_layers"] = 9'000'000'000'000'000'000ull; });
  });
  add("config_layer_types_wrong_type", "config.json", "layer_types", [](Dir d, Dir) {
    edit_json(d / "config.json", [](Json& j) { j["layer_types"] = 12; });
  });
  add("config_huge_sparse_file", "config.json", "limit", [](Dir d, Dir) {
    stdfs::resize_file(d / "config.json", 300ull << 20);
  });
  add("config_enormous_string_and_bad_root", "config.json", "object", [](Dir d, Dir) {
    spit(d / "config.json", "\"" + std::string(20u << 20, 'x') + "\"");  // a 20 MB JSON string, not an object
  });
  // ---- quantization_config (on a quantized checkpoint) ----
  auto qc = [](std::function<void(Json&)> f) {
    return [f](Dir d, Dir) { edit_json(d / "config.json", [&f](Json& j) { f(j["quantization_config"]); }); };
  };
  add("quant_config_is_string", "config.json", "quantization_config",
      [](Dir d, Dir) { edit_json(d / "config.json", [](Json& j) { j["quantization_config"] = "nvfp4"; }); },
      Base::QUANTIZED, bad_qc());
  add("quant_config_groups_is_list", "config.json", "quantization_config",
      qc([](Json& q) { q["config_groups"] = Json::array({1}); }), Base::QUANTIZED, bad_qc());
  add("quant_config_num_bits_string", "config.json", "quantization_config", qc([](Json& q) {
        for (auto& g : q["config_groups"]) g["weights"]["num_bits"] = "4";
      }), Base::QUANTIZED, bad_qc());
  add("quant_config_ignore_not_list", "config.json", "quantization_config",
      qc([](Json& q) { q["ignore"] = "lm_head"; }), Base::QUANTIZED, bad_qc());
  add("quant_config_ignore_bad_regex", "config.json", "quantization_config",
      qc([](Json& q) { q["ignore"] = Json::array({"lm_head", "re:[unclosed"}); }), Base::QUANTIZED, bad_qc());
  add("quant_config_targets_number", "config.json", "quantization_config", qc([](Json& q) {
        for (auto& g : q["config_groups"]) g["targets"] = 7;
      }), Base::QUANTIZED, bad_qc());
  add("quant_config_enormous_quant_method", "config.json", "quantization_config",
      qc([](Json& q) { q["quant_method"] = std::string(1 << 20, 'q'); }), Base::QUANTIZED,
      {{"inspect", 0, ""}, {"quantize", 3, ""}});
  // Issue 27 #6: a quant_method that is not a string ended doctor and verify with exit 5 (internal error).
  for (const auto& [label, value] : std::vector<std::pair<std::string, Json>>{
           {"number", Json(5)}, {"object", Json::object({{"a", 1}})}})
    add("quant_config_quant_method_" + label, "config.json", "quantization_config",
        qc([value](Json& q) { q["quant_method"] = value; }), Base::QUANTIZED, bad_qc());
  // Issue 27 #11: targets that select nothing declare packed tensors vLLM will not build as quantized.
  add("quant_config_targets_empty", "config.json", "quantization_config", qc([](Json& q) {
        for (auto& g : q["config_groups"]) g["targets"] = Json::array();
      }), Base::QUANTIZED, bad_qc());
  add("quant_config_target_regex_matches_nothing", "config.json", "quantization_config", qc([](Json& q) {
        for (auto& g : q["config_groups"]) g["targets"] = Json::array({"re:^no_such_module"});
      }), Base::QUANTIZED, bad_qc());
  // Issue 27 #2: a pathological `re:` ignore entry and a 200 KB module name end in seconds, exit 0-4.
  add("quant_config_ignore_catastrophic_regex", "config.json", "quantization_config",
      qc([](Json& q) { q["ignore"] = Json::array({"lm_head", "re:(a+)+$", "re:" + std::string(100000, 'a') + "b"}); }),
      Base::QUANTIZED, {{"inspect", 0, ""}, {"quantize", 3, ""}});
  return c;
}

// --- fixture -----------------------------------------------------------------------------------------

class HostileInputs : public ::testing::TestWithParam<Case> {
 public:
  static void SetUpTestSuite() {
    suite_ = new TempDir();
    stdfs::copy(stdfs::path(kData) / "llama", suite_->path / "llama", stdfs::copy_options::recursive);
  }
  /** The quantized base, made on first use (CTest runs each case in its own process). */
  static bool quantized_base() {
    if (!quantize_tried_) {
      quantize_tried_ = true;
      const RunResult r = run_cli(
          {"quantize", (suite_->path / "llama").string(), (suite_->path / "llama-q").string()}, suite_->path);
      quantize_ok_ = r.exit == 0;
      if (!quantize_ok_) quantize_msg_ = r.describe();
    }
    return quantize_ok_;
  }
  static void TearDownTestSuite() {
    delete suite_;
    suite_ = nullptr;
  }

 protected:
  static TempDir* suite_;
  static bool quantize_tried_, quantize_ok_;
  static std::string quantize_msg_;
};
TempDir* HostileInputs::suite_ = nullptr;
bool HostileInputs::quantize_tried_ = false;
bool HostileInputs::quantize_ok_ = false;
std::string HostileInputs::quantize_msg_;

/** Checks one run against the invariants; `what` names it in failure messages. */
void check_run(const RunResult& r, const Expect& e, const Case& c, const std::string& what) {
  ASSERT_EQ(r.signal, 0) << what << ": crashed or hung (signal " << r.signal
                         << (r.signal == SIGALRM ? ": deadline passed" : "") << "): " << r.describe();
  EXPECT_LT(r.maxrss_kb, kMaxRssKb) << what << ": peak RSS " << r.maxrss_kb << " KiB";
  EXPECT_EQ(r.exit, e.code) << what << ": " << r.describe();
  if (e.code == 3) {
    // One line, "fp4forge: error: ...", naming the file and what is wrong, of bounded length.
    ASSERT_FALSE(r.err.empty()) << what;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << what << ": stderr is not exactly one line: " << r.describe();
    EXPECT_EQ(r.err.rfind("fp4forge: error: ", 0), 0u) << what << ": " << r.describe();
    EXPECT_NE(r.err.find(c.names), std::string::npos) << what << ": message does not name '" << c.names << "': " << r.describe();
    if (!c.keyword.empty()) {
      EXPECT_NE(r.err.find(c.keyword), std::string::npos) << what << ": message lacks '" << c.keyword << "': " << r.describe();
    }
    EXPECT_LE(r.err.size(), kMaxErrLine) << what << ": error line is " << r.err.size() << " bytes";
    // --json: the error object on stdout.
    const Json j = Json::parse(r.out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << what << ": stdout is not JSON: " << r.out.substr(0, 300);
    EXPECT_EQ(j.value("ok", true), false) << what;
    EXPECT_EQ(j["error"].value("exit_code", 0), 3) << what;
    EXPECT_EQ(j["error"].value("code", ""), "bad_input") << what;
  } else if (e.code == 1) {
    EXPECT_NE(r.out.find("\"" + e.finding + "\""), std::string::npos)
        << what << ": finding '" << e.finding << "' not reported: " << r.out.substr(0, 600);
    EXPECT_NE(r.out.find(c.keyword), std::string::npos) << what << ": report does not mention '" << c.keyword << "'";
  }
}

TEST_P(HostileInputs, RejectedCleanly) {
  const Case& c = GetParam();
  if (c.base == Base::QUANTIZED) {
    ASSERT_TRUE(quantized_base()) << "quantizing the llama fixture failed: " << quantize_msg_;
  }
  TempDir t;
  const stdfs::path dir = t.path / "ckpt";
  stdfs::copy(suite_->path / (c.base == Base::SOURCE ? "llama" : "llama-q"), dir, stdfs::copy_options::recursive);
  c.make(dir, t.path);
  const stdfs::path scratch = t.path / "scratch";
  stdfs::create_directory(scratch);
  const auto before = snapshot(dir);
  std::map<std::string, std::string> outside;
  if (stdfs::exists(t.path / "elsewhere.safetensors"))
    outside["elsewhere"] = slurp(t.path / "elsewhere.safetensors");

  for (const Expect& e : c.expect) {
    std::vector<std::string> args{e.cmd, dir.string(), "--json"};
    const stdfs::path dst = t.path / "out";
    if (e.cmd == "quantize") args.insert(args.begin() + 2, dst.string());
    const RunResult r = run_cli(args, scratch);
    check_run(r, e, c, c.name + " / " + e.cmd);
    EXPECT_EQ(snapshot(dir), before) << c.name << " / " << e.cmd << ": the source directory changed";
    if (e.cmd == "quantize") {
      EXPECT_FALSE(stdfs::exists(dst)) << c.name << ": quantize left a DST behind";
      for (const auto& ent : stdfs::directory_iterator(t.path))
        EXPECT_EQ(ent.path().filename().native().find("staging"), std::string::npos)
            << c.name << ": quantize left " << ent.path();
    }
  }
  if (!outside.empty()) {
    EXPECT_EQ(slurp(t.path / "elsewhere.safetensors"), outside["elsewhere"]) << "the symlink target changed";
  }
}

INSTANTIATE_TEST_SUITE_P(Corpus, HostileInputs, ::testing::ValuesIn(corpus()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

TEST(HostileCorpus, HasAtLeastThirtyDistinctCases) {
  const auto c = corpus();
  EXPECT_GE(c.size(), 30u);
  std::map<std::string, int> n;
  for (const auto& x : c) ++n[x.name];
  for (const auto& [k, v] : n) EXPECT_EQ(v, 1) << k;
}

// --- destination rules and a read-only source ----------------------------------------------------------

class QuantizeDestination : public ::testing::Test {
 protected:
  void SetUp() override {
    src = t.path / "src";
    stdfs::copy(stdfs::path(kData) / "llama", src, stdfs::copy_options::recursive);
    scratch = t.path / "scratch";
    stdfs::create_directory(scratch);
  }
  TempDir t;
  stdfs::path src, scratch;
};

TEST_F(QuantizeDestination, ReadOnlySourceWorksAndStaysUntouched) {
  for (const auto& e : stdfs::recursive_directory_iterator(src))
    stdfs::permissions(e.path(), stdfs::perms::owner_write | stdfs::perms::group_write | stdfs::perms::others_write,
                       stdfs::perm_options::remove);
  stdfs::permissions(src, stdfs::perms::owner_write | stdfs::perms::group_write | stdfs::perms::others_write,
                     stdfs::perm_options::remove);
  const auto before = snapshot(src);
  const RunResult r = run_cli({"quantize", src.string(), (t.path / "q").string()}, scratch);
  ASSERT_EQ(r.signal, 0) << r.describe();
  ASSERT_EQ(r.exit, 0) << r.describe();
  EXPECT_EQ(snapshot(src), before);
  EXPECT_TRUE(stdfs::exists(t.path / "q" / "config.json"));
  const RunResult v = run_cli({"verify", (t.path / "q").string(), "--against", src.string()}, scratch);
  EXPECT_EQ(v.exit, 0) << v.describe() << v.out.substr(0, 2000);
  EXPECT_EQ(snapshot(src), before);
}

TEST_F(QuantizeDestination, ExistingDestinationIsRefusedAndLeftAlone) {
  const stdfs::path dst = t.path / "dst";
  stdfs::create_directory(dst);
  spit(dst / "precious.txt", "user data");
  const auto before = snapshot(dst), src_before = snapshot(src);
  const RunResult r = run_cli({"quantize", src.string(), dst.string()}, scratch);
  ASSERT_EQ(r.signal, 0) << r.describe();
  EXPECT_EQ(r.exit, 3) << r.describe();
  EXPECT_NE(r.err.find("dst"), std::string::npos) << r.describe();
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.describe();
  EXPECT_EQ(snapshot(dst), before);
  EXPECT_EQ(snapshot(src), src_before);
  // An existing empty directory and an existing file are refused too.
  stdfs::create_directory(t.path / "empty");
  EXPECT_EQ(run_cli({"quantize", src.string(), (t.path / "empty").string()}, scratch).exit, 3);
  spit(t.path / "file", "x");
  EXPECT_EQ(run_cli({"quantize", src.string(), (t.path / "file").string()}, scratch).exit, 3);
  EXPECT_EQ(slurp(t.path / "file"), "x");
}

// Issue 27 #4: `quantize --resume` followed a staging folder that was a symbolic link: the output was written
// into the link's target and DST became a link to someone else's directory.
TEST_F(QuantizeDestination, AStagingFolderThatIsALinkIsNeverFollowed) {
  const stdfs::path other = t.path / "someone-else";
  stdfs::create_directory(other);
  spit(other / ".fp4forge-staging", "fp4forge quantize staging folder\n");  // even with a marker inside
  spit(other / "theirs.txt", "their data");
  const auto before = snapshot(other);
  stdfs::create_directory_symlink(other, t.path / ".dst.fp4forge-staging");
  for (const char* resume : {"--resume", ""}) {
    std::vector<std::string> args{"quantize", src.string(), (t.path / "dst").string()};
    if (*resume) args.push_back(resume);
    const RunResult r = run_cli(args, scratch);
    ASSERT_EQ(r.signal, 0) << r.describe();
    EXPECT_EQ(r.exit, 3) << r.describe();
    EXPECT_NE(r.err.find("symbolic link"), std::string::npos) << r.describe();
    EXPECT_FALSE(stdfs::exists(stdfs::symlink_status(t.path / "dst"))) << r.describe();
    EXPECT_EQ(snapshot(other), before);
  }
}

// Issue 27 #9: temporaries a killed run left in its staging folder (the MTP splice's NAME.partial-XXXXXXXX, a
// shard's NAME.partial) ended up inside DST after --resume. They are removed before resuming.
TEST_F(QuantizeDestination, ResumeLeavesNoTemporaryOfTheKilledRunInTheOutput) {
  const stdfs::path staging = t.path / ".dst.fp4forge-staging";
  stdfs::create_directory(staging);
  spit(staging / ".fp4forge-staging", "fp4forge quantize staging folder\n");
  spit(staging / "config.json.partial-a1b2c3d4", "{\"half\": ");
  spit(staging / "model-mtp.safetensors.partial", "junk");
  const RunResult r = run_cli({"quantize", src.string(), (t.path / "dst").string(), "--resume"}, scratch);
  ASSERT_EQ(r.signal, 0) << r.describe();
  ASSERT_EQ(r.exit, 0) << r.describe();
  for (const auto& e : stdfs::directory_iterator(t.path / "dst"))
    EXPECT_EQ(e.path().filename().string().find(".partial"), std::string::npos) << e.path();
  EXPECT_FALSE(stdfs::exists(staging));
}

TEST_F(QuantizeDestination, DestinationInsideOrEqualToSourceIsRefused) {
  const auto before = snapshot(src);
  for (const stdfs::path& dst : {src / "q", src / "sub" / "q", src, src / "." / "q2"}) {
    const RunResult r = run_cli({"quantize", src.string(), dst.string()}, scratch);
    ASSERT_EQ(r.signal, 0) << dst << ": " << r.describe();
    EXPECT_EQ(r.exit, 3) << dst << ": " << r.describe();
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.describe();
    EXPECT_EQ(snapshot(src), before) << dst << ": the source directory changed";
  }
  // Through a symlink to SRC as well.
  stdfs::create_directory_symlink(src, t.path / "alias");
  const RunResult r = run_cli({"quantize", src.string(), (t.path / "alias" / "q").string()}, scratch);
  EXPECT_EQ(r.exit, 3) << r.describe();
  EXPECT_EQ(snapshot(src), before);
}

}  // namespace

namespace fp4forge {
namespace {
// Issue 14 #7: a FIFO (or any non-regular file) as config.json, the index or tokenizer.json is refused
// with exit 3 instead of hanging the command. `timeout` bounds a regression to a failure, not a hang.
TEST(HostileFiles, FifoInsteadOfAFileIsRefusedNotWaitedOn) {
  using namespace fp4forge::testutil;
  for (const char* file : {"config.json", "model.safetensors.index.json", "tokenizer.json"}) {
    TempDir t;
    const auto dir = t.path / "m";
    std::filesystem::copy(kData + "/llama", dir);
    std::filesystem::remove(dir / file);
    ASSERT_EQ(::mkfifo((dir / file).c_str(), 0644), 0);
    const bool side_file = std::string(file) == "tokenizer.json";
    for (const std::string cmd : {"inspect", "doctor"}) {
      const auto out = t.path / "out.txt";
      const std::string line = "timeout 20 '" + std::string(FP4FORGE_CLI) + "' " + cmd + " " + q(dir) + " >" +
                               q(out) + " 2>&1";
      const int rc = std::system(line.c_str());
      ASSERT_TRUE(WIFEXITED(rc));
      const int code = WEXITSTATUS(rc);
      ASSERT_NE(code, 124) << cmd << " hung on a FIFO as " << file;
      if (!side_file) {
        EXPECT_EQ(code, 3) << cmd << " with a FIFO as " << file;
      } else if (cmd == "doctor") {
        // A side file is a doctor finding (the checkpoint is wrong), naming the FIFO.
        EXPECT_EQ(code, 1) << slurp(out);
        EXPECT_NE(slurp(out).find("not a regular file (a FIFO)"), std::string::npos) << slurp(out);
      }
    }
  }
}
}  // namespace
}  // namespace fp4forge

namespace fp4forge {
namespace {
// Issue 14 #6: an absurd -j is a usage error; threads the system refuses (ulimit -v) never abort the run.
TEST(HostileLimits, ThreadCountIsCappedAndThreadFailureNeverAborts) {
  using namespace fp4forge::testutil;
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "ASan reserves terabytes of shadow address space: ulimit -v cannot be tested under it";
#endif
  TempDir t;
  std::string out, err;
  EXPECT_EQ(run_cli("quantize " + q(kData + "/llama") + " " + q(t.path / "a") + " -j 200000", &out, &err), 2) << err;
  EXPECT_FALSE(std::filesystem::exists(t.path / "a"));
  // 64 threads of 8 MiB stacks do not fit in 200 MiB of address space: the pool keeps what it gets. Whichever
  // allocation fails first (a worker's buffer, a per-thread table, the report itself, the resume manifest), the
  // run ends in exit 0, 4 or 5, never in std::terminate: run several times, as which one fails first varies.
  for (int i = 0; i < 8; ++i) {
    const auto dst = t.path / ("b" + std::to_string(i));
    const auto log = t.path / ("b" + std::to_string(i) + ".log");
    const std::string line = "bash -c \"ulimit -v 204800; '" + std::string(FP4FORGE_CLI) + "' quantize " +
                             q(kData + "/llama") + " " + q(dst) + " -j 64\" >" + q(log) + " 2>&1";
    const int rc = std::system(line.c_str());
    ASSERT_TRUE(WIFEXITED(rc)) << "killed by a signal: " << slurp(log);
    const int code = WEXITSTATUS(rc);
    EXPECT_TRUE(code == 0 || code == 4 || code == 5) << "exit " << code << ": " << slurp(log);
    if (code != 0) {
      EXPECT_FALSE(std::filesystem::exists(dst));
    }
  }
}
}  // namespace
}  // namespace fp4forge

namespace fp4forge {
namespace {
// Issue 14 #15: a side file linked outside the checkpoint (tokenizer.json -> a private key) is not copied
// into the output (the shard confinement rule applies to every copied file); a link inside is.
TEST(HostileFiles, SideFileLinkedOutsideIsNotCopied) {
  using namespace fp4forge::testutil;
  TempDir t;
  const auto src = t.path / "m";
  std::filesystem::copy(kData + "/llama", src);
  { std::ofstream(t.path / "id_rsa") << "-----BEGIN PRIVATE KEY-----\n"; }
  std::filesystem::remove(src / "tokenizer.json");
  std::filesystem::remove(src / "chat_template.jinja");
  std::filesystem::create_symlink(t.path / "id_rsa", src / "tokenizer.json");
  { std::ofstream(src / "real_template.jinja") << "{{ x }}\n"; }
  std::filesystem::create_symlink("real_template.jinja", src / "chat_template.jinja");
  std::string out, err;
  // The preflight reads the folder as doctor does, which finds the linked tokenizer.json no tokenizer (issue 51):
  // refused, nothing written, and no byte of the linked file in the message.
  ASSERT_EQ(run_cli("quantize " + q(src) + " " + q(t.path / "q"), &out, &err), 3) << err;
  EXPECT_NE(err.find("preflight: invalid-json-file in "), std::string::npos) << err;
  EXPECT_EQ(err.find("PRIVATE KEY"), std::string::npos) << err;
  EXPECT_FALSE(std::filesystem::exists(t.path / "q"));
  // Past the preflight, the copy rule: the link out is not followed into the output.
  ASSERT_EQ(run_cli("quantize " + q(src) + " " + q(t.path / "q") + " --no-preflight", &out, &err), 0) << err;
  EXPECT_FALSE(std::filesystem::exists(t.path / "q" / "tokenizer.json"));
  EXPECT_NE(err.find("not copied: 'tokenizer.json' is a symlink"), std::string::npos) << err;
  EXPECT_EQ(slurp(t.path / "q" / "chat_template.jinja"), "{{ x }}\n");
}
}  // namespace
}  // namespace fp4forge

namespace fp4forge {
namespace {
// A metadata.total_size that is wrong (stale, negative, not a number) stops nothing: transformers and
// vLLM never read it. Every command warns; doctor --fix rewrites it (with a backup) and is idempotent.
TEST(HostileFiles, StaleTotalSizeIsAWarning) {
  using namespace fp4forge::testutil;
  const char* const idx = "model.safetensors.index.json";
  for (const std::string bad : {"1", "-853248", "\"big\"", "853248.5"}) {
    SCOPED_TRACE(bad);
    TempDir t;
    const auto dir = t.path / "m";
    std::filesystem::copy(kData + "/llama", dir);
    std::string text = slurp(dir / idx);
    const auto at = text.find("\"total_size\"");
    ASSERT_NE(at, std::string::npos);
    const auto v0 = text.find(':', at) + 1, v1 = text.find_first_of(",}", v0);
    const std::uint64_t good = std::stoull(text.substr(v0, v1 - v0));
    text.replace(v0, v1 - v0, " " + bad + "\n  ");
    { std::ofstream(dir / idx, std::ios::trunc) << text; }
    std::string out, err;
    EXPECT_EQ(run_cli("inspect " + q(dir) + " --json", &out, &err), 0) << err;
    EXPECT_NE(out.find("metadata.total_size is"), std::string::npos) << out.substr(0, 400);
    ASSERT_EQ(run_cli("quantize " + q(dir) + " " + q(t.path / "q") + " --json", &out, &err), 0) << err;
    EXPECT_NE(out.find("metadata.total_size is"), std::string::npos);
    EXPECT_EQ(run_cli("verify " + q(t.path / "q") + " --against " + q(dir) + " --json", &out, &err), 0) << err;
    EXPECT_NE(out.find("\"index-total-size\""), std::string::npos) << out.substr(0, 400);
    EXPECT_EQ(run_cli("doctor " + q(dir) + " --json", &out, &err), 0) << err;
    EXPECT_NE(out.find("\"index-total-size\""), std::string::npos);
    EXPECT_EQ(run_cli("doctor " + q(dir) + " --fix --json", &out, &err), 0) << err;
    const std::string fixed = slurp(dir / idx);
    EXPECT_EQ(nlohmann::json::parse(fixed)["metadata"]["total_size"], good) << fixed.substr(0, 200);
    int backups = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir))
      backups += e.path().filename().string().rfind(std::string(idx) + ".bak-fp4forge-", 0) == 0;
    EXPECT_EQ(backups, 1);
    EXPECT_EQ(run_cli("doctor " + q(dir) + " --fix --json", &out, &err), 0) << err;
    EXPECT_EQ(out.find("\"index-total-size\""), std::string::npos) << "fixed twice";
    EXPECT_EQ(slurp(dir / idx), fixed);
  }
}
}  // namespace
}  // namespace fp4forge
