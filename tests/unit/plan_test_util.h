#pragma once
// make_plan's input from a fixture's config.json, index and NAME.tensors.json (no shard opened): the plan tests'
// one reader of fixtures.
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "fp4forge/core/dtype.h"
#include "fp4forge/quantize/plan.h"
#include "test_util.h"

namespace fp4forge::quant::ptest {

using testutil::slurp;

/** The planner input of fixture `name` (tests/data/NAME), as plan_input() builds it from an opened checkpoint. */
inline PlanInput fixture(const std::string& name) {
  const std::string& kData = testutil::kData;
  PlanInput in;
  in.config = nlohmann::ordered_json::parse(slurp(kData + "/" + name + "/config.json"));
  const auto idx = nlohmann::json::parse(slurp(kData + "/" + name + "/model.safetensors.index.json"));
  in.index_file = "model.safetensors.index.json";
  std::map<std::string, std::size_t> shard_of;
  for (const auto& [t, shard] : idx["weight_map"].items()) {
    const std::string s = shard.get<std::string>();
    if (!shard_of.count(s)) shard_of[s] = 0;
  }
  for (auto& [s, i] : shard_of) {
    i = in.shard_names.size();
    in.shard_names.push_back(s);
  }
  in.shard_metadata.assign(in.shard_names.size(), {{"format", "pt"}});
  const auto tj = nlohmann::json::parse(slurp(kData + "/" + name + ".tensors.json"));
  for (const auto& [t, v] : tj.items()) {
    SourceTensor st;
    st.name = t;
    st.shard = shard_of.at(v[0].get<std::string>());
    st.dtype = *parse_dtype(v[1].get<std::string>());
    st.shape = v[2].get<std::vector<std::uint64_t>>();
    in.tensors.push_back(std::move(st));
  }
  return in;
}

}  // namespace fp4forge::quant::ptest
