// mooring-hostpath: the call log tests read to assert the order of plugin calls: one JSON line
// per RPC, appended with a single write(2) so concurrent calls never interleave within a line.
#pragma once

#include <cstdint>
#include <filesystem>
#include <mutex>
#include <string>

namespace mooring::hostpath {

struct CallRecord {
  std::string rpc;
  std::string volume_id;
  std::string node_id;
  std::string path;  // target/staging/volume path the call named, if any
  int code = 0;
  std::string message;
  std::int64_t duration_ms = 0;
  std::string fault;  // what the fault injector did: "", "delay", "fail", "hang", "exit", "delay+fail"...
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
