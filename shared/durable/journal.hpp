// An append-only journal of records that follows a checkpoint (a durable slot file).
//
// A store whose whole state is large and whose changes are small (the hostpath controller's
// catalogue: hundreds of KiB, a publish changes one record) writes each change as one record
// here, flushed with one fdatasync, and writes the whole state to its checkpoint only now and
// then (compaction), after which the journal restarts empty. Work per change then does not grow
// with the size of the state.
//
// File: "mooring-journal 1 <checkpoint generation>\n", then records, each
// "r <length> <hash64 hex>\n" + content + "\n". The header names the checkpoint generation the
// records follow: a journal naming another generation (a crash after a compaction's checkpoint
// and before the journal's restart) holds nothing for the current checkpoint, since that
// checkpoint already contains its records. A record that fails its length or checksum (a crash
// mid-append) ends the journal; the next append overwrites it.
//
// A Journal object remembers how far it has read, so a process sharing the file with others
// reads only what they appended since. It does no locking: callers hold a lock around
// read_new/append/restart (the hostpath plugin's flock).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace mooring::durable {

class Journal {
 public:
  explicit Journal(std::filesystem::path path);
  ~Journal();
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  // Appends to `records` the records written since the last call (all of them after rewind()
  // or when `generation` differs from the last call's). A journal that is missing, or follows
  // another checkpoint generation, holds none. A torn last record is left out.
  std::error_code read_new(std::uint64_t generation, std::vector<std::string>& records);
  // The next read_new starts from the first record.
  void rewind() { end_ = 0; }

  // Appends one record and flushes it; the journal must have been read up to its end (read_new
  // of the checkpoint generation the record follows) under the same lock. A torn tail is cut
  // off first, and a journal following another generation is restarted first.
  std::error_code append(std::string_view record);

  // Empties the journal and makes it follow checkpoint `generation`; call it once the
  // checkpoint holding every record is durable.
  std::error_code restart(std::uint64_t generation);

  // Bytes of valid records (the header excluded), as far as read or written here.
  std::uint64_t record_bytes() const { return end_ > header_size_ ? end_ - header_size_ : 0; }
  // Bytes after the last whole record at the last read or write: a torn tail (a crash
  // mid-append), left out of read_new and cut off by the next append. 0 when the file does not
  // follow the generation read (its bytes are another checkpoint's, not torn).
  std::uint64_t dropped_bytes() const { return follows_ && file_size_ > end_ ? file_size_ - end_ : 0; }

 private:
  std::error_code open_file(bool create);

  std::filesystem::path path_;
  int fd_ = -1;
  std::uint64_t generation_ = 0;  // the checkpoint generation of the last read_new
  std::uint64_t end_ = 0;         // offset after the last valid record read or written; 0: not read
  std::uint64_t header_size_ = 0;
  std::uint64_t file_size_ = 0;  // the file's size at the last read or write
  bool follows_ = false;         // the file's header names generation_
};

}  // namespace mooring::durable
