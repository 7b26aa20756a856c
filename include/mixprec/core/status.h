// status.h: expected, recoverable failures (bad file, bad flag, unsupported dtype) travel as
// Status; broken invariants inside the engine fail loudly with MIXPREC_CHECK.
#pragma once
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace mixprec {

enum class StatusCode : int {
  ok = 0,
  invalid_argument,  // wrong shape, dtype, flag value: the caller's mistake
  data_loss,         // corrupt or truncated file
  not_found,         // missing file or directory
  unimplemented,     // no kernel for this dtype/shape on this machine
  io_error,          // the OS refused a read or write
  diverged,          // training produced a non-finite loss
  bad_checkpoint,    // a checkpoint to resume from is missing, corrupt or does not fit
  busy,              // a resource (a run directory) is held by another process
  distributed,       // a data-parallel job's ranks disagree, or one stopped responding
  internal,
  resource_exhausted,  // not enough memory: a run's estimate exceeds what the machine has
};

class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status ok() { return {}; }
  static Status invalid_argument(std::string m) { return {StatusCode::invalid_argument, std::move(m)}; }
  static Status data_loss(std::string m) { return {StatusCode::data_loss, std::move(m)}; }
  static Status not_found(std::string m) { return {StatusCode::not_found, std::move(m)}; }
  static Status unimplemented(std::string m) { return {StatusCode::unimplemented, std::move(m)}; }
  static Status io_error(std::string m) { return {StatusCode::io_error, std::move(m)}; }
  static Status diverged(std::string m) { return {StatusCode::diverged, std::move(m)}; }
  static Status internal(std::string m) { return {StatusCode::internal, std::move(m)}; }
  static Status resource_exhausted(std::string m) { return {StatusCode::resource_exhausted, std::move(m)}; }

  bool is_ok() const { return code_ == StatusCode::ok; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  const char* code_name() const;

 private:
  StatusCode code_ = StatusCode::ok;
  std::string message_;
};

// The exception thrown by the tensor API on misuse (shape or dtype mismatch, backward on a
// non-scalar without a gradient). Carries a Status so a CLI can map it to an exit code.
class Error : public std::runtime_error {
 public:
  explicit Error(Status s) : std::runtime_error(s.message()), status_(std::move(s)) {}
  const Status& status() const { return status_; }

 private:
  Status status_;
};

template <typename T>
class StatusOr {
 public:
  StatusOr(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design, like absl
  StatusOr(Status s) : v_(std::move(s)) {}      // NOLINT
  bool is_ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return is_ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  std::variant<T, Status> v_;
};

// Throws Error(status) unless ok: the bridge from Status-returning internals to the
// exception-based tensor API.
void throw_if_error(const Status& s);

namespace detail {
[[noreturn]] void check_failed(const char* file, int line, const char* cond, const std::string& msg);
}

}  // namespace mixprec

#define MIXPREC_RETURN_IF_ERROR(expr)          \
  do {                                          \
    ::mixprec::Status s_ = (expr);              \
    if (!s_.is_ok()) return s_;                 \
  } while (0)

// Broken invariant: an engine bug, never the user's input. Stays on in Release builds.
#define MIXPREC_CHECK(cond, msg)                                                  \
  do {                                                                            \
    if (!(cond)) ::mixprec::detail::check_failed(__FILE__, __LINE__, #cond, (msg)); \
  } while (0)
