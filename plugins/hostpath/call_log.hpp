// mooring-hostpath: the call log tests read to assert the order of plugin calls and what reached
// the plugin: one JSON line per RPC, appended with a single write(2) so concurrent calls never
// interleave within a line.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>

namespace mooring::hostpath {

using StringMap = std::map<std::string, std::string>;

// What a request carried besides ids and paths, so a test can check that parameters, context and
// secrets reached the plugin. Secrets only as a digest (secrets_digest): never their values.
struct RequestDetail {
  StringMap parameters;        // CreateVolume, CreateSnapshot, ValidateVolumeCapabilities; ControllerModifyVolume's
                               // mutable parameters
  StringMap volume_context;    // ControllerPublish, NodeStage, NodePublish, ValidateVolumeCapabilities
  StringMap publish_context;   // NodeStage, NodePublish
  std::string secrets_sha256;  // "" when the request carried no secrets
  std::string content_source;  // CreateVolume: "snapshot:<id>" or "volume:<id>", "" for an empty volume
};

// Hex SHA-256 of the secrets as "key=value\n" lines sorted by key ("" for none): the same secrets
// give the same digest whatever order the request's map iterates in.
std::string secrets_digest(const StringMap& secrets);

struct CallRecord {
  std::string rpc;
  std::string volume_id;
  std::string node_id;
  std::string path;  // target/staging/volume path the call named, if any
  int code = 0;
  std::string message;
  std::int64_t duration_ms = 0;
  std::string fault;  // what the fault injector did: "", "delay", "fail", "hang", "exit", "delay+fail"...
  RequestDetail detail = {};
  // How long the call was held before this copy held the node's lock (takeover.hpp); the
  // entry carries it only when not 0.
  std::int64_t held_ms = 0;
  // CLOCK_MONOTONIC (steady_clock) when the call reached the plugin and when its answer was
  // decided: one clock for every process of the host, so a history checker can order plugin
  // calls against other processes' records (tests/chaos).
  std::int64_t start_mono_ns = 0;
  std::int64_t end_mono_ns = 0;
};

class CallLog {
 public:
  explicit CallLog(std::filesystem::path file);
  ~CallLog();
  CallLog(const CallLog&) = delete;
  CallLog& operator=(const CallLog&) = delete;

  bool ok() const { return fd_ >= 0; }
  void append(const CallRecord& record);

 private:
  std::filesystem::path file_;
  int fd_ = -1;
  std::mutex mu_;
};

}  // namespace mooring::hostpath
