// Linked into every executable of a sanitizer build (cmake/Mooring.cmake), test binaries and the
// product binaries the integration tests start alike, so the rule holds however they are run.
//
// One leak report is OpenSSL's, not ours: the 904-byte object allocated by CRYPTO_zalloc is
// OpenSSL 3.0's per-thread error state (ERR_STATE: sixteen entries of eight arrays plus top and
// bottom). It is freed when its thread exits; a gRPC thread still finishing while the process
// exits leaves it unreachable for LeakSanitizer's final scan (grpc/grpc#38539, open upstream).
// It showed once in CI, in AgentRouterTest.OverMutualTlsOnlyTheNodesOwnCertificateIsTrusted,
// whose refused handshake fills that state, with a stack of malloc <- CRYPTO_zalloc only:
// libcrypto has no frame pointers, so the suppression cannot name a deeper frame. It mutes
// leaks of objects OpenSSL allocates zeroed; our code holds OpenSSL objects only through Asio's
// and gRPC's owners, and every other leak is still reported.
extern "C" const char* __lsan_default_suppressions();
extern "C" const char* __lsan_default_suppressions() { return "leak:CRYPTO_zalloc\n"; }
