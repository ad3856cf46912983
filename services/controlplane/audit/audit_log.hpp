// Audit room: one JSON line per state-changing request, REST or agent gRPC, appended to
// <data-dir>/audit.log (and --audit-log FILE): who (token accessor or node id), from where, what
// (method, path or RPC, namespace, object id) and the answer. Never a body, a header, a query
// string or a secret: only those fields. Nomad keeps this for its Enterprise edition.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "shared/domain/result.hpp"

namespace mooring::controlplane::audit {

struct Entry {
  std::string transport;                 // "http" | "grpc"
  std::string actor_type = "anonymous";  // "token" | "node" | "anonymous"
  std::string actor;                     // token AccessorID or node id; empty when anonymous
  std::string remote;                    // "ip:port" (gRPC: its peer string)
  std::string via;                       // forwarded by a standby: its advertised URL (the caller is `remote`)
  std::string method;                    // HTTP method, or the RPC's name
  std::string path;                      // HTTP path without the query; empty for gRPC
  std::string ns = "default";
  std::string object;   // the volume, allocation or node id the request names, if any
  unsigned status = 0;  // HTTP status, or the gRPC status code
};

// The line written for an entry (with its time), without the newline.
std::string to_line(const Entry& entry, const std::string& time);

class AuditLog {
 public:
  // Opens (creating 0600) every file for appending; an error names the file.
  static domain::Expected<std::unique_ptr<AuditLog>> open(const std::vector<std::filesystem::path>& files);
  ~AuditLog();
  AuditLog(const AuditLog&) = delete;
  AuditLog& operator=(const AuditLog&) = delete;

  // Appends the entry to every file as one write(2) of one line (O_APPEND: lines never
  // interleave). A failed write is logged once per file and does not fail the request.
  void record(const Entry& entry);

 private:
  struct Sink {
    std::filesystem::path path;
    int fd = -1;
    bool failing = false;
  };
  explicit AuditLog(std::vector<Sink> sinks) : sinks_(std::move(sinks)) {}
  std::vector<Sink> sinks_;
};

}  // namespace mooring::controlplane::audit
