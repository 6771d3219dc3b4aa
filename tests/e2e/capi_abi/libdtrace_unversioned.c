/* Stands in at link time for the libdtrace of before DTRACE_1.1: the same
 * soname and unversioned symbols (it had no symbol versions), so old_caller
 * links as a program built then did. It is never run: old_caller runs against today's libdtrace. */
#include "dtrace/recorder.h"

void dtrace_run_options_init(dtrace_run_options* options) { (void)options; }
int dtrace_recorder_open_with(const dtrace_run_options* options, const char* const* variables,
                              size_t count, dtrace_recorder** out) {
  (void)options, (void)variables, (void)count, (void)out;
  return DTRACE_ERROR_INTERNAL;
}
int dtrace_recorder_open(const dtrace_run_options* options, dtrace_recorder** out) {
  (void)options, (void)out;
  return DTRACE_ERROR_INTERNAL;
}
int dtrace_recorder_close(dtrace_recorder* recorder) {
  (void)recorder;
  return DTRACE_ERROR_INTERNAL;
}
const char* dtrace_recorder_last_error(const dtrace_recorder* recorder) {
  (void)recorder;
  return "";
}
int dtrace_recorder_begin_step(dtrace_recorder* recorder, int64_t step) {
  (void)recorder, (void)step;
  return DTRACE_ERROR_INTERNAL;
}
int dtrace_recorder_end_step(dtrace_recorder* recorder) {
  (void)recorder;
  return DTRACE_ERROR_INTERNAL;
}
int dtrace_recorder_scalar(dtrace_recorder* recorder, int32_t level, const char* op, int32_t io,
                           const char* name, const char* dtype, uint64_t bits, double value) {
  (void)recorder, (void)level, (void)op, (void)io, (void)name, (void)dtype, (void)bits, (void)value;
  return DTRACE_ERROR_INTERNAL;
}
