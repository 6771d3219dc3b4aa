/* A program of before DTRACE_1.1: compiled against the recorder.h of then
 * (include/dtrace/recorder.h here, a copy), whose dtrace_run_options ends at
 * replay_cwd. The struct sits in a larger one whose trailing fields stand
 * where 1.1's replica_groups and replica_per_rank would be, holding groups that
 * are invalid for its world_size 1: a library that wrote or read past the
 * caller's struct changes them (init) or refuses them (open). Writes one step
 * to DIR_WITH/rank0.jsonl through dtrace_recorder_open_with and one to
 * DIR_ENV/rank0.jsonl through dtrace_recorder_open. Exit 0 when the library
 * kept to the old struct. */
#include <stdio.h>
#include <string.h>

#include "dtrace/recorder.h"

struct guarded {
  dtrace_run_options options;
  const char* after[2];
};

static const char* const kTrap = "0-9";

static int fail(dtrace_recorder* rec, const char* what) {
  fprintf(stderr, "%s: %s\n", what, dtrace_recorder_last_error(rec));
  dtrace_recorder_close(rec);
  return 1;
}

/* One step in run_dir, the handle opened with open_with or open. */
static int record(const char* run_dir, int with) {
  struct guarded g;
  g.after[0] = kTrap;
  g.after[1] = kTrap;
  dtrace_run_options_init(&g.options);
  if (g.after[0] != kTrap || g.after[1] != kTrap) {
    fprintf(stderr, "dtrace_run_options_init wrote past the old struct\n");
    return 1;
  }
  g.options.run_dir = run_dir;
  g.options.run_name = "old";
  dtrace_recorder* rec = NULL;
  int code = with ? dtrace_recorder_open_with(&g.options, NULL, 0, &rec)
                  : dtrace_recorder_open(&g.options, &rec);
  if (code != DTRACE_OK) return fail(rec, with ? "open_with" : "open");
  if (dtrace_recorder_begin_step(rec, 0) != DTRACE_OK ||
      dtrace_recorder_scalar(rec, DTRACE_LEVEL_STEP, "loss", DTRACE_IO_METRIC, "loss", "f64",
                             0x3ff0000000000000ull, 1.0) != DTRACE_OK ||
      dtrace_recorder_end_step(rec) != DTRACE_OK) {
    return fail(rec, "record");
  }
  return dtrace_recorder_close(rec) == DTRACE_OK ? 0 : 1;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: old_caller DIR_WITH DIR_ENV\n");
    return 2;
  }
  return record(argv[1], 1) || record(argv[2], 0);
}
