/*
 * Unit tests for the receive-side checks of a peer's packets
 * (block/drbd/gate.c): every rule of gate.h's table, each at its edges,
 * and the message that names the reason
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "../../block/drbd/gate.h"

#define DISK_SIZE   (64 * MiB)
#define BM          DRBD_GATE_BM_BLOCK

static void assert_ok(int ret, Error *err)
{
    g_assert_null(err);
    g_assert_cmpint(ret, ==, 0);
}

/* Assert a refusal: -EINVAL and an Error whose message contains @msg */
static void assert_refused(int ret, Error **errp, const char *msg)
{
    g_assert_cmpint(ret, ==, -EINVAL);
    g_assert_nonnull(*errp);
    if (!strstr(error_get_pretty(*errp), msg)) {
        g_test_message("message: %s", error_get_pretty(*errp));
        g_assert_not_reached();
    }
    error_free(*errp);
    *errp = NULL;
}

/* A secondary connected to an up-to-date primary, nothing in flight */
static DrbdGate secondary(void)
{
    return (DrbdGate) {
        .disk_size = DISK_SIZE,
        .role = DRBD_ROLE_SECONDARY,
        .cstate = DRBD_CONN_STATE_CONNECTED,
        .peer_role = DRBD_ROLE_PRIMARY,
        .peer_disk = DRBD_DISK_STATE_UP_TO_DATE,
        .decision = DRBD_SYNC_NONE,
    };
}

static void test_bitmap_range(void)
{
    /* a disk whose last bitmap block is short: 3 blocks and 512 bytes */
    uint64_t size = 3 * BM + 512;

    g_assert_true(drbd_gate_bitmap_range(size, 0, BM));
    g_assert_true(drbd_gate_bitmap_range(size, BM, 2 * BM));
    g_assert_true(drbd_gate_bitmap_range(size, 3 * BM, 512));
    g_assert_true(drbd_gate_bitmap_range(size, 0, size));

    g_assert_false(drbd_gate_bitmap_range(size, 0, 0));
    g_assert_false(drbd_gate_bitmap_range(size, 512, BM));
    g_assert_false(drbd_gate_bitmap_range(size, 0, 512));
    g_assert_false(drbd_gate_bitmap_range(size, 3 * BM, BM));
    g_assert_false(drbd_gate_bitmap_range(size, 4 * BM, BM));
    g_assert_false(drbd_gate_bitmap_range(size, size, 512));
    g_assert_false(drbd_gate_bitmap_range(0, 0, BM));
    /* sums that overflow are not ranges */
    g_assert_false(drbd_gate_bitmap_range(UINT64_MAX, UINT64_MAX - BM + 1,
                                          2 * BM));
    g_assert_false(drbd_gate_bitmap_range(size, BM, UINT64_MAX));
}

static void test_write_ack(void)
{
    DrbdGate g = secondary();
    DrbdBlockAck ack = { .offset = 0, .bytes = 512 };
    Error *err = NULL;

    g.last_req_id = 5;
    for (ack.id = 1; ack.id <= 5; ack.id++) {
        assert_ok(drbd_gate_write_ack(&g, DRBD_CMD_RECV_ACK, &ack, &err),
                  err);
        assert_ok(drbd_gate_write_ack(&g, DRBD_CMD_WRITE_ACK, &ack, &err),
                  err);
        assert_ok(drbd_gate_write_ack(&g, DRBD_CMD_NEG_ACK, &ack, &err),
                  err);
    }

    ack.id = 0;
    assert_refused(drbd_gate_write_ack(&g, DRBD_CMD_WRITE_ACK, &ack, &err),
                   &err, "WRITE_ACK for request 0, which was never sent");
    ack.id = 6;
    assert_refused(drbd_gate_write_ack(&g, DRBD_CMD_RECV_ACK, &ack, &err),
                   &err, "RECV_ACK for request 6, which was never sent");
    ack.id = UINT64_MAX;
    assert_refused(drbd_gate_write_ack(&g, DRBD_CMD_NEG_ACK, &ack, &err),
                   &err, "which was never sent");
    ack.id = 1;
    assert_refused(drbd_gate_write_ack(&g, DRBD_CMD_OUT_OF_SYNC, &ack, &err),
                   &err, "is not an ack of a write");

    /* nothing sent yet: no ack at all */
    g.last_req_id = 0;
    assert_refused(drbd_gate_write_ack(&g, DRBD_CMD_WRITE_ACK, &ack, &err),
                   &err, "request 1, which was never sent");
}

static void add_chunk(GHashTable *chunks, uint64_t offset, uint32_t bytes)
{
    g_hash_table_insert(chunks, g_memdup2(&offset, sizeof(offset)),
                        GUINT_TO_POINTER(bytes));
}

static void test_resync_ack(void)
{
    g_autoptr(GHashTable) chunks = g_hash_table_new_full(g_int64_hash,
                                                         g_int64_equal,
                                                         g_free, NULL);
    DrbdGate g = { .resync_chunks = chunks };
    DrbdBlockAck ack = {
        .offset = 256 * KiB, .bytes = 256 * KiB,
        .id = DRBD_GATE_RESYNC_ID | 256 * KiB,
    };
    DrbdBlockAck bad;
    Error *err = NULL;

    /* no chunk in flight */
    assert_refused(drbd_gate_resync_ack(&g, DRBD_CMD_WRITE_ACK, &ack, &err),
                   &err, "WRITE_ACK for a resync block never sent or "
                   "already acked (offset 262144, 262144 bytes)");

    add_chunk(chunks, 0, 256 * KiB);
    add_chunk(chunks, 256 * KiB, 256 * KiB);
    assert_ok(drbd_gate_resync_ack(&g, DRBD_CMD_WRITE_ACK, &ack, &err), err);
    /* a failed write names its chunk too */
    assert_ok(drbd_gate_resync_ack(&g, DRBD_CMD_NEG_ACK, &ack, &err), err);
    /* the target never acks resync data on receipt */
    assert_refused(drbd_gate_resync_ack(&g, DRBD_CMD_RECV_ACK, &ack, &err),
                   &err, "RECV_ACK for a resync block never sent");

    /* id, offset and length must all match the chunk */
    bad = ack;
    bad.bytes = 4 * KiB;
    assert_refused(drbd_gate_resync_ack(&g, DRBD_CMD_WRITE_ACK, &bad, &err),
                   &err, "never sent or already acked");
    bad = ack;
    bad.offset = 0;
    assert_refused(drbd_gate_resync_ack(&g, DRBD_CMD_WRITE_ACK, &bad, &err),
                   &err, "never sent or already acked");
    bad = ack;
    bad.id = ack.offset;
    assert_refused(drbd_gate_resync_ack(&g, DRBD_CMD_WRITE_ACK, &bad, &err),
                   &err, "never sent or already acked");
    bad = ack;
    bad.offset = bad.id = DRBD_GATE_RESYNC_ID | 512 * KiB;
    bad.offset &= ~DRBD_GATE_RESYNC_ID;
    assert_refused(drbd_gate_resync_ack(&g, DRBD_CMD_WRITE_ACK, &bad, &err),
                   &err, "never sent or already acked");

    /* acked once: gone */
    g_hash_table_remove(chunks, &ack.offset);
    assert_refused(drbd_gate_resync_ack(&g, DRBD_CMD_WRITE_ACK, &ack, &err),
                   &err, "never sent or already acked");

    /* a node without a resync table has no chunk in flight */
    g.resync_chunks = NULL;
    ack.offset = 0;
    ack.id = DRBD_GATE_RESYNC_ID;
    assert_refused(drbd_gate_resync_ack(&g, DRBD_CMD_WRITE_ACK, &ack, &err),
                   &err, "never sent or already acked");
}

static void test_barrier_ack(void)
{
    DrbdGate g = { .epoch_acked_upto = 7, .cur_epoch = 7 };
    Error *err = NULL;
    uint32_t e;

    assert_refused(drbd_gate_barrier_ack(&g, 7, &err), &err,
                   "BARRIER_ACK for epoch 7, but no epoch waits for an ack");
    assert_refused(drbd_gate_barrier_ack(&g, 6, &err), &err,
                   "no epoch waits");

    g.cur_epoch = 10;
    for (e = 7; e < 10; e++) {
        assert_ok(drbd_gate_barrier_ack(&g, e, &err), err);
    }
    assert_refused(drbd_gate_barrier_ack(&g, 10, &err), &err,
                   "BARRIER_ACK for epoch 10, but the epochs waiting for an "
                   "ack are 7 to 9");
    assert_refused(drbd_gate_barrier_ack(&g, 6, &err), &err, "7 to 9");
    assert_refused(drbd_gate_barrier_ack(&g, UINT32_MAX, &err), &err,
                   "7 to 9");

    /* epoch numbers wrap */
    g.epoch_acked_upto = UINT32_MAX - 1;
    g.cur_epoch = 2;
    assert_ok(drbd_gate_barrier_ack(&g, UINT32_MAX - 1, &err), err);
    assert_ok(drbd_gate_barrier_ack(&g, UINT32_MAX, &err), err);
    assert_ok(drbd_gate_barrier_ack(&g, 0, &err), err);
    assert_ok(drbd_gate_barrier_ack(&g, 1, &err), err);
    assert_refused(drbd_gate_barrier_ack(&g, 2, &err), &err,
                   "are 4294967294 to 1");
    assert_refused(drbd_gate_barrier_ack(&g, UINT32_MAX - 2, &err), &err,
                   "are 4294967294 to 1");
}

static void test_guest_write(void)
{
    static const uint16_t cmds[] = {
        DRBD_CMD_DATA, DRBD_CMD_ZEROES, DRBD_CMD_DISCARD,
    };
    DrbdDataPacket p = { .offset = 512, .bytes = 512, .id = 1 };
    Error *err = NULL;
    size_t i;

    for (i = 0; i < ARRAY_SIZE(cmds); i++) {
        DrbdGate g = secondary();

        /* the range is the decoder's business: any is fine here */
        assert_ok(drbd_gate_write(&g, cmds[i], &p, &err), err);

        g.role = DRBD_ROLE_PRIMARY;
        assert_refused(drbd_gate_write(&g, cmds[i], &p, &err), &err,
                       "packet while primary");

        g = secondary();
        g.peer_role = DRBD_ROLE_SECONDARY;
        assert_refused(drbd_gate_write(&g, cmds[i], &p, &err), &err,
                       "from a secondary peer that is not our sync source");
        g.peer_role = DRBD_ROLE_UNKNOWN;
        assert_refused(drbd_gate_write(&g, cmds[i], &p, &err), &err,
                       "from a unknown peer");
        /* being a sync target does not let a secondary send guest writes */
        g.sync_target = true;
        assert_refused(drbd_gate_write(&g, cmds[i], &p, &err), &err,
                       "not our sync source");
    }

    {
        DrbdGate g = secondary();

        assert_refused(drbd_gate_write(&g, DRBD_CMD_BARRIER, &p, &err),
                       &err, "BARRIER packet is not a write");
    }
}

static void test_resync_data(void)
{
    DrbdGate g = secondary();
    DrbdDataPacket p = { .offset = BM, .bytes = 2 * BM };
    Error *err = NULL;

    /* not a sync target: the peer may not overwrite our data */
    assert_refused(drbd_gate_write(&g, DRBD_CMD_RS_DATA, &p, &err), &err,
                   "received a RS_DATA packet from a primary peer that is "
                   "not our sync source");

    g.sync_target = true;
    assert_ok(drbd_gate_write(&g, DRBD_CMD_RS_DATA, &p, &err), err);
    /* from a secondary too: the handshake decided */
    g.peer_role = DRBD_ROLE_SECONDARY;
    assert_ok(drbd_gate_write(&g, DRBD_CMD_RS_DATA, &p, &err), err);

    p.offset = 512;
    assert_refused(drbd_gate_write(&g, DRBD_CMD_RS_DATA, &p, &err), &err,
                   "resync data at 512 (8192 bytes) is not aligned to the "
                   "bitmap's 4 KiB blocks");
    p.offset = DISK_SIZE - BM;
    assert_refused(drbd_gate_write(&g, DRBD_CMD_RS_DATA, &p, &err), &err,
                   "is not aligned");
    p.bytes = BM;
    assert_ok(drbd_gate_write(&g, DRBD_CMD_RS_DATA, &p, &err), err);

    /* A sync target promoted while its resync runs takes its data */
    g.role = DRBD_ROLE_PRIMARY;
    assert_ok(drbd_gate_write(&g, DRBD_CMD_RS_DATA, &p, &err), err);
    g.sync_target = false;
    assert_refused(drbd_gate_write(&g, DRBD_CMD_RS_DATA, &p, &err), &err,
                   "received a RS_DATA packet while primary");

    /* RS_ZEROES is resync data too */
    g = secondary();
    p = (DrbdDataPacket) { .offset = BM, .bytes = 2 * BM };
    assert_refused(drbd_gate_write(&g, DRBD_CMD_RS_ZEROES, &p, &err), &err,
                   "received a RS_ZEROES packet from a primary peer that "
                   "is not our sync source");
    g.sync_target = true;
    assert_ok(drbd_gate_write(&g, DRBD_CMD_RS_ZEROES, &p, &err), err);
    p.offset = 512;
    assert_refused(drbd_gate_write(&g, DRBD_CMD_RS_ZEROES, &p, &err), &err,
                   "is not aligned");
    p.offset = BM;
    g.role = DRBD_ROLE_PRIMARY;
    assert_ok(drbd_gate_write(&g, DRBD_CMD_RS_ZEROES, &p, &err), err);
    g.sync_target = false;
    assert_refused(drbd_gate_write(&g, DRBD_CMD_RS_ZEROES, &p, &err), &err,
                   "received a RS_ZEROES packet while primary");
    /* Guest writes never reach a primary */
    g.sync_target = true;
    assert_refused(drbd_gate_write(&g, DRBD_CMD_DATA, &p, &err), &err,
                   "received a DATA packet while primary");
}

static void test_out_of_sync(void)
{
    static const DrbdSyncDecision sources[] = {
        DRBD_SYNC_SOURCE, DRBD_SYNC_FULL_SOURCE,
    };
    DrbdBlockAck range = { .offset = 0, .bytes = 64 * KiB };
    DrbdGate g = secondary();
    Error *err = NULL;
    size_t i;

    /* an up-to-date primary marks what it wrote while we were away */
    assert_ok(drbd_gate_out_of_sync(&g, &range, &err), err);

    range.offset = 512;
    range.bytes = 512;
    assert_refused(drbd_gate_out_of_sync(&g, &range, &err), &err,
                   "OUT_OF_SYNC at 512 (512 bytes) is not aligned to the "
                   "bitmap's 4 KiB blocks");
    range.offset = DISK_SIZE;
    range.bytes = BM;
    assert_refused(drbd_gate_out_of_sync(&g, &range, &err), &err,
                   "is not aligned");
    range.offset = 0;

    g.role = DRBD_ROLE_PRIMARY;
    assert_refused(drbd_gate_out_of_sync(&g, &range, &err), &err,
                   "the peer wants to resync a primary, which the handshake "
                   "did not make its sync target (it decided none)");
    g.peer_role = DRBD_ROLE_SECONDARY;
    for (i = 0; i < ARRAY_SIZE(sources); i++) {
        g.decision = sources[i];
        assert_refused(drbd_gate_out_of_sync(&g, &range, &err), &err,
                       "the peer wants to resync a primary");
    }
    /* promoted while inconsistent: the handshake made it the target */
    g.sync_target = true;
    g.decision = DRBD_SYNC_FULL_TARGET;
    assert_ok(drbd_gate_out_of_sync(&g, &range, &err), err);
    g.decision = DRBD_SYNC_TARGET;
    assert_ok(drbd_gate_out_of_sync(&g, &range, &err), err);
    g.sync_target = false;
    g.decision = DRBD_SYNC_NONE;
    g.peer_role = DRBD_ROLE_PRIMARY;
    g.role = DRBD_ROLE_SECONDARY;

    /* the handshake made us the source: the peer may not */
    for (i = 0; i < ARRAY_SIZE(sources); i++) {
        g.decision = sources[i];
        assert_refused(drbd_gate_out_of_sync(&g, &range, &err), &err,
                       "which the handshake did not make our sync source");
    }
    g.decision = DRBD_SYNC_NONE;
    g.peer_disk = DRBD_DISK_STATE_CONSISTENT;
    assert_refused(drbd_gate_out_of_sync(&g, &range, &err), &err,
                   "OUT_OF_SYNC from a primary peer whose disk is "
                   "consistent, which the handshake did not make our sync "
                   "source (it decided none)");
    g.peer_disk = DRBD_DISK_STATE_UP_TO_DATE;
    g.peer_role = DRBD_ROLE_SECONDARY;
    assert_refused(drbd_gate_out_of_sync(&g, &range, &err), &err,
                   "OUT_OF_SYNC from a secondary peer");

    /* the handshake made us the target: from a secondary too */
    g.sync_target = true;
    g.decision = DRBD_SYNC_TARGET;
    assert_ok(drbd_gate_out_of_sync(&g, &range, &err), err);

    /* both sides resyncing the other: split brain */
    g.cstate = DRBD_CONN_STATE_SYNC_SOURCE;
    assert_refused(drbd_gate_out_of_sync(&g, &range, &err), &err,
                   "split brain: both nodes hold changes the other lacks");
}

static void test_resync_done(void)
{
    DrbdGate g = secondary();
    Error *err = NULL;

    assert_refused(drbd_gate_resync_done(&g, &err), &err,
                   "RS_DONE, but no resync to this node runs");
    g.sync_target = true;
    assert_ok(drbd_gate_resync_done(&g, &err), err);
}

static void test_state(void)
{
    DrbdStatePacket st = {
        .role = DRBD_ROLE_PRIMARY,
        .disk_state = DRBD_DISK_STATE_UP_TO_DATE,
    };
    DrbdGate g = secondary();
    Error *err = NULL;

    assert_ok(drbd_gate_state(&g, DRBD_CMD_STATE, &st, &err), err);
    g.role = DRBD_ROLE_PRIMARY;
    g.peer_role = DRBD_ROLE_SECONDARY;
    assert_refused(drbd_gate_state(&g, DRBD_CMD_STATE, &st, &err), &err,
                   "the peer became primary while this node is primary");
    st.role = DRBD_ROLE_SECONDARY;
    assert_ok(drbd_gate_state(&g, DRBD_CMD_STATE, &st, &err), err);

    /* A disk that detached goes on without a disk until a handshake */
    g = secondary();
    st.role = DRBD_ROLE_PRIMARY;
    st.disk_state = DRBD_DISK_STATE_DISKLESS;
    assert_ok(drbd_gate_state(&g, DRBD_CMD_STATE, &st, &err), err);
    g.peer_disk = DRBD_DISK_STATE_FAILED;
    assert_ok(drbd_gate_state(&g, DRBD_CMD_STATE, &st, &err), err);
    g.peer_disk = DRBD_DISK_STATE_DISKLESS;
    assert_ok(drbd_gate_state(&g, DRBD_CMD_STATE, &st, &err), err);
    st.disk_state = DRBD_DISK_STATE_UP_TO_DATE;
    assert_refused(drbd_gate_state(&g, DRBD_CMD_STATE, &st, &err), &err,
                   "a disk state rises only through a resync or a new "
                   "handshake");
    st.disk_state = DRBD_DISK_STATE_INCONSISTENT;
    assert_refused(drbd_gate_state(&g, DRBD_CMD_STATE, &st, &err), &err,
                   "but it announces inconsistent");
    /* An attached disk may lose its data's currency (pass-on) */
    g.peer_disk = DRBD_DISK_STATE_UP_TO_DATE;
    assert_ok(drbd_gate_state(&g, DRBD_CMD_STATE, &st, &err), err);
    /* ... but an inconsistent one does not become up to date by STATE */
    g.peer_disk = DRBD_DISK_STATE_INCONSISTENT;
    st.disk_state = DRBD_DISK_STATE_UP_TO_DATE;
    assert_refused(drbd_gate_state(&g, DRBD_CMD_STATE, &st, &err), &err,
                   "the peer's disk is inconsistent, but it announces "
                   "up-to-date");
    assert_refused(drbd_gate_state(&g, DRBD_CMD_STATE_REQ, &st, &err), &err,
                   "STATE_REQ: the peer's disk is inconsistent");
}

/* A role changes only through a STATE_REQ this node granted */
static void test_state_role(void)
{
    DrbdStatePacket st = {
        .role = DRBD_ROLE_PRIMARY,
        .disk_state = DRBD_DISK_STATE_UP_TO_DATE,
    };
    DrbdGate g = secondary();
    Error *err = NULL;

    /* A secondary peer announces itself primary without asking */
    g.peer_role = DRBD_ROLE_SECONDARY;
    g.peer_version = DRBD_PROTO_VERSION_ROLE_REQ;
    assert_refused(drbd_gate_state(&g, DRBD_CMD_STATE, &st, &err), &err,
                   "the peer is secondary, and announces primary without "
                   "asking");
    /* ... whatever its version */
    g.peer_version = DRBD_PROTO_VERSION_MIN;
    assert_refused(drbd_gate_state(&g, DRBD_CMD_STATE, &st, &err), &err,
                   "announces primary without asking");
    /* It may ask: the answer is ours */
    assert_ok(drbd_gate_state(&g, DRBD_CMD_STATE_REQ, &st, &err), err);

    /* Primary, it says so again (its disk failed, say) */
    g.peer_role = DRBD_ROLE_PRIMARY;
    g.peer_version = DRBD_PROTO_VERSION_ROLE_REQ;
    assert_ok(drbd_gate_state(&g, DRBD_CMD_STATE, &st, &err), err);
    /* A demotion comes as a STATE_REQ from version 4 on */
    st.role = DRBD_ROLE_SECONDARY;
    assert_refused(drbd_gate_state(&g, DRBD_CMD_STATE, &st, &err), &err,
                   "the peer is primary, and announces secondary without "
                   "asking");
    assert_ok(drbd_gate_state(&g, DRBD_CMD_STATE_REQ, &st, &err), err);
    /* ... and as a STATE before */
    g.peer_version = DRBD_PROTO_VERSION_ROLE_REQ - 1;
    assert_ok(drbd_gate_state(&g, DRBD_CMD_STATE, &st, &err), err);
}

static void test_state_reply(void)
{
    DrbdGate g = secondary();
    Error *err = NULL;

    assert_refused(drbd_gate_state_reply(&g, DRBD_STATE_REPLY_GRANTED,
                                         &err), &err,
                   "STATE_REPLY, but no STATE_REQ waits for an answer");
    g.state_req_sent = true;
    assert_ok(drbd_gate_state_reply(&g, DRBD_STATE_REPLY_GRANTED, &err),
              err);
    assert_ok(drbd_gate_state_reply(&g, DRBD_STATE_REPLY_REFUSED, &err),
              err);
    /* The refusals that say why are version 6's */
    g.peer_version = DRBD_PROTO_VERSION_GEN_CHECK - 1;
    assert_refused(drbd_gate_state_reply(&g, DRBD_STATE_REPLY_BEHIND, &err),
                   &err, "STATE_REPLY: result 2 from a peer of protocol "
                   "version 5");
    g.peer_version = DRBD_PROTO_VERSION_GEN_CHECK;
    assert_ok(drbd_gate_state_reply(&g, DRBD_STATE_REPLY_BEHIND, &err), err);
    assert_ok(drbd_gate_state_reply(&g, DRBD_STATE_REPLY_PRIMARY_PEER, &err),
              err);
}

/* AHEAD: from a primary, to a secondary in sync, version 9 */
static void test_ahead(void)
{
    DrbdGate g = secondary();
    Error *err = NULL;

    g.peer_version = DRBD_PROTO_VERSION_AHEAD;
    assert_ok(drbd_gate_ahead(&g, &err), err);
    g.peer_version = DRBD_PROTO_VERSION_AHEAD - 1;
    assert_refused(drbd_gate_ahead(&g, &err), &err,
                   "AHEAD from a peer of protocol version 8");
    g.peer_version = DRBD_PROTO_VERSION_AHEAD;
    g.cstate = DRBD_CONN_STATE_BEHIND;
    assert_refused(drbd_gate_ahead(&g, &err), &err,
                   "AHEAD while the connection is behind");
    g.cstate = DRBD_CONN_STATE_CONNECTED;
    g.sync_target = true;
    assert_refused(drbd_gate_ahead(&g, &err), &err,
                   "AHEAD while the connection is connected");
    g.sync_target = false;
    g.peer_role = DRBD_ROLE_SECONDARY;
    assert_refused(drbd_gate_ahead(&g, &err), &err,
                   "AHEAD from a secondary peer while this node is "
                   "secondary");
    g.peer_role = DRBD_ROLE_PRIMARY;
    g.role = DRBD_ROLE_PRIMARY;
    assert_refused(drbd_gate_ahead(&g, &err), &err,
                   "only a primary goes ahead of its secondaries");
}

/* RESIZE: from a primary, connected, growing, version 8; its reply */
static void test_resize(void)
{
    DrbdGate g = secondary();
    Error *err = NULL;

    g.peer_version = DRBD_PROTO_VERSION_RESIZE;
    assert_ok(drbd_gate_resize(&g, DISK_SIZE + BM, &err), err);
    assert_ok(drbd_gate_resize(&g, DISK_SIZE, &err), err);
    assert_refused(drbd_gate_resize(&g, DISK_SIZE - 512, &err), &err,
                   "a disk only grows online");
    g.peer_version = DRBD_PROTO_VERSION_RESIZE - 1;
    assert_refused(drbd_gate_resize(&g, DISK_SIZE + BM, &err), &err,
                   "RESIZE from a peer of protocol version 7");
    g.peer_version = DRBD_PROTO_VERSION_RESIZE;
    g.cstate = DRBD_CONN_STATE_SYNC_TARGET;
    assert_refused(drbd_gate_resize(&g, DISK_SIZE + BM, &err), &err,
                   "RESIZE while the connection is sync-target");
    g.cstate = DRBD_CONN_STATE_CONNECTED;
    g.peer_role = DRBD_ROLE_SECONDARY;
    assert_refused(drbd_gate_resize(&g, DISK_SIZE + BM, &err), &err,
                   "RESIZE from a secondary peer while this node is "
                   "secondary");
    g.peer_role = DRBD_ROLE_PRIMARY;
    g.role = DRBD_ROLE_PRIMARY;
    assert_refused(drbd_gate_resize(&g, DISK_SIZE + BM, &err), &err,
                   "only a primary grows its secondaries");

    assert_refused(drbd_gate_resize_reply(&g, &err), &err,
                   "RESIZE_REPLY, but no RESIZE waits for an answer");
    g.resize_sent = true;
    assert_ok(drbd_gate_resize_reply(&g, &err), err);
}

static void test_state_req_uuid(void)
{
    DrbdGate g = secondary();
    DrbdStatePacket st = {
        .role = DRBD_ROLE_PRIMARY,
        .disk_state = DRBD_DISK_STATE_UP_TO_DATE,
        .uuid = 0x1234,
    };
    Error *err = NULL;

    g.peer_disk = DRBD_DISK_STATE_UP_TO_DATE;
    g.peer_version = DRBD_PROTO_VERSION_GEN_CHECK;
    assert_ok(drbd_gate_state(&g, DRBD_CMD_STATE_REQ, &st, &err), err);
    /* Not from an older peer, nor with a request to step down */
    g.peer_version = DRBD_PROTO_VERSION_GEN_CHECK - 1;
    assert_refused(drbd_gate_state(&g, DRBD_CMD_STATE_REQ, &st, &err), &err,
                   "STATE_REQ: a current UUID in a request for the primary "
                   "role, from a peer of protocol version 5");
    g.peer_version = DRBD_PROTO_VERSION_GEN_CHECK;
    st.role = DRBD_ROLE_SECONDARY;
    assert_refused(drbd_gate_state(&g, DRBD_CMD_STATE_REQ, &st, &err), &err,
                   "STATE_REQ: a current UUID in a request for the secondary "
                   "role, from a peer of protocol version 6");
}

static void test_new_uuid(void)
{
    DrbdGate g = secondary();
    Error *err = NULL;

    g.peer_version = DRBD_PROTO_VERSION_NEW_UUID;
    g.peer_role = DRBD_ROLE_PRIMARY;
    assert_ok(drbd_gate_new_uuid(&g, &err), err);
    /* only from a primary */
    g.peer_role = DRBD_ROLE_SECONDARY;
    assert_refused(drbd_gate_new_uuid(&g, &err), &err,
                   "NEW_UUID, but the peer is secondary: only a primary "
                   "starts a data generation");
    /* only to a secondary */
    g.peer_role = DRBD_ROLE_PRIMARY;
    g.role = DRBD_ROLE_PRIMARY;
    assert_refused(drbd_gate_new_uuid(&g, &err), &err,
                   "NEW_UUID while this node is primary");
    /* only over version 5 */
    g.role = DRBD_ROLE_SECONDARY;
    g.peer_version = DRBD_PROTO_VERSION_NEW_UUID - 1;
    assert_refused(drbd_gate_new_uuid(&g, &err), &err,
                   "NEW_UUID from a peer of protocol version 4");
}

static void test_data_request(void)
{
    DrbdBlockAck r = { .offset = 4096, .id = 1, .bytes = 4096 };
    DrbdGate g = secondary();
    Error *err = NULL;

    /* A primary reads through its secondary */
    assert_ok(drbd_gate_data_request(&g, &r, &err), err);
    g.peer_role = DRBD_ROLE_SECONDARY;
    assert_refused(drbd_gate_data_request(&g, &r, &err), &err,
                   "only a primary reads");
    g.peer_role = DRBD_ROLE_UNKNOWN;
    assert_refused(drbd_gate_data_request(&g, &r, &err), &err,
                   "only a primary reads");
    g = secondary();
    g.role = DRBD_ROLE_PRIMARY;
    assert_refused(drbd_gate_data_request(&g, &r, &err), &err,
                   "while this node is primary");
}

static void test_data_reply(void)
{
    g_autoptr(GHashTable) pending = g_hash_table_new(g_int64_hash,
                                                     g_int64_equal);
    uint64_t id = 5;
    DrbdGateRead r = { .offset = 8192, .bytes = 4096 };
    DrbdGate g = { .reads_pending = pending };
    Error *err = NULL;

    /* Nothing asked: nothing may be answered */
    assert_refused(drbd_gate_data_reply(&g, DRBD_CMD_DATA_REPLY, id, 8192,
                                        4096, &err), &err,
                   "DATA_REPLY for a read never requested");
    g.reads_pending = NULL;
    assert_refused(drbd_gate_data_reply(&g, DRBD_CMD_NEG_DREPLY, id, 8192,
                                        4096, &err), &err,
                   "NEG_DREPLY for a read never requested");
    g.reads_pending = pending;

    g_hash_table_insert(pending, &id, &r);
    assert_ok(drbd_gate_data_reply(&g, DRBD_CMD_DATA_REPLY, id, 8192, 4096,
                                   &err), err);
    assert_ok(drbd_gate_data_reply(&g, DRBD_CMD_NEG_DREPLY, id, 8192, 4096,
                                   &err), err);
    /* The answer must be to the request, range and all */
    assert_refused(drbd_gate_data_reply(&g, DRBD_CMD_DATA_REPLY, id + 1,
                                        8192, 4096, &err), &err,
                   "never requested");
    assert_refused(drbd_gate_data_reply(&g, DRBD_CMD_DATA_REPLY, id, 4096,
                                        4096, &err), &err,
                   "never requested");
    assert_refused(drbd_gate_data_reply(&g, DRBD_CMD_DATA_REPLY, id, 8192,
                                        8192, &err), &err,
                   "never requested");
}

static void test_ov_request(void)
{
    /* a disk whose last bitmap block is short: 3 blocks and 512 bytes */
    const uint64_t size = 3 * BM + 512;
    DrbdGate g = secondary();
    DrbdOvPacket p = { .id = 1, .offset = 0, .bytes = BM };
    Error *err = NULL;

    /* aligned ranges inside the disk, with our digests or without */
    assert_ok(drbd_gate_ov_request(&g, &p, &err), err);
    p.flags = DRBD_OV_DIGESTS;
    assert_ok(drbd_gate_ov_request(&g, &p, &err), err);
    p.offset = 1 * MiB;
    p.bytes = DRBD_OV_MAX_BYTES;
    assert_ok(drbd_gate_ov_request(&g, &p, &err), err);
    p.offset = DISK_SIZE - DRBD_OV_MAX_BYTES;
    assert_ok(drbd_gate_ov_request(&g, &p, &err), err);
    p.flags = 0;
    p.offset = DISK_SIZE - BM;
    p.bytes = BM;
    assert_ok(drbd_gate_ov_request(&g, &p, &err), err);

    /* the range does not start or end on a block */
    p.offset = 512;
    assert_refused(drbd_gate_ov_request(&g, &p, &err), &err,
                   "OV_REQUEST at 512 (4096 bytes) is not aligned to the "
                   "bitmap's 4 KiB blocks");
    p.offset = BM;
    p.bytes = 512;
    assert_refused(drbd_gate_ov_request(&g, &p, &err), &err,
                   "OV_REQUEST at 4096 (512 bytes) is not aligned");
    p.bytes = BM + 512;
    assert_refused(drbd_gate_ov_request(&g, &p, &err), &err,
                   "is not aligned");
    p.offset = 2 * BM - 512;
    p.bytes = BM;
    assert_refused(drbd_gate_ov_request(&g, &p, &err), &err,
                   "is not aligned");
    /* empty, at the end of the disk or beyond it */
    p.offset = 0;
    p.bytes = 0;
    assert_refused(drbd_gate_ov_request(&g, &p, &err), &err,
                   "OV_REQUEST at 0 (0 bytes) is not aligned");
    p.offset = DISK_SIZE;
    p.bytes = BM;
    assert_refused(drbd_gate_ov_request(&g, &p, &err), &err,
                   "is not aligned");
    p.offset = DISK_SIZE - BM;
    p.bytes = 2 * BM;
    assert_refused(drbd_gate_ov_request(&g, &p, &err), &err,
                   "is not aligned");

    /* the last, partial block ends a range at the end of the disk */
    g.disk_size = size;
    p.offset = 3 * BM;
    p.bytes = 512;
    assert_ok(drbd_gate_ov_request(&g, &p, &err), err);
    p.offset = BM;
    p.bytes = 2 * BM + 512;
    p.flags = DRBD_OV_DIGESTS;
    assert_ok(drbd_gate_ov_request(&g, &p, &err), err);
    p.offset = 0;
    p.bytes = size;
    assert_ok(drbd_gate_ov_request(&g, &p, &err), err);
    /* ... but ends nothing short of it, and nothing goes beyond it */
    p.offset = 2 * BM;
    p.bytes = 512;
    assert_refused(drbd_gate_ov_request(&g, &p, &err), &err,
                   "OV_REQUEST at 8192 (512 bytes) is not aligned");
    p.offset = 3 * BM;
    p.bytes = BM;
    assert_refused(drbd_gate_ov_request(&g, &p, &err), &err,
                   "is not aligned");
    p.offset = size;
    p.bytes = 512;
    assert_refused(drbd_gate_ov_request(&g, &p, &err), &err,
                   "is not aligned");

    /* a node without a disk size has no range to verify */
    g.disk_size = 0;
    p.offset = 0;
    p.bytes = BM;
    assert_refused(drbd_gate_ov_request(&g, &p, &err), &err,
                   "is not aligned");
}

static void add_ov(GHashTable *pending, uint64_t id, uint64_t offset,
                   uint32_t bytes, bool digests)
{
    DrbdGateOv *req = g_new(DrbdGateOv, 1);

    *req = (DrbdGateOv) {
        .offset = offset, .bytes = bytes, .digests = digests,
    };
    g_hash_table_insert(pending, g_memdup2(&id, sizeof(id)), req);
}

static void test_ov_reply(void)
{
    g_autoptr(GHashTable) pending = g_hash_table_new_full(g_int64_hash,
                                                          g_int64_equal,
                                                          g_free, g_free);
    DrbdGate g = { .ov_pending = pending };
    /* 1 carried our digests, 2 asked for the peer's, 3 ends the disk */
    DrbdOvPacket one = {
        .id = 1, .offset = 0, .bytes = DRBD_OV_MAX_BYTES,
    };
    DrbdOvPacket two = {
        .id = 2, .offset = DRBD_OV_MAX_BYTES, .bytes = DRBD_OV_MAX_BYTES,
    };
    DrbdOvPacket three = {
        .id = UINT64_MAX, .offset = DISK_SIZE, .bytes = 512,
    };
    DrbdOvPacket bad;
    Error *err = NULL;
    uint64_t id;

    /* nothing sent */
    one.flags = DRBD_OV_RESULT;
    assert_refused(drbd_gate_ov_reply(&g, &one, &err), &err,
                   "OV_REPLY for a verify request never sent or already "
                   "answered (offset 0, 262144 bytes)");

    add_ov(pending, 1, 0, DRBD_OV_MAX_BYTES, true);
    add_ov(pending, 2, DRBD_OV_MAX_BYTES, DRBD_OV_MAX_BYTES, false);
    add_ov(pending, UINT64_MAX, DISK_SIZE, 512, false);

    /* the kind the request asked for, or skipped */
    one.flags = DRBD_OV_RESULT;
    assert_ok(drbd_gate_ov_reply(&g, &one, &err), err);
    one.flags = DRBD_OV_SKIPPED;
    assert_ok(drbd_gate_ov_reply(&g, &one, &err), err);
    two.flags = DRBD_OV_DIGESTS;
    assert_ok(drbd_gate_ov_reply(&g, &two, &err), err);
    two.flags = DRBD_OV_SKIPPED;
    assert_ok(drbd_gate_ov_reply(&g, &two, &err), err);
    three.flags = DRBD_OV_DIGESTS;
    assert_ok(drbd_gate_ov_reply(&g, &three, &err), err);
    three.flags = DRBD_OV_SKIPPED;
    assert_ok(drbd_gate_ov_reply(&g, &three, &err), err);

    /* the other kind */
    one.flags = DRBD_OV_DIGESTS;
    assert_refused(drbd_gate_ov_reply(&g, &one, &err), &err,
                   "OV_REPLY at 0 carries digests, but the request carried "
                   "ours");
    two.flags = DRBD_OV_RESULT;
    assert_refused(drbd_gate_ov_reply(&g, &two, &err), &err,
                   "OV_REPLY at 262144 carries a result, but the request "
                   "asked for digests");
    three.flags = DRBD_OV_RESULT;
    assert_refused(drbd_gate_ov_reply(&g, &three, &err), &err,
                   "OV_REPLY at 67108864 carries a result, but the request "
                   "asked for digests");

    /* id, offset and length must all match the request */
    bad = one;
    bad.flags = DRBD_OV_RESULT;
    bad.id = 3;
    assert_refused(drbd_gate_ov_reply(&g, &bad, &err), &err,
                   "OV_REPLY for a verify request never sent or already "
                   "answered (offset 0, 262144 bytes)");
    bad.id = 0;
    assert_refused(drbd_gate_ov_reply(&g, &bad, &err), &err,
                   "never sent or already answered");
    bad = one;
    bad.flags = DRBD_OV_RESULT;
    bad.offset = BM;
    assert_refused(drbd_gate_ov_reply(&g, &bad, &err), &err,
                   "never sent or already answered (offset 4096, 262144 "
                   "bytes)");
    bad.offset = two.offset;
    assert_refused(drbd_gate_ov_reply(&g, &bad, &err), &err,
                   "never sent or already answered");
    bad = one;
    bad.flags = DRBD_OV_SKIPPED;
    bad.bytes = BM;
    assert_refused(drbd_gate_ov_reply(&g, &bad, &err), &err,
                   "never sent or already answered (offset 0, 4096 bytes)");
    bad.bytes = DRBD_OV_MAX_BYTES - 512;
    assert_refused(drbd_gate_ov_reply(&g, &bad, &err), &err,
                   "never sent or already answered");
    /* another request's range under this one's id */
    bad = two;
    bad.flags = DRBD_OV_SKIPPED;
    bad.id = 1;
    assert_refused(drbd_gate_ov_reply(&g, &bad, &err), &err,
                   "never sent or already answered");
    bad = three;
    bad.flags = DRBD_OV_SKIPPED;
    bad.bytes = BM;
    assert_refused(drbd_gate_ov_reply(&g, &bad, &err), &err,
                   "never sent or already answered");

    /* answered once: gone */
    id = 1;
    g_hash_table_remove(pending, &id);
    one.flags = DRBD_OV_RESULT;
    assert_refused(drbd_gate_ov_reply(&g, &one, &err), &err,
                   "never sent or already answered");
    one.flags = DRBD_OV_SKIPPED;
    assert_refused(drbd_gate_ov_reply(&g, &one, &err), &err,
                   "never sent or already answered");
    two.flags = DRBD_OV_DIGESTS;
    assert_ok(drbd_gate_ov_reply(&g, &two, &err), err);

    /* a node without a verify table has no request in flight */
    g.ov_pending = NULL;
    assert_refused(drbd_gate_ov_reply(&g, &two, &err), &err,
                   "OV_REPLY for a verify request never sent or already "
                   "answered (offset 262144, 262144 bytes)");
    three.flags = DRBD_OV_SKIPPED;
    assert_refused(drbd_gate_ov_reply(&g, &three, &err), &err,
                   "never sent or already answered");
}

static void test_csum(void)
{
    /* a disk whose last bitmap block is short: 3 blocks and 512 bytes */
    const uint64_t size = 3 * BM + 512;
    DrbdGate g = secondary();
    DrbdOvPacket p = {
        .id = DRBD_GATE_RESYNC_ID, .offset = 0, .bytes = DRBD_OV_MAX_BYTES,
        .flags = DRBD_OV_DIGESTS,
    };
    Error *err = NULL;

    /* not a sync target: the peer has no resync to check */
    assert_refused(drbd_gate_csum(&g, &p, &err), &err,
                   "received an RS_CSUM packet from a primary peer that is "
                   "not our sync source");
    g.decision = DRBD_SYNC_TARGET;
    assert_refused(drbd_gate_csum(&g, &p, &err), &err,
                   "is not our sync source");

    /* a sync target secondary: whole chunks, one block, the last */
    g.sync_target = true;
    g.cstate = DRBD_CONN_STATE_SYNC_TARGET;
    assert_ok(drbd_gate_csum(&g, &p, &err), err);
    p.offset = 1 * MiB;
    p.bytes = 3 * BM;
    assert_ok(drbd_gate_csum(&g, &p, &err), err);
    p.offset = DISK_SIZE - DRBD_OV_MAX_BYTES;
    p.bytes = DRBD_OV_MAX_BYTES;
    assert_ok(drbd_gate_csum(&g, &p, &err), err);
    p.offset = DISK_SIZE - BM;
    p.bytes = BM;
    assert_ok(drbd_gate_csum(&g, &p, &err), err);
    /* from a secondary too: the handshake decided */
    g.peer_role = DRBD_ROLE_SECONDARY;
    assert_ok(drbd_gate_csum(&g, &p, &err), err);

    /* the range does not start or end on a block */
    p.offset = 512;
    assert_refused(drbd_gate_csum(&g, &p, &err), &err,
                   "RS_CSUM at 512 (4096 bytes) is not aligned to the "
                   "bitmap's 4 KiB blocks");
    p.offset = BM;
    p.bytes = 512;
    assert_refused(drbd_gate_csum(&g, &p, &err), &err,
                   "RS_CSUM at 4096 (512 bytes) is not aligned");
    p.bytes = 2 * BM + 512;
    assert_refused(drbd_gate_csum(&g, &p, &err), &err, "is not aligned");
    p.offset = 2 * BM - 512;
    p.bytes = BM;
    assert_refused(drbd_gate_csum(&g, &p, &err), &err, "is not aligned");
    /* empty, at the end of the disk or beyond it */
    p.offset = 0;
    p.bytes = 0;
    assert_refused(drbd_gate_csum(&g, &p, &err), &err,
                   "RS_CSUM at 0 (0 bytes) is not aligned");
    p.offset = DISK_SIZE;
    p.bytes = BM;
    assert_refused(drbd_gate_csum(&g, &p, &err), &err, "is not aligned");
    p.offset = DISK_SIZE - BM;
    p.bytes = 2 * BM;
    assert_refused(drbd_gate_csum(&g, &p, &err), &err, "is not aligned");

    /* the last, partial block ends a chunk at the end of the disk */
    g.disk_size = size;
    p.offset = 3 * BM;
    p.bytes = 512;
    assert_ok(drbd_gate_csum(&g, &p, &err), err);
    p.offset = 0;
    p.bytes = size;
    assert_ok(drbd_gate_csum(&g, &p, &err), err);
    /* ... but ends nothing short of it, and nothing goes beyond it */
    p.offset = 2 * BM;
    p.bytes = 512;
    assert_refused(drbd_gate_csum(&g, &p, &err), &err,
                   "RS_CSUM at 8192 (512 bytes) is not aligned");
    p.offset = 3 * BM;
    p.bytes = BM;
    assert_refused(drbd_gate_csum(&g, &p, &err), &err, "is not aligned");

    /* a primary takes no resync, aligned or not, whoever the peer is */
    g.disk_size = DISK_SIZE;
    p.offset = 0;
    p.bytes = BM;
    g.role = DRBD_ROLE_PRIMARY;
    assert_refused(drbd_gate_csum(&g, &p, &err), &err,
                   "received an RS_CSUM packet while primary");
    g.peer_role = DRBD_ROLE_PRIMARY;
    assert_refused(drbd_gate_csum(&g, &p, &err), &err, "while primary");
    p.offset = 512;
    assert_refused(drbd_gate_csum(&g, &p, &err), &err, "while primary");

    /* and a node whose resync ended takes none either */
    g.role = DRBD_ROLE_SECONDARY;
    g.sync_target = false;
    g.cstate = DRBD_CONN_STATE_CONNECTED;
    p.offset = 0;
    assert_refused(drbd_gate_csum(&g, &p, &err), &err,
                   "is not our sync source");
}

static void test_csum_reply(void)
{
    g_autoptr(GHashTable) csums = g_hash_table_new_full(g_int64_hash,
                                                        g_int64_equal,
                                                        g_free, NULL);
    g_autoptr(GHashTable) chunks = g_hash_table_new_full(g_int64_hash,
                                                         g_int64_equal,
                                                         g_free, NULL);
    DrbdGate g = { .csum_chunks = csums, .resync_chunks = chunks };
    /* a whole chunk, one of three blocks, the short one at the end */
    DrbdOvPacket one = {
        .id = DRBD_GATE_RESYNC_ID | 0, .offset = 0,
        .bytes = DRBD_OV_MAX_BYTES, .flags = DRBD_OV_RESULT,
    };
    DrbdOvPacket two = {
        .id = DRBD_GATE_RESYNC_ID | 1 * MiB, .offset = 1 * MiB,
        .bytes = 3 * BM, .flags = DRBD_OV_RESULT, .mismatch = 0x5,
    };
    DrbdOvPacket three = {
        .id = DRBD_GATE_RESYNC_ID | DISK_SIZE, .offset = DISK_SIZE,
        .bytes = 512, .flags = DRBD_OV_RESULT, .mismatch = 0x1,
    };
    DrbdOvPacket bad;
    Error *err = NULL;

    /* nothing sent */
    assert_refused(drbd_gate_csum_reply(&g, &one, &err), &err,
                   "RS_CSUM_REPLY for a resync checksum never sent or "
                   "already answered (offset 0, 262144 bytes)");

    add_chunk(csums, 0, DRBD_OV_MAX_BYTES);
    add_chunk(csums, 1 * MiB, 3 * BM);
    add_chunk(csums, DISK_SIZE, 512);
    assert_ok(drbd_gate_csum_reply(&g, &one, &err), err);
    assert_ok(drbd_gate_csum_reply(&g, &two, &err), err);
    assert_ok(drbd_gate_csum_reply(&g, &three, &err), err);

    /* the id without the resync bit: a guest write's, not a chunk's */
    bad = one;
    bad.id = 0;
    assert_refused(drbd_gate_csum_reply(&g, &bad, &err), &err,
                   "RS_CSUM_REPLY for a resync checksum never sent or "
                   "already answered (offset 0, 262144 bytes)");
    bad = two;
    bad.id = two.offset;
    assert_refused(drbd_gate_csum_reply(&g, &bad, &err), &err,
                   "never sent or already answered (offset 1048576, 12288 "
                   "bytes)");

    /* the id names another chunk than the offset, sent or not */
    bad = two;
    bad.id = DRBD_GATE_RESYNC_ID | 0;
    assert_refused(drbd_gate_csum_reply(&g, &bad, &err), &err,
                   "never sent or already answered");
    bad = two;
    bad.id = DRBD_GATE_RESYNC_ID | (2 * MiB);
    assert_refused(drbd_gate_csum_reply(&g, &bad, &err), &err,
                   "never sent or already answered");
    bad = one;
    bad.offset = 1 * MiB;
    bad.bytes = 3 * BM;
    assert_refused(drbd_gate_csum_reply(&g, &bad, &err), &err,
                   "never sent or already answered (offset 1048576, 12288 "
                   "bytes)");
    bad = three;
    bad.id |= BM;
    assert_refused(drbd_gate_csum_reply(&g, &bad, &err), &err,
                   "never sent or already answered");

    /* an offset never sent, id and offset agreeing */
    bad = one;
    bad.offset = BM;
    bad.id = DRBD_GATE_RESYNC_ID | BM;
    bad.bytes = BM;
    assert_refused(drbd_gate_csum_reply(&g, &bad, &err), &err,
                   "never sent or already answered (offset 4096, 4096 "
                   "bytes)");
    bad.offset = DISK_SIZE - BM;
    bad.id = DRBD_GATE_RESYNC_ID | bad.offset;
    assert_refused(drbd_gate_csum_reply(&g, &bad, &err), &err,
                   "never sent or already answered");

    /* the chunk's offset, another length */
    bad = one;
    bad.bytes = BM;
    assert_refused(drbd_gate_csum_reply(&g, &bad, &err), &err,
                   "never sent or already answered (offset 0, 4096 bytes)");
    bad.bytes = DRBD_OV_MAX_BYTES - 512;
    assert_refused(drbd_gate_csum_reply(&g, &bad, &err), &err,
                   "never sent or already answered");
    bad = two;
    bad.bytes = 4 * BM;
    assert_refused(drbd_gate_csum_reply(&g, &bad, &err), &err,
                   "never sent or already answered");
    bad = three;
    bad.bytes = BM;
    assert_refused(drbd_gate_csum_reply(&g, &bad, &err), &err,
                   "never sent or already answered");

    /* a chunk sent as data is no checksum: its ack is another packet */
    add_chunk(chunks, 2 * MiB, BM);
    bad = one;
    bad.offset = 2 * MiB;
    bad.id = DRBD_GATE_RESYNC_ID | bad.offset;
    bad.bytes = BM;
    assert_refused(drbd_gate_csum_reply(&g, &bad, &err), &err,
                   "never sent or already answered");
    /* ... and a checksum is not acked as data */
    {
        DrbdBlockAck ack = {
            .offset = two.offset, .bytes = two.bytes, .id = two.id,
        };

        assert_refused(drbd_gate_resync_ack(&g, DRBD_CMD_WRITE_ACK, &ack,
                                            &err), &err,
                       "never sent or already acked");
    }

    /* answered once: gone */
    g_hash_table_remove(csums, &one.offset);
    assert_refused(drbd_gate_csum_reply(&g, &one, &err), &err,
                   "never sent or already answered (offset 0, 262144 "
                   "bytes)");
    assert_ok(drbd_gate_csum_reply(&g, &two, &err), err);
    g_hash_table_remove(csums, &two.offset);
    assert_refused(drbd_gate_csum_reply(&g, &two, &err), &err,
                   "never sent or already answered");
    assert_ok(drbd_gate_csum_reply(&g, &three, &err), err);
    /* ... until the same chunk is sent again */
    add_chunk(csums, 0, DRBD_OV_MAX_BYTES);
    assert_ok(drbd_gate_csum_reply(&g, &one, &err), err);

    /* a node without a checksum table has no checksum in flight */
    g.csum_chunks = NULL;
    assert_refused(drbd_gate_csum_reply(&g, &one, &err), &err,
                   "RS_CSUM_REPLY for a resync checksum never sent or "
                   "already answered (offset 0, 262144 bytes)");
    assert_refused(drbd_gate_csum_reply(&g, &three, &err), &err,
                   "never sent or already answered");
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    g_test_add_func("/drbd-gate/bitmap-range", test_bitmap_range);
    g_test_add_func("/drbd-gate/write-ack", test_write_ack);
    g_test_add_func("/drbd-gate/resync-ack", test_resync_ack);
    g_test_add_func("/drbd-gate/barrier-ack", test_barrier_ack);
    g_test_add_func("/drbd-gate/guest-write", test_guest_write);
    g_test_add_func("/drbd-gate/resync-data", test_resync_data);
    g_test_add_func("/drbd-gate/out-of-sync", test_out_of_sync);
    g_test_add_func("/drbd-gate/resync-done", test_resync_done);
    g_test_add_func("/drbd-gate/state", test_state);
    g_test_add_func("/drbd-gate/state/role", test_state_role);
    g_test_add_func("/drbd-gate/state/reply", test_state_reply);
    g_test_add_func("/drbd-gate/resize", test_resize);
    g_test_add_func("/drbd-gate/ahead", test_ahead);
    g_test_add_func("/drbd-gate/state/req-uuid", test_state_req_uuid);
    g_test_add_func("/drbd-gate/data-request", test_data_request);
    g_test_add_func("/drbd-gate/data-reply", test_data_reply);
    g_test_add_func("/drbd-gate/ov-request", test_ov_request);
    g_test_add_func("/drbd-gate/ov-reply", test_ov_reply);
    g_test_add_func("/drbd-gate/csum", test_csum);
    g_test_add_func("/drbd-gate/csum-reply", test_csum_reply);
    g_test_add_func("/drbd-gate/new-uuid", test_new_uuid);

    return g_test_run();
}
