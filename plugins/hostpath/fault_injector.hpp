// mooring-hostpath: fault injection for tests. A JSON control file names RPCs to fail, delay,
// hang or crash on; it is re-read whenever it changes (checked on every RPC), so a test changes
// faults without restarting the plugin. Progress (uses of counted rules, load time of timed
// rules) is persisted so a crash-and-restart does not re-arm a rule that already fired.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mooring::hostpath {

struct FaultRule {
  std::string rpc;        // method name ("NodePublishVolume") or "*"
  std::string volume_id;  // optional filter
  std::optional<int> code;
  std::string message;
  std::int64_t count = -1;  // times the rule fires; -1 = unlimited
  std::optional<double> for_seconds;
  std::int64_t delay_ms = 0;
  bool hang = false;
  bool exit = false;
  int exit_code = 137;
  // NodeGetVolumeStats answers normally but with an abnormal VolumeCondition saying this.
  std::optional<std::string> abnormal;
};

struct FaultDecision {
  enum class Action { none, fail, hang, exit };
  Action action = Action::none;
  std::chrono::milliseconds delay{0};
  int code = 0;
  std::string message;
  int exit_code = 137;
  std::optional<std::string> abnormal;  // the call succeeds; its volume condition says this
  std::string describe() const;         // "delay", "fail", "hang", "exit", "abnormal", "delay+fail", or ""
};

// Parses the control file: {"rules":[...]} or a bare array of rules. Unknown keys are errors
// (a typo must not silently disable a fault).
bool parse_fault_rules(std::string_view text, std::vector<FaultRule>& out, std::string& error);

class FaultInjector {
 public:
  // progress_file: where fired counts survive restarts (per plugin process identity).
  FaultInjector(std::filesystem::path control_file, std::filesystem::path progress_file);

  // Re-reads the control file if it changed, then decides what to do with this call and
  // consumes one use of every rule that fired.
  FaultDecision decide(std::string_view rpc, std::string_view volume_id);

 private:
  void reload_if_changed();
  void save_progress();

  std::filesystem::path control_file_;
  std::filesystem::path progress_file_;
  std::mutex mu_;
  std::string fingerprint_;  // inode:size:mtime of the loaded file; "" = no file
  std::vector<FaultRule> rules_;
  std::vector<std::int64_t> used_;
  std::chrono::system_clock::time_point loaded_at_{};
};

}  // namespace mooring::hostpath
