// The REST API's contract and the route table agree: every route of api/routes.cpp is in the
// document the binary serves (docs/api/openapi.yaml, compiled in), with the right it declares
// and its path parameters, and every documented path and method is a route. The planted cases
// show the comparison catches each kind of drift, so a pass means something.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "services/controlplane/api/openapi_document.hpp"
#include "services/controlplane/api/routes.hpp"

namespace mooring::controlplane::api {
namespace {

using nlohmann::json;

const std::set<std::string> kMethods{"get", "put", "post", "delete", "patch", "head", "options"};

// "/v1/volume/csi/:id" -> "/v1/volume/csi/{id}", with the parameter names in order.
std::pair<std::string, std::vector<std::string>> openapi_path(const std::string& pattern) {
  std::string out;
  std::vector<std::string> params;
  std::size_t i = 0;
  while (i < pattern.size()) {
    if (pattern[i] == ':' && (i == 0 || pattern[i - 1] == '/')) {
      const auto end = std::min(pattern.find('/', i), pattern.size());
      params.push_back(pattern.substr(i + 1, end - i - 1));
      out += "{" + params.back() + "}";
      i = end;
    } else {
      out += pattern[i++];
    }
  }
  return {out, params};
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// A parameter, or the one its {"$ref": "#/components/..."} names.
const json& resolved(const json& doc, const json& p) {
  if (!p.contains("$ref")) return p;
  return doc.at(json::json_pointer(p["$ref"].get<std::string>().substr(1)));
}

// The path parameters an operation documents, at the path's level or its own.
std::set<std::string> path_params(const json& doc, const json& item, const json& op) {
  std::set<std::string> names;
  for (const json* list : {&item, &op}) {
    if (!list->contains("parameters")) continue;
    for (const auto& ref : (*list)["parameters"])
      if (const json& p = resolved(doc, ref); p.value("in", "") == "path") names.insert(p.value("name", ""));
  }
  return names;
}

// An operation open to anyone lists the empty requirement among its security options.
bool documents_anonymous(const json& op) {
  if (!op.contains("security")) return false;
  const auto& s = op["security"];
  return std::any_of(s.begin(), s.end(), [](const json& r) { return r.is_object() && r.empty(); });
}

bool documents_status(const json& op, const char* status) {
  return op.contains("responses") && op["responses"].contains(status);
}

// One route against its documented operation; what differs, one line each.
void compare(const RouteEntry& r, const json& doc, const json& item, const json& op, std::vector<std::string>& out) {
  const std::string who = r.method + " " + r.pattern;
  const auto need = acl::describe(r.route.need);
  if (op.value("x-mooring-acl", "") != need)
    out.push_back(who + ": x-mooring-acl says \"" + op.value("x-mooring-acl", "") + "\", the route needs \"" + need + "\"");
  const bool anyone = r.route.need.kind == acl::Need::Kind::anyone;
  if (documents_anonymous(op) != anyone)
    out.push_back(who + (anyone ? ": open to anyone, but the document asks a token"
                                : ": needs a token, but the document says anyone may call it"));
  if (!anyone && !documents_status(op, "401")) out.push_back(who + ": needs a token, but 401 is not documented");
  const auto kind = r.route.need.kind;
  const bool refusable = kind == acl::Need::Kind::capability || kind == acl::Need::Kind::area ||
                         kind == acl::Need::Kind::management;
  if (refusable && !documents_status(op, "403")) out.push_back(who + ": needs a right, but 403 is not documented");
  const auto documented = path_params(doc, item, op);
  const auto params = openapi_path(r.pattern).second;
  if (documented != std::set<std::string>(params.begin(), params.end()))
    out.push_back(who + ": the document's path parameters differ from the route's");
}

// What differs between the route table and the document.
std::vector<std::string> contract_mismatches(const std::vector<RouteEntry>& routes, const json& doc) {
  std::vector<std::string> out;
  std::set<std::pair<std::string, std::string>> routed;
  const json& paths = doc.contains("paths") ? doc["paths"] : json::object();
  for (const auto& r : routes) {
    const auto path = openapi_path(r.pattern).first;
    const auto method = lower(r.method);
    routed.insert({path, method});
    if (!paths.contains(path) || !paths[path].contains(method)) {
      out.push_back(r.method + " " + r.pattern + ": a route the document lacks (" + path + ")");
      continue;
    }
    compare(r, doc, paths[path], paths[path][method], out);
  }
  for (const auto& [path, item] : paths.items())
    for (const auto& [method, op] : item.items())
      if (kMethods.contains(method) && !routed.contains({path, method}))
        out.push_back(method + " " + path + ": documented, but no route answers it");
  return out;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

bool mentions(const std::vector<std::string>& lines, const std::string& text) {
  return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) { return l.find(text) != std::string::npos; });
}

json served() { return json::parse(openapi_document()); }

TEST(OpenApiRoutes, TheServedDocumentIsOpenApi31) {
  const auto doc = served();
  EXPECT_EQ(doc.value("openapi", ""), "3.1.0");
  EXPECT_TRUE(doc["components"].contains("schemas"));
  EXPECT_TRUE(doc["components"]["schemas"].contains("Error"));
}

TEST(OpenApiRoutes, EveryRouteIsDocumentedWithItsRightAndEveryDocumentedPathIsARoute) {
  const auto mismatches = contract_mismatches(route_entries(), served());
  EXPECT_TRUE(mismatches.empty()) << "docs/api/openapi.yaml and services/controlplane/api/routes.cpp differ:\n"
                                  << joined(mismatches);
}

// ---- planted mismatches: each kind of drift is reported ----

TEST(OpenApiRoutes, ARouteMissingFromTheDocumentIsReported) {
  auto doc = served();
  doc["paths"]["/v1/volume/csi/{id}"].erase("delete");
  const auto m = contract_mismatches(route_entries(), doc);
  EXPECT_TRUE(mentions(m, "DELETE /v1/volume/csi/:id: a route the document lacks")) << joined(m);
}

TEST(OpenApiRoutes, ADocumentedPathNoRouteAnswersIsReported) {
  auto doc = served();
  doc["paths"]["/v1/volumes/{id}/resize"]["post"] = doc["paths"]["/v1/volume/csi/{id}/create"]["put"];
  doc["paths"]["/v1/plugins"]["delete"] = doc["paths"]["/v1/plugins"]["get"];
  const auto m = contract_mismatches(route_entries(), doc);
  EXPECT_TRUE(mentions(m, "post /v1/volumes/{id}/resize: documented, but no route answers it")) << joined(m);
  EXPECT_TRUE(mentions(m, "delete /v1/plugins: documented, but no route answers it")) << joined(m);
}

TEST(OpenApiRoutes, ADocumentedRightThatIsNotTheRoutesIsReported) {
  auto doc = served();
  doc["paths"]["/v1/volume/csi/{id}/detach"]["delete"]["x-mooring-acl"] = "csi-write-volume";
  const auto m = contract_mismatches(route_entries(), doc);
  EXPECT_TRUE(mentions(m, "DELETE /v1/volume/csi/:id/detach: x-mooring-acl says \"csi-write-volume\", the route "
                          "needs \"operator:write\""))
      << joined(m);
}

TEST(OpenApiRoutes, AnonymousAccessDocumentedWrongEitherWayIsReported) {
  auto doc = served();
  doc["paths"]["/v1/nodes"]["get"]["security"] = json::array({json::object()});
  doc["paths"]["/v1/status/health"]["get"].erase("security");
  const auto m = contract_mismatches(route_entries(), doc);
  EXPECT_TRUE(mentions(m, "GET /v1/nodes: needs a token, but the document says anyone may call it")) << joined(m);
  EXPECT_TRUE(mentions(m, "GET /v1/status/health: open to anyone, but the document asks a token")) << joined(m);
}

TEST(OpenApiRoutes, RefusalsAndPathParametersTheDocumentLacksAreReported) {
  auto doc = served();
  doc["paths"]["/v1/acl/tokens"]["get"]["responses"].erase("403");
  doc["paths"]["/v1/acl/policy/{name}"].erase("parameters");
  doc["paths"]["/v1/node/{id}/intro"]["parameters"] = json::array({{{"$ref", "#/components/parameters/Prefix"}}});
  const auto m = contract_mismatches(route_entries(), doc);
  EXPECT_TRUE(mentions(m, "GET /v1/acl/tokens: needs a right, but 403 is not documented")) << joined(m);
  EXPECT_TRUE(mentions(m, "GET /v1/acl/policy/:name: the document's path parameters differ")) << joined(m);
  EXPECT_TRUE(mentions(m, "POST /v1/node/:id/intro: the document's path parameters differ")) << joined(m);
}

}  // namespace
}  // namespace mooring::controlplane::api
