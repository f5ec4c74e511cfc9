// Status codes → the exceptions of floodgate.errors; argument checks shared by the bindings.
#include <cmath>
#include <string>

#include "bindings.hpp"
#include "floodgate/rate.hpp"

namespace floodgate::python {

namespace {
const char* exception_name(absl::StatusCode code) noexcept {
  switch (code) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return "InvalidArgument";
    case absl::StatusCode::kNotFound:
      return "NotFound";
    case absl::StatusCode::kAlreadyExists:
      return "AlreadyExists";
    case absl::StatusCode::kResourceExhausted:
      return "ResourceExhausted";
    case absl::StatusCode::kFailedPrecondition:
      return "FailedPrecondition";
    case absl::StatusCode::kUnimplemented:
      return "Unsupported";
    case absl::StatusCode::kCancelled:
      return "Cancelled";
    default:  // Unavailable, DeadlineExceeded, Internal, …: the storage failed
      return "StorageError";
  }
}

[[noreturn]] void raise(const char* name, const std::string& message) {
  py::object type = py::module_::import("floodgate.errors").attr(name);
  PyErr_SetString(type.ptr(), message.c_str());
  throw py::error_already_set();
}
}  // namespace

void raise_status(const absl::Status& status, std::string_view argument) {
  std::string message(status.message());
  if (!argument.empty() && status.code() == absl::StatusCode::kInvalidArgument) {
    message = std::string(argument) + ": " + message;
  }
  raise(exception_name(status.code()), message);
}

void raise_wait_status(const absl::Status& status, std::string_view argument) {
  if (status.code() == absl::StatusCode::kDeadlineExceeded) raise("Timeout", std::string(status.message()));
  raise_status(status, argument);
}

std::int64_t checked_count(py::handle value, const char* argument) {
  if (!PyLong_Check(value.ptr()) || PyBool_Check(value.ptr())) {
    throw py::type_error(std::string(argument) + ": expected an int, got " +
                         std::string(py::str(py::type::of(value).attr("__name__"))));
  }
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
  if (overflow == 0 && v >= 0 && v <= kMaxAmount) return v;
  raise("InvalidArgument", std::string(argument) + ": must be an integer from 0 to 2^53, got " +
                               std::string(py::str(value)));
}

Micros checked_seconds(py::handle value, const char* argument, double min_seconds) {
  if (!PyFloat_Check(value.ptr()) && (!PyLong_Check(value.ptr()) || PyBool_Check(value.ptr()))) {
    throw py::type_error(std::string(argument) + ": expected seconds (a float or an int), got " +
                         std::string(py::str(py::type::of(value).attr("__name__"))));
  }
  const double s = value.cast<double>();
  constexpr double kMaxSeconds = 9007199254.740992;  // 2^53 µs
  if (!std::isfinite(s) || s < min_seconds || s > kMaxSeconds) {
    raise("InvalidArgument", std::string(argument) + ": seconds out of range, got " + std::string(py::str(value)));
  }
  return static_cast<Micros>(std::llround(s * 1e6));
}

void bind_errors(py::module_& m) {
  m.def("_raise_for_test", [](int code, const std::string& message) {
    raise_status(absl::Status(static_cast<absl::StatusCode>(code), message));
  }, "Raises the exception of a status code (tests of the mapping).");
}

}  // namespace floodgate::python
