/* train_signals.c — the trainer's stop signals: the list (--signals)
 * parsed and checked, the handlers that only set a flag the step loop and
 * validation agree on at their next boundary; see train_signals.h. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "train_signals.h"

/* Set by SIGUSR1/SIGTERM: checkpoint at the next step boundary. */
volatile sig_atomic_t train_stop_signal;

static void on_stop_signal(int sig) { train_stop_signal = sig; }

static const struct {
    const char *name;
    int sig;
} signal_names[] = {{"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"TERM", SIGTERM}, {"INT", SIGINT},
                    {"HUP", SIGHUP},   {"QUIT", SIGQUIT}, {"XCPU", SIGXCPU}};

/* Parse "USR1,TERM" into a signal set. Errors: HPT_ERR_USAGE naming the
 * unknown signal and the accepted ones, or an empty list ("", ","). */
static hpt_status parse_signals(const char *list, sigset_t *set)
{
    sigemptyset(set);
    if (!list[strspn(list, ",")])
        return hpt_error_set(HPT_ERR_USAGE, "--signals '%s': names no signal (give at least one, "
                             "e.g. USR1,TERM; --no-signal-save keeps the default actions)", list);
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (!strncmp(t, "SIG", 3))
            t += 3;
        size_t i = 0, n = sizeof signal_names / sizeof signal_names[0];
        while (i < n && strcmp(signal_names[i].name, t))
            i++;
        if (i == n)
            return hpt_error_set(HPT_ERR_USAGE, "--signals '%s': unknown signal '%s' (accepted: "
                                 "USR1, USR2, TERM, INT, HUP, QUIT, XCPU)", list, t);
        sigaddset(set, signal_names[i].sig);
    }
    return HPT_OK;
}

/* The stop signals only set a flag (a second one during a save changes
 * nothing); the step loop agrees on it at the next boundary. The list is
 * checked either way; with `install` 0 the signals keep their default
 * action (no checkpoint dir). */
hpt_status train_signals_install(const hpt_train_opts *o, int install)
{
    sigset_t set;
    hpt_status st = parse_signals(o->signals ? o->signals : "USR1,TERM", &set);
    if (st)
        return st;
    signal(SIGXFSZ, SIG_IGN); /* a file-size limit fails the write (EFBIG) instead */
    if (!install)
        return HPT_OK;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof signal_names / sizeof signal_names[0]; i++)
        if (sigismember(&set, signal_names[i].sig))
            sigaction(signal_names[i].sig, &sa, NULL);
    return HPT_OK;
}
