/*
 * DRBD-style replication: the life cycle of a replicated write
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "req.h"

static const char *const event_names[DRBD_EV__MAX] = {
    [DRBD_EV_SUBMIT_LOCAL]    = "submit-local",
    [DRBD_EV_LOCAL_OK]        = "local-ok",
    [DRBD_EV_LOCAL_ERROR]     = "local-error",
    [DRBD_EV_QUEUE_NET]       = "queue-net",
    [DRBD_EV_NO_NET]          = "no-net",
    [DRBD_EV_SENT]            = "sent",
    [DRBD_EV_SEND_FAILED]     = "send-failed",
    [DRBD_EV_RECV_ACK]        = "recv-ack",
    [DRBD_EV_WRITE_ACK]       = "write-ack",
    [DRBD_EV_NEG_ACK]         = "neg-ack",
    [DRBD_EV_BARRIER_ACK]     = "barrier-ack",
    [DRBD_EV_CONNECTION_LOST] = "connection-lost",
};

const char *drbd_req_event_name(DrbdReqEvent ev)
{
    return ev < DRBD_EV__MAX ? event_names[ev] : "invalid";
}

unsigned drbd_req_initial_state(char protocol, bool fua)
{
    /* A FUA write must be on the peer's disk, whatever the protocol */
    if (fua || protocol == 'C') {
        return DRBD_RQ_EXP_WRITE_ACK;
    }
    if (protocol == 'B') {
        return DRBD_RQ_EXP_RECEIVE_ACK;
    }
    return 0;
}

/* Whether the network half lets the guest have its answer */
static bool net_allows_completion(unsigned s)
{
    if (s & DRBD_RQ_NET_DONE) {
        return true;
    }
    if (!(s & DRBD_RQ_NET_SENT)) {
        /* not decided yet, or the data is still ours to send */
        return false;
    }
    if (s & DRBD_RQ_EXP_WRITE_ACK) {
        return s & DRBD_RQ_NET_WRITTEN;
    }
    if (s & DRBD_RQ_EXP_RECEIVE_ACK) {
        return s & DRBD_RQ_NET_RECEIVED;
    }
    return true;    /* protocol A: handed to the network is enough */
}

static unsigned net_finish(unsigned *state, bool lost)
{
    *state |= DRBD_RQ_NET_DONE;
    if (lost) {
        *state |= DRBD_RQ_NET_OOS;
        return DRBD_RA_MARK_OOS;
    }
    return 0;
}

unsigned drbd_req_mod(unsigned *state, DrbdReqEvent ev)
{
    unsigned s = *state;
    unsigned actions = 0;
    bool net_open = (s & DRBD_RQ_NET_QUEUED) && !(s & DRBD_RQ_NET_DONE);
    bool sent_open = net_open && (s & DRBD_RQ_NET_SENT);

    switch (ev) {
    case DRBD_EV_SUBMIT_LOCAL:
        if (s & (DRBD_RQ_LOCAL_PENDING | DRBD_RQ_LOCAL_COMPLETED)) {
            return 0;
        }
        s |= DRBD_RQ_LOCAL_PENDING;
        break;
    case DRBD_EV_LOCAL_OK:
    case DRBD_EV_LOCAL_ERROR:
        if (!(s & DRBD_RQ_LOCAL_PENDING)) {
            return 0;
        }
        s &= ~DRBD_RQ_LOCAL_PENDING;
        s |= DRBD_RQ_LOCAL_COMPLETED;
        if (ev == DRBD_EV_LOCAL_OK) {
            s |= DRBD_RQ_LOCAL_OK;
        }
        break;
    case DRBD_EV_QUEUE_NET:
    case DRBD_EV_NO_NET:
        if (s & (DRBD_RQ_NET_QUEUED | DRBD_RQ_NET_DONE)) {
            return 0;
        }
        if (ev == DRBD_EV_QUEUE_NET) {
            s |= DRBD_RQ_NET_QUEUED;
        } else {
            actions |= net_finish(&s, true);
        }
        break;
    case DRBD_EV_SENT:
        if (!net_open || (s & DRBD_RQ_NET_SENT)) {
            return 0;
        }
        s |= DRBD_RQ_NET_SENT;
        break;
    case DRBD_EV_SEND_FAILED:
    case DRBD_EV_CONNECTION_LOST:
        if (!net_open) {
            return 0;
        }
        actions |= net_finish(&s, true);
        break;
    case DRBD_EV_RECV_ACK:
        if (!sent_open || (s & DRBD_RQ_NET_RECEIVED)) {
            return 0;
        }
        s |= DRBD_RQ_NET_RECEIVED;
        break;
    case DRBD_EV_WRITE_ACK:
        if (!sent_open || (s & DRBD_RQ_NET_WRITTEN)) {
            return 0;
        }
        s |= DRBD_RQ_NET_RECEIVED | DRBD_RQ_NET_WRITTEN;
        if (s & DRBD_RQ_EXP_WRITE_ACK) {
            actions |= net_finish(&s, false);
        }
        break;
    case DRBD_EV_NEG_ACK:
        if (!sent_open) {
            return 0;
        }
        actions |= net_finish(&s, true);
        break;
    case DRBD_EV_BARRIER_ACK:
        if (!sent_open) {
            return 0;
        }
        actions |= net_finish(&s, false);
        break;
    default:
        return 0;
    }

    if (!(s & DRBD_RQ_COMPLETED) && (s & DRBD_RQ_LOCAL_COMPLETED) &&
        net_allows_completion(s)) {
        s |= DRBD_RQ_COMPLETED;
        actions |= DRBD_RA_COMPLETE;
    }
    if ((s & DRBD_RQ_COMPLETED) && (s & DRBD_RQ_NET_DONE) &&
        (s & DRBD_RQ_LOCAL_COMPLETED)) {
        actions |= DRBD_RA_DESTROY;
    }

    *state = s;
    return actions;
}
