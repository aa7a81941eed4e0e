// CBC's child process and its pipe protocol (cbc_child.h).
#include "solve/cbc_child.h"

#include <CbcModel.hpp>

#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "solve/coin_model.h"

namespace monet::cbc {

bool write_all(int fd, const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t w = ::write(fd, p, bytes);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    bytes -= static_cast<size_t>(w);
  }
  return true;
}

void send(int fd, Msg type, const std::vector<double>& head, const double* x, int n) {
  const uint64_t count = head.size() + static_cast<size_t>(n);
  write_all(fd, &type, 1);
  write_all(fd, &count, sizeof count);
  write_all(fd, head.data(), head.size() * sizeof(double));
  if (n > 0) write_all(fd, x, static_cast<size_t>(n) * sizeof(double));
}

CbcEventHandler::CbcAction ProgressHandler::event(CbcEvent e) {
  if (!model_) return noAction;
  // CBC passes the handler on to the sub-MIPs of its heuristics (RINS and the like), whose columns, solutions and
  // bounds are their own: only the search's own model reports.
  if (model_->parentModel() != nullptr || model_->getNumCols() != n_)
    return shared_->elapsed() > shared_->time_limit_s ? stop : noAction;
  std::lock_guard<std::mutex> lock(pipe_mutex());
  if (model_->bestSolution()) report_locked(*shared_, fd_, model_->getObjValue(), model_->bestSolution(), n_);
  if (bounds_ && (e == node || e == treeStatus || e == endSearch)) {
    const double b = model_->getBestPossibleObjValue();
    if (b != shared_->bound) send(fd_, Msg::bound, {b});
    shared_->bound = b;  // the last one sent
  }
  // CBC checks its own limit only between phases; stop at the first event past it.
  return shared_->elapsed() > shared_->time_limit_s ? stop : noAction;
}

void forget_sent() { ProgressHandler::sent_objective() = 1e300; }

bool drain(int fd, std::string& buffer, ChildReport& rep, Shared& shared, const LinearProgram& lp) {
  const int n = static_cast<int>(lp.col_names.size());
  char chunk[1 << 16];
  for (;;) {
    const ssize_t got = ::read(fd, chunk, sizeof chunk);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (got <= 0) return false;
    buffer.append(chunk, static_cast<size_t>(got));
    for (;;) {
      constexpr size_t header = 1 + sizeof(uint64_t);
      if (buffer.size() < header) break;
      uint64_t count = 0;
      std::memcpy(&count, buffer.data() + 1, sizeof count);
      if (buffer.size() < header + count * sizeof(double)) break;
      std::vector<double> v(count);
      std::memcpy(v.data(), buffer.data() + header, count * sizeof(double));
      const Msg type = static_cast<Msg>(buffer[0]);
      buffer.erase(0, header + count * sizeof(double));
      if (type == Msg::bound && count == 1) {
        rep.bound = v[0];
        if (v[0] > shared.bound) shared.bound = v[0];  // the progress line shows the best bound known
      } else if (type == Msg::solution && count == 2 + static_cast<uint64_t>(n)) {
        std::vector<double> x(v.begin() + 2, v.end());
        if (!satisfies(lp, x)) {
          ++rep.rejected;
          continue;
        }
        rep.objective = v[0];
        if (rep.first_feasible_s < 0) rep.first_feasible_s = v[1];
        rep.x = std::move(x);
        shared.incumbent = v[0];
      } else if (type == Msg::neighborhoods && count == 7) {
        rep.neighborhoods = {.searched = static_cast<int>(v[0]),
                             .improved = static_cast<int>(v[1]),
                             .seconds = v[2],
                             .lp_improved = static_cast<int>(v[3]),
                             .after_runs = static_cast<int>(v[4]),
                             .after_improved = static_cast<int>(v[5]),
                             .after_s = v[6]};
      } else if (type == Msg::restricted && count == 1 + static_cast<uint64_t>(n)) {
        rep.restricted_bound = v[0];
        rep.restricted_x.assign(v.begin() + 1, v.end());
      } else if (type == Msg::done && count >= 5) {
        rep.done = true;
        rep.status = v[0];
        rep.bound = v[2];
        rep.seconds = v[3];
        rep.time_limit_reached = v[4] != 0;
        if (count == 5 + static_cast<uint64_t>(n)) {
          std::vector<double> x(v.begin() + 5, v.end());
          if (satisfies(lp, x)) {
            rep.objective = v[1];
            rep.x = std::move(x);
          } else {
            ++rep.rejected;
            if (rep.status == 0) rep.status = 1;  // not proven optimal for the solution we keep
          }
        }
      }
    }
  }
}

}  // namespace monet::cbc
