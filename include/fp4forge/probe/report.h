#pragma once
/**
 * Rendering of probe and gateway results for the CLI: the stable --json documents (schemas in
 * docs/cli/probe.md and docs/cli/gateway.md) and the human-readable text. No logic beyond formatting.
 */
#include <string>

#include <nlohmann/json.hpp>

#include "fp4forge/probe/gateway.h"
#include "fp4forge/probe/probe.h"

namespace fp4forge::probe {

/** {"ok", "url", "model", "unreachable", "summary": {pass, fail, skip}, "checks": [...]} */
nlohmann::ordered_json report_json(const ProbeReport& r);
/** One line per check ("PASS  prose  ok  1.23s  detail"), then a summary line. */
std::string report_text(const ProbeReport& r);
/** 0 no check failed, 4 nothing could be reached, 1 otherwise. */
int report_exit_code(const ProbeReport& r);

nlohmann::ordered_json show_json(const GatewayShow& s);
std::string show_text(const GatewayShow& s);
/** `command` names the operation ("swap", "rollback", "retire"). */
nlohmann::ordered_json edit_json(const std::string& command, const std::string& config, const EditResult& e);
std::string edit_text(const std::string& command, const std::string& config, const EditResult& e);

}  // namespace fp4forge::probe
