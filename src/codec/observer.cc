#include "fp4forge/codec/observer.h"

#include <algorithm>
#include <string>

#include "fp4forge/codec/scheme.h"
#include "fp4forge/util/did_you_mean.h"
#include "fp4forge/util/thread_pool.h"
#include "fp4forge/util/strings.h"

namespace fp4forge {

std::string_view observer_option(Observer o) noexcept {
  switch (o) {
    case Observer::MINMAX: return "minmax";
    case Observer::NVFP4_EXPANDED_MSE: return "mse";
    case Observer::MEMORYLESS_MSE: return "memoryless-mse";
  }
  return "minmax";
}

std::string_view observer_config_name(Observer o) noexcept {
  switch (o) {
    case Observer::MINMAX: return "memoryless_minmax";
    case Observer::NVFP4_EXPANDED_MSE: return "nvfp4_expanded_mse";
    case Observer::MEMORYLESS_MSE: return "memoryless_mse";
  }
  return "memoryless_minmax";
}

std::optional<Observer> observer_from_config(std::string_view name) noexcept {
  // model_free's _validate_scheme maps "minmax" to "static_minmax", which calibration maps to the
  // memoryless min-max observer for weights; every other name is taken as registered.
  const std::string k = util::option_key(name);
  if (k == "memoryless-minmax" || k == "static-minmax" || k == "minmax") return Observer::MINMAX;
  if (k == "nvfp4-expanded-mse") return Observer::NVFP4_EXPANDED_MSE;
  if (k == "memoryless-mse") return Observer::MEMORYLESS_MSE;
  return std::nullopt;
}

Result<Observer> parse_observer(std::string_view text) {
  const std::string k = util::option_key(text);
  std::string names;
  for (Observer o : kObservers) {
    if (k == observer_option(o)) return o;
    names += (names.empty() ? "" : ", ") + std::string(observer_option(o));
  }
  // `expanded-mse`: the name that cannot be read as llm-compressor's own `mse` (whose weights get memoryless_mse,
  // calibration.py's initialize_observer; docs/schemes.md#observers); `mse` stays its documented alias.
  if (k == "expanded-mse") return Observer::NVFP4_EXPANDED_MSE;
  if (auto o = observer_from_config(text)) return *o;
  std::vector<std::string> known;
  for (Observer o : kObservers) known.emplace_back(observer_option(o));
  known.insert(known.end(), {"expanded-mse", "memoryless-minmax", "nvfp4-expanded-mse"});
  return make_error(Errc::USAGE, "unknown observer '{}'{}; expected one of: {}, expanded-mse (= mse) (or "
                    "llm-compressor's names: memoryless_minmax, nvfp4_expanded_mse, memoryless_mse)", text,
                    util::did_you_mean(k, known), names);
}

Observer default_observer(QuantScheme s) noexcept { return scheme_traits(s).default_observer; }

bool observer_supported(QuantScheme s, Observer o) noexcept {
  return (scheme_traits(s).observers >> static_cast<unsigned>(o)) & 1u;
}

Status check_observer(QuantScheme s, Observer o) {
  if (observer_supported(s, o)) return {};
  std::string names;
  for (Observer x : kObservers)
    if (observer_supported(s, x)) names += (names.empty() ? "" : ", ") + std::string(observer_option(x));
  return make_error(Errc::USAGE, "observer '{}' is not available for scheme {}; {} takes: {} (docs/schemes.md "
                    "#observers lists which scheme takes which)", observer_option(o), quant_scheme_name(s),
                    quant_scheme_name(s), names);
}

int SearchSpec::total_steps() const noexcept { return static_cast<int>(maxshrink * grid); }

int steps_run(const SearchSpec& spec, const StepMask& improved) noexcept {
  const int total = std::min(spec.total_steps(), kMaxSearchSteps);
  int no_improve = 0;
  for (int i = 0; i < total; ++i) {
    if (improved.test(static_cast<std::size_t>(i))) {
      no_improve = 0;
    } else if (++no_improve >= spec.patience) {
      return i + 1;
    }
  }
  return total;
}


std::optional<SearchSpec> search_spec(Observer o) noexcept {
  switch (o) {
    case Observer::MINMAX: return std::nullopt;
    case Observer::MEMORYLESS_MSE: return SearchSpec{};  // MemorylessMSEObserver.__init__ defaults
    case Observer::NVFP4_EXPANDED_MSE:                   // NVFP4ExpandedMSEObserver.__init__
      return SearchSpec{.expand = 1.8, .maxshrink = 1.0 - 0.8 / 1.8, .grid = 200.0, .patience = 1000, .norm = 2.4};
  }
  return std::nullopt;
}

unsigned default_workers(bool searched) noexcept {
  const unsigned cores = ThreadPool::default_threads();
  return searched ? std::min(2 * cores, ThreadPool::kMaxThreads) : cores;
}

}  // namespace fp4forge
