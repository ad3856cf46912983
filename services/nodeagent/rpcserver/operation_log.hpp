// The operation cache's record on disk (the agent's data dir), so that a controller call the
// plugin already ran is not run again after the agent restarts. Two records per call: its intent,
// flushed before the call reaches the plugin, and its result, flushed before the caller hears it.
// A restart thus finds, for every id it was sent, either a result (answer the resend from it),
// an intent alone (the agent died mid-call: the outcome is unknown), or nothing (never sent).
//
// Files: `<file>` a checkpoint (durable slots, durable_file.hpp) of the live records, and
// `<file>.journal` the records appended since (durable/journal.hpp, one fdatasync each).
// compact() writes the live records as the new checkpoint and restarts the journal (the cache
// does at start and once the journal holds more than 1,024 + twice the live records).
// Synchronous and single-threaded: the cache calls it from its own worker thread (and from its
// constructor, before any call), never from the executor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace mooring::durable {
class Journal;
}

namespace mooring::nodeagent {

struct OperationRecord {
  enum class Kind { intent, result };
  Kind kind = Kind::intent;
  std::string key;
  std::uint64_t fingerprint = 0;
  std::int64_t at_ms = 0;  // wall clock (ms since the epoch): ages survive a restart, steady time does not
  int code = 0;            // result: the grpc::StatusCode
  std::string message;     // result: the status message
  std::string response;    // result: the serialized response

  bool operator==(const OperationRecord&) const = default;
};

// One record as bytes (length-prefixed, binary-safe), and back. decode() reads one record from
// the front of `text` and advances it; false on bytes that are not a record.
std::string encode(const OperationRecord& record);
bool decode(std::string_view& text, OperationRecord& record);

class OperationLog {
 public:
  explicit OperationLog(std::filesystem::path file);
  ~OperationLog();
  OperationLog(const OperationLog&) = delete;
  OperationLog& operator=(const OperationLog&) = delete;

  // The checkpoint's records then the journal's, in the order written. A torn or corrupt file
  // never stops the agent: `warnings` names the file and what was dropped; a checkpoint that
  // cannot be read makes the whole record start empty (both files are reset, so nothing of the
  // bad one comes back later).
  std::vector<OperationRecord> load(std::vector<std::string>& warnings);

  // One record, flushed (fdatasync) before it returns.
  std::error_code append(const OperationRecord& record);
  // Writes `live` as the checkpoint, then empties the journal. A crash between the two leaves a
  // journal naming the old checkpoint generation, which load() ignores (its records are in `live`).
  std::error_code compact(const std::vector<OperationRecord>& live);

  const std::filesystem::path& file() const { return file_; }
  std::filesystem::path journal_file() const;

 private:
  std::filesystem::path file_;
  std::unique_ptr<durable::Journal> journal_;
  std::uint64_t generation_ = 0;  // of the checkpoint the journal follows
};

}  // namespace mooring::nodeagent
