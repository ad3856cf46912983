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

}  // namespace mooring::tls
