#pragma once
// Shared by the gateway tests: a deployment written without the probe.
#include <string>

namespace fp4forge::gateway::gtest_util {

/** A deployment written without the probe (--no-probe): what is tested is the write. Options: SwapOptions or
 * AddOptions. */
template <class Options>
Options unprobed(const std::string& alias, const std::string& model) {
  Options o;
  o.alias = alias;
  o.backend_model = model;
  o.api_base = "http://127.0.0.1:9/v1";
  o.probe = false;
  return o;
}

}  // namespace fp4forge::gateway::gtest_util
