// Errors: monet::Error carries one line for the user; MONET_CHECK adds file:line for internal invariants.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace monet {

// Exit codes shared by every command (documented in docs/errors.md).
enum ExitCode : int {
  kExitOk = 0,
  kExitError = 1,       // bad input, unsupported model, failed check
  kExitInfeasible = 2,  // budget below what any schedule can reach
  kExitCheckFailed = 3, // monet-check: gradients or loss outside the tolerance
  kExitNotFound = 4,    // monet-solve: no schedule found within the time limit (not proven infeasible)
  kExitOutOfMemory = 5, // the arena's reservation (device memory; host memory for the CPU engine) or a host
                        // allocation failed
};

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// The memory to run could not be had; the message starts with "out of memory: " and says how much was asked.
class OutOfMemory : public Error {
 public:
  using Error::Error;
};

namespace detail {
template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}
}  // namespace detail

// Throws monet::Error with the message pieces concatenated.
template <class... Args>
[[noreturn]] void fail(const Args&... args) {
  throw Error(detail::concat(args...));
}

}  // namespace monet

// Internal invariant: a violation is a bug in monet, so the message names the source location.
#define MONET_CHECK(cond, ...)                                                                  \
  do {                                                                                          \
    if (!(cond))                                                                                \
      ::monet::fail("internal error at ", __FILE__, ":", __LINE__, ": ", #cond, " ", ##__VA_ARGS__); \
  } while (0)
