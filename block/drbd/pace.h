/*
 * DRBD-style replication: how fast a resync goes, and how fast it went
 *
 * Pure code: no I/O, no locks, no QEMU globals.  The caller passes the
 * time and the amounts and holds whatever lock protects the structures.
 *
 * The controller (DRBD's dynamic resync-rate controller, c-plan-ahead and
 * the options after it) runs once per step of DRBD_PACE_STEP_NS.  At each
 * step the resync tells it how many bytes the peer answered during the
 * step before and how many are still unanswered ("in flight"), and it
 * says how many bytes the resync may send during this step.  It aims at
 * a number of bytes in flight: c-fill-target, or, if that is 0, what the
 * peer answers in c-delay-target at the present rate.  The difference
 * between that aim and what is in flight or already planned is spread
 * over the next c-plan-ahead worth of steps, so that the rate follows
 * the link and the peer's disk smoothly rather than by jumps; c-max-rate
 * caps every step.  When a step finds nothing in flight and nothing
 * answered (the start, or after a stall), it plans the start rate for
 * c-plan-ahead or, without one, aims at c-fill-target
 * (DRBD_PACE_START_FILL in delay-target mode).
 *
 * The throttle (c-min-rate): while the guest does I/O on the node, the
 * resync stops sending for the rest of a step whenever its recent rate is
 * above c-min-rate, so that it yields the link and the disks to the guest
 * but never falls far below c-min-rate.
 *
 * The marks record how much of a resync or a verify was done when, one
 * mark per DRBD_PACE_MARK_STEP_NS, for the speed shown in query-drbd and
 * HMP "info drbd": the current speed, over the last marks, the average
 * since the start, and the time left at the current speed.
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef BLOCK_DRBD_PACE_H
#define BLOCK_DRBD_PACE_H

/* The controller's step: 100 ms, as DRBD's */
#define DRBD_PACE_STEP_NS       (100 * 1000 * 1000LL)
#define DRBD_PACE_STEPS_PER_SEC 10
/* The longest c-plan-ahead, in steps (30 s) */
#define DRBD_PACE_MAX_PLAN      300
/* Steps over which the throttle measures the resync's recent rate */
#define DRBD_PACE_RATE_STEPS    10
/* What to have in flight at the start without a start rate or fill target */
#define DRBD_PACE_START_FILL    (4 * 1024 * 1024)
/* Guest I/O since the throttle last looked that counts as activity */
#define DRBD_PACE_APP_BYTES     (32 * 1024)

typedef struct DrbdPaceParams {
    uint64_t plan_ahead_ns;     /* c-plan-ahead; 0: the controller is off */
    uint64_t fill_target;       /* c-fill-target, bytes; 0: delay target */
    uint64_t delay_target_ns;   /* c-delay-target */
    uint64_t max_rate;          /* c-max-rate, bytes/s; 0: no cap */
    uint64_t min_rate;          /* c-min-rate, bytes/s; 0: no throttle */
    uint64_t start_rate;        /* bytes/s planned at the start, or 0 */
} DrbdPaceParams;

typedef struct DrbdPace {
    DrbdPaceParams p;
    unsigned steps;                     /* c-plan-ahead in steps */
    int64_t plan[DRBD_PACE_MAX_PLAN];   /* bytes planned per coming step */
    unsigned head;                      /* plan[head] is the next step */
    int64_t planned;                    /* the sum of plan[] */
    /* Bytes answered in each of the last steps, for the throttle */
    uint64_t answered[DRBD_PACE_RATE_STEPS];
    unsigned nanswered;                 /* steps recorded, at most all */
    uint64_t app_seen;                  /* guest bytes the throttle saw */
    bool app_valid;                     /* app_seen was set */
} DrbdPace;

/*
 * Check @p: fills @errp with a message naming the option and returns
 * false if a value is out of range
 */
bool drbd_pace_params_check(const DrbdPaceParams *p, Error **errp);

/* A resync starts with the parameters @p (checked) */
void drbd_pace_init(DrbdPace *c, const DrbdPaceParams *p);

/*
 * A new step: @answered bytes were answered by the peer since the last
 * step, @in_flight bytes are sent and not answered.  Returns the bytes
 * the resync may send during the step.
 */
uint64_t drbd_pace_step(DrbdPace *c, uint64_t answered, uint64_t in_flight);

/*
 * Whether the resync must stop sending for the rest of the step: the
 * guest did I/O since the last look (@app_bytes counts every byte the
 * guest read or wrote on the node since it was opened) and the resync's
 * recent rate (drbd_pace_recent_rate()) is above c-min-rate
 */
bool drbd_pace_throttle(DrbdPace *c, uint64_t app_bytes, uint64_t pending);

/*
 * The resync's rate over the last steps and this one, in bytes per
 * second, counting @pending (the bytes answered during this step so far
 * and those in flight) as this step's: a burst counts as soon as it is
 * sent
 */
uint64_t drbd_pace_recent_rate(const DrbdPace *c, uint64_t pending);

/* Speed marks: one per 1 s, the current speed over the last 8 s or so */
#define DRBD_PACE_MARK_STEP_NS  (1000 * 1000 * 1000LL)
#define DRBD_PACE_MARKS         9

typedef struct DrbdPaceMarks {
    int64_t start_ns;
    uint64_t start_done;
    int64_t t[DRBD_PACE_MARKS];         /* ring, the newest at @last */
    uint64_t done[DRBD_PACE_MARKS];
    unsigned last, count;
} DrbdPaceMarks;

typedef struct DrbdPaceSpeed {
    uint64_t speed;         /* bytes/s over the last marks */
    uint64_t average;       /* bytes/s since the start */
    int64_t finish;         /* seconds left at @speed, -1 if unknown */
} DrbdPaceSpeed;

/* Work that counts to @done starts at @now_ns */
void drbd_pace_marks_start(DrbdPaceMarks *m, int64_t now_ns, uint64_t done);
/* @done was reached by @now_ns: a new mark if the last one is old */
void drbd_pace_marks_note(DrbdPaceMarks *m, int64_t now_ns, uint64_t done);
/* The speeds at @now_ns with @done of @total done */
DrbdPaceSpeed drbd_pace_marks_speed(const DrbdPaceMarks *m, int64_t now_ns,
                                    uint64_t done, uint64_t total);

#endif
