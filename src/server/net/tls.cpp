// The service's certificate: loading and checking the PEM files, and swapping them on reload.
#include "server/net/tls.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "server/net/tls_stream.hpp"

namespace floodgate::server {

namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using Bio = std::unique_ptr<BIO, BioFree>;
using Cert = std::unique_ptr<X509, X509Free>;
using Key = std::unique_ptr<EVP_PKEY, KeyFree>;

absl::Status bad(std::string_view field, const std::string& path, std::string_view why) {
  return absl::InvalidArgumentError(fmt::format("tls.{} {}: {}", field, path, why));
}

absl::StatusOr<std::string> read_pem(std::string_view field, const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return bad(field, path, std::strerror(errno));
  struct stat st {};
  std::string text;
  absl::Status s;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    s = bad(field, path, "not a regular file");
  } else if (static_cast<std::size_t>(st.st_size) > kMaxPemBytes) {
    s = bad(field, path, fmt::format("larger than {} bytes", kMaxPemBytes));
  } else {
    text.resize(static_cast<std::size_t>(st.st_size));
    std::size_t got = 0;
    while (got < text.size()) {
      const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    if (got != text.size()) s = bad(field, path, fmt::format("cannot read it: {}", std::strerror(errno)));
  }
  ::close(fd);
  if (!s.ok()) return s;
  return text;
}

Bio memory(const std::string& pem) { return Bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()))); }

// Every certificate of a PEM text (none when it holds none).
std::vector<Cert> certificates(const std::string& pem) {
  std::vector<Cert> out;
  const Bio bio = memory(pem);
  while (X509* x = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) out.emplace_back(x);
  ERR_clear_error();  // the end of the text is an error to OpenSSL
  return out;
}

std::string summarize(X509* leaf) {
  char subject[256] = {0};
  X509_NAME_oneline(X509_get_subject_name(leaf), subject, sizeof subject);
  std::string serial = "?";
  if (BIGNUM* bn = ASN1_INTEGER_to_BN(X509_get_serialNumber(leaf), nullptr)) {
    if (char* hex = BN_bn2hex(bn)) {
      serial = hex;
      OPENSSL_free(hex);
    }
    BN_free(bn);
  }
  std::string expires = "?";
  const Bio out(BIO_new(BIO_s_mem()));
  if (ASN1_TIME_print(out.get(), X509_get0_notAfter(leaf)) == 1) {
    char* data = nullptr;
    const long n = BIO_get_mem_data(out.get(), &data);
    expires.assign(data, static_cast<std::size_t>(n));
  }
  return fmt::format("subject {}, serial {}, expires {}", subject, serial, expires);
}

// The certificate chain, the key and their match; fills `m.summary`.
absl::Status check_identity(const TlsSettings& t, TlsMaterial& m) {
  const std::vector<Cert> chain = certificates(m.cert_chain);
  if (chain.empty()) return bad("cert_file", t.cert_file, "no PEM certificate in it");
  const Bio bio = memory(m.key);
  const Key key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (!key) {
    ERR_clear_error();
    return bad("key_file", t.key_file, "no unencrypted PEM private key in it");
  }
  if (X509_check_private_key(chain.front().get(), key.get()) != 1) {
    ERR_clear_error();
    return bad("key_file", t.key_file, fmt::format("the key does not match the certificate of tls.cert_file {}", t.cert_file));
  }
  m.summary = summarize(chain.front().get());
  return absl::OkStatus();
}

// The HTTPS context (net/tls_stream.hpp). Client certificates, when a CA is given: required, verified
// against it, and the CA's names sent in the request for one.
absl::Status build_http(const TlsSettings& t, TlsMaterial& m) {
  if (!m.client_ca.empty() && certificates(m.client_ca).empty()) {
    return bad("client_ca_file", t.client_ca_file, "no PEM certificate in it");
  }
  auto ctx = detail::TlsServerContext::create(m.cert_chain, m.key, m.client_ca);
  if (!ctx.ok()) {
    return bad("cert_file", t.cert_file, fmt::format("{} (tls.key_file {}, tls.client_ca_file {})",
                                                     std::string(ctx.status().message()), t.key_file,
                                                     t.client_ca_file.empty() ? "none" : t.client_ca_file));
  }
  m.http = *std::move(ctx);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<const TlsMaterial>> load_tls(const TlsSettings& t) {
  if (!t.enabled()) {
    if (t.mutual()) return bad("client_ca_file", t.client_ca_file, "client certificates need tls.cert_file and tls.key_file");
    return std::shared_ptr<const TlsMaterial>();
  }
  if (t.cert_file.empty()) return absl::InvalidArgumentError("tls.key_file is set without tls.cert_file");
  if (t.key_file.empty()) return absl::InvalidArgumentError("tls.cert_file is set without tls.key_file");
  auto m = std::make_shared<TlsMaterial>();
  for (auto [field, path, into] : {std::tuple{"cert_file", &t.cert_file, &m->cert_chain},
                                   std::tuple{"key_file", &t.key_file, &m->key},
                                   std::tuple{"client_ca_file", &t.client_ca_file, &m->client_ca}}) {
    if (path->empty()) continue;
    auto text = read_pem(field, *path);
    if (!text.ok()) return text.status();
    *into = *std::move(text);
  }
  if (auto s = check_identity(t, *m); !s.ok()) return s;
  if (auto s = build_http(t, *m); !s.ok()) return s;
  return std::shared_ptr<const TlsMaterial>(std::move(m));
}

absl::StatusOr<std::unique_ptr<TlsState>> TlsState::create(std::shared_ptr<const TlsMaterial> first, bool grpc_files) {
  std::unique_ptr<TlsState> state(new TlsState());
  if (grpc_files) {
    std::string templ = (std::filesystem::temp_directory_path() / "floodgate-tls-XXXXXX").string();
    if (::mkdtemp(templ.data()) == nullptr) {
      return absl::InternalError(fmt::format("cannot make a private directory for gRPC's certificate: {}",
                                             std::strerror(errno)));
    }
    state->dir_ = templ;  // mkdtemp makes it 0700
    if (auto s = state->write_files(*first); !s.ok()) return s;
  }
  state->current_ = std::move(first);
  return state;
}

TlsState::~TlsState() {
  std::error_code ignored;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
}

std::shared_ptr<const TlsMaterial> TlsState::current() const {
  const std::lock_guard lock(mu_);
  return current_;
}

absl::Status TlsState::install(std::shared_ptr<const TlsMaterial> next) {
  if (next->client_ca.empty() != current()->client_ca.empty()) {
    return absl::FailedPreconditionError("turning client certificates (tls.client_ca_file) on or off needs a restart");
  }
  if (auto s = write_files(*next); !s.ok()) return s;
  const std::lock_guard lock(mu_);
  current_ = std::move(next);
  return absl::OkStatus();
}

// Each file whole or not at all (written beside, then renamed), the key never readable by others.
// gRPC reads the key and the certificate one after the other: a read that falls between the two
// renames (a window of microseconds, once per reload) may see a mismatched pair until its next
// read, a second later.
absl::Status TlsState::write_files(const TlsMaterial& m) const {
  if (dir_.empty()) return absl::OkStatus();
  for (auto [name, text] : {std::pair{"key.pem", &m.key}, std::pair{"cert.pem", &m.cert_chain},
                            std::pair{"client-ca.pem", &m.client_ca}}) {
    if (text->empty()) continue;
    const std::string path = file(name);
    const std::string tmp = path + ".tmp";
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    const bool ok = fd >= 0 && ::write(fd, text->data(), text->size()) == static_cast<ssize_t>(text->size());
    if (fd >= 0) ::close(fd);
    if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
      return absl::InternalError(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
    }
  }
  return absl::OkStatus();
}

}  // namespace floodgate::server
