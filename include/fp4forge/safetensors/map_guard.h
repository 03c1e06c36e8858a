#pragma once
/**
 * SIGBUS protection for read-only file mappings.
 *
 * Reading a mapped shard that another process truncates raises SIGBUS on the first page past the new
 * end of file, which would kill the run with no message. A `MapGuard` registers a mapped range; the
 * process-wide SIGBUS handler (installed with the first guard) maps a zero page over a faulting page
 * inside a guarded range, records the fault and lets the read go on. The owner then asks `faulted()`
 * and reports the source as changed during the run (exit 3) instead of using the zeros.
 *
 * A fault outside every guarded range gets the previous disposition (a chained handler or the
 * default action). At most `kMaxGuards` ranges are guarded at once; beyond that a guard is inactive
 * (`active()` false) and a shrinking file still ends the process with SIGBUS.
 */
#include <cstddef>

namespace fp4forge::st {

class MapGuard {
 public:
  static constexpr std::size_t kMaxGuards = 8192;

  MapGuard() = default;
  /** Guards [base, base + len). */
  MapGuard(const void* base, std::size_t len) noexcept;
  ~MapGuard();  ///< unregisters; call before unmapping the range
  MapGuard(MapGuard&& o) noexcept;
  MapGuard& operator=(MapGuard&& o) noexcept;
  MapGuard(const MapGuard&) = delete;
  MapGuard& operator=(const MapGuard&) = delete;

  bool active() const noexcept { return slot_ >= 0; }
  /** True once a read in the range hit a page past the end of the file. */
  bool faulted() const noexcept;

 private:
  void reset() noexcept;
  long slot_ = -1;
};

}  // namespace fp4forge::st
