// Certificates on disk: the file names `mooring tls` writes, writing a certificate and its key
// (both 0600, atomically, never over an existing file) and reading them back.
//   ca.pem / ca-key.pem                 the CA
//   server.pem / server-key.pem         the control plane
//   agent-<node-id>.pem / ...-key.pem   a node agent
//   cli.pem / cli-key.pem               an operator's client
#pragma once

#include <filesystem>
#include <string>

#include "shared/tls/certificates.hpp"

namespace mooring::tls {

struct PairPaths {
  std::filesystem::path cert;
  std::filesystem::path key;
};

// "ca", "server", "agent-<id>", "cli".
std::string base_name(const Identity& identity);
PairPaths ca_paths(const std::filesystem::path& dir);
PairPaths pair_paths(const std::filesystem::path& dir, const Identity& identity);

// Writes both files (0600, each atomically; the directory is created 0700 if missing). Refuses
// when either file exists, so a CA or a key is never replaced by mistake.
Expected<PairPaths> write_pair(const PairPaths& paths, const KeyPair& pair);

// Writes one file 0600 atomically, replacing what is there (a renewed certificate, the CA an
// enrollment answered with); the directory is created 0700 if missing.
Expected<std::filesystem::path> replace_file(const std::filesystem::path& path, std::string_view content);

// The file's whole content; an error names the file.
Expected<std::string> read_text(const std::filesystem::path& path);
// Both files; an error names the one that could not be read.
Expected<KeyPair> read_pair(const PairPaths& paths);

// A certificate signed for a CSR by the CA whose files are `ca` (read at each call, so a replaced
// CA is used at once and its key is in memory only while signing), with the CA certificate(s)
// and what the new certificate says. An error names the step: reading the CA, signing, reading
// the result back.
struct Signed {
  std::string cert_pem;
  std::string ca_pem;
  CertificateInfo info;
};
Expected<Signed> sign_csr_with(const PairPaths& ca, std::string_view csr_pem, const CertRequest& request);

}  // namespace mooring::tls
