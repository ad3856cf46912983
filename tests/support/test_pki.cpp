#include "tests/support/test_pki.hpp"

#include <cstdlib>
#include <fstream>
#include <stdexcept>

namespace mooring::test {

namespace fs = std::filesystem;

namespace {

void run(const std::string& command) {
  const std::string quiet = command + " >/dev/null 2>&1";
  if (std::system(quiet.c_str()) != 0) throw std::runtime_error("test PKI: command failed: " + command);
}

const char* kNewKey = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";

}  // namespace

TestPki::TestPki(fs::path dir) : dir_(std::move(dir)) {
  fs::create_directories(dir_);
  ca_ = make_ca("ca");
  other_ = make_ca("other-ca");
}

CertFiles TestPki::make_ca(const std::string& name) const {
  CertFiles f{dir_ / (name + ".pem"), dir_ / (name + "-key.pem")};
  run("openssl req -x509 " + std::string(kNewKey) + " -days 1 -subj /CN=mooring-test-" + name + " -keyout " +
      f.key.string() + " -out " + f.cert.string());
  return f;
}

CertFiles TestPki::issue(const std::string& name, const std::vector<std::string>& sans, bool by_other) const {
  const CertFiles& signer = by_other ? other_ : ca_;
  CertFiles f{dir_ / (name + ".pem"), dir_ / (name + "-key.pem")};
  const auto csr = dir_ / (name + ".csr");
  const auto ext = dir_ / (name + ".ext");
  {
    std::ofstream out(ext);
    std::string list;
    for (const auto& s : sans) list += (list.empty() ? "" : ",") + s;
    if (!list.empty()) out << "subjectAltName=" << list << "\n";
    out << "extendedKeyUsage=serverAuth,clientAuth\n";
  }
  run("openssl req " + std::string(kNewKey) + " -subj /CN=" + name + " -keyout " + f.key.string() + " -out " +
      csr.string());
  run("openssl x509 -req -days 1 -in " + csr.string() + " -CA " + signer.cert.string() + " -CAkey " +
      signer.key.string() + " -CAcreateserial -extfile " + ext.string() + " -out " + f.cert.string());
  return f;
}

}  // namespace mooring::test
