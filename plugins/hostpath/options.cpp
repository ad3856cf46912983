#include "plugins/hostpath/options.hpp"

#include <charconv>
#include <limits>
#include <sstream>

namespace mooring::hostpath {
namespace {

constexpr std::string_view kUnixScheme = "unix://";

bool parse_int(std::string_view text, std::int64_t& out) {
  if (text.empty()) return false;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc{} && ptr == text.data() + text.size();
}

}  // namespace

std::string usage() {
  return R"(mooring-hostpath: Mooring's CSI plugin (directories and bind mounts), with fault injection for tests.

Usage: mooring-hostpath [flags]
  --endpoint unix:///path/csi.sock   listen socket (default: $CSI_ENDPOINT)
  --node-id ID                       CSI node id reported by NodeGetInfo (default: host name)
  --plugin-name NAME                 CSI plugin name (default: hostpath.mooring.io)
  --vendor-version V                 the vendor_version GetPluginInfo reports (default: the build's)
  --data-dir DIR                     volumes, snapshots and state (default: /var/lib/mooring-hostpath)
  --mode controller|node|monolith    which CSI services to serve (default: monolith)
  --topology key=value               node topology segment; repeatable
  --max-volumes N                    max volumes per node, reported and enforced (default: 0 = unlimited)
  --max-volumes-file PATH            a file holding the max volumes, read again at every NodeGetInfo and
                                     ControllerPublish (lowers the limit at run time); overrides --max-volumes
  --known-nodes a,b,...              node ids ControllerPublish accepts besides nodes registered in the
                                     data dir; "*" accepts any node id; repeatable
  --capacity SIZE                    total capacity for GetCapacity/CreateVolume (default: free space)
  --max-volume-size SIZE             largest volume (default: no limit)
  --default-volume-size SIZE         size when CreateVolume gives no range (default: 1Gi)
  --node-expansion-required          ControllerExpandVolume answers node_expansion_required=true
  --stage-without-mount              NodeStageVolume mounts nothing at the staging path (only records it);
                                     NodePublishVolume bind-mounts the volume directory itself
  --no-volume-mount-group            do not advertise VOLUME_MOUNT_GROUP (a volume_mount_group in a
                                     request is then INVALID_ARGUMENT), as plugins that lack it
  --no-modify-volume                 do not advertise MODIFY_VOLUME (ControllerModifyVolume is then
                                     UNIMPLEMENTED and mutable_parameters INVALID_ARGUMENT)
  --fault-file PATH                  fault injection control file (default: $MOORING_FAULT_FILE; off if unset)
  --call-log PATH                    append one JSON line per RPC received
  --log-level debug|info|warn|error  (default: info)
  --log-format text|json             (default: text)
  --version                          print the version and exit
  --help                             print this help and exit
SIZE accepts plain bytes or K/M/G/T (powers of 1000) and Ki/Mi/Gi/Ti (powers of 1024).
)";
}

std::string_view to_string(Mode mode) {
  switch (mode) {
    case Mode::controller: return "controller";
    case Mode::node: return "node";
    case Mode::monolith: return "monolith";
  }
  return "monolith";
}

bool parse_size(std::string_view text, std::int64_t& out) {
  static const std::pair<std::string_view, std::int64_t> kSuffixes[] = {
      {"Ki", 1LL << 10}, {"Mi", 1LL << 20}, {"Gi", 1LL << 30},   {"Ti", 1LL << 40},
      {"K", 1000LL},     {"M", 1000000LL},  {"G", 1000000000LL}, {"T", 1000000000000LL},
  };
  std::int64_t mult = 1;
  for (const auto& [suffix, m] : kSuffixes) {
    if (text.size() > suffix.size() && text.ends_with(suffix)) {
      text.remove_suffix(suffix.size());
      mult = m;
      break;
    }
  }
  std::int64_t n = 0;
  if (!parse_int(text, n) || n < 0) return false;
  if (n > std::numeric_limits<std::int64_t>::max() / mult) return false;
  out = n * mult;
  return true;
}

bool is_safe_id(std::string_view id) {
  if (id.empty() || id.size() > 128 || id == "." || id == "..") return false;
  for (const unsigned char c : id) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

namespace {

// A flag that takes a value, read by `take` (after "=" or the next argument). The error, or ""
// once applied.
template <class Take>
std::string apply_value_flag(Options& o, const std::string& flag, const std::string& arg, Take& take) {
  auto take_size = [&](std::int64_t& dst) -> bool {
    std::string v;
    return take(v) && parse_size(v, dst);
  };
  std::string v;
  if (flag == "--endpoint") {
    if (!take(o.endpoint)) return "--endpoint needs a value";
  } else if (flag == "--node-id") {
    if (!take(o.node_id)) return "--node-id needs a value";
  } else if (flag == "--plugin-name") {
    if (!take(o.plugin_name) || o.plugin_name.empty()) return "--plugin-name needs a value";
  } else if (flag == "--vendor-version") {
    if (!take(o.vendor_version) || o.vendor_version.empty()) return "--vendor-version needs a value";
  } else if (flag == "--data-dir") {
    if (!take(o.data_dir) || o.data_dir.empty()) return "--data-dir needs a value";
  } else if (flag == "--mode") {
    if (!take(v)) return "--mode needs a value";
    if (v == "controller")
      o.mode = Mode::controller;
    else if (v == "node")
      o.mode = Mode::node;
    else if (v == "monolith")
      o.mode = Mode::monolith;
    else
      return "--mode must be controller, node or monolith, got '" + v + "'";
  } else if (flag == "--topology") {
    if (!take(v)) return "--topology needs key=value";
    const auto eq = v.find('=');
    if (eq == std::string::npos || eq == 0) return "--topology needs key=value, got '" + v + "'";
    o.topology[v.substr(0, eq)] = v.substr(eq + 1);
  } else if (flag == "--max-volumes") {
    if (!take(v) || !parse_int(v, o.max_volumes) || o.max_volumes < 0)
      return "--max-volumes needs a non-negative integer";
  } else if (flag == "--max-volumes-file") {
    if (!take(v) || v.empty()) return "--max-volumes-file needs a path";
    o.max_volumes_file = v;
  } else if (flag == "--known-nodes") {
    if (!take(v)) return "--known-nodes needs a value";
    std::stringstream ss(v);
    for (std::string item; std::getline(ss, item, ',');) {
      if (item.empty()) continue;
      if (item != "*" && !is_safe_id(item)) return "--known-nodes: invalid node id '" + item + "'";
      o.known_nodes.push_back(item);
    }
  } else if (flag == "--capacity") {
    if (!take_size(o.capacity_bytes)) return "--capacity needs a size";
  } else if (flag == "--max-volume-size") {
    if (!take_size(o.max_volume_size)) return "--max-volume-size needs a size";
  } else if (flag == "--default-volume-size") {
    if (!take_size(o.default_volume_size) || o.default_volume_size <= 0)
      return "--default-volume-size needs a positive size";
  } else if (flag == "--fault-file") {
    if (!take(o.fault_file)) return "--fault-file needs a path";
  } else if (flag == "--call-log") {
    if (!take(o.call_log)) return "--call-log needs a path";
  } else if (flag == "--log-level") {
    if (!take(o.log_level)) return "--log-level needs a value";
  } else if (flag == "--log-format") {
    if (!take(o.log_format)) return "--log-format needs a value";
  } else {
    return "unknown flag '" + arg + "' (see --help)";
  }
  return {};
}

// What the flags say together: a unix endpoint whose path fits a socket, a node id that is safe
// as a directory name. The error, or "".
std::string check_options(Options& o) {
  if (o.endpoint.empty()) return "no endpoint: pass --endpoint unix:///path/csi.sock or set CSI_ENDPOINT";
  if (!o.endpoint.starts_with(kUnixScheme)) return "endpoint must be unix:///path, got '" + o.endpoint + "'";
  o.socket_path = o.endpoint.substr(kUnixScheme.size());
  if (o.socket_path.empty() || o.socket_path.front() != '/')
    return "endpoint must name an absolute socket path, got '" + o.endpoint + "'";
  // 108 bytes for a unix socket path, less the suffix of the private path it is bound on first.
  if (o.socket_path.size() > 87)
    return "socket path too long for a unix socket (at most 87 characters): " + o.socket_path;
  if (o.mode != Mode::controller && !is_safe_id(o.node_id))
    return "--node-id must match [A-Za-z0-9._-]{1,128}, got '" + o.node_id + "'";
  if (o.max_volume_size > 0 && o.default_volume_size > o.max_volume_size) o.default_volume_size = o.max_volume_size;
  return {};
}

}  // namespace

ParseResult parse_options(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
                          const std::string& hostname) {
  ParseResult r;
  Options& o = r.options;
  auto fail = [&r](std::string msg) {
    r.outcome = ParseResult::Outcome::exit_error;
    r.message = std::move(msg);
    return r;
  };
  if (auto it = env.find("CSI_ENDPOINT"); it != env.end()) o.endpoint = it->second;
  if (auto it = env.find("MOORING_FAULT_FILE"); it != env.end()) o.fault_file = it->second;
  o.node_id = hostname;

  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    std::string value;
    bool has_inline = false;
    if (const auto eq = flag.find('='); flag.starts_with("--") && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag = flag.substr(0, eq);
      has_inline = true;
    }
    auto take = [&](std::string& dst) -> bool {
      if (has_inline) {
        dst = value;
        return true;
      }
      if (i + 1 >= args.size()) return false;
      dst = args[++i];
      return true;
    };

    if (flag == "--help" || flag == "-h") {
      r.outcome = ParseResult::Outcome::exit_ok;
      r.message = usage();
      return r;
    }
    if (flag == "--version") {
      r.outcome = ParseResult::Outcome::exit_ok;
      r.message = std::string("mooring-hostpath ") + MOORING_VERSION + "\n";
      return r;
    }
    if (flag == "--node-expansion-required") {
      o.node_expansion_required = true;
      continue;
    }
    if (flag == "--stage-without-mount") {
      o.stage_without_mount = true;
      continue;
    }
    if (flag == "--no-volume-mount-group") {
      o.volume_mount_group = false;
      continue;
    }
    if (flag == "--no-modify-volume") {
      o.modify_volume = false;
      continue;
    }
    if (auto error = apply_value_flag(o, flag, args[i], take); !error.empty()) return fail(std::move(error));
  }

  if (auto error = check_options(o); !error.empty()) return fail(std::move(error));
  return r;
}

}  // namespace mooring::hostpath
