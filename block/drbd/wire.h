/*
 * DRBD-style replication: packet encoding and decoding
 *
 * Pure code: no I/O, no QEMU globals.  Every decoder checks the bounds of
 * what it is given and fails with an Error rather than reading or writing
 * out of range, so that it can be fed bytes from the network (and from a
 * fuzzer) as they come.  The format is documented byte by byte in
 * docs/interop/drbd-protocol.rst.
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#ifndef BLOCK_DRBD_WIRE_H
#define BLOCK_DRBD_WIRE_H

#include "qapi/error.h"
#include "qapi/qapi-types-drbd.h"
#include "qemu/units.h"

#define DRBD_WIRE_MAGIC         0x44524251  /* "DRBQ" */
#define DRBD_WIRE_HEADER_SIZE   12

/* Versions this implementation speaks; the handshake agrees on one. */
/*
 * Version 2: DATA, ZEROES and DISCARD say which earlier writes they do
 * not depend on (DrbdDataPacket.unordered); version 1 had zero padding.
 */
/*
 * Version 3: DATA_REQUEST, DATA_REPLY and NEG_DREPLY (guest reads served
 * by the peer); a node sends them only to a peer that speaks version 3.
 */
/*
 * Version 4: a node changes its role only by STATE_REQ (demotions too),
 * and waits for the STATE_REPLY; a STATE that changes the sender's role,
 * or raises its disk state, is refused.
 */
/*
 * Version 5: NEW_UUID, a primary's new current UUID, to the peers that
 * receive its writes (a resource of three or more nodes); a node sends
 * it only to a peer that speaks version 5.
 */
/*
 * Version 6: a STATE_REQ that asks for the primary role carries the
 * sender's current UUID, and a STATE_REPLY may refuse because the sender
 * is behind a newer data generation, or because a primary is connected
 * to the answering node; NEW_UUID also reaches diskless peers and sync
 * targets.
 */
/*
 * Version 7: a node that refuses a connection for what the connecting
 * node's HELLO says (another resource, a node id that does not fit)
 * answers with a REFUSE that says why, in place of its HELLO; it sends
 * it only to a peer whose HELLO offers version 7.
 */
/*
 * Version 8: RESIZE, a primary's request that its peers grow with it
 * (online, block_resize), answered by RESIZE_REPLY; a node sends it only
 * to a peer that speaks version 8.
 */
/*
 * Version 9: AHEAD, a primary's word on the data channel that it sends
 * no more writes after it (on-congestion pull-ahead): the receiver is
 * behind until a resync; a node sends it only to a peer of version 9.
 */
/*
 * Version 10: no new packet.  A sync source whose target is primary
 * joins the generation the target announces (NEW_UUID) when it arrives,
 * instead of at the resync's end; the target starts one at its first
 * write after the handshake, and takes no node that lacks it for its
 * next source.
 */
/*
 * Version 11: no new packet.  A primary that detaches from its disk
 * starts a new data generation, and announces it (NEW_UUID); its
 * secondaries start none of their own when they see its disk go, so
 * that two of them do not go on in two generations.
 */
/*
 * Version 12: DECISION, what each node made of the sync handshake, sent
 * before it acts on it.  A node acts on its decision only when the
 * peer's is the same one seen from the other end: one that turns the
 * connection down (its own state changed since it sent it, a resync that
 * must wait) no longer leaves the other end a sync target without a
 * source.  Both send it only to a peer of version 12.
 */
#define DRBD_PROTO_VERSION_MIN  2
#define DRBD_PROTO_VERSION_MAX  12
/* The first version with DATA_REQUEST, DATA_REPLY and NEG_DREPLY */
#define DRBD_PROTO_VERSION_READS 3
/* The first version whose role changes all go through STATE_REQ */
#define DRBD_PROTO_VERSION_ROLE_REQ 4
/* The first version with NEW_UUID */
#define DRBD_PROTO_VERSION_NEW_UUID 5
/* The first version whose promotion requests carry the current UUID */
#define DRBD_PROTO_VERSION_GEN_CHECK 6
/* The first version with REFUSE */
#define DRBD_PROTO_VERSION_REFUSE 7
/* The first version with RESIZE and RESIZE_REPLY */
#define DRBD_PROTO_VERSION_RESIZE 8
/* The first version with AHEAD */
#define DRBD_PROTO_VERSION_AHEAD 9
/* The first version whose sync source joins its primary target's generation */
#define DRBD_PROTO_VERSION_TARGET_GEN 10
/* The first version whose primary starts a generation when it detaches */
#define DRBD_PROTO_VERSION_DETACH_GEN 11
/* The first version with DECISION */
#define DRBD_PROTO_VERSION_DECISION 12

/*
 * The largest payload of any packet: a data packet of 1 MiB plus its
 * fixed part and a data-integrity digest
 */
#define DRBD_WIRE_MAX_DATA      (1 * MiB)
#define DRBD_WIRE_MAX_PAYLOAD   (DRBD_WIRE_MAX_DATA + 128)

/* A data-integrity digest between a data packet's fixed part and data */
#define DRBD_WIRE_DIGEST_MIN    4
#define DRBD_WIRE_DIGEST_MAX    64

/* The largest BITMAP payload: one run-length encoded chunk (rle.h) */
#define DRBD_WIRE_MAX_BITMAP    (64 * KiB)

/* The largest range of a ZEROES, DISCARD or block ack packet */
#define DRBD_WIRE_MAX_ZEROES    (1 * GiB)

/* Offsets and lengths of every request are multiples of this */
#define DRBD_WIRE_ALIGN         512

/* The fixed part of a DATA, ZEROES, DISCARD or RS_DATA payload */
#define DRBD_WIRE_DATA_FIXED_SIZE 32

#define DRBD_RESOURCE_NAME_MAX  64

typedef enum DrbdCmd {
    /* handshake, on both channels */
    DRBD_CMD_HELLO          = 1,
    /* connection state, data channel */
    DRBD_CMD_SIZES          = 2,
    DRBD_CMD_STATE          = 3,
    /* replication, data channel */
    DRBD_CMD_DATA           = 4,
    DRBD_CMD_ZEROES         = 5,
    DRBD_CMD_DISCARD        = 6,
    DRBD_CMD_BARRIER        = 7,
    /* acks, meta channel */
    DRBD_CMD_RECV_ACK       = 8,    /* protocol B: received */
    DRBD_CMD_WRITE_ACK      = 9,    /* protocol C: on the peer's disk */
    DRBD_CMD_NEG_ACK        = 10,   /* the peer failed the write */
    DRBD_CMD_BARRIER_ACK    = 11,
    DRBD_CMD_PING           = 12,
    DRBD_CMD_PING_ACK       = 13,
    /*
     * resync, data channel.  14 is reserved, unassigned: the sync source
     * sends unasked, there is no request from the target (DRBD's
     * RS_REQUEST); a receiver refuses 14 as an unknown command.
     */
    DRBD_CMD_RS_DATA        = 15,   /* sync source sends a block's data */
    DRBD_CMD_OUT_OF_SYNC    = 16,   /* a range the receiver must resync */
    DRBD_CMD_RS_DONE        = 17,   /* sync source: nothing left to send */
    /* cluster-wide state change: data channel asks, meta channel answers */
    DRBD_CMD_STATE_REQ      = 18,   /* may the sender take this state? */
    DRBD_CMD_STATE_REPLY    = 19,   /* DRBD_STATE_REPLY_* */
    /* handshake, data channel: the out-of-sync bitmap, rle.h's chunks */
    DRBD_CMD_BITMAP         = 20,
    /* handshake, data channel: generation UUIDs and resync options */
    DRBD_CMD_UUIDS          = 21,
    /* authentication, on both channels after HELLO (and TLS): secure.c */
    DRBD_CMD_AUTH_CHALLENGE = 22,   /* a digest algorithm and a nonce */
    DRBD_CMD_AUTH_RESPONSE  = 23,   /* the HMAC that answers the peer's */
    /* online verify, data channel (DrbdOvPacket) */
    DRBD_CMD_OV_REQUEST     = 24,   /* verify source: compare this range */
    DRBD_CMD_OV_REPLY       = 25,   /* verify target: digests or result */
    /* checksum-based resync (DrbdOvPacket, csums-alg digests) */
    DRBD_CMD_RS_CSUM        = 26,   /* sync source, data: its digests */
    DRBD_CMD_RS_CSUM_REPLY  = 27,   /* sync target, meta: which differ */
    DRBD_CMD_RS_ZEROES      = 28,   /* sync source: a block reads as zeroes */
    /* guest reads served by the peer (version 3), data channel */
    DRBD_CMD_DATA_REQUEST   = 29,   /* send me these blocks */
    DRBD_CMD_DATA_REPLY     = 30,   /* the blocks asked for */
    DRBD_CMD_NEG_DREPLY     = 31,   /* they could not be read */
    /* a primary's new data generation (version 5), meta channel */
    DRBD_CMD_NEW_UUID       = 32,
    /* handshake (version 7), in place of a HELLO: why it is refused */
    DRBD_CMD_REFUSE         = 33,
    /* online growth (version 8): the request on the data channel, */
    DRBD_CMD_RESIZE         = 34,
    /* its answer on the meta channel (0 or an errno) */
    DRBD_CMD_RESIZE_REPLY   = 35,
    /* pull-ahead (version 9), data channel: no more writes after this */
    DRBD_CMD_AHEAD          = 36,
    /* version 12: the sender's outcome of the sync handshake */
    DRBD_CMD_DECISION       = 37,
    DRBD_CMD__MAX,
} DrbdCmd;

typedef struct DrbdHeader {
    uint16_t cmd;       /* DrbdCmd */
    uint32_t length;    /* bytes of payload following the header */
} DrbdHeader;

/* Bits of DrbdHello.flags */
#define DRBD_HELLO_META_CHANNEL (1u << 0)  /* this socket is the meta channel */
#define DRBD_HELLO_TLS          (1u << 1)  /* the sender requires TLS */
#define DRBD_HELLO_AUTH         (1u << 2)  /* ... a shared-secret proof */
#define DRBD_HELLO_ALL          (DRBD_HELLO_META_CHANNEL | DRBD_HELLO_TLS | \
                                 DRBD_HELLO_AUTH)

typedef struct DrbdHello {
    uint32_t version_min;
    uint32_t version_max;
    uint32_t node_id;
    uint32_t flags;
    char resource[DRBD_RESOURCE_NAME_MAX + 1];  /* NUL-terminated */
} DrbdHello;

/* The highest node id; a REFUSE names the refusing node by it */
#define DRBD_WIRE_NODE_ID_MAX   31

/* A REFUSE's reason: what in the connecting node's HELLO did not fit */
#define DRBD_REFUSE_RESOURCE        1   /* the refuser's resource differs */
#define DRBD_REFUSE_NODE_ID         2   /* not the refuser's peer-node-id */
#define DRBD_REFUSE_SAME_NODE_ID    3   /* the refuser's own node id */
#define DRBD_REFUSE_VERSION         4   /* no common protocol version */
#define DRBD_REFUSE_MAX             DRBD_REFUSE_VERSION

typedef struct DrbdRefuse {
    uint32_t reason;            /* DRBD_REFUSE_* */
    uint32_t node_id;           /* the refusing node's */
} DrbdRefuse;

/*
 * A DECISION's outcome: the sync handshake's decision as the sender sees
 * it, or that it turns the connection down (the reason is in its log)
 */
#define DRBD_DECISION_REFUSED       0
#define DRBD_DECISION_NONE          1   /* in sync, no resync */
#define DRBD_DECISION_SOURCE        2   /* bitmap-based, the sender sends */
#define DRBD_DECISION_TARGET        3   /* bitmap-based, the sender receives */
#define DRBD_DECISION_FULL_SOURCE   4
#define DRBD_DECISION_FULL_TARGET   5
#define DRBD_DECISION_MAX           DRBD_DECISION_FULL_TARGET
/* The highest rule number a DECISION names (uuid.h's rules are below) */
#define DRBD_DECISION_RULE_MAX      255

typedef struct DrbdDecision {
    uint32_t outcome;           /* DRBD_DECISION_* */
    uint32_t rule;              /* the rule that decided, for the log */
} DrbdDecision;

typedef struct DrbdSizes {
    uint64_t disk_size;         /* bytes of usable data */
    uint32_t max_epoch_size;
    uint8_t protocol;           /* 'A', 'B' or 'C' */
    uint8_t integrity;          /* data-integrity-alg: DRBD_DIGEST_* */
    uint8_t verify;             /* verify-alg: DRBD_DIGEST_* */
    uint8_t csums;              /* csums-alg: DRBD_DIGEST_* */
} DrbdSizes;

/*
 * STATE, STATE_REQ.  On the wire, the role and the disk state are the
 * DRBD_WIRE_ROLE_* and DRBD_WIRE_DISK_* numbers below, which do not move
 * when qapi/drbd.json's enums change; the codec maps them.
 */
typedef struct DrbdStatePacket {
    DrbdRole role;
    DrbdDiskState disk_state;
    /*
     * STATE_REQ of version 6: the sender's current UUID, or 0 when the
     * packet has none (a shorter STATE_REQ; never in a STATE)
     */
    uint64_t uuid;
} DrbdStatePacket;

/* Bits of DrbdUuidsPacket.flags */
#define DRBD_UUIDS_CRASHED_PRIMARY  (1u << 0)  /* stopped while primary */
#define DRBD_UUIDS_DISCARD_MY_DATA  (1u << 1)  /* the operator said so */
/* version 5: the sender has a primary peer, other than the receiver */
#define DRBD_UUIDS_PRIMARY_PEER     (1u << 2)
#define DRBD_UUIDS_ALL              (DRBD_UUIDS_CRASHED_PRIMARY | \
                                     DRBD_UUIDS_DISCARD_MY_DATA | \
                                     DRBD_UUIDS_PRIMARY_PEER)
/* The highest after-sb policy number a decoder accepts */
#define DRBD_WIRE_AFTER_SB_MAX      15

typedef struct DrbdUuidsPacket {
    uint64_t current;
    uint64_t bitmap;
    uint64_t history[2];
    uint64_t changes;           /* bits set in the sender's bitmap */
    uint32_t flags;             /* DRBD_UUIDS_* */
    uint8_t after_sb[3];        /* after-sb-0pri, -1pri, -2pri (uuid.h) */
} DrbdUuidsPacket;

/* A STATE's role byte */
#define DRBD_WIRE_ROLE_PRIMARY      0
#define DRBD_WIRE_ROLE_SECONDARY    1
#define DRBD_WIRE_ROLE_UNKNOWN      2
#define DRBD_WIRE_ROLE_MAX          2

/* A STATE's disk state byte */
#define DRBD_WIRE_DISK_DISKLESS     0
#define DRBD_WIRE_DISK_ATTACHING    1
#define DRBD_WIRE_DISK_FAILED       2
#define DRBD_WIRE_DISK_INCONSISTENT 3
#define DRBD_WIRE_DISK_OUTDATED     4
#define DRBD_WIRE_DISK_DUNKNOWN     5
#define DRBD_WIRE_DISK_CONSISTENT   6
#define DRBD_WIRE_DISK_UP_TO_DATE   7
#define DRBD_WIRE_DISK_STATE_MAX    7

/* Bits of DrbdDataPacket.flags */
#define DRBD_DP_FUA         (1u << 0)   /* the guest asked for FUA */
/* bit 1 is reserved: a receiver refuses it as an unknown flag */
#define DRBD_DP_MAY_UNMAP   (1u << 2)   /* zeroes: unmapping is allowed */
#define DRBD_DP_ALL         (DRBD_DP_FUA | DRBD_DP_MAY_UNMAP)

/*
 * DATA, ZEROES, DISCARD, RS_DATA, RS_ZEROES and DATA_REPLY carry a
 * request; for DATA, RS_DATA and DATA_REPLY,
 * @bytes of data follow the fixed part and @data points into the buffer
 * that was decoded (it is not copied).
 */
typedef struct DrbdDataPacket {
    uint64_t offset;
    uint64_t id;            /* the sender's cookie, echoed in the ack */
    uint32_t epoch;         /* the epoch the write belongs to */
    uint32_t flags;         /* DRBD_DP_* */
    uint32_t bytes;
    /*
     * Guest writes: how many of the guest writes sent just before this
     * one the guest had not seen complete when it issued it (order.h);
     * RS_DATA, RS_ZEROES and DATA_REPLY: 0
     */
    uint32_t unordered;
    const uint8_t *data;    /* DATA, RS_DATA, DATA_REPLY, else NULL */
    /*
     * DATA, RS_DATA and DATA_REPLY with data-integrity-alg: the digest
     * of the data, DRBD_WIRE_DIGEST_MIN to _MAX bytes; else 0 bytes
     */
    const uint8_t *digest;
    uint32_t digest_len;
} DrbdDataPacket;

/*
 * RECV_ACK, WRITE_ACK, NEG_ACK, OUT_OF_SYNC; DATA_REQUEST (at most
 * DRBD_WIRE_MAX_DATA bytes) and NEG_DREPLY use the same layout
 */
typedef struct DrbdBlockAck {
    uint64_t offset;
    uint64_t id;
    uint32_t bytes;
} DrbdBlockAck;

/* Bits of DrbdBarrier.flags */
#define DRBD_BARRIER_FLUSH  (1u << 0)   /* flush the disk before acking */
#define DRBD_BARRIER_ALL    DRBD_BARRIER_FLUSH

/*
 * BARRIER closes @epoch, in which the sender sent @set_size writes;
 * BARRIER_ACK says that the epoch's @set_size writes are done (and, if
 * the barrier asked, flushed)
 */
typedef struct DrbdBarrier {
    uint32_t epoch;
    uint32_t set_size;
    uint32_t flags;         /* BARRIER only: DRBD_BARRIER_* */
} DrbdBarrier;

/*
 * Digest algorithms, as the wire names them (AUTH_CHALLENGE's HMAC; the
 * data-integrity digest in SIZES).  0 is "none".
 */
#define DRBD_DIGEST_NONE        0
#define DRBD_DIGEST_MD5         1
#define DRBD_DIGEST_SHA1        2
#define DRBD_DIGEST_SHA224      3
#define DRBD_DIGEST_SHA256      4
#define DRBD_DIGEST_SHA384      5
#define DRBD_DIGEST_SHA512      6
#define DRBD_DIGEST_RIPEMD160   7
#define DRBD_DIGEST_CRC32C      8
#define DRBD_DIGEST__MAX        9

/* The name of a DRBD_DIGEST_* value ("unknown" for others) */
const char *drbd_digest_name(uint32_t digest);

/* The nonce of an AUTH_CHALLENGE, and the largest AUTH_RESPONSE digest */
#define DRBD_AUTH_NONCE_SIZE    32
#define DRBD_AUTH_DIGEST_MIN    16
#define DRBD_AUTH_DIGEST_MAX    64

typedef struct DrbdAuthChallenge {
    uint32_t digest;            /* DRBD_DIGEST_*, not NONE or CRC32C */
    uint8_t nonce[DRBD_AUTH_NONCE_SIZE];
} DrbdAuthChallenge;

typedef struct DrbdAuthResponse {
    uint32_t len;
    uint8_t digest[DRBD_AUTH_DIGEST_MAX];
} DrbdAuthResponse;

/*
 * Online verify compares 4 KiB blocks (the out-of-sync bitmap's), up to
 * DRBD_OV_MAX_BLOCKS of them per request: the range of an OV_REQUEST or
 * OV_REPLY starts on a block, and ends on one or at the end of the disk
 * (the gate checks that).  Its digests are one per block, of the
 * verify-alg's size.
 */
#define DRBD_OV_BLOCK           4096
#define DRBD_OV_MAX_BLOCKS      64
#define DRBD_OV_MAX_BYTES       (DRBD_OV_MAX_BLOCKS * DRBD_OV_BLOCK)

/* Bits of DrbdOvPacket.flags: a reply has exactly one of the three */
#define DRBD_OV_DIGESTS     (1u << 0)   /* digests follow */
#define DRBD_OV_RESULT      (1u << 1)   /* reply: a mismatch mask follows */
#define DRBD_OV_SKIPPED     (1u << 2)   /* reply: the target did not look */
#define DRBD_OV_REPLY_KINDS (DRBD_OV_DIGESTS | DRBD_OV_RESULT | \
                             DRBD_OV_SKIPPED)

/*
 * OV_REQUEST asks the peer to verify [@offset, @offset + @bytes); with
 * DRBD_OV_DIGESTS it carries the sender's digests, and the peer compares
 * and answers with a RESULT, else the peer answers with its DIGESTS.
 * Either may answer SKIPPED instead.  @id is the sender's cookie.
 *
 * A checksum-based resync sends the same packet: RS_CSUM carries the
 * sync source's csums-alg DIGESTS of a chunk, RS_CSUM_REPLY the target's
 * RESULT.
 */
typedef struct DrbdOvPacket {
    uint64_t offset;
    uint64_t id;
    uint32_t bytes;
    uint32_t flags;             /* DRBD_OV_* */
    /* DRBD_OV_DIGESTS: one digest of @digest_size bytes per block */
    const uint8_t *digests;
    uint32_t digest_size;
    /* DRBD_OV_RESULT: bit i set if block i differs */
    uint64_t mismatch;
} DrbdOvPacket;

/* The number of verify blocks in a range of @bytes */
static inline uint32_t drbd_ov_blocks(uint32_t bytes)
{
    return DIV_ROUND_UP(bytes, DRBD_OV_BLOCK);
}

/* The answer in a STATE_REPLY */
#define DRBD_STATE_REPLY_GRANTED    0
#define DRBD_STATE_REPLY_REFUSED    1
/* Version 6: the asking node is behind a generation the answerer knows */
#define DRBD_STATE_REPLY_BEHIND     2
/* Version 6: another peer of the answering node is primary */
#define DRBD_STATE_REPLY_PRIMARY_PEER 3
#define DRBD_STATE_REPLY_MAX        DRBD_STATE_REPLY_PRIMARY_PEER

const char *drbd_cmd_name(uint16_t cmd);

/*
 * Encoders append one whole packet (header and payload) to @out.  They
 * cannot fail: what they are given comes from ourselves.
 */
void drbd_wire_put_hello(GByteArray *out, const DrbdHello *h);
void drbd_wire_put_sizes(GByteArray *out, const DrbdSizes *s);
void drbd_wire_put_state(GByteArray *out, const DrbdStatePacket *s);
/*
 * STATE_REQ has STATE's payload, followed (version 6, @s->uuid not 0) by
 * the sender's current UUID
 */
void drbd_wire_put_state_req(GByteArray *out, const DrbdStatePacket *s);
void drbd_wire_put_state_reply(GByteArray *out, uint32_t result);
void drbd_wire_put_new_uuid(GByteArray *out, uint64_t uuid);
void drbd_wire_put_refuse(GByteArray *out, const DrbdRefuse *r);
void drbd_wire_put_decision(GByteArray *out, const DrbdDecision *d);
void drbd_wire_put_resize(GByteArray *out, uint64_t disk_size);
/* @result: 0, or the errno (positive, below 4096) of a failed resize */
void drbd_wire_put_resize_reply(GByteArray *out, uint32_t result);
/*
 * @cmd is DATA, ZEROES, DISCARD, RS_DATA, RS_ZEROES or DATA_REPLY; data
 * is appended for DATA, RS_DATA and DATA_REPLY only (@p->bytes of it
 * from @p->data)
 */
void drbd_wire_put_data(GByteArray *out, uint16_t cmd,
                        const DrbdDataPacket *p);
/*
 * Only the header, fixed part and digest of a DATA/RS_DATA packet, for a
 * sender that writes the data from a QEMUIOVector itself
 */
void drbd_wire_put_data_header(GByteArray *out, uint16_t cmd,
                               const DrbdDataPacket *p);
/*
 * @cmd is RECV_ACK, WRITE_ACK, NEG_ACK, OUT_OF_SYNC, DATA_REQUEST or
 * NEG_DREPLY
 */
void drbd_wire_put_block_ack(GByteArray *out, uint16_t cmd,
                             const DrbdBlockAck *a);
/* @cmd is BARRIER or BARRIER_ACK */
void drbd_wire_put_barrier(GByteArray *out, uint16_t cmd,
                           const DrbdBarrier *b);
/* @cmd is PING, PING_ACK or RS_DONE: a header and no payload */
void drbd_wire_put_empty(GByteArray *out, uint16_t cmd);
void drbd_wire_put_uuids(GByteArray *out, const DrbdUuidsPacket *u);
/* A BITMAP packet carrying the @len bytes of an encoded chunk */
void drbd_wire_put_bitmap(GByteArray *out, const uint8_t *chunk, size_t len);
void drbd_wire_put_auth_challenge(GByteArray *out,
                                  const DrbdAuthChallenge *c);
void drbd_wire_put_auth_response(GByteArray *out,
                                 const DrbdAuthResponse *r);
/*
 * @cmd is OV_REQUEST or OV_REPLY; or RS_CSUM (with DIGESTS) or
 * RS_CSUM_REPLY (with a RESULT), which use the same packet
 */
void drbd_wire_put_ov(GByteArray *out, uint16_t cmd, const DrbdOvPacket *p);

/*
 * Decode a header from exactly DRBD_WIRE_HEADER_SIZE bytes.  Fails on a
 * wrong magic, an unknown command, a non-zero reserved field, and a
 * length that the command can never have.
 */
int drbd_wire_get_header(const uint8_t *buf, DrbdHeader *h, Error **errp);

/*
 * Payload decoders: @buf holds exactly @len bytes of payload of a packet
 * whose header said @cmd.  A length that does not fit the command, a
 * field out of its range, or a request that reaches beyond @disk_size
 * (where given; 0 disables that check) fails with -EINVAL and @errp set.
 */
int drbd_wire_get_hello(const uint8_t *buf, size_t len, DrbdHello *h,
                        Error **errp);
int drbd_wire_get_sizes(const uint8_t *buf, size_t len, DrbdSizes *s,
                        Error **errp);
int drbd_wire_get_uuids(const uint8_t *buf, size_t len, DrbdUuidsPacket *u,
                        Error **errp);
int drbd_wire_get_state(const uint8_t *buf, size_t len, DrbdStatePacket *s,
                        Error **errp);
/* A STATE_REQ: STATE's payload, and the version 6 UUID if there is one */
int drbd_wire_get_state_req(const uint8_t *buf, size_t len,
                            DrbdStatePacket *s, Error **errp);
int drbd_wire_get_state_reply(const uint8_t *buf, size_t len,
                              uint32_t *result, Error **errp);
/* A NEW_UUID: refuses a UUID that names no data (0, "just created") */
int drbd_wire_get_new_uuid(const uint8_t *buf, size_t len, uint64_t *uuid,
                           Error **errp);
/* A RESIZE: a size that is a multiple of 512, and not above 4 PiB */
int drbd_wire_get_resize(const uint8_t *buf, size_t len, uint64_t *disk_size,
                         Error **errp);
/* A RESIZE_REPLY: 0, or an errno below 4096 */
int drbd_wire_get_resize_reply(const uint8_t *buf, size_t len,
                               uint32_t *result, Error **errp);
/* A REFUSE: a reason it knows, and a node id of 0 to 31 */
int drbd_wire_get_refuse(const uint8_t *buf, size_t len, DrbdRefuse *r,
                         Error **errp);
/* A DECISION: an outcome it knows, and a rule of 0 to 255 */
int drbd_wire_get_decision(const uint8_t *buf, size_t len, DrbdDecision *d,
                           Error **errp);
int drbd_wire_get_data(uint16_t cmd, const uint8_t *buf, size_t len,
                       uint64_t disk_size, DrbdDataPacket *p, Error **errp);
int drbd_wire_get_block_ack(uint16_t cmd, const uint8_t *buf, size_t len,
                            uint64_t disk_size, DrbdBlockAck *a,
                            Error **errp);
int drbd_wire_get_barrier(uint16_t cmd, const uint8_t *buf, size_t len,
                          DrbdBarrier *b, Error **errp);
int drbd_wire_get_auth_challenge(const uint8_t *buf, size_t len,
                                 DrbdAuthChallenge *c, Error **errp);
int drbd_wire_get_auth_response(const uint8_t *buf, size_t len,
                                DrbdAuthResponse *r, Error **errp);
/*
 * @digest_size is the size of the digest of the packet's algorithm
 * (verify-alg for OV_*, csums-alg for RS_CSUM*), 0 if the node has none
 * (then a packet with digests is refused)
 */
int drbd_wire_get_ov(uint16_t cmd, const uint8_t *buf, size_t len,
                     uint64_t disk_size, uint32_t digest_size,
                     DrbdOvPacket *p, Error **errp);

#endif /* BLOCK_DRBD_WIRE_H */
