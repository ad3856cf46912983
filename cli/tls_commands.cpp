// `mooring tls ca create` and `mooring tls cert create` (the shape of `nomad tls`): a CA and the
// certificates for mutual TLS between the control plane and node agents, written as files
// (0600) in -dir. Local only: no API call. The identity each certificate carries is described
// in shared/tls/identity.hpp. `mooring tls cert request` is node enrollment: the key is made
// here, only its CSR goes to the control plane (POST /v1/node/:id/enroll), which signs it.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <sstream>

#include "cli/commands.hpp"
#include "cli/context.hpp"
#include "cli/format.hpp"
#include "shared/domain/time.hpp"
#include "shared/tls/cert_files.hpp"
#include "shared/tls/pair_replacement.hpp"

namespace mooring::cli {

namespace {

namespace fs = std::filesystem;

// A usage mistake: "Error: ..." and exit 2, like the parser's own errors.
int usage_error(Context& ctx, const std::string& message) {
  ctx.err() << "Error: " << message << "\n";
  return kExitUsage;
}

std::optional<int> parse_days(const Invocation& inv, int fallback) {
  const auto text = inv.flag("days");
  if (!text) return fallback;
  int days = 0;
  const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), days);
  if (ec != std::errc{} || end != text->data() + text->size() || days <= 0) return std::nullopt;
  return days;
}

std::vector<std::string> split_list(const std::optional<std::string>& text) {
  std::vector<std::string> out;
  if (!text) return out;
  std::stringstream in(*text);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

int print_written(Context& ctx, const std::string& what, const tls::PairPaths& paths) {
  ctx.out() << "==> " << what << " saved to: " << paths.cert.string() << "\n"
            << "==> " << what << " key saved to: " << paths.key.string() << "\n";
  return kExitOk;
}

int ca_create(Context& ctx, const Invocation& inv) {
  const auto days = parse_days(inv, 1825);
  if (!days) return usage_error(ctx, "-days: expected a positive number of days, got \"" + *inv.flag("days") + "\"");
  const fs::path dir = inv.flag("dir").value_or(".");
  auto ca = tls::create_ca({.days = *days});
  if (!ca) return ctx.fail(ca.error());
  auto written = tls::write_pair(tls::ca_paths(dir), *ca);
  if (!written) return ctx.fail(written.error());
  return print_written(ctx, "CA certificate", *written);
}

int cert_create(Context& ctx, const Invocation& inv) {
  const int roles = inv.enabled("server") + inv.enabled("agent") + inv.enabled("cli");
  if (roles != 1) return usage_error(ctx, "exactly one of -server, -agent or -cli is required");
  tls::Identity identity;
  identity.role = inv.enabled("server") ? tls::Role::server : inv.enabled("agent") ? tls::Role::agent : tls::Role::cli;
  const auto node_id = inv.flag("node-id");
  if (identity.role == tls::Role::agent) {
    if (!node_id) return usage_error(ctx, "-agent needs -node-id ID (the node id the agent runs with)");
    if (!tls::is_valid_node_id(*node_id))
      return usage_error(ctx, "-node-id: \"" + *node_id + "\" must be 1-128 characters of [A-Za-z0-9._-]");
    identity.node_id = *node_id;
  } else if (node_id) {
    return usage_error(ctx, "-node-id goes with -agent only");
  }
  const auto days = parse_days(inv, 365);
  if (!days) return usage_error(ctx, "-days: expected a positive number of days, got \"" + *inv.flag("days") + "\"");

  const fs::path dir = inv.flag("dir").value_or(".");
  const auto ca_default = tls::ca_paths(dir);
  const fs::path ca_cert = inv.flag("ca").value_or(ca_default.cert.string());
  const fs::path ca_key = inv.flag("ca-key").value_or(ca_default.key.string());
  auto ca = tls::read_pair({ca_cert, ca_key});
  if (!ca) return ctx.fail(ca.error() + " (create a CA with `mooring tls ca create`, or name it with -ca/-ca-key)");

  tls::CertRequest request{.identity = identity, .validity = std::chrono::hours(24) * *days};
  for (auto& name : split_list(inv.flag("additional-dnsname"))) request.dns_names.push_back(std::move(name));
  for (auto& ip : split_list(inv.flag("additional-ipaddress"))) request.ip_addresses.push_back(std::move(ip));
  auto cert = tls::create_certificate(*ca, request);
  if (!cert) return ctx.fail(cert.error());
  auto written = tls::write_pair(tls::pair_paths(dir, identity), *cert);
  if (!written) return ctx.fail(written.error());
  ctx.out() << "==> Using CA certificate " << ca_cert.string() << " and key " << ca_key.string() << "\n";
  return print_written(
      ctx, std::string(tls::to_string(identity.role)) + " certificate (" + tls::identity_uri(identity) + ")", *written);
}

// The node certificate in `paths` is still good for longer than `within` with its key: nothing
// to request.
bool still_valid(const tls::PairPaths& paths, const tls::Identity& identity, std::chrono::milliseconds within,
                 std::string& until) {
  auto pair = tls::read_pair(paths);
  if (!pair || !tls::key_matches(pair->cert_pem, pair->key_pem)) return false;
  auto info = tls::inspect(pair->cert_pem);
  if (!info || info->identity != identity) return false;
  until = domain::format_time(std::chrono::time_point_cast<std::chrono::milliseconds>(info->not_after));
  return info->not_after - std::chrono::system_clock::now() > within;
}

int cert_request(Context& ctx, const Invocation& inv) {
  const auto node_id = inv.flag("node-id");
  if (!node_id) return usage_error(ctx, "-node-id ID is required (the node id the agent runs with)");
  if (!tls::is_valid_node_id(*node_id))
    return usage_error(ctx, "-node-id: \"" + *node_id + "\" must be 1-128 characters of [A-Za-z0-9._-]");
  std::optional<std::chrono::milliseconds> renew_within;
  if (auto w = inv.flag("renew-within")) {
    renew_within = parse_duration(*w);
    if (!renew_within) return usage_error(ctx, "-renew-within: expected a duration like \"720h\", got \"" + *w + "\"");
  }
  const tls::Identity identity{tls::Role::agent, *node_id};
  const fs::path dir = inv.flag("dir").value_or(".");
  const auto paths = tls::pair_paths(dir, identity);
  const auto ca_path = tls::ca_paths(dir).cert;
  if (std::string until; renew_within && still_valid(paths, identity, *renew_within, until)) {
    ctx.out() << "==> " << paths.cert.string() << " is valid until " << until << "; nothing to request\n";
    return kExitOk;
  }
  if (inv.enabled("check-only")) {
    ctx.out() << "==> " << paths.cert.string()
              << " needs enrolling (missing, unusable or ending within -renew-within)\n";
    return kExitError;
  }

  // Who asks: a one-time introduction token made for this node, or else the management token of
  // -token / MOORING_TOKEN (a deliberate re-key). Read from a file: a command line is visible in ps.
  nlohmann::json body = nlohmann::json::object();
  if (auto file = inv.flag("intro-token-file")) {
    auto token = tls::read_text(*file);
    if (!token) return ctx.fail(token.error());
    std::erase_if(*token, [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; });
    if (token->empty()) return ctx.fail(*file + " holds no introduction token");
    body["IntroToken"] = *token;
  }
  // Always a new key: a certificate for an old one could outlive the node it was made on.
  auto csr = tls::create_csr(identity);
  if (!csr) return ctx.fail(csr.error());
  body["CSR"] = csr->csr_pem;
  auto reply = ctx.call("POST", "/v1/node/" + url_encode(*node_id) + "/enroll", body);
  if (!reply) return kExitError;
  const auto cert = reply->body.value("Certificate", std::string());
  const auto ca = reply->body.value("CA", std::string());
  auto info = tls::inspect(cert);
  // What came back must be for our key and identity, from the CA it came with.
  if (!info || info->identity != identity || !tls::key_matches(cert, csr->key_pem) || !tls::signed_by(cert, ca))
    return ctx.fail("the control plane at " + ctx.address() + " answered with a certificate that is not for " +
                    tls::identity_uri(identity) + " and this key; nothing was written");
  // Key first, then the certificate (tls::replace_pair: the agent undoes a crash between them at
  // start), then the CA: a reader never sees a certificate without its key.
  if (auto w = tls::replace_pair(paths, csr->key_pem, cert); !w) return ctx.fail(w.error());
  if (auto w = tls::replace_file(ca_path, ca); !w) return ctx.fail(w.error());
  if (ctx.json())
    return ctx.print_json({{"NodeID", *node_id},
                           {"Certificate", paths.cert.string()},
                           {"Key", paths.key.string()},
                           {"CA", ca_path.string()},
                           {"Expires", reply->body.value("Expires", std::string())}}),
           kExitOk;
  ctx.out() << "==> Enrolled " << tls::identity_uri(identity) << ", valid until "
            << reply->body.value("Expires", std::string()) << "\n";
  print_written(ctx, "node certificate", paths);
  ctx.out() << "==> CA certificate saved to: " << ca_path.string() << "\n";
  return kExitOk;
}

}  // namespace

std::vector<CommandSpec> tls_commands() {
  const FlagSpec dir{
      .name = "dir", .takes_value = true, .value_name = "DIR", .help = "where the files go (default: .)"};
  return {
      {.words = {"tls", "ca", "create"},
       .flags = {dir,
                 {.name = "days", .takes_value = true, .value_name = "N", .help = "validity in days (default: 1825)"}},
       .summary = "Create a certificate authority for mutual TLS",
       .help = "Creates an ECDSA P-256 CA and writes ca.pem and ca-key.pem (0600) in -dir. Refuses to\n"
               "overwrite existing files. Keep ca-key.pem off the nodes.",
       .run = ca_create},
      {.words = {"tls", "cert", "create"},
       .flags =
           {{.name = "server", .help = "a control plane certificate (spiffe://mooring/server)"},
            {.name = "agent", .help = "a node agent certificate (needs -node-id)"},
            {.name = "node-id",
             .takes_value = true,
             .value_name = "ID",
             .help = "the agent's node id, carried as spiffe://mooring/node/ID"},
            {.name = "cli", .help = "an operator's client certificate (spiffe://mooring/cli)"},
            {.name = "ca", .takes_value = true, .value_name = "FILE", .help = "CA certificate (default: DIR/ca.pem)"},
            {.name = "ca-key", .takes_value = true, .value_name = "FILE", .help = "CA key (default: DIR/ca-key.pem)"},
            {.name = "additional-dnsname",
             .takes_value = true,
             .value_name = "NAME",
             .help = "another DNS SAN besides localhost (repeatable, or comma-separated)",
             .repeatable = true},
            {.name = "additional-ipaddress",
             .takes_value = true,
             .value_name = "IP",
             .help = "another IP SAN besides 127.0.0.1 (repeatable, or comma-separated)",
             .repeatable = true},
            {.name = "days", .takes_value = true, .value_name = "N", .help = "validity in days (default: 365)"},
            dir},
       .summary = "Create a certificate signed by the CA",
       .help = "Creates an ECDSA P-256 key and a certificate signed by the CA for the control plane\n"
               "(-server), a node agent (-agent -node-id ID) or the CLI (-cli). Files: server.pem,\n"
               "agent-ID.pem or cli.pem, each with a -key.pem beside it (0600), in -dir.",
       .run = cert_create},
      {.words = {"tls", "cert", "request"},
       .flags = {{.name = "node-id",
                  .takes_value = true,
                  .value_name = "ID",
                  .help = "the node id the agent runs with (spiffe://mooring/node/ID)"},
                 {.name = "intro-token-file",
                  .takes_value = true,
                  .value_name = "FILE",
                  .help = "a file holding a one-time introduction token made for the node (mooring node intro create)"},
                 {.name = "renew-within",
                  .takes_value = true,
                  .value_name = "DURATION",
                  .help = "do nothing while DIR holds a certificate for the node valid longer than this"},
                 {.name = "check-only",
                  .help =
                      "ask nothing: exit 0 when -renew-within finds the certificate good, 1 when it needs enrolling"},
                 dir},
       .summary = "Enroll a node: have the control plane sign a certificate for a local key",
       .help = "Node enrollment: makes a new ECDSA P-256 key in -dir, sends only a CSR to\n"
               "POST /v1/node/ID/enroll and writes agent-ID.pem, agent-ID-key.pem and the CA's ca.pem\n"
               "(0600) in -dir. The credential is a one-time introduction token made for the node\n"
               "(-intro-token-file), or a management token (-token or MOORING_TOKEN) to re-key a node\n"
               "deliberately. A node that is live or holds an unexpired certificate is refused unless\n"
               "a management token asks: a running agent renews its own certificate.",
       .run = cert_request},
  };
}

}  // namespace mooring::cli
