/*
 * Unit tests for the order of a secondary's writes (block/drbd/order.c)
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "../../block/drbd/order.h"

static void check(DrbdOrder *o)
{
    g_autofree char *err = drbd_order_check(o);

    g_assert_null(err);
}

/* A write arrives with @unordered, may start or not, and starts if so */
static DrbdOrderWrite *arrive(DrbdOrder *o, uint32_t unordered,
                              uint64_t expect_dep, bool expect_start)
{
    uint64_t dep;

    g_assert_cmpint(drbd_order_arrive(o, unordered, &dep, &error_abort), ==,
                    0);
    g_assert_cmpuint(dep, ==, expect_dep);
    g_assert(drbd_order_may_start(o, dep) == expect_start);
    check(o);
    return expect_start ? drbd_order_start(o) : NULL;
}

static void barrier(DrbdOrder *o, uint32_t epoch, uint32_t set_size,
                    uint32_t flags)
{
    DrbdBarrier b = { .epoch = epoch, .set_size = set_size, .flags = flags };

    g_assert_cmpint(drbd_order_barrier(o, &b, &error_abort), ==, 0);
    check(o);
}

static void expect_ack(DrbdOrder *o, uint32_t epoch, uint32_t flags)
{
    DrbdBarrier b;

    g_assert_true(drbd_order_next_ack(o, &b));
    g_assert_cmpuint(b.epoch, ==, epoch);
    g_assert_cmpuint(b.flags, ==, flags);
    check(o);
}

static void expect_no_ack(DrbdOrder *o)
{
    DrbdBarrier b;

    g_assert_false(drbd_order_next_ack(o, &b));
}

/* Writes that depend on everything before them run one at a time */
static void test_serial(void)
{
    DrbdOrder *o = drbd_order_new();
    DrbdOrderWrite *w1, *w2;
    uint64_t dep;

    w1 = arrive(o, 0, 0, true);
    g_assert_cmpint(drbd_order_arrive(o, 0, &dep, &error_abort), ==, 0);
    g_assert_cmpuint(dep, ==, 1);
    g_assert_false(drbd_order_may_start(o, dep));
    drbd_order_done(o, w1);
    g_assert_true(drbd_order_may_start(o, dep));
    w2 = drbd_order_start(o);
    g_assert_cmpuint(drbd_order_inflight(o), ==, 1);
    drbd_order_done(o, w2);
    g_assert_cmpuint(drbd_order_inflight(o), ==, 0);
    check(o);
    drbd_order_free(o);
}

/*
 * Writes of a later epoch start beside those of an earlier one when they
 * do not depend on them; acks still go out in epoch order
 */
static void test_across_epochs(void)
{
    DrbdOrder *o = drbd_order_new();
    DrbdOrderWrite *w[5];
    uint64_t dep;

    w[0] = arrive(o, 0, 0, true);
    w[1] = arrive(o, 1, 0, true);
    w[2] = arrive(o, 2, 0, true);
    barrier(o, 7, 3, 0);
    /* epoch 8: write 4 depends on write 1 only, write 5 on 1 too */
    g_assert_false(drbd_order_may_start(o, 1));
    drbd_order_done(o, w[0]);
    w[3] = arrive(o, 2, 1, true);
    w[4] = arrive(o, 3, 1, true);
    barrier(o, 8, 2, 0);
    g_assert_cmpuint(drbd_order_closed_epochs(o), ==, 2);
    g_assert_cmpuint(drbd_order_inflight(o), ==, 4);

    /* epoch 8 is done first: no ack before epoch 7's */
    drbd_order_done(o, w[3]);
    drbd_order_done(o, w[4]);
    expect_no_ack(o);
    /* a write depending on write 5 waits for writes 2 and 3 too */
    g_assert_cmpint(drbd_order_arrive(o, 0, &dep, &error_abort), ==, 0);
    g_assert_cmpuint(dep, ==, 5);
    g_assert_false(drbd_order_may_start(o, dep));
    drbd_order_done(o, w[2]);
    g_assert_false(drbd_order_may_start(o, dep));
    expect_no_ack(o);
    drbd_order_done(o, w[1]);
    g_assert_true(drbd_order_may_start(o, dep));
    expect_ack(o, 7, 0);
    expect_ack(o, 8, 0);
    expect_no_ack(o);
    drbd_order_done(o, drbd_order_start(o));
    barrier(o, 9, 1, 0);
    expect_ack(o, 9, 0);
    check(o);
    drbd_order_free(o);
}

/* After a barrier that asks for a flush, nothing starts until it is done */
static void test_flush(void)
{
    DrbdOrder *o = drbd_order_new();
    DrbdOrderWrite *w1, *w2;
    uint64_t dep;

    w1 = arrive(o, 0, 0, true);
    barrier(o, 1, 1, DRBD_BARRIER_FLUSH);
    /* independent of write 1, but behind the flush */
    g_assert_cmpint(drbd_order_arrive(o, 1, &dep, &error_abort), ==, 0);
    g_assert_cmpuint(dep, ==, 0);
    g_assert_false(drbd_order_may_start(o, dep));
    drbd_order_done(o, w1);
    g_assert_false(drbd_order_may_start(o, dep));
    expect_ack(o, 1, DRBD_BARRIER_FLUSH);
    g_assert_false(drbd_order_may_start(o, dep));
    drbd_order_flushed(o);
    g_assert_true(drbd_order_may_start(o, dep));
    w2 = drbd_order_start(o);
    drbd_order_done(o, w2);
    check(o);
    drbd_order_free(o);
}

/* An empty epoch is acked at once */
static void test_empty_epoch(void)
{
    DrbdOrder *o = drbd_order_new();

    barrier(o, 3, 0, 0);
    expect_ack(o, 3, 0);
    expect_no_ack(o);
    drbd_order_free(o);
}

/* What a peer may not claim */
static void test_invalid(void)
{
    DrbdOrder *o = drbd_order_new();
    DrbdBarrier b = { .epoch = 1, .set_size = 2 };
    Error *err = NULL;
    uint64_t dep;

    /* the first write cannot skip anything */
    g_assert_cmpint(drbd_order_arrive(o, 1, &dep, &err), ==, -EPROTO);
    error_free_or_abort(&err);
    drbd_order_done(o, arrive(o, 0, 0, true));
    g_assert_cmpint(drbd_order_arrive(o, 2, &dep, &err), ==, -EPROTO);
    error_free_or_abort(&err);
    g_assert_cmpint(drbd_order_arrive(o, UINT32_MAX, &dep, &err), ==,
                    -EPROTO);
    error_free_or_abort(&err);
    /* a barrier counting writes that did not arrive */
    g_assert_cmpint(drbd_order_barrier(o, &b, &err), ==, -EPROTO);
    error_free_or_abort(&err);
    b.set_size = 0;
    g_assert_cmpint(drbd_order_barrier(o, &b, &err), ==, -EPROTO);
    error_free_or_abort(&err);
    /* a write or barrier before the arrived write started */
    g_assert_cmpint(drbd_order_arrive(o, 0, &dep, &error_abort), ==, 0);
    g_assert_cmpint(drbd_order_arrive(o, 0, &dep, &err), ==, -EPROTO);
    error_free_or_abort(&err);
    b.set_size = 1;
    g_assert_cmpint(drbd_order_barrier(o, &b, &err), ==, -EPROTO);
    error_free_or_abort(&err);
    check(o);
    drbd_order_free(o);
}

/*
 * Random runs: writes arrive with random dependencies (as a primary at
 * some queue depth sends them), complete in random order, barriers close
 * epochs now and then.  No write starts before those it depends on are
 * done, every write starts eventually, acks come in epoch order, each
 * once every write of its epoch is done.
 */
static void test_random(void)
{
    for (unsigned run = 0; run < 200; run++) {
        GRand *r = g_rand_new_with_seed(run);
        DrbdOrder *o = drbd_order_new();
        g_autoptr(GArray) done = g_array_new(false, true, sizeof(bool));
        g_autoptr(GArray) epoch_of = g_array_new(false, true,
                                                 sizeof(uint32_t));
        g_autoptr(GPtrArray) running = g_ptr_array_new();
        g_autoptr(GArray) running_seq = g_array_new(false, false,
                                                    sizeof(uint64_t));
        uint32_t epoch = 1, in_epoch = 0, acked = 0;
        uint64_t n = 0, dep = 0;
        bool waiting = false;

        g_array_append_val(done, (bool){ true });   /* write 0: none */
        g_array_append_val(epoch_of, (uint32_t){ 0 });
        for (unsigned step = 0; step < 2000; step++) {
            unsigned what = g_rand_int_range(r, 0, 10);
            DrbdBarrier b;

            if (waiting) {
                if (drbd_order_may_start(o, dep)) {
                    /* every write up to dep is done */
                    for (uint64_t i = 1; i <= dep; i++) {
                        g_assert_true(g_array_index(done, bool, i));
                    }
                    g_ptr_array_add(running, drbd_order_start(o));
                    g_array_append_val(running_seq, n);
                    in_epoch++;
                    waiting = false;
                } else {
                    what = 9;   /* only completions can help */
                }
            }
            if (what < 5 && !waiting) {
                uint32_t unordered = g_rand_int_range(r, 0, MIN(n, 40) + 1);

                g_assert_cmpint(drbd_order_arrive(o, unordered, &dep,
                                                  &error_abort), ==, 0);
                n++;
                g_assert_cmpuint(dep, ==, n - 1 - unordered);
                g_array_append_val(done, (bool){ false });
                g_array_append_val(epoch_of, epoch);
                waiting = true;
            } else if (what < 7 && !waiting) {
                b = (DrbdBarrier) { .epoch = epoch, .set_size = in_epoch };
                if (drbd_order_closed_epochs(o) < DRBD_ORDER_MAX_EPOCHS) {
                    g_assert_cmpint(drbd_order_barrier(o, &b, &error_abort),
                                    ==, 0);
                    epoch++;
                    in_epoch = 0;
                }
            } else if (running->len) {
                unsigned i = g_rand_int_range(r, 0, running->len);
                uint64_t seq = g_array_index(running_seq, uint64_t, i);

                drbd_order_done(o, g_ptr_array_steal_index_fast(running, i));
                g_array_remove_index_fast(running_seq, i);
                g_array_index(done, bool, seq) = true;
            }
            while (drbd_order_next_ack(o, &b)) {
                g_assert_cmpuint(b.epoch, ==, acked + 1);
                acked = b.epoch;
                for (uint64_t i = 1; i < done->len; i++) {
                    if (g_array_index(epoch_of, uint32_t, i) <= acked) {
                        g_assert_true(g_array_index(done, bool, i));
                    }
                }
            }
            check(o);
        }
        drbd_order_free(o);
        g_rand_free(r);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/drbd-order/serial", test_serial);
    g_test_add_func("/drbd-order/across-epochs", test_across_epochs);
    g_test_add_func("/drbd-order/flush", test_flush);
    g_test_add_func("/drbd-order/empty-epoch", test_empty_epoch);
    g_test_add_func("/drbd-order/invalid", test_invalid);
    g_test_add_func("/drbd-order/random", test_random);
    return g_test_run();
}
