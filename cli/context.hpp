// CLI room: what every command gets — the API client, the global options, the output streams —
// and the one way to call the API: an HTTP error prints the API's {"Error"} message, an
// unreachable control plane prints its address; both make the command exit 1.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <variant>

#include <nlohmann/json.hpp>

#include "cli/args.hpp"
#include "cli/http_client.hpp"

namespace mooring::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitError = 1;
inline constexpr int kExitUsage = 2;

inline constexpr const char* kSecretsHeader = "X-Mooring-CSI-Secrets";
inline constexpr const char* kTokenHeader = "X-Mooring-Token";

struct ApiReply {
  nlohmann::json body;      // null for an empty body
  std::uint64_t index = 0;  // X-Mooring-Index, 0 when absent
};

// A call that failed: the HTTP status (0 when no answer came) and the sentence call() prints.
struct CallFailure {
  unsigned status = 0;
  std::string message;
};

struct CallOptions {
  bool send_secrets = false;  // add the -secrets header (create, delete, snapshot)
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
  bool quiet = false;  // do not print the error (the caller reports it in its own words)
};

class Context {
 public:
  Context(HttpClient client, GlobalOptions globals, std::map<std::string, std::string> secrets, std::ostream& out,
          std::ostream& err)
      : client_(std::move(client)), globals_(std::move(globals)), secrets_(std::move(secrets)), out_(out), err_(err) {}

  std::ostream& out() { return out_; }
  std::ostream& err() { return err_; }
  bool json() const { return globals_.json; }
  // The list spans namespaces (-namespace '*'): tables then show a Namespace column.
  bool every_namespace() const { return globals_.ns == "*"; }
  const std::string& address() const { return client_.endpoint().url; }

  // The API's answer, or nullopt after printing why not. `error_message` (when given) receives
  // the message instead of the default "Error: ..." line when `options.quiet`.
  std::optional<ApiReply> call(const std::string& method, const std::string& target,
                               const std::optional<nlohmann::json>& body = std::nullopt, CallOptions options = {},
                               std::string* error_message = nullptr);

  // The API's answer or why not, printing nothing: for a caller that acts on the failure (a 404
  // that starts a prefix search, a 409 that names the command to use instead).
  std::variant<ApiReply, CallFailure> attempt(const std::string& method, const std::string& target,
                                              const std::optional<nlohmann::json>& body = std::nullopt,
                                              CallOptions options = {});

  // A streamed GET (the event stream): each newline-terminated line of the body goes to
  // `on_line` as it arrives. Returns when the server ends the stream (kExitOk) or after printing
  // why it failed (kExitError). `silence`: how long the stream may send nothing (it has heartbeats).
  int stream_lines(const std::string& target, const std::function<void(std::string_view)>& on_line,
                   std::chrono::milliseconds silence);
  // Pretty JSON (4-space indent, like `nomad -json`), newline-terminated.
  void print_json(const nlohmann::json& value);
  // "Error: <message>" on stderr; returns kExitError.
  int fail(const std::string& message);

 private:
  // An HTTP error as a sentence: the API's {"Error"} message, a 401 saying what to set.
  std::string http_error(const HttpResponse& res, const std::string& method, const std::string& target) const;
  HttpRequest request(const std::string& method, const std::string& target) const;

  HttpClient client_;
  GlobalOptions globals_;
  std::map<std::string, std::string> secrets_;
  std::ostream& out_;
  std::ostream& err_;
};

}  // namespace mooring::cli
