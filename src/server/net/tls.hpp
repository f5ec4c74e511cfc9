// The service's own certificate, for HTTPS and gRPC over TLS: read, checked, swapped on reload.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "server/config/config.hpp"

namespace floodgate::server::detail {
class TlsServerContext;
}

namespace floodgate::server {

/// The largest PEM file accepted (a chain of a few certificates is a few kB).
inline constexpr std::size_t kMaxPemBytes = 1024 * 1024;

/// A checked set of files, ready to serve. Immutable once built.
struct TlsMaterial {
  std::string cert_chain;  ///< PEM text, as read
  std::string key;         ///< PEM text, as read
  std::string client_ca;   ///< PEM text; empty: no client certificate is asked for
  /// The HTTPS context built from them (TLS 1.2 or later; with a client CA, a client certificate
  /// is required and verified against it).
  std::shared_ptr<const detail::TlsServerContext> http;
  /// The leaf certificate for the log: "subject …, serial …, expires …".
  std::string summary;
};

/// Reads and checks `tls`: the one validator of the `tls` section and of its command-line options,
/// run by --check-config, at start and on every reload. A certificate without a key (or the
/// reverse), or a client CA without them, is an error; each file must be a readable regular file
/// of at most kMaxPemBytes; the certificate chain, the key (unencrypted) and the CA file must
/// parse; the key must match the certificate. Returns null when TLS is off.
/// Errors: InvalidArgument naming the field and the file ("tls.key_file /etc/x.key: …").
absl::StatusOr<std::shared_ptr<const TlsMaterial>> load_tls(const TlsSettings& tls);

/// The material in force, shared by the listeners. `install` swaps it: connections already open
/// keep the certificate of their handshake, new handshakes use the new one.
///
/// gRPC takes its certificate from a provider that re-reads files (once a second), so for it the
/// material is also written to a private directory (mode 0700 under the temporary directory,
/// removed by the destructor): only checked material ever gets there, so a bad file given to a
/// reload never reaches gRPC either.
///
/// Thread-safety: `current` from any thread; `install` from one controlling thread.
class TlsState {
 public:
  /// `grpc_files`: also keep the private copies for gRPC. Errors: Internal (cannot write them).
  static absl::StatusOr<std::unique_ptr<TlsState>> create(std::shared_ptr<const TlsMaterial> first, bool grpc_files);
  ~TlsState();
  TlsState(const TlsState&) = delete;
  TlsState& operator=(const TlsState&) = delete;

  [[nodiscard]] std::shared_ptr<const TlsMaterial> current() const;
  /// Swaps in `next`. Refused (FailedPrecondition, nothing changes) when it turns client
  /// certificates on or off, which the gRPC listener fixes at start; Internal when the copies
  /// cannot be written (the old material stays).
  absl::Status install(std::shared_ptr<const TlsMaterial> next);

  /// The private copies gRPC's provider watches (empty without `grpc_files`).
  [[nodiscard]] std::string key_path() const { return file("key.pem"); }
  [[nodiscard]] std::string cert_path() const { return file("cert.pem"); }
  [[nodiscard]] std::string client_ca_path() const { return file("client-ca.pem"); }

 private:
  TlsState() = default;
  [[nodiscard]] std::string file(const char* name) const { return dir_.empty() ? "" : (dir_ / name).string(); }
  absl::Status write_files(const TlsMaterial& m) const;

  mutable std::mutex mu_;
  std::shared_ptr<const TlsMaterial> current_;
  std::filesystem::path dir_;
};

}  // namespace floodgate::server
