// The configuration schema's bounds, shared by the readers of the service's file and of the
// environment.
#pragma once

#include <cstddef>
#include <cstdint>

namespace floodgate::server {

/// The configuration schema's bounds: what the code can represent, with room to spare. Every
/// numeric field of the file is checked against these at load (docs/configuration.md lists them).
namespace limits {
/// HTTP timeouts (idle, request, write, drain), in ms: at most a day, far below where a
/// steady_clock time point plus the timeout overflows nanoseconds.
inline constexpr std::int64_t kMaxTimeoutMs = 86'400'000;
inline constexpr std::int64_t kMaxThreads = 1024;
inline constexpr std::int64_t kMaxHeaderBytes = 1024 * 1024;
inline constexpr std::int64_t kMaxBodyBytes = 64 * 1024 * 1024;
inline constexpr std::int64_t kMaxConnections = 1'000'000;
inline constexpr std::int64_t kMaxPipelined = 1024;
inline constexpr std::int64_t kMaxInlinePolicies = 1'000'000;
inline constexpr std::int64_t kMaxBlockedCache = 10'000'000;
inline constexpr std::int64_t kMaxRlsMessageBytes = 64 * 1024 * 1024;
inline constexpr std::int64_t kMaxRlsDescriptors = 4096;
inline constexpr std::int64_t kMaxRlsEntries = 1024;
inline constexpr std::int64_t kMaxRlsStringBytes = 64 * 1024;
/// The largest xDS response (rls.xds.max_message_bytes): gRPC's own bound of a message is 2 GiB.
inline constexpr std::int64_t kMaxXdsMessageBytes = 1024 * 1024 * 1024;
/// Policy names and override keys, in bytes.
inline constexpr std::size_t kMaxNameBytes = 256;
}  // namespace limits

}  // namespace floodgate::server
