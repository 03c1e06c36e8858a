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

std::string Progress::render(std::string_view label, std::uint64_t done, std::uint64_t total,
                             std::uint64_t items, std::uint64_t total_items, double seconds,
                             std::string_view detail, int width) {
  const double frac = total > 0 ? std::min(1.0, static_cast<double>(done) / static_cast<double>(total)) : 0.0;
  const int filled = static_cast<int>(frac * width);
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.resize(static_cast<std::size_t>(std::max(width, 0)), '.');
  const double rate = seconds > 0 ? static_cast<double>(done) / seconds : 0.0;
  const double eta = (rate > 0 && total >= done) ? static_cast<double>(total - done) / rate : -1.0;
  std::string s = fmt::format("{} [{}] {:3.0f}% {}/{}", label, bar, frac * 100.0,
                              fmt_bytes(static_cast<double>(done)), fmt_bytes(static_cast<double>(total)));
  if (total_items > 0) s += fmt::format(" {}/{}", items, total_items);
  s += fmt::format(" {}/s ETA {}", fmt_bytes(rate), done >= total ? "00:00" : fmt_duration(eta));
  if (!detail.empty()) s += fmt::format(" {}", detail);
  return s;
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
                                 std::uint64_t total_items, double seconds, std::string_view detail, int columns) {
  std::string line = render(label, done, total, items, total_items, seconds, detail);
  if (columns <= 0) return line;
  const auto room = static_cast<std::size_t>(columns - 1);  // the last column would wrap on some terminals
  if (line.size() > room) {
    const int shrink = static_cast<int>(line.size() - room);
    line = render(label, done, total, items, total_items, seconds, detail, std::max(8, 28 - shrink));
  }
  if (line.size() > room) line = render(label, done, total, items, total_items, seconds, {}, 8);
  if (line.size() > room) line.resize(room);
  return line;
}

void Progress::draw_locked(bool final) {
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (lines_) {  // a log: whole lines, no carriage return, no padding
    std::string line = render(label_, bytes_, total_bytes_, items_, total_items_, secs, final ? "" : detail_);
    if (final) {
      if (auto eta = line.rfind(" ETA "); eta != std::string::npos) line.resize(eta);
      line += fmt::format(" done in {}", fmt_duration(secs));
    }
    fmt::print(out_, "{}\n", line);
    std::fflush(out_);
    printed_ = true;
    return;
  }
  const int cols = columns_of(out_);
  std::string line = render_fit(label_, bytes_, total_bytes_, items_, total_items_, secs, final ? "" : detail_, cols);
  if (final) {
    if (auto eta = line.rfind(" ETA "); eta != std::string::npos) line.resize(eta);
    line += fmt::format(" done in {}", fmt_duration(secs));
    if (cols > 0 && line.size() >= static_cast<std::size_t>(cols)) line.resize(static_cast<std::size_t>(cols - 1));
  }
  const std::size_t len = line.size();
  const std::size_t pad_to = cols > 0 ? std::min(last_len_, static_cast<std::size_t>(cols - 1)) : last_len_;
  if (len < pad_to) line.append(pad_to - len, ' ');
  last_len_ = len;
  fmt::print(out_, "\r{}{}", line, final ? "\n" : "");
  std::fflush(out_);
}

}  // namespace fp4forge
