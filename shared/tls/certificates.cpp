#include "shared/tls/certificates.hpp"

#include "shared/domain/text.hpp"

#include <arpa/inet.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <memory>

namespace mooring::tls {

namespace {

template <class T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};
using Bio = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;
using Key = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using Cert = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using Names = std::unique_ptr<GENERAL_NAMES, Deleter<GENERAL_NAMES, GENERAL_NAMES_free>>;
using Bignum = std::unique_ptr<BIGNUM, Deleter<BIGNUM, BN_free>>;
using Req = std::unique_ptr<X509_REQ, Deleter<X509_REQ, X509_REQ_free>>;
using Extensions =
    std::unique_ptr<STACK_OF(X509_EXTENSION),
                    decltype([](STACK_OF(X509_EXTENSION) * s) { sk_X509_EXTENSION_pop_free(s, X509_EXTENSION_free); })>;

// The newest OpenSSL error, for messages ("" when the queue is empty).
std::string openssl_error() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(code, buf, sizeof buf);
  return buf;
}

domain::Error fail(std::string what) { return domain::error(what + ": " + openssl_error()); }

std::string bio_text(BIO* bio) {
  char* data = nullptr;
  const long len = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<std::size_t>(len));
}

Key new_p256_key() { return Key(EVP_EC_gen("P-256")); }

std::string key_pem(EVP_PKEY* key) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) return {};
  return bio_text(bio.get());
}

std::string cert_pem(X509* cert) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1) return {};
  return bio_text(bio.get());
}

Cert read_cert(std::string_view pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return Cert(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr);
}

Key read_key(std::string_view pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return Key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr);
}

bool add_extension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (!ext) return false;
  const int ok = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  return ok == 1;
}

// A certificate with a random 128-bit serial, the validity (backdated by kNotBeforeBackdate for
// clock skew), the subject and the public key; not yet signed.
Cert new_cert(const std::string& common_name, std::chrono::seconds validity, EVP_PKEY* key) {
  Cert cert(X509_new());
  if (!cert || X509_set_version(cert.get(), 2) != 1) return nullptr;
  Bignum serial(BN_new());
  if (!serial || BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) != 1 ||
      !BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())))
    return nullptr;
  if (!X509_gmtime_adj(X509_getm_notBefore(cert.get()), -static_cast<long>(kNotBeforeBackdate.count())) ||
      !X509_time_adj_ex(X509_getm_notAfter(cert.get()), 0, static_cast<long>(validity.count()), nullptr))
    return nullptr;
  X509_NAME* name = X509_get_subject_name(cert.get());
  const auto* cn = reinterpret_cast<const unsigned char*>(common_name.c_str());
  if (X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>("Mooring"), -1, -1,
                                 0) != 1 ||
      X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, cn, -1, -1, 0) != 1)
    return nullptr;
  if (X509_set_pubkey(cert.get(), key) != 1) return nullptr;
  return cert;
}

bool push_name(GENERAL_NAMES* names, int type, const std::string& value) {
  ASN1_IA5STRING* text = ASN1_IA5STRING_new();
  if (!text || ASN1_STRING_set(text, value.data(), static_cast<int>(value.size())) != 1) {
    ASN1_IA5STRING_free(text);
    return false;
  }
  GENERAL_NAME* gn = GENERAL_NAME_new();
  if (!gn) {
    ASN1_IA5STRING_free(text);
    return false;
  }
  GENERAL_NAME_set0_value(gn, type, text);
  if (sk_GENERAL_NAME_push(names, gn) == 0) {
    GENERAL_NAME_free(gn);
    return false;
  }
  return true;
}

std::chrono::system_clock::time_point to_time_point(const ASN1_TIME* t) {
  std::tm tm{};
  if (!t || ASN1_TIME_to_tm(t, &tm) != 1) return {};
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

std::string name_text(const X509_NAME* name) {
  Bio bio(BIO_new(BIO_s_mem()));
  if (!bio || X509_NAME_print_ex(bio.get(), name, 0, XN_FLAG_RFC2253 & ~ASN1_STRFLGS_ESC_MSB) < 0) return {};
  return bio_text(bio.get());
}

std::string ip_text(const ASN1_OCTET_STRING* ip) {
  char buf[INET6_ADDRSTRLEN] = {};
  const int len = ASN1_STRING_length(ip);
  const int family = len == 4 ? AF_INET : len == 16 ? AF_INET6 : 0;
  if (family == 0 || !inet_ntop(family, ASN1_STRING_get0_data(ip), buf, sizeof buf)) return "?";
  return buf;
}

// The SHA-256 of a public key's DER SubjectPublicKeyInfo, in hex: what names a key across its
// certificates and CSRs.
std::string public_key_sha256(EVP_PKEY* key) {
  unsigned char* der = nullptr;
  const int len = key ? i2d_PUBKEY(key, &der) : -1;
  if (len <= 0) return {};
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_len = 0;
  const bool ok = EVP_Digest(der, static_cast<std::size_t>(len), digest, &digest_len, EVP_sha256(), nullptr) == 1;
  OPENSSL_free(der);
  if (!ok) return {};
  return domain::to_hex(std::string_view(reinterpret_cast<const char*>(digest), digest_len));
}

std::string serial_hex(const ASN1_INTEGER* serial) {
  Bignum bn(ASN1_INTEGER_to_BN(serial, nullptr));
  char* hex = bn ? BN_bn2hex(bn.get()) : nullptr;
  std::string out = hex ? hex : "";
  OPENSSL_free(hex);
  ERR_clear_error();
  return out;
}

bool is_p256(EVP_PKEY* key) {
  if (!key || EVP_PKEY_get_base_id(key) != EVP_PKEY_EC) return false;
  char group[64] = {};
  std::size_t len = 0;
  if (EVP_PKEY_get_utf8_string_param(key, "group", group, sizeof group, &len) != 1) return false;
  return std::string_view(group, len) == "prime256v1" || std::string_view(group, len) == "P-256";
}

// A leaf for `request` carrying `key` (its public half), signed by the CA.
Expected<std::string> issue(const KeyPair& ca, const CertRequest& request, EVP_PKEY* key) {
  const Identity& id = request.identity;
  if (request.validity.count() <= 0)
    return domain::error("validity must be positive, got " + std::to_string(request.validity.count()) + "s");
  if (id.role == Role::agent && !is_valid_node_id(id.node_id))
    return domain::error("node id \"" + id.node_id + "\" must be 1-128 characters of [A-Za-z0-9._-]");
  Cert ca_cert = read_cert(ca.cert_pem);
  if (!ca_cert) return fail("the CA certificate is not a PEM certificate");
  Key ca_key = read_key(ca.key_pem);
  if (!ca_key) return fail("the CA key is not a PEM private key");
  if (X509_check_private_key(ca_cert.get(), ca_key.get()) != 1)
    return fail("the CA key does not match the CA certificate");

  Names names(sk_GENERAL_NAME_new_null());
  if (!names || !push_name(names.get(), GEN_URI, identity_uri(id))) return fail("cannot build the SANs");
  for (const auto& dns : request.dns_names) {
    if (!is_valid_dns_name(dns)) return domain::error("\"" + dns + "\" is not a DNS name");
    if (!push_name(names.get(), GEN_DNS, dns)) return fail("cannot build the SANs");
  }
  for (const auto& ip : request.ip_addresses) {
    ASN1_OCTET_STRING* octets = a2i_IPADDRESS(ip.c_str());
    if (!octets) {
      ERR_clear_error();
      return domain::error("\"" + ip + "\" is not an IP address");
    }
    GENERAL_NAME* gn = GENERAL_NAME_new();
    if (!gn) {
      ASN1_OCTET_STRING_free(octets);
      return fail("cannot build the SANs");
    }
    GENERAL_NAME_set0_value(gn, GEN_IPADD, octets);
    if (sk_GENERAL_NAME_push(names.get(), gn) == 0) {
      GENERAL_NAME_free(gn);
      return fail("cannot build the SANs");
    }
  }

  Cert cert = new_cert(common_name(id), request.validity, key);
  if (!cert) return fail("cannot build the certificate");
  X509_set_issuer_name(cert.get(), X509_get_subject_name(ca_cert.get()));
  // The control plane and agents both serve and dial (mutual TLS both ways); the CLI only dials.
  const char* eku = id.role == Role::cli ? "clientAuth" : "serverAuth,clientAuth";
  if (!add_extension(cert.get(), ca_cert.get(), NID_basic_constraints, "critical,CA:FALSE") ||
      !add_extension(cert.get(), ca_cert.get(), NID_key_usage, "critical,digitalSignature") ||
      !add_extension(cert.get(), ca_cert.get(), NID_ext_key_usage, eku) ||
      !add_extension(cert.get(), ca_cert.get(), NID_subject_key_identifier, "hash") ||
      !add_extension(cert.get(), ca_cert.get(), NID_authority_key_identifier, "keyid:always") ||
      X509_add1_ext_i2d(cert.get(), NID_subject_alt_name, names.get(), 0, X509V3_ADD_DEFAULT) != 1)
    return fail("cannot add the certificate's extensions");
  if (X509_sign(cert.get(), ca_key.get(), EVP_sha256()) == 0) return fail("cannot sign the certificate");
  return cert_pem(cert.get());
}

struct SanLists {
  std::vector<std::string>& uris;
  std::vector<std::string>& dns_names;
  std::vector<std::string>& ip_addresses;
  std::vector<std::string>* other_names;  // null: other types are skipped
};

void read_sans(const GENERAL_NAMES* names, SanLists& out) {
  for (int i = 0; names && i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* gn = sk_GENERAL_NAME_value(names, i);
    int type = 0;
    const void* value = GENERAL_NAME_get0_value(gn, &type);
    const auto* str = static_cast<const ASN1_STRING*>(value);
    const auto text = [&] {
      return std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(str)),
                         static_cast<std::size_t>(ASN1_STRING_length(str)));
    };
    if (type == GEN_DNS)
      out.dns_names.push_back(text());
    else if (type == GEN_IPADD)
      out.ip_addresses.push_back(ip_text(str));
    else if (type == GEN_URI)
      out.uris.push_back(text());
    else if (out.other_names)
      out.other_names->push_back(type == GEN_EMAIL ? "email:" + text() : "other");
  }
}

Req read_req(std::string_view pem) {
  Bio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return Req(bio ? PEM_read_bio_X509_REQ(bio.get(), nullptr, nullptr, nullptr) : nullptr);
}

// The CSR, if it is one whose self-signature verifies and whose key is P-256.
Expected<Req> checked_req(std::string_view pem) {
  Req req = read_req(pem);
  if (!req) {
    ERR_clear_error();
    return domain::error("not a PEM certificate signing request");
  }
  EVP_PKEY* key = X509_REQ_get0_pubkey(req.get());
  if (!key || X509_REQ_verify(req.get(), key) != 1) {
    ERR_clear_error();
    return domain::error("the certificate signing request's signature does not verify");
  }
  if (!is_p256(key)) {
    ERR_clear_error();
    return domain::error("the certificate signing request's key is not ECDSA P-256");
  }
  return req;
}

}  // namespace

bool is_valid_dns_name(std::string_view name) {
  if (name.starts_with("*.")) name.remove_prefix(2);
  if (name.empty() || name.size() > 253) return false;
  std::size_t label = 0;
  for (const char c : name) {
    if (c == '.') {
      if (label == 0) return false;
      label = 0;
      continue;
    }
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') return false;
    if (++label > 63) return false;
  }
  return label > 0;
}

Expected<KeyPair> create_ca(const CaRequest& request) {
  if (request.days <= 0) return domain::error("days must be positive, got " + std::to_string(request.days));
  Key key = new_p256_key();
  if (!key) return fail("cannot create a P-256 key");
  Cert cert = new_cert(request.common_name, std::chrono::hours(24) * request.days, key.get());
  if (!cert) return fail("cannot build the CA certificate");
  // The CA signs leaves only (pathlen 0), and nothing else.
  if (!add_extension(cert.get(), cert.get(), NID_basic_constraints, "critical,CA:TRUE,pathlen:0") ||
      !add_extension(cert.get(), cert.get(), NID_key_usage, "critical,keyCertSign,cRLSign") ||
      !add_extension(cert.get(), cert.get(), NID_subject_key_identifier, "hash") ||
      !add_extension(cert.get(), cert.get(), NID_authority_key_identifier, "keyid:always"))
    return fail("cannot add the CA extensions");
  X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get()));
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) == 0) return fail("cannot sign the CA certificate");
  return KeyPair{cert_pem(cert.get()), key_pem(key.get())};
}

Expected<KeyPair> create_certificate(const KeyPair& ca, const CertRequest& request) {
  Key key = new_p256_key();
  if (!key) return fail("cannot create a P-256 key");
  auto cert = issue(ca, request, key.get());
  if (!cert) return domain::error(cert.error());
  return KeyPair{std::move(*cert), key_pem(key.get())};
}

Expected<CsrPair> create_csr(const Identity& identity, std::string_view existing_key) {
  Key key = existing_key.empty() ? new_p256_key() : read_key(existing_key);
  if (!key) return fail(existing_key.empty() ? "cannot create a P-256 key" : "the key is not a PEM private key");
  if (!is_p256(key.get())) return domain::error("the key is not ECDSA P-256");
  Req req(X509_REQ_new());
  if (!req || X509_REQ_set_version(req.get(), 0) != 1) return fail("cannot build the request");
  X509_NAME* name = X509_REQ_get_subject_name(req.get());
  const std::string cn = common_name(identity);
  if (X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1,
                                 0) != 1 ||
      X509_REQ_set_pubkey(req.get(), key.get()) != 1)
    return fail("cannot build the request");
  Names names(sk_GENERAL_NAME_new_null());
  Extensions exts(sk_X509_EXTENSION_new_null());
  X509_EXTENSION* san = nullptr;
  if (!names || !exts || !push_name(names.get(), GEN_URI, identity_uri(identity)) ||
      !(san = X509V3_EXT_i2d(NID_subject_alt_name, 0, names.get())))
    return fail("cannot build the SANs");
  if (sk_X509_EXTENSION_push(exts.get(), san) == 0) {
    X509_EXTENSION_free(san);
    return fail("cannot build the SANs");
  }
  if (X509_REQ_add_extensions(req.get(), exts.get()) != 1) return fail("cannot add the SANs");
  if (X509_REQ_sign(req.get(), key.get(), EVP_sha256()) == 0) return fail("cannot sign the request");
  Bio bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509_REQ(bio.get(), req.get()) != 1) return fail("cannot write the request");
  return CsrPair{bio_text(bio.get()), existing_key.empty() ? key_pem(key.get()) : std::string(existing_key)};
}

Expected<CsrInfo> inspect_csr(std::string_view pem) {
  auto req = checked_req(pem);
  if (!req) return domain::error(req.error());
  CsrInfo info;
  info.public_key_sha256 = public_key_sha256(X509_REQ_get0_pubkey(req->get()));
  Extensions exts(X509_REQ_get_extensions(req->get()));
  Names names(exts ? static_cast<GENERAL_NAMES*>(X509V3_get_d2i(exts.get(), NID_subject_alt_name, nullptr, nullptr))
                   : nullptr);
  SanLists sans{info.uris, info.dns_names, info.ip_addresses, &info.other_names};
  read_sans(names.get(), sans);
  ERR_clear_error();
  return info;
}

Expected<std::string> sign_csr(const KeyPair& ca, std::string_view csr_pem, const CertRequest& request) {
  auto req = checked_req(csr_pem);
  if (!req) return domain::error(req.error());
  return issue(ca, request, X509_REQ_get0_pubkey(req->get()));
}

Expected<CertificateInfo> inspect(std::string_view pem) {
  Cert cert = read_cert(pem);
  if (!cert) {
    ERR_clear_error();
    return domain::error("not a PEM certificate");
  }
  return inspect(cert.get());
}

CertificateInfo inspect(x509_st* cert) {
  CertificateInfo info;
  info.subject = name_text(X509_get_subject_name(cert));
  info.issuer = name_text(X509_get_issuer_name(cert));
  info.not_before = to_time_point(X509_get0_notBefore(cert));
  info.not_after = to_time_point(X509_get0_notAfter(cert));
  info.is_ca = X509_check_ca(cert) != 0;
  info.public_key_sha256 = public_key_sha256(X509_get0_pubkey(cert));
  info.serial = serial_hex(X509_get0_serialNumber(cert));
  Names names(static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr)));
  SanLists sans{info.uris, info.dns_names, info.ip_addresses, nullptr};
  read_sans(names.get(), sans);
  for (const auto& uri : info.uris)
    if (!info.identity) info.identity = parse_identity_uri(uri);
  return info;
}

bool signed_by(std::string_view cert_pem_text, std::string_view ca_pem) {
  Cert cert = read_cert(cert_pem_text);
  Cert ca = read_cert(ca_pem);
  if (!cert || !ca) {
    ERR_clear_error();
    return false;
  }
  EVP_PKEY* ca_key = X509_get0_pubkey(ca.get());
  const bool ok = ca_key && X509_verify(cert.get(), ca_key) == 1;
  ERR_clear_error();
  return ok;
}

bool key_matches(std::string_view cert_pem_text, std::string_view key_pem_text) {
  Cert cert = read_cert(cert_pem_text);
  Key key = read_key(key_pem_text);
  const bool ok = cert && key && X509_check_private_key(cert.get(), key.get()) == 1;
  ERR_clear_error();
  return ok;
}

std::chrono::system_clock::time_point issued_at(const CertificateInfo& info) {
  return std::min(info.not_before + kNotBeforeBackdate, info.not_after);
}

std::chrono::system_clock::time_point renew_at(const CertificateInfo& info) {
  const auto issued = issued_at(info);
  return issued + (info.not_after - issued) * 2 / 3;
}

std::optional<std::string> expiry_warning(const CertificateInfo& info, std::chrono::system_clock::time_point now,
                                          std::chrono::hours within) {
  if (info.not_after - now > within) return std::nullopt;
  const auto days = std::chrono::duration_cast<std::chrono::hours>(info.not_after - now).count() / 24;
  if (info.not_after <= now) return "certificate " + info.subject + " has expired";
  return "certificate " + info.subject + " expires in " + std::to_string(days) + (days == 1 ? " day" : " days");
}

}  // namespace mooring::tls
