/*
 * Unit tests for the resync controller and speed marks
 * (block/drbd/pace.c)
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "qemu/units.h"
#include "qemu/timer.h"
#include "../../block/drbd/pace.h"

#define STEP DRBD_PACE_STEP_NS

static void check_refused(const DrbdPaceParams *p, const char *option)
{
    Error *err = NULL;

    g_assert_false(drbd_pace_params_check(p, &err));
    g_assert_nonnull(err);
    g_assert_nonnull(strstr(error_get_pretty(err), option));
    error_free(err);
}

static void test_params(void)
{
    DrbdPaceParams ok = {
        .plan_ahead_ns = 2 * NANOSECONDS_PER_SECOND,
        .delay_target_ns = NANOSECONDS_PER_SECOND,
    };
    DrbdPaceParams p;

    g_assert_true(drbd_pace_params_check(&ok, &error_abort));
    /* Off: nothing else matters but the bounds */
    p = (DrbdPaceParams) { 0 };
    g_assert_true(drbd_pace_params_check(&p, &error_abort));

    p = ok;
    p.plan_ahead_ns = 30 * NANOSECONDS_PER_SECOND + 1;
    check_refused(&p, "c-plan-ahead");
    p = ok;
    p.fill_target = TiB + 1;
    check_refused(&p, "c-fill-target");
    p = ok;
    p.delay_target_ns = 10 * NANOSECONDS_PER_SECOND + 1;
    check_refused(&p, "c-delay-target");
    /* Neither a fill nor a delay target: it would never send */
    p = ok;
    p.delay_target_ns = 0;
    check_refused(&p, "c-delay-target");
    p.fill_target = MiB;
    g_assert_true(drbd_pace_params_check(&p, &error_abort));
}

/*
 * A peer that answers, at each step, what was in flight at the step
 * before, up to @link bytes: returns the bytes in flight after @n steps,
 * and the bytes answered per step in the last of them in *@rate
 */
static uint64_t run_link(DrbdPace *c, uint64_t link, unsigned n,
                         uint64_t *rate)
{
    uint64_t in_flight = 0, answered = 0;
    unsigned i;

    for (i = 0; i < n; i++) {
        uint64_t send = drbd_pace_step(c, answered, in_flight);

        in_flight += send;
        answered = MIN(in_flight, link);
        in_flight -= answered;
    }
    *rate = answered;
    return in_flight;
}

/* The start spreads start-rate over c-plan-ahead */
static void test_start(void)
{
    DrbdPaceParams p = {
        .plan_ahead_ns = 20 * STEP,
        .fill_target = 8 * MiB,
        .start_rate = 10 * MiB,
    };
    DrbdPace c;

    drbd_pace_init(&c, &p);
    /* 10 MiB/s for 2 s is 20 MiB, a twentieth of it per step */
    g_assert_cmpuint(drbd_pace_step(&c, 0, 0), ==, MiB);

    /* Without a start rate, the aim: 8 MiB over 20 steps */
    p.start_rate = 0;
    drbd_pace_init(&c, &p);
    g_assert_cmpuint(drbd_pace_step(&c, 0, 0), ==, 8 * MiB / 20);
    /* ... in delay-target mode, DRBD_PACE_START_FILL */
    p.fill_target = 0;
    p.delay_target_ns = 10 * STEP;
    drbd_pace_init(&c, &p);
    g_assert_cmpuint(drbd_pace_step(&c, 0, 0), ==,
                     DRBD_PACE_START_FILL / 20);
}

/*
 * The rate grows until the link is full; then the bytes in flight beyond
 * what the link drains settle at c-fill-target
 */
static void test_fill_target(void)
{
    DrbdPaceParams p = {
        .plan_ahead_ns = 20 * STEP,
        .fill_target = 4 * MiB,
        .start_rate = MiB,
    };
    uint64_t in_flight, rate;
    DrbdPace c;

    drbd_pace_init(&c, &p);
    /* A link of 64 MiB per step */
    in_flight = run_link(&c, 64 * MiB, 1000, &rate);
    g_assert_cmpuint(rate, ==, 64 * MiB);
    g_assert_cmpuint(in_flight, >=, 4 * MiB - 64 * KiB);
    g_assert_cmpuint(in_flight, <=, 4 * MiB + 64 * KiB);

    /* A slow link (1 MiB per step): the same aim */
    drbd_pace_init(&c, &p);
    in_flight = run_link(&c, MiB, 400, &rate);
    g_assert_cmpuint(rate, ==, MiB);
    g_assert_cmpuint(in_flight, >=, 4 * MiB - 64 * KiB);
    g_assert_cmpuint(in_flight, <=, 4 * MiB + 64 * KiB);
}

/* The delay target aims at what the peer answers in that time */
static void test_delay_target(void)
{
    DrbdPaceParams p = {
        .plan_ahead_ns = 10 * STEP,
        .delay_target_ns = 5 * STEP,
        .start_rate = 10 * MiB,
    };
    uint64_t in_flight, rate;
    DrbdPace c;

    drbd_pace_init(&c, &p);
    in_flight = run_link(&c, 2 * MiB, 400, &rate);
    /* The link is the limit; half a second of it stays in flight */
    g_assert_cmpuint(rate, ==, 2 * MiB);
    g_assert_cmpuint(in_flight, >=, 10 * MiB - 64 * KiB);
    g_assert_cmpuint(in_flight, <=, 10 * MiB + 64 * KiB);
}

/* c-max-rate caps every step, whatever the aim */
static void test_max_rate(void)
{
    DrbdPaceParams p = {
        .plan_ahead_ns = 10 * STEP,
        .fill_target = 64 * MiB,
        .max_rate = 20 * MiB,
        .start_rate = GiB,
    };
    DrbdPace c;
    unsigned i;

    drbd_pace_init(&c, &p);
    for (i = 0; i < 100; i++) {
        g_assert_cmpuint(drbd_pace_step(&c, 2 * MiB, 0), <=, 2 * MiB);
    }
}

/* Huge amounts do not overflow the arithmetic */
static void test_bounds(void)
{
    DrbdPaceParams p = {
        .plan_ahead_ns = DRBD_PACE_MAX_PLAN * STEP,
        .delay_target_ns = 100 * STEP,
        .start_rate = UINT64_MAX,
    };
    DrbdPace c;
    unsigned i;

    drbd_pace_init(&c, &p);
    g_assert_cmpuint(drbd_pace_step(&c, 0, 0), <=, TiB);
    for (i = 0; i < 1000; i++) {
        g_assert_cmpuint(drbd_pace_step(&c, UINT64_MAX, UINT64_MAX), <=,
                         2 * TiB);
        g_assert_cmpuint(drbd_pace_step(&c, 0, UINT64_MAX), <=, 2 * TiB);
    }
}

/* c-min-rate: the resync yields to guest I/O above that rate only */
static void test_throttle(void)
{
    DrbdPaceParams p = {
        .plan_ahead_ns = 10 * STEP,
        .fill_target = MiB,
        .min_rate = 10 * MiB,
    };
    DrbdPace c;
    unsigned i;

    drbd_pace_init(&c, &p);
    /* The first look only learns where the guest is */
    g_assert_false(drbd_pace_throttle(&c, 1000 * MiB, 0));
    /* 2 MiB per step is 20 MiB/s, above c-min-rate */
    for (i = 0; i < DRBD_PACE_RATE_STEPS; i++) {
        drbd_pace_step(&c, 2 * MiB, 0);
    }
    g_assert_cmpuint(drbd_pace_recent_rate(&c, 2 * MiB), ==, 20 * MiB);
    /* No guest I/O (or too little to count): no throttle */
    g_assert_false(drbd_pace_throttle(&c, 1000 * MiB, 2 * MiB));
    g_assert_false(drbd_pace_throttle(&c, 1000 * MiB + DRBD_PACE_APP_BYTES,
                                      2 * MiB));
    /* Guest I/O: throttled, once per activity */
    g_assert_true(drbd_pace_throttle(&c, 1000 * MiB + 64 * KiB, 2 * MiB));
    g_assert_false(drbd_pace_throttle(&c, 1000 * MiB + 64 * KiB, 2 * MiB));
    /* Below c-min-rate, guest I/O does not throttle */
    for (i = 0; i < DRBD_PACE_RATE_STEPS; i++) {
        drbd_pace_step(&c, 512 * KiB, 0);
    }
    g_assert_cmpuint(drbd_pace_recent_rate(&c, 512 * KiB), ==, 5 * MiB);
    g_assert_false(drbd_pace_throttle(&c, 1001 * MiB, 512 * KiB));

    /*
     * A burst at the start counts at once: 16 MiB in flight during the
     * second step is 80 MiB/s over the two
     */
    drbd_pace_init(&c, &p);
    drbd_pace_step(&c, 0, 0);
    g_assert_false(drbd_pace_throttle(&c, 0, 0));
    g_assert_cmpuint(drbd_pace_recent_rate(&c, 16 * MiB), ==, 80 * MiB);
    g_assert_true(drbd_pace_throttle(&c, 64 * KiB, 16 * MiB));

    /* c-min-rate 0: never */
    p.min_rate = 0;
    drbd_pace_init(&c, &p);
    drbd_pace_step(&c, GiB, 0);
    g_assert_false(drbd_pace_throttle(&c, 0, GiB));
    g_assert_false(drbd_pace_throttle(&c, GiB, GiB));
}

static void test_marks(void)
{
    const int64_t s = NANOSECONDS_PER_SECOND;
    DrbdPaceMarks m = { 0 };
    DrbdPaceSpeed sp;
    unsigned i;

    /* Never started: nothing known */
    sp = drbd_pace_marks_speed(&m, 5 * s, 0, 100);
    g_assert_cmpuint(sp.speed, ==, 0);
    g_assert_cmpint(sp.finish, ==, -1);

    /* 100 MiB/s for 20 s, from 1 GiB of 10 GiB done at the start */
    drbd_pace_marks_start(&m, 10 * s, GiB);
    for (i = 1; i <= 20; i++) {
        drbd_pace_marks_note(&m, 10 * s + i * s, GiB + i * 100 * MiB);
        /* Notes less than a second apart make no mark */
        drbd_pace_marks_note(&m, 10 * s + i * s + s / 2,
                             GiB + i * 100 * MiB + 50 * MiB);
    }
    sp = drbd_pace_marks_speed(&m, 30 * s, GiB + 2000 * MiB, 10 * GiB);
    g_assert_cmpuint(sp.speed, ==, 100 * MiB);
    g_assert_cmpuint(sp.average, ==, 100 * MiB);
    /* 10240 - 1024 - 2000 MiB left at 100 MiB/s: 72.16 s, rounded up */
    g_assert_cmpint(sp.finish, ==, 73);

    /* Then 10 s at 10 MiB/s: the current speed follows, not the average */
    for (i = 1; i <= 10; i++) {
        drbd_pace_marks_note(&m, 30 * s + i * s,
                             GiB + 2000 * MiB + i * 10 * MiB);
    }
    sp = drbd_pace_marks_speed(&m, 40 * s, GiB + 2100 * MiB, 10 * GiB);
    g_assert_cmpuint(sp.speed, ==, 10 * MiB);
    g_assert_cmpuint(sp.average, ==, 2100 * MiB / 30);
    /* 7116 MiB left at 10 MiB/s */
    g_assert_cmpint(sp.finish, ==, 712);

    /* Stalled: no speed, no finish; done: finish 0 */
    for (i = 1; i <= DRBD_PACE_MARKS; i++) {
        drbd_pace_marks_note(&m, 40 * s + i * s, GiB + 2100 * MiB);
    }
    sp = drbd_pace_marks_speed(&m, 50 * s, GiB + 2100 * MiB, 10 * GiB);
    g_assert_cmpuint(sp.speed, ==, 0);
    g_assert_cmpint(sp.finish, ==, -1);
    sp = drbd_pace_marks_speed(&m, 50 * s, 10 * GiB, 10 * GiB);
    g_assert_cmpint(sp.finish, ==, 0);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/drbd/pace/params", test_params);
    g_test_add_func("/drbd/pace/start", test_start);
    g_test_add_func("/drbd/pace/fill-target", test_fill_target);
    g_test_add_func("/drbd/pace/delay-target", test_delay_target);
    g_test_add_func("/drbd/pace/max-rate", test_max_rate);
    g_test_add_func("/drbd/pace/bounds", test_bounds);
    g_test_add_func("/drbd/pace/throttle", test_throttle);
    g_test_add_func("/drbd/pace/marks", test_marks);
    return g_test_run();
}
