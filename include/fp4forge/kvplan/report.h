#pragma once
/**
 * Renderings of a Plan: the --json document (schema "fp4forge.plan/1", docs/cli/plan.md), the text
 * report, and an SVG of each GPU's memory as a stacked bar (other tenants, then per seat weights,
 * KV and overhead, then free). Pure functions of the plan.
 */
#include <string>

#include <nlohmann/json.hpp>

#include "fp4forge/kvplan/placement.h"

namespace fp4forge::kvplan {

inline constexpr const char* kPlanSchema = "fp4forge.plan/1";

nlohmann::ordered_json to_json(const Plan& plan);
std::string to_text(const Plan& plan);
std::string to_svg(const Plan& plan);

/** A gpu_memory_utilization as vLLM takes it: "0.57", "0.9", "0.5731" (no trailing zeros). */
std::string format_util(double util);

}  // namespace fp4forge::kvplan
