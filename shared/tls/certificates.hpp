// Creating and reading certificates with OpenSSL: an ECDSA P-256 CA, leaf certificates signed by
// it for the control plane, a node agent or the CLI (identity.hpp), and what a PEM certificate
// says (subject, identity, SANs, validity, key) for logs, expiry warnings and `mooring node
// status`. Node enrollment: a CSR made where its key stays, checked and signed by the CA.
// No I/O: PEM text in, PEM text out (cert_files.hpp writes them).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "shared/domain/result.hpp"
#include "shared/tls/identity.hpp"

struct x509_st;  // OpenSSL's X509

namespace mooring::tls {

template <class T>
using Expected = domain::Expected<T>;

struct KeyPair {
  std::string cert_pem;
  std::string key_pem;  // PKCS#8, unencrypted
};

struct CaRequest {
  std::string common_name = "Mooring CA";
  int days = 1825;
};

struct CertRequest {
  Identity identity;
  std::vector<std::string> dns_names{"localhost"};
  std::vector<std::string> ip_addresses{"127.0.0.1"};
  // From now; node enrollment gives hours or days (its --node-cert-ttl), `mooring tls` days.
  std::chrono::seconds validity = std::chrono::hours(24 * 365);
};

// How far every certificate's notBefore is set back from the moment it is made, for clocks that
// run a little behind the signer's. issued_at() undoes it.
inline constexpr std::chrono::seconds kNotBeforeBackdate{60};

Expected<KeyPair> create_ca(const CaRequest& request);
// Signed by `ca`; an error names a bad DNS name or IP address, or a CA key that does not match.
Expected<KeyPair> create_certificate(const KeyPair& ca, const CertRequest& request);

struct CertificateInfo {
  std::string subject;  // RFC 2253, e.g. "CN=agent.node-1.mooring,O=Mooring"
  std::string issuer;
  std::optional<Identity> identity;  // from the URI SAN
  std::vector<std::string> dns_names;
  std::vector<std::string> ip_addresses;
  std::vector<std::string> uris;
  bool is_ca = false;
  std::string public_key_sha256;  // hex SHA-256 of the DER SubjectPublicKeyInfo
  std::string serial;             // the serial number, upper-case hex: tells two certificates of one node apart
  std::chrono::system_clock::time_point not_before;
  std::chrono::system_clock::time_point not_after;
};

// When the certificate was made: notBefore plus kNotBeforeBackdate (never past notAfter).
std::chrono::system_clock::time_point issued_at(const CertificateInfo& info);
// When its holder should ask for a new one: two thirds into its life from issued_at (as Nomad
// renews node identities), so a third of it is left to ride out a control plane outage.
std::chrono::system_clock::time_point renew_at(const CertificateInfo& info);

// The first certificate in `pem`.
Expected<CertificateInfo> inspect(std::string_view pem);
// A certificate OpenSSL holds (a TLS peer's), not null.
CertificateInfo inspect(x509_st* cert);
// True when `cert_pem`'s signature verifies with the CA certificate's key.
bool signed_by(std::string_view cert_pem, std::string_view ca_pem);
// True when `key_pem` is the private key of `cert_pem`.
bool key_matches(std::string_view cert_pem, std::string_view key_pem);

// ---- certificate signing requests (node enrollment) ----
struct CsrPair {
  std::string csr_pem;
  std::string key_pem;  // PKCS#8, unencrypted; never leaves the machine that made it
};
// A CSR for `identity` (its URI SAN), with the key in `key_pem`, or a new P-256 key when empty.
Expected<CsrPair> create_csr(const Identity& identity, std::string_view key_pem = {});

struct CsrInfo {
  std::vector<std::string> uris;
  std::vector<std::string> dns_names;
  std::vector<std::string> ip_addresses;
  std::vector<std::string> other_names;  // SANs of any other type ("email:...", "other")
  std::string public_key_sha256;         // as in CertificateInfo
};
// A CSR that is PEM, whose self-signature verifies and whose key is ECDSA P-256; otherwise an
// error saying which. What it may ask for is the caller's decision.
Expected<CsrInfo> inspect_csr(std::string_view pem);
// A certificate for `request`, signed by `ca`, for the key of the CSR (checked as inspect_csr
// does). Only `request` decides the names: nothing else of the CSR is copied.
Expected<std::string> sign_csr(const KeyPair& ca, std::string_view csr_pem, const CertRequest& request);

// A warning for a certificate that expires within `within` of `now` (or has expired); nullopt
// otherwise. Names the subject and the days left. Pure.
std::optional<std::string> expiry_warning(const CertificateInfo& info, std::chrono::system_clock::time_point now,
                                          std::chrono::hours within = std::chrono::hours(24 * 30));

// "a.example.com", "*.example.com": letters, digits, '-', '.', a leading "*." ; no empty label.
bool is_valid_dns_name(std::string_view name);

}  // namespace mooring::tls
