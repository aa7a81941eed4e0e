// Logging of the commands: progress and notes at info, detail at debug, all on stderr through spdlog, so that
// stdout carries only results. -q shows warnings only, -v adds debug. The library logs through spdlog's default
// logger; a command calls setup_logging once, after parsing its flags.
#pragma once

#include <string>

namespace monet {

enum class Verbosity { quiet, normal, verbose };

// Replaces spdlog's default logger with one that writes "<message>" lines to stderr at the verbosity's level
// (quiet: warn, normal: info, verbose: debug), flushing every line.
void setup_logging(Verbosity v);

}  // namespace monet
