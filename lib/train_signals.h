/* train_signals.h — the trainer's stop signals (lib/train_signals.c):
 * SIGUSR1/SIGTERM (--signals) set a flag; the step loop (train.c) and
 * validation (train_pipeline.c) agree on it at their next boundary. */
#ifndef HPT_TRAIN_SIGNALS_H
#define HPT_TRAIN_SIGNALS_H

#include <signal.h>

#include "train.h"

/* The last stop signal received (0 none); set by the handler, read at step
 * and validation-batch boundaries. */
extern volatile sig_atomic_t train_stop_signal;

/* Check o->signals (NULL: "USR1,TERM") and, when `install`, install the
 * handlers; with `install` 0 the signals keep their default action (no
 * checkpoint directory). SIGXFSZ is ignored either way (a file-size limit
 * fails the write with EFBIG instead). Local. Errors: HPT_ERR_USAGE naming
 * --signals and an unknown signal, or a list naming none. */
hpt_status train_signals_install(const hpt_train_opts *o, int install);

#endif
