// Replacing a certificate and its key on disk (a node agent's renewal, a re-enrollment) so that
// a crash between the two files never leaves a key and a certificate that do not match.
#pragma once

#include <string_view>

#include "shared/domain/result.hpp"
#include "shared/tls/cert_files.hpp"

namespace mooring::tls {

// Replaces a certificate and its key (a renewal, a re-enrollment) so that a crash at any point
// leaves a pair that matches once recover_pair has run: both are first written beside their
// files as <file>.next, then the key is renamed into place, the certificate last. `steps` stops
// it after that many of those four steps, as a crash would (tests only).
inline constexpr int kAllPairSteps = 4;
domain::Status replace_pair(const PairPaths& paths, std::string_view key_pem, std::string_view cert_pem,
                            int steps = kAllPairSteps);
// At start-up, before the pair is used: a replacement cut short between its renames left the new
// key with the old certificate; the new certificate (<cert>.next, matching the key) is put in
// place. Leftover *.next files of one cut short earlier are removed. An error when the files
// still do not match (naming them), or cannot be read.
domain::Status recover_pair(const PairPaths& paths);

}  // namespace mooring::tls
