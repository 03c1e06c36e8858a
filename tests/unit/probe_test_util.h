#pragma once
// What the probe's unit tests share: probe options with short deadlines, a check's result by name.
#include <stdexcept>

#include "fp4forge/probe/probe.h"

namespace fp4forge::probe::testutil {

/** 5 s a check, 2 s to connect: the canned seat answers in milliseconds. */
inline ProbeOptions fast_opts() {
  ProbeOptions o;
  o.timeout_s = 5.0;
  o.connect_timeout_s = 2.0;
  return o;
}

/** The result of check `c` in `r` (throws when the report has none). */
inline const CheckResult& find(const ProbeReport& r, Check c) {
  for (const auto& x : r.checks)
    if (x.check == c) return x;
  throw std::runtime_error("check not in report");
}

}  // namespace fp4forge::probe::testutil
