/*
 * DRBD-style replicated block device: state shared by the driver's files
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef BLOCK_DRBD_INT_H
#define BLOCK_DRBD_INT_H

#include "block/block-io.h"
#include "block/block_int.h"
#include "block/nbd.h"
#include "block/reqlist.h"
#include "crypto/hash.h"
#include "crypto/tlscreds.h"
#include "io/channel-socket.h"
#include "qapi/qapi-types-drbd.h"
#include "qemu/coroutine.h"
#include "qemu/hbitmap.h"
#include "qemu/job.h"
#include "qemu/queue.h"
#include "qemu/ratelimit.h"
#include "qemu/stats64.h"
#include "qemu/thread.h"

#include "al-cache.h"
#include "gate.h"
#include "md-format.h"
#include "order.h"
#include "pace.h"
#include "req.h"
#include "rle.h"
#include "uuid.h"
#include "wire.h"

#define DRBD_BM_GRANULARITY     12      /* 4 KiB per out-of-sync bit */

#define DRBD_RESYNC_CHUNK       (256 * KiB)
/* Peers of one node: a resource has up to 32 nodes, as with DRBD 9 */
#define DRBD_PEERS_MAX          DRBD_MD_MAX_PEERS

typedef struct BDRVDrbdState BDRVDrbdState;

/* A guest request waiting for quorum (state.c), on its coroutine's stack */
typedef struct DrbdQuorumWaiter {
    Coroutine *co;
    QSLIST_ENTRY(DrbdQuorumWaiter) next;
} DrbdQuorumWaiter;

/*
 * The node's quorum (state.c): the nodes it must see, itself included
 * (@need, 0: quorum off), how many of them with up-to-date data, and
 * on-no-quorum, fixed at open.  Under s->lock: whether it has quorum
 * (@has, also read with qatomic_read()), what the last
 * DRBD_QUORUM_CHANGE said, the nodes it saw last, the guest requests
 * that wait for the quorum (suspend-io), and drbd-resume-io's count.
 * @refusal_reported (atomic): a failed request of this streak was logged.
 */
typedef struct DrbdQuorum {
    unsigned need;
    unsigned min_uptodate;
    DrbdOnNoQuorum on_no_quorum;
    bool has;
    bool reported;
    bool refusal_reported;
    unsigned present;
    QSLIST_HEAD(, DrbdQuorumWaiter) waiters;
    uint64_t resume_gen;
} DrbdQuorum;

typedef struct DrbdConnection DrbdConnection;

/*
 * A guest write on the primary, for one peer, from submission until the
 * peer is done: a guest write has one per peer, allocated together
 * (tl.c), the first holding the write's activity-log extents
 */
typedef struct DrbdRequest DrbdRequest;
struct DrbdRequest {
    BDRVDrbdState *s;
    DrbdRequest *first;         /* the guest write's first request */
    unsigned live;              /* first only: requests not freed yet */
    /* Its peer's connection, which it is sent on if it was */
    DrbdConnection *conn;
    uint64_t id;                /* the cookie the peer echoes in acks */
    int64_t offset;
    int64_t bytes;
    uint32_t epoch;
    /*
     * Under s->lock: its number on the connection it was sent on, and
     * the newest write the guest had seen complete when it was issued
     * (on the connection of @dep_gen); see order.h
     */
    uint64_t seq, seq_gen;
    uint64_t dep, dep_gen;
    unsigned state;             /* DRBD_RQ_* (req.h), under s->lock */
    Coroutine *waiter;          /* the guest's coroutine, while it waits */
    bool in_tl;                 /* in the transfer log */
    bool al_held;               /* first only: the AL holds its extents */
    bool guest_gone;            /* the guest's coroutine returned */
    QTAILQ_ENTRY(DrbdRequest) tl_next;
};

/* A receiver's buffer: bytes [pos, len) of data are read, not yet used */
#define DRBD_RX_BUF_SIZE    (DRBD_WIRE_HEADER_SIZE + DRBD_WIRE_MAX_PAYLOAD)
/* Payloads larger than this that are not buffered yet are read directly */
#define DRBD_RX_DIRECT_MIN  (16 * KiB)

typedef struct DrbdRxBuf {
    uint8_t *data;
    size_t pos;
    size_t len;
} DrbdRxBuf;

/*
 * A sleep of a connection coroutine that any thread may end early
 * (qemu_co_sleep_wake() must not race with its own timer, which runs in
 * the sleeper's context).  Under s->lock.  A stopped sleep returns at once
 * from then on.
 */
typedef struct DrbdSleep {
    Coroutine *co;              /* the sleeper, while it sleeps */
    bool stopped;
} DrbdSleep;

/*
 * One connection to one peer: a data channel (writes, barriers, resync)
 * and a meta channel (acks, pings), so that acks never wait behind bulk
 * data.  A channel is written by whoever holds its send lock, and read
 * by one receiver coroutine.
 *
 * The connection manager frees the peer once it is broken and every
 * reference (drbd_peer_get(), drbd_peer_spawn()) is gone.
 */
/*
 * A guest read sent to the peer (readpeer.c), from its DATA_REQUEST until
 * its DATA_REPLY or NEG_DREPLY, or the connection's end.  In the peer's
 * reads_pending while it waits; @gate first, for the gate's lookup.
 */
typedef struct DrbdPeerRead {
    DrbdGateRead gate;
    uint64_t id;
    QEMUIOVector *qiov;
    size_t qiov_offset;
    Coroutine *waiter;          /* the guest's coroutine */
    bool done;                  /* answered, or given up: @ret says how */
    int ret;
} DrbdPeerRead;

typedef struct DrbdPeer {
    BDRVDrbdState *s;
    DrbdConnection *conn;       /* the connection it is established on */
    uint32_t version;           /* the protocol version both speak */

    QIOChannel *data;           /* a socket, or TLS over it */
    QIOChannel *meta;
    CoMutex data_send_lock;
    CoMutex meta_send_lock;
    DrbdRxBuf data_rx;
    DrbdRxBuf meta_rx;

    /* Under s->lock */
    unsigned running;           /* references */
    GByteArray *meta_out;       /* queued for the meta channel */
    bool meta_flushing;         /* a flusher will send meta_out */
    Coroutine *teardown_waiter; /* the manager, waiting for the last one */
    unsigned confirming;        /* its part of s->gen_confirm (channel.c) */
    /* Teardown started: set under s->lock, read with qatomic_read() */
    bool broken;
    char *broken_reason;

    /* What the peer said in the handshake */
    DrbdRole role;
    DrbdDiskState disk;

    /*
     * Under s->lock: resync chunks sent and not yet acked (in s->pe), from
     * the offset of each to its length: an ack must name one of them
     */
    GHashTable *resync_chunks;
    /*
     * Likewise the checksums of chunks (RS_CSUM) not yet answered
     * (csums-alg), and the resync while it waits for a slot among the
     * chunks or the checksums in flight
     */
    GHashTable *csum_chunks;
    Coroutine *resync_waiter;
    unsigned resync_readers;    /* chunks being read and sent */
    bool resync_failed;         /* one of them failed: the resync stops */

    /* What the handshake decided, and the peer's UUIDs it saw */
    DrbdSyncDecision decision;
    DrbdUuids hs_uuids;
    uint64_t hs_current;        /* and the current UUID we gave it */
    /*
     * Both ends: the generation the target, primary, writes in during
     * the resync (drbd_uuid_resync_finished_target()), or 0
     */
    uint64_t target_gen;
    uint64_t resync_bits;       /* bits of the union, when a resync starts */
    bool uuids_synced;          /* both nodes are in one generation now */
    bool hs_primary;            /* the role the handshake told the peer */
    bool resync_persisted;      /* target: its bitmap is on disk */

    bool state_req_sent;        /* s->lock: our STATE_REQ awaits a reply */
    bool resize_sent;           /* s->lock: our RESIZE awaits a reply */
    /*
     * s->lock: this connection wants a resync from us, which the
     * resync's job runs (resync.c)
     */
    bool resync_wanted;
    bool ping_answered;         /* atomic: the meta receiver sets it */
    /* Atomic: PINGs sent (counted before the send), PING_ACKs received */
    uint64_t pings_sent;
    uint64_t pings_acked;
    bool ping_now;              /* atomic: a drain wants a ping at once */
    DrbdSleep ping_sleep;       /* the pinger's */
    DrbdSleep resync_sleep;     /* the resync's, while the rate holds it */
    DrbdSleep ahead_sleep;      /* drbd_resync_ahead_co()'s */

    /*
     * Receiving side: writes being applied, for ordering.  Only the data
     * receiver and the writes it starts touch these, one at a time (they
     * run in one context: the receiver's, which may move only between
     * packets)
     */
    DrbdOrder *order;           /* guest writes and epochs (order.h) */
    uint64_t apply_bytes;       /* received data being written */
    bool acking;                /* a coroutine is acking barriers */
    unsigned resync_inflight;   /* RS_DATA writes and RS_CSUM reads */
    unsigned csum_reading;      /* RS_CSUM reads */
    Coroutine *epoch_waiter;
    BlockReqList apply_reqs;
    bool sync_target;

    /*
     * Online verify (verify.c), under s->lock.  As its source: requests
     * sent and not answered (from the id to a DrbdGateOv, for the gate),
     * and the verify coroutine while it waits for an answer.  As its
     * target: requests being read, and the data receiver while it waits
     * for one of them to finish.
     */
    GHashTable *ov_pending;
    uint64_t ov_next_id;
    Coroutine *ov_waiter;
    unsigned ov_serving;
    Coroutine *ov_serve_waiter;

    /*
     * Guest reads served by the peer (readpeer.c), under s->lock: as the
     * reader, the requests sent and not answered, from the id to a
     * DrbdPeerRead (the gate's reads_pending); as the server, the
     * DATA_REQUESTs being read
     */
    GHashTable *reads_pending;
    uint64_t read_next_id;
    unsigned reads_serving;
} DrbdPeer;

/*
 * A job that runs the node's resync or its verify (job.c): the work is
 * the job's .run (resync.c, verify.c), which calls job_pause_point()
 * between two steps, as block/mirror.c does.  The job belongs to the
 * main loop; its run works in the node's home with a peer, and pauses
 * and waits in the main loop, where the node's close and
 * drbd_jobs_wake_locked() reach it.
 */
typedef struct DrbdJob {
    Job common;
    /*
     * The node, until it closes (NULL then): the main loop's; it cannot
     * change while the run holds @peer
     */
    BDRVDrbdState *s;
    DrbdConnection *conn;       /* the peer's, whose job it is */
    /*
     * Under s->lock: the connection the run works with, whose reference
     * it holds (the connection's teardown waits for the run), and
     * whether the run stands paused (job-pause)
     */
    DrbdPeer *peer;
    bool paused;
} DrbdJob;

/*
 * An online verify this node runs as the source, from drbd-verify until
 * its job ends: the verify is that job, and its run the verify
 * (verify.c).  Under s->lock while it is conn->verify, except @next,
 * which only the run uses; what DRBD_VERIFY_FINISHED reports is sent
 * when the job ends, in the main loop.
 */
typedef struct DrbdVerify {
    DrbdJob job;
    uint64_t start, end;        /* the range, in bytes */
    uint64_t next;              /* where the next request starts */
    uint64_t done;              /* bytes answered */
    uint64_t out_of_sync;       /* bytes found to differ */
    HBitmap *found;             /* those blocks, from @start */
    unsigned inflight;          /* requests sent, not yet accounted */
    unsigned sending;           /* anchor reads running (verify.c) */
    bool resync;                /* resync what it finds at the end */
    bool resynced;              /* ... and a resync was started */
    DrbdRole role, peer_role;   /* at the start: a change stops it */
    char *error;                /* why it stopped, if it did */
    DrbdPaceMarks marks;        /* @done over time, for its speed */
    char *node_name;            /* the event's, which outlives the node */
} DrbdVerify;

/* congestion-extents left out: as many as the activity log has slots */
#define DRBD_CONGESTION_EXTENTS_AL  UINT32_MAX

/*
 * Everything the node has and keeps for one peer, for the node's
 * lifetime: that peer's configuration, its connection manager, what is
 * known of the peer, the epochs of the writes sent to it, its resync and
 * its counters.  The established connection itself, while there is one,
 * is the DrbdPeer in @peer.  A node has one per peer, in s->conns[]
 * (one today; a second and third peer, as with DRBD 9, are more of
 * these); everything that is the node's, whatever its peers, stays in
 * BDRVDrbdState.  Code that works for one peer takes its DrbdConnection
 * (or a DrbdPeer, whose @conn it is), never the node's first one.
 *
 * The configuration is fixed at open and read without a lock; the rest
 * is under the node's lock (s->lock), except where noted.
 */
struct DrbdConnection {
    BDRVDrbdState *s;           /* the node */
    /* Configuration, fixed at open */
    uint8_t peer_node_id;
    /* The metadata's bitmap slot that is this peer's (meta.c), at open */
    unsigned slot;
    /*
     * This peer's out-of-sync bitmap, 4 KiB per bit: what the peer lacks
     * (while we are its sync target: what we lack), under s->lock.  Kept
     * in the metadata's slot @slot (meta.c).
     */
    HBitmap *oos;
    /* The protocol version of the latest HELLO exchange, under s->lock */
    uint32_t hello_version;
    char protocol;              /* 'A', 'B' or 'C' */
    SocketAddress *listen_addr;
    SocketAddress *peer_addr;
    bool connects;              /* we connect, rather than accept */
    uint64_t connect_interval_ns;
    uint64_t ping_interval_ns;
    uint64_t ping_timeout_ns;
    uint32_t max_epoch_size;
    /* on-congestion, congestion-fill and -extents (adjusted at once) */
    DrbdOnCongestion on_congestion;
    uint64_t congestion_fill;
    uint32_t congestion_extents;    /* or DRBD_CONGESTION_EXTENTS_AL */
    uint32_t max_buffers;           /* 4 KiB pages a receiver may hold */
    uint64_t resync_rate;
    DrbdPaceParams pace;        /* the c-* options (pace.h) */
    DrbdHandshakeConfig sb_cfg; /* after-sb options */
    /* Security (secure.c) */
    QCryptoTLSCreds *tls_creds;     /* TLS on both channels, if set */
    char *tls_authz;                /* accepting node: allowed peers */
    char *tls_hostname;             /* connecting node: the peer's name */
    uint8_t *auth_key;              /* the shared secret, if set */
    size_t auth_key_len;
    uint32_t auth_digest;           /* cram-hmac-alg: DRBD_DIGEST_* */
    uint32_t integrity;             /* data-integrity-alg: DRBD_DIGEST_* */
    uint32_t verify_alg;            /* verify-alg: DRBD_DIGEST_* */
    uint32_t csums_alg;             /* csums-alg: DRBD_DIGEST_* */
    /*
     * The options above as a reopen changed them (drbd_conn_adjust()),
     * in a connection of their own that never runs: the manager takes
     * them before it connects again.  Under s->lock.
     */
    DrbdConnection *next_options;

    /* The connection and the peer's state */
    DrbdConnState cstate;
    DrbdRole peer_role;
    DrbdDiskState peer_disk;
    /*
     * The handshake with a primary peer took effect (our UUIDs are its
     * now), before the connection runs and peer_role says so: the other
     * connections' handshakes see that primary from then on.  Under
     * s->lock; false again once the connection runs, or fails.
     */
    bool hs_peer_primary;
    bool discard_my_data;       /* drbd-connect said so, for one handshake */
    /*
     * The node stopped while primary (DRBD_MDF_CRASHED_PRIMARY), and this
     * peer's handshake has not taken that into account yet
     */
    bool crash_pending;
    /*
     * The connection broke while the peer was primary, and has not been
     * made again (role.c: with more than one peer, promotion is forced)
     */
    bool lost_primary;
    /*
     * A write that the guest saw succeed missed the peer while this node
     * had no disk (s->detached): the other peers have it, the peer not,
     * and this node cannot send it.  Back in another generation than
     * ours, the peer is outdated in our eyes (handshake.c).
     */
    bool missed_acked;
    /*
     * A promotion broke the connection for a new handshake: its loss
     * starts no data generation (the promotion started one)
     */
    bool rehandshake;
    /*
     * Fencing (state.c, under s->lock): the peer is out of reach and its
     * data may be up to date (@fence_candidate: lost while up to date or
     * consistent, or not seen since the open), and a primary asked
     * management to fence it, which has not answered (@fence_pending)
     */
    bool fence_candidate;
    bool fence_pending;
    /* A split brain or drbd-disconnect: wait for drbd-connect */
    bool connect_held;
    const char *held_reason;    /* why, for the state change */
    /*
     * Our role changes, asked of the peer (role.c): one STATE_REQ at a
     * time, under state_req_lock (coroutines in the node's context)
     */
    CoMutex state_req_lock;
    bool promote_pending;       /* we asked the peer to let us promote */
    bool promote_granted;       /* it agreed; we are not primary yet */
    int state_reply;            /* its answer, or -1 while none */
    DrbdSleep state_sleep;      /* the request waits for it here */
    /*
     * Online growth (resize.c): the peer's RESIZE_REPLY (0 or an errno),
     * -1 while none, and where the primary waits for it
     */
    int resize_reply;
    DrbdSleep resize_sleep;
    DrbdPeer *peer;             /* the established connection, if any */

    /* The epochs of the writes sent to the peer (tl.c) */
    uint32_t cur_epoch;         /* the epoch new writes join */
    uint32_t epoch_size;        /* writes sent in cur_epoch */
    bool epoch_needs_barrier;   /* a write of cur_epoch has completed */
    uint32_t barrier_acked_upto; /* epochs before this one are acked */
    /*
     * Bytes of the guest writes in the transfer log for the peer: sent,
     * or waiting to be, and not done with as the protocol says (for
     * protocol A, until the barrier after them is acked); and whether
     * the primary went ahead of the peer (pull-ahead: it sends no more
     * writes) until they are all done
     */
    uint64_t ap_bytes;
    bool ahead;
    int64_t ahead_write_ns;     /* the last write not sent, ahead */
    /*
     * The guest writes sent on the established connection are numbered
     * 1, 2, ... (order.h); @seq_gen tells one connection's numbers from
     * another's
     */
    uint64_t seq_gen;
    uint64_t tx_seq;            /* the number of the newest one sent */
    uint64_t done_seq;          /* the newest one completed to the guest */
    CoQueue barrier_waiters;    /* flushes waiting for a barrier ack */

    /* The resync with this peer (resync.c, peer.c) */
    uint64_t resync_total;
    uint64_t resync_done;
    RateLimit resync_limit;
    DrbdPaceMarks resync_marks; /* done over time, for the speed */
    /*
     * Bytes of resync chunks and checksums sent and not answered, and
     * answered since the controller's last step (pace.h)
     */
    uint64_t rs_in_flight, rs_answered;
    const char *resync_paused_after;    /* resync-after holds it */

    /* The online verify this node runs with this peer (verify.c) */
    DrbdVerify *verify;
    /*
     * The resync's job (resync.c), from the first resync until the peer
     * is in sync again: set and cleared in the main loop, under s->lock
     */
    DrbdJob *resync_job;
    /*
     * job.c's: the main loop's bottom half that wakes the jobs
     * (drbd_jobs_wake_locked()), under s->lock; and the calls that the
     * node's context asked of the main loop, not run yet (atomic)
     */
    QEMUBH *job_bh;
    unsigned job_bhs;

    /*
     * Counters for query-drbd, updated and read without s->lock: bytes
     * sent and received, requests waiting for the peer (pe) and received
     * but not acked yet (ua), qatomic_*
     */
    Stat64 ns, nr;
    uint32_t pe, ua;
    uint64_t same_csum;             /* resync bytes checksums proved equal */

    /* The connection manager's (conn.c), which runs in the node's ctx */
    QIOChannelSocket *listener;
    NBDClientConnection *connector; /* connects in a thread of its own */
    QIOChannel *establishing;   /* a channel in its handshake */
    DrbdPeer *handshaking;      /* a connection in its handshake */
    Coroutine *conn_co;         /* the connection manager */
    DrbdSleep conn_sleep;
    /*
     * A node that connects and has a listen address too listens for
     * peers that connect to it as well, to tell them why that cannot
     * work (conn.c): the coroutine, and the channel it reads a HELLO on
     * (under s->lock, for drbd_conn_cut())
     */
    Coroutine *stray_co;
    QIOChannel *stray;
    /* Why the last attempt or connection with this peer failed, s->lock */
    char *last_error;
    /*
     * Connected since the node started (@ever_connected), or else said
     * to be missing (@degraded_noted); under s->lock
     */
    bool ever_connected;
    bool degraded_noted;
    QEMUTimer *degraded_timer;  /* main loop: when to say it */
};

/*
 * The node's locks, outermost first: who holds one may take only those
 * below it.
 *
 *   s->auto_lock (CoMutex)        one auto-promotion at a time (role.c)
 *   conn->state_req_lock          one STATE_REQ in flight per peer
 *     (CoMutex)                   (role.c)
 *   s->reqs_lock (CoMutex)        s->active_reqs: guest writes against
 *                                 resync chunks on the same blocks
 *   peer->data_send_lock,         one sender per channel (channel.c)
 *   peer->meta_send_lock (CoMutex)
 *   s->lock (QemuMutex)           every field documented "under s->lock";
 *                                 never held across a yield or I/O
 *   a job's progress (QEMU's)     job_progress_update() as the work
 *                                 advances, under s->lock
 *
 * QEMU's job_mutex is never taken under s->lock: the jobs are woken from
 * the main loop's job_bh, which holds no lock of ours (job.c).
 *
 * Fields outside these are owned otherwise, as their comments say: by
 * one coroutine or AioContext (the data receiver's apply state, the
 * connection manager's), atomic (the counters, closing, broken), or
 * fixed at open.
 */

/*
 * The metadata on disk (meta.c): none if @child is NULL.  Under s->lock,
 * except @child, which changes in the main loop only (open, reopen,
 * drbd-attach, with the node drained), and @failed, set under the lock
 * and read with qatomic_read() where the lock is not held.
 */
typedef struct DrbdMeta {
    BdrvChild *child;           /* bs->file or s->meta */
    bool writable;              /* the node may write its metadata */
    bool failed;                /* a metadata write failed */
    bool reopen_closed;         /* a reopen read-only left it clean */
    bool primary_pending;       /* becoming primary: say so on disk */
    uint64_t seq;               /* superblock snapshots taken */
    uint64_t seq_written;       /* the newest of them on disk */
    /* That newest says DRBD_MDF_PRIMARY_LOST_QUORUM (s->gen_unacked_lost) */
    bool lost_quorum_written;
    uint64_t sb_offset;
    DrbdSuperblock sb;          /* as it is to be written next */
    /*
     * On-disk bitmap blocks changed: bit slot * @bm_blocks + block, for
     * the blocks of each slot
     */
    unsigned long *bm_dirty;
    uint64_t bm_blocks;         /* blocks of the on-disk bitmap per slot */
    /* The activity log */
    DrbdAlCache *al;            /* its hot extents */
    uint64_t al_tr_number;      /* the last transaction written */
    bool al_writing;            /* a transaction is being written */
    CoQueue al_queue;           /* begins waiting for a transaction */
    uint32_t al_recovered;      /* extents marked after an unclean stop */
    bool al_damaged;            /* the AL ring could not be recovered */
} DrbdMeta;

struct BDRVDrbdState {
    BlockDriverState *bs;
    QLIST_ENTRY(BDRVDrbdState) next;    /* the process's (state.c) */

    /* Options, fixed at open */
    BlockdevOptionsDrbd *opts;  /* as given, for reopen to compare */
    char *resource;
    uint8_t node_id;
    char *resync_after;         /* the node name, if any */
    uint64_t size;              /* bytes of data */

    /* Protects everything below, except where noted */
    QemuMutex lock;

    DrbdRole role;
    DrbdDiskState disk;
    char *last_error;

    /*
     * Local disk failures (state.c): on-io-error is fixed at open.
     * detached (atomic reads, written under s->lock) is set once the
     * node stops using its disk, for good until it is opened again:
     * guest I/O then goes to the peer, and the metadata is no longer
     * written.  disk_error_bh (main loop) writes the superblock one last
     * time, best effort, and tells the peer (also after a write error
     * passed on made a secondary's data inconsistent).  The two flags
     * say that a refusal for lack of an up-to-date peer, and a
     * passed-on error, were logged (once per streak).
     */
    DrbdOnIoError on_io_error;
    /* disk-timeout (0: none) and read-balancing; a reopen changes them */
    uint64_t disk_timeout_ns;
    DrbdReadBalancing read_balancing;
    /*
     * Guest requests cover whole 4 KiB bitmap blocks (the block layer
     * reads around the others): set, in the main loop, when a sync
     * target is promoted, so that a guest write replaces whole blocks
     * that the resync would otherwise write over
     */
    bool whole_blocks;
    unsigned read_turn;         /* atomic: round-robin's count */
    bool detached;
    QEMUBH *disk_error_bh;
    bool no_peer_reported;
    bool pass_on_reported;
    uint64_t hs_gen;            /* role, disk state or UUIDs changed */
    bool refusal_reported;      /* a refused guest request was logged */
    bool auto_refusal_reported; /* a failed auto-promotion was logged */

    DrbdQuorum quorum;          /* state.c's */
    /*
     * The fencing policy, fixed at open; under s->lock (and read with
     * qatomic_read()): guest I/O waits for management to answer
     * DRBD_FENCE_PEER (resource-and-stonith), with the quorum's waiters
     */
    DrbdFencing fencing;
    bool fence_suspended;

    /*
     * role=auto (role.c): promoted for the first user holding write
     * permission, demoted when the last lets go.  auto_promote is fixed
     * at open; write_perm changes in the main loop only (set_perm);
     * auto_lock, taken in the node's context, lets one promotion run at
     * a time; auto_demote_bh runs in the main loop.
     */
    bool auto_promote;
    bool write_perm;
    CoMutex auto_lock;
    QEMUBH *auto_demote_bh;
    /*
     * A primary lost a peer: its next write starts a new data generation
     * (conn.c), under gen_lock, which the writes of the node's context
     * wait on while the new one goes to disk (gen_busy).  Atomic, set
     * under s->lock.
     */
    bool gen_due;
    bool gen_busy;
    CoMutex gen_lock;
    /*
     * Set under s->lock (read atomically): the primary started a data
     * generation (a peer's loss, a promotion), and the guest writes that
     * complete from then on wait for the peers to show they know it: how
     * many answers are awaited (channel.c), and those writes
     */
    unsigned gen_confirm;
    CoQueue gen_confirm_queue;
    /*
     * A guest write of the current data generation completed (atomic;
     * true at open, where it is not known); and, under s->lock, the node
     * lost its quorum as primary before one had (state.c): its changes
     * of this generation were never acknowledged, and on a split brain
     * they are the ones dropped.  The metadata keeps it
     * (DRBD_MDF_PRIMARY_LOST_QUORUM), written by the guest write that
     * finds the quorum gone (drbd_co_write_quorum_wait()), so that a node
     * killed meanwhile still yields when it comes back.
     */
    bool gen_acked;
    bool gen_unacked_lost;

    /*
     * While the node is a sync target, the generation whose writes its
     * data holds in part: its source's, at the handshake or announced
     * since.  Inconsistent afterwards (the source lost), it takes no
     * other secondary for its source whose UUIDs lack it: that resync
     * would overwrite writes the peer never had (handshake.c).  A primary
     * target's own writes count from protocol version 10: it starts a
     * generation for them, which its source joins when told (state.c,
     * peer.c), and notes that one.  0 when there is none;
     * drbd-invalidate clears it.  The metadata keeps it
     * (partial_uuid), so that a target that stops or is killed waits for
     * such a source still when it comes back.  Under s->lock.
     */
    uint64_t partial_gen;

    /*
     * Migration (drbd.c, main loop only).  A replicating node that is
     * inactive (an incoming migration's destination, or a source that
     * handed its role over) keeps its children active: its local disk is
     * its own, and the peer's writes go on reaching it.  From an
     * inactivation until unpark_source has activated the children again,
     * background I/O waits at the drain gate (parked).
     */
    bool keep_children_active;
    bool parked;
    guint unpark_source;        /* a glib idle source */

    /*
     * The node's peers, a connection each, fixed at open (state.c).  One
     * today: see drbd_conn()
     */
    DrbdConnection *conns[DRBD_PEERS_MAX];
    unsigned nr_conns;

    /*
     * The transfer log (tl.c's, under s->lock): guest writes not yet done
     * with the peer, in the order they were sent, and by id
     */
    QTAILQ_HEAD(, DrbdRequest) transfer_log;
    GHashTable *tl_by_id;       /* &req->id -> req */
    uint64_t next_req_id;

    /*
     * Counters for query-drbd, updated and read without s->lock: bytes
     * (info drbd shows KiB) written and read on the local disk, metadata
     * transactions and bitmap blocks written, local requests and guest
     * writes in flight (qatomic_*)
     */
    Stat64 dw, dr;
    Stat64 al_writes, bm_writes;
    uint32_t lo, ap;
    /* Bytes the guest read and wrote, for c-min-rate (atomic) */
    Stat64 app_bytes;
    /* Buffers for background reads, kept for reuse (home.c) */
    GSList *chunk_bufs;
    unsigned chunk_bufs_kept;

    /* Metadata options and children, set at open and by drbd-attach */
    DrbdMetaDisk meta_disk;
    BdrvChild *meta;            /* the external metadata child, if any */
    DrbdMeta md;                /* meta.c's */

    /*
     * The extents a primary peer wrote lately (meta.c), with more than
     * one peer: a set and its order, oldest first, under s->lock
     */
    GHashTable *recent;
    GQueue recent_order;
    /*
     * The data generations this node knows of, newest last (uuid.h),
     * under s->lock: its own current UUIDs, and those primaries
     * announced
     */
    DrbdGenSeen gen_seen;

    /* Guest writes and resync reads in flight, for overlap checks */
    CoMutex reqs_lock;
    BlockReqList active_reqs;

    /*
     * The connection's home: the node's AioContext.  Every coroutine of
     * the connection (manager, receivers, pinger, resync) runs there and
     * moves itself there at its next wait when the node moves (home.c);
     * timers are created in the context of the coroutine that waits on
     * them.  Written under s->lock by the main loop on attach.
     */
    AioContext *ctx;
    bool closing;               /* set under s->lock; qatomic_read() */
    bool yank;                  /* registered with QEMU's yank (main loop) */

    /* The drain gate (home.c): drained is atomic, drain_queue under lock */
    unsigned drained;           /* drained sections open on the node */
    CoQueue drain_queue;        /* background I/O waiting for drain end */
};

/*
 * The files of the driver, from the top floor down: a file calls only
 * the files on the floors below its own (`farm-studio look block/drbd`
 * draws them; it must find no circle and no arrow running back up).
 *
 *   drbd-hmp.c, drbd-qmp.c   monitor commands
 *   drbd.c                   the BlockDriver callbacks
 *   conn.c                   the connection manager: connect or accept,
 *                            handshake, run, tear down; context moves
 *   receiver.c               the receivers and the pinger
 *   handshake.c              HELLO, parameters, bitmaps, the sync decision
 *   verify.c                 online verify, both sides
 *   role.c                   promotion, demotion, invalidation
 *   peer.c                   the receiving side: applying the peer's writes
 *   resync.c                 the sync source's side of a resync
 *   tl.c                     the transfer log: guest writes to the peer
 *   secure.c                 TLS and the shared-secret proof
 *   readpeer.c               guest reads served by the peer
 *   digest.c                 digests of data; comparing a range with the
 *                            peer's digests in apply order
 *   channel.c                a peer: its references, its failure, and the
 *                            packets on its two channels
 *   meta.c                   metadata on disk: superblock, bitmap, AL
 *   home.c                   the drain gate, context moves, sleeps,
 *                            background reads
 *   job.c                    the jobs that run the resync and the verify:
 *                            made, paused, woken and let go of in the
 *                            main loop (their runs are resync.c's and
 *                            verify.c's)
 *   state.c                  roles, connection and disk states, UUIDs,
 *                            local disk errors (on-io-error)
 *   disk.c                   requests to the local disk, disk-timeout
 *   gate.c, order.c, al-cache.c, wire.c, uuid.c, md-format.c, req.c,
 *   rle.c, pace.c, proc.c    pure logic (no I/O, no locks, no globals)
 *
 * Adding a packet: its command and layout in wire.h (a new protocol
 * version if an older peer could not take it), encoder and bounds-checking
 * decoder in wire.c with unit tests (tests/unit/test-drbd-wire.c), the
 * state that may accept it in gate.c (unit tests, tests/fuzz/fuzz-gate.c's
 * model), the receiver's case (receiver.c), a hostile-peer case in the
 * drbd-malformed iotest, and docs/interop/drbd-protocol.rst.
 *
 * Adding a QMP field: qapi/drbd.json with its documentation, filled in
 * drbd_fill_info() (state.c), shown by "info drbd" (drbd-hmp.c) if an
 * operator reads it there, and docs/system/drbd.rst.
 *
 * Adding an on-disk field: md-format.h/.c (layout, encoder, a decoder
 * that refuses bad values, the format version if an older reader would
 * misread it), meta.c, qemu-img info/check where they show metadata,
 * tests/unit/test-drbd-md.c, tests/fuzz/fuzz-superblock.c, and the
 * format's description in docs/interop/drbd-metadata.rst.
 */

/*
 * The node's one connection, where code is still written for a single
 * peer: the guest write and its request state, the out-of-sync bitmap
 * (one per node, in metadata slot 0), the resync's and the verify's jobs
 * and drbd-verify, the flat fields of query-drbd and of its events, and
 * a few messages.  Multi-node support turns each of its callers into a
 * loop over s->conns[] (or a per-peer object).
 */
static inline DrbdConnection *drbd_conn(BDRVDrbdState *s)
{
    return s->conns[0];
}

/* home.c */
int coroutine_fn drbd_co_io_begin(BDRVDrbdState *s);
void drbd_io_end(BDRVDrbdState *s);
int coroutine_fn drbd_co_read_local(BDRVDrbdState *s, int64_t offset,
                                    int64_t bytes, void *buf);
void coroutine_fn drbd_co_hold_range(BDRVDrbdState *s, BlockReq *req,
                                     int64_t offset, int64_t bytes);
void coroutine_fn drbd_co_release_range(BDRVDrbdState *s, BlockReq *req);
/* A resync chunk or verify request, and a packet's fields around it */
#define DRBD_CHUNK_BUF_SIZE     (DRBD_RESYNC_CHUNK + 4 * KiB)
void *drbd_chunk_buf_get(BDRVDrbdState *s);
void drbd_chunk_buf_put(BDRVDrbdState *s, void *buf);
void *drbd_payload_alloc(BDRVDrbdState *s, size_t len);
void drbd_payload_free(BDRVDrbdState *s, void *buf, size_t len);
void drbd_chunk_bufs_free(BDRVDrbdState *s);
void drbd_drain_begin_gate(BDRVDrbdState *s);
void drbd_drain_end_gate(BDRVDrbdState *s);
void drbd_drain_gate_close(BDRVDrbdState *s);
void coroutine_fn drbd_co_rehome(BDRVDrbdState *s);
void coroutine_fn drbd_co_sleep(BDRVDrbdState *s, DrbdSleep *sl,
                                uint64_t ns);
void drbd_sleep_wake(BDRVDrbdState *s, DrbdSleep *sl, bool stop);
void drbd_timer_set_flag(void *opaque);

/* state.c */
DrbdConnection *drbd_conn_new(BDRVDrbdState *s, uint8_t peer_node_id);
void drbd_conn_free(DrbdConnection *conn);
#define DRBD_CONN_BIT(state)    (1u << (state))
#define DRBD_CONN_RESYNCING     (DRBD_CONN_BIT(DRBD_CONN_STATE_SYNC_SOURCE) | \
                                 DRBD_CONN_BIT(DRBD_CONN_STATE_SYNC_TARGET))
bool drbd_replicates(BDRVDrbdState *s);
bool drbd_disk_may_be_current(DrbdDiskState d);
bool drbd_peer_primary_locked(BDRVDrbdState *s);
/*
 * The answer (DRBD_STATE_REPLY_*) to @conn's peer, of protocol version 6,
 * asking to be promoted with the current UUID @uuid (0: not said), where
 * this node is not primary itself: refused while another peer is primary
 * (PRIMARY_PEER) or was granted its own promotion, and when the asking
 * node is behind a data generation this node knows of (BEHIND: a
 * primary's writes that it lacks would be lost).  Under s->lock.
 */
uint32_t drbd_promotion_answer_locked(DrbdConnection *conn, uint64_t uuid);
bool drbd_conn_in_locked(BDRVDrbdState *s, unsigned mask);
uint64_t drbd_ping_timeout_ns(BDRVDrbdState *s);
bool drbd_detach(BDRVDrbdState *s, const char *reason, bool failed);
bool drbd_local_error(BDRVDrbdState *s, DrbdIoOperation op, int ret);
bool drbd_disk_detached(DrbdDiskState d);
void drbd_set_state(BDRVDrbdState *s, DrbdConnection *conn, int role,
                    int cstate, int disk, int peer_role, int peer_disk,
                    const char *reason);
void drbd_fill_info(BDRVDrbdState *s, DrbdInfo *info);
void drbd_uuids_get_locked(DrbdConnection *conn, DrbdUuids *u);
void drbd_uuids_set_locked(DrbdConnection *conn, const DrbdUuids *u);
bool drbd_new_generation_locked(BDRVDrbdState *s, bool writes_continue,
                                bool told);
int drbd_other_primary_locked(DrbdConnection *conn);
bool drbd_uuid_told_locked(DrbdConnection *c);
/*
 * Before a write of a primary that lost a peer since its last one: the
 * new data generation that the peer's absence starts, on disk and
 * announced to the peers connected (conn.c).  A guest request's
 * coroutine, in the node's context.
 */
void coroutine_fn GRAPH_RDLOCK drbd_co_generation_due(BDRVDrbdState *s);
/*
 * A primary detached from its disk: its writes go on to its peers alone,
 * and a new data generation starts now, announced to the peers in sync
 * (they join it: from version 11 they start none of their own).  Main
 * loop, without s->lock.
 */
void drbd_detached_new_generation(BDRVDrbdState *s);
void drbd_quorum_update_locked(BDRVDrbdState *s);
int drbd_quorum_check_locked(BDRVDrbdState *s, Error **errp);
int coroutine_fn drbd_co_quorum_wait(BDRVDrbdState *s, bool write);
void drbd_resume_io(BDRVDrbdState *s);
void drbd_fence_peers(BDRVDrbdState *s);
bool drbd_fence_answer(BDRVDrbdState *s);
uint64_t drbd_fresh_uuid(void);
char *drbd_uuid_hex(uint64_t uuid);
void drbd_note_reason(BDRVDrbdState *s, const char *what, const char *reason);
void drbd_note_error(BDRVDrbdState *s, Error *err);
void drbd_conn_note_error(DrbdConnection *conn, Error *err);
char *drbd_degraded_str_locked(BDRVDrbdState *s);
void drbd_note_degraded(DrbdConnection *conn);
const char *drbd_name(BDRVDrbdState *s);
uint64_t drbd_resync_done_locked(DrbdConnection *conn);
void drbd_resync_marks_start_locked(DrbdConnection *conn);
void drbd_nodes_add(BDRVDrbdState *s);
void drbd_nodes_remove(BDRVDrbdState *s);
bool drbd_resync_after_check(BDRVDrbdState *s, Error **errp);
const char *drbd_resync_after_busy(BDRVDrbdState *s);

/* meta.c */
void drbd_oos_set_locked(DrbdConnection *conn, uint64_t offset,
                         uint64_t bytes);
/* The same for every peer: none of them has what we have there */
void drbd_oos_set_all_locked(BDRVDrbdState *s, uint64_t offset,
                             uint64_t bytes);
/*
 * Clear the 4 KiB blocks of [@offset, @offset + @bytes) (at most
 * DRBD_OV_MAX_BLOCKS) whose bit in @differ is clear; returns their bytes
 */
uint64_t drbd_oos_reset_equal_locked(DrbdConnection *conn, uint64_t offset,
                                     uint32_t bytes, uint64_t differ);
void drbd_oos_reset_locked(DrbdConnection *conn, uint64_t offset,
                           uint64_t bytes);
/* Whether a peer's bitmap marks a block of [@offset, @offset + @bytes) */
bool drbd_oos_any_locked(BDRVDrbdState *s, uint64_t offset, uint64_t bytes);
/* A primary peer wrote [@offset, @offset + @bytes) here */
void drbd_recent_note_locked(BDRVDrbdState *s, uint64_t offset,
                             uint64_t bytes);
/*
 * This node's data became @conn's peer's: the bitmaps of its other peers
 * recorded what they lacked of the old data.  What they lack of the new
 * is not known here: each such peer's bitmap is emptied and counts from
 * no generation, so that the next handshake with it goes by the current
 * and history UUIDs alone (in sync if both are in the source's
 * generation, a full resync otherwise).  A crash of this node as primary
 * no longer matters either (the flag goes, whatever crash_pending says):
 * what its activity log covered is the source's now.  Under s->lock.
 */
void drbd_forget_other_peers_locked(DrbdConnection *conn);
/*
 * The primary peer of @except was lost: what it wrote lately may differ
 * between this node and each other peer
 */
void drbd_recent_mark_locked(BDRVDrbdState *s, DrbdConnection *except);
void drbd_recent_free(BDRVDrbdState *s);
void drbd_resync_finished_uuids(DrbdPeer *peer);
/* Every peer gets an empty bitmap of s->size bytes, where it has none */
void drbd_oos_alloc(BDRVDrbdState *s);
void drbd_oos_free(BDRVDrbdState *s);
int coroutine_fn GRAPH_RDLOCK
drbd_al_begin_io(BDRVDrbdState *s, int64_t offset, int64_t bytes);
void drbd_al_end_io_locked(BDRVDrbdState *s, int64_t offset, int64_t bytes);
int64_t drbd_al_max_request(BDRVDrbdState *s);
int GRAPH_RDLOCK drbd_md_open(BDRVDrbdState *s, DrbdMdPlacement placement,
                              int64_t data_len, Error **errp);
int GRAPH_RDLOCK drbd_md_open_commit(BDRVDrbdState *s, Error **errp);
int GRAPH_RDLOCK drbd_md_close(BDRVDrbdState *s);
void drbd_md_free(BDRVDrbdState *s);
int coroutine_fn GRAPH_RDLOCK
drbd_md_co_resize(BDRVDrbdState *s, uint64_t size, Error **errp);
int coroutine_fn GRAPH_RDLOCK
drbd_co_resize_disk(BDRVDrbdState *s, uint64_t size, Error **errp);

/* resize.c */
int coroutine_fn GRAPH_RDLOCK
drbd_co_resize_online(BDRVDrbdState *s, uint64_t size, Error **errp);
int coroutine_fn drbd_peer_resize(DrbdPeer *peer, uint64_t size,
                                  Error **errp);
void coroutine_fn drbd_peer_wait_applies(DrbdPeer *peer);
void drbd_peer_resize_reply(DrbdPeer *peer, uint32_t result);
int GRAPH_RDLOCK drbd_md_grow(BDRVDrbdState *s, uint32_t max_peers,
                              int64_t node_id, int64_t peer_node_id,
                              Error **errp);
void drbd_md_detached(BDRVDrbdState *s);
int coroutine_fn GRAPH_RDLOCK
drbd_md_check(BDRVDrbdState *s, BdrvCheckResult *res, BdrvCheckMode fix);
int drbd_md_sync_all(BDRVDrbdState *s);
int coroutine_fn drbd_co_md_sync(BDRVDrbdState *s, bool bitmap);
int coroutine_fn drbd_data_flush_co(BDRVDrbdState *s);
int coroutine_fn GRAPH_RDLOCK
drbd_md_sync_in_request(BDRVDrbdState *s, bool bitmap);
int coroutine_fn GRAPH_UNLOCKED
drbd_md_create(BlockBackend *file, BlockBackend *meta, uint64_t data_size,
               uint32_t al_extents, uint32_t max_peers, bool data_raw,
               Error **errp);
ImageInfoSpecificDrbd *drbd_md_info(BDRVDrbdState *s);

/* channel.c */
typedef struct DrbdDeadline {
    QEMUTimer *timer;
    QIOChannel *ioc;
    bool expired;
} DrbdDeadline;

void drbd_deadline_arm(DrbdDeadline *d, QIOChannel *ioc, uint64_t ns);
void drbd_deadline_rearm(DrbdDeadline *d, uint64_t ns);
void drbd_deadline_disarm(DrbdDeadline *d);
void drbd_setup_channel(QIOChannel *ioc, const char *name);
int coroutine_fn drbd_write_packet(QIOChannel *ioc, GByteArray *pkt,
                                   Error **errp);
int coroutine_fn drbd_rx_packet(DrbdPeer *peer, QIOChannel *ioc,
                                DrbdRxBuf *rb, DrbdHeader *h,
                                uint8_t **payload, Error **errp);
int coroutine_fn drbd_read_packet(QIOChannel *ioc, DrbdHeader *h,
                                  uint8_t **payload, Error **errp);
int coroutine_fn drbd_expect_packet(QIOChannel *ioc, uint16_t cmd,
                                    uint8_t **payload, uint32_t *len,
                                    Error **errp);
DrbdPeer *drbd_peer_new(DrbdConnection *conn, QIOChannel *data,
                        QIOChannel *meta);
void drbd_peer_free(DrbdPeer *peer);
DrbdPeer *drbd_peer_get(DrbdConnection *conn);
DrbdPeer *drbd_peer_get_locked(DrbdConnection *conn);
void drbd_peer_put(DrbdPeer *peer);
void drbd_peer_spawn(DrbdPeer *peer, CoroutineEntry *fn, void *opaque);
void coroutine_fn drbd_peer_spawn_here(DrbdPeer *peer, CoroutineEntry *fn,
                                       void *opaque);
void drbd_peer_fail(DrbdPeer *peer, const char *fmt, ...)
    G_GNUC_PRINTF(2, 3);
/* The same for @err, which it frees, after "@what: " unless @what is NULL */
void drbd_peer_fail_err(DrbdPeer *peer, const char *what, Error *err);
void drbd_peers_fail(BDRVDrbdState *s, const char *reason);
void drbd_peer_kick(DrbdPeer *peer);
int coroutine_fn drbd_send_meta(DrbdPeer *peer, GByteArray *pkt);
void drbd_queue_meta(DrbdPeer *peer, const GByteArray *pkt);
int coroutine_fn drbd_send_data_channel(DrbdPeer *peer, GByteArray *pkt);
void drbd_queue_block_ack(DrbdPeer *peer, uint16_t cmd, uint64_t offset,
                          uint64_t id, uint32_t bytes);
void drbd_announce_new_uuid(BDRVDrbdState *s);
void drbd_gen_confirm_ask_locked(DrbdPeer *peer);
void drbd_gen_confirmed_locked(DrbdPeer *peer, unsigned n);
/*
 * @peer answers a ping sent after the generation's NEW_UUID, or is lost
 * (failed after three times ping-timeout, which says it was asked after
 * @why): one of the answers awaited
 */
void coroutine_fn drbd_co_gen_confirm(DrbdPeer *peer, const char *why);
void coroutine_fn drbd_co_gen_confirm_wait(BDRVDrbdState *s);

/* tl.c: the transfer log and the sending of guest writes */
void drbd_req_event_locked(BDRVDrbdState *s, DrbdRequest *req,
                           DrbdReqEvent ev);
void drbd_tl_init(BDRVDrbdState *s);
void drbd_tl_cleanup(BDRVDrbdState *s);
DrbdRequest *drbd_tl_submit_locked(BDRVDrbdState *s, DrbdPeer *const *peers,
                                   int64_t offset, int64_t bytes, bool fua,
                                   bool al_held);
void drbd_tl_guest_done_locked(BDRVDrbdState *s, DrbdRequest *reqs);
DrbdRequest *drbd_req_find_locked(DrbdConnection *conn, uint64_t id);
int drbd_tl_barrier_acked_locked(DrbdConnection *conn, uint32_t epoch,
                                 Error **errp);
void drbd_tl_connection_lost_locked(DrbdConnection *conn);
int coroutine_fn drbd_send_write(DrbdPeer *peer, DrbdRequest *req,
                                 uint16_t cmd, QEMUIOVector *qiov,
                                 size_t qiov_offset, uint32_t dp_flags);
int coroutine_fn drbd_send_ahead(DrbdPeer *peer);
int coroutine_fn drbd_send_barrier(DrbdPeer *peer, bool flush,
                                   uint32_t *epoch);
void coroutine_fn drbd_tl_peer_disk_gone(DrbdPeer *peer, bool peer_primary);

/* disk.c: requests to the local disk, bounded by disk-timeout */
int coroutine_fn GRAPH_RDLOCK
drbd_co_disk_write(BDRVDrbdState *s, uint16_t cmd, int64_t offset,
                   int64_t bytes, QEMUIOVector *qiov, size_t qiov_offset,
                   BdrvRequestFlags flags);
int coroutine_fn GRAPH_RDLOCK
drbd_co_disk_read(BDRVDrbdState *s, int64_t offset, int64_t bytes,
                  QEMUIOVector *qiov, size_t qiov_offset,
                  BdrvRequestFlags flags);
int coroutine_fn GRAPH_RDLOCK drbd_co_disk_flush(BDRVDrbdState *s);

/* readpeer.c: guest reads served by the peer */
bool drbd_peer_can_read_locked(DrbdConnection *conn);
DrbdConnection *drbd_reader_locked(BDRVDrbdState *s);
int coroutine_fn drbd_co_read_peer(BDRVDrbdState *s, int64_t offset,
                                   int64_t bytes, QEMUIOVector *qiov,
                                   size_t qiov_offset);
int coroutine_fn drbd_read_reply(DrbdPeer *peer, uint16_t cmd,
                                 const DrbdDataPacket *p,
                                 const DrbdBlockAck *neg, Error **errp);

/* resync.c: the sync source */
/* This node is the sync source of @peer now: the resync's job runs it */
void drbd_resync_start(DrbdPeer *peer);
void coroutine_fn drbd_resync_ahead_co(void *opaque);
void coroutine_fn drbd_resync_acked(DrbdPeer *peer, uint16_t cmd,
                                    const DrbdBlockAck *ack);
/* Any thread: a running resync and the next ones go at @rate (0: any) */
void drbd_resync_set_rate(BDRVDrbdState *s, uint64_t rate);
int coroutine_fn drbd_resync_csum_reply(DrbdPeer *peer,
                                        const DrbdOvPacket *p,
                                        Error **errp);

/* job.c: the jobs that run the resync and the verify */
/*
 * Main loop: a job of @driver (an instance starting with a DrbdJob) for
 * the node's peer of @c, id "TYPE-NODE" (or "TYPE-NODE-PEER" with more
 * than one peer), or internal where that is no id or is taken
 */
DrbdJob *drbd_job_new(DrbdConnection *c, const JobDriver *driver);
/* Call @fn in the main loop, where jobs are made; the close waits */
void drbd_job_defer(DrbdConnection *c, void (*fn)(DrbdConnection *c));
/* The drivers' .pause and .resume: the job pauses in the main loop */
void coroutine_fn drbd_job_pause(Job *job);
void coroutine_fn drbd_job_resume(Job *job);
void drbd_job_detach(BDRVDrbdState *s);

/*
 * What a job's run waits for may have happened (a state change, a
 * broken peer): job_bh enters the jobs that wait, in the main loop.
 * Any thread, under s->lock.
 */
static inline void drbd_jobs_wake_locked(BDRVDrbdState *s)
{
    unsigned i;

    for (i = 0; i < s->nr_conns; i++) {
        if (s->conns[i]->job_bh) {
            qemu_bh_schedule(s->conns[i]->job_bh);
        }
    }
}

/* verify.c: online verify */
/* With the peer @peer_node_id, or where that is -1 the first connected */
int drbd_verify_start(BDRVDrbdState *s, bool has_start, uint64_t start,
                      bool has_length, uint64_t length, bool resync,
                      int peer_node_id, Error **errp);
int coroutine_fn drbd_verify_request(DrbdPeer *peer, const DrbdOvPacket *p,
                                     Error **errp);
int coroutine_fn drbd_verify_reply(DrbdPeer *peer, const DrbdOvPacket *p,
                                   Error **errp);

/* peer.c: the receiving side */
int coroutine_fn drbd_peer_apply(DrbdPeer *peer, uint16_t cmd,
                                 const DrbdDataPacket *p, uint8_t *buf,
                                 size_t buf_len, Error **errp);
int coroutine_fn drbd_peer_barrier(DrbdPeer *peer, const DrbdBarrier *b,
                                   Error **errp);
int coroutine_fn drbd_peer_out_of_sync(DrbdPeer *peer,
                                       const DrbdBlockAck *range,
                                       Error **errp);
int coroutine_fn drbd_peer_csum(DrbdPeer *peer, const DrbdOvPacket *p,
                                Error **errp);
int coroutine_fn drbd_peer_resync_done(DrbdPeer *peer, Error **errp);
int coroutine_fn drbd_peer_ahead(DrbdPeer *peer, Error **errp);
int coroutine_fn drbd_peer_read_request(DrbdPeer *peer,
                                        const DrbdBlockAck *r,
                                        Error **errp);
int coroutine_fn drbd_peer_new_uuid(DrbdPeer *peer, uint64_t uuid,
                                    Error **errp);

/* handshake.c */
int coroutine_fn drbd_send_hello(DrbdConnection *conn, QIOChannel *ioc,
                                 bool meta, Error **errp);
int coroutine_fn drbd_recv_hello(QIOChannel *ioc, DrbdHello *hello,
                                 Error **errp);
int coroutine_fn drbd_recv_hello_answer(DrbdConnection *conn, QIOChannel *ioc,
                                        DrbdHello *hello, Error **errp);
uint32_t drbd_judge_hello(DrbdConnection *conn, const DrbdHello *h,
                          Error **errp);
int drbd_check_hello(DrbdConnection *conn, const DrbdHello *h, Error **errp);
void coroutine_fn drbd_send_refuse(DrbdConnection *conn, QIOChannel *ioc,
                                   const DrbdHello *h, uint32_t reason);
int coroutine_fn drbd_exchange_params(DrbdPeer *peer, DrbdDeadline *dl,
                                      Error **errp);

/* secure.c */
int drbd_secure_open(DrbdConnection *conn, BlockdevOptionsDrbd *o,
                     const DrbdPeerOptions *po, Error **errp);
void drbd_secure_close(DrbdConnection *conn);
uint32_t drbd_secure_hello_flags(DrbdConnection *conn);
int drbd_secure_check_hello(DrbdConnection *conn, const DrbdHello *h,
                            Error **errp);
int drbd_auth_answer(uint32_t digest, const uint8_t *key, size_t key_len,
                     bool connector, const uint8_t *their_nonce,
                     const uint8_t *our_nonce, DrbdAuthResponse *r,
                     Error **errp);
int coroutine_fn drbd_secure_channel(DrbdConnection *conn, QIOChannel **ioc,
                                     bool connector, Error **errp);
/* digest.c: digests of data */
uint32_t drbd_digest_of_alg(DrbdDigestAlg alg);
bool drbd_digest_hash_alg(uint32_t digest, QCryptoHashAlgo *alg);
bool drbd_digest_of_hash(QCryptoHashAlgo alg, uint32_t *digest);
size_t drbd_digest_size(uint32_t digest);
uint32_t drbd_crc32c_iov(const struct iovec *iov, size_t niov);
/*
 * The ways of computing it, each faster than the one before where the
 * CPU has what it needs: QEMU's crc32c(), SSE4.2's crc32 instruction in
 * three streams, and that with folding by VPCLMULQDQ, on 256 bits (AVX2)
 * or on 512 (AVX-512).  drbd_crc32c_iov_upto() takes the fastest the CPU
 * has, up to @max, so that a test reaches each.
 */
#define DRBD_CRC32C_SOFT        1
#define DRBD_CRC32C_SSE42       2
#define DRBD_CRC32C_FOLD256     3
#define DRBD_CRC32C_FOLDING     4
uint32_t drbd_crc32c_iov_upto(const struct iovec *iov, size_t niov, int max);
int drbd_digest_iov(uint32_t digest, const struct iovec *iov, size_t niov,
                    uint8_t *out, Error **errp);
/*
 * The @digest of each 4 KiB block of @buf (@bytes, at most
 * DRBD_OV_MAX_BYTES) into @out, one after the other
 */
int drbd_block_digests(uint32_t digest, const uint8_t *buf, uint32_t bytes,
                       uint8_t *out, Error **errp);
/* The blocks whose digests (of @dsize bytes) differ, bit i for block i */
uint64_t drbd_block_digests_differ(const uint8_t *mine,
                                   const uint8_t *theirs, uint32_t bytes,
                                   size_t dsize);
/*
 * With data-integrity-alg @alg, give @p the digest of its data (in
 * @iov), computed into @buf (DRBD_WIRE_DIGEST_MAX bytes)
 */
int drbd_digest_attach(uint32_t alg, DrbdDataPacket *p,
                       const struct iovec *iov, size_t niov, uint8_t *buf,
                       Error **errp);
/*
 * Whether the data packet @p (@cmd) carries the digest of its data that
 * data-integrity-alg @alg says it must: -EBADMSG if it does not match
 */
int drbd_check_integrity(uint32_t alg, uint16_t cmd, const DrbdDataPacket *p,
                         Error **errp);
/*
 * Read [@offset, @offset + @bytes) of the local data and put the @alg
 * digest of each of its 4 KiB blocks into @digests
 */
int coroutine_fn drbd_read_digests(BDRVDrbdState *s, uint32_t alg,
                                   uint64_t offset, uint32_t bytes,
                                   uint8_t *digests, Error **errp);
/*
 * What drbd_compare_in_order() found: @mismatch, the blocks of @p whose
 * digests differ (bit i for block i), or @ret < 0 and @err (the callee's
 * to free) if our blocks could not be read
 */
typedef void coroutine_fn DrbdCompareDone(DrbdPeer *peer,
                                          const DrbdOvPacket *p, int ret,
                                          uint64_t mismatch, Error *err,
                                          void *opaque);
/*
 * Compare our blocks of @p's range with @p's digests (of @alg) as they
 * are once the writes the peer sent before @p are applied, and before
 * any it sent after @p is: the caller is the data receiver, which waits
 * here for the earlier ones.  @done runs in a coroutine of the peer's
 * (drbd_peer_spawn_here()).
 */
void coroutine_fn drbd_compare_in_order(DrbdPeer *peer, uint32_t alg,
                                        const DrbdOvPacket *p,
                                        DrbdCompareDone *done, void *opaque);

/* receiver.c */
void coroutine_fn drbd_data_receiver(void *opaque);
void coroutine_fn drbd_meta_receiver(void *opaque);
void coroutine_fn drbd_pinger(void *opaque);
void drbd_ping_now(BDRVDrbdState *s);

/* conn.c */
int drbd_conn_start(BDRVDrbdState *s, Error **errp);
void drbd_conn_stop(BDRVDrbdState *s);
bool drbd_conn_running(BDRVDrbdState *s);
void drbd_conn_set_context(BDRVDrbdState *s, AioContext *ctx);
void drbd_connect_again(BDRVDrbdState *s, bool discard_my_data);
int drbd_disconnect(BDRVDrbdState *s, int peer_node_id, Error **errp);
void drbd_conn_adjust(DrbdConnection *conn, DrbdConnection *next,
                      bool reconnect);
void drbd_conn_options_free(DrbdConnection *next);

/* role.c */
void drbd_announce_role(BDRVDrbdState *s);
int coroutine_fn drbd_co_promote(BDRVDrbdState *s, bool force,
                                 Error **errp);
int coroutine_fn drbd_co_demote(BDRVDrbdState *s, Error **errp);
int drbd_demote(BDRVDrbdState *s, Error **errp);
int coroutine_fn GRAPH_RDLOCK drbd_co_auto_promote(BDRVDrbdState *s,
                                                   Error **errp);
int coroutine_fn GRAPH_RDLOCK drbd_co_auto_promote_wait(BDRVDrbdState *s,
                                                        Error **errp);
void drbd_auto_init(BDRVDrbdState *s);
int drbd_auto_promote_check(BDRVDrbdState *s, Error **errp);
void drbd_auto_perm_changed(BDRVDrbdState *s, bool write_perm);
int coroutine_fn drbd_co_outdate(BDRVDrbdState *s, Error **errp);
int coroutine_fn drbd_co_invalidate(BDRVDrbdState *s, bool remote,
                                    Error **errp);

/* drbd.c */
bool drbd_is_drbd_node(BlockDriverState *bs);
int coroutine_fn drbd_co_detach_disk(BDRVDrbdState *s, Error **errp);
int drbd_attach_disk(BDRVDrbdState *s, const char *file, const char *meta,
                     Error **errp);

#endif /* BLOCK_DRBD_INT_H */

