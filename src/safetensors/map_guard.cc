#include "fp4forge/safetensors/map_guard.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <mutex>

namespace fp4forge::st {
namespace {

struct Slot {
  std::atomic<std::uintptr_t> lo{0}, hi{0};  // hi == 0: free
  std::atomic<bool> hit{false};
};
Slot g_slots[MapGuard::kMaxGuards];
std::atomic<std::size_t> g_high{0};  // slots [0, g_high) may be in use
std::uintptr_t g_page = 4096;
struct sigaction g_prev {};
std::once_flag g_once;

void on_sigbus(int sig, siginfo_t* si, void* ctx) {
  const auto a = reinterpret_cast<std::uintptr_t>(si->si_addr);
  const std::size_t n = g_high.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < n; ++i) {
    Slot& s = g_slots[i];
    const std::uintptr_t hi = s.hi.load(std::memory_order_acquire);
    if (hi == 0 || a < s.lo.load(std::memory_order_relaxed) || a >= hi) continue;
    // A page of zeros over the vanished file page; the read resumes and the owner reports the change.
    void* page = reinterpret_cast<void*>(a & ~(g_page - 1));
    if (::mmap(page, g_page, PROT_READ, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) != MAP_FAILED) {
      s.hit.store(true, std::memory_order_release);
      return;
    }
    break;
  }
  // Not ours: the previous disposition decides.
  if ((g_prev.sa_flags & SA_SIGINFO) && g_prev.sa_sigaction) {
    g_prev.sa_sigaction(sig, si, ctx);
    return;
  }
  if (g_prev.sa_handler != SIG_DFL && g_prev.sa_handler != SIG_IGN) {
    g_prev.sa_handler(sig);
    return;
  }
  ::sigaction(SIGBUS, &g_prev, nullptr);  // returning re-runs the faulting access under the default action
}

void install() {
  const long p = ::sysconf(_SC_PAGESIZE);
  if (p > 0) g_page = static_cast<std::uintptr_t>(p);
  struct sigaction sa {};
  sa.sa_sigaction = on_sigbus;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGBUS, &sa, &g_prev);
}

std::mutex g_mu;  // serialises slot claims

}  // namespace

MapGuard::MapGuard(const void* base, std::size_t len) noexcept {
  if (!base || len == 0) return;
  std::call_once(g_once, install);
  std::lock_guard lk(g_mu);
  for (std::size_t i = 0; i < kMaxGuards; ++i) {
    Slot& s = g_slots[i];
    if (s.hi.load(std::memory_order_relaxed) != 0) continue;
    s.hit.store(false, std::memory_order_relaxed);
    s.lo.store(reinterpret_cast<std::uintptr_t>(base), std::memory_order_relaxed);
    s.hi.store(reinterpret_cast<std::uintptr_t>(base) + len, std::memory_order_release);
    if (i + 1 > g_high.load(std::memory_order_relaxed)) g_high.store(i + 1, std::memory_order_release);
    slot_ = static_cast<long>(i);
    return;
  }
}

void MapGuard::reset() noexcept {
  if (slot_ < 0) return;
  std::lock_guard lk(g_mu);
  g_slots[slot_].hi.store(0, std::memory_order_release);
  slot_ = -1;
}

MapGuard::~MapGuard() { reset(); }

MapGuard::MapGuard(MapGuard&& o) noexcept : slot_(o.slot_) { o.slot_ = -1; }

MapGuard& MapGuard::operator=(MapGuard&& o) noexcept {
  if (this != &o) {
    reset();
    slot_ = o.slot_;
    o.slot_ = -1;
  }
  return *this;
}

bool MapGuard::faulted() const noexcept {
  return slot_ >= 0 && g_slots[slot_].hit.load(std::memory_order_acquire);
}

}  // namespace fp4forge::st
