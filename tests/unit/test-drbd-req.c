/*
 * drbd: the life cycle of a replicated write (block/drbd/req.c)
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "../../block/drbd/req.h"

/* Feed @ev and check the actions it asks for */
static void step(unsigned *state, DrbdReqEvent ev, unsigned want)
{
    unsigned got = drbd_req_mod(state, ev);

    if (got != want) {
        g_test_message("event %s: actions 0x%x, expected 0x%x (state 0x%x)",
                       drbd_req_event_name(ev), got, want, *state);
    }
    g_assert_cmphex(got, ==, want);
}

/* A replicated write that is sent before its local write completes */
static unsigned start_replicated(char protocol, bool fua)
{
    unsigned s = drbd_req_initial_state(protocol, fua);

    step(&s, DRBD_EV_QUEUE_NET, 0);
    step(&s, DRBD_EV_SUBMIT_LOCAL, 0);
    step(&s, DRBD_EV_SENT, 0);
    return s;
}

static void test_protocol_a(void)
{
    unsigned s = start_replicated('A', false);

    /* handed to the network and written locally: the guest is answered */
    step(&s, DRBD_EV_LOCAL_OK, DRBD_RA_COMPLETE);
    /* the request stays in the transfer log until its epoch is acked */
    g_assert_false(s & DRBD_RQ_NET_DONE);
    step(&s, DRBD_EV_BARRIER_ACK, DRBD_RA_DESTROY);
}

static void test_protocol_a_local_last(void)
{
    unsigned s = drbd_req_initial_state('A', false);

    step(&s, DRBD_EV_QUEUE_NET, 0);
    step(&s, DRBD_EV_SUBMIT_LOCAL, 0);
    /* local done, but the data is not yet handed to the network */
    step(&s, DRBD_EV_LOCAL_OK, 0);
    step(&s, DRBD_EV_SENT, DRBD_RA_COMPLETE);
    step(&s, DRBD_EV_BARRIER_ACK, DRBD_RA_DESTROY);
}

static void test_protocol_b(void)
{
    unsigned s = start_replicated('B', false);

    step(&s, DRBD_EV_LOCAL_OK, 0);
    step(&s, DRBD_EV_RECV_ACK, DRBD_RA_COMPLETE);
    step(&s, DRBD_EV_BARRIER_ACK, DRBD_RA_DESTROY);
}

static void test_protocol_b_ack_first(void)
{
    unsigned s = start_replicated('B', false);

    step(&s, DRBD_EV_RECV_ACK, 0);
    step(&s, DRBD_EV_LOCAL_OK, DRBD_RA_COMPLETE);
    step(&s, DRBD_EV_BARRIER_ACK, DRBD_RA_DESTROY);
}

static void test_protocol_c(void)
{
    unsigned s = start_replicated('C', false);

    step(&s, DRBD_EV_LOCAL_OK, 0);
    /* a receive ack is not enough for protocol C */
    step(&s, DRBD_EV_RECV_ACK, 0);
    step(&s, DRBD_EV_WRITE_ACK, DRBD_RA_COMPLETE | DRBD_RA_DESTROY);
    /* a late barrier ack finds nothing to do */
    step(&s, DRBD_EV_BARRIER_ACK, 0);
}

static void test_protocol_c_peer_first(void)
{
    unsigned s = start_replicated('C', false);

    step(&s, DRBD_EV_WRITE_ACK, 0);
    step(&s, DRBD_EV_LOCAL_OK, DRBD_RA_COMPLETE | DRBD_RA_DESTROY);
}

static void test_fua_waits_for_write_ack(void)
{
    unsigned s = start_replicated('A', true);

    step(&s, DRBD_EV_LOCAL_OK, 0);
    step(&s, DRBD_EV_WRITE_ACK, DRBD_RA_COMPLETE | DRBD_RA_DESTROY);

    s = start_replicated('B', true);
    step(&s, DRBD_EV_RECV_ACK, 0);
    step(&s, DRBD_EV_LOCAL_OK, 0);
    step(&s, DRBD_EV_WRITE_ACK, DRBD_RA_COMPLETE | DRBD_RA_DESTROY);
}

static void test_no_net(void)
{
    unsigned s = drbd_req_initial_state('C', false);

    step(&s, DRBD_EV_NO_NET, DRBD_RA_MARK_OOS);
    step(&s, DRBD_EV_SUBMIT_LOCAL, 0);
    step(&s, DRBD_EV_LOCAL_OK, DRBD_RA_COMPLETE | DRBD_RA_DESTROY);
    /* nothing from the network touches it any more */
    step(&s, DRBD_EV_SENT, 0);
    step(&s, DRBD_EV_CONNECTION_LOST, 0);
}

static void test_connection_lost_before_ack(void)
{
    unsigned s = start_replicated('C', false);

    step(&s, DRBD_EV_LOCAL_OK, 0);
    step(&s, DRBD_EV_CONNECTION_LOST,
         DRBD_RA_MARK_OOS | DRBD_RA_COMPLETE | DRBD_RA_DESTROY);
    g_assert_true(s & DRBD_RQ_NET_OOS);
    /* an ack that arrives after the loss changes nothing */
    step(&s, DRBD_EV_WRITE_ACK, 0);
}

static void test_connection_lost_after_completion(void)
{
    unsigned s = start_replicated('A', false);

    step(&s, DRBD_EV_LOCAL_OK, DRBD_RA_COMPLETE);
    /* the peer may not have it: resync it */
    step(&s, DRBD_EV_CONNECTION_LOST, DRBD_RA_MARK_OOS | DRBD_RA_DESTROY);
}

static void test_connection_lost_before_send(void)
{
    unsigned s = drbd_req_initial_state('C', false);

    step(&s, DRBD_EV_QUEUE_NET, 0);
    step(&s, DRBD_EV_SUBMIT_LOCAL, 0);
    step(&s, DRBD_EV_SEND_FAILED, DRBD_RA_MARK_OOS);
    step(&s, DRBD_EV_LOCAL_OK, DRBD_RA_COMPLETE | DRBD_RA_DESTROY);
}

static void test_neg_ack(void)
{
    unsigned s = start_replicated('C', false);

    step(&s, DRBD_EV_NEG_ACK, DRBD_RA_MARK_OOS);
    step(&s, DRBD_EV_LOCAL_OK, DRBD_RA_COMPLETE | DRBD_RA_DESTROY);
}

static void test_local_error(void)
{
    unsigned s = start_replicated('C', false);

    step(&s, DRBD_EV_LOCAL_ERROR, 0);
    g_assert_true(drbd_req_local_failed(s));
    step(&s, DRBD_EV_WRITE_ACK, DRBD_RA_COMPLETE | DRBD_RA_DESTROY);
}

static void test_events_out_of_order_ignored(void)
{
    unsigned s = drbd_req_initial_state('C', false);
    unsigned before;

    /* acks before the write was sent, local completion before submit */
    before = s;
    step(&s, DRBD_EV_WRITE_ACK, 0);
    step(&s, DRBD_EV_RECV_ACK, 0);
    step(&s, DRBD_EV_BARRIER_ACK, 0);
    step(&s, DRBD_EV_NEG_ACK, 0);
    step(&s, DRBD_EV_LOCAL_OK, 0);
    step(&s, DRBD_EV_SENT, 0);
    g_assert_cmphex(s, ==, before);

    s = start_replicated('C', false);
    /* duplicates */
    step(&s, DRBD_EV_QUEUE_NET, 0);
    step(&s, DRBD_EV_SUBMIT_LOCAL, 0);
    step(&s, DRBD_EV_SENT, 0);
    step(&s, DRBD_EV_WRITE_ACK, 0);
    step(&s, DRBD_EV_WRITE_ACK, 0);
    step(&s, DRBD_EV_LOCAL_OK, DRBD_RA_COMPLETE | DRBD_RA_DESTROY);
    step(&s, DRBD_EV_LOCAL_OK, 0);
    step(&s, DRBD_EV__MAX, 0);
}

/*
 * Every order of the events of a request's life ends with the request
 * completed once and destroyed once.
 */
static void permute(DrbdReqEvent *evs, int n, int k, char protocol,
                    unsigned *runs)
{
    int i;

    if (k == n) {
        unsigned s = drbd_req_initial_state(protocol, false);
        unsigned all = 0;
        int completes = 0, destroys = 0;

        step(&s, DRBD_EV_QUEUE_NET, 0);
        step(&s, DRBD_EV_SUBMIT_LOCAL, 0);
        step(&s, DRBD_EV_SENT, 0);
        for (i = 0; i < n; i++) {
            unsigned a = drbd_req_mod(&s, evs[i]);

            completes += !!(a & DRBD_RA_COMPLETE);
            destroys += !!(a & DRBD_RA_DESTROY);
            all |= a;
        }
        g_assert_cmpint(completes, ==, 1);
        g_assert_cmpint(destroys, ==, 1);
        g_assert_false(all & DRBD_RA_MARK_OOS);
        (*runs)++;
        return;
    }
    for (i = k; i < n; i++) {
        DrbdReqEvent t = evs[k];

        evs[k] = evs[i];
        evs[i] = t;
        permute(evs, n, k + 1, protocol, runs);
        evs[i] = evs[k];
        evs[k] = t;
    }
}

static void test_all_orders(void)
{
    /* what may happen, in any order, once the write is on the wire */
    DrbdReqEvent evs[] = {
        DRBD_EV_LOCAL_OK, DRBD_EV_RECV_ACK, DRBD_EV_WRITE_ACK,
        DRBD_EV_BARRIER_ACK,
    };
    unsigned runs = 0;

    permute(evs, ARRAY_SIZE(evs), 0, 'A', &runs);
    permute(evs, ARRAY_SIZE(evs), 0, 'B', &runs);
    permute(evs, ARRAY_SIZE(evs), 0, 'C', &runs);
    g_assert_cmpuint(runs, ==, 3 * 24);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    g_test_add_func("/drbd/req/protocol-a", test_protocol_a);
    g_test_add_func("/drbd/req/protocol-a-local-last",
                    test_protocol_a_local_last);
    g_test_add_func("/drbd/req/protocol-b", test_protocol_b);
    g_test_add_func("/drbd/req/protocol-b-ack-first",
                    test_protocol_b_ack_first);
    g_test_add_func("/drbd/req/protocol-c", test_protocol_c);
    g_test_add_func("/drbd/req/protocol-c-peer-first",
                    test_protocol_c_peer_first);
    g_test_add_func("/drbd/req/fua", test_fua_waits_for_write_ack);
    g_test_add_func("/drbd/req/no-net", test_no_net);
    g_test_add_func("/drbd/req/lost-before-ack",
                    test_connection_lost_before_ack);
    g_test_add_func("/drbd/req/lost-after-completion",
                    test_connection_lost_after_completion);
    g_test_add_func("/drbd/req/lost-before-send",
                    test_connection_lost_before_send);
    g_test_add_func("/drbd/req/neg-ack", test_neg_ack);
    g_test_add_func("/drbd/req/local-error", test_local_error);
    g_test_add_func("/drbd/req/out-of-order", test_events_out_of_order_ignored);
    g_test_add_func("/drbd/req/all-orders", test_all_orders);

    return g_test_run();
}
