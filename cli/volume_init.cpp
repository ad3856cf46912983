// `mooring volume init`: writes a commented example volume specification to start from, as
// `nomad volume init` does: the create form (the plugin makes the volume) or, with -register,
// the register form (a volume that exists in the storage). The files are JSON with // comments,
// which read_json_file accepts; the e2e CLI test sends both to a real control plane.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include "cli/commands.hpp"
#include "cli/context.hpp"

namespace mooring::cli {

namespace {

// What both forms share after their own opening lines.
constexpr std::string_view kCommonFields =
    R"(  // The volume's ID in Mooring, unique in its namespace: an allocation names it as a volume's
  // "Source". 1-128 characters of letters, digits, '.', '_' and '-'.
  "ID": "data",
  // A human-readable name.
  "Name": "data",
  // The CSI plugin that serves it (`mooring plugin status` lists the plugins).
  "PluginID": "hostpath",
  // How allocations may use it; at least one. AccessMode: single-node-writer,
  // single-node-reader-only, multi-node-reader-only, multi-node-single-writer or
  // multi-node-multi-writer. AttachmentMode: file-system (a mounted directory) or block-device
  // (the device itself).
  "RequestedCapabilities": [
    {"AccessMode": "single-node-writer", "AttachmentMode": "file-system"},
    {"AccessMode": "single-node-reader-only", "AttachmentMode": "file-system"}
  ],
  // For file-system volumes: the file system and mount flags the plugin uses (empty: its
  // defaults). Mount flags read back as ["[REDACTED]"]: they may hold credentials.
  "MountOptions": {"FSType": "", "MountFlags": []},
)";

constexpr std::string_view kCreateHead =
    R"(// A volume for `mooring volume create FILE`: the plugin's controller creates it
// (CreateVolume), then Mooring registers it under ID. Written by `mooring volume init`; edit it
// to fit. Lines starting with // are comments: mooring reads them, strict JSON tools do not.
// `mooring volume delete ID` deletes the volume in the storage again.
{
)";

constexpr std::string_view kCreateTail =
    R"(  // Its size in bytes: at least RequestedCapacityMin, at most RequestedCapacityMax (0: no upper
  // limit). `mooring volume expand ID SIZE` grows it later.
  "RequestedCapacityMin": 104857600,
  "RequestedCapacityMax": 1073741824,
  // Passed to the plugin's CreateVolume as they are: see the plugin's documentation.
  "Parameters": {},
  // Where the volume must be reachable, when the plugin knows topology, e.g.
  // "RequestedTopologies": {"Required": [{"Segments": {"zone": "a"}}]},
  // To start from a snapshot (`mooring volume snapshot list`) or as a copy of another volume:
  // "SnapshotID": "SNAPSHOT_ID",
  // "CloneID": "VOLUME_ID",
  // Secrets for the node calls (NodeStage, NodePublish), sealed in the state and never shown.
  // CreateVolume's own secrets come from the -secrets flag.
  "Secrets": {}
}
)";

constexpr std::string_view kRegisterHead =
    R"(// A volume that already exists in the storage, for `mooring volume register FILE`: Mooring
// records it under ID and never creates or deletes it (`mooring volume deregister ID` forgets
// it). The plugin's controller checks it first (ValidateVolumeCapabilities). Written by
// `mooring volume init -register`; edit it to fit. Lines starting with // are comments: mooring
// reads them, strict JSON tools do not. Registering an ID again updates the volume.
{
)";

constexpr std::string_view kRegisterTail =
    R"(  // The plugin's own id of the volume (CSI volume_id), as the storage knows it: replace it.
  "ExternalID": "EXTERNAL_ID",
  // The volume_context the storage gave the volume, if any: passed on to the node calls.
  "Context": {},
  // Passed to the plugin as they are: see the plugin's documentation.
  "Parameters": {},
  // Secrets for the plugin's calls on this volume, sealed in the state and never shown.
  "Secrets": {}
}
)";

// Creates `path` with `content`, never replacing a file (O_EXCL): "" or why not.
std::string write_new_file(const std::string& path, const std::string& content) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    return errno == EEXIST ? path + " already exists; remove it or name another file (mooring volume init FILE)"
                           : "cannot create " + path + ": " + std::strerror(errno);
  std::size_t done = 0;
  while (done < content.size()) {
    const auto n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      ::unlink(path.c_str());
      return "cannot write " + path + ": " + why;
    }
    done += static_cast<std::size_t>(n);
  }
  return ::close(fd) == 0 ? "" : "cannot write " + path + ": " + std::strerror(errno);
}

int volume_init(Context& ctx, const Invocation& inv) {
  const bool reg = inv.enabled("register");
  const std::string path = inv.args.empty() ? "volume.json" : inv.args[0];
  std::string content(reg ? kRegisterHead : kCreateHead);
  content += kCommonFields;
  content += reg ? kRegisterTail : kCreateTail;
  if (auto error = write_new_file(path, content); !error.empty()) return ctx.fail(error);
  ctx.out() << "Example volume specification written to " << path << "; edit it, then run `mooring volume "
            << (reg ? "register " : "create ") << path << "`\n";
  return kExitOk;
}

}  // namespace

CommandSpec volume_init_command() {
  return {
      .words = {"volume", "init"},
      .arguments = "[FILE]",
      .min_args = 0,
      .max_args = 1,
      .flags = {{"register", false, "", "the register form: a volume that exists in the storage (with ExternalID)"}},
      .summary = "Write an example volume specification to start from (volume.json)",
      .help =
          "The create form (for `mooring volume create`) by default, the register form with -register;\n"
          "every field explained in a comment. An existing FILE is never replaced.",
      .run = volume_init};
}

}  // namespace mooring::cli
