#include "services/controlplane/http/message.hpp"

#include <boost/asio/error.hpp>
#include <boost/system/system_error.hpp>
#include <nlohmann/json.hpp>

#include "shared/log/log.hpp"

namespace mooring::controlplane::http {

Response error_response(unsigned status, std::string_view message) {
  Response r;
  r.status = status;
  // dump() with replace: a message that quotes user input must still be valid JSON.
  r.body =
      nlohmann::json{{"Error", std::string(message)}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return r;
}

Response json_response(std::string body, unsigned status) {
  Response r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

Response answer_exception(std::exception_ptr error, const Request& request) {
  try {
    std::rethrow_exception(error);
  } catch (const boost::system::system_error& e) {
    if (e.code() == boost::asio::error::operation_aborted) return error_response(503, "shutting down");  // not a bug
    log::Logger("http").error("request handler failed",
                              {{"method", request.method}, {"path", request.path}, {"error", e.what()}});
  } catch (const std::exception& e) {
    log::Logger("http").error("request handler failed",
                              {{"method", request.method}, {"path", request.path}, {"error", e.what()}});
  } catch (...) {
    log::Logger("http").error("request handler failed", {{"method", request.method}, {"path", request.path}});
  }
  return error_response(500, "internal error");
}

}  // namespace mooring::controlplane::http
