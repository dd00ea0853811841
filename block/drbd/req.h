/*
 * DRBD-style replication: the life cycle of a replicated write
 *
 * Pure code: every event that can happen to a request on the primary goes
 * through drbd_req_mod(), which changes the request's state bits and says
 * what the caller must do next.  No I/O, no locks, no QEMU globals: the
 * caller holds the lock that protects the request and carries out the
 * actions.
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef BLOCK_DRBD_REQ_H
#define BLOCK_DRBD_REQ_H

/*
 * State bits.  The local half and the network half progress on their own:
 *
 * Local half:   LOCAL_PENDING -> LOCAL_COMPLETED (+ LOCAL_OK on success)
 *
 * Network half, for a write that is replicated:
 *   NET_QUEUED -> NET_SENT -> [NET_RECEIVED] -> [NET_WRITTEN] -> NET_DONE
 * where NET_DONE comes with the barrier ack of the request's epoch, or
 * with the write ack when one is expected (protocol C or FUA), or with a
 * negative ack or the loss of the connection (then with NET_OOS: the peer
 * may lack the data and the range must be marked out of sync).
 *
 * A write that is not replicated (no peer connected) starts with NET_DONE
 * and NET_OOS set.
 *
 * EXP_RECEIVE_ACK and EXP_WRITE_ACK record which ack the protocol (or a
 * FUA request) waits for; neither is set for protocol A.
 */
enum {
    DRBD_RQ_LOCAL_PENDING   = 1u << 0,
    DRBD_RQ_LOCAL_COMPLETED = 1u << 1,
    DRBD_RQ_LOCAL_OK        = 1u << 2,
    DRBD_RQ_NET_QUEUED      = 1u << 3,
    DRBD_RQ_NET_SENT        = 1u << 4,
    DRBD_RQ_NET_RECEIVED    = 1u << 5,
    DRBD_RQ_NET_WRITTEN     = 1u << 6,
    DRBD_RQ_NET_DONE        = 1u << 7,
    DRBD_RQ_NET_OOS         = 1u << 8,
    DRBD_RQ_EXP_RECEIVE_ACK = 1u << 9,
    DRBD_RQ_EXP_WRITE_ACK   = 1u << 10,
    DRBD_RQ_COMPLETED       = 1u << 11,   /* the guest has its answer */
};

typedef enum DrbdReqEvent {
    DRBD_EV_SUBMIT_LOCAL,       /* the local write is issued */
    DRBD_EV_LOCAL_OK,           /* the local write completed */
    DRBD_EV_LOCAL_ERROR,        /* the local write failed */
    DRBD_EV_QUEUE_NET,          /* connected: the write will be sent */
    DRBD_EV_NO_NET,             /* not connected: the peer misses it */
    DRBD_EV_SENT,               /* handed over to the network */
    DRBD_EV_SEND_FAILED,        /* the network would not take it */
    DRBD_EV_RECV_ACK,           /* the peer received it (protocol B) */
    DRBD_EV_WRITE_ACK,          /* the peer's disk completed it */
    DRBD_EV_NEG_ACK,            /* the peer failed it */
    DRBD_EV_BARRIER_ACK,        /* the peer completed the request's epoch */
    DRBD_EV_CONNECTION_LOST,    /* the peer is gone */
    DRBD_EV__MAX,
} DrbdReqEvent;

/* What drbd_req_mod() asks its caller to do; a combination of bits. */
enum {
    DRBD_RA_COMPLETE = 1u << 0,   /* answer the guest now */
    DRBD_RA_MARK_OOS = 1u << 1,   /* mark the range out of sync */
    DRBD_RA_DESTROY  = 1u << 2,   /* drop it from the transfer log */
};

/* Protocol, as the first letter: 'A', 'B' or 'C' */
unsigned drbd_req_initial_state(char protocol, bool fua);

/*
 * Apply @ev to the state in *@state.  Returns the actions (DRBD_RA_*) the
 * caller must take, each exactly once over the request's life.  An event
 * that does not fit the state (a duplicate ack, say) changes nothing and
 * asks for nothing.
 */
unsigned drbd_req_mod(unsigned *state, DrbdReqEvent ev);

/* Whether the local write failed: the guest gets an error */
static inline bool drbd_req_local_failed(unsigned state)
{
    return (state & DRBD_RQ_LOCAL_COMPLETED) && !(state & DRBD_RQ_LOCAL_OK);
}

const char *drbd_req_event_name(DrbdReqEvent ev);

#endif /* BLOCK_DRBD_REQ_H */
