// mooring-hostpath: command-line flags and their defaults. Parsing is pure (no I/O besides
// reading the environment the caller passes in) so it can be tested directly.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mooring::hostpath {

enum class Mode { controller, node, monolith };

struct Options {
  std::string endpoint;     // as given: unix:///path/csi.sock
  std::string socket_path;  // the filesystem path part of endpoint
  std::string node_id;      // CSI node id (NodeGetInfo); defaults to the host name
  std::string plugin_name = "hostpath.mooring.io";
  std::string vendor_version = MOORING_VERSION;  // GetPluginInfo; --vendor-version (upgrade tests)
  std::string data_dir = "/var/lib/mooring-hostpath";
  Mode mode = Mode::monolith;
  std::map<std::string, std::string> topology;  // --topology key=value, repeatable
  std::int64_t max_volumes = 0;                 // per node; 0 = unlimited
  // A file holding the max volumes, read again at every NodeGetInfo and ControllerPublish, so a
  // test lowers the node's limit at run time; overrides max_volumes while it holds a number.
  std::string max_volumes_file;
  // Node ids ControllerPublish accepts besides the nodes registered in the data dir.
  // "*" accepts every well-formed node id.
  std::vector<std::string> known_nodes;
  std::int64_t capacity_bytes = 0;   // total pool for GetCapacity; 0 = statvfs of data dir
  std::int64_t max_volume_size = 0;  // 0 = no per-volume limit
  std::int64_t default_volume_size = 1LL << 30;
  bool node_expansion_required = false;
  // NodeStageVolume records the volume as staged but mounts nothing at the staging path, and
  // NodePublishVolume bind-mounts the volume directory itself (the upstream host-path driver's
  // shape: the CSI spec lets a plugin stage nothing).
  bool stage_without_mount = false;
  // NodeGetCapabilities advertises VOLUME_MOUNT_GROUP and NodeStage/NodePublish give a writable
  // volume the group they name. Off (--no-volume-mount-group): a plugin that lacks it, as the
  // upstream csi-driver-host-path does, so the orchestrator's own fallback can be tested.
  bool volume_mount_group = true;
  // ControllerGetCapabilities advertises MODIFY_VOLUME and ControllerModifyVolume changes the
  // mutable parameters it honours (modify.cpp). Off (--no-modify-volume): a plugin without it.
  bool modify_volume = true;
  std::string fault_file;  // --fault-file or MOORING_FAULT_FILE
  std::string call_log;    // --call-log
  std::string log_level = "info";
  std::string log_format = "text";
};

struct ParseResult {
  enum class Outcome { run, exit_ok, exit_error } outcome = Outcome::run;
  Options options;
  std::string message;  // help/version text, or the error
};

// env: lookup for CSI_ENDPOINT / MOORING_FAULT_FILE; hostname: default node id.
ParseResult parse_options(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
                          const std::string& hostname);

std::string usage();
std::string_view to_string(Mode mode);

// Parses "1073741824", "512Mi", "10Gi", "1G", "100M", "4Ki"; false on anything else. Its own, not
// shared/domain/units.hpp: the plugin stands apart from the orchestrator's domain (docs/architecture.md).
bool parse_size(std::string_view text, std::int64_t& out);

// Ids that become file names (node ids, volume ids): [A-Za-z0-9._-]{1,128}, not "." or "..".
bool is_safe_id(std::string_view id);

}  // namespace mooring::hostpath
