#include "tests/support/test_csr.hpp"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <stdexcept>

namespace mooring::test {

namespace {

EVP_PKEY* new_key(CsrSpec::KeyType type) {
  switch (type) {
    case CsrSpec::KeyType::p256: return EVP_EC_gen("P-256");
    case CsrSpec::KeyType::p384: return EVP_EC_gen("P-384");
    case CsrSpec::KeyType::rsa2048: return EVP_RSA_gen(2048);
  }
  return nullptr;
}

void add_name(GENERAL_NAMES* names, int type, const std::string& value) {
  ASN1_IA5STRING* text = ASN1_IA5STRING_new();
  ASN1_STRING_set(text, value.data(), static_cast<int>(value.size()));
  GENERAL_NAME* gn = GENERAL_NAME_new();
  GENERAL_NAME_set0_value(gn, type, text);
  sk_GENERAL_NAME_push(names, gn);
}

}  // namespace

std::string make_csr(const CsrSpec& spec) {
  EVP_PKEY* key = new_key(spec.key);
  X509_REQ* req = X509_REQ_new();
  if (!key || !req) throw std::runtime_error("make_csr: OpenSSL allocation failed");
  X509_REQ_set_version(req, 0);
  X509_NAME_add_entry_by_txt(X509_REQ_get_subject_name(req), "CN", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>("test"), -1, -1, 0);
  X509_REQ_set_pubkey(req, key);
  GENERAL_NAMES* names = sk_GENERAL_NAME_new_null();
  for (const auto& u : spec.uris) add_name(names, GEN_URI, u);
  for (const auto& d : spec.dns_names) add_name(names, GEN_DNS, d);
  for (const auto& e : spec.emails) add_name(names, GEN_EMAIL, e);
  if (sk_GENERAL_NAME_num(names) > 0) {
    STACK_OF(X509_EXTENSION)* exts = sk_X509_EXTENSION_new_null();
    sk_X509_EXTENSION_push(exts, X509V3_EXT_i2d(NID_subject_alt_name, 0, names));
    X509_REQ_add_extensions(req, exts);
    sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
  }
  GENERAL_NAMES_free(names);
  X509_REQ_sign(req, key, EVP_sha256());
  if (spec.break_signature) {
    const ASN1_BIT_STRING* sig = nullptr;
    X509_REQ_get0_signature(req, &sig, nullptr);
    auto* bytes = const_cast<unsigned char*>(ASN1_STRING_get0_data(sig));
    bytes[ASN1_STRING_length(sig) / 2] ^= 0x01;
  }
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_X509_REQ(bio, req);
  char* data = nullptr;
  const long len = BIO_get_mem_data(bio, &data);
  std::string pem(data, static_cast<std::size_t>(len));
  BIO_free(bio);
  X509_REQ_free(req);
  EVP_PKEY_free(key);
  return pem;
}

}  // namespace mooring::test
