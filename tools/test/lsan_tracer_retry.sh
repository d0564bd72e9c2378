#!/usr/bin/env bash
# Runs a test program of the sanitizer build (CTest's launcher for the opencl tests there) and,
# when the run failed only because LeakSanitizer itself crashed at exit, runs it once more.
#
# At exit LeakSanitizer stops every thread of the process from a tracer thread to scan their
# stacks; under load that tracer now and then dies ("Tracer caught signal 11") while PoCL's worker
# threads are about, after every test of the run has passed. That is the checker failing, not the
# test, and the leak check never ran: so the program runs again, which checks for leaks afresh. A
# leak report, a failed test or any other crash is the run's result as it stands.
set -u
log=$(mktemp) || exit 1
trap 'rm -f "$log"' EXIT
"$@" > "$log" 2>&1
status=$?
cat "$log"
if ((status != 0)) && grep -q '^Tracer caught signal' "$log" &&
   ! grep -q 'ERROR: LeakSanitizer: detected memory leaks' "$log" && ! grep -q '^\[  FAILED  \]' "$log"; then
  echo "lsan_tracer_retry.sh: LeakSanitizer's tracer crashed at exit (not a test): running the program again"
  "$@"
  exit $?
fi
exit "$status"
