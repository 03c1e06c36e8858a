#pragma once
/**
 * The terminal progress bar the CLI gives long jobs as their ProgressSink (synth, quantize, verify):
 * bytes done / total, items done / total, throughput, ETA. It draws only when enabled (by default:
 * stderr is a terminal), redraws at most ~10 times per second, and is safe to update from several
 * threads. The library reports to a ProgressSink and never constructs one of these.
 *
 *   Progress p(Progress::Mode::AUTO);      // the CLI
 *   run(..., &p);                          // the library: p.begin(label, bytes, items), add(), finish()
 *   Progress p("writing", total_bytes, total_items);  // or begun at construction
 *   p.add(n_bytes);          // any thread
 *   p.add(0, 1);             // one item finished
 *   p.finish();              // final line + newline (also done by the destructor)
 */
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>

#include "fp4forge/util/progress_sink.h"

namespace fp4forge {

class Progress final : public ProgressSink {
 public:
  /** AUTO: draw only when stderr is a TTY. LINES: no bar; one status line ("label: 42% 1.2 GiB/2.9 GiB ...
   * ETA 00:31 shard") every `interval_s` seconds, and a last one if any was printed (a log, systemd, nohup,
   * --json: stderr that is not a terminal). */
  enum class Mode { AUTO, ALWAYS, NEVER, LINES };

  Progress(std::string label, std::uint64_t total_bytes, std::uint64_t total_items = 0,
           Mode mode = Mode::AUTO, std::FILE* out = stderr, double interval_s = 10.0);
  /** Not begun yet: begin() sets the label and totals. */
  explicit Progress(Mode mode, std::FILE* out = stderr, double interval_s = 10.0);
  ~Progress() override;
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  /** Adds finished bytes / items; redraws when at least 100 ms have passed since the last draw. */
  void begin(std::string_view label, std::uint64_t total_bytes, std::uint64_t total_items) override;
  void add(std::uint64_t bytes, std::uint64_t items = 0) override;
  /** Sets the text shown after the bar (e.g. the current shard name). */
  void set_detail(std::string_view detail) override;
  /** Draws the final state and a newline (idempotent). */
  void finish() override;

  bool enabled() const noexcept { return enabled_; }
  std::uint64_t bytes_done() const;
  std::uint64_t items_done() const;

  /** The bar line for the given state (no terminal control characters); exposed for tests. */
  static std::string render(std::string_view label, std::uint64_t done, std::uint64_t total,
                            std::uint64_t items, std::uint64_t total_items, double seconds,
                            std::string_view detail, int width = 28);
  /** render() made to fit `columns` (0: no limit): a narrower bar (down to 8), then whole fields dropped, never
   * cut mid-word: the detail, the rate, the item count, the byte counts, the bar, the label; the percentage and the
   * ETA go last. Never `columns` characters or more, so a redraw never wraps and leaves lines behind. `final`: the
   * closing line, "done in TIME" where the ETA was and no detail. */
  static std::string render_fit(std::string_view label, std::uint64_t done, std::uint64_t total, std::uint64_t items,
                                std::uint64_t total_items, double seconds, std::string_view detail, int columns,
                                bool final = false);
  /** The width of the terminal `f` writes to (TIOCGWINSZ), else $COLUMNS, else 0 (unknown). */
  static int columns_of(std::FILE* f) noexcept;
  /** True when stderr is a terminal. */
  static bool stderr_is_tty() noexcept;

 private:
  void draw_locked(bool final);

  std::string label_;
  std::string detail_;
  std::uint64_t total_bytes_, total_items_;
  std::uint64_t bytes_ = 0, items_ = 0;
  bool enabled_;
  bool lines_;           // Mode::LINES
  bool printed_ = false;  // LINES: a status line was printed
  double interval_s_;
  bool finished_ = false;
  std::FILE* out_;
  std::chrono::steady_clock::time_point start_, last_draw_;
  std::size_t last_len_ = 0;
  mutable std::mutex mu_;
};

}  // namespace fp4forge
