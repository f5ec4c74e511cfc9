// The service's certificate without sockets: load_tls (the one check of the tls files) and
// TlsState (what a reload swaps, and the private copies gRPC reads). Certificates are made per
// test run by tests/support/make_test_certs.sh.
#include "server/net/tls.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace floodgate::server {
namespace {

namespace fs = std::filesystem;

class Tls : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / ("floodgate-tls-test-" + std::to_string(getpid())));
    const std::string make = std::string(FLOODGATE_SOURCE_DIR) + "/tests/support/make_test_certs.sh ";
    ASSERT_EQ(std::system((make + dir_->string() + " >/dev/null 2>&1").c_str()), 0);
    ASSERT_EQ(std::system((make + dir_->string() + " server server2 >/dev/null 2>&1").c_str()), 0);
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }
  static std::string file(const char* name) { return (*dir_ / name).string(); }
  static std::string read(const std::string& path) {
    std::ifstream in(path);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  static TlsSettings server(bool mutual = false) {
    return {file("server.crt"), file("server.key"), mutual ? file("ca.crt") : ""};
  }
  static std::string error(const TlsSettings& t) {
    auto m = load_tls(t);
    return m.ok() ? "ok" : std::string(m.status().message());
  }
  static fs::path* dir_;
};
fs::path* Tls::dir_ = nullptr;

TEST_F(Tls, OffWithoutFiles) {
  auto m = load_tls({});
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(*m, nullptr);
}

TEST_F(Tls, GoodFilesGiveAnHttpsContextAndASummary) {
  auto m = load_tls(server(true));
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_NE((*m)->http, nullptr);
  EXPECT_EQ((*m)->cert_chain, read(file("server.crt")));
  EXPECT_EQ((*m)->client_ca, read(file("ca.crt")));
  EXPECT_NE((*m)->summary.find("CN=localhost"), std::string::npos) << (*m)->summary;
}

TEST_F(Tls, EachBadFileIsNamed) {
  EXPECT_EQ(error({file("nope.crt"), file("server.key"), ""}),
            "tls.cert_file " + file("nope.crt") + ": No such file or directory");
  EXPECT_EQ(error({file("server.crt"), file("client.key"), ""}),
            "tls.key_file " + file("client.key") + ": the key does not match the certificate of tls.cert_file " +
                file("server.crt"));
  EXPECT_EQ(error({file("server.crt"), file("server.crt"), ""}),
            "tls.key_file " + file("server.crt") + ": no unencrypted PEM private key in it");
  EXPECT_EQ(error({file("server.key"), file("server.key"), ""}),
            "tls.cert_file " + file("server.key") + ": no PEM certificate in it");
  EXPECT_EQ(error({file("server.crt"), file("server.key"), file("server.key")}),
            "tls.client_ca_file " + file("server.key") + ": no PEM certificate in it");
  EXPECT_EQ(error({file("server.crt"), file("server.key"), dir_->string()}),
            "tls.client_ca_file " + dir_->string() + ": not a regular file");
}

TEST_F(Tls, HalfASetIsRefused) {
  EXPECT_EQ(error({file("server.crt"), "", ""}), "tls.cert_file is set without tls.key_file");
  EXPECT_EQ(error({"", file("server.key"), ""}), "tls.key_file is set without tls.cert_file");
  EXPECT_EQ(error({"", "", file("ca.crt")}),
            "tls.client_ca_file " + file("ca.crt") + ": client certificates need tls.cert_file and tls.key_file");
}

TEST_F(Tls, AFileLargerThanTheBoundIsRefused) {
  const std::string big = file("big.crt");
  std::ofstream(big) << std::string(kMaxPemBytes + 1, 'x');
  EXPECT_NE(error({big, file("server.key"), ""}).find("larger than 1048576 bytes"), std::string::npos);
}

// gRPC's provider reads private copies: written whole, 0600 in a 0700 directory, swapped by
// install, removed with the state.
TEST_F(Tls, PrivateCopiesFollowInstallAndGoAway) {
  auto first = load_tls(server(true));
  ASSERT_TRUE(first.ok());
  auto state = TlsState::create(*first, true);
  ASSERT_TRUE(state.ok()) << state.status();
  const fs::path dir = fs::path((*state)->key_path()).parent_path();
  struct stat st {};
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_EQ(::stat((*state)->key_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(read((*state)->cert_path()), read(file("server.crt")));
  EXPECT_EQ(read((*state)->client_ca_path()), read(file("ca.crt")));

  auto next = load_tls({file("server2.crt"), file("server2.key"), file("ca.crt")});
  ASSERT_TRUE(next.ok());
  ASSERT_TRUE((*state)->install(*next).ok());
  EXPECT_EQ((*state)->current(), *next);
  EXPECT_EQ(read((*state)->cert_path()), read(file("server2.crt")));
  EXPECT_EQ(read((*state)->key_path()), read(file("server2.key")));
  state->reset();
  EXPECT_FALSE(fs::exists(dir));
}

TEST_F(Tls, TurningClientCertificatesOnOrOffNeedsARestart) {
  auto state = TlsState::create(*load_tls(server(false)), true);
  ASSERT_TRUE(state.ok());
  const auto before = (*state)->current();
  const absl::Status s = (*state)->install(*load_tls(server(true)));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ((*state)->current(), before);
  EXPECT_FALSE(fs::exists((*state)->client_ca_path()));
}

TEST_F(Tls, WithoutGrpcNothingIsWritten) {
  auto state = TlsState::create(*load_tls(server()), false);
  ASSERT_TRUE(state.ok());
  EXPECT_EQ((*state)->key_path(), "");
}

}  // namespace
}  // namespace floodgate::server
