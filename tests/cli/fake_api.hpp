// Test support for the CLI: a tiny control plane stand-in. A Beast server on 127.0.0.1 with an
// OS-chosen port that answers canned JSON per "METHOD target" and records every request; over
// HTTPS when given a certificate and key.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace mooring::cli {

struct RecordedRequest {
  std::string method;
  std::string target;
  std::string body;
  std::map<std::string, std::string> headers;  // lower-case names
};

struct CannedResponse {
  unsigned status = 200;
  std::string body;
  std::map<std::string, std::string> headers;
};

struct FakeApiTls {
  std::string cert_file;
  std::string key_file;
};

class FakeApi {
 public:
  FakeApi();
  explicit FakeApi(const FakeApiTls& tls);
  ~FakeApi();
  FakeApi(const FakeApi&) = delete;
  FakeApi& operator=(const FakeApi&) = delete;

  // Answer `method target` (target with its query, exactly as sent) with `response`. Anything
  // else gets 404 {"Error":"no such endpoint: ..."} like the real API.
  void on(const std::string& method, const std::string& target, CannedResponse response);
  std::string url() const;
  std::vector<RecordedRequest> requests() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mooring::cli
