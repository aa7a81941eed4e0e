# Sourced by scripts/test_sanitized.sh and scripts/fuzz.sh: sanitizer settings for the sanitized trees.
# Reports are fatal and print a full stack; suppressions (if any) live in scripts/sanitizer/ with a reason each.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export ASAN_OPTIONS="abort_on_error=1:strict_string_checks=1:check_initialization_order=1:detect_leaks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export LSAN_OPTIONS="suppressions=$here/sanitizer/lsan.supp:print_suppressions=0"
