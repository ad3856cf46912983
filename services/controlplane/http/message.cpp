#include "services/controlplane/http/message.hpp"

#include <nlohmann/json.hpp>

namespace mooring::controlplane::http {

Response error_response(unsigned status, std::string_view message) {
  Response r;
  r.status = status;
  // dump() with replace: a message that quotes user input must still be valid JSON.
  r.body = nlohmann::json{{"Error", std::string(message)}}.dump(-1, ' ', false,
                                                               nlohmann::json::error_handler_t::replace);
  return r;
}

Response json_response(std::string body, unsigned status) {
  Response r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

}  // namespace mooring::controlplane::http
