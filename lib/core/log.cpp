#include "core/log.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace monet {

void setup_logging(Verbosity v) {
  auto logger = spdlog::stderr_logger_st("monet");
  spdlog::drop("monet");  // registered by the factory; the default logger below is the only handle kept
  logger->set_pattern("%v");
  logger->set_level(v == Verbosity::quiet ? spdlog::level::warn
                    : v == Verbosity::verbose ? spdlog::level::debug
                                              : spdlog::level::info);
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(logger);
}

}  // namespace monet
