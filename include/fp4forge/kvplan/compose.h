#pragma once
/**
 * From plan to running seats: per placed seat a docker compose stack for vLLM's OpenAI server
 * (the image of the planned vLLM version, model mount, served model name, port, GPUs pinned via
 * deploy.resources.reservations.devices, the engine flags that realise the plan, the family's tool-call and
 * reasoning parsers, the seat's vllm_args, restart policy, healthcheck) and the matching LiteLLM `model_list`
 * entry. YAML is emitted with yaml-cpp; every string a YAML 1.1 reader would retype is double-quoted
 * (util/yaml_scalar.h). A seat vLLM could not start (serving.h blockers) refuses the whole stack.
 *
 * Files: DIR/<seat>/compose.yaml, DIR/<seat>/litellm.yaml, and DIR/litellm.yaml (every emitted seat).
 * Existing files are never overwritten without `force` (checked for all files before writing any);
 * every file is written atomically (fs::write_file_atomic).
 */
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "fp4forge/core/error.h"
#include "fp4forge/kvplan/placement.h"
#include "fp4forge/kvplan/serving.h"

namespace fp4forge::kvplan {

struct ComposeOptions {
  std::string image;                                    ///< --image: every seat's image ("" = the planned version's)
  std::string image_repo{kVllmImageRepo};               ///< --image-repo: repository of the planned versions' tags
  std::string api_host = "localhost";                   ///< host LiteLLM reaches the seats on
  bool force = false;                                   ///< overwrite existing files
};

/** The image of a seat's stack: --image, else REPO:vX.Y.Z of its vllm_version (serving.h vllm_image_tag). */
std::string seat_image(const Plan& plan, std::size_t seat, const ComposeOptions& opts);

/** True for a host LiteLLM in another container or on another machine cannot reach the seats on: localhost,
 * 127.0.0.0/8, ::1 (the note plan adds when --api-host is left at localhost). */
bool loopback_host(std::string_view host);

/** The docker compose project name of a seat: "fp4forge-" + the seat name lower-cased, every character
 * outside [a-z0-9_-] as '-' (compose accepts only ^[a-z0-9][a-z0-9_-]*$; the served name keeps the seat's
 * own spelling). */
std::string compose_project_name(std::string_view seat);

/** The vLLM server arguments that realise the seat's plan (after the image's `vllm serve`). */
std::vector<std::string> vllm_args(const Plan& plan, std::size_t seat);
/** The compose document of one placed seat. */
std::string compose_yaml(const Plan& plan, std::size_t seat, const ComposeOptions& opts);
/** A LiteLLM config fragment `model_list:` with one entry per listed seat. */
std::string litellm_yaml(const Plan& plan, const std::vector<std::size_t>& seats, const ComposeOptions& opts);

/** A seat whose stack vLLM could not start (serving.h): --emit-compose writes nothing. */
struct ComposeRefusal {
  std::string seat;
  StartBlocker blocker;
};

struct EmittedFiles {
  std::vector<std::filesystem::path> files;  ///< written, in order
  std::vector<std::string> skipped_seats;    ///< not fitting: no stack written
  std::vector<std::string> stopped_seats;    ///< stopping for another seat (replaces=): no stack written
  std::vector<ComposeRefusal> refused;       ///< non-empty: nothing was written (every blocker of every seat)
  /** Stacks an earlier plan wrote into DIR for seats this plan does not have (DIR/NAME/compose.yaml with plan's
   * header): left in place, said (issue 55 tryout H: --force with fewer seats left one silently). */
  std::vector<std::filesystem::path> stale;
};

/** Writes the files (see above), or none when a seat that fits cannot start (`refused`: every blocker of every
 * such seat); none either when no seat fits (each is in `skipped_seats`). USAGE when a file exists and !force or no
 * GPU is given; IO on write failures. */
Result<EmittedFiles> emit_compose(const Plan& plan, const std::filesystem::path& dir, const ComposeOptions& opts);

}  // namespace fp4forge::kvplan
