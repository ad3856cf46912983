#include "services/controlplane/state/idempotent_request.hpp"

#include <openssl/evp.h>

#include <nlohmann/json.hpp>

#include "shared/domain/text.hpp"

namespace mooring::controlplane {

std::string request_fingerprint(std::string_view method, std::string_view target, std::string_view body) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  const char sep = '\n';
  const bool ok = ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) == 1 &&
                  EVP_DigestUpdate(ctx, method.data(), method.size()) == 1 && EVP_DigestUpdate(ctx, &sep, 1) == 1 &&
                  EVP_DigestUpdate(ctx, target.data(), target.size()) == 1 && EVP_DigestUpdate(ctx, &sep, 1) == 1 &&
                  EVP_DigestUpdate(ctx, body.data(), body.size()) == 1 && EVP_DigestFinal_ex(ctx, digest, &length) == 1;
  EVP_MD_CTX_free(ctx);
  if (!ok) throw std::runtime_error("SHA-256 is not available from OpenSSL");
  return domain::to_hex({reinterpret_cast<const char*>(digest), length});
}

std::string to_storage_text(const IdempotentRequest& r) {
  return nlohmann::json{{"Key", r.key},
                        {"Method", r.method},
                        {"Target", r.target},
                        {"Fingerprint", r.fingerprint},
                        {"Status", r.status},
                        {"Body", r.body},
                        {"AnswerIndex", r.answer_index},
                        {"TimeMs", domain::to_unix_ms(r.time)},
                        {"CreateIndex", r.create_index},
                        {"ModifyIndex", r.modify_index}}
      .dump();
}

domain::Expected<IdempotentRequest> idempotent_request_from_storage(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return domain::error("not a JSON object");
  try {
    IdempotentRequest r;
    r.key = j.at("Key").get<std::string>();
    r.method = j.at("Method").get<std::string>();
    r.target = j.at("Target").get<std::string>();
    r.fingerprint = j.at("Fingerprint").get<std::string>();
    r.status = j.at("Status").get<unsigned>();
    r.body = j.at("Body").get<std::string>();
    r.answer_index = j.value("AnswerIndex", std::uint64_t{0});
    r.time = domain::from_unix_ms(j.at("TimeMs").get<std::int64_t>());
    r.create_index = j.value("CreateIndex", std::uint64_t{0});
    r.modify_index = j.value("ModifyIndex", std::uint64_t{0});
    return r;
  } catch (const nlohmann::json::exception& e) {
    return domain::error(std::string("idempotent request: ") + e.what());
  }
}

}  // namespace mooring::controlplane
