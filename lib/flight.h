/* flight.h — the collective flight recorder: a per-rank ring of the last N
 * communication operations (group, operation, bytes, per-group sequence
 * number, start/end time, posted or completed) and the live state the hang
 * watchdog reads (lib/watchdog.h).
 *
 * One writer (the training thread, through the recording layer in
 * lib/comm.c) and any number of readers (the watchdog thread): every ring
 * slot is a seqlock, the counters are atomics; recording an operation
 * allocates nothing and takes no lock (two clock reads, a few relaxed
 * stores). Times are CLOCK_MONOTONIC seconds.
 */
#ifndef HPT_FLIGHT_H
#define HPT_FLIGHT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define HPT_FLIGHT_GROUPS 9  /* = HPT_GROUP_COUNT (lib/comm.h); checked there */
#define HPT_FLIGHT_DEFAULT 256

typedef enum {
    HPT_FLIGHT_ALLREDUCE,
    HPT_FLIGHT_IALLREDUCE,
    HPT_FLIGHT_ALLGATHER,
    HPT_FLIGHT_ALLGATHERV,
    HPT_FLIGHT_REDUCE_SCATTER,
    HPT_FLIGHT_BROADCAST,
    HPT_FLIGHT_ISEND,
    HPT_FLIGHT_RECV,
    HPT_FLIGHT_GATHER,  /* a direct MPI_Gather (hpt_comm_watch_begin) */
    HPT_FLIGHT_BARRIER, /* a direct MPI_Ibarrier waited on (checkpoint commit) */
    HPT_FLIGHT_OP_COUNT
} hpt_flight_op;

/* One operation as recorded. */
typedef struct {
    int64_t id;       /* operation number on this rank, from 0              */
    int64_t seq;      /* per-group sequence number, from 1                  */
    int64_t bytes;    /* payload bytes handed to the call by this rank      */
    double t_start;   /* posted (monotonic seconds)                         */
    double t_end;     /* completed; 0 while posted                          */
    int32_t group;    /* hpt_group                                          */
    int32_t op;       /* hpt_flight_op                                      */
    int32_t peer;     /* point-to-point: the peer's world rank; else -1     */
    int32_t pad;
} hpt_flight_rec;

typedef struct {
    _Atomic uint32_t ver; /* seqlock: odd while the writer updates rec */
    hpt_flight_rec rec;
} hpt_flight_slot;

typedef struct hpt_flight {
    size_t n;                                  /* ring slots               */
    _Atomic int64_t nops;                      /* operations posted so far  */
    _Atomic int64_t posted[HPT_FLIGHT_GROUPS]; /* per group: last seq posted */
    _Atomic int64_t completed[HPT_FLIGHT_GROUPS]; /* per group: ops completed */
    _Atomic int64_t blocked;    /* id of the op the training thread waits in; -1 */
    _Atomic int64_t blocked_ns; /* when that wait began (monotonic ns)       */
    _Atomic int64_t progress_ns; /* last post, completion or step boundary  */
    _Atomic int64_t step;       /* the step being trained (1-based), 0 before */
    _Atomic int in_step;        /* 1 between hpt_flight_step_begin and _end  */
    _Atomic int64_t save_ns;    /* when the training thread entered a
                                 * checkpoint save (monotonic ns); 0 outside */
    hpt_flight_slot *slots;     /* n slots, one allocation                  */
    /* capture (the step timeline, lib/trace.h): operations with id >=
     * cap_first are also copied into cap[id - cap_first] while that is
     * < cap_n; training thread only, the watchdog never reads it */
    hpt_flight_rec *cap;
    int64_t cap_first;
    size_t cap_n;
} hpt_flight;

/* Names for dumps and messages ("allreduce", ...; "tp", ...). */
const char *hpt_flight_op_name(int op);
const char *hpt_flight_group_name(int group);

/* Monotonic clock in seconds / nanoseconds. */
double hpt_flight_now(void);
int64_t hpt_flight_now_ns(void);

/* A recorder of n slots (n >= 1), zeroed; NULL when out of memory. The
 * ring size for a run: hpt_flight_size_from_env() reads
 * HPT_FLIGHT_RECORDER (unset: 256; 0: off, returns 0; N: N slots). */
hpt_flight *hpt_flight_new(size_t n);
size_t hpt_flight_size_from_env(void);

/* HPT_FLIGHT_RECORDER's value checked: HPT_OK when unset or 0..
 * HPT_FLIGHT_MAX; else HPT_ERR_USAGE naming the value (hpt_flight_size_from
 * _env then falls back to the default, so a program must call this to
 * refuse it). */
#define HPT_FLIGHT_MAX (1 << 20)
hpt_status hpt_flight_check_env(void);
/* Free; accepts NULL. No reader may still use it. */
void hpt_flight_free(hpt_flight *f);

/* Record that an operation is posted (op on `group`, `bytes`, peer world
 * rank or -1); returns its id for hpt_flight_done. Training thread only. */
int64_t hpt_flight_post(hpt_flight *f, int group, int op, int64_t bytes, int peer);
/* The training thread now waits for operation `id` (a blocking call or a
 * wait on a nonblocking one). */
void hpt_flight_block(hpt_flight *f, int64_t id);
/* hpt_flight_post + hpt_flight_block with one clock read (a blocking
 * call). */
int64_t hpt_flight_post_blocking(hpt_flight *f, int group, int op, int64_t bytes, int peer);
/* Operation `id` on `group` completed (its slot is updated if the ring
 * has not overwritten it); the training thread no longer waits. */
void hpt_flight_done(hpt_flight *f, int64_t id, int group);
/* Step boundaries: the watchdog's "no progress inside a step" clock. */
void hpt_flight_step_begin(hpt_flight *f, int64_t step);
void hpt_flight_step_end(hpt_flight *f);
/* A checkpoint save (its collectives inside HDF5 are not recorded): the
 * watchdog's "in a save" clock, from _begin to _end. NULL f is accepted. */
void hpt_flight_save_begin(hpt_flight *f);
void hpt_flight_save_end(hpt_flight *f);

/* Capture (training thread only): from the next operation on, each one
 * posted is also copied into buf[0 .. n) in posting order, its t_end
 * set when it completes; buf NULL stops. The ring is unaffected; a
 * capture never allocates. hpt_flight_capture_take returns how many
 * operations were posted since the capture (re)started (those beyond n
 * were not kept) and restarts it at buf[0] with the next operation. */
void hpt_flight_capture(hpt_flight *f, hpt_flight_rec *buf, size_t n);
int64_t hpt_flight_capture_take(hpt_flight *f);

/* Reader side (any thread). Copy operation `id` into *out; 0 when it has
 * left the ring (or was never posted), 1 on success. */
int hpt_flight_get(const hpt_flight *f, int64_t id, hpt_flight_rec *out);
/* Copy the ring, oldest first, into out (room for f->n records); returns
 * the number copied. */
size_t hpt_flight_snapshot(const hpt_flight *f, hpt_flight_rec *out);

#endif
