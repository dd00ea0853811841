/*
 * DRBD-style replication: how fast a resync goes, and how fast it went
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "qemu/timer.h"
#include "qemu/units.h"
#include "pace.h"

/* Amounts beyond this are taken as this: a bound for the arithmetic */
#define DRBD_PACE_MAX_BYTES     ((int64_t)TiB)

bool drbd_pace_params_check(const DrbdPaceParams *p, Error **errp)
{
    if (p->plan_ahead_ns > DRBD_PACE_MAX_PLAN * DRBD_PACE_STEP_NS) {
        error_setg(errp, "c-plan-ahead must be at most %lld ms",
                   DRBD_PACE_MAX_PLAN * DRBD_PACE_STEP_NS / SCALE_MS);
        return false;
    }
    if (p->fill_target > DRBD_PACE_MAX_BYTES) {
        error_setg(errp, "c-fill-target must be at most 1 TiB");
        return false;
    }
    if (p->delay_target_ns > 100 * DRBD_PACE_STEP_NS) {
        error_setg(errp, "c-delay-target must be at most %lld ms",
                   100 * DRBD_PACE_STEP_NS / SCALE_MS);
        return false;
    }
    if (p->plan_ahead_ns && !p->fill_target &&
        p->delay_target_ns < DRBD_PACE_STEP_NS) {
        error_setg(errp, "c-delay-target must be at least %lld ms when "
                   "c-fill-target is 0", DRBD_PACE_STEP_NS / SCALE_MS);
        return false;
    }
    return true;
}

void drbd_pace_init(DrbdPace *c, const DrbdPaceParams *p)
{
    *c = (DrbdPace) { .p = *p };
    c->steps = MAX(1, p->plan_ahead_ns / DRBD_PACE_STEP_NS);
    c->steps = MIN(c->steps, DRBD_PACE_MAX_PLAN);
}

static int64_t drbd_pace_clamp(uint64_t bytes)
{
    return MIN(bytes, DRBD_PACE_MAX_BYTES);
}

uint64_t drbd_pace_step(DrbdPace *c, uint64_t answered, uint64_t in_flight)
{
    int64_t got = drbd_pace_clamp(answered);
    int64_t flying = drbd_pace_clamp(in_flight);
    int64_t want, correction, per_step, now, send;
    unsigned i;

    memmove(&c->answered[1], &c->answered[0],
            sizeof(c->answered) - sizeof(c->answered[0]));
    c->answered[0] = got;
    c->nanswered = MIN(c->nanswered + 1, DRBD_PACE_RATE_STEPS);

    if (!got && !flying && c->p.start_rate) {
        /* Nothing to measure: plan the start rate */
        want = drbd_pace_clamp(c->p.start_rate / DRBD_PACE_STEPS_PER_SEC) *
               c->steps;
    } else if (!got && !flying) {
        /* ... or, without one, fill the link as the aim says */
        want = c->p.fill_target ?: DRBD_PACE_START_FILL;
    } else if (c->p.fill_target) {
        want = c->p.fill_target;
    } else {
        /* At most 2^40 bytes times 10000 ms: no overflow */
        want = drbd_pace_clamp(got * (c->p.delay_target_ns / SCALE_MS) /
                               (DRBD_PACE_STEP_NS / SCALE_MS));
    }

    /* Spread what is missing (or too much) over the coming steps */
    correction = want - flying - c->planned;
    per_step = correction / (int64_t)c->steps;
    for (i = 0; i < c->steps; i++) {
        c->plan[i] += per_step;
    }
    c->planned += per_step * c->steps;

    /* This step's share of the plan */
    now = c->plan[c->head];
    c->plan[c->head] = 0;
    c->head = (c->head + 1) % c->steps;
    c->planned -= now;

    send = MAX(got + now, 0);
    if (c->p.max_rate) {
        send = MIN(send, drbd_pace_clamp(c->p.max_rate /
                                         DRBD_PACE_STEPS_PER_SEC));
    }
    return send;
}

uint64_t drbd_pace_recent_rate(const DrbdPace *c, uint64_t pending)
{
    uint64_t sum = drbd_pace_clamp(pending);
    unsigned i;

    /* The oldest step makes room for this one */
    for (i = 0; i < MIN(c->nanswered, DRBD_PACE_RATE_STEPS - 1); i++) {
        sum += c->answered[i];
    }
    return sum * DRBD_PACE_STEPS_PER_SEC / (i + 1);
}

bool drbd_pace_throttle(DrbdPace *c, uint64_t app_bytes, uint64_t pending)
{
    if (!c->p.min_rate) {
        return false;
    }
    if (!c->app_valid) {
        c->app_seen = app_bytes;
        c->app_valid = true;
        return false;
    }
    if (app_bytes - c->app_seen <= DRBD_PACE_APP_BYTES) {
        return false;
    }
    c->app_seen = app_bytes;
    return drbd_pace_recent_rate(c, pending) > c->p.min_rate;
}

void drbd_pace_marks_start(DrbdPaceMarks *m, int64_t now_ns, uint64_t done)
{
    *m = (DrbdPaceMarks) {
        .start_ns = now_ns,
        .start_done = done,
        .t[0] = now_ns,
        .done[0] = done,
        .count = 1,
    };
}

void drbd_pace_marks_note(DrbdPaceMarks *m, int64_t now_ns, uint64_t done)
{
    if (!m->count || now_ns - m->t[m->last] < DRBD_PACE_MARK_STEP_NS) {
        return;
    }
    m->last = (m->last + 1) % DRBD_PACE_MARKS;
    m->t[m->last] = now_ns;
    m->done[m->last] = done;
    m->count = MIN(m->count + 1, DRBD_PACE_MARKS);
}

/* Bytes per second from @from at @t0 to @to at @t1, 0 if too short */
static uint64_t drbd_pace_rate(uint64_t from, int64_t t0, uint64_t to,
                               int64_t t1)
{
    if (t1 - t0 < SCALE_MS || to < from) {
        return 0;
    }
    /* For the eye: a double's precision is plenty */
    return (double)(to - from) * NANOSECONDS_PER_SECOND / (t1 - t0);
}

DrbdPaceSpeed drbd_pace_marks_speed(const DrbdPaceMarks *m, int64_t now_ns,
                                    uint64_t done, uint64_t total)
{
    DrbdPaceSpeed sp = { .finish = -1 };
    unsigned oldest;

    if (!m->count) {
        return sp;
    }
    oldest = (m->last + DRBD_PACE_MARKS - (m->count - 1)) % DRBD_PACE_MARKS;
    sp.speed = drbd_pace_rate(m->done[oldest], m->t[oldest], done, now_ns);
    sp.average = drbd_pace_rate(m->start_done, m->start_ns, done, now_ns);
    if (done >= total) {
        sp.finish = 0;
    } else if (sp.speed) {
        sp.finish = DIV_ROUND_UP(total - done, sp.speed);
    }
    return sp;
}
