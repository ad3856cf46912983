// API room: the REST API's contract, docs/api/openapi.yaml as compact JSON, and its route
// GET /v1/openapi.json. The document's source is generated at build time by cmake/openapi_source.py.
#pragma once

#include <string_view>

namespace mooring::controlplane::http {
struct Request;
struct Response;
}  // namespace mooring::controlplane::http

namespace mooring::controlplane::api {

struct Context;

std::string_view openapi_document();

// GET /v1/openapi.json (ui_endpoints.cpp): the document, to anyone.
http::Response serve_openapi(Context&, const http::Request&);

}  // namespace mooring::controlplane::api
