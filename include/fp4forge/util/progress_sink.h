#pragma once
/**
 * Where long library jobs (quantize, verify --against, synth) report progress. The library never draws:
 * the CLI passes a `Progress` bar (util/progress.h) when stderr is a terminal, tests pass a counter,
 * and nullptr means nobody listens. Counts and totals are in the same units: bytes of the input read,
 * and items (tensors or shards) finished.
 */
#include <atomic>
#include <cstdint>
#include <string_view>

namespace fp4forge {

class ProgressSink {
 public:
  virtual ~ProgressSink() = default;
  /** A job starts: its label and totals. */
  virtual void begin(std::string_view label, std::uint64_t total_bytes, std::uint64_t total_items) = 0;
  /** Finished bytes / items; called from any thread. */
  virtual void add(std::uint64_t bytes, std::uint64_t items = 0) = 0;
  /** What is being worked on (a shard name). */
  virtual void set_detail(std::string_view detail) = 0;
  /** The job ended (successfully or not). */
  virtual void finish() = 0;
};

/** One job's reporting: begins at construction, finishes when it goes out of scope (a failed job ends its
 * bar too); every call is a no-op without a sink. Also counts what it forwarded. Thread-safe like the sink. */
class ProgressScope {
 public:
  ProgressScope() = default;
  ProgressScope(ProgressSink* sink, std::string_view label, std::uint64_t total_bytes, std::uint64_t total_items)
      : sink_(sink) {
    if (sink_) sink_->begin(label, total_bytes, total_items);
  }
  ~ProgressScope() { finish(); }
  ProgressScope(const ProgressScope&) = delete;
  ProgressScope& operator=(const ProgressScope&) = delete;
  void add(std::uint64_t bytes, std::uint64_t items = 0) {
    bytes_.fetch_add(bytes, std::memory_order_relaxed);
    if (sink_) sink_->add(bytes, items);
  }
  void set_detail(std::string_view detail) {
    if (sink_) sink_->set_detail(detail);
  }
  void finish() {
    if (sink_) sink_->finish();
    sink_ = nullptr;
  }
  std::uint64_t bytes_done() const noexcept { return bytes_.load(std::memory_order_relaxed); }

 private:
  ProgressSink* sink_ = nullptr;
  std::atomic<std::uint64_t> bytes_{0};
};

}  // namespace fp4forge
