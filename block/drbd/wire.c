/*
 * DRBD-style replication: packet encoding and decoding
 *
 * See docs/interop/drbd-protocol.rst for the format.  Every multi-byte
 * integer is big-endian.  Decoders look at nothing beyond the length
 * they are given and fill in their output only when they succeed.
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/cutils.h"
#include "qemu/bswap.h"
#include "qapi/error.h"
#include "rle.h"
#include "uuid.h"
#include "wire.h"

/* Payload layouts: offsets of the fields and sizes of the fixed parts */

/* HELLO */
#define HELLO_VERSION_MIN       0
#define HELLO_VERSION_MAX       4
#define HELLO_NODE_ID           8
#define HELLO_FLAGS             12
#define HELLO_NAME_LEN          16
#define HELLO_NAME              18
#define HELLO_MIN_SIZE          (HELLO_NAME + 1)
#define HELLO_MAX_SIZE          (HELLO_NAME + DRBD_RESOURCE_NAME_MAX)

/* SIZES */
#define SIZES_DISK_SIZE         0
#define SIZES_MAX_EPOCH_SIZE    8
#define SIZES_PROTOCOL          12
#define SIZES_INTEGRITY         13
#define SIZES_VERIFY            14
#define SIZES_CSUMS             15
#define SIZES_SIZE              16

/* STATE */
#define STATE_ROLE              0
#define STATE_DISK_STATE        1
#define STATE_PAD               2
#define STATE_SIZE              4
/* STATE_REQ of version 6: then the sender's current UUID */
#define STATE_REQ_UUID          4
#define STATE_REQ_UUID_SIZE     12

/* UUIDS */
#define UUIDS_CURRENT           0
#define UUIDS_BITMAP            8
#define UUIDS_HISTORY           16
#define UUIDS_CHANGES           32
#define UUIDS_FLAGS             40
#define UUIDS_AFTER_SB          44
#define UUIDS_PAD               47
#define UUIDS_SIZE              48

/* STATE_REPLY */
#define STATE_REPLY_RESULT      0
#define STATE_REPLY_SIZE        4

/* NEW_UUID */
#define NEW_UUID_UUID           0
#define NEW_UUID_SIZE           8

/* REFUSE */
#define REFUSE_REASON           0
#define REFUSE_NODE_ID          4
#define REFUSE_SIZE             8

/* DECISION */
#define DECISION_OUTCOME        0
#define DECISION_RULE           4
#define DECISION_SIZE           8

/* RESIZE, RESIZE_REPLY */
#define RESIZE_DISK_SIZE        0
#define RESIZE_SIZE             8
#define RESIZE_REPLY_RESULT     0
#define RESIZE_REPLY_SIZE       4
/* The largest size a RESIZE may ask for (the metadata's limit) */
#define RESIZE_MAX_DISK_SIZE    (4ULL << 50)
/* An errno, as a RESIZE_REPLY carries it */
#define RESIZE_REPLY_MAX        4095

/* DATA, ZEROES, DISCARD, RS_DATA */
#define DATA_OFFSET             0
#define DATA_ID                 8
#define DATA_EPOCH              16
#define DATA_FLAGS              20
#define DATA_BYTES              24
#define DATA_UNORDERED          28
#define DATA_SIZE               DRBD_WIRE_DATA_FIXED_SIZE
#define DATA_MIN_SIZE           (DATA_SIZE + DRBD_WIRE_ALIGN)
#define DATA_MAX_SIZE           (DATA_SIZE + DRBD_WIRE_DIGEST_MAX + \
                                 DRBD_WIRE_MAX_DATA)

/* RECV_ACK, WRITE_ACK, NEG_ACK, OUT_OF_SYNC */
#define ACK_OFFSET              0
#define ACK_ID                  8
#define ACK_BYTES               16
#define ACK_PAD                 20
#define ACK_SIZE                24

/* BARRIER, BARRIER_ACK */
#define BARRIER_EPOCH           0
#define BARRIER_SET_SIZE        4
#define BARRIER_FLAGS           8
#define BARRIER_SIZE            12

/*
 * OV_REQUEST, OV_REPLY, RS_CSUM, RS_CSUM_REPLY: then digests, or
 * (RESULT) a 64-bit mask
 */
#define OV_OFFSET               0
#define OV_ID                   8
#define OV_BYTES                16
#define OV_FLAGS                20
#define OV_SIZE                 24
#define OV_MAX_SIZE             (OV_SIZE + DRBD_OV_MAX_BLOCKS * \
                                 DRBD_WIRE_DIGEST_MAX)

/* AUTH_CHALLENGE, AUTH_RESPONSE */
#define AUTH_CHALLENGE_DIGEST   0
#define AUTH_CHALLENGE_NONCE    4
#define AUTH_CHALLENGE_SIZE     (AUTH_CHALLENGE_NONCE + DRBD_AUTH_NONCE_SIZE)

/* Header */
#define HDR_MAGIC               0
#define HDR_CMD                 4
#define HDR_RESERVED            6
#define HDR_LENGTH              8

QEMU_BUILD_BUG_ON(HDR_LENGTH + 4 != DRBD_WIRE_HEADER_SIZE);
QEMU_BUILD_BUG_ON(DATA_UNORDERED + 4 != DATA_SIZE);
QEMU_BUILD_BUG_ON(DATA_MAX_SIZE > DRBD_WIRE_MAX_PAYLOAD);
QEMU_BUILD_BUG_ON(HELLO_MAX_SIZE > DRBD_WIRE_MAX_PAYLOAD);
QEMU_BUILD_BUG_ON(DRBD_WIRE_MAX_DATA % DRBD_WIRE_ALIGN != 0);
QEMU_BUILD_BUG_ON(DRBD_WIRE_MAX_ZEROES % DRBD_WIRE_ALIGN != 0);
QEMU_BUILD_BUG_ON(DRBD_WIRE_MAX_ZEROES > UINT32_MAX);
QEMU_BUILD_BUG_ON(OV_MAX_SIZE > DRBD_WIRE_MAX_PAYLOAD);
QEMU_BUILD_BUG_ON(DRBD_OV_MAX_BLOCKS > 64);     /* a uint64_t mask */

typedef struct DrbdCmdInfo {
    const char *name;
    uint32_t min_len;       /* of the payload */
    uint32_t max_len;
} DrbdCmdInfo;

static const DrbdCmdInfo drbd_cmd_info[DRBD_CMD__MAX] = {
    [DRBD_CMD_HELLO]        = { "HELLO", HELLO_MIN_SIZE, HELLO_MAX_SIZE },
    [DRBD_CMD_SIZES]        = { "SIZES", SIZES_SIZE, SIZES_SIZE },
    [DRBD_CMD_STATE]        = { "STATE", STATE_SIZE, STATE_SIZE },
    [DRBD_CMD_DATA]         = { "DATA", DATA_MIN_SIZE, DATA_MAX_SIZE },
    [DRBD_CMD_ZEROES]       = { "ZEROES", DATA_SIZE, DATA_SIZE },
    [DRBD_CMD_DISCARD]      = { "DISCARD", DATA_SIZE, DATA_SIZE },
    [DRBD_CMD_BARRIER]      = { "BARRIER", BARRIER_SIZE, BARRIER_SIZE },
    [DRBD_CMD_RECV_ACK]     = { "RECV_ACK", ACK_SIZE, ACK_SIZE },
    [DRBD_CMD_WRITE_ACK]    = { "WRITE_ACK", ACK_SIZE, ACK_SIZE },
    [DRBD_CMD_NEG_ACK]      = { "NEG_ACK", ACK_SIZE, ACK_SIZE },
    [DRBD_CMD_BARRIER_ACK]  = { "BARRIER_ACK", BARRIER_SIZE, BARRIER_SIZE },
    [DRBD_CMD_PING]         = { "PING", 0, 0 },
    [DRBD_CMD_PING_ACK]     = { "PING_ACK", 0, 0 },
    /* 14 is reserved: no name, so refused as an unknown command */
    [DRBD_CMD_RS_DATA]      = { "RS_DATA", DATA_MIN_SIZE, DATA_MAX_SIZE },
    [DRBD_CMD_OUT_OF_SYNC]  = { "OUT_OF_SYNC", ACK_SIZE, ACK_SIZE },
    [DRBD_CMD_RS_DONE]      = { "RS_DONE", 0, 0 },
    [DRBD_CMD_STATE_REQ]    = { "STATE_REQ", STATE_SIZE,
                                STATE_REQ_UUID_SIZE },
    [DRBD_CMD_STATE_REPLY]  = { "STATE_REPLY", STATE_REPLY_SIZE,
                                STATE_REPLY_SIZE },
    [DRBD_CMD_BITMAP]       = { "BITMAP", DRBD_RLE_HEADER_SIZE + 1,
                                DRBD_WIRE_MAX_BITMAP },
    [DRBD_CMD_UUIDS]        = { "UUIDS", UUIDS_SIZE, UUIDS_SIZE },
    [DRBD_CMD_AUTH_CHALLENGE] = { "AUTH_CHALLENGE", AUTH_CHALLENGE_SIZE,
                                  AUTH_CHALLENGE_SIZE },
    [DRBD_CMD_AUTH_RESPONSE] = { "AUTH_RESPONSE", DRBD_AUTH_DIGEST_MIN,
                                 DRBD_AUTH_DIGEST_MAX },
    [DRBD_CMD_OV_REQUEST]   = { "OV_REQUEST", OV_SIZE, OV_MAX_SIZE },
    [DRBD_CMD_OV_REPLY]     = { "OV_REPLY", OV_SIZE, OV_MAX_SIZE },
    [DRBD_CMD_RS_CSUM]      = { "RS_CSUM", OV_SIZE, OV_MAX_SIZE },
    [DRBD_CMD_RS_CSUM_REPLY] = { "RS_CSUM_REPLY", OV_SIZE + 8, OV_SIZE + 8 },
    [DRBD_CMD_RS_ZEROES]    = { "RS_ZEROES", DATA_SIZE, DATA_SIZE },
    [DRBD_CMD_DATA_REQUEST] = { "DATA_REQUEST", ACK_SIZE, ACK_SIZE },
    [DRBD_CMD_DATA_REPLY]   = { "DATA_REPLY", DATA_MIN_SIZE, DATA_MAX_SIZE },
    [DRBD_CMD_NEG_DREPLY]   = { "NEG_DREPLY", ACK_SIZE, ACK_SIZE },
    [DRBD_CMD_NEW_UUID]     = { "NEW_UUID", NEW_UUID_SIZE, NEW_UUID_SIZE },
    [DRBD_CMD_REFUSE]       = { "REFUSE", REFUSE_SIZE, REFUSE_SIZE },
    [DRBD_CMD_RESIZE]       = { "RESIZE", RESIZE_SIZE, RESIZE_SIZE },
    [DRBD_CMD_RESIZE_REPLY] = { "RESIZE_REPLY", RESIZE_REPLY_SIZE,
                                RESIZE_REPLY_SIZE },
    [DRBD_CMD_AHEAD]        = { "AHEAD", 0, 0 },
    [DRBD_CMD_DECISION]     = { "DECISION", DECISION_SIZE, DECISION_SIZE },
};

static const char *const drbd_digest_names[DRBD_DIGEST__MAX] = {
    [DRBD_DIGEST_NONE]      = "none",
    [DRBD_DIGEST_MD5]       = "md5",
    [DRBD_DIGEST_SHA1]      = "sha1",
    [DRBD_DIGEST_SHA224]    = "sha224",
    [DRBD_DIGEST_SHA256]    = "sha256",
    [DRBD_DIGEST_SHA384]    = "sha384",
    [DRBD_DIGEST_SHA512]    = "sha512",
    [DRBD_DIGEST_RIPEMD160] = "ripemd160",
    [DRBD_DIGEST_CRC32C]    = "crc32c",
};

const char *drbd_digest_name(uint32_t digest)
{
    return digest < DRBD_DIGEST__MAX ? drbd_digest_names[digest] : "unknown";
}

const char *drbd_cmd_name(uint16_t cmd)
{
    if (cmd >= DRBD_CMD__MAX || !drbd_cmd_info[cmd].name) {
        return "unknown";
    }
    return drbd_cmd_info[cmd].name;
}

static bool is_data_cmd(uint16_t cmd)
{
    return cmd == DRBD_CMD_DATA || cmd == DRBD_CMD_RS_DATA ||
           cmd == DRBD_CMD_DATA_REPLY;
}

static bool is_request_cmd(uint16_t cmd)
{
    return is_data_cmd(cmd) || cmd == DRBD_CMD_ZEROES ||
           cmd == DRBD_CMD_DISCARD || cmd == DRBD_CMD_RS_ZEROES;
}

static bool is_block_ack_cmd(uint16_t cmd)
{
    switch (cmd) {
    case DRBD_CMD_RECV_ACK:
    case DRBD_CMD_WRITE_ACK:
    case DRBD_CMD_NEG_ACK:
    case DRBD_CMD_OUT_OF_SYNC:
    case DRBD_CMD_DATA_REQUEST:
    case DRBD_CMD_NEG_DREPLY:
        return true;
    default:
        return false;
    }
}

static bool is_barrier_cmd(uint16_t cmd)
{
    return cmd == DRBD_CMD_BARRIER || cmd == DRBD_CMD_BARRIER_ACK;
}

static bool is_empty_cmd(uint16_t cmd)
{
    return cmd == DRBD_CMD_PING || cmd == DRBD_CMD_PING_ACK ||
           cmd == DRBD_CMD_RS_DONE || cmd == DRBD_CMD_AHEAD;
}

/*
 * Encoding
 */

static void put_header(uint8_t *buf, uint16_t cmd, uint32_t length)
{
    stl_be_p(buf + HDR_MAGIC, DRBD_WIRE_MAGIC);
    stw_be_p(buf + HDR_CMD, cmd);
    stw_be_p(buf + HDR_RESERVED, 0);
    stl_be_p(buf + HDR_LENGTH, length);
}

void drbd_wire_put_hello(GByteArray *out, const DrbdHello *h)
{
    uint8_t buf[DRBD_WIRE_HEADER_SIZE + HELLO_MAX_SIZE];
    uint8_t *p = buf + DRBD_WIRE_HEADER_SIZE;
    size_t name_len = strnlen(h->resource, sizeof(h->resource));

    assert(name_len >= 1 && name_len <= DRBD_RESOURCE_NAME_MAX);

    put_header(buf, DRBD_CMD_HELLO, HELLO_NAME + name_len);
    stl_be_p(p + HELLO_VERSION_MIN, h->version_min);
    stl_be_p(p + HELLO_VERSION_MAX, h->version_max);
    stl_be_p(p + HELLO_NODE_ID, h->node_id);
    stl_be_p(p + HELLO_FLAGS, h->flags);
    stw_be_p(p + HELLO_NAME_LEN, name_len);
    memcpy(p + HELLO_NAME, h->resource, name_len);
    g_byte_array_append(out, buf,
                        DRBD_WIRE_HEADER_SIZE + HELLO_NAME + name_len);
}

void drbd_wire_put_sizes(GByteArray *out, const DrbdSizes *s)
{
    uint8_t buf[DRBD_WIRE_HEADER_SIZE + SIZES_SIZE] = { 0 };
    uint8_t *p = buf + DRBD_WIRE_HEADER_SIZE;

    put_header(buf, DRBD_CMD_SIZES, SIZES_SIZE);
    stq_be_p(p + SIZES_DISK_SIZE, s->disk_size);
    stl_be_p(p + SIZES_MAX_EPOCH_SIZE, s->max_epoch_size);
    p[SIZES_PROTOCOL] = s->protocol;
    p[SIZES_INTEGRITY] = s->integrity;
    p[SIZES_VERIFY] = s->verify;
    p[SIZES_CSUMS] = s->csums;
    g_byte_array_append(out, buf, sizeof(buf));
}

/*
 * Role and disk state between QAPI's enums and the wire's numbers.  A
 * value added to either enum stops the build here until it has a wire
 * number of its own.
 */
QEMU_BUILD_BUG_ON(DRBD_ROLE__MAX != DRBD_WIRE_ROLE_MAX + 1);
QEMU_BUILD_BUG_ON(DRBD_DISK_STATE__MAX != DRBD_WIRE_DISK_STATE_MAX + 1);

static const uint8_t role_to_wire[DRBD_ROLE__MAX] = {
    [DRBD_ROLE_PRIMARY] = DRBD_WIRE_ROLE_PRIMARY,
    [DRBD_ROLE_SECONDARY] = DRBD_WIRE_ROLE_SECONDARY,
    [DRBD_ROLE_UNKNOWN] = DRBD_WIRE_ROLE_UNKNOWN,
};

static const DrbdRole role_from_wire[DRBD_WIRE_ROLE_MAX + 1] = {
    [DRBD_WIRE_ROLE_PRIMARY] = DRBD_ROLE_PRIMARY,
    [DRBD_WIRE_ROLE_SECONDARY] = DRBD_ROLE_SECONDARY,
    [DRBD_WIRE_ROLE_UNKNOWN] = DRBD_ROLE_UNKNOWN,
};

static const uint8_t disk_to_wire[DRBD_DISK_STATE__MAX] = {
    [DRBD_DISK_STATE_DISKLESS] = DRBD_WIRE_DISK_DISKLESS,
    [DRBD_DISK_STATE_ATTACHING] = DRBD_WIRE_DISK_ATTACHING,
    [DRBD_DISK_STATE_FAILED] = DRBD_WIRE_DISK_FAILED,
    [DRBD_DISK_STATE_INCONSISTENT] = DRBD_WIRE_DISK_INCONSISTENT,
    [DRBD_DISK_STATE_OUTDATED] = DRBD_WIRE_DISK_OUTDATED,
    [DRBD_DISK_STATE_DUNKNOWN] = DRBD_WIRE_DISK_DUNKNOWN,
    [DRBD_DISK_STATE_CONSISTENT] = DRBD_WIRE_DISK_CONSISTENT,
    [DRBD_DISK_STATE_UP_TO_DATE] = DRBD_WIRE_DISK_UP_TO_DATE,
};

static const DrbdDiskState disk_from_wire[DRBD_WIRE_DISK_STATE_MAX + 1] = {
    [DRBD_WIRE_DISK_DISKLESS] = DRBD_DISK_STATE_DISKLESS,
    [DRBD_WIRE_DISK_ATTACHING] = DRBD_DISK_STATE_ATTACHING,
    [DRBD_WIRE_DISK_FAILED] = DRBD_DISK_STATE_FAILED,
    [DRBD_WIRE_DISK_INCONSISTENT] = DRBD_DISK_STATE_INCONSISTENT,
    [DRBD_WIRE_DISK_OUTDATED] = DRBD_DISK_STATE_OUTDATED,
    [DRBD_WIRE_DISK_DUNKNOWN] = DRBD_DISK_STATE_DUNKNOWN,
    [DRBD_WIRE_DISK_CONSISTENT] = DRBD_DISK_STATE_CONSISTENT,
    [DRBD_WIRE_DISK_UP_TO_DATE] = DRBD_DISK_STATE_UP_TO_DATE,
};

static void put_state(GByteArray *out, uint16_t cmd,
                      const DrbdStatePacket *s)
{
    uint8_t buf[DRBD_WIRE_HEADER_SIZE + STATE_REQ_UUID_SIZE] = { 0 };
    uint8_t *p = buf + DRBD_WIRE_HEADER_SIZE;
    size_t len = s->uuid ? STATE_REQ_UUID_SIZE : STATE_SIZE;

    assert(cmd == DRBD_CMD_STATE_REQ || !s->uuid);
    put_header(buf, cmd, len);
    assert(s->role < DRBD_ROLE__MAX &&
           s->disk_state < DRBD_DISK_STATE__MAX);
    p[STATE_ROLE] = role_to_wire[s->role];
    p[STATE_DISK_STATE] = disk_to_wire[s->disk_state];
    if (s->uuid) {
        stq_be_p(p + STATE_REQ_UUID, s->uuid);
    }
    g_byte_array_append(out, buf, DRBD_WIRE_HEADER_SIZE + len);
}

void drbd_wire_put_state(GByteArray *out, const DrbdStatePacket *s)
{
    put_state(out, DRBD_CMD_STATE, s);
}

void drbd_wire_put_state_req(GByteArray *out, const DrbdStatePacket *s)
{
    put_state(out, DRBD_CMD_STATE_REQ, s);
}

void drbd_wire_put_state_reply(GByteArray *out, uint32_t result)
{
    uint8_t buf[DRBD_WIRE_HEADER_SIZE + STATE_REPLY_SIZE];

    assert(result <= DRBD_STATE_REPLY_MAX);
    put_header(buf, DRBD_CMD_STATE_REPLY, STATE_REPLY_SIZE);
    stl_be_p(buf + DRBD_WIRE_HEADER_SIZE + STATE_REPLY_RESULT, result);
    g_byte_array_append(out, buf, sizeof(buf));
}

void drbd_wire_put_new_uuid(GByteArray *out, uint64_t uuid)
{
    uint8_t buf[DRBD_WIRE_HEADER_SIZE + NEW_UUID_SIZE];

    put_header(buf, DRBD_CMD_NEW_UUID, NEW_UUID_SIZE);
    stq_be_p(buf + DRBD_WIRE_HEADER_SIZE + NEW_UUID_UUID, uuid);
    g_byte_array_append(out, buf, sizeof(buf));
}

void drbd_wire_put_refuse(GByteArray *out, const DrbdRefuse *r)
{
    uint8_t buf[DRBD_WIRE_HEADER_SIZE + REFUSE_SIZE];

    assert(r->reason >= 1 && r->reason <= DRBD_REFUSE_MAX);
    assert(r->node_id <= DRBD_WIRE_NODE_ID_MAX);
    put_header(buf, DRBD_CMD_REFUSE, REFUSE_SIZE);
    stl_be_p(buf + DRBD_WIRE_HEADER_SIZE + REFUSE_REASON, r->reason);
    stl_be_p(buf + DRBD_WIRE_HEADER_SIZE + REFUSE_NODE_ID, r->node_id);
    g_byte_array_append(out, buf, sizeof(buf));
}

void drbd_wire_put_decision(GByteArray *out, const DrbdDecision *d)
{
    uint8_t buf[DRBD_WIRE_HEADER_SIZE + DECISION_SIZE];

    assert(d->outcome <= DRBD_DECISION_MAX);
    assert(d->rule <= DRBD_DECISION_RULE_MAX);
    put_header(buf, DRBD_CMD_DECISION, DECISION_SIZE);
    stl_be_p(buf + DRBD_WIRE_HEADER_SIZE + DECISION_OUTCOME, d->outcome);
    stl_be_p(buf + DRBD_WIRE_HEADER_SIZE + DECISION_RULE, d->rule);
    g_byte_array_append(out, buf, sizeof(buf));
}

void drbd_wire_put_auth_challenge(GByteArray *out,
                                  const DrbdAuthChallenge *c)
{
    uint8_t buf[DRBD_WIRE_HEADER_SIZE + AUTH_CHALLENGE_SIZE];
    uint8_t *p = buf + DRBD_WIRE_HEADER_SIZE;

    put_header(buf, DRBD_CMD_AUTH_CHALLENGE, AUTH_CHALLENGE_SIZE);
    stl_be_p(p + AUTH_CHALLENGE_DIGEST, c->digest);
    memcpy(p + AUTH_CHALLENGE_NONCE, c->nonce, DRBD_AUTH_NONCE_SIZE);
    g_byte_array_append(out, buf, sizeof(buf));
}

void drbd_wire_put_auth_response(GByteArray *out,
                                 const DrbdAuthResponse *r)
{
    uint8_t buf[DRBD_WIRE_HEADER_SIZE];

    assert(r->len >= DRBD_AUTH_DIGEST_MIN && r->len <= DRBD_AUTH_DIGEST_MAX);
    put_header(buf, DRBD_CMD_AUTH_RESPONSE, r->len);
    g_byte_array_append(out, buf, sizeof(buf));
    g_byte_array_append(out, r->digest, r->len);
}

static void put_request(GByteArray *out, uint16_t cmd, uint32_t length,
                        const DrbdDataPacket *p)
{
    uint8_t buf[DRBD_WIRE_HEADER_SIZE + DATA_SIZE];
    uint8_t *q = buf + DRBD_WIRE_HEADER_SIZE;

    put_header(buf, cmd, length);
    stq_be_p(q + DATA_OFFSET, p->offset);
    stq_be_p(q + DATA_ID, p->id);
    stl_be_p(q + DATA_EPOCH, p->epoch);
    stl_be_p(q + DATA_FLAGS, p->flags);
    stl_be_p(q + DATA_BYTES, p->bytes);
    stl_be_p(q + DATA_UNORDERED, p->unordered);
    g_byte_array_append(out, buf, sizeof(buf));
}

void drbd_wire_put_data(GByteArray *out, uint16_t cmd,
                        const DrbdDataPacket *p)
{
    assert(is_request_cmd(cmd));

    if (is_data_cmd(cmd)) {
        drbd_wire_put_data_header(out, cmd, p);
        g_byte_array_append(out, p->data, p->bytes);
    } else {
        put_request(out, cmd, DATA_SIZE, p);
    }
}

void drbd_wire_put_data_header(GByteArray *out, uint16_t cmd,
                               const DrbdDataPacket *p)
{
    assert(is_data_cmd(cmd));
    assert(p->bytes <= DRBD_WIRE_MAX_DATA);
    assert(!p->digest_len || (p->digest_len >= DRBD_WIRE_DIGEST_MIN &&
                              p->digest_len <= DRBD_WIRE_DIGEST_MAX));

    put_request(out, cmd, DATA_SIZE + p->digest_len + p->bytes, p);
    g_byte_array_append(out, p->digest, p->digest_len);
}

void drbd_wire_put_block_ack(GByteArray *out, uint16_t cmd,
                             const DrbdBlockAck *a)
{
    uint8_t buf[DRBD_WIRE_HEADER_SIZE + ACK_SIZE];
    uint8_t *p = buf + DRBD_WIRE_HEADER_SIZE;

    assert(is_block_ack_cmd(cmd));

    put_header(buf, cmd, ACK_SIZE);
    stq_be_p(p + ACK_OFFSET, a->offset);
    stq_be_p(p + ACK_ID, a->id);
    stl_be_p(p + ACK_BYTES, a->bytes);
    stl_be_p(p + ACK_PAD, 0);
    g_byte_array_append(out, buf, sizeof(buf));
}

void drbd_wire_put_barrier(GByteArray *out, uint16_t cmd,
                           const DrbdBarrier *b)
{
    uint8_t buf[DRBD_WIRE_HEADER_SIZE + BARRIER_SIZE];
    uint8_t *p = buf + DRBD_WIRE_HEADER_SIZE;

    assert(is_barrier_cmd(cmd));

    put_header(buf, cmd, BARRIER_SIZE);
    stl_be_p(p + BARRIER_EPOCH, b->epoch);
    stl_be_p(p + BARRIER_SET_SIZE, b->set_size);
    /* flags are reserved in BARRIER_ACK */
    stl_be_p(p + BARRIER_FLAGS, cmd == DRBD_CMD_BARRIER ? b->flags : 0);
    g_byte_array_append(out, buf, sizeof(buf));
}

void drbd_wire_put_empty(GByteArray *out, uint16_t cmd)
{
    uint8_t buf[DRBD_WIRE_HEADER_SIZE];

    assert(is_empty_cmd(cmd));

    put_header(buf, cmd, 0);
    g_byte_array_append(out, buf, sizeof(buf));
}

void drbd_wire_put_uuids(GByteArray *out, const DrbdUuidsPacket *u)
{
    uint8_t buf[DRBD_WIRE_HEADER_SIZE + UUIDS_SIZE] = { 0 };
    uint8_t *p = buf + DRBD_WIRE_HEADER_SIZE;

    assert(!(u->flags & ~DRBD_UUIDS_ALL));
    put_header(buf, DRBD_CMD_UUIDS, UUIDS_SIZE);
    stq_be_p(p + UUIDS_CURRENT, u->current);
    stq_be_p(p + UUIDS_BITMAP, u->bitmap);
    stq_be_p(p + UUIDS_HISTORY, u->history[0]);
    stq_be_p(p + UUIDS_HISTORY + 8, u->history[1]);
    stq_be_p(p + UUIDS_CHANGES, u->changes);
    stl_be_p(p + UUIDS_FLAGS, u->flags);
    memcpy(p + UUIDS_AFTER_SB, u->after_sb, 3);
    g_byte_array_append(out, buf, sizeof(buf));
}

void drbd_wire_put_bitmap(GByteArray *out, const uint8_t *chunk, size_t len)
{
    uint8_t buf[DRBD_WIRE_HEADER_SIZE];

    assert(len > DRBD_RLE_HEADER_SIZE && len <= DRBD_WIRE_MAX_BITMAP);
    put_header(buf, DRBD_CMD_BITMAP, len);
    g_byte_array_append(out, buf, sizeof(buf));
    g_byte_array_append(out, chunk, len);
}

static bool is_ov_cmd(uint16_t cmd)
{
    return cmd == DRBD_CMD_OV_REQUEST || cmd == DRBD_CMD_OV_REPLY ||
           cmd == DRBD_CMD_RS_CSUM || cmd == DRBD_CMD_RS_CSUM_REPLY;
}

/* The flags a packet of @cmd must have exactly one of; 0: any subset */
static uint32_t ov_kinds(uint16_t cmd)
{
    switch (cmd) {
    case DRBD_CMD_OV_REPLY:
        return DRBD_OV_REPLY_KINDS;
    case DRBD_CMD_RS_CSUM:
        return DRBD_OV_DIGESTS;
    case DRBD_CMD_RS_CSUM_REPLY:
        return DRBD_OV_RESULT;
    default:
        return 0;
    }
}

void drbd_wire_put_ov(GByteArray *out, uint16_t cmd, const DrbdOvPacket *p)
{
    uint8_t buf[DRBD_WIRE_HEADER_SIZE + OV_SIZE + 8];
    uint8_t *q = buf + DRBD_WIRE_HEADER_SIZE;
    uint32_t digests = 0, extra = 0;

    assert(is_ov_cmd(cmd));
    assert(p->bytes && p->bytes <= DRBD_OV_MAX_BYTES);
    /* What the decoder accepts of @cmd, and nothing else */
    assert(!(p->flags & ~(ov_kinds(cmd) ?: DRBD_OV_DIGESTS)));
    assert(!ov_kinds(cmd) || is_power_of_2(p->flags));
    if (p->flags & DRBD_OV_DIGESTS) {
        assert(p->digest_size >= DRBD_WIRE_DIGEST_MIN &&
               p->digest_size <= DRBD_WIRE_DIGEST_MAX);
        digests = drbd_ov_blocks(p->bytes) * p->digest_size;
    } else if (p->flags & DRBD_OV_RESULT) {
        assert(cmd == DRBD_CMD_OV_REPLY || cmd == DRBD_CMD_RS_CSUM_REPLY);
        extra = 8;
    }

    put_header(buf, cmd, OV_SIZE + extra + digests);
    stq_be_p(q + OV_OFFSET, p->offset);
    stq_be_p(q + OV_ID, p->id);
    stl_be_p(q + OV_BYTES, p->bytes);
    stl_be_p(q + OV_FLAGS, p->flags);
    if (extra) {
        stq_be_p(q + OV_SIZE, p->mismatch);
    }
    g_byte_array_append(out, buf, DRBD_WIRE_HEADER_SIZE + OV_SIZE + extra);
    g_byte_array_append(out, p->digests, digests);
}

/*
 * Decoding
 */

int drbd_wire_get_header(const uint8_t *buf, DrbdHeader *h, Error **errp)
{
    uint32_t magic = ldl_be_p(buf + HDR_MAGIC);
    uint16_t cmd = lduw_be_p(buf + HDR_CMD);
    uint16_t reserved = lduw_be_p(buf + HDR_RESERVED);
    uint32_t length = ldl_be_p(buf + HDR_LENGTH);
    const DrbdCmdInfo *info;

    if (magic != DRBD_WIRE_MAGIC) {
        error_setg(errp, "packet header: bad magic 0x%08" PRIx32
                   " (expected 0x%08x)", magic, DRBD_WIRE_MAGIC);
        return -EINVAL;
    }
    if (cmd >= DRBD_CMD__MAX || !drbd_cmd_info[cmd].name) {
        error_setg(errp, "packet header: unknown command %u", cmd);
        return -EINVAL;
    }
    info = &drbd_cmd_info[cmd];
    if (reserved) {
        error_setg(errp, "%s packet: reserved header field is 0x%04x, "
                   "not zero", info->name, reserved);
        return -EINVAL;
    }
    if (info->min_len == info->max_len && length != info->min_len) {
        error_setg(errp, "%s packet: payload length %" PRIu32
                   " is impossible (expected %" PRIu32 " bytes)",
                   info->name, length, info->min_len);
        return -EINVAL;
    }
    if (length < info->min_len || length > info->max_len) {
        error_setg(errp, "%s packet: payload length %" PRIu32
                   " is impossible (expected %" PRIu32 " to %" PRIu32
                   " bytes)", info->name, length, info->min_len,
                   info->max_len);
        return -EINVAL;
    }
    /* Data comes in sectors, after the fixed part and maybe a digest */
    if (is_data_cmd(cmd) &&
        (length - DATA_SIZE) % DRBD_WIRE_ALIGN != 0 &&
        ((length - DATA_SIZE) % DRBD_WIRE_ALIGN < DRBD_WIRE_DIGEST_MIN ||
         (length - DATA_SIZE) % DRBD_WIRE_ALIGN > DRBD_WIRE_DIGEST_MAX)) {
        error_setg(errp, "%s packet: payload length %" PRIu32
                   " is impossible (data is not a multiple of %d bytes)",
                   info->name, length, DRBD_WIRE_ALIGN);
        return -EINVAL;
    }

    h->cmd = cmd;
    h->length = length;
    return 0;
}

static int check_len(const char *name, size_t len, size_t expected,
                     Error **errp)
{
    if (len != expected) {
        error_setg(errp, "%s packet: payload is %zu bytes (expected %zu)",
                   name, len, expected);
        return -EINVAL;
    }
    return 0;
}

static int check_cmd(const char *what, uint16_t cmd, bool ok, Error **errp)
{
    if (!ok) {
        error_setg(errp, "%s packet: cannot decode it as %s",
                   drbd_cmd_name(cmd), what);
        return -EINVAL;
    }
    return 0;
}

/*
 * Check the range that a request or block ack covers: @bytes must be
 * positive, at most @max_bytes, and with @offset aligned; the range must
 * not overflow the block layer's 63-bit offsets, nor (where @disk_size is
 * not 0) reach beyond @disk_size.
 */
static int check_range(const char *name, uint64_t offset, uint32_t bytes,
                       uint32_t max_bytes, uint64_t disk_size, Error **errp)
{
    if (bytes == 0) {
        error_setg(errp, "%s packet: request of zero bytes", name);
        return -EINVAL;
    }
    if (bytes > max_bytes) {
        error_setg(errp, "%s packet: %" PRIu32 " bytes is more than the "
                   "limit of %" PRIu32, name, bytes, max_bytes);
        return -EINVAL;
    }
    if (offset % DRBD_WIRE_ALIGN) {
        error_setg(errp, "%s packet: offset %" PRIu64 " is not a multiple "
                   "of %d", name, offset, DRBD_WIRE_ALIGN);
        return -EINVAL;
    }
    if (bytes % DRBD_WIRE_ALIGN) {
        error_setg(errp, "%s packet: length %" PRIu32 " is not a multiple "
                   "of %d", name, bytes, DRBD_WIRE_ALIGN);
        return -EINVAL;
    }
    if (offset > INT64_MAX - bytes) {
        error_setg(errp, "%s packet: offset %" PRIu64 " + %" PRIu32
                   " bytes overflows", name, offset, bytes);
        return -EINVAL;
    }
    if (disk_size && (bytes > disk_size || offset > disk_size - bytes)) {
        error_setg(errp, "%s packet: offset %" PRIu64 " + %" PRIu32
                   " bytes is beyond the device (%" PRIu64 " bytes)",
                   name, offset, bytes, disk_size);
        return -EINVAL;
    }
    return 0;
}

int drbd_wire_get_hello(const uint8_t *buf, size_t len, DrbdHello *h,
                        Error **errp)
{
    DrbdHello hello = { 0 };
    size_t name_len;

    if (len < HELLO_MIN_SIZE || len > HELLO_MAX_SIZE) {
        error_setg(errp, "HELLO packet: payload is %zu bytes "
                   "(expected %d to %d)", len, HELLO_MIN_SIZE,
                   HELLO_MAX_SIZE);
        return -EINVAL;
    }

    hello.version_min = ldl_be_p(buf + HELLO_VERSION_MIN);
    hello.version_max = ldl_be_p(buf + HELLO_VERSION_MAX);
    hello.node_id = ldl_be_p(buf + HELLO_NODE_ID);
    hello.flags = ldl_be_p(buf + HELLO_FLAGS);
    name_len = lduw_be_p(buf + HELLO_NAME_LEN);

    if (hello.version_min == 0) {
        error_setg(errp, "HELLO packet: version 0 does not exist");
        return -EINVAL;
    }
    if (hello.version_min > hello.version_max) {
        error_setg(errp, "HELLO packet: lowest version %" PRIu32
                   " is above highest version %" PRIu32,
                   hello.version_min, hello.version_max);
        return -EINVAL;
    }
    if (hello.flags & ~DRBD_HELLO_ALL) {
        error_setg(errp, "HELLO packet: unknown flags 0x%" PRIx32,
                   hello.flags & ~DRBD_HELLO_ALL);
        return -EINVAL;
    }
    if (name_len == 0) {
        error_setg(errp, "HELLO packet: empty resource name");
        return -EINVAL;
    }
    if (name_len > DRBD_RESOURCE_NAME_MAX) {
        error_setg(errp, "HELLO packet: resource name of %zu bytes is "
                   "longer than %d", name_len, DRBD_RESOURCE_NAME_MAX);
        return -EINVAL;
    }
    if (name_len != len - HELLO_NAME) {
        error_setg(errp, "HELLO packet: resource name of %zu bytes does "
                   "not fill the %zu bytes left in the payload",
                   name_len, len - HELLO_NAME);
        return -EINVAL;
    }
    if (memchr(buf + HELLO_NAME, '\0', name_len)) {
        error_setg(errp, "HELLO packet: resource name contains a NUL byte");
        return -EINVAL;
    }
    memcpy(hello.resource, buf + HELLO_NAME, name_len);
    hello.resource[name_len] = '\0';

    *h = hello;
    return 0;
}

int drbd_wire_get_sizes(const uint8_t *buf, size_t len, DrbdSizes *s,
                        Error **errp)
{
    DrbdSizes sizes;

    if (check_len("SIZES", len, SIZES_SIZE, errp) < 0) {
        return -EINVAL;
    }

    sizes.disk_size = ldq_be_p(buf + SIZES_DISK_SIZE);
    sizes.max_epoch_size = ldl_be_p(buf + SIZES_MAX_EPOCH_SIZE);
    sizes.protocol = buf[SIZES_PROTOCOL];
    sizes.integrity = buf[SIZES_INTEGRITY];
    sizes.verify = buf[SIZES_VERIFY];
    sizes.csums = buf[SIZES_CSUMS];

    if (sizes.disk_size > INT64_MAX) {
        error_setg(errp, "SIZES packet: disk size %" PRIu64 " is too large",
                   sizes.disk_size);
        return -EINVAL;
    }
    if (sizes.protocol != 'A' && sizes.protocol != 'B' &&
        sizes.protocol != 'C') {
        error_setg(errp, "SIZES packet: unknown protocol 0x%02x "
                   "(expected 'A', 'B' or 'C')", sizes.protocol);
        return -EINVAL;
    }
    if (sizes.integrity >= DRBD_DIGEST__MAX) {
        error_setg(errp, "SIZES packet: unknown data-integrity digest %u",
                   sizes.integrity);
        return -EINVAL;
    }
    if (sizes.verify >= DRBD_DIGEST__MAX) {
        error_setg(errp, "SIZES packet: unknown verify digest %u",
                   sizes.verify);
        return -EINVAL;
    }
    if (sizes.csums >= DRBD_DIGEST__MAX) {
        error_setg(errp, "SIZES packet: unknown csums digest %u",
                   sizes.csums);
        return -EINVAL;
    }

    *s = sizes;
    return 0;
}

int drbd_wire_get_uuids(const uint8_t *buf, size_t len, DrbdUuidsPacket *u,
                        Error **errp)
{
    DrbdUuidsPacket uuids;
    int i;

    if (check_len("UUIDS", len, UUIDS_SIZE, errp) < 0) {
        return -EINVAL;
    }
    uuids.current = ldq_be_p(buf + UUIDS_CURRENT);
    uuids.bitmap = ldq_be_p(buf + UUIDS_BITMAP);
    uuids.history[0] = ldq_be_p(buf + UUIDS_HISTORY);
    uuids.history[1] = ldq_be_p(buf + UUIDS_HISTORY + 8);
    uuids.changes = ldq_be_p(buf + UUIDS_CHANGES);
    uuids.flags = ldl_be_p(buf + UUIDS_FLAGS);
    memcpy(uuids.after_sb, buf + UUIDS_AFTER_SB, 3);

    if (uuids.flags & ~DRBD_UUIDS_ALL) {
        error_setg(errp, "UUIDS packet: unknown flags 0x%" PRIx32,
                   uuids.flags & ~DRBD_UUIDS_ALL);
        return -EINVAL;
    }
    for (i = 0; i < 3; i++) {
        if (uuids.after_sb[i] > DRBD_WIRE_AFTER_SB_MAX) {
            error_setg(errp, "UUIDS packet: unknown after-sb-%dpri policy "
                       "%u", i, uuids.after_sb[i]);
            return -EINVAL;
        }
    }
    if (buf[UUIDS_PAD]) {
        error_setg(errp, "UUIDS packet: padding is not zero");
        return -EINVAL;
    }
    *u = uuids;
    return 0;
}

int drbd_wire_get_state(const uint8_t *buf, size_t len, DrbdStatePacket *s,
                        Error **errp)
{
    uint8_t role, disk;

    if (check_len("STATE", len, STATE_SIZE, errp) < 0) {
        return -EINVAL;
    }

    role = buf[STATE_ROLE];
    disk = buf[STATE_DISK_STATE];

    if (role > DRBD_WIRE_ROLE_MAX) {
        error_setg(errp, "STATE packet: unknown role %u (at most %d)",
                   role, DRBD_WIRE_ROLE_MAX);
        return -EINVAL;
    }
    if (disk > DRBD_WIRE_DISK_STATE_MAX) {
        error_setg(errp, "STATE packet: unknown disk state %u (at most %d)",
                   disk, DRBD_WIRE_DISK_STATE_MAX);
        return -EINVAL;
    }
    if (!buffer_is_zero(buf + STATE_PAD, STATE_SIZE - STATE_PAD)) {
        error_setg(errp, "STATE packet: padding is not zero");
        return -EINVAL;
    }

    s->role = role_from_wire[role];
    s->disk_state = disk_from_wire[disk];
    s->uuid = 0;
    return 0;
}

int drbd_wire_get_state_req(const uint8_t *buf, size_t len,
                            DrbdStatePacket *s, Error **errp)
{
    uint64_t u;

    if (len != STATE_SIZE && len != STATE_REQ_UUID_SIZE) {
        error_setg(errp, "STATE_REQ packet: length %zu, not %d or %d", len,
                   STATE_SIZE, STATE_REQ_UUID_SIZE);
        return -EINVAL;
    }
    if (drbd_wire_get_state(buf, STATE_SIZE, s, errp) < 0) {
        return -EINVAL;
    }
    if (len == STATE_SIZE) {
        return 0;
    }
    u = ldq_be_p(buf + STATE_REQ_UUID);
    if ((u & ~DRBD_UUID_PRIMARY_FLAG) == 0) {
        error_setg(errp, "STATE_REQ packet: a current UUID of zero");
        return -EINVAL;
    }
    s->uuid = u;
    return 0;
}

void drbd_wire_put_resize(GByteArray *out, uint64_t disk_size)
{
    uint8_t buf[DRBD_WIRE_HEADER_SIZE + RESIZE_SIZE];

    put_header(buf, DRBD_CMD_RESIZE, RESIZE_SIZE);
    stq_be_p(buf + DRBD_WIRE_HEADER_SIZE + RESIZE_DISK_SIZE, disk_size);
    g_byte_array_append(out, buf, sizeof(buf));
}

void drbd_wire_put_resize_reply(GByteArray *out, uint32_t result)
{
    uint8_t buf[DRBD_WIRE_HEADER_SIZE + RESIZE_REPLY_SIZE];

    assert(result <= RESIZE_REPLY_MAX);
    put_header(buf, DRBD_CMD_RESIZE_REPLY, RESIZE_REPLY_SIZE);
    stl_be_p(buf + DRBD_WIRE_HEADER_SIZE + RESIZE_REPLY_RESULT, result);
    g_byte_array_append(out, buf, sizeof(buf));
}

int drbd_wire_get_resize(const uint8_t *buf, size_t len, uint64_t *disk_size,
                         Error **errp)
{
    uint64_t size;

    if (check_len("RESIZE", len, RESIZE_SIZE, errp) < 0) {
        return -EINVAL;
    }
    size = ldq_be_p(buf + RESIZE_DISK_SIZE);
    if (!size || size % DRBD_WIRE_ALIGN || size > RESIZE_MAX_DISK_SIZE) {
        error_setg(errp, "RESIZE packet: a disk of %" PRIu64 " bytes (not "
                   "a multiple of %d from %d to %llu)", size,
                   DRBD_WIRE_ALIGN, DRBD_WIRE_ALIGN, RESIZE_MAX_DISK_SIZE);
        return -EINVAL;
    }
    *disk_size = size;
    return 0;
}

int drbd_wire_get_resize_reply(const uint8_t *buf, size_t len,
                               uint32_t *result, Error **errp)
{
    uint32_t r;

    if (check_len("RESIZE_REPLY", len, RESIZE_REPLY_SIZE, errp) < 0) {
        return -EINVAL;
    }
    r = ldl_be_p(buf + RESIZE_REPLY_RESULT);
    if (r > RESIZE_REPLY_MAX) {
        error_setg(errp, "RESIZE_REPLY packet: result %" PRIu32 " is not "
                   "an errno", r);
        return -EINVAL;
    }
    *result = r;
    return 0;
}

int drbd_wire_get_new_uuid(const uint8_t *buf, size_t len, uint64_t *uuid,
                           Error **errp)
{
    uint64_t u;

    if (check_len("NEW_UUID", len, NEW_UUID_SIZE, errp) < 0) {
        return -EINVAL;
    }
    u = ldq_be_p(buf + NEW_UUID_UUID);
    /* The primary flag is the sender's: the value is the rest */
    if ((u & ~DRBD_UUID_PRIMARY_FLAG) == 0 ||
        (u & ~DRBD_UUID_PRIMARY_FLAG) == DRBD_UUID_JUST_CREATED) {
        error_setg(errp, "NEW_UUID packet: UUID %" PRIx64 " names no data",
                   u);
        return -EINVAL;
    }
    *uuid = u;
    return 0;
}

int drbd_wire_get_refuse(const uint8_t *buf, size_t len, DrbdRefuse *r,
                         Error **errp)
{
    DrbdRefuse v;

    if (check_len("REFUSE", len, REFUSE_SIZE, errp) < 0) {
        return -EINVAL;
    }
    v.reason = ldl_be_p(buf + REFUSE_REASON);
    v.node_id = ldl_be_p(buf + REFUSE_NODE_ID);
    if (v.reason < 1 || v.reason > DRBD_REFUSE_MAX) {
        error_setg(errp, "REFUSE packet: unknown reason %" PRIu32, v.reason);
        return -EINVAL;
    }
    if (v.node_id > DRBD_WIRE_NODE_ID_MAX) {
        error_setg(errp, "REFUSE packet: node id %" PRIu32 " is above %d",
                   v.node_id, DRBD_WIRE_NODE_ID_MAX);
        return -EINVAL;
    }
    *r = v;
    return 0;
}

int drbd_wire_get_decision(const uint8_t *buf, size_t len, DrbdDecision *d,
                           Error **errp)
{
    DrbdDecision v;

    if (check_len("DECISION", len, DECISION_SIZE, errp) < 0) {
        return -EINVAL;
    }
    v.outcome = ldl_be_p(buf + DECISION_OUTCOME);
    v.rule = ldl_be_p(buf + DECISION_RULE);
    if (v.outcome > DRBD_DECISION_MAX) {
        error_setg(errp, "DECISION packet: unknown outcome %" PRIu32,
                   v.outcome);
        return -EINVAL;
    }
    if (v.rule > DRBD_DECISION_RULE_MAX) {
        error_setg(errp, "DECISION packet: rule %" PRIu32 " is above %d",
                   v.rule, DRBD_DECISION_RULE_MAX);
        return -EINVAL;
    }
    *d = v;
    return 0;
}

int drbd_wire_get_state_reply(const uint8_t *buf, size_t len,
                              uint32_t *result, Error **errp)
{
    uint32_t r;

    if (check_len("STATE_REPLY", len, STATE_REPLY_SIZE, errp) < 0) {
        return -EINVAL;
    }
    r = ldl_be_p(buf + STATE_REPLY_RESULT);
    if (r > DRBD_STATE_REPLY_MAX) {
        error_setg(errp, "STATE_REPLY packet: unknown result %" PRIu32, r);
        return -EINVAL;
    }
    *result = r;
    return 0;
}

int drbd_wire_get_data(uint16_t cmd, const uint8_t *buf, size_t len,
                       uint64_t disk_size, DrbdDataPacket *p, Error **errp)
{
    const char *name = drbd_cmd_name(cmd);
    bool has_data = is_data_cmd(cmd);
    DrbdDataPacket req;

    if (check_cmd("DATA, ZEROES, DISCARD, RS_DATA or RS_ZEROES", cmd,
                  is_request_cmd(cmd), errp) < 0) {
        return -EINVAL;
    }
    if (len < DATA_SIZE) {
        error_setg(errp, "%s packet: payload is %zu bytes (expected at "
                   "least %d)", name, len, DATA_SIZE);
        return -EINVAL;
    }

    req.offset = ldq_be_p(buf + DATA_OFFSET);
    req.id = ldq_be_p(buf + DATA_ID);
    req.epoch = ldl_be_p(buf + DATA_EPOCH);
    req.flags = ldl_be_p(buf + DATA_FLAGS);
    req.bytes = ldl_be_p(buf + DATA_BYTES);
    req.unordered = ldl_be_p(buf + DATA_UNORDERED);
    req.data = NULL;
    req.digest = NULL;
    req.digest_len = 0;

    if ((cmd == DRBD_CMD_RS_DATA || cmd == DRBD_CMD_RS_ZEROES ||
         cmd == DRBD_CMD_DATA_REPLY) && req.unordered) {
        error_setg(errp, "%s packet: %s is not a guest write, but claims "
                   "%" PRIu32 " unordered writes", name,
                   cmd == DRBD_CMD_DATA_REPLY ? "read data" : "resync data",
                   req.unordered);
        return -EINVAL;
    }
    if (cmd == DRBD_CMD_DATA_REPLY && (req.epoch || req.flags)) {
        error_setg(errp, "%s packet: read data has no epoch and no flags "
                   "(epoch %" PRIu32 ", flags 0x%" PRIx32 ")", name,
                   req.epoch, req.flags);
        return -EINVAL;
    }
    if (req.flags & ~DRBD_DP_ALL) {
        error_setg(errp, "%s packet: unknown flags 0x%" PRIx32, name,
                   req.flags & ~DRBD_DP_ALL);
        return -EINVAL;
    }
    if (check_range(name, req.offset, req.bytes,
                    has_data ? DRBD_WIRE_MAX_DATA : DRBD_WIRE_MAX_ZEROES,
                    disk_size, errp) < 0) {
        return -EINVAL;
    }
    /* bytes is now at most DRBD_WIRE_MAX_DATA: the sums cannot overflow */
    if (!has_data) {
        if (check_len(name, len, DATA_SIZE, errp) < 0) {
            return -EINVAL;
        }
    } else {
        /* Between the fixed part and the data: a digest, or nothing */
        size_t extra = len >= DATA_SIZE + req.bytes ?
                       len - DATA_SIZE - req.bytes : SIZE_MAX;

        if (extra != 0 && (extra < DRBD_WIRE_DIGEST_MIN ||
                           extra > DRBD_WIRE_DIGEST_MAX)) {
            error_setg(errp, "%s packet: payload is %zu bytes (expected %"
                       PRIu32 ", plus a digest of %d to %d)", name, len,
                       DATA_SIZE + req.bytes, DRBD_WIRE_DIGEST_MIN,
                       DRBD_WIRE_DIGEST_MAX);
            return -EINVAL;
        }
        req.digest_len = extra;
        req.digest = extra ? buf + DATA_SIZE : NULL;
        req.data = buf + DATA_SIZE + extra;
    }

    *p = req;
    return 0;
}

int drbd_wire_get_block_ack(uint16_t cmd, const uint8_t *buf, size_t len,
                            uint64_t disk_size, DrbdBlockAck *a,
                            Error **errp)
{
    const char *name = drbd_cmd_name(cmd);
    DrbdBlockAck ack;

    if (check_cmd("a block ack", cmd, is_block_ack_cmd(cmd), errp) < 0) {
        return -EINVAL;
    }
    if (check_len(name, len, ACK_SIZE, errp) < 0) {
        return -EINVAL;
    }

    ack.offset = ldq_be_p(buf + ACK_OFFSET);
    ack.id = ldq_be_p(buf + ACK_ID);
    ack.bytes = ldl_be_p(buf + ACK_BYTES);

    if (ldl_be_p(buf + ACK_PAD)) {
        error_setg(errp, "%s packet: padding is not zero", name);
        return -EINVAL;
    }
    if (check_range(name, ack.offset, ack.bytes,
                    cmd == DRBD_CMD_DATA_REQUEST ||
                    cmd == DRBD_CMD_NEG_DREPLY ? DRBD_WIRE_MAX_DATA :
                    DRBD_WIRE_MAX_ZEROES, disk_size, errp) < 0) {
        return -EINVAL;
    }

    *a = ack;
    return 0;
}

int drbd_wire_get_barrier(uint16_t cmd, const uint8_t *buf, size_t len,
                          DrbdBarrier *b, Error **errp)
{
    const char *name = drbd_cmd_name(cmd);
    DrbdBarrier barrier;
    uint32_t known;

    if (check_cmd("BARRIER or BARRIER_ACK", cmd, is_barrier_cmd(cmd),
                  errp) < 0) {
        return -EINVAL;
    }
    if (check_len(name, len, BARRIER_SIZE, errp) < 0) {
        return -EINVAL;
    }

    barrier.epoch = ldl_be_p(buf + BARRIER_EPOCH);
    barrier.set_size = ldl_be_p(buf + BARRIER_SET_SIZE);
    barrier.flags = ldl_be_p(buf + BARRIER_FLAGS);

    /* BARRIER_ACK has no flags */
    known = cmd == DRBD_CMD_BARRIER ? DRBD_BARRIER_ALL : 0;
    if (barrier.flags & ~known) {
        error_setg(errp, "%s packet: unknown flags 0x%" PRIx32, name,
                   barrier.flags & ~known);
        return -EINVAL;
    }

    *b = barrier;
    return 0;
}

int drbd_wire_get_auth_challenge(const uint8_t *buf, size_t len,
                                 DrbdAuthChallenge *c, Error **errp)
{
    uint32_t digest;

    if (check_len("AUTH_CHALLENGE", len, AUTH_CHALLENGE_SIZE, errp) < 0) {
        return -EINVAL;
    }
    digest = ldl_be_p(buf + AUTH_CHALLENGE_DIGEST);
    if (digest == DRBD_DIGEST_NONE || digest == DRBD_DIGEST_CRC32C ||
        digest >= DRBD_DIGEST__MAX) {
        error_setg(errp, "AUTH_CHALLENGE packet: %" PRIu32 " is not an "
                   "HMAC digest algorithm", digest);
        return -EINVAL;
    }
    c->digest = digest;
    memcpy(c->nonce, buf + AUTH_CHALLENGE_NONCE, DRBD_AUTH_NONCE_SIZE);
    return 0;
}

int drbd_wire_get_auth_response(const uint8_t *buf, size_t len,
                                DrbdAuthResponse *r, Error **errp)
{
    if (len < DRBD_AUTH_DIGEST_MIN || len > DRBD_AUTH_DIGEST_MAX) {
        error_setg(errp, "AUTH_RESPONSE packet: payload is %zu bytes "
                   "(expected %d to %d)", len, DRBD_AUTH_DIGEST_MIN,
                   DRBD_AUTH_DIGEST_MAX);
        return -EINVAL;
    }
    r->len = len;
    memcpy(r->digest, buf, len);
    return 0;
}

int drbd_wire_get_ov(uint16_t cmd, const uint8_t *buf, size_t len,
                     uint64_t disk_size, uint32_t digest_size,
                     DrbdOvPacket *p, Error **errp)
{
    const char *name = drbd_cmd_name(cmd);
    uint32_t known, kinds, kind, blocks;
    size_t expected;
    DrbdOvPacket ov = { 0 };

    if (check_cmd("OV_REQUEST, OV_REPLY, RS_CSUM or RS_CSUM_REPLY", cmd,
                  is_ov_cmd(cmd), errp) < 0) {
        return -EINVAL;
    }
    if (len < OV_SIZE) {
        error_setg(errp, "%s packet: payload is %zu bytes (expected at "
                   "least %d)", name, len, OV_SIZE);
        return -EINVAL;
    }
    ov.offset = ldq_be_p(buf + OV_OFFSET);
    ov.id = ldq_be_p(buf + OV_ID);
    ov.bytes = ldl_be_p(buf + OV_BYTES);
    ov.flags = ldl_be_p(buf + OV_FLAGS);

    if (check_range(name, ov.offset, ov.bytes, DRBD_OV_MAX_BYTES, disk_size,
                    errp) < 0) {
        return -EINVAL;
    }
    kinds = ov_kinds(cmd);
    known = kinds ? kinds : DRBD_OV_DIGESTS;
    if (ov.flags & ~known) {
        error_setg(errp, "%s packet: unknown flags 0x%" PRIx32, name,
                   ov.flags & ~known);
        return -EINVAL;
    }
    kind = ov.flags & known;
    if (kinds && (!kind || (kind & (kind - 1)))) {
        error_setg(errp, "%s packet: flags 0x%" PRIx32 " are not exactly "
                   "one of those it may have (0x%" PRIx32 ")", name,
                   ov.flags, kinds);
        return -EINVAL;
    }
    if ((ov.flags & DRBD_OV_DIGESTS) && !digest_size) {
        error_setg(errp, "%s packet carries digests, but this node has "
                   "no %s", name, cmd == DRBD_CMD_RS_CSUM ? "csums-alg" :
                   "verify-alg");
        return -EINVAL;
    }

    blocks = drbd_ov_blocks(ov.bytes);
    expected = OV_SIZE;
    if (ov.flags & DRBD_OV_DIGESTS) {
        expected += (size_t)blocks * digest_size;
    } else if (ov.flags & DRBD_OV_RESULT) {
        expected += 8;
    }
    if (check_len(name, len, expected, errp) < 0) {
        return -EINVAL;
    }
    if (ov.flags & DRBD_OV_DIGESTS) {
        ov.digests = buf + OV_SIZE;
        ov.digest_size = digest_size;
    } else if (ov.flags & DRBD_OV_RESULT) {
        ov.mismatch = ldq_be_p(buf + OV_SIZE);
        if (blocks < 64 && (ov.mismatch >> blocks)) {
            error_setg(errp, "%s packet: mismatch mask 0x%" PRIx64 " names "
                       "blocks beyond its %" PRIu32, name, ov.mismatch,
                       blocks);
            return -EINVAL;
        }
    }

    *p = ov;
    return 0;
}
