#include "fp4forge/util/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

namespace fp4forge {
namespace {

std::string fmt_bytes(double b) {
  constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024.0 && u < 4) {
    b /= 1024.0;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} B", b) : fmt::format("{:.1f} {}", b, kUnits[u]);
}

std::string fmt_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "--:--";
  const auto t = static_cast<std::uint64_t>(s + 0.5);
  if (t >= 3600) return fmt::format("{}:{:02}:{:02}", t / 3600, (t / 60) % 60, t % 60);
  return fmt::format("{:02}:{:02}", t / 60, t % 60);
}

}  // namespace

Progress::Progress(std::string label, std::uint64_t total_bytes, std::uint64_t total_items, Mode mode,
                   std::FILE* out, double interval_s)
    : label_(std::move(label)),
      total_bytes_(total_bytes),
      total_items_(total_items),
      enabled_(mode == Mode::ALWAYS || mode == Mode::LINES || (mode == Mode::AUTO && stderr_is_tty())),
      lines_(mode == Mode::LINES),
      interval_s_(interval_s),
      out_(out),
      start_(std::chrono::steady_clock::now()),
      last_draw_(lines_ ? start_ : start_ - std::chrono::seconds(1)) {}

Progress::Progress(Mode mode, std::FILE* out, double interval_s) : Progress(std::string(), 0, 0, mode, out, interval_s) {
  finished_ = true;
}

void Progress::begin(std::string_view label, std::uint64_t total_bytes, std::uint64_t total_items) {
  std::lock_guard<std::mutex> lock(mu_);
  label_ = std::string(label);
  detail_.clear();
  total_bytes_ = total_bytes;
  total_items_ = total_items;
  bytes_ = items_ = 0;
  finished_ = false;
  last_len_ = 0;
  printed_ = false;
  start_ = std::chrono::steady_clock::now();
  last_draw_ = lines_ ? start_ : start_ - std::chrono::seconds(1);
}

Progress::~Progress() { finish(); }

bool Progress::stderr_is_tty() noexcept { return ::isatty(STDERR_FILENO) == 1; }

void Progress::add(std::uint64_t bytes, std::uint64_t items) {
  std::lock_guard<std::mutex> lock(mu_);
  bytes_ += bytes;
  items_ += items;
  if (!enabled_ || finished_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ < (lines_ ? std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                       std::chrono::duration<double>(interval_s_))
                                 : std::chrono::milliseconds(100)))
    return;
  last_draw_ = now;
  draw_locked(false);
}

void Progress::set_detail(std::string_view detail) {
  std::lock_guard<std::mutex> lock(mu_);
  detail_ = std::string(detail);
}

void Progress::finish() {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  finished_ = true;
  if (!enabled_ || (lines_ && !printed_)) return;  // LINES: a job shorter than one interval stays silent
  draw_locked(true);
}

std::uint64_t Progress::bytes_done() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}
std::uint64_t Progress::items_done() const {
  std::lock_guard<std::mutex> lock(mu_);
  return items_;
}

namespace {

/** The fields of one bar line, each kept or dropped whole. */
struct BarLine {
  std::string label, pct, pct_padded, bytes, items, rate, tail, detail;  // tail: "ETA mm:ss" or "done in ..."
  double frac = 0;
  enum Drop : unsigned { DETAIL = 1, RATE = 2, ITEMS = 4, BYTES = 8, BAR = 16, LABEL = 32 };

  std::string text(int width, unsigned drop) const {
    std::string s;
    auto add = [&s](std::string_view f) {
      if (f.empty()) return;
      if (!s.empty()) s += ' ';
      s += f;
    };
    if (!(drop & LABEL)) add(label);
    if (!(drop & BAR)) {
      const int w = std::max(width, 0);
      std::string bar(static_cast<std::size_t>(static_cast<int>(frac * w)), '#');
      bar.resize(static_cast<std::size_t>(w), '.');
      add("[" + bar + "]");
    }
    add(s.empty() ? pct : pct_padded);  // padded to line up after a label or bar
    if (!(drop & BYTES)) add(bytes);
    if (!(drop & ITEMS)) add(items);
    if (!(drop & RATE)) add(rate);
    add(tail);
    if (!(drop & DETAIL)) add(detail);
    return s;
  }
};

BarLine bar_line(std::string_view label, std::uint64_t done, std::uint64_t total, std::uint64_t items,
                 std::uint64_t total_items, double seconds, std::string_view detail) {
  BarLine b;
  b.frac = total > 0 ? std::min(1.0, static_cast<double>(done) / static_cast<double>(total)) : 0.0;
  const double rate = seconds > 0 ? static_cast<double>(done) / seconds : 0.0;
  const double eta = (rate > 0 && total >= done) ? static_cast<double>(total - done) / rate : -1.0;
  b.label = std::string(label);
  b.pct = fmt::format("{:.0f}%", b.frac * 100.0);
  b.pct_padded = fmt::format("{:>4}", b.pct);
  b.bytes = fmt::format("{}/{}", fmt_bytes(static_cast<double>(done)), fmt_bytes(static_cast<double>(total)));
  if (total_items > 0) b.items = fmt::format("{}/{}", items, total_items);
  b.rate = fmt::format("{}/s", fmt_bytes(rate));
  b.tail = fmt::format("ETA {}", done >= total ? "00:00" : fmt_duration(eta));
  b.detail = std::string(detail);
  return b;
}

/** `b` made to fit `columns` (0: no limit): a narrower bar (down to 8), then whole fields dropped in this order:
 * the detail, the rate, the item count, the byte counts, the bar, the label. The percentage and the ETA (or
 * "done in") go last; below that the line is the percentage alone, and never `columns` characters or more. */
std::string fit(const BarLine& b, int columns) {
  std::string line = b.text(28, 0);
  if (columns <= 0) return line;
  const auto room = static_cast<std::size_t>(columns - 1);  // the last column would wrap on some terminals
  if (line.size() <= room) return line;
  const int shrink = static_cast<int>(line.size() - room);
  line = b.text(std::max(8, 28 - shrink), 0);
  unsigned drop = 0;
  for (unsigned next : {BarLine::DETAIL, BarLine::RATE, BarLine::ITEMS, BarLine::BYTES, BarLine::BAR, BarLine::LABEL}) {
    if (line.size() <= room) return line;
    drop |= next;
    line = b.text(8, drop);
  }
  if (line.size() <= room) return line;
  line = b.pct;
  if (line.size() > room) line.clear();
  return line;
}

}  // namespace

std::string Progress::render(std::string_view label, std::uint64_t done, std::uint64_t total,
                             std::uint64_t items, std::uint64_t total_items, double seconds,
                             std::string_view detail, int width) {
  return bar_line(label, done, total, items, total_items, seconds, detail).text(width, 0);
}

int Progress::columns_of(std::FILE* f) noexcept {
  winsize ws{};
  if (f != nullptr && ::ioctl(::fileno(f), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  if (const char* c = std::getenv("COLUMNS"); c != nullptr) {
    const int n = std::atoi(c);
    if (n > 0 && n < 100000) return n;
  }
  return 0;
}

std::string Progress::render_fit(std::string_view label, std::uint64_t done, std::uint64_t total, std::uint64_t items,
                                 std::uint64_t total_items, double seconds, std::string_view detail, int columns,
                                 bool final) {
  BarLine b = bar_line(label, done, total, items, total_items, seconds, final ? std::string_view() : detail);
  if (final) b.tail = fmt::format("done in {}", fmt_duration(seconds));
  return fit(b, columns);
}

void Progress::draw_locked(bool final) {
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (lines_) {  // a log: whole lines, no carriage return, no padding
    std::string line = render_fit(label_, bytes_, total_bytes_, items_, total_items_, secs, detail_, 0, final);
    fmt::print(out_, "{}\n", line);
    std::fflush(out_);
    printed_ = true;
    return;
  }
  const int cols = columns_of(out_);
  std::string line = render_fit(label_, bytes_, total_bytes_, items_, total_items_, secs, detail_, cols, final);
  const std::size_t len = line.size();
  const std::size_t pad_to = cols > 0 ? std::min(last_len_, static_cast<std::size_t>(cols - 1)) : last_len_;
  if (len < pad_to) line.append(pad_to - len, ' ');
  last_len_ = len;
  fmt::print(out_, "\r{}{}", line, final ? "\n" : "");
  std::fflush(out_);
}

}  // namespace fp4forge
