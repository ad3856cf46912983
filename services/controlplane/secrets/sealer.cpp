#include "services/controlplane/secrets/sealer.hpp"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <memory>

namespace mooring::controlplane::secrets {
namespace {

constexpr std::size_t kNonceSize = 12;  // GCM's native IV size
constexpr std::size_t kTagSize = 16;

using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)>;

CipherCtx new_ctx() { return CipherCtx(EVP_CIPHER_CTX_new(), &EVP_CIPHER_CTX_free); }

const unsigned char* bytes(std::string_view s) { return reinterpret_cast<const unsigned char*>(s.data()); }
unsigned char* bytes(std::string& s) { return reinterpret_cast<unsigned char*>(s.data()); }

}  // namespace

bool is_sealed(std::string_view text) { return text.starts_with(kSealedPrefix); }

std::string sealed_key_id(std::string_view text) {
  if (!is_sealed(text)) return {};
  text.remove_prefix(kSealedPrefix.size());
  const auto colon = text.find(':');
  return colon == std::string_view::npos ? std::string{} : std::string(text.substr(0, colon));
}

domain::Expected<std::string> random_bytes(std::size_t n) {
  std::string out(n, '\0');
  if (n > 0 && RAND_bytes(bytes(out), static_cast<int>(n)) != 1) return domain::error("OpenSSL RAND_bytes failed");
  return out;
}

std::string base64_encode(std::string_view in) {
  std::string out(4 * ((in.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(bytes(out), bytes(in), static_cast<int>(in.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

domain::Expected<std::string> base64_decode(std::string_view in) {
  if (in.size() % 4 != 0) return domain::error("not base64");
  std::string out(3 * (in.size() / 4) + 1, '\0');
  const int n = EVP_DecodeBlock(bytes(out), bytes(in), static_cast<int>(in.size()));
  if (n < 0) return domain::error("not base64");
  // EVP_DecodeBlock counts the padding as zero bytes.
  std::size_t size = static_cast<std::size_t>(n);
  if (in.ends_with("=="))
    size -= 2;
  else if (in.ends_with("="))
    size -= 1;
  out.resize(size);
  return out;
}

domain::Expected<std::string> seal(const Key& key, std::string_view plaintext, std::string_view aad) {
  auto nonce = random_bytes(kNonceSize);
  if (!nonce) return domain::error(nonce.error());
  auto ctx = new_ctx();
  std::string body = *nonce;
  body.resize(kNonceSize + plaintext.size() + kTagSize);
  unsigned char* ct = bytes(body) + kNonceSize;
  int len = 0, total = 0;
  const bool ok = ctx && EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, nullptr, nullptr) == 1 &&
                  EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_IVLEN, static_cast<int>(kNonceSize), nullptr) == 1 &&
                  EVP_EncryptInit_ex(ctx.get(), nullptr, nullptr, key.bytes.data(), bytes(*nonce)) == 1 &&
                  EVP_EncryptUpdate(ctx.get(), nullptr, &len, bytes(aad), static_cast<int>(aad.size())) == 1 &&
                  EVP_EncryptUpdate(ctx.get(), ct, &len, bytes(plaintext), static_cast<int>(plaintext.size())) == 1 &&
                  (total = len, EVP_EncryptFinal_ex(ctx.get(), ct + total, &len) == 1) &&
                  EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, static_cast<int>(kTagSize),
                                      bytes(body) + kNonceSize + plaintext.size()) == 1;
  if (!ok) return domain::error("AES-256-GCM seal failed (OpenSSL)");
  return std::string(kSealedPrefix) + key.id + ":" + base64_encode(body);
}

domain::Expected<std::string> open_sealed(const Keyring& keyring, std::string_view sealed, std::string_view aad) {
  if (!is_sealed(sealed)) return domain::error("not a sealed value");
  const auto id = sealed_key_id(sealed);
  if (id.empty()) return domain::error("malformed sealed value (no key id)");
  const Key* key = keyring.find(id);
  if (!key)
    return domain::error("sealed with key \"" + id + "\", which keyring " + keyring.path().string() +
                         " does not hold (another keyring file, or a key dropped by hand?)");
  auto body = base64_decode(sealed.substr(kSealedPrefix.size() + id.size() + 1));
  if (!body || body->size() < kNonceSize + kTagSize)
    return domain::error("malformed sealed value (bad base64 or too short)");
  const std::size_t ct_size = body->size() - kNonceSize - kTagSize;
  std::string plain(ct_size, '\0');
  auto ctx = new_ctx();
  int len = 0;
  const unsigned char* nonce = bytes(*body);
  const unsigned char* ct = nonce + kNonceSize;
  std::string tag = body->substr(kNonceSize + ct_size);
  const bool ok = ctx && EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, nullptr, nullptr) == 1 &&
                  EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_IVLEN, static_cast<int>(kNonceSize), nullptr) == 1 &&
                  EVP_DecryptInit_ex(ctx.get(), nullptr, nullptr, key->bytes.data(), nonce) == 1 &&
                  EVP_DecryptUpdate(ctx.get(), nullptr, &len, bytes(aad), static_cast<int>(aad.size())) == 1 &&
                  EVP_DecryptUpdate(ctx.get(), bytes(plain), &len, ct, static_cast<int>(ct_size)) == 1 &&
                  EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, static_cast<int>(kTagSize), bytes(tag)) == 1 &&
                  EVP_DecryptFinal_ex(ctx.get(), bytes(plain) + len, &len) == 1;
  if (!ok)
    return domain::error("sealed value does not open with key \"" + id + "\" of keyring " + keyring.path().string() +
                         " (tampered with, moved from another object, or a different key under the same id)");
  return plain;
}

}  // namespace mooring::controlplane::secrets
