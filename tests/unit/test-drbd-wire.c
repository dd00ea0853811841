/*
 * drbd packet codec: what is encoded decodes to the same, and what the
 * network may send (bad fields, truncated or mangled packets) is refused
 * without reading out of bounds
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "qemu/bswap.h"
#include "qemu/cutils.h"
#include "../../block/drbd/rle.h"
#include "../../block/drbd/uuid.h"
#include "../../block/drbd/wire.h"

/*
 * The layout as docs/interop/drbd-protocol.rst describes it, written out
 * again here so that the tests check the encoder against the document.
 */
#define HDR             DRBD_WIRE_HEADER_SIZE
#define HELLO_NAME_LEN  16
#define HELLO_NAME      18
#define SIZES_SIZE      16
#define SIZES_PROTOCOL  12
#define SIZES_INTEGRITY 13
#define SIZES_VERIFY    14
#define SIZES_CSUMS     15
#define STATE_SIZE      4
#define DATA_OFFSET     0
#define DATA_EPOCH      16
#define DATA_FLAGS      20
#define DATA_BYTES      24
#define DATA_UNORDERED  28
#define DATA_SIZE       32
#define ACK_OFFSET      0
#define ACK_BYTES       16
#define ACK_PAD         20
#define ACK_SIZE        24
#define BARRIER_FLAGS   8
#define BARRIER_SIZE    12
#define AUTH_CHALLENGE_DIGEST   0
#define AUTH_CHALLENGE_NONCE    4
#define AUTH_CHALLENGE_SIZE     36
#define OV_OFFSET       0
#define OV_ID           8
#define OV_BYTES        16
#define OV_FLAGS        20
#define OV_SIZE         24
#define OV_RESULT_SIZE  (OV_SIZE + 8)
#define OV_MAX_SIZE     (OV_SIZE + 64 * 64)

#define DISK_SIZE       (64 * MiB)

/*
 * Reserved: command 14 (DRBD's RS_REQUEST) and bit 1 of the flags of a
 * request (a flush flag, once): a receiver refuses both
 */
#define CMD_RESERVED    14
#define DP_RESERVED     (1u << 1)

/* The lowest HELLO flag that means nothing yet */
#define HELLO_RESERVED  (1u << 3)

/* The lowest OV flag that means nothing yet */
#define OV_RESERVED     (1u << 3)

/*
 * The verify-alg digest size that the generic tests (truncation,
 * mutation) decode OV packets with: sha256's
 */
#define OV_DIGEST       32

/*
 * ... and the csums-alg digest size they decode RS_CSUM with: md5's, so
 * that a decoder that took the one for the other would show
 */
#define CSUM_DIGEST     16

/* The id of the OV packets the tests make */
#define OV_COOKIE       0x0123456789abcdefULL

/* The lengths of the digests of data-integrity-alg's algorithms */
static const uint32_t digest_lens[] = { 4, 16, 20, 28, 32, 48, 64 };

/* The digests that can key an HMAC, and those that cannot */
static const uint32_t hmac_digests[] = {
    DRBD_DIGEST_MD5, DRBD_DIGEST_SHA1, DRBD_DIGEST_SHA224,
    DRBD_DIGEST_SHA256, DRBD_DIGEST_SHA384, DRBD_DIGEST_SHA512,
    DRBD_DIGEST_RIPEMD160,
};
static const uint32_t non_hmac_digests[] = {
    DRBD_DIGEST_NONE, DRBD_DIGEST_CRC32C, DRBD_DIGEST__MAX, 0x100,
    0x80000000, UINT32_MAX,
};

static const uint16_t block_ack_cmds[] = {
    DRBD_CMD_RECV_ACK, DRBD_CMD_WRITE_ACK, DRBD_CMD_NEG_ACK,
    DRBD_CMD_OUT_OF_SYNC,
};

static const uint16_t empty_cmds[] = {
    DRBD_CMD_PING, DRBD_CMD_PING_ACK, DRBD_CMD_RS_DONE,
};

/* Assert that a decoder failed as it must: -EINVAL and an Error */
static void assert_failed(int ret, Error **errp)
{
    g_assert_cmpint(ret, ==, -EINVAL);
    g_assert_nonnull(*errp);
    g_assert_cmpstr(error_get_pretty(*errp), !=, "");
    error_free(*errp);
    *errp = NULL;
}

/* Likewise, with the message that says what is wrong */
static void assert_failed_with(int ret, Error **errp, const char *msg)
{
    g_assert_cmpint(ret, ==, -EINVAL);
    g_assert_nonnull(*errp);
    g_assert_cmpstr(error_get_pretty(*errp), ==, msg);
    error_free(*errp);
    *errp = NULL;
}

static void make_header(uint8_t *buf, uint32_t magic, uint16_t cmd,
                        uint16_t reserved, uint32_t length)
{
    stl_be_p(buf, magic);
    stw_be_p(buf + 4, cmd);
    stw_be_p(buf + 6, reserved);
    stl_be_p(buf + 8, length);
}

/* Decode the header of the packet in @pkt and check it against @cmd */
static const uint8_t *check_header(GByteArray *pkt, uint16_t cmd)
{
    DrbdHeader h;

    g_assert_cmpuint(pkt->len, >=, HDR);
    g_assert_cmpint(drbd_wire_get_header(pkt->data, &h, &error_abort), ==, 0);
    g_assert_cmpuint(h.cmd, ==, cmd);
    g_assert_cmpuint(h.length, ==, pkt->len - HDR);
    return pkt->data + HDR;
}

static void fill_pattern(uint8_t *buf, size_t len, uint8_t seed)
{
    size_t i;

    for (i = 0; i < len; i++) {
        buf[i] = seed + i * 7 + (i >> 8);
    }
}

/*
 * A DATA, RS_DATA, ZEROES or DISCARD packet; DATA and RS_DATA carry a
 * pattern as data and, if @digest_len is not 0, a digest of that many
 * bytes (a pattern too: the codec does not compute digests)
 */
static GByteArray *digest_packet(uint16_t cmd, uint64_t offset,
                                 uint32_t bytes, uint32_t flags,
                                 uint32_t digest_len, uint8_t **datap)
{
    GByteArray *pkt = g_byte_array_new();
    uint8_t digest[DRBD_WIRE_DIGEST_MAX];
    uint8_t *data = NULL;
    DrbdDataPacket p = {
        .offset = offset,
        .id = 0x0123456789abcdefULL,
        .epoch = 42,
        .flags = flags,
        .bytes = bytes,
        /* resync data must say 0; guest writes round-trip any value */
        .unordered = cmd == DRBD_CMD_RS_DATA ||
                     cmd == DRBD_CMD_RS_ZEROES ||
                     cmd == DRBD_CMD_DATA_REPLY ? 0 : 31,
    };

    if (cmd == DRBD_CMD_DATA_REPLY) {
        /* Read data has no epoch and no flags */
        p.epoch = 0;
        p.flags = 0;
    }
    if (cmd == DRBD_CMD_DATA || cmd == DRBD_CMD_RS_DATA ||
        cmd == DRBD_CMD_DATA_REPLY) {
        data = g_malloc(bytes);
        fill_pattern(data, bytes, offset / 512);
        p.data = data;
        if (digest_len) {
            g_assert_cmpuint(digest_len, <=, sizeof(digest));
            fill_pattern(digest, digest_len, 0xd0 + digest_len);
            p.digest = digest;
            p.digest_len = digest_len;
        }
    } else {
        g_assert_cmpuint(digest_len, ==, 0);
    }
    drbd_wire_put_data(pkt, cmd, &p);
    if (datap) {
        *datap = data;
    } else {
        g_free(data);
    }
    return pkt;
}

static GByteArray *data_packet(uint16_t cmd, uint64_t offset, uint32_t bytes,
                               uint32_t flags, uint8_t **datap)
{
    return digest_packet(cmd, offset, bytes, flags, 0, datap);
}

/* The digests an OV packet of @bytes carries: a pattern, one per block */
static uint8_t *ov_digests(uint32_t bytes, uint32_t digest_size)
{
    size_t len = (size_t)drbd_ov_blocks(bytes) * digest_size;
    uint8_t *digests = g_malloc(len);

    fill_pattern(digests, len, 0x40 + digest_size);
    return digests;
}

/*
 * An OV_REQUEST, OV_REPLY, RS_CSUM or RS_CSUM_REPLY of [@offset, @offset +
 * @bytes) with @flags:
 * with DRBD_OV_DIGESTS, ov_digests() of @digest_size bytes each; with
 * DRBD_OV_RESULT, the mask @mismatch
 */
static GByteArray *ov_packet(uint16_t cmd, uint64_t offset, uint32_t bytes,
                             uint32_t flags, uint32_t digest_size,
                             uint64_t mismatch)
{
    GByteArray *pkt = g_byte_array_new();
    g_autofree uint8_t *digests = NULL;
    DrbdOvPacket p = {
        .offset = offset, .id = OV_COOKIE, .bytes = bytes, .flags = flags,
        .mismatch = mismatch,
    };

    if (flags & DRBD_OV_DIGESTS) {
        digests = ov_digests(bytes, digest_size);
        p.digests = digests;
        p.digest_size = digest_size;
    }
    drbd_wire_put_ov(pkt, cmd, &p);
    return pkt;
}

/*
 * Decode the payload @buf of @len bytes as @cmd says, whichever decoder
 * that takes, and check that whatever it accepted is within bounds.
 */
static int decode_payload(uint16_t cmd, const uint8_t *buf, size_t len,
                          uint64_t disk_size, Error **errp)
{
    int ret;

    switch (cmd) {
    case DRBD_CMD_HELLO: {
        DrbdHello h;

        ret = drbd_wire_get_hello(buf, len, &h, errp);
        if (ret == 0) {
            size_t name_len = strlen(h.resource);

            g_assert_cmpuint(name_len, >=, 1);
            g_assert_cmpuint(name_len, <=, DRBD_RESOURCE_NAME_MAX);
            g_assert_cmpuint(HELLO_NAME + name_len, ==, len);
            g_assert_cmpmem(h.resource, name_len, buf + HELLO_NAME, name_len);
            g_assert_cmpuint(h.version_min, >=, 1);
            g_assert_cmpuint(h.version_min, <=, h.version_max);
            g_assert_cmpuint(h.flags & ~DRBD_HELLO_ALL, ==, 0);
        }
        return ret;
    }
    case DRBD_CMD_SIZES: {
        DrbdSizes s;

        ret = drbd_wire_get_sizes(buf, len, &s, errp);
        if (ret == 0) {
            g_assert_cmpuint(len, ==, SIZES_SIZE);
            g_assert_true(s.protocol == 'A' || s.protocol == 'B' ||
                          s.protocol == 'C');
            g_assert_cmpuint(s.disk_size, <=, INT64_MAX);
            g_assert_cmpuint(s.integrity, <, DRBD_DIGEST__MAX);
            g_assert_cmpuint(s.verify, <, DRBD_DIGEST__MAX);
            g_assert_cmpuint(s.csums, <, DRBD_DIGEST__MAX);
        }
        return ret;
    }
    case DRBD_CMD_NEW_UUID: {
        uint64_t uuid;

        ret = drbd_wire_get_new_uuid(buf, len, &uuid, errp);
        if (ret == 0) {
            g_assert_cmpuint(len, ==, 8);
            g_assert_cmpuint(uuid & ~DRBD_UUID_PRIMARY_FLAG, !=, 0);
            g_assert_cmpuint(uuid & ~DRBD_UUID_PRIMARY_FLAG, !=,
                             DRBD_UUID_JUST_CREATED);
        }
        return ret;
    }
    case DRBD_CMD_RESIZE: {
        uint64_t size;

        ret = drbd_wire_get_resize(buf, len, &size, errp);
        if (ret == 0) {
            g_assert_cmpuint(len, ==, 8);
            g_assert_cmpuint(size, >, 0);
            g_assert_cmpuint(size % DRBD_WIRE_ALIGN, ==, 0);
        }
        return ret;
    }
    case DRBD_CMD_RESIZE_REPLY: {
        uint32_t result;

        ret = drbd_wire_get_resize_reply(buf, len, &result, errp);
        if (ret == 0) {
            g_assert_cmpuint(len, ==, 4);
            g_assert_cmpuint(result, <, 4096);
        }
        return ret;
    }
    case DRBD_CMD_REFUSE: {
        DrbdRefuse r;

        ret = drbd_wire_get_refuse(buf, len, &r, errp);
        if (ret == 0) {
            g_assert_cmpuint(len, ==, 8);
            g_assert_cmpuint(r.reason, >=, 1);
            g_assert_cmpuint(r.reason, <=, DRBD_REFUSE_MAX);
            g_assert_cmpuint(r.node_id, <=, DRBD_WIRE_NODE_ID_MAX);
        }
        return ret;
    }
    case DRBD_CMD_DECISION: {
        DrbdDecision d;

        ret = drbd_wire_get_decision(buf, len, &d, errp);
        if (ret == 0) {
            g_assert_cmpuint(len, ==, 8);
            g_assert_cmpuint(d.outcome, <=, DRBD_DECISION_MAX);
            g_assert_cmpuint(d.rule, <=, DRBD_DECISION_RULE_MAX);
        }
        return ret;
    }
    case DRBD_CMD_STATE_REPLY: {
        uint32_t result;

        ret = drbd_wire_get_state_reply(buf, len, &result, errp);
        if (ret == 0) {
            g_assert_cmpuint(len, ==, 4);
            g_assert_cmpuint(result, <=, DRBD_STATE_REPLY_REFUSED);
        }
        return ret;
    }
    case DRBD_CMD_STATE:
    case DRBD_CMD_STATE_REQ: {
        DrbdStatePacket s;

        ret = drbd_wire_get_state(buf, len, &s, errp);
        if (ret == 0) {
            g_assert_cmpuint(len, ==, STATE_SIZE);
            g_assert_cmpuint(s.role, <, DRBD_ROLE__MAX);
            g_assert_cmpuint(s.disk_state, <, DRBD_DISK_STATE__MAX);
        }
        return ret;
    }
    case DRBD_CMD_DATA:
    case DRBD_CMD_RS_DATA:
    case DRBD_CMD_ZEROES:
    case DRBD_CMD_DISCARD:
    case DRBD_CMD_RS_ZEROES:
    case DRBD_CMD_DATA_REPLY: {
        bool has_data = cmd == DRBD_CMD_DATA || cmd == DRBD_CMD_RS_DATA ||
                        cmd == DRBD_CMD_DATA_REPLY;
        DrbdDataPacket p;

        ret = drbd_wire_get_data(cmd, buf, len, disk_size, &p, errp);
        if (ret == 0) {
            g_assert_cmpuint(p.bytes, >, 0);
            g_assert_cmpuint(p.bytes % DRBD_WIRE_ALIGN, ==, 0);
            g_assert_cmpuint(p.offset % DRBD_WIRE_ALIGN, ==, 0);
            g_assert_cmpuint(p.offset, <=, INT64_MAX - p.bytes);
            if (disk_size) {
                g_assert_cmpuint(p.offset + p.bytes, <=, disk_size);
            }
            g_assert_cmpuint(p.flags & ~DRBD_DP_ALL, ==, 0);
            if (cmd == DRBD_CMD_DATA_REPLY) {
                g_assert_cmpuint(p.epoch, ==, 0);
                g_assert_cmpuint(p.flags, ==, 0);
                g_assert_cmpuint(p.unordered, ==, 0);
            }
            if (has_data) {
                g_assert_cmpuint(p.bytes, <=, DRBD_WIRE_MAX_DATA);
                g_assert_cmpuint(len, ==, DATA_SIZE + p.digest_len + p.bytes);
                if (p.digest_len) {
                    g_assert_cmpuint(p.digest_len, >=, DRBD_WIRE_DIGEST_MIN);
                    g_assert_cmpuint(p.digest_len, <=, DRBD_WIRE_DIGEST_MAX);
                    g_assert_true(p.digest == buf + DATA_SIZE);
                } else {
                    g_assert_null(p.digest);
                }
                g_assert_true(p.data == buf + DATA_SIZE + p.digest_len);
            } else {
                g_assert_cmpuint(p.bytes, <=, DRBD_WIRE_MAX_ZEROES);
                g_assert_cmpuint(len, ==, DATA_SIZE);
                g_assert_null(p.data);
                g_assert_null(p.digest);
                g_assert_cmpuint(p.digest_len, ==, 0);
            }
        }
        return ret;
    }
    case DRBD_CMD_RECV_ACK:
    case DRBD_CMD_WRITE_ACK:
    case DRBD_CMD_NEG_ACK:
    case DRBD_CMD_OUT_OF_SYNC:
    case DRBD_CMD_DATA_REQUEST:
    case DRBD_CMD_NEG_DREPLY: {
        DrbdBlockAck a;

        ret = drbd_wire_get_block_ack(cmd, buf, len, disk_size, &a, errp);
        if (ret == 0) {
            g_assert_cmpuint(len, ==, ACK_SIZE);
            g_assert_cmpuint(a.bytes, >, 0);
            g_assert_cmpuint(a.bytes, <=, DRBD_WIRE_MAX_ZEROES);
            if (cmd == DRBD_CMD_DATA_REQUEST ||
                cmd == DRBD_CMD_NEG_DREPLY) {
                g_assert_cmpuint(a.bytes, <=, DRBD_WIRE_MAX_DATA);
            }
            g_assert_cmpuint(a.bytes % DRBD_WIRE_ALIGN, ==, 0);
            g_assert_cmpuint(a.offset % DRBD_WIRE_ALIGN, ==, 0);
            g_assert_cmpuint(a.offset, <=, INT64_MAX - a.bytes);
            if (disk_size) {
                g_assert_cmpuint(a.offset + a.bytes, <=, disk_size);
            }
        }
        return ret;
    }
    case DRBD_CMD_BARRIER:
    case DRBD_CMD_BARRIER_ACK: {
        DrbdBarrier b;

        ret = drbd_wire_get_barrier(cmd, buf, len, &b, errp);
        if (ret == 0) {
            g_assert_cmpuint(len, ==, BARRIER_SIZE);
            g_assert_cmpuint(b.flags & ~(cmd == DRBD_CMD_BARRIER ?
                                         DRBD_BARRIER_ALL : 0), ==, 0);
        }
        return ret;
    }
    case DRBD_CMD_AUTH_CHALLENGE: {
        DrbdAuthChallenge c;

        ret = drbd_wire_get_auth_challenge(buf, len, &c, errp);
        if (ret == 0) {
            g_assert_cmpuint(len, ==, AUTH_CHALLENGE_SIZE);
            g_assert_cmpuint(c.digest, >=, DRBD_DIGEST_MD5);
            g_assert_cmpuint(c.digest, <=, DRBD_DIGEST_RIPEMD160);
            g_assert_cmpmem(c.nonce, DRBD_AUTH_NONCE_SIZE,
                            buf + AUTH_CHALLENGE_NONCE, DRBD_AUTH_NONCE_SIZE);
        }
        return ret;
    }
    case DRBD_CMD_AUTH_RESPONSE: {
        DrbdAuthResponse r;

        ret = drbd_wire_get_auth_response(buf, len, &r, errp);
        if (ret == 0) {
            g_assert_cmpuint(r.len, ==, len);
            g_assert_cmpuint(r.len, >=, DRBD_AUTH_DIGEST_MIN);
            g_assert_cmpuint(r.len, <=, DRBD_AUTH_DIGEST_MAX);
            g_assert_cmpmem(r.digest, r.len, buf, len);
        }
        return ret;
    }
    case DRBD_CMD_OV_REQUEST:
    case DRBD_CMD_OV_REPLY:
    case DRBD_CMD_RS_CSUM:
    case DRBD_CMD_RS_CSUM_REPLY: {
        /* RS_CSUM's digests are csums-alg's, the OV packets' verify-alg's */
        bool csum = cmd == DRBD_CMD_RS_CSUM || cmd == DRBD_CMD_RS_CSUM_REPLY;
        uint32_t dsize = csum ? CSUM_DIGEST : OV_DIGEST;
        DrbdOvPacket p;
        uint32_t blocks;

        ret = drbd_wire_get_ov(cmd, buf, len, disk_size, dsize, &p, errp);
        if (ret == 0) {
            blocks = drbd_ov_blocks(p.bytes);
            g_assert_cmpuint(p.bytes, >, 0);
            g_assert_cmpuint(p.bytes, <=, DRBD_OV_MAX_BYTES);
            g_assert_cmpuint(p.bytes % DRBD_WIRE_ALIGN, ==, 0);
            g_assert_cmpuint(p.offset % DRBD_WIRE_ALIGN, ==, 0);
            g_assert_cmpuint(p.offset, <=, INT64_MAX - p.bytes);
            if (disk_size) {
                g_assert_cmpuint(p.offset + p.bytes, <=, disk_size);
            }
            g_assert_cmpuint(blocks, >=, 1);
            g_assert_cmpuint(blocks, <=, DRBD_OV_MAX_BLOCKS);
            if (cmd == DRBD_CMD_OV_REQUEST) {
                g_assert_cmpuint(p.flags & ~DRBD_OV_DIGESTS, ==, 0);
            } else if (cmd == DRBD_CMD_OV_REPLY) {
                g_assert_true(p.flags == DRBD_OV_DIGESTS ||
                              p.flags == DRBD_OV_RESULT ||
                              p.flags == DRBD_OV_SKIPPED);
            } else {
                /* an RS_CSUM carries digests, its reply a result */
                g_assert_cmpuint(p.flags, ==, cmd == DRBD_CMD_RS_CSUM ?
                                 DRBD_OV_DIGESTS : DRBD_OV_RESULT);
            }
            if (p.flags & DRBD_OV_DIGESTS) {
                g_assert_cmpuint(p.digest_size, ==, dsize);
                g_assert_true(p.digests == buf + OV_SIZE);
                g_assert_cmpuint(len, ==, OV_SIZE + blocks * dsize);
            } else {
                g_assert_null(p.digests);
                g_assert_cmpuint(p.digest_size, ==, 0);
            }
            if (p.flags & DRBD_OV_RESULT) {
                g_assert_cmpuint(len, ==, OV_RESULT_SIZE);
                if (blocks < 64) {
                    g_assert_cmpuint(p.mismatch >> blocks, ==, 0);
                }
            } else {
                g_assert_cmpuint(p.mismatch, ==, 0);
            }
            if (!(p.flags & (DRBD_OV_DIGESTS | DRBD_OV_RESULT))) {
                g_assert_cmpuint(len, ==, OV_SIZE);
            }
        }
        return ret;
    }
    default:
        /* PING, PING_ACK, RS_DONE: nothing to decode but the length */
        if (len) {
            error_setg(errp, "%s packet: not empty", drbd_cmd_name(cmd));
            return -EINVAL;
        }
        return 0;
    }
}

/* One valid packet of each kind and then some */
static GPtrArray *valid_packets(void)
{
    GPtrArray *pkts = g_ptr_array_new_with_free_func(
        (GDestroyNotify)g_byte_array_unref);
    DrbdHello hello = {
        .version_min = 1, .version_max = 3, .node_id = 7,
        .flags = DRBD_HELLO_META_CHANNEL, .resource = "r0",
    };
    DrbdSizes sizes = {
        .disk_size = DISK_SIZE, .max_epoch_size = 2048, .protocol = 'C',
    };
    DrbdStatePacket state = {
        .role = DRBD_ROLE_SECONDARY, .disk_state = DRBD_DISK_STATE_DUNKNOWN,
    };
    DrbdBlockAck ack = { .offset = 8192, .id = 99, .bytes = 4096 };
    DrbdBarrier barrier = {
        .epoch = 12, .set_size = 3, .flags = DRBD_BARRIER_FLUSH,
    };
    DrbdAuthChallenge challenge = { .digest = DRBD_DIGEST_SHA256 };
    DrbdAuthResponse response = { .len = DRBD_AUTH_DIGEST_MIN };
    GByteArray *pkt;
    size_t i;

    pkt = g_byte_array_new();
    drbd_wire_put_hello(pkt, &hello);
    g_ptr_array_add(pkts, pkt);

    memset(hello.resource, 'x', DRBD_RESOURCE_NAME_MAX);
    pkt = g_byte_array_new();
    drbd_wire_put_hello(pkt, &hello);
    g_ptr_array_add(pkts, pkt);

    pkt = g_byte_array_new();
    drbd_wire_put_sizes(pkt, &sizes);
    g_ptr_array_add(pkts, pkt);

    pkt = g_byte_array_new();
    drbd_wire_put_state(pkt, &state);
    g_ptr_array_add(pkts, pkt);

    g_ptr_array_add(pkts, data_packet(DRBD_CMD_DATA, 4096, 512,
                                      DRBD_DP_FUA, NULL));
    g_ptr_array_add(pkts, data_packet(DRBD_CMD_DATA, DISK_SIZE - 1024, 1024,
                                      0, NULL));
    g_ptr_array_add(pkts, data_packet(DRBD_CMD_RS_DATA, 0, 512, 0, NULL));
    g_ptr_array_add(pkts, data_packet(DRBD_CMD_ZEROES, 0, 1 * MiB,
                                      DRBD_DP_MAY_UNMAP, NULL));
    g_ptr_array_add(pkts, data_packet(DRBD_CMD_DISCARD, 512, 4096, 0, NULL));
    g_ptr_array_add(pkts, data_packet(DRBD_CMD_RS_ZEROES, 4096, 256 * KiB,
                                      DRBD_DP_MAY_UNMAP, NULL));
    g_ptr_array_add(pkts, data_packet(DRBD_CMD_DATA_REPLY, 8192, 4096, 0,
                                      NULL));
    pkt = g_byte_array_new();
    drbd_wire_put_block_ack(pkt, DRBD_CMD_DATA_REQUEST, &ack);
    g_ptr_array_add(pkts, pkt);
    pkt = g_byte_array_new();
    drbd_wire_put_block_ack(pkt, DRBD_CMD_NEG_DREPLY, &ack);
    g_ptr_array_add(pkts, pkt);

    for (i = 0; i < ARRAY_SIZE(block_ack_cmds); i++) {
        pkt = g_byte_array_new();
        drbd_wire_put_block_ack(pkt, block_ack_cmds[i], &ack);
        g_ptr_array_add(pkts, pkt);
    }

    pkt = g_byte_array_new();
    drbd_wire_put_barrier(pkt, DRBD_CMD_BARRIER, &barrier);
    g_ptr_array_add(pkts, pkt);

    barrier.set_size = 17;
    barrier.flags = 0;
    pkt = g_byte_array_new();
    drbd_wire_put_barrier(pkt, DRBD_CMD_BARRIER_ACK, &barrier);
    g_ptr_array_add(pkts, pkt);

    for (i = 0; i < ARRAY_SIZE(empty_cmds); i++) {
        pkt = g_byte_array_new();
        drbd_wire_put_empty(pkt, empty_cmds[i]);
        g_ptr_array_add(pkts, pkt);
    }

    pkt = g_byte_array_new();
    drbd_wire_put_refuse(pkt, &(DrbdRefuse) {
        .reason = DRBD_REFUSE_RESOURCE, .node_id = 3,
    });
    g_ptr_array_add(pkts, pkt);

    pkt = g_byte_array_new();
    drbd_wire_put_decision(pkt, &(DrbdDecision) {
        .outcome = DRBD_DECISION_FULL_TARGET, .rule = 60,
    });
    g_ptr_array_add(pkts, pkt);

    pkt = g_byte_array_new();
    drbd_wire_put_resize(pkt, 3ULL << 30);
    g_ptr_array_add(pkts, pkt);
    pkt = g_byte_array_new();
    drbd_wire_put_resize_reply(pkt, ENOSPC);
    g_ptr_array_add(pkts, pkt);

    hello.flags = DRBD_HELLO_ALL;
    pkt = g_byte_array_new();
    drbd_wire_put_hello(pkt, &hello);
    g_ptr_array_add(pkts, pkt);

    sizes.integrity = DRBD_DIGEST_CRC32C;
    pkt = g_byte_array_new();
    drbd_wire_put_sizes(pkt, &sizes);
    g_ptr_array_add(pkts, pkt);

    memset(challenge.nonce, 0x5a, sizeof(challenge.nonce));
    pkt = g_byte_array_new();
    drbd_wire_put_auth_challenge(pkt, &challenge);
    g_ptr_array_add(pkts, pkt);

    /* The shortest answer: a longer one's prefixes are answers too */
    memset(response.digest, 0xa5, sizeof(response.digest));
    pkt = g_byte_array_new();
    drbd_wire_put_auth_response(pkt, &response);
    g_ptr_array_add(pkts, pkt);

    sizes.verify = DRBD_DIGEST_SHA256;
    pkt = g_byte_array_new();
    drbd_wire_put_sizes(pkt, &sizes);
    g_ptr_array_add(pkts, pkt);

    /*
     * Online verify: a request with digests and one without, and a reply
     * of each kind; the last request ends at the end of the disk
     */
    g_ptr_array_add(pkts, ov_packet(DRBD_CMD_OV_REQUEST, 0, 4096, 0, 0, 0));
    g_ptr_array_add(pkts, ov_packet(DRBD_CMD_OV_REQUEST, 1 * MiB,
                                    DRBD_OV_MAX_BYTES, DRBD_OV_DIGESTS,
                                    OV_DIGEST, 0));
    g_ptr_array_add(pkts, ov_packet(DRBD_CMD_OV_REQUEST, DISK_SIZE - 8192,
                                    8192, DRBD_OV_DIGESTS, OV_DIGEST, 0));
    g_ptr_array_add(pkts, ov_packet(DRBD_CMD_OV_REPLY, DISK_SIZE - 12288,
                                    12288, DRBD_OV_DIGESTS, OV_DIGEST, 0));
    g_ptr_array_add(pkts, ov_packet(DRBD_CMD_OV_REPLY, 8192, 8192,
                                    DRBD_OV_RESULT, 0, 0x2));
    g_ptr_array_add(pkts, ov_packet(DRBD_CMD_OV_REPLY, 0, DRBD_OV_MAX_BYTES,
                                    DRBD_OV_RESULT, 0, UINT64_MAX));
    g_ptr_array_add(pkts, ov_packet(DRBD_CMD_OV_REPLY, 4096, 4096,
                                    DRBD_OV_SKIPPED, 0, 0));

    sizes.csums = DRBD_DIGEST_MD5;
    pkt = g_byte_array_new();
    drbd_wire_put_sizes(pkt, &sizes);
    g_ptr_array_add(pkts, pkt);

    /*
     * Checksum-based resync: the digests of a whole chunk, of one block
     * and of the last chunk of the disk, and replies naming none of the
     * blocks, some and all
     */
    g_ptr_array_add(pkts, ov_packet(DRBD_CMD_RS_CSUM, 0, DRBD_OV_MAX_BYTES,
                                    DRBD_OV_DIGESTS, CSUM_DIGEST, 0));
    g_ptr_array_add(pkts, ov_packet(DRBD_CMD_RS_CSUM, 4096, 4096,
                                    DRBD_OV_DIGESTS, CSUM_DIGEST, 0));
    g_ptr_array_add(pkts, ov_packet(DRBD_CMD_RS_CSUM, DISK_SIZE - 12288,
                                    12288, DRBD_OV_DIGESTS, CSUM_DIGEST, 0));
    g_ptr_array_add(pkts, ov_packet(DRBD_CMD_RS_CSUM_REPLY, 0,
                                    DRBD_OV_MAX_BYTES, DRBD_OV_RESULT, 0, 0));
    g_ptr_array_add(pkts, ov_packet(DRBD_CMD_RS_CSUM_REPLY, DISK_SIZE - 12288,
                                    12288, DRBD_OV_RESULT, 0, 0x5));
    g_ptr_array_add(pkts, ov_packet(DRBD_CMD_RS_CSUM_REPLY, 1 * MiB,
                                    DRBD_OV_MAX_BYTES, DRBD_OV_RESULT, 0,
                                    UINT64_MAX));

    return pkts;
}

/*
 * Valid packets whose prefixes may be valid too, so that they are no use
 * to test_truncation(): answers longer than the shortest, and data with
 * a digest, whose length is what the payload leaves beside the data
 */
static void add_variable_packets(GPtrArray *pkts)
{
    DrbdAuthResponse response = { .len = DRBD_AUTH_DIGEST_MAX };
    GByteArray *pkt;
    size_t i;

    memset(response.digest, 0x3c, sizeof(response.digest));
    pkt = g_byte_array_new();
    drbd_wire_put_auth_response(pkt, &response);
    g_ptr_array_add(pkts, pkt);

    for (i = 0; i < ARRAY_SIZE(digest_lens); i++) {
        g_ptr_array_add(pkts, digest_packet(i & 1 ? DRBD_CMD_RS_DATA
                                                  : DRBD_CMD_DATA,
                                            4096 * i, 512 * (i + 1), 0,
                                            digest_lens[i], NULL));
    }
}

static void test_cmd_name(void)
{
    unsigned cmd;

    g_assert_cmpstr(drbd_cmd_name(DRBD_CMD_HELLO), ==, "HELLO");
    g_assert_cmpstr(drbd_cmd_name(DRBD_CMD_DATA), ==, "DATA");
    g_assert_cmpstr(drbd_cmd_name(DRBD_CMD_BARRIER_ACK), ==, "BARRIER_ACK");
    g_assert_cmpstr(drbd_cmd_name(DRBD_CMD_RS_DONE), ==, "RS_DONE");
    g_assert_cmpstr(drbd_cmd_name(DRBD_CMD_OUT_OF_SYNC), ==, "OUT_OF_SYNC");
    g_assert_cmpstr(drbd_cmd_name(DRBD_CMD_UUIDS), ==, "UUIDS");
    g_assert_cmpstr(drbd_cmd_name(DRBD_CMD_OV_REQUEST), ==, "OV_REQUEST");
    g_assert_cmpstr(drbd_cmd_name(DRBD_CMD_OV_REPLY), ==, "OV_REPLY");
    g_assert_cmpuint(DRBD_CMD_OV_REQUEST, ==, 24);
    g_assert_cmpuint(DRBD_CMD_OV_REPLY, ==, 25);
    g_assert_cmpstr(drbd_cmd_name(DRBD_CMD_RS_CSUM), ==, "RS_CSUM");
    g_assert_cmpstr(drbd_cmd_name(DRBD_CMD_RS_CSUM_REPLY), ==,
                    "RS_CSUM_REPLY");
    g_assert_cmpuint(DRBD_CMD_RS_CSUM, ==, 26);
    g_assert_cmpuint(DRBD_CMD_RS_CSUM_REPLY, ==, 27);
    g_assert_cmpstr(drbd_cmd_name(0), ==, "unknown");
    g_assert_cmpstr(drbd_cmd_name(CMD_RESERVED), ==, "unknown");
    g_assert_cmpstr(drbd_cmd_name(DRBD_CMD__MAX), ==, "unknown");
    g_assert_cmpstr(drbd_cmd_name(0xffff), ==, "unknown");

    /* Every command but 0 and the reserved one has a name */
    for (cmd = 0; cmd <= DRBD_CMD__MAX; cmd++) {
        bool named = cmd != 0 && cmd != CMD_RESERVED && cmd < DRBD_CMD__MAX;

        g_assert_cmpint(strcmp(drbd_cmd_name(cmd), "unknown") != 0, ==,
                        named);
    }
}

static void test_round_trip_hello(void)
{
    static const char *const names[] = {
        "r", "r0", "a-resource.name_with:chars",
        "0123456789012345678901234567890123456789012345678901234567890123",
    };
    size_t i;

    for (i = 0; i < ARRAY_SIZE(names); i++) {
        g_autoptr(GByteArray) pkt = g_byte_array_new();
        DrbdHello in = {
            .version_min = 1, .version_max = 0xfffffffe,
            .node_id = 0xdeadbeef, .flags = i & 1 ? DRBD_HELLO_META_CHANNEL
                                                  : 0,
        };
        DrbdHello out;
        const uint8_t *payload;

        g_assert_cmpuint(strlen(names[i]), <=, DRBD_RESOURCE_NAME_MAX);
        g_strlcpy(in.resource, names[i], sizeof(in.resource));
        drbd_wire_put_hello(pkt, &in);
        payload = check_header(pkt, DRBD_CMD_HELLO);
        g_assert_cmpuint(pkt->len, ==, HDR + HELLO_NAME + strlen(names[i]));
        g_assert_cmpuint(lduw_be_p(payload + HELLO_NAME_LEN), ==,
                         strlen(names[i]));

        memset(&out, 0xa5, sizeof(out));
        g_assert_cmpint(drbd_wire_get_hello(payload, pkt->len - HDR, &out,
                                            &error_abort), ==, 0);
        g_assert_cmpuint(out.version_min, ==, in.version_min);
        g_assert_cmpuint(out.version_max, ==, in.version_max);
        g_assert_cmpuint(out.node_id, ==, in.node_id);
        g_assert_cmpuint(out.flags, ==, in.flags);
        g_assert_cmpstr(out.resource, ==, names[i]);
    }
}

static void test_round_trip_sizes(void)
{
    static const uint8_t protocols[] = { 'A', 'B', 'C' };
    size_t i;

    for (i = 0; i < ARRAY_SIZE(protocols); i++) {
        g_autoptr(GByteArray) pkt = g_byte_array_new();
        DrbdSizes in = {
            .disk_size = 0x123456789a00ULL + i,
            .max_epoch_size = 0xfedcba98,
            .protocol = protocols[i],
            .integrity = DRBD_DIGEST_MD5 + i,
            .verify = DRBD_DIGEST_SHA256 + i,
            .csums = DRBD_DIGEST_CRC32C - i,
        };
        DrbdSizes out;
        const uint8_t *payload;

        drbd_wire_put_sizes(pkt, &in);
        payload = check_header(pkt, DRBD_CMD_SIZES);
        g_assert_cmpuint(pkt->len, ==, HDR + SIZES_SIZE);
        g_assert_cmpuint(ldq_be_p(payload), ==, in.disk_size);
        g_assert_cmpint(drbd_wire_get_sizes(payload, SIZES_SIZE, &out,
                                            &error_abort), ==, 0);
        g_assert_cmpuint(out.disk_size, ==, in.disk_size);
        g_assert_cmpuint(out.max_epoch_size, ==, in.max_epoch_size);
        g_assert_cmpuint(out.protocol, ==, in.protocol);
        g_assert_cmpuint(out.integrity, ==, in.integrity);
        g_assert_cmpuint(out.verify, ==, in.verify);
        g_assert_cmpuint(out.csums, ==, in.csums);
        g_assert_cmpuint(payload[SIZES_CSUMS], ==, in.csums);
    }
}

static void test_round_trip_state(void)
{
    unsigned role, disk;

    for (role = 0; role < DRBD_ROLE__MAX; role++) {
        for (disk = 0; disk < DRBD_DISK_STATE__MAX; disk++) {
            g_autoptr(GByteArray) pkt = g_byte_array_new();
            DrbdStatePacket in = { .role = role, .disk_state = disk };
            DrbdStatePacket out;
            const uint8_t *payload;

            drbd_wire_put_state(pkt, &in);
            payload = check_header(pkt, DRBD_CMD_STATE);
            g_assert_cmpuint(pkt->len, ==, HDR + STATE_SIZE);
            g_assert_cmpint(drbd_wire_get_state(payload, STATE_SIZE, &out,
                                                &error_abort), ==, 0);
            g_assert_cmpuint(out.role, ==, role);
            g_assert_cmpuint(out.disk_state, ==, disk);
        }
    }
}

/*
 * The role and disk state bytes are the protocol's numbers
 * (docs/interop/drbd-protocol.rst), not QAPI's ordinals: pin each
 */
static void test_state_wire_values(void)
{
    static const struct {
        DrbdRole role;
        uint8_t byte;
    } roles[] = {
        { DRBD_ROLE_PRIMARY, 0 },
        { DRBD_ROLE_SECONDARY, 1 },
        { DRBD_ROLE_UNKNOWN, 2 },
    };
    static const struct {
        DrbdDiskState disk;
        uint8_t byte;
    } disks[] = {
        { DRBD_DISK_STATE_DISKLESS, 0 },
        { DRBD_DISK_STATE_ATTACHING, 1 },
        { DRBD_DISK_STATE_FAILED, 2 },
        { DRBD_DISK_STATE_INCONSISTENT, 3 },
        { DRBD_DISK_STATE_OUTDATED, 4 },
        { DRBD_DISK_STATE_DUNKNOWN, 5 },
        { DRBD_DISK_STATE_CONSISTENT, 6 },
        { DRBD_DISK_STATE_UP_TO_DATE, 7 },
    };
    size_t i;

    g_assert_cmpuint(ARRAY_SIZE(roles), ==, DRBD_ROLE__MAX);
    g_assert_cmpuint(ARRAY_SIZE(disks), ==, DRBD_DISK_STATE__MAX);
    for (i = 0; i < ARRAY_SIZE(roles); i++) {
        g_autoptr(GByteArray) pkt = g_byte_array_new();
        DrbdStatePacket in = {
            .role = roles[i].role, .disk_state = DRBD_DISK_STATE_DISKLESS,
        };
        const uint8_t *payload;

        drbd_wire_put_state(pkt, &in);
        payload = check_header(pkt, DRBD_CMD_STATE);
        g_assert_cmpuint(payload[0], ==, roles[i].byte);
        g_assert_cmpuint(payload[1], ==, 0);
    }
    for (i = 0; i < ARRAY_SIZE(disks); i++) {
        g_autoptr(GByteArray) pkt = g_byte_array_new();
        DrbdStatePacket in = {
            .role = DRBD_ROLE_PRIMARY, .disk_state = disks[i].disk,
        };
        const uint8_t *payload;

        drbd_wire_put_state(pkt, &in);
        payload = check_header(pkt, DRBD_CMD_STATE);
        g_assert_cmpuint(payload[0], ==, 0);
        g_assert_cmpuint(payload[1], ==, disks[i].byte);
    }
}

static void test_state_request(void)
{
    g_autoptr(GByteArray) pkt = g_byte_array_new();
    DrbdStatePacket in = {
        .role = DRBD_ROLE_PRIMARY, .disk_state = DRBD_DISK_STATE_UP_TO_DATE,
    };
    DrbdStatePacket out;
    const uint8_t *payload;
    uint8_t bad[4];
    Error *err = NULL;
    uint32_t result;
    uint32_t r;

    uint8_t req[12] = { 0 };

    drbd_wire_put_state_req(pkt, &in);
    payload = check_header(pkt, DRBD_CMD_STATE_REQ);
    g_assert_cmpuint(pkt->len, ==, HDR + STATE_SIZE);
    g_assert_cmpint(drbd_wire_get_state_req(payload, STATE_SIZE, &out,
                                            &error_abort), ==, 0);
    g_assert_cmpuint(out.role, ==, in.role);
    g_assert_cmpuint(out.disk_state, ==, in.disk_state);
    g_assert_cmpuint(out.uuid, ==, 0);

    /* Version 6: the current UUID follows */
    in.uuid = 0x0123456789abcdefULL;
    g_byte_array_set_size(pkt, 0);
    drbd_wire_put_state_req(pkt, &in);
    payload = check_header(pkt, DRBD_CMD_STATE_REQ);
    g_assert_cmpuint(pkt->len, ==, HDR + 12);
    g_assert_cmpuint(ldq_be_p(payload + 4), ==, in.uuid);
    g_assert_cmpint(drbd_wire_get_state_req(payload, 12, &out,
                                            &error_abort), ==, 0);
    g_assert_cmpuint(out.uuid, ==, in.uuid);
    g_assert_cmpuint(out.role, ==, in.role);
    /* A STATE has no UUID: 12 bytes are too many there */
    assert_failed(drbd_wire_get_state(payload, 12, &out, &err), &err);
    /* Neither a zero UUID (the flag bit alone) nor another length */
    memcpy(req, payload, 4);
    stq_be_p(req + 4, 1);
    assert_failed(drbd_wire_get_state_req(req, 12, &out, &err), &err);
    for (r = 0; r <= sizeof(req); r++) {
        if (r != STATE_SIZE && r != 12) {
            assert_failed(drbd_wire_get_state_req(req, r, &out, &err), &err);
        }
    }

    for (r = DRBD_STATE_REPLY_GRANTED; r <= DRBD_STATE_REPLY_MAX; r++) {
        g_byte_array_set_size(pkt, 0);
        drbd_wire_put_state_reply(pkt, r);
        payload = check_header(pkt, DRBD_CMD_STATE_REPLY);
        g_assert_cmpuint(pkt->len, ==, HDR + 4);
        g_assert_cmpint(drbd_wire_get_state_reply(payload, 4, &result,
                                                  &error_abort), ==, 0);
        g_assert_cmpuint(result, ==, r);
    }

    /* an unknown answer, and every wrong length */
    stl_be_p(bad, DRBD_STATE_REPLY_MAX + 1);
    assert_failed(drbd_wire_get_state_reply(bad, 4, &result, &err), &err);
    stl_be_p(bad, 0);
    for (r = 0; r < 4; r++) {
        assert_failed(drbd_wire_get_state_reply(bad, r, &result, &err),
                      &err);
    }
}

/* REFUSE: each reason and node id round-trips; nothing else decodes */
static void test_refuse(void)
{
    g_autoptr(GByteArray) pkt = g_byte_array_new();
    uint8_t buf[16] = { 0 };
    const uint8_t *payload;
    Error *err = NULL;
    DrbdRefuse r;
    uint32_t reason, id;
    size_t i;

    for (reason = 1; reason <= DRBD_REFUSE_MAX; reason++) {
        for (id = 0; id <= DRBD_WIRE_NODE_ID_MAX; id += 31) {
            g_byte_array_set_size(pkt, 0);
            drbd_wire_put_refuse(pkt, &(DrbdRefuse) {
                .reason = reason, .node_id = id,
            });
            payload = check_header(pkt, DRBD_CMD_REFUSE);
            g_assert_cmpuint(pkt->len, ==, HDR + 8);
            g_assert_cmpuint(ldl_be_p(payload), ==, reason);
            g_assert_cmpuint(ldl_be_p(payload + 4), ==, id);
            g_assert_cmpint(drbd_wire_get_refuse(payload, 8, &r,
                                                 &error_abort), ==, 0);
            g_assert_cmpuint(r.reason, ==, reason);
            g_assert_cmpuint(r.node_id, ==, id);
        }
    }
    /* an unknown reason, a node id out of range, every wrong length */
    stl_be_p(buf, 0);
    assert_failed_with(drbd_wire_get_refuse(buf, 8, &r, &err), &err,
                       "REFUSE packet: unknown reason 0");
    stl_be_p(buf, DRBD_REFUSE_MAX + 1);
    assert_failed(drbd_wire_get_refuse(buf, 8, &r, &err), &err);
    stl_be_p(buf, DRBD_REFUSE_RESOURCE);
    stl_be_p(buf + 4, DRBD_WIRE_NODE_ID_MAX + 1);
    assert_failed_with(drbd_wire_get_refuse(buf, 8, &r, &err), &err,
                       "REFUSE packet: node id 32 is above 31");
    stl_be_p(buf + 4, UINT32_MAX);
    assert_failed(drbd_wire_get_refuse(buf, 8, &r, &err), &err);
    stl_be_p(buf + 4, 0);
    for (i = 0; i < sizeof(buf); i++) {
        if (i != 8) {
            assert_failed(drbd_wire_get_refuse(buf, i, &r, &err), &err);
        }
    }
}

/* DECISION: each outcome and rule round-trips; nothing else decodes */
static void test_decision(void)
{
    g_autoptr(GByteArray) pkt = g_byte_array_new();
    uint8_t buf[16] = { 0 };
    const uint8_t *payload;
    Error *err = NULL;
    DrbdDecision d;
    uint32_t outcome, rule;
    size_t i;

    for (outcome = 0; outcome <= DRBD_DECISION_MAX; outcome++) {
        for (rule = 0; rule <= DRBD_DECISION_RULE_MAX; rule += 85) {
            g_byte_array_set_size(pkt, 0);
            drbd_wire_put_decision(pkt, &(DrbdDecision) {
                .outcome = outcome, .rule = rule,
            });
            payload = check_header(pkt, DRBD_CMD_DECISION);
            g_assert_cmpuint(pkt->len, ==, HDR + 8);
            g_assert_cmpuint(ldl_be_p(payload), ==, outcome);
            g_assert_cmpuint(ldl_be_p(payload + 4), ==, rule);
            g_assert_cmpint(drbd_wire_get_decision(payload, 8, &d,
                                                   &error_abort), ==, 0);
            g_assert_cmpuint(d.outcome, ==, outcome);
            g_assert_cmpuint(d.rule, ==, rule);
        }
    }
    /* an unknown outcome, a rule out of range, every wrong length */
    stl_be_p(buf, DRBD_DECISION_MAX + 1);
    assert_failed_with(drbd_wire_get_decision(buf, 8, &d, &err), &err,
                       "DECISION packet: unknown outcome 6");
    stl_be_p(buf, UINT32_MAX);
    assert_failed(drbd_wire_get_decision(buf, 8, &d, &err), &err);
    stl_be_p(buf, DRBD_DECISION_TARGET);
    stl_be_p(buf + 4, DRBD_DECISION_RULE_MAX + 1);
    assert_failed_with(drbd_wire_get_decision(buf, 8, &d, &err), &err,
                       "DECISION packet: rule 256 is above 255");
    stl_be_p(buf + 4, UINT32_MAX);
    assert_failed(drbd_wire_get_decision(buf, 8, &d, &err), &err);
    stl_be_p(buf + 4, 60);
    for (i = 0; i < sizeof(buf); i++) {
        if (i != 8) {
            assert_failed(drbd_wire_get_decision(buf, i, &d, &err), &err);
        }
    }
}

/* RESIZE and RESIZE_REPLY: round trips; sizes and results out of range */
static void test_resize(void)
{
    static const uint64_t good[] = { 512, 4096, 1ULL << 40, 4ULL << 50 };
    static const uint64_t bad[] = { 0, 511, 1ULL << 40 | 1,
                                    (4ULL << 50) + 512, UINT64_MAX };
    g_autoptr(GByteArray) pkt = g_byte_array_new();
    uint8_t buf[16] = { 0 };
    const uint8_t *payload;
    Error *err = NULL;
    uint64_t size;
    uint32_t result;
    size_t i;

    for (i = 0; i < ARRAY_SIZE(good); i++) {
        g_byte_array_set_size(pkt, 0);
        drbd_wire_put_resize(pkt, good[i]);
        payload = check_header(pkt, DRBD_CMD_RESIZE);
        g_assert_cmpuint(pkt->len, ==, HDR + 8);
        g_assert_cmpint(drbd_wire_get_resize(payload, 8, &size,
                                             &error_abort), ==, 0);
        g_assert_cmpuint(size, ==, good[i]);
    }
    for (i = 0; i < ARRAY_SIZE(bad); i++) {
        stq_be_p(buf, bad[i]);
        assert_failed(drbd_wire_get_resize(buf, 8, &size, &err), &err);
    }
    stq_be_p(buf, 1);
    assert_failed_with(drbd_wire_get_resize(buf, 8, &size, &err), &err,
                       "RESIZE packet: a disk of 1 bytes (not a multiple "
                       "of 512 from 512 to 4503599627370496)");
    for (result = 0; result < 4096; result += 4095) {
        g_byte_array_set_size(pkt, 0);
        drbd_wire_put_resize_reply(pkt, result);
        payload = check_header(pkt, DRBD_CMD_RESIZE_REPLY);
        g_assert_cmpint(drbd_wire_get_resize_reply(payload, 4, &result,
                                                   &error_abort), ==, 0);
    }
    stl_be_p(buf, 4096);
    assert_failed_with(drbd_wire_get_resize_reply(buf, 4, &result, &err),
                       &err, "RESIZE_REPLY packet: result 4096 is not an "
                       "errno");
    for (i = 0; i < sizeof(buf); i++) {
        if (i != 8) {
            assert_failed(drbd_wire_get_resize(buf, i, &size, &err), &err);
        }
        if (i != 4) {
            assert_failed(drbd_wire_get_resize_reply(buf, i, &result,
                                                     &err), &err);
        }
    }
}

static void test_new_uuid(void)
{
    static const uint64_t good[] = {
        0x1234567890abcdefULL, 0x1234567890abcdeeULL, 2, 3, 6,
        UINT64_MAX,
    };
    static const uint64_t bad[] = { 0, 1, DRBD_UUID_JUST_CREATED,
                                    DRBD_UUID_JUST_CREATED | 1 };
    g_autoptr(GByteArray) pkt = g_byte_array_new();
    uint8_t buf[16] = { 0 };
    const uint8_t *payload;
    Error *err = NULL;
    uint64_t uuid;
    size_t i;

    for (i = 0; i < ARRAY_SIZE(good); i++) {
        g_byte_array_set_size(pkt, 0);
        drbd_wire_put_new_uuid(pkt, good[i]);
        payload = check_header(pkt, DRBD_CMD_NEW_UUID);
        g_assert_cmpuint(pkt->len, ==, HDR + 8);
        g_assert_cmpint(drbd_wire_get_new_uuid(payload, 8, &uuid,
                                               &error_abort), ==, 0);
        g_assert_cmpuint(uuid, ==, good[i]);
    }
    /* a UUID that names no data, and every wrong length */
    for (i = 0; i < ARRAY_SIZE(bad); i++) {
        stq_be_p(buf, bad[i]);
        assert_failed(drbd_wire_get_new_uuid(buf, 8, &uuid, &err), &err);
    }
    stq_be_p(buf, good[0]);
    for (i = 0; i < sizeof(buf); i++) {
        if (i != 8) {
            assert_failed(drbd_wire_get_new_uuid(buf, i, &uuid, &err),
                          &err);
        }
    }
}

static void test_round_trip_data(void)
{
    static const struct {
        uint16_t cmd;
        uint64_t offset;
        uint32_t bytes;
        uint32_t flags;
    } cases[] = {
        { DRBD_CMD_DATA, 0, 512, 0 },
        { DRBD_CMD_DATA, 4096, 8192, DRBD_DP_FUA },
        { DRBD_CMD_DATA, DISK_SIZE - DRBD_WIRE_MAX_DATA, DRBD_WIRE_MAX_DATA,
          DRBD_DP_ALL },
        { DRBD_CMD_RS_DATA, 1 * MiB, 65536, 0 },
        { DRBD_CMD_ZEROES, 0, DISK_SIZE, DRBD_DP_MAY_UNMAP },
        { DRBD_CMD_ZEROES, 512, 512, DRBD_DP_FUA },
        { DRBD_CMD_DISCARD, 1 * MiB, 1 * MiB, 0 },
    };
    size_t i;

    for (i = 0; i < ARRAY_SIZE(cases); i++) {
        uint16_t cmd = cases[i].cmd;
        bool has_data = cmd == DRBD_CMD_DATA || cmd == DRBD_CMD_RS_DATA;
        g_autofree uint8_t *data = NULL;
        g_autoptr(GByteArray) pkt = data_packet(cmd, cases[i].offset,
                                                cases[i].bytes,
                                                cases[i].flags, &data);
        const uint8_t *payload = check_header(pkt, cmd);
        size_t len = pkt->len - HDR;
        DrbdDataPacket out;

        g_assert_cmpuint(len, ==, DATA_SIZE + (has_data ? cases[i].bytes
                                                        : 0));
        g_assert_cmpint(drbd_wire_get_data(cmd, payload, len, DISK_SIZE, &out,
                                           &error_abort), ==, 0);
        g_assert_cmpuint(out.offset, ==, cases[i].offset);
        g_assert_cmpuint(out.id, ==, 0x0123456789abcdefULL);
        g_assert_cmpuint(out.epoch, ==, 42);
        g_assert_cmpuint(out.unordered, ==,
                         cmd == DRBD_CMD_RS_DATA ? 0 : 31);
        g_assert_cmpuint(out.flags, ==, cases[i].flags);
        g_assert_cmpuint(out.bytes, ==, cases[i].bytes);
        if (has_data) {
            g_autoptr(GByteArray) split = g_byte_array_new();
            DrbdDataPacket p = out;

            g_assert_true(out.data == payload + DATA_SIZE);
            g_assert_cmpmem(out.data, out.bytes, data, cases[i].bytes);

            /* The header alone, followed by the data, is the same packet */
            p.data = NULL;
            drbd_wire_put_data_header(split, cmd, &p);
            g_assert_cmpuint(split->len, ==, HDR + DATA_SIZE);
            g_byte_array_append(split, data, cases[i].bytes);
            g_assert_cmpmem(split->data, split->len, pkt->data, pkt->len);
        } else {
            g_assert_null(out.data);
        }

        /* Without a device size the range is not checked */
        g_assert_cmpint(drbd_wire_get_data(cmd, payload, len, 0, &out,
                                           &error_abort), ==, 0);
    }
}

static void test_round_trip_block_ack(void)
{
    size_t i;

    for (i = 0; i < ARRAY_SIZE(block_ack_cmds); i++) {
        uint16_t cmd = block_ack_cmds[i];
        g_autoptr(GByteArray) pkt = g_byte_array_new();
        DrbdBlockAck in = {
            .offset = DISK_SIZE - DRBD_WIRE_MAX_DATA,
            .id = 0xfedcba9876543210ULL - i,
            .bytes = DRBD_WIRE_MAX_DATA,
        };
        DrbdBlockAck out;
        const uint8_t *payload;

        drbd_wire_put_block_ack(pkt, cmd, &in);
        payload = check_header(pkt, cmd);
        g_assert_cmpuint(pkt->len, ==, HDR + ACK_SIZE);
        g_assert_cmpint(drbd_wire_get_block_ack(cmd, payload, ACK_SIZE,
                                                DISK_SIZE, &out,
                                                &error_abort), ==, 0);
        g_assert_cmpuint(out.offset, ==, in.offset);
        g_assert_cmpuint(out.id, ==, in.id);
        g_assert_cmpuint(out.bytes, ==, in.bytes);

        /* Acks of ZEROES and DISCARD cover up to DRBD_WIRE_MAX_ZEROES */
        g_byte_array_set_size(pkt, 0);
        in.offset = 0;
        in.bytes = DRBD_WIRE_MAX_ZEROES;
        drbd_wire_put_block_ack(pkt, cmd, &in);
        payload = check_header(pkt, cmd);
        g_assert_cmpint(drbd_wire_get_block_ack(cmd, payload, ACK_SIZE,
                                                0, &out, &error_abort),
                        ==, 0);
        g_assert_cmpuint(out.bytes, ==, DRBD_WIRE_MAX_ZEROES);
    }
}

static void test_round_trip_barrier(void)
{
    static const DrbdBarrier cases[] = {
        { .epoch = 0, .set_size = 0, .flags = 0 },
        { .epoch = 1, .set_size = 1, .flags = DRBD_BARRIER_FLUSH },
        { .epoch = 0xffffffff, .set_size = 0xfffffffe, .flags = 0 },
    };
    size_t i;

    for (i = 0; i < ARRAY_SIZE(cases); i++) {
        g_autoptr(GByteArray) pkt = g_byte_array_new();
        const DrbdBarrier *in = &cases[i];
        DrbdBarrier out;
        const uint8_t *payload;

        drbd_wire_put_barrier(pkt, DRBD_CMD_BARRIER, in);
        payload = check_header(pkt, DRBD_CMD_BARRIER);
        g_assert_cmpuint(pkt->len, ==, HDR + BARRIER_SIZE);
        g_assert_cmpuint(ldl_be_p(payload + BARRIER_FLAGS), ==, in->flags);
        g_assert_cmpint(drbd_wire_get_barrier(DRBD_CMD_BARRIER, payload,
                                              BARRIER_SIZE, &out,
                                              &error_abort), ==, 0);
        g_assert_cmpuint(out.epoch, ==, in->epoch);
        g_assert_cmpuint(out.set_size, ==, in->set_size);
        g_assert_cmpuint(out.flags, ==, in->flags);

        /* BARRIER_ACK has no flags: the encoder leaves them zero */
        g_byte_array_set_size(pkt, 0);
        drbd_wire_put_barrier(pkt, DRBD_CMD_BARRIER_ACK, in);
        payload = check_header(pkt, DRBD_CMD_BARRIER_ACK);
        g_assert_cmpuint(pkt->len, ==, HDR + BARRIER_SIZE);
        g_assert_cmpint(drbd_wire_get_barrier(DRBD_CMD_BARRIER_ACK, payload,
                                              BARRIER_SIZE, &out,
                                              &error_abort), ==, 0);
        g_assert_cmpuint(out.epoch, ==, in->epoch);
        g_assert_cmpuint(out.set_size, ==, in->set_size);
        g_assert_cmpuint(out.flags, ==, 0);
    }
}

static void test_round_trip_empty(void)
{
    size_t i;

    for (i = 0; i < ARRAY_SIZE(empty_cmds); i++) {
        g_autoptr(GByteArray) pkt = g_byte_array_new();

        drbd_wire_put_empty(pkt, empty_cmds[i]);
        g_assert_cmpuint(pkt->len, ==, HDR);
        check_header(pkt, empty_cmds[i]);
    }
}

/* BITMAP carries an encoded chunk as it is; its length is bounded */
static void test_bitmap(void)
{
    g_autoptr(GByteArray) out = g_byte_array_new();
    uint8_t chunk[DRBD_RLE_HEADER_SIZE + 1] = { 0 };
    uint8_t hdr[HDR];
    Error *err = NULL;
    DrbdHeader h;

    chunk[15] = 8;      /* nbits */
    chunk[24] = 8;      /* one run of 8 zero bits */
    drbd_wire_put_bitmap(out, chunk, sizeof(chunk));
    g_assert_cmpuint(out->len, ==, HDR + sizeof(chunk));
    g_assert_cmpint(drbd_wire_get_header(out->data, &h, &error_abort), ==,
                    0);
    g_assert_cmpuint(h.cmd, ==, DRBD_CMD_BITMAP);
    g_assert_cmpuint(h.length, ==, sizeof(chunk));
    g_assert(memcmp(out->data + HDR, chunk, sizeof(chunk)) == 0);
    g_assert_cmpstr(drbd_cmd_name(DRBD_CMD_BITMAP), ==, "BITMAP");

    make_header(hdr, DRBD_WIRE_MAGIC, DRBD_CMD_BITMAP, 0,
                DRBD_WIRE_MAX_BITMAP);
    g_assert_cmpint(drbd_wire_get_header(hdr, &h, &error_abort), ==, 0);
    make_header(hdr, DRBD_WIRE_MAGIC, DRBD_CMD_BITMAP, 0,
                DRBD_WIRE_MAX_BITMAP + 1);
    assert_failed(drbd_wire_get_header(hdr, &h, &err), &err);
    make_header(hdr, DRBD_WIRE_MAGIC, DRBD_CMD_BITMAP, 0,
                DRBD_RLE_HEADER_SIZE);
    assert_failed(drbd_wire_get_header(hdr, &h, &err), &err);
}

/* UUIDS: what is encoded decodes the same; bad fields are refused */
static void test_uuids(void)
{
    g_autoptr(GByteArray) out = g_byte_array_new();
    DrbdUuidsPacket u = {
        .current = 0x1122334455667788ULL, .bitmap = 0x99,
        .history = { 0xaabbccddeeff0011ULL, 4 }, .changes = 12345,
        .flags = DRBD_UUIDS_CRASHED_PRIMARY, .after_sb = { 1, 7, 0 },
    };
    DrbdUuidsPacket v;
    uint8_t *p;
    Error *err = NULL;

    drbd_wire_put_uuids(out, &u);
    p = (uint8_t *)check_header(out, DRBD_CMD_UUIDS);
    g_assert_cmpuint(out->len, ==, HDR + 48);
    g_assert_cmpuint(ldq_be_p(p), ==, u.current);
    g_assert_cmpuint(ldq_be_p(p + 32), ==, 12345);
    g_assert_cmpuint(p[44], ==, 1);
    g_assert_cmpint(drbd_wire_get_uuids(p, 48, &v, &error_abort), ==, 0);
    g_assert_cmpuint(v.current, ==, u.current);
    g_assert_cmpuint(v.bitmap, ==, u.bitmap);
    g_assert_cmpuint(v.history[0], ==, u.history[0]);
    g_assert_cmpuint(v.history[1], ==, u.history[1]);
    g_assert_cmpuint(v.changes, ==, u.changes);
    g_assert_cmpuint(v.flags, ==, u.flags);
    g_assert(memcmp(v.after_sb, u.after_sb, 3) == 0);

    assert_failed(drbd_wire_get_uuids(p, 47, &v, &err), &err);
    p[43] = 4;                          /* version 5's primary peer */
    g_assert_cmpint(drbd_wire_get_uuids(p, 48, &v, &error_abort), ==, 0);
    g_assert_cmpuint(v.flags, ==, DRBD_UUIDS_PRIMARY_PEER);
    p[43] = 8;                                  /* unknown flag */
    assert_failed_with(drbd_wire_get_uuids(p, 48, &v, &err), &err,
                       "UUIDS packet: unknown flags 0x8");
    p[43] = 1;
    p[45] = 16;                                 /* unknown policy */
    assert_failed_with(drbd_wire_get_uuids(p, 48, &v, &err), &err,
                       "UUIDS packet: unknown after-sb-1pri policy 16");
    p[45] = 7;
    p[47] = 1;                                  /* padding */
    assert_failed_with(drbd_wire_get_uuids(p, 48, &v, &err), &err,
                       "UUIDS packet: padding is not zero");
}

static void test_header_invalid(void)
{
    static const struct {
        uint16_t cmd;
        uint32_t length;
    } bad_lengths[] = {
        { DRBD_CMD_HELLO, 0 },
        { DRBD_CMD_HELLO, HELLO_NAME },
        { DRBD_CMD_HELLO, HELLO_NAME + DRBD_RESOURCE_NAME_MAX + 1 },
        { DRBD_CMD_SIZES, SIZES_SIZE - 1 },
        { DRBD_CMD_SIZES, SIZES_SIZE + 1 },
        { DRBD_CMD_STATE, 0 },
        { DRBD_CMD_STATE, STATE_SIZE * 2 },
        { DRBD_CMD_DATA, 0 },
        { DRBD_CMD_DATA, DATA_SIZE },
        { DRBD_CMD_DATA, DATA_SIZE + 1 },
        { DRBD_CMD_DATA, DATA_SIZE + 4095 },
        { DRBD_CMD_DATA, DATA_SIZE + DRBD_WIRE_MAX_DATA + DRBD_WIRE_ALIGN },
        { DRBD_CMD_RS_DATA, DATA_SIZE - 1 },
        { DRBD_CMD_RS_DATA, DRBD_WIRE_MAX_PAYLOAD + 1 },
        { DRBD_CMD_RS_DATA, UINT32_MAX },
        { DRBD_CMD_ZEROES, DATA_SIZE + 512 },
        { DRBD_CMD_DISCARD, DATA_SIZE - 8 },
        { DRBD_CMD_BARRIER, BARRIER_SIZE + 4 },
        { DRBD_CMD_BARRIER, BARRIER_SIZE - 4 },
        { DRBD_CMD_BARRIER_ACK, 4 },
        { DRBD_CMD_RECV_ACK, ACK_SIZE + 8 },
        { DRBD_CMD_WRITE_ACK, 0 },
        { DRBD_CMD_NEG_ACK, ACK_SIZE - 1 },
        { DRBD_CMD_OUT_OF_SYNC, UINT32_MAX },
        { DRBD_CMD_PING, 1 },
        { DRBD_CMD_PING_ACK, 8 },
        { DRBD_CMD_RS_DONE, UINT32_MAX },
        { DRBD_CMD_OV_REQUEST, 0 },
        { DRBD_CMD_OV_REQUEST, OV_SIZE - 1 },
        { DRBD_CMD_OV_REQUEST, OV_MAX_SIZE + 1 },
        { DRBD_CMD_OV_REPLY, 8 },
        { DRBD_CMD_OV_REPLY, OV_MAX_SIZE + 8 },
        { DRBD_CMD_OV_REPLY, UINT32_MAX },
        { DRBD_CMD_RS_CSUM, 0 },
        { DRBD_CMD_RS_CSUM, OV_SIZE - 1 },
        { DRBD_CMD_RS_CSUM, OV_MAX_SIZE + 1 },
        { DRBD_CMD_RS_CSUM_REPLY, 0 },
        { DRBD_CMD_RS_CSUM_REPLY, OV_SIZE },
        { DRBD_CMD_RS_CSUM_REPLY, OV_RESULT_SIZE - 1 },
        { DRBD_CMD_RS_CSUM_REPLY, OV_RESULT_SIZE + 1 },
        { DRBD_CMD_RS_CSUM_REPLY, OV_SIZE + CSUM_DIGEST },
        { DRBD_CMD_RS_CSUM_REPLY, OV_MAX_SIZE },
        { DRBD_CMD_RS_CSUM_REPLY, UINT32_MAX },
    };
    static const uint16_t bad_cmds[] = {
        0, CMD_RESERVED, DRBD_CMD__MAX, 0x100, 0xffff,
    };
    uint8_t buf[HDR];
    Error *err = NULL;
    DrbdHeader h;
    size_t i;

    /* A good one first, to show that the helper builds valid headers */
    make_header(buf, DRBD_WIRE_MAGIC, DRBD_CMD_PING, 0, 0);
    g_assert_cmpint(drbd_wire_get_header(buf, &h, &error_abort), ==, 0);
    g_assert_cmpuint(h.cmd, ==, DRBD_CMD_PING);
    g_assert_cmpuint(h.length, ==, 0);

    make_header(buf, DRBD_WIRE_MAGIC ^ 1, DRBD_CMD_PING, 0, 0);
    assert_failed(drbd_wire_get_header(buf, &h, &err), &err);
    make_header(buf, 0, DRBD_CMD_PING, 0, 0);
    assert_failed(drbd_wire_get_header(buf, &h, &err), &err);
    make_header(buf, bswap32(DRBD_WIRE_MAGIC), DRBD_CMD_PING, 0, 0);
    assert_failed(drbd_wire_get_header(buf, &h, &err), &err);

    for (i = 0; i < ARRAY_SIZE(bad_cmds); i++) {
        make_header(buf, DRBD_WIRE_MAGIC, bad_cmds[i], 0, 0);
        assert_failed(drbd_wire_get_header(buf, &h, &err), &err);
    }

    /*
     * 14 is reserved (DRBD's RS_REQUEST): refused as an unknown command,
     * whatever the length, the 24 bytes of a block ack included
     */
    make_header(buf, DRBD_WIRE_MAGIC, CMD_RESERVED, 0, ACK_SIZE);
    assert_failed_with(drbd_wire_get_header(buf, &h, &err), &err,
                       "packet header: unknown command 14");
    make_header(buf, DRBD_WIRE_MAGIC, CMD_RESERVED, 0, 0);
    assert_failed_with(drbd_wire_get_header(buf, &h, &err), &err,
                       "packet header: unknown command 14");

    make_header(buf, DRBD_WIRE_MAGIC, DRBD_CMD_PING, 1, 0);
    assert_failed(drbd_wire_get_header(buf, &h, &err), &err);
    make_header(buf, DRBD_WIRE_MAGIC, DRBD_CMD_PING, 0x8000, 0);
    assert_failed(drbd_wire_get_header(buf, &h, &err), &err);

    for (i = 0; i < ARRAY_SIZE(bad_lengths); i++) {
        make_header(buf, DRBD_WIRE_MAGIC, bad_lengths[i].cmd, 0,
                    bad_lengths[i].length);
        assert_failed(drbd_wire_get_header(buf, &h, &err), &err);
    }

    /* The limits themselves are fine */
    make_header(buf, DRBD_WIRE_MAGIC, DRBD_CMD_DATA, 0,
                DATA_SIZE + DRBD_WIRE_MAX_DATA);
    g_assert_cmpint(drbd_wire_get_header(buf, &h, &error_abort), ==, 0);
    make_header(buf, DRBD_WIRE_MAGIC, DRBD_CMD_RS_DATA, 0, DATA_SIZE + 512);
    g_assert_cmpint(drbd_wire_get_header(buf, &h, &error_abort), ==, 0);
    make_header(buf, DRBD_WIRE_MAGIC, DRBD_CMD_HELLO, 0, HELLO_NAME + 1);
    g_assert_cmpint(drbd_wire_get_header(buf, &h, &error_abort), ==, 0);
    make_header(buf, DRBD_WIRE_MAGIC, DRBD_CMD_HELLO, 0,
                HELLO_NAME + DRBD_RESOURCE_NAME_MAX);
    g_assert_cmpint(drbd_wire_get_header(buf, &h, &error_abort), ==, 0);
    make_header(buf, DRBD_WIRE_MAGIC, DRBD_CMD_OV_REQUEST, 0, OV_SIZE);
    g_assert_cmpint(drbd_wire_get_header(buf, &h, &error_abort), ==, 0);
    make_header(buf, DRBD_WIRE_MAGIC, DRBD_CMD_OV_REPLY, 0, OV_MAX_SIZE);
    g_assert_cmpint(drbd_wire_get_header(buf, &h, &error_abort), ==, 0);
    make_header(buf, DRBD_WIRE_MAGIC, DRBD_CMD_RS_CSUM, 0, OV_SIZE);
    g_assert_cmpint(drbd_wire_get_header(buf, &h, &error_abort), ==, 0);
    make_header(buf, DRBD_WIRE_MAGIC, DRBD_CMD_RS_CSUM, 0, OV_MAX_SIZE);
    g_assert_cmpint(drbd_wire_get_header(buf, &h, &error_abort), ==, 0);
    make_header(buf, DRBD_WIRE_MAGIC, DRBD_CMD_RS_CSUM_REPLY, 0,
                OV_RESULT_SIZE);
    g_assert_cmpint(drbd_wire_get_header(buf, &h, &error_abort), ==, 0);
}

static void test_data_invalid(void)
{
    static const uint16_t data_cmds[] = {
        DRBD_CMD_DATA, DRBD_CMD_RS_DATA, DRBD_CMD_ZEROES, DRBD_CMD_DISCARD,
        DRBD_CMD_RS_ZEROES,
    };
    Error *err = NULL;
    DrbdDataPacket p;
    size_t i;

    for (i = 0; i < ARRAY_SIZE(data_cmds); i++) {
        uint16_t cmd = data_cmds[i];
        bool has_data = cmd == DRBD_CMD_DATA || cmd == DRBD_CMD_RS_DATA;
        g_autoptr(GByteArray) pkt = data_packet(cmd, 8192, 4096, 0, NULL);
        uint8_t *payload = pkt->data + HDR;
        size_t len = pkt->len - HDR;
        g_autofree uint8_t *buf = g_malloc0(len + 512);
        g_autofree uint8_t *big = NULL;

        g_assert_cmpint(drbd_wire_get_data(cmd, payload, len, DISK_SIZE, &p,
                                           &error_abort), ==, 0);

        /* Length mismatch, either way, by a byte or by a sector */
        memcpy(buf, payload, len);
        assert_failed(drbd_wire_get_data(cmd, buf, len - 1, DISK_SIZE, &p,
                                         &err), &err);
        assert_failed(drbd_wire_get_data(cmd, buf, len + 1, DISK_SIZE, &p,
                                         &err), &err);
        assert_failed(drbd_wire_get_data(cmd, buf, len + 512, DISK_SIZE, &p,
                                         &err), &err);
        if (has_data) {
            assert_failed(drbd_wire_get_data(cmd, buf, len - 512, DISK_SIZE,
                                             &p, &err), &err);
        }
        assert_failed(drbd_wire_get_data(cmd, buf, 0, DISK_SIZE, &p, &err),
                      &err);

        /* Zero bytes, with a payload that would fit them */
        stl_be_p(buf + DATA_BYTES, 0);
        assert_failed(drbd_wire_get_data(cmd, buf, DATA_SIZE, DISK_SIZE, &p,
                                         &err), &err);
        assert_failed(drbd_wire_get_data(cmd, buf, DATA_SIZE, 0, &p, &err),
                      &err);

        /* Unaligned offset or length */
        memcpy(buf, payload, len);
        stq_be_p(buf + DATA_OFFSET, 8192 + 1);
        assert_failed(drbd_wire_get_data(cmd, buf, len, DISK_SIZE, &p, &err),
                      &err);
        stq_be_p(buf + DATA_OFFSET, 8192 + 256);
        assert_failed(drbd_wire_get_data(cmd, buf, len, 0, &p, &err), &err);
        memcpy(buf, payload, len);
        stl_be_p(buf + DATA_BYTES, 4096 - 1);
        assert_failed(drbd_wire_get_data(cmd, buf,
                                         has_data ? len - 1 : len,
                                         DISK_SIZE, &p, &err), &err);

        /* Unknown flags */
        memcpy(buf, payload, len);
        stl_be_p(buf + DATA_FLAGS, DRBD_DP_ALL + 1);
        assert_failed(drbd_wire_get_data(cmd, buf, len, DISK_SIZE, &p, &err),
                      &err);
        stl_be_p(buf + DATA_FLAGS, 0x80000000);
        assert_failed(drbd_wire_get_data(cmd, buf, len, DISK_SIZE, &p, &err),
                      &err);
        /* Bit 1 is reserved (DRBD's flush flag), alone or with others */
        g_assert_cmpuint(DRBD_DP_ALL & DP_RESERVED, ==, 0);
        stl_be_p(buf + DATA_FLAGS, DP_RESERVED);
        {
            g_autofree char *msg =
                g_strdup_printf("%s packet: unknown flags 0x2",
                                drbd_cmd_name(cmd));

            assert_failed_with(drbd_wire_get_data(cmd, buf, len, DISK_SIZE,
                                                  &p, &err), &err, msg);
            stl_be_p(buf + DATA_FLAGS, DRBD_DP_ALL | DP_RESERVED);
            assert_failed_with(drbd_wire_get_data(cmd, buf, len, DISK_SIZE,
                                                  &p, &err), &err, msg);
        }
        /* The known flags alone are fine */
        stl_be_p(buf + DATA_FLAGS, DRBD_DP_ALL);
        g_assert_cmpint(drbd_wire_get_data(cmd, buf, len, DISK_SIZE, &p,
                                           &error_abort), ==, 0);
        g_assert_cmpuint(p.flags, ==, DRBD_DP_FUA | DRBD_DP_MAY_UNMAP);

        /*
         * How many writes before it a guest write does not depend on: any
         * value decodes (the receiver's order checks it against what
         * arrived); resync data is no guest write and must say 0
         */
        memcpy(buf, payload, len);
        stl_be_p(buf + DATA_UNORDERED, 0xfffffffe);
        if (cmd == DRBD_CMD_RS_DATA || cmd == DRBD_CMD_RS_ZEROES) {
            g_autofree char *msg = g_strdup_printf(
                "%s packet: resync data is not a guest write, but claims "
                "4294967294 unordered writes", drbd_cmd_name(cmd));

            assert_failed_with(drbd_wire_get_data(cmd, buf, len, DISK_SIZE,
                                                  &p, &err), &err, msg);
        } else {
            g_assert_cmpint(drbd_wire_get_data(cmd, buf, len, DISK_SIZE, &p,
                                               &error_abort), ==, 0);
            g_assert_cmpuint(p.unordered, ==, 0xfffffffe);
        }

        /* Beyond the device, up to overflowing */
        memcpy(buf, payload, len);
        stq_be_p(buf + DATA_OFFSET, DISK_SIZE - 2048);
        assert_failed(drbd_wire_get_data(cmd, buf, len, DISK_SIZE, &p, &err),
                      &err);
        g_assert_cmpint(drbd_wire_get_data(cmd, buf, len, 0, &p,
                                           &error_abort), ==, 0);
        stq_be_p(buf + DATA_OFFSET, DISK_SIZE);
        assert_failed(drbd_wire_get_data(cmd, buf, len, DISK_SIZE, &p, &err),
                      &err);
        assert_failed(drbd_wire_get_data(cmd, buf, len, 2048, &p, &err),
                      &err);
        stq_be_p(buf + DATA_OFFSET, UINT64_MAX - 511);
        assert_failed(drbd_wire_get_data(cmd, buf, len, DISK_SIZE, &p, &err),
                      &err);
        assert_failed(drbd_wire_get_data(cmd, buf, len, UINT64_MAX, &p,
                                         &err), &err);
        assert_failed(drbd_wire_get_data(cmd, buf, len, 0, &p, &err), &err);
        stq_be_p(buf + DATA_OFFSET, UINT64_MAX - 4095);
        assert_failed(drbd_wire_get_data(cmd, buf, len, 0, &p, &err), &err);
        stq_be_p(buf + DATA_OFFSET, (uint64_t)INT64_MAX + 1);
        assert_failed(drbd_wire_get_data(cmd, buf, len, 0, &p, &err), &err);

        /* Too large */
        big = g_malloc0(DATA_SIZE + DRBD_WIRE_MAX_DATA + 512);
        memcpy(big, payload, DATA_SIZE);
        stq_be_p(big + DATA_OFFSET, 0);
        stl_be_p(big + DATA_BYTES, has_data ? DRBD_WIRE_MAX_DATA + 512
                                            : DRBD_WIRE_MAX_ZEROES + 512);
        assert_failed(drbd_wire_get_data(cmd, big,
                                         has_data ? DATA_SIZE +
                                                    DRBD_WIRE_MAX_DATA + 512
                                                  : DATA_SIZE,
                                         0, &p, &err), &err);
        stl_be_p(big + DATA_BYTES, UINT32_MAX & ~511u);
        assert_failed(drbd_wire_get_data(cmd, big, DATA_SIZE, 0, &p, &err),
                      &err);

        /* The largest is fine */
        stl_be_p(big + DATA_BYTES, has_data ? DRBD_WIRE_MAX_DATA
                                            : DRBD_WIRE_MAX_ZEROES);
        g_assert_cmpint(drbd_wire_get_data(cmd, big,
                                           has_data ? DATA_SIZE +
                                                      DRBD_WIRE_MAX_DATA
                                                    : DATA_SIZE,
                                           0, &p, &error_abort), ==, 0);
    }

    /* A command that is not a request, and data decoded as the wrong one */
    {
        g_autoptr(GByteArray) pkt = data_packet(DRBD_CMD_DATA, 0, 512, 0,
                                                NULL);
        static const uint16_t wrong[] = {
            0, DRBD_CMD_HELLO, DRBD_CMD_BARRIER, DRBD_CMD_WRITE_ACK,
            CMD_RESERVED, DRBD_CMD_PING, DRBD_CMD__MAX, 0xffff,
        };

        for (i = 0; i < ARRAY_SIZE(wrong); i++) {
            assert_failed(drbd_wire_get_data(wrong[i], pkt->data + HDR,
                                             pkt->len - HDR, 0, &p, &err),
                          &err);
        }
        /* A DATA payload decoded as ZEROES has the wrong length */
        assert_failed(drbd_wire_get_data(DRBD_CMD_ZEROES, pkt->data + HDR,
                                         pkt->len - HDR, 0, &p, &err), &err);
    }
}

static void test_block_ack_invalid(void)
{
    Error *err = NULL;
    DrbdBlockAck a;
    size_t i;

    for (i = 0; i < ARRAY_SIZE(block_ack_cmds); i++) {
        uint16_t cmd = block_ack_cmds[i];
        uint32_t max = DRBD_WIRE_MAX_ZEROES;
        DrbdBlockAck in = { .offset = 4096, .id = 1, .bytes = 4096 };
        g_autoptr(GByteArray) pkt = g_byte_array_new();
        uint8_t buf[ACK_SIZE + 1];

        drbd_wire_put_block_ack(pkt, cmd, &in);
        memcpy(buf, pkt->data + HDR, ACK_SIZE);
        buf[ACK_SIZE] = 0;
        g_assert_cmpint(drbd_wire_get_block_ack(cmd, buf, ACK_SIZE, DISK_SIZE,
                                                &a, &error_abort), ==, 0);

        assert_failed(drbd_wire_get_block_ack(cmd, buf, ACK_SIZE + 1,
                                              DISK_SIZE, &a, &err), &err);
        assert_failed(drbd_wire_get_block_ack(cmd, buf, ACK_SIZE - 1,
                                              DISK_SIZE, &a, &err), &err);

        stl_be_p(buf + ACK_BYTES, 0);
        assert_failed(drbd_wire_get_block_ack(cmd, buf, ACK_SIZE, DISK_SIZE,
                                              &a, &err), &err);
        stl_be_p(buf + ACK_BYTES, 1000);
        assert_failed(drbd_wire_get_block_ack(cmd, buf, ACK_SIZE, DISK_SIZE,
                                              &a, &err), &err);
        stl_be_p(buf + ACK_BYTES, max + 512);
        assert_failed(drbd_wire_get_block_ack(cmd, buf, ACK_SIZE, 0, &a,
                                              &err), &err);
        stl_be_p(buf + ACK_BYTES, max);
        stq_be_p(buf + ACK_OFFSET, 0);
        g_assert_cmpint(drbd_wire_get_block_ack(cmd, buf, ACK_SIZE, 0, &a,
                                                &error_abort), ==, 0);
        assert_failed(drbd_wire_get_block_ack(cmd, buf, ACK_SIZE, max - 512,
                                              &a, &err), &err);

        stl_be_p(buf + ACK_BYTES, 4096);
        stq_be_p(buf + ACK_OFFSET, 4097);
        assert_failed(drbd_wire_get_block_ack(cmd, buf, ACK_SIZE, DISK_SIZE,
                                              &a, &err), &err);
        stq_be_p(buf + ACK_OFFSET, DISK_SIZE - 512);
        assert_failed(drbd_wire_get_block_ack(cmd, buf, ACK_SIZE, DISK_SIZE,
                                              &a, &err), &err);
        stq_be_p(buf + ACK_OFFSET, UINT64_MAX - 511);
        assert_failed(drbd_wire_get_block_ack(cmd, buf, ACK_SIZE, DISK_SIZE,
                                              &a, &err), &err);
        assert_failed(drbd_wire_get_block_ack(cmd, buf, ACK_SIZE, 0, &a,
                                              &err), &err);

        stq_be_p(buf + ACK_OFFSET, 4096);
        stl_be_p(buf + ACK_PAD, 0x100);
        assert_failed(drbd_wire_get_block_ack(cmd, buf, ACK_SIZE, DISK_SIZE,
                                              &a, &err), &err);
        stl_be_p(buf + ACK_PAD, 0);
        g_assert_cmpint(drbd_wire_get_block_ack(cmd, buf, ACK_SIZE, DISK_SIZE,
                                                &a, &error_abort), ==, 0);

        /* Right payload, wrong command */
        assert_failed(drbd_wire_get_block_ack(DRBD_CMD_DATA, buf, ACK_SIZE,
                                              DISK_SIZE, &a, &err), &err);
        assert_failed(drbd_wire_get_block_ack(DRBD_CMD_BARRIER_ACK, buf,
                                              ACK_SIZE, DISK_SIZE, &a, &err),
                      &err);
        assert_failed(drbd_wire_get_block_ack(0xffff, buf, ACK_SIZE,
                                              DISK_SIZE, &a, &err), &err);
        /* A valid block ack payload is no RS_REQUEST: 14 is reserved */
        assert_failed_with(drbd_wire_get_block_ack(CMD_RESERVED, buf,
                                                   ACK_SIZE, DISK_SIZE, &a,
                                                   &err),
                           &err, "unknown packet: cannot decode it as a "
                           "block ack");
    }
}

static void test_barrier_invalid(void)
{
    uint8_t buf[BARRIER_SIZE + 1] = { 0 };
    Error *err = NULL;
    DrbdBarrier b;

    g_assert_cmpint(drbd_wire_get_barrier(DRBD_CMD_BARRIER, buf, BARRIER_SIZE,
                                          &b, &error_abort), ==, 0);
    assert_failed(drbd_wire_get_barrier(DRBD_CMD_BARRIER, buf,
                                        BARRIER_SIZE - 1, &b, &err), &err);
    assert_failed(drbd_wire_get_barrier(DRBD_CMD_BARRIER_ACK, buf,
                                        BARRIER_SIZE + 1, &b, &err), &err);
    assert_failed(drbd_wire_get_barrier(DRBD_CMD_BARRIER, buf, 8, &b, &err),
                  &err);
    assert_failed(drbd_wire_get_barrier(DRBD_CMD_WRITE_ACK, buf,
                                        BARRIER_SIZE, &b, &err), &err);
    assert_failed(drbd_wire_get_barrier(DRBD_CMD__MAX, buf, BARRIER_SIZE,
                                        &b, &err), &err);

    /* Flags: FLUSH in BARRIER only, nothing else anywhere */
    stl_be_p(buf + BARRIER_FLAGS, DRBD_BARRIER_FLUSH);
    g_assert_cmpint(drbd_wire_get_barrier(DRBD_CMD_BARRIER, buf, BARRIER_SIZE,
                                          &b, &error_abort), ==, 0);
    g_assert_cmpuint(b.flags, ==, DRBD_BARRIER_FLUSH);
    assert_failed(drbd_wire_get_barrier(DRBD_CMD_BARRIER_ACK, buf,
                                        BARRIER_SIZE, &b, &err), &err);
    stl_be_p(buf + BARRIER_FLAGS, DRBD_BARRIER_ALL + 1);
    assert_failed(drbd_wire_get_barrier(DRBD_CMD_BARRIER, buf, BARRIER_SIZE,
                                        &b, &err), &err);
    stl_be_p(buf + BARRIER_FLAGS, 0x80000000);
    assert_failed(drbd_wire_get_barrier(DRBD_CMD_BARRIER, buf, BARRIER_SIZE,
                                        &b, &err), &err);
    assert_failed(drbd_wire_get_barrier(DRBD_CMD_BARRIER_ACK, buf,
                                        BARRIER_SIZE, &b, &err), &err);

    /* set_size may be anything */
    stl_be_p(buf + BARRIER_FLAGS, 0);
    stl_be_p(buf + 4, 0xffffffff);
    g_assert_cmpint(drbd_wire_get_barrier(DRBD_CMD_BARRIER_ACK, buf,
                                          BARRIER_SIZE, &b, &error_abort),
                    ==, 0);
    g_assert_cmpuint(b.set_size, ==, 0xffffffff);
}

static void test_hello_invalid(void)
{
    DrbdHello in = {
        .version_min = 1, .version_max = 2, .node_id = 3,
        .resource = "res",
    };
    g_autoptr(GByteArray) pkt = g_byte_array_new();
    uint8_t buf[HELLO_NAME + DRBD_RESOURCE_NAME_MAX + 8];
    size_t len;
    Error *err = NULL;
    DrbdHello out;

    drbd_wire_put_hello(pkt, &in);
    len = pkt->len - HDR;
    g_assert_cmpuint(len, ==, HELLO_NAME + 3);

#define RESET() memcpy(buf, pkt->data + HDR, len)

    RESET();
    g_assert_cmpint(drbd_wire_get_hello(buf, len, &out, &error_abort), ==, 0);

    /* Empty name */
    stw_be_p(buf + HELLO_NAME_LEN, 0);
    assert_failed(drbd_wire_get_hello(buf, HELLO_NAME, &out, &err), &err);
    assert_failed(drbd_wire_get_hello(buf, len, &out, &err), &err);

    /* Too long a name, whether the payload holds it or not */
    memset(buf + HELLO_NAME, 'n', DRBD_RESOURCE_NAME_MAX + 1);
    stw_be_p(buf + HELLO_NAME_LEN, DRBD_RESOURCE_NAME_MAX + 1);
    assert_failed(drbd_wire_get_hello(buf,
                                      HELLO_NAME + DRBD_RESOURCE_NAME_MAX + 1,
                                      &out, &err), &err);
    stw_be_p(buf + HELLO_NAME_LEN, DRBD_RESOURCE_NAME_MAX);
    g_assert_cmpint(drbd_wire_get_hello(buf,
                                        HELLO_NAME + DRBD_RESOURCE_NAME_MAX,
                                        &out, &error_abort), ==, 0);
    g_assert_cmpuint(strlen(out.resource), ==, DRBD_RESOURCE_NAME_MAX);
    stw_be_p(buf + HELLO_NAME_LEN, 0xffff);
    assert_failed(drbd_wire_get_hello(buf,
                                      HELLO_NAME + DRBD_RESOURCE_NAME_MAX,
                                      &out, &err), &err);

    /* Name length larger or smaller than the payload */
    RESET();
    stw_be_p(buf + HELLO_NAME_LEN, 4);
    assert_failed(drbd_wire_get_hello(buf, len, &out, &err), &err);
    stw_be_p(buf + HELLO_NAME_LEN, 2);
    assert_failed(drbd_wire_get_hello(buf, len, &out, &err), &err);

    /* Embedded NUL, anywhere */
    RESET();
    buf[HELLO_NAME + 1] = '\0';
    assert_failed(drbd_wire_get_hello(buf, len, &out, &err), &err);
    RESET();
    buf[HELLO_NAME + 2] = '\0';
    assert_failed(drbd_wire_get_hello(buf, len, &out, &err), &err);
    RESET();
    buf[HELLO_NAME] = '\0';
    assert_failed(drbd_wire_get_hello(buf, len, &out, &err), &err);

    /* Versions */
    RESET();
    stl_be_p(buf + 0, 3);
    assert_failed(drbd_wire_get_hello(buf, len, &out, &err), &err);
    stl_be_p(buf + 0, 0);
    assert_failed(drbd_wire_get_hello(buf, len, &out, &err), &err);
    stl_be_p(buf + 0, 2);
    g_assert_cmpint(drbd_wire_get_hello(buf, len, &out, &error_abort), ==, 0);

    /* Unknown flags */
    RESET();
    stl_be_p(buf + 12, DRBD_HELLO_ALL + 1);
    assert_failed(drbd_wire_get_hello(buf, len, &out, &err), &err);

    /* Shorter than the fixed part, longer than any hello */
    RESET();
    assert_failed(drbd_wire_get_hello(buf, 0, &out, &err), &err);
    assert_failed(drbd_wire_get_hello(buf, HELLO_NAME - 1, &out, &err), &err);
    assert_failed(drbd_wire_get_hello(buf, sizeof(buf), &out, &err), &err);

#undef RESET
}

static void test_sizes_invalid(void)
{
    DrbdSizes in = {
        .disk_size = DISK_SIZE, .max_epoch_size = 100, .protocol = 'B',
    };
    g_autoptr(GByteArray) pkt = g_byte_array_new();
    static const uint8_t bad_protocols[] = { 0, 'a', 'c', 'D', '@', 0xff };
    uint8_t buf[SIZES_SIZE];
    Error *err = NULL;
    DrbdSizes out;
    size_t i;

    drbd_wire_put_sizes(pkt, &in);
    memcpy(buf, pkt->data + HDR, SIZES_SIZE);
    g_assert_cmpint(drbd_wire_get_sizes(buf, SIZES_SIZE, &out, &error_abort),
                    ==, 0);

    for (i = 0; i < ARRAY_SIZE(bad_protocols); i++) {
        buf[SIZES_PROTOCOL] = bad_protocols[i];
        assert_failed(drbd_wire_get_sizes(buf, SIZES_SIZE, &out, &err), &err);
    }
    buf[SIZES_PROTOCOL] = 'A';

    /* Bytes 13 to 15 name digests: unknown numbers are refused */
    for (i = SIZES_INTEGRITY; i < SIZES_SIZE; i++) {
        buf[i] = DRBD_DIGEST__MAX;
        assert_failed(drbd_wire_get_sizes(buf, SIZES_SIZE, &out, &err), &err);
        buf[i] = 0;
    }

    stq_be_p(buf, UINT64_MAX);
    assert_failed(drbd_wire_get_sizes(buf, SIZES_SIZE, &out, &err), &err);
    stq_be_p(buf, INT64_MAX);
    g_assert_cmpint(drbd_wire_get_sizes(buf, SIZES_SIZE, &out, &error_abort),
                    ==, 0);

    assert_failed(drbd_wire_get_sizes(buf, SIZES_SIZE - 1, &out, &err), &err);
    assert_failed(drbd_wire_get_sizes(buf, 0, &out, &err), &err);
}

static void test_state_invalid(void)
{
    uint8_t buf[STATE_SIZE + 1] = { 0 };
    Error *err = NULL;
    DrbdStatePacket out;
    unsigned v;

    g_assert_cmpint(drbd_wire_get_state(buf, STATE_SIZE, &out, &error_abort),
                    ==, 0);

    for (v = DRBD_WIRE_ROLE_MAX + 1; v <= 0xff; v++) {
        buf[0] = v;
        assert_failed(drbd_wire_get_state(buf, STATE_SIZE, &out, &err), &err);
    }
    buf[0] = DRBD_WIRE_ROLE_MAX;
    for (v = DRBD_WIRE_DISK_STATE_MAX + 1; v <= 0xff; v++) {
        buf[1] = v;
        assert_failed(drbd_wire_get_state(buf, STATE_SIZE, &out, &err), &err);
    }
    buf[1] = DRBD_WIRE_DISK_STATE_MAX;
    g_assert_cmpint(drbd_wire_get_state(buf, STATE_SIZE, &out, &error_abort),
                    ==, 0);

    buf[2] = 1;
    assert_failed(drbd_wire_get_state(buf, STATE_SIZE, &out, &err), &err);
    buf[2] = 0;
    buf[3] = 0x80;
    assert_failed(drbd_wire_get_state(buf, STATE_SIZE, &out, &err), &err);
    buf[3] = 0;

    assert_failed(drbd_wire_get_state(buf, STATE_SIZE + 1, &out, &err), &err);
    assert_failed(drbd_wire_get_state(buf, STATE_SIZE - 1, &out, &err), &err);
}

/* HELLO says whether its sender requires TLS and a shared-secret proof */
static void test_hello_flags(void)
{
    DrbdHello in = {
        .version_min = 2, .version_max = 2, .node_id = 1, .resource = "r0",
    };
    uint8_t buf[HELLO_NAME + 2];
    Error *err = NULL;
    DrbdHello out;
    uint32_t flags;

    g_assert_cmpuint(DRBD_HELLO_META_CHANNEL, ==, 1u << 0);
    g_assert_cmpuint(DRBD_HELLO_TLS, ==, 1u << 1);
    g_assert_cmpuint(DRBD_HELLO_AUTH, ==, 1u << 2);
    g_assert_cmpuint(DRBD_HELLO_ALL, ==, 7);

    /* Every combination of the known flags goes through as it is */
    for (flags = 0; flags <= DRBD_HELLO_ALL; flags++) {
        g_autoptr(GByteArray) pkt = g_byte_array_new();
        const uint8_t *payload;

        in.flags = flags;
        drbd_wire_put_hello(pkt, &in);
        payload = check_header(pkt, DRBD_CMD_HELLO);
        g_assert_cmpuint(ldl_be_p(payload + 12), ==, flags);
        memset(&out, 0xa5, sizeof(out));
        g_assert_cmpint(drbd_wire_get_hello(payload, pkt->len - HDR, &out,
                                            &error_abort), ==, 0);
        g_assert_cmpuint(out.flags, ==, flags);
        g_assert_cmpstr(out.resource, ==, "r0");
    }

    /* Bit 3 is the first unknown one: refused alone and with the others */
    in.flags = 0;
    {
        g_autoptr(GByteArray) pkt = g_byte_array_new();

        drbd_wire_put_hello(pkt, &in);
        g_assert_cmpuint(pkt->len - HDR, ==, sizeof(buf));
        memcpy(buf, pkt->data + HDR, sizeof(buf));
    }
    stl_be_p(buf + 12, HELLO_RESERVED);
    assert_failed_with(drbd_wire_get_hello(buf, sizeof(buf), &out, &err),
                       &err, "HELLO packet: unknown flags 0x8");
    stl_be_p(buf + 12, DRBD_HELLO_TLS | DRBD_HELLO_AUTH | HELLO_RESERVED);
    assert_failed_with(drbd_wire_get_hello(buf, sizeof(buf), &out, &err),
                       &err, "HELLO packet: unknown flags 0x8");
    stl_be_p(buf + 12, DRBD_HELLO_ALL | 0x80000000);
    assert_failed_with(drbd_wire_get_hello(buf, sizeof(buf), &out, &err),
                       &err, "HELLO packet: unknown flags 0x80000000");
    stl_be_p(buf + 12, DRBD_HELLO_TLS | DRBD_HELLO_AUTH);
    g_assert_cmpint(drbd_wire_get_hello(buf, sizeof(buf), &out,
                                        &error_abort), ==, 0);
}

/* SIZES byte 13 names the data-integrity digest */
static void test_sizes_integrity(void)
{
    static const char *const names[DRBD_DIGEST__MAX] = {
        "none", "md5", "sha1", "sha224", "sha256", "sha384", "sha512",
        "ripemd160", "crc32c",
    };
    static const uint8_t unknown[] = { DRBD_DIGEST__MAX, 10, 0x80, 0xff };
    DrbdSizes in = {
        .disk_size = DISK_SIZE, .max_epoch_size = 2048, .protocol = 'C',
    };
    uint8_t buf[SIZES_SIZE];
    Error *err = NULL;
    DrbdSizes out;
    unsigned i;

    g_assert_cmpuint(DRBD_DIGEST__MAX, ==, 9);
    for (i = 0; i < DRBD_DIGEST__MAX; i++) {
        g_autoptr(GByteArray) pkt = g_byte_array_new();
        const uint8_t *payload;

        g_assert_cmpstr(drbd_digest_name(i), ==, names[i]);
        in.integrity = i;
        drbd_wire_put_sizes(pkt, &in);
        payload = check_header(pkt, DRBD_CMD_SIZES);
        g_assert_cmpuint(pkt->len, ==, HDR + SIZES_SIZE);
        g_assert_cmpuint(payload[SIZES_PROTOCOL], ==, 'C');
        g_assert_cmpuint(payload[SIZES_INTEGRITY], ==, i);
        g_assert_cmpuint(payload[SIZES_VERIFY], ==, 0);
        g_assert_cmpuint(payload[SIZES_CSUMS], ==, 0);
        memset(&out, 0xa5, sizeof(out));
        g_assert_cmpint(drbd_wire_get_sizes(payload, SIZES_SIZE, &out,
                                            &error_abort), ==, 0);
        g_assert_cmpuint(out.integrity, ==, i);
        g_assert_cmpuint(out.protocol, ==, 'C');
        g_assert_cmpuint(out.disk_size, ==, DISK_SIZE);
        g_assert_cmpuint(out.max_epoch_size, ==, 2048);
    }
    g_assert_cmpstr(drbd_digest_name(DRBD_DIGEST__MAX), ==, "unknown");
    g_assert_cmpstr(drbd_digest_name(UINT32_MAX), ==, "unknown");

    memset(buf, 0, sizeof(buf));
    stq_be_p(buf, DISK_SIZE);
    buf[SIZES_PROTOCOL] = 'A';
    for (i = 0; i < ARRAY_SIZE(unknown); i++) {
        g_autofree char *msg =
            g_strdup_printf("SIZES packet: unknown data-integrity digest %u",
                            unknown[i]);

        buf[SIZES_INTEGRITY] = unknown[i];
        memset(&out, 0xa5, sizeof(out));
        assert_failed_with(drbd_wire_get_sizes(buf, SIZES_SIZE, &out, &err),
                           &err, msg);
        /* a decoder that fails leaves its output alone */
        g_assert_cmpuint(out.protocol, ==, 0xa5);
    }
    buf[SIZES_INTEGRITY] = DRBD_DIGEST_CRC32C;
    g_assert_cmpint(drbd_wire_get_sizes(buf, SIZES_SIZE, &out, &error_abort),
                    ==, 0);
    g_assert_cmpuint(out.integrity, ==, DRBD_DIGEST_CRC32C);
}

/* AUTH_CHALLENGE: be32 digest, 32-byte nonce; only HMAC digests */
static void test_auth_challenge(void)
{
    static const uint32_t bad_lengths[] = {
        0, 4, AUTH_CHALLENGE_SIZE - 1, AUTH_CHALLENGE_SIZE + 1, 64,
        DRBD_WIRE_MAX_PAYLOAD, UINT32_MAX,
    };
    uint8_t buf[AUTH_CHALLENGE_SIZE + 1];
    uint8_t hdr[HDR];
    Error *err = NULL;
    DrbdAuthChallenge out;
    DrbdHeader h;
    size_t i;

    g_assert_cmpstr(drbd_cmd_name(DRBD_CMD_AUTH_CHALLENGE), ==,
                    "AUTH_CHALLENGE");
    g_assert_cmpuint(DRBD_CMD_AUTH_CHALLENGE, ==, 22);

    for (i = 0; i < ARRAY_SIZE(hmac_digests); i++) {
        g_autoptr(GByteArray) pkt = g_byte_array_new();
        DrbdAuthChallenge in = { .digest = hmac_digests[i] };
        const uint8_t *payload;

        fill_pattern(in.nonce, sizeof(in.nonce), i);
        drbd_wire_put_auth_challenge(pkt, &in);
        payload = check_header(pkt, DRBD_CMD_AUTH_CHALLENGE);
        g_assert_cmpuint(pkt->len, ==, HDR + AUTH_CHALLENGE_SIZE);
        g_assert_cmpuint(ldl_be_p(payload + AUTH_CHALLENGE_DIGEST), ==,
                         in.digest);
        g_assert_cmpmem(payload + AUTH_CHALLENGE_NONCE, DRBD_AUTH_NONCE_SIZE,
                        in.nonce, sizeof(in.nonce));

        memset(&out, 0xa5, sizeof(out));
        g_assert_cmpint(drbd_wire_get_auth_challenge(payload,
                                                     AUTH_CHALLENGE_SIZE,
                                                     &out, &error_abort),
                        ==, 0);
        g_assert_cmpuint(out.digest, ==, in.digest);
        g_assert_cmpmem(out.nonce, sizeof(out.nonce), in.nonce,
                        sizeof(in.nonce));
    }

    /* none, crc32c (no key) and numbers past the table key no HMAC */
    memset(buf, 0x77, sizeof(buf));
    for (i = 0; i < ARRAY_SIZE(non_hmac_digests); i++) {
        g_autofree char *msg =
            g_strdup_printf("AUTH_CHALLENGE packet: %" PRIu32 " is not an "
                            "HMAC digest algorithm", non_hmac_digests[i]);

        stl_be_p(buf + AUTH_CHALLENGE_DIGEST, non_hmac_digests[i]);
        memset(&out, 0xa5, sizeof(out));
        assert_failed_with(drbd_wire_get_auth_challenge(buf,
                                                        AUTH_CHALLENGE_SIZE,
                                                        &out, &err),
                           &err, msg);
        g_assert_cmpuint(out.digest, ==, 0xa5a5a5a5);
        g_assert_cmpuint(out.nonce[0], ==, 0xa5);
    }

    /* A payload of any other length, a byte short or long included */
    stl_be_p(buf + AUTH_CHALLENGE_DIGEST, DRBD_DIGEST_SHA256);
    g_assert_cmpint(drbd_wire_get_auth_challenge(buf, AUTH_CHALLENGE_SIZE,
                                                 &out, &error_abort), ==, 0);
    for (i = 0; i <= sizeof(buf); i++) {
        if (i != AUTH_CHALLENGE_SIZE) {
            assert_failed(drbd_wire_get_auth_challenge(buf, i, &out, &err),
                          &err);
        }
    }
    assert_failed_with(drbd_wire_get_auth_challenge(buf,
                                                    AUTH_CHALLENGE_SIZE - 1,
                                                    &out, &err),
                       &err, "AUTH_CHALLENGE packet: payload is 35 bytes "
                       "(expected 36)");

    /* ... and a header that announces one */
    make_header(hdr, DRBD_WIRE_MAGIC, DRBD_CMD_AUTH_CHALLENGE, 0,
                AUTH_CHALLENGE_SIZE);
    g_assert_cmpint(drbd_wire_get_header(hdr, &h, &error_abort), ==, 0);
    g_assert_cmpuint(h.cmd, ==, DRBD_CMD_AUTH_CHALLENGE);
    g_assert_cmpuint(h.length, ==, AUTH_CHALLENGE_SIZE);
    for (i = 0; i < ARRAY_SIZE(bad_lengths); i++) {
        make_header(hdr, DRBD_WIRE_MAGIC, DRBD_CMD_AUTH_CHALLENGE, 0,
                    bad_lengths[i]);
        assert_failed(drbd_wire_get_header(hdr, &h, &err), &err);
    }
    make_header(hdr, DRBD_WIRE_MAGIC, DRBD_CMD_AUTH_CHALLENGE, 0, 35);
    assert_failed_with(drbd_wire_get_header(hdr, &h, &err), &err,
                       "AUTH_CHALLENGE packet: payload length 35 is "
                       "impossible (expected 36 bytes)");
}

/* AUTH_RESPONSE: the HMAC alone, 16 to 64 bytes */
static void test_auth_response(void)
{
    static const uint32_t bad_lengths[] = {
        0, 1, DRBD_AUTH_DIGEST_MIN - 1, DRBD_AUTH_DIGEST_MAX + 1, 128,
        DRBD_WIRE_MAX_PAYLOAD, UINT32_MAX,
    };
    uint8_t buf[DRBD_AUTH_DIGEST_MAX + 1];
    uint8_t hdr[HDR];
    Error *err = NULL;
    DrbdAuthResponse out;
    DrbdHeader h;
    uint32_t len;
    size_t i;

    g_assert_cmpstr(drbd_cmd_name(DRBD_CMD_AUTH_RESPONSE), ==,
                    "AUTH_RESPONSE");
    g_assert_cmpuint(DRBD_CMD_AUTH_RESPONSE, ==, 23);

    for (len = DRBD_AUTH_DIGEST_MIN; len <= DRBD_AUTH_DIGEST_MAX; len++) {
        g_autoptr(GByteArray) pkt = g_byte_array_new();
        DrbdAuthResponse in = { .len = len };
        const uint8_t *payload;

        fill_pattern(in.digest, len, len);
        drbd_wire_put_auth_response(pkt, &in);
        payload = check_header(pkt, DRBD_CMD_AUTH_RESPONSE);
        g_assert_cmpuint(pkt->len, ==, HDR + len);
        g_assert_cmpmem(payload, len, in.digest, len);

        memset(&out, 0xa5, sizeof(out));
        g_assert_cmpint(drbd_wire_get_auth_response(payload, len, &out,
                                                    &error_abort), ==, 0);
        g_assert_cmpuint(out.len, ==, len);
        g_assert_cmpmem(out.digest, out.len, in.digest, len);
    }

    /* Shorter or longer than any HMAC we key */
    fill_pattern(buf, sizeof(buf), 3);
    for (i = 0; i <= sizeof(buf); i++) {
        if (i >= DRBD_AUTH_DIGEST_MIN && i <= DRBD_AUTH_DIGEST_MAX) {
            continue;
        }
        memset(&out, 0xa5, sizeof(out));
        assert_failed(drbd_wire_get_auth_response(buf, i, &out, &err), &err);
        g_assert_cmpuint(out.len, ==, 0xa5a5a5a5);
    }
    assert_failed_with(drbd_wire_get_auth_response(buf, 15, &out, &err),
                       &err, "AUTH_RESPONSE packet: payload is 15 bytes "
                       "(expected 16 to 64)");
    assert_failed_with(drbd_wire_get_auth_response(buf, 65, &out, &err),
                       &err, "AUTH_RESPONSE packet: payload is 65 bytes "
                       "(expected 16 to 64)");

    /* The header bounds it the same */
    make_header(hdr, DRBD_WIRE_MAGIC, DRBD_CMD_AUTH_RESPONSE, 0,
                DRBD_AUTH_DIGEST_MIN);
    g_assert_cmpint(drbd_wire_get_header(hdr, &h, &error_abort), ==, 0);
    make_header(hdr, DRBD_WIRE_MAGIC, DRBD_CMD_AUTH_RESPONSE, 0,
                DRBD_AUTH_DIGEST_MAX);
    g_assert_cmpint(drbd_wire_get_header(hdr, &h, &error_abort), ==, 0);
    g_assert_cmpuint(h.length, ==, DRBD_AUTH_DIGEST_MAX);
    for (i = 0; i < ARRAY_SIZE(bad_lengths); i++) {
        make_header(hdr, DRBD_WIRE_MAGIC, DRBD_CMD_AUTH_RESPONSE, 0,
                    bad_lengths[i]);
        assert_failed(drbd_wire_get_header(hdr, &h, &err), &err);
    }
    make_header(hdr, DRBD_WIRE_MAGIC, DRBD_CMD_AUTH_RESPONSE, 0, 65);
    assert_failed_with(drbd_wire_get_header(hdr, &h, &err), &err,
                       "AUTH_RESPONSE packet: payload length 65 is "
                       "impossible (expected 16 to 64 bytes)");
}

/* SIZES byte 14 names the verify digest, numbered as the integrity one */
static void test_sizes_verify(void)
{
    static const uint8_t unknown[] = { DRBD_DIGEST__MAX, 10, 0x80, 0xff };
    DrbdSizes in = {
        .disk_size = DISK_SIZE, .max_epoch_size = 2048, .protocol = 'C',
    };
    uint8_t buf[SIZES_SIZE];
    Error *err = NULL;
    DrbdSizes out;
    unsigned i;

    for (i = 0; i < DRBD_DIGEST__MAX; i++) {
        g_autoptr(GByteArray) pkt = g_byte_array_new();
        const uint8_t *payload;

        /* a different integrity digest: the two fields are not mixed up */
        in.verify = i;
        in.integrity = DRBD_DIGEST__MAX - 1 - i;
        drbd_wire_put_sizes(pkt, &in);
        payload = check_header(pkt, DRBD_CMD_SIZES);
        g_assert_cmpuint(pkt->len, ==, HDR + SIZES_SIZE);
        g_assert_cmpuint(payload[SIZES_INTEGRITY], ==, in.integrity);
        g_assert_cmpuint(payload[SIZES_VERIFY], ==, i);
        g_assert_cmpuint(payload[SIZES_CSUMS], ==, 0);
        memset(&out, 0xa5, sizeof(out));
        g_assert_cmpint(drbd_wire_get_sizes(payload, SIZES_SIZE, &out,
                                            &error_abort), ==, 0);
        g_assert_cmpuint(out.verify, ==, i);
        g_assert_cmpuint(out.integrity, ==, in.integrity);
        g_assert_cmpuint(out.protocol, ==, 'C');
        g_assert_cmpuint(out.disk_size, ==, DISK_SIZE);
    }

    memset(buf, 0, sizeof(buf));
    stq_be_p(buf, DISK_SIZE);
    buf[SIZES_PROTOCOL] = 'B';
    for (i = 0; i < ARRAY_SIZE(unknown); i++) {
        g_autofree char *msg =
            g_strdup_printf("SIZES packet: unknown verify digest %u",
                            unknown[i]);

        buf[SIZES_VERIFY] = unknown[i];
        memset(&out, 0xa5, sizeof(out));
        assert_failed_with(drbd_wire_get_sizes(buf, SIZES_SIZE, &out, &err),
                           &err, msg);
        /* a decoder that fails leaves its output alone */
        g_assert_cmpuint(out.protocol, ==, 0xa5);
        g_assert_cmpuint(out.verify, ==, 0xa5);
    }
    buf[SIZES_VERIFY] = DRBD_DIGEST_CRC32C;
    g_assert_cmpint(drbd_wire_get_sizes(buf, SIZES_SIZE, &out, &error_abort),
                    ==, 0);
    g_assert_cmpuint(out.verify, ==, DRBD_DIGEST_CRC32C);
    g_assert_cmpuint(out.integrity, ==, DRBD_DIGEST_NONE);
}

/*
 * OV_REQUEST and OV_REPLY: the fixed part at the documented offsets, then
 * one digest per 4 KiB block (the last may be short), or an 8-byte mask;
 * what is encoded decodes to the same, and encodes back to the same bytes
 */
static void test_round_trip_ov(void)
{
    /* A disk whose last 4 KiB block is short: 1536 bytes */
    const uint64_t odd_disk = DISK_SIZE + 1536;
    const struct {
        uint16_t cmd;
        uint64_t offset;
        uint32_t bytes;
        uint32_t flags;
        uint32_t digest_size;
        uint64_t mismatch;
        uint64_t disk_size;
    } cases[] = {
        { DRBD_CMD_OV_REQUEST, 0, 4096, 0, 0, 0, DISK_SIZE },
        { DRBD_CMD_OV_REQUEST, 1 * MiB, DRBD_OV_MAX_BYTES, 0, 0, 0,
          DISK_SIZE },
        { DRBD_CMD_OV_REQUEST, 0, 4096, DRBD_OV_DIGESTS, 32, 0, DISK_SIZE },
        { DRBD_CMD_OV_REQUEST, 1 * MiB, DRBD_OV_MAX_BYTES, DRBD_OV_DIGESTS,
          32, 0, DISK_SIZE },
        /* the last range, partial, ends at the end of the disk */
        { DRBD_CMD_OV_REQUEST, DISK_SIZE - 8192, 8192 + 1536,
          DRBD_OV_DIGESTS, 32, 0, odd_disk },
        { DRBD_CMD_OV_REQUEST, DISK_SIZE, 1536, 0, 0, 0, odd_disk },
        { DRBD_CMD_OV_REQUEST, DISK_SIZE - DRBD_OV_MAX_BYTES,
          DRBD_OV_MAX_BYTES, DRBD_OV_DIGESTS, 64, 0, DISK_SIZE },
        { DRBD_CMD_OV_REPLY, 0, 4096, DRBD_OV_DIGESTS, 4, 0, DISK_SIZE },
        { DRBD_CMD_OV_REPLY, 64 * KiB, DRBD_OV_MAX_BYTES, DRBD_OV_DIGESTS,
          32, 0, DISK_SIZE },
        { DRBD_CMD_OV_REPLY, DISK_SIZE - 8192, 8192 + 1536, DRBD_OV_DIGESTS,
          20, 0, odd_disk },
        /* the largest payload of all */
        { DRBD_CMD_OV_REPLY, 0, DRBD_OV_MAX_BYTES, DRBD_OV_DIGESTS, 64, 0,
          DISK_SIZE },
        { DRBD_CMD_OV_REPLY, 0, 4096, DRBD_OV_RESULT, 0, 0, DISK_SIZE },
        { DRBD_CMD_OV_REPLY, 0, 4096, DRBD_OV_RESULT, 0, 1, DISK_SIZE },
        { DRBD_CMD_OV_REPLY, 4096, DRBD_OV_MAX_BYTES, DRBD_OV_RESULT, 0,
          1ULL << 63, DISK_SIZE },
        { DRBD_CMD_OV_REPLY, 4096, DRBD_OV_MAX_BYTES, DRBD_OV_RESULT, 0,
          UINT64_MAX, DISK_SIZE },
        { DRBD_CMD_OV_REPLY, DISK_SIZE - 8192, 8192 + 1536, DRBD_OV_RESULT,
          0, 0x5, odd_disk },
        { DRBD_CMD_OV_REPLY, 0, 4096, DRBD_OV_SKIPPED, 0, 0, DISK_SIZE },
        { DRBD_CMD_OV_REPLY, DISK_SIZE, 1536, DRBD_OV_SKIPPED, 0, 0,
          odd_disk },
    };
    size_t i, d;

    g_assert_cmpuint(DRBD_OV_BLOCK, ==, 4096);
    g_assert_cmpuint(DRBD_OV_MAX_BLOCKS, ==, 64);
    g_assert_cmpuint(DRBD_OV_MAX_BYTES, ==, 256 * KiB);
    g_assert_cmpuint(DRBD_OV_DIGESTS, ==, 1u << 0);
    g_assert_cmpuint(DRBD_OV_RESULT, ==, 1u << 1);
    g_assert_cmpuint(DRBD_OV_SKIPPED, ==, 1u << 2);
    g_assert_cmpuint(drbd_ov_blocks(512), ==, 1);
    g_assert_cmpuint(drbd_ov_blocks(4096), ==, 1);
    g_assert_cmpuint(drbd_ov_blocks(4096 + 512), ==, 2);
    g_assert_cmpuint(drbd_ov_blocks(DRBD_OV_MAX_BYTES), ==, 64);
    g_assert_cmpuint(OV_MAX_SIZE, <=, DRBD_WIRE_MAX_PAYLOAD);

    for (i = 0; i < ARRAY_SIZE(cases); i++) {
        uint16_t cmd = cases[i].cmd;
        uint32_t flags = cases[i].flags;
        uint32_t dsize = cases[i].digest_size;
        uint32_t blocks = drbd_ov_blocks(cases[i].bytes);
        size_t dlen = flags & DRBD_OV_DIGESTS ? (size_t)blocks * dsize : 0;
        g_autoptr(GByteArray) pkt = ov_packet(cmd, cases[i].offset,
                                              cases[i].bytes, flags, dsize,
                                              cases[i].mismatch);
        g_autoptr(GByteArray) again = g_byte_array_new();
        g_autofree uint8_t *digests = ov_digests(cases[i].bytes, dsize);
        const uint8_t *payload = check_header(pkt, cmd);
        size_t len = pkt->len - HDR;
        DrbdOvPacket out;

        g_assert_cmpuint(len, ==, OV_SIZE + dlen +
                         (flags & DRBD_OV_RESULT ? 8 : 0));
        g_assert_cmpuint(ldq_be_p(payload + OV_OFFSET), ==, cases[i].offset);
        g_assert_cmpuint(ldq_be_p(payload + OV_ID), ==, OV_COOKIE);
        g_assert_cmpuint(ldl_be_p(payload + OV_BYTES), ==, cases[i].bytes);
        g_assert_cmpuint(ldl_be_p(payload + OV_FLAGS), ==, flags);
        if (flags & DRBD_OV_DIGESTS) {
            g_assert_cmpmem(payload + OV_SIZE, dlen, digests, dlen);
        }
        if (flags & DRBD_OV_RESULT) {
            g_assert_cmpuint(ldq_be_p(payload + OV_SIZE), ==,
                             cases[i].mismatch);
        }

        memset(&out, 0xa5, sizeof(out));
        g_assert_cmpint(drbd_wire_get_ov(cmd, payload, len,
                                         cases[i].disk_size, dsize, &out,
                                         &error_abort), ==, 0);
        g_assert_cmpuint(out.offset, ==, cases[i].offset);
        g_assert_cmpuint(out.id, ==, OV_COOKIE);
        g_assert_cmpuint(out.bytes, ==, cases[i].bytes);
        g_assert_cmpuint(out.flags, ==, flags);
        if (flags & DRBD_OV_DIGESTS) {
            g_assert_true(out.digests == payload + OV_SIZE);
            g_assert_cmpuint(out.digest_size, ==, dsize);
            g_assert_cmpmem(out.digests, dlen, digests, dlen);
        } else {
            g_assert_null(out.digests);
            g_assert_cmpuint(out.digest_size, ==, 0);
        }
        g_assert_cmpuint(out.mismatch, ==, cases[i].mismatch);

        /* What decoded encodes to the very same packet */
        drbd_wire_put_ov(again, cmd, &out);
        g_assert_cmpmem(again->data, again->len, pkt->data, pkt->len);

        /* Without a device size the range is not checked */
        g_assert_cmpint(drbd_wire_get_ov(cmd, payload, len, 0, dsize, &out,
                                         &error_abort), ==, 0);

        /* Without digests, the receiver's verify-alg does not matter */
        if (!(flags & DRBD_OV_DIGESTS)) {
            for (d = 0; d < ARRAY_SIZE(digest_lens); d++) {
                g_assert_cmpint(drbd_wire_get_ov(cmd, payload, len,
                                                 cases[i].disk_size,
                                                 digest_lens[d], &out,
                                                 &error_abort), ==, 0);
                g_assert_null(out.digests);
            }
        }
    }

    /* Every digest length of every verify-alg, for a whole request */
    for (d = 0; d < ARRAY_SIZE(digest_lens); d++) {
        uint32_t dsize = digest_lens[d];
        g_autoptr(GByteArray) pkt = ov_packet(DRBD_CMD_OV_REPLY, 0,
                                              DRBD_OV_MAX_BYTES,
                                              DRBD_OV_DIGESTS, dsize, 0);
        const uint8_t *payload = check_header(pkt, DRBD_CMD_OV_REPLY);
        DrbdOvPacket out;

        g_assert_cmpuint(pkt->len, ==, HDR + OV_SIZE + 64 * dsize);
        g_assert_cmpint(drbd_wire_get_ov(DRBD_CMD_OV_REPLY, payload,
                                         pkt->len - HDR, DISK_SIZE, dsize,
                                         &out, &error_abort), ==, 0);
        g_assert_cmpuint(out.digest_size, ==, dsize);
    }
}

/*
 * What a peer may send wrong in an OV packet: every one refused, with
 * an Error, and the output left alone
 */
static void test_ov_invalid(void)
{
    static const uint16_t wrong_cmds[] = {
        0, DRBD_CMD_DATA, DRBD_CMD_RS_DATA, DRBD_CMD_WRITE_ACK,
        CMD_RESERVED, DRBD_CMD_AUTH_RESPONSE, DRBD_CMD__MAX, 0xffff,
    };
    static const uint32_t bad_reply_kinds[] = {
        0, DRBD_OV_DIGESTS | DRBD_OV_RESULT,
        DRBD_OV_DIGESTS | DRBD_OV_SKIPPED, DRBD_OV_RESULT | DRBD_OV_SKIPPED,
        DRBD_OV_REPLY_KINDS,
    };
    /* A request of 3 blocks with digests, and a reply with a result */
    g_autoptr(GByteArray) req = ov_packet(DRBD_CMD_OV_REQUEST, 8192,
                                          3 * 4096, DRBD_OV_DIGESTS,
                                          OV_DIGEST, 0);
    g_autoptr(GByteArray) res = ov_packet(DRBD_CMD_OV_REPLY, 8192, 3 * 4096,
                                          DRBD_OV_RESULT, 0, 0x7);
    const size_t req_len = OV_SIZE + 3 * OV_DIGEST;
    g_autofree uint8_t *buf = g_malloc0(OV_MAX_SIZE + 64);
    g_autofree uint8_t *big = NULL;
    Error *err = NULL;
    DrbdOvPacket p;
    uint8_t hdr[HDR];
    DrbdHeader h;
    size_t i, n;
    int ret;

#define RESET(pkt) memcpy(buf, (pkt)->data + HDR, (pkt)->len - HDR)
#define GET(cmd, len, disk, dsize) \
    drbd_wire_get_ov(cmd, buf, len, disk, dsize, &p, &err)
#define REFUSED(cmd, len, disk, dsize) \
    do { \
        memset(&p, 0xa5, sizeof(p)); \
        assert_failed(GET(cmd, len, disk, dsize), &err); \
        g_assert_cmpuint(p.flags, ==, 0xa5a5a5a5); \
    } while (0)
#define REFUSED_WITH(cmd, len, disk, dsize, msg) \
    do { \
        memset(&p, 0xa5, sizeof(p)); \
        assert_failed_with(GET(cmd, len, disk, dsize), &err, msg); \
        g_assert_cmpuint(p.flags, ==, 0xa5a5a5a5); \
    } while (0)

    g_assert_cmpuint(req->len - HDR, ==, req_len);
    g_assert_cmpuint(res->len - HDR, ==, OV_RESULT_SIZE);
    RESET(req);
    g_assert_cmpint(drbd_wire_get_ov(DRBD_CMD_OV_REQUEST, buf, req_len,
                                     DISK_SIZE, OV_DIGEST, &p, &error_abort),
                    ==, 0);

    /* Truncated: every prefix, from a buffer of exactly its size */
    for (n = 0; n < req_len; n++) {
        g_autofree uint8_t *cut = g_memdup2(req->data + HDR, n);

        assert_failed(drbd_wire_get_ov(DRBD_CMD_OV_REQUEST, cut, n,
                                       DISK_SIZE, OV_DIGEST, &p, &err),
                      &err);
    }
    REFUSED_WITH(DRBD_CMD_OV_REQUEST, OV_SIZE - 1, DISK_SIZE, OV_DIGEST,
                 "OV_REQUEST packet: payload is 23 bytes (expected at "
                 "least 24)");
    REFUSED_WITH(DRBD_CMD_OV_REQUEST, req_len - OV_DIGEST, DISK_SIZE,
                 OV_DIGEST, "OV_REQUEST packet: payload is 88 bytes "
                 "(expected 120)");
    RESET(res);
    REFUSED_WITH(DRBD_CMD_OV_REPLY, OV_SIZE, DISK_SIZE, OV_DIGEST,
                 "OV_REPLY packet: payload is 24 bytes (expected 32)");
    REFUSED(DRBD_CMD_OV_REPLY, OV_RESULT_SIZE - 1, DISK_SIZE, OV_DIGEST);

    /* Too long: a byte, a digest, a mask where none belongs */
    RESET(req);
    REFUSED(DRBD_CMD_OV_REQUEST, req_len + 1, DISK_SIZE, OV_DIGEST);
    REFUSED_WITH(DRBD_CMD_OV_REQUEST, req_len + OV_DIGEST, DISK_SIZE,
                 OV_DIGEST, "OV_REQUEST packet: payload is 152 bytes "
                 "(expected 120)");
    RESET(res);
    REFUSED(DRBD_CMD_OV_REPLY, OV_RESULT_SIZE + 1, DISK_SIZE, OV_DIGEST);
    REFUSED(DRBD_CMD_OV_REPLY, OV_RESULT_SIZE + 8, DISK_SIZE, OV_DIGEST);
    stl_be_p(buf + OV_FLAGS, DRBD_OV_SKIPPED);
    g_assert_cmpint(GET(DRBD_CMD_OV_REPLY, OV_SIZE, DISK_SIZE, OV_DIGEST),
                    ==, 0);
    REFUSED_WITH(DRBD_CMD_OV_REPLY, OV_RESULT_SIZE, DISK_SIZE, OV_DIGEST,
                 "OV_REPLY packet: payload is 32 bytes (expected 24)");
    stl_be_p(buf + OV_FLAGS, 0);
    g_assert_cmpint(GET(DRBD_CMD_OV_REQUEST, OV_SIZE, DISK_SIZE, OV_DIGEST),
                    ==, 0);
    REFUSED(DRBD_CMD_OV_REQUEST, OV_SIZE + OV_DIGEST, DISK_SIZE, OV_DIGEST);
    REFUSED(DRBD_CMD_OV_REQUEST, OV_SIZE + 3 * OV_DIGEST, DISK_SIZE,
            OV_DIGEST);

    /* Unknown flags, alone and with known ones */
    RESET(req);
    stl_be_p(buf + OV_FLAGS, OV_RESERVED);
    REFUSED_WITH(DRBD_CMD_OV_REQUEST, OV_SIZE, DISK_SIZE, OV_DIGEST,
                 "OV_REQUEST packet: unknown flags 0x8");
    stl_be_p(buf + OV_FLAGS, DRBD_OV_DIGESTS | 0x80000000);
    REFUSED_WITH(DRBD_CMD_OV_REQUEST, req_len, DISK_SIZE, OV_DIGEST,
                 "OV_REQUEST packet: unknown flags 0x80000000");
    RESET(res);
    stl_be_p(buf + OV_FLAGS, DRBD_OV_RESULT | OV_RESERVED);
    REFUSED_WITH(DRBD_CMD_OV_REPLY, OV_RESULT_SIZE, DISK_SIZE, OV_DIGEST,
                 "OV_REPLY packet: unknown flags 0x8");
    stl_be_p(buf + OV_FLAGS, UINT32_MAX);
    REFUSED_WITH(DRBD_CMD_OV_REPLY, OV_RESULT_SIZE, DISK_SIZE, OV_DIGEST,
                 "OV_REPLY packet: unknown flags 0xfffffff8");

    /* A request carries digests or nothing: no result, no skip */
    RESET(req);
    stl_be_p(buf + OV_FLAGS, DRBD_OV_RESULT);
    REFUSED_WITH(DRBD_CMD_OV_REQUEST, OV_RESULT_SIZE, DISK_SIZE, OV_DIGEST,
                 "OV_REQUEST packet: unknown flags 0x2");
    stl_be_p(buf + OV_FLAGS, DRBD_OV_SKIPPED);
    REFUSED_WITH(DRBD_CMD_OV_REQUEST, OV_SIZE, DISK_SIZE, OV_DIGEST,
                 "OV_REQUEST packet: unknown flags 0x4");
    stl_be_p(buf + OV_FLAGS, DRBD_OV_DIGESTS | DRBD_OV_RESULT);
    REFUSED(DRBD_CMD_OV_REQUEST, req_len, DISK_SIZE, OV_DIGEST);
    REFUSED(DRBD_CMD_OV_REQUEST, req_len + 8, DISK_SIZE, OV_DIGEST);

    /* A reply has exactly one kind: not none, not two or three */
    for (i = 0; i < ARRAY_SIZE(bad_reply_kinds); i++) {
        uint32_t f = bad_reply_kinds[i];
        g_autofree char *msg =
            g_strdup_printf("OV_REPLY packet: flags 0x%" PRIx32 " are not "
                            "exactly one of those it may have (0x7)", f);

        RESET(req);
        stl_be_p(buf + OV_FLAGS, f);
        /* whatever length the flags may suggest */
        REFUSED_WITH(DRBD_CMD_OV_REPLY, OV_SIZE, DISK_SIZE, OV_DIGEST, msg);
        REFUSED_WITH(DRBD_CMD_OV_REPLY, OV_RESULT_SIZE, DISK_SIZE, OV_DIGEST,
                     msg);
        REFUSED_WITH(DRBD_CMD_OV_REPLY, req_len, DISK_SIZE, OV_DIGEST, msg);
        REFUSED_WITH(DRBD_CMD_OV_REPLY, req_len + 8, DISK_SIZE, OV_DIGEST,
                     msg);
    }

    /* Digests to a node without a verify-alg */
    RESET(req);
    REFUSED_WITH(DRBD_CMD_OV_REQUEST, req_len, DISK_SIZE, 0,
                 "OV_REQUEST packet carries digests, but this node has no "
                 "verify-alg");
    REFUSED_WITH(DRBD_CMD_OV_REPLY, req_len, DISK_SIZE, 0,
                 "OV_REPLY packet carries digests, but this node has no "
                 "verify-alg");
    REFUSED(DRBD_CMD_OV_REQUEST, OV_SIZE, DISK_SIZE, 0);
    /* ... while a result or a skip needs none */
    RESET(res);
    g_assert_cmpint(GET(DRBD_CMD_OV_REPLY, OV_RESULT_SIZE, DISK_SIZE, 0),
                    ==, 0);
    g_assert_cmpuint(p.mismatch, ==, 0x7);

    /* Digests of another length than blocks * the verify-alg's */
    RESET(req);
    for (i = 0; i < ARRAY_SIZE(digest_lens); i++) {
        if (digest_lens[i] != OV_DIGEST) {
            REFUSED(DRBD_CMD_OV_REQUEST, req_len, DISK_SIZE, digest_lens[i]);
            REFUSED(DRBD_CMD_OV_REPLY, req_len, DISK_SIZE, digest_lens[i]);
        }
    }
    /* 96 bytes of digests would be 6 of 16 bytes, but the range has 3 */
    REFUSED_WITH(DRBD_CMD_OV_REQUEST, req_len, DISK_SIZE, 16,
                 "OV_REQUEST packet: payload is 120 bytes (expected 72)");
    /* ... or 4 blocks of 24, but the range has 3 */
    REFUSED(DRBD_CMD_OV_REQUEST, req_len, DISK_SIZE, 24);
    /* The range says 2 or 4 blocks, the digests are for 3 */
    stl_be_p(buf + OV_BYTES, 2 * 4096);
    REFUSED_WITH(DRBD_CMD_OV_REQUEST, req_len, DISK_SIZE, OV_DIGEST,
                 "OV_REQUEST packet: payload is 120 bytes (expected 88)");
    stl_be_p(buf + OV_BYTES, 4 * 4096);
    REFUSED(DRBD_CMD_OV_REQUEST, req_len, DISK_SIZE, OV_DIGEST);
    /* 2 blocks and 512 bytes are 3 blocks */
    stl_be_p(buf + OV_BYTES, 2 * 4096 + 512);
    g_assert_cmpint(GET(DRBD_CMD_OV_REQUEST, req_len, DISK_SIZE, OV_DIGEST),
                    ==, 0);

    /* The range: zero bytes, too many, unaligned, beyond the disk */
    RESET(req);
    stl_be_p(buf + OV_BYTES, 0);
    REFUSED_WITH(DRBD_CMD_OV_REQUEST, OV_SIZE, DISK_SIZE, OV_DIGEST,
                 "OV_REQUEST packet: request of zero bytes");
    REFUSED(DRBD_CMD_OV_REQUEST, req_len, 0, OV_DIGEST);
    stl_be_p(buf + OV_BYTES, DRBD_OV_MAX_BYTES + 4096);
    stl_be_p(buf + OV_FLAGS, 0);
    REFUSED_WITH(DRBD_CMD_OV_REQUEST, OV_SIZE, DISK_SIZE, OV_DIGEST,
                 "OV_REQUEST packet: 266240 bytes is more than the limit "
                 "of 262144");
    stl_be_p(buf + OV_BYTES, DRBD_OV_MAX_BYTES + 512);
    REFUSED(DRBD_CMD_OV_REQUEST, OV_SIZE, 0, OV_DIGEST);
    stl_be_p(buf + OV_BYTES, UINT32_MAX & ~511u);
    REFUSED(DRBD_CMD_OV_REQUEST, OV_SIZE, 0, OV_DIGEST);
    stl_be_p(buf + OV_BYTES, UINT32_MAX);
    REFUSED(DRBD_CMD_OV_REQUEST, OV_SIZE, 0, OV_DIGEST);
    /* the largest is fine */
    stl_be_p(buf + OV_BYTES, DRBD_OV_MAX_BYTES);
    g_assert_cmpint(GET(DRBD_CMD_OV_REQUEST, OV_SIZE, 0, OV_DIGEST), ==, 0);
    stl_be_p(buf + OV_BYTES, 4096 + 1);
    REFUSED(DRBD_CMD_OV_REQUEST, OV_SIZE, DISK_SIZE, OV_DIGEST);
    stl_be_p(buf + OV_BYTES, 4096);
    stq_be_p(buf + OV_OFFSET, 4096 + 100);
    REFUSED(DRBD_CMD_OV_REQUEST, OV_SIZE, DISK_SIZE, OV_DIGEST);
    REFUSED(DRBD_CMD_OV_REQUEST, OV_SIZE, 0, OV_DIGEST);
    stq_be_p(buf + OV_OFFSET, DISK_SIZE - 2048);
    REFUSED_WITH(DRBD_CMD_OV_REQUEST, OV_SIZE, DISK_SIZE, OV_DIGEST,
                 "OV_REQUEST packet: offset 67106816 + 4096 bytes is beyond "
                 "the device (67108864 bytes)");
    g_assert_cmpint(GET(DRBD_CMD_OV_REQUEST, OV_SIZE, 0, OV_DIGEST), ==, 0);
    stq_be_p(buf + OV_OFFSET, DISK_SIZE);
    REFUSED(DRBD_CMD_OV_REQUEST, OV_SIZE, DISK_SIZE, OV_DIGEST);
    stq_be_p(buf + OV_OFFSET, DISK_SIZE - 4096);
    g_assert_cmpint(GET(DRBD_CMD_OV_REQUEST, OV_SIZE, DISK_SIZE, OV_DIGEST),
                    ==, 0);
    REFUSED(DRBD_CMD_OV_REQUEST, OV_SIZE, 2048, OV_DIGEST);
    stq_be_p(buf + OV_OFFSET, UINT64_MAX - 4095);
    REFUSED(DRBD_CMD_OV_REQUEST, OV_SIZE, DISK_SIZE, OV_DIGEST);
    REFUSED(DRBD_CMD_OV_REQUEST, OV_SIZE, UINT64_MAX, OV_DIGEST);
    REFUSED(DRBD_CMD_OV_REQUEST, OV_SIZE, 0, OV_DIGEST);
    stq_be_p(buf + OV_OFFSET, (uint64_t)INT64_MAX + 1);
    REFUSED(DRBD_CMD_OV_REQUEST, OV_SIZE, 0, OV_DIGEST);
    /* a reply, with a result, the same */
    RESET(res);
    stq_be_p(buf + OV_OFFSET, DISK_SIZE - 8192);
    REFUSED(DRBD_CMD_OV_REPLY, OV_RESULT_SIZE, DISK_SIZE, OV_DIGEST);
    stl_be_p(buf + OV_BYTES, 0);
    REFUSED(DRBD_CMD_OV_REPLY, OV_RESULT_SIZE, DISK_SIZE, OV_DIGEST);

    /* A result that names blocks beyond its range */
    RESET(res);
    stq_be_p(buf + OV_SIZE, 0x8);
    REFUSED_WITH(DRBD_CMD_OV_REPLY, OV_RESULT_SIZE, DISK_SIZE, OV_DIGEST,
                 "OV_REPLY packet: mismatch mask 0x8 names blocks beyond "
                 "its 3");
    stq_be_p(buf + OV_SIZE, 1ULL << 63);
    REFUSED(DRBD_CMD_OV_REPLY, OV_RESULT_SIZE, DISK_SIZE, OV_DIGEST);
    stq_be_p(buf + OV_SIZE, UINT64_MAX);
    REFUSED(DRBD_CMD_OV_REPLY, OV_RESULT_SIZE, DISK_SIZE, OV_DIGEST);
    /* its last block may be partial: 2 blocks and 512 bytes are 3 */
    stq_be_p(buf + OV_SIZE, 0x4);
    stl_be_p(buf + OV_BYTES, 2 * 4096 + 512);
    g_assert_cmpint(GET(DRBD_CMD_OV_REPLY, OV_RESULT_SIZE, DISK_SIZE,
                        OV_DIGEST), ==, 0);
    g_assert_cmpuint(p.mismatch, ==, 0x4);
    stl_be_p(buf + OV_BYTES, 2 * 4096);
    REFUSED(DRBD_CMD_OV_REPLY, OV_RESULT_SIZE, DISK_SIZE, OV_DIGEST);
    /* one block: bit 0 only */
    stl_be_p(buf + OV_BYTES, 512);
    stq_be_p(buf + OV_SIZE, 0x2);
    REFUSED(DRBD_CMD_OV_REPLY, OV_RESULT_SIZE, DISK_SIZE, OV_DIGEST);
    stq_be_p(buf + OV_SIZE, 0x1);
    g_assert_cmpint(GET(DRBD_CMD_OV_REPLY, OV_RESULT_SIZE, DISK_SIZE,
                        OV_DIGEST), ==, 0);
    /* 63 blocks: not bit 63; 64 blocks: any */
    stl_be_p(buf + OV_BYTES, 63 * 4096);
    stq_be_p(buf + OV_SIZE, UINT64_MAX >> 1);
    g_assert_cmpint(GET(DRBD_CMD_OV_REPLY, OV_RESULT_SIZE, DISK_SIZE,
                        OV_DIGEST), ==, 0);
    stq_be_p(buf + OV_SIZE, 1ULL << 63);
    REFUSED_WITH(DRBD_CMD_OV_REPLY, OV_RESULT_SIZE, DISK_SIZE, OV_DIGEST,
                 "OV_REPLY packet: mismatch mask 0x8000000000000000 names "
                 "blocks beyond its 63");
    stl_be_p(buf + OV_BYTES, 64 * 4096);
    g_assert_cmpint(GET(DRBD_CMD_OV_REPLY, OV_RESULT_SIZE, DISK_SIZE,
                        OV_DIGEST), ==, 0);
    g_assert_cmpuint(p.mismatch, ==, 1ULL << 63);

    /* Right payload, wrong command */
    RESET(req);
    for (i = 0; i < ARRAY_SIZE(wrong_cmds); i++) {
        REFUSED(wrong_cmds[i], req_len, DISK_SIZE, OV_DIGEST);
    }
    memset(&p, 0xa5, sizeof(p));
    ret = GET(DRBD_CMD_DATA, req_len, DISK_SIZE, OV_DIGEST);
    g_assert_nonnull(err);
    g_assert_true(g_str_has_prefix(error_get_pretty(err),
                                   "DATA packet: cannot decode it as "
                                   "OV_REQUEST, OV_REPLY"));
    assert_failed(ret, &err);
    /* ... and an OV packet decoded as something else */
    {
        DrbdBlockAck a;
        DrbdDataPacket d;

        assert_failed(drbd_wire_get_block_ack(DRBD_CMD_OV_REQUEST, buf,
                                              ACK_SIZE, DISK_SIZE, &a, &err),
                      &err);
        assert_failed(drbd_wire_get_data(DRBD_CMD_OV_REPLY, buf, req_len, 0,
                                         &d, &err), &err);
    }

    /* The largest payload: 64 blocks of 64-byte digests, and no more */
    big = g_malloc0(OV_MAX_SIZE + 1);
    stl_be_p(big + OV_BYTES, DRBD_OV_MAX_BYTES);
    stl_be_p(big + OV_FLAGS, DRBD_OV_DIGESTS);
    g_assert_cmpint(drbd_wire_get_ov(DRBD_CMD_OV_REPLY, big, OV_MAX_SIZE,
                                     DISK_SIZE, DRBD_WIRE_DIGEST_MAX, &p,
                                     &error_abort), ==, 0);
    assert_failed(drbd_wire_get_ov(DRBD_CMD_OV_REPLY, big, OV_MAX_SIZE + 1,
                                   DISK_SIZE, DRBD_WIRE_DIGEST_MAX, &p,
                                   &err), &err);

    /* The header bounds the length by the largest and smallest */
    make_header(hdr, DRBD_WIRE_MAGIC, DRBD_CMD_OV_REQUEST, 0, OV_SIZE - 1);
    assert_failed_with(drbd_wire_get_header(hdr, &h, &err), &err,
                       "OV_REQUEST packet: payload length 23 is impossible "
                       "(expected 24 to 4120 bytes)");
    make_header(hdr, DRBD_WIRE_MAGIC, DRBD_CMD_OV_REPLY, 0, OV_MAX_SIZE + 1);
    assert_failed_with(drbd_wire_get_header(hdr, &h, &err), &err,
                       "OV_REPLY packet: payload length 4121 is impossible "
                       "(expected 24 to 4120 bytes)");
    for (n = OV_SIZE; n <= OV_MAX_SIZE; n += 4) {
        make_header(hdr, DRBD_WIRE_MAGIC, DRBD_CMD_OV_REPLY, 0, n);
        g_assert_cmpint(drbd_wire_get_header(hdr, &h, &error_abort), ==, 0);
        g_assert_cmpuint(h.length, ==, n);
    }

#undef REFUSED_WITH
#undef REFUSED
#undef GET
#undef RESET
}

/* SIZES byte 15 names the csums digest, numbered as the other two */
static void test_sizes_csums(void)
{
    static const uint8_t unknown[] = { DRBD_DIGEST__MAX, 10, 0x80, 0xff };
    DrbdSizes in = {
        .disk_size = DISK_SIZE, .max_epoch_size = 2048, .protocol = 'C',
    };
    uint8_t buf[SIZES_SIZE];
    Error *err = NULL;
    DrbdSizes out;
    unsigned i;

    for (i = 0; i < DRBD_DIGEST__MAX; i++) {
        g_autoptr(GByteArray) pkt = g_byte_array_new();
        const uint8_t *payload;

        /* other integrity and verify digests: no field is mixed up */
        in.csums = i;
        in.verify = DRBD_DIGEST__MAX - 1 - i;
        in.integrity = (i + 3) % DRBD_DIGEST__MAX;
        drbd_wire_put_sizes(pkt, &in);
        payload = check_header(pkt, DRBD_CMD_SIZES);
        g_assert_cmpuint(pkt->len, ==, HDR + SIZES_SIZE);
        g_assert_cmpuint(payload[SIZES_INTEGRITY], ==, in.integrity);
        g_assert_cmpuint(payload[SIZES_VERIFY], ==, in.verify);
        g_assert_cmpuint(payload[SIZES_CSUMS], ==, i);
        memset(&out, 0xa5, sizeof(out));
        g_assert_cmpint(drbd_wire_get_sizes(payload, SIZES_SIZE, &out,
                                            &error_abort), ==, 0);
        g_assert_cmpuint(out.csums, ==, i);
        g_assert_cmpuint(out.verify, ==, in.verify);
        g_assert_cmpuint(out.integrity, ==, in.integrity);
        g_assert_cmpuint(out.protocol, ==, 'C');
        g_assert_cmpuint(out.disk_size, ==, DISK_SIZE);
    }

    memset(buf, 0, sizeof(buf));
    stq_be_p(buf, DISK_SIZE);
    buf[SIZES_PROTOCOL] = 'A';
    buf[SIZES_VERIFY] = DRBD_DIGEST_SHA1;
    for (i = 0; i < ARRAY_SIZE(unknown); i++) {
        g_autofree char *msg =
            g_strdup_printf("SIZES packet: unknown csums digest %u",
                            unknown[i]);

        buf[SIZES_CSUMS] = unknown[i];
        memset(&out, 0xa5, sizeof(out));
        assert_failed_with(drbd_wire_get_sizes(buf, SIZES_SIZE, &out, &err),
                           &err, msg);
        /* a decoder that fails leaves its output alone */
        g_assert_cmpuint(out.protocol, ==, 0xa5);
        g_assert_cmpuint(out.csums, ==, 0xa5);
    }
    buf[SIZES_CSUMS] = DRBD_DIGEST_CRC32C;
    g_assert_cmpint(drbd_wire_get_sizes(buf, SIZES_SIZE, &out, &error_abort),
                    ==, 0);
    g_assert_cmpuint(out.csums, ==, DRBD_DIGEST_CRC32C);
    g_assert_cmpuint(out.verify, ==, DRBD_DIGEST_SHA1);
    g_assert_cmpuint(out.integrity, ==, DRBD_DIGEST_NONE);
}

/*
 * RS_CSUM and RS_CSUM_REPLY: the OV packet under commands 26 and 27.  An
 * RS_CSUM carries one csums-alg digest per 4 KiB block of its chunk (the
 * last chunk, at the end of the disk, may be short), an RS_CSUM_REPLY
 * the mask of the blocks that differ; what is encoded decodes to the
 * same, and encodes back to the same bytes
 */
static void test_round_trip_csum(void)
{
    /* A disk whose last 4 KiB block is short: 1536 bytes */
    const uint64_t odd_disk = DISK_SIZE + 1536;
    const struct {
        uint64_t offset;
        uint32_t bytes;
        uint64_t disk_size;
    } chunks[] = {
        /* whole chunks of 64 blocks: the first and the last of a disk */
        { 0, DRBD_OV_MAX_BYTES, DISK_SIZE },
        { DISK_SIZE - DRBD_OV_MAX_BYTES, DRBD_OV_MAX_BYTES, DISK_SIZE },
        /* one block, three */
        { 1 * MiB, 4096, DISK_SIZE },
        { 8192, 3 * 4096, DISK_SIZE },
        /* the last chunk of a disk whose last block is short */
        { DISK_SIZE - 8192, 8192 + 1536, odd_disk },
        { DISK_SIZE, 1536, odd_disk },
        /* ... 64 blocks, the last of them short */
        { DISK_SIZE - 63 * 4096, 63 * 4096 + 1536, odd_disk },
    };
    size_t i, d;

    for (i = 0; i < ARRAY_SIZE(chunks); i++) {
        uint64_t offset = chunks[i].offset;
        uint32_t bytes = chunks[i].bytes;
        uint64_t disk = chunks[i].disk_size;
        uint32_t blocks = drbd_ov_blocks(bytes);
        uint64_t all = blocks == 64 ? UINT64_MAX : (1ULL << blocks) - 1;
        const uint64_t masks[] = {
            0, 1, 1ULL << (blocks - 1), all, all & 0x5555555555555555ULL,
        };

        /* The digests of every csums-alg's length */
        for (d = 0; d < ARRAY_SIZE(digest_lens); d++) {
            uint32_t dsize = digest_lens[d];
            size_t dlen = (size_t)blocks * dsize;
            g_autoptr(GByteArray) pkt = ov_packet(DRBD_CMD_RS_CSUM, offset,
                                                  bytes, DRBD_OV_DIGESTS,
                                                  dsize, 0);
            g_autoptr(GByteArray) again = g_byte_array_new();
            g_autofree uint8_t *digests = ov_digests(bytes, dsize);
            const uint8_t *payload = check_header(pkt, DRBD_CMD_RS_CSUM);
            size_t len = pkt->len - HDR;
            Error *err = NULL;
            DrbdOvPacket out;
            size_t o;

            g_assert_cmpuint(len, ==, OV_SIZE + dlen);
            g_assert_cmpuint(ldq_be_p(payload + OV_OFFSET), ==, offset);
            g_assert_cmpuint(ldq_be_p(payload + OV_ID), ==, OV_COOKIE);
            g_assert_cmpuint(ldl_be_p(payload + OV_BYTES), ==, bytes);
            g_assert_cmpuint(ldl_be_p(payload + OV_FLAGS), ==,
                             DRBD_OV_DIGESTS);
            g_assert_cmpmem(payload + OV_SIZE, dlen, digests, dlen);

            memset(&out, 0xa5, sizeof(out));
            g_assert_cmpint(drbd_wire_get_ov(DRBD_CMD_RS_CSUM, payload, len,
                                             disk, dsize, &out,
                                             &error_abort), ==, 0);
            g_assert_cmpuint(out.offset, ==, offset);
            g_assert_cmpuint(out.id, ==, OV_COOKIE);
            g_assert_cmpuint(out.bytes, ==, bytes);
            g_assert_cmpuint(out.flags, ==, DRBD_OV_DIGESTS);
            g_assert_true(out.digests == payload + OV_SIZE);
            g_assert_cmpuint(out.digest_size, ==, dsize);
            g_assert_cmpuint(out.mismatch, ==, 0);

            /* What decoded encodes to the very same packet */
            drbd_wire_put_ov(again, DRBD_CMD_RS_CSUM, &out);
            g_assert_cmpmem(again->data, again->len, pkt->data, pkt->len);

            /* Without a device size the range is not checked */
            g_assert_cmpint(drbd_wire_get_ov(DRBD_CMD_RS_CSUM, payload, len,
                                             0, dsize, &out, &error_abort),
                            ==, 0);

            /* The digests are the csums-alg's: another length is wrong */
            for (o = 0; o < ARRAY_SIZE(digest_lens); o++) {
                if (o != d) {
                    assert_failed(drbd_wire_get_ov(DRBD_CMD_RS_CSUM, payload,
                                                   len, disk, digest_lens[o],
                                                   &out, &err), &err);
                }
            }
        }

        /* The replies: no block, the first, the last, all, every other */
        for (d = 0; d < ARRAY_SIZE(masks); d++) {
            g_autoptr(GByteArray) pkt = ov_packet(DRBD_CMD_RS_CSUM_REPLY,
                                                  offset, bytes,
                                                  DRBD_OV_RESULT, 0,
                                                  masks[d]);
            g_autoptr(GByteArray) again = g_byte_array_new();
            const uint8_t *payload = check_header(pkt,
                                                  DRBD_CMD_RS_CSUM_REPLY);
            size_t len = pkt->len - HDR;
            DrbdOvPacket out;
            size_t o;

            g_assert_cmpuint(len, ==, OV_RESULT_SIZE);
            g_assert_cmpuint(ldq_be_p(payload + OV_OFFSET), ==, offset);
            g_assert_cmpuint(ldq_be_p(payload + OV_ID), ==, OV_COOKIE);
            g_assert_cmpuint(ldl_be_p(payload + OV_BYTES), ==, bytes);
            g_assert_cmpuint(ldl_be_p(payload + OV_FLAGS), ==,
                             DRBD_OV_RESULT);
            g_assert_cmpuint(ldq_be_p(payload + OV_SIZE), ==, masks[d]);

            memset(&out, 0xa5, sizeof(out));
            g_assert_cmpint(drbd_wire_get_ov(DRBD_CMD_RS_CSUM_REPLY, payload,
                                             len, disk, CSUM_DIGEST, &out,
                                             &error_abort), ==, 0);
            g_assert_cmpuint(out.offset, ==, offset);
            g_assert_cmpuint(out.id, ==, OV_COOKIE);
            g_assert_cmpuint(out.bytes, ==, bytes);
            g_assert_cmpuint(out.flags, ==, DRBD_OV_RESULT);
            g_assert_null(out.digests);
            g_assert_cmpuint(out.digest_size, ==, 0);
            g_assert_cmpuint(out.mismatch, ==, masks[d]);

            drbd_wire_put_ov(again, DRBD_CMD_RS_CSUM_REPLY, &out);
            g_assert_cmpmem(again->data, again->len, pkt->data, pkt->len);

            /* A result needs no csums-alg of the receiver, any will do */
            g_assert_cmpint(drbd_wire_get_ov(DRBD_CMD_RS_CSUM_REPLY, payload,
                                             len, disk, 0, &out,
                                             &error_abort), ==, 0);
            for (o = 0; o < ARRAY_SIZE(digest_lens); o++) {
                g_assert_cmpint(drbd_wire_get_ov(DRBD_CMD_RS_CSUM_REPLY,
                                                 payload, len, 0,
                                                 digest_lens[o], &out,
                                                 &error_abort), ==, 0);
                g_assert_cmpuint(out.mismatch, ==, masks[d]);
            }
        }
    }
}

/*
 * What a peer may send wrong in an RS_CSUM or RS_CSUM_REPLY: every one
 * refused, with an Error, and the output left alone
 */
static void test_csum_invalid(void)
{
    static const uint16_t wrong_cmds[] = {
        0, DRBD_CMD_DATA, DRBD_CMD_RS_DATA, DRBD_CMD_WRITE_ACK,
        CMD_RESERVED, DRBD_CMD_AUTH_RESPONSE, DRBD_CMD__MAX, 0xffff,
    };
    /* The flags an RS_CSUM may not have, and what is unknown of them */
    static const struct {
        uint32_t flags;
        uint32_t unknown;
    } bad_csum_flags[] = {
        { DRBD_OV_RESULT, DRBD_OV_RESULT },
        { DRBD_OV_SKIPPED, DRBD_OV_SKIPPED },
        { DRBD_OV_DIGESTS | DRBD_OV_RESULT, DRBD_OV_RESULT },
        { DRBD_OV_DIGESTS | DRBD_OV_SKIPPED, DRBD_OV_SKIPPED },
        { DRBD_OV_REPLY_KINDS, DRBD_OV_RESULT | DRBD_OV_SKIPPED },
        { DRBD_OV_DIGESTS | OV_RESERVED, OV_RESERVED },
        { DRBD_OV_DIGESTS | 0x80000000, 0x80000000 },
    }, bad_reply_flags[] = {
        { DRBD_OV_DIGESTS, DRBD_OV_DIGESTS },
        { DRBD_OV_SKIPPED, DRBD_OV_SKIPPED },
        { DRBD_OV_RESULT | DRBD_OV_DIGESTS, DRBD_OV_DIGESTS },
        { DRBD_OV_RESULT | DRBD_OV_SKIPPED, DRBD_OV_SKIPPED },
        { DRBD_OV_REPLY_KINDS, DRBD_OV_DIGESTS | DRBD_OV_SKIPPED },
        { DRBD_OV_RESULT | OV_RESERVED, OV_RESERVED },
        { UINT32_MAX, ~DRBD_OV_RESULT },
    };
    /* 3 blocks with sha1's digests, and the answer: blocks 0 and 2 */
    const uint32_t dsize = 20;
    const size_t csum_len = OV_SIZE + 3 * 20;
    g_autoptr(GByteArray) csum = ov_packet(DRBD_CMD_RS_CSUM, 8192, 3 * 4096,
                                           DRBD_OV_DIGESTS, dsize, 0);
    g_autoptr(GByteArray) res = ov_packet(DRBD_CMD_RS_CSUM_REPLY, 8192,
                                          3 * 4096, DRBD_OV_RESULT, 0, 0x5);
    g_autofree uint8_t *buf = g_malloc0(OV_MAX_SIZE + 64);
    g_autofree uint8_t *big = NULL;
    Error *err = NULL;
    DrbdOvPacket p;
    uint8_t hdr[HDR];
    DrbdHeader h;
    size_t i, n;
    int ret;

#define RESET(pkt) memcpy(buf, (pkt)->data + HDR, (pkt)->len - HDR)
#define GET(cmd, len, disk, dsize) \
    drbd_wire_get_ov(cmd, buf, len, disk, dsize, &p, &err)
#define REFUSED(cmd, len, disk, dsize) \
    do { \
        memset(&p, 0xa5, sizeof(p)); \
        assert_failed(GET(cmd, len, disk, dsize), &err); \
        g_assert_cmpuint(p.flags, ==, 0xa5a5a5a5); \
    } while (0)
#define REFUSED_WITH(cmd, len, disk, dsize, msg) \
    do { \
        memset(&p, 0xa5, sizeof(p)); \
        assert_failed_with(GET(cmd, len, disk, dsize), &err, msg); \
        g_assert_cmpuint(p.flags, ==, 0xa5a5a5a5); \
    } while (0)

    g_assert_cmpuint(csum->len - HDR, ==, csum_len);
    g_assert_cmpuint(res->len - HDR, ==, OV_RESULT_SIZE);
    RESET(csum);
    g_assert_cmpint(GET(DRBD_CMD_RS_CSUM, csum_len, DISK_SIZE, dsize), ==, 0);
    RESET(res);
    g_assert_cmpint(GET(DRBD_CMD_RS_CSUM_REPLY, OV_RESULT_SIZE, DISK_SIZE,
                        dsize), ==, 0);

    /* Truncated: every prefix, from a buffer of exactly its size */
    for (n = 0; n < csum_len; n++) {
        g_autofree uint8_t *cut = g_memdup2(csum->data + HDR, n);

        assert_failed(drbd_wire_get_ov(DRBD_CMD_RS_CSUM, cut, n, DISK_SIZE,
                                       dsize, &p, &err), &err);
    }
    for (n = 0; n < OV_RESULT_SIZE; n++) {
        g_autofree uint8_t *cut = g_memdup2(res->data + HDR, n);

        assert_failed(drbd_wire_get_ov(DRBD_CMD_RS_CSUM_REPLY, cut, n,
                                       DISK_SIZE, dsize, &p, &err), &err);
    }
    RESET(csum);
    REFUSED_WITH(DRBD_CMD_RS_CSUM, OV_SIZE - 1, DISK_SIZE, dsize,
                 "RS_CSUM packet: payload is 23 bytes (expected at least "
                 "24)");
    REFUSED_WITH(DRBD_CMD_RS_CSUM, OV_SIZE, DISK_SIZE, dsize,
                 "RS_CSUM packet: payload is 24 bytes (expected 84)");
    REFUSED_WITH(DRBD_CMD_RS_CSUM, csum_len - dsize, DISK_SIZE, dsize,
                 "RS_CSUM packet: payload is 64 bytes (expected 84)");
    RESET(res);
    REFUSED_WITH(DRBD_CMD_RS_CSUM_REPLY, OV_SIZE, DISK_SIZE, dsize,
                 "RS_CSUM_REPLY packet: payload is 24 bytes (expected 32)");
    REFUSED(DRBD_CMD_RS_CSUM_REPLY, OV_RESULT_SIZE - 1, DISK_SIZE, dsize);

    /* Too long: a byte, a digest, a mask */
    RESET(csum);
    REFUSED(DRBD_CMD_RS_CSUM, csum_len + 1, DISK_SIZE, dsize);
    REFUSED_WITH(DRBD_CMD_RS_CSUM, csum_len + dsize, DISK_SIZE, dsize,
                 "RS_CSUM packet: payload is 104 bytes (expected 84)");
    REFUSED(DRBD_CMD_RS_CSUM, csum_len + 8, DISK_SIZE, dsize);
    RESET(res);
    REFUSED(DRBD_CMD_RS_CSUM_REPLY, OV_RESULT_SIZE + 1, DISK_SIZE, dsize);
    REFUSED_WITH(DRBD_CMD_RS_CSUM_REPLY, OV_RESULT_SIZE + 8, DISK_SIZE,
                 dsize, "RS_CSUM_REPLY packet: payload is 40 bytes "
                 "(expected 32)");

    /* Digests of another length than blocks * the csums-alg's */
    RESET(csum);
    for (i = 0; i < ARRAY_SIZE(digest_lens); i++) {
        if (digest_lens[i] != dsize) {
            REFUSED(DRBD_CMD_RS_CSUM, csum_len, DISK_SIZE, digest_lens[i]);
        }
    }
    /* ... for 2 or 4 blocks, where the range has 3 */
    REFUSED_WITH(DRBD_CMD_RS_CSUM, csum_len, DISK_SIZE, 30,
                 "RS_CSUM packet: payload is 84 bytes (expected 114)");
    stl_be_p(buf + OV_BYTES, 2 * 4096);
    REFUSED_WITH(DRBD_CMD_RS_CSUM, csum_len, DISK_SIZE, dsize,
                 "RS_CSUM packet: payload is 84 bytes (expected 64)");
    stl_be_p(buf + OV_BYTES, 4 * 4096);
    REFUSED(DRBD_CMD_RS_CSUM, csum_len, DISK_SIZE, dsize);
    /* 2 blocks and 512 bytes are 3 blocks */
    stl_be_p(buf + OV_BYTES, 2 * 4096 + 512);
    g_assert_cmpint(GET(DRBD_CMD_RS_CSUM, csum_len, DISK_SIZE, dsize),
                    ==, 0);

    /* An RS_CSUM without digests, whatever its length */
    RESET(csum);
    stl_be_p(buf + OV_FLAGS, 0);
    REFUSED_WITH(DRBD_CMD_RS_CSUM, OV_SIZE, DISK_SIZE, dsize,
                 "RS_CSUM packet: flags 0x0 are not exactly one of those "
                 "it may have (0x1)");
    REFUSED_WITH(DRBD_CMD_RS_CSUM, csum_len, DISK_SIZE, dsize,
                 "RS_CSUM packet: flags 0x0 are not exactly one of those "
                 "it may have (0x1)");
    REFUSED(DRBD_CMD_RS_CSUM, OV_RESULT_SIZE, DISK_SIZE, dsize);
    REFUSED(DRBD_CMD_RS_CSUM, OV_SIZE, DISK_SIZE, 0);

    /* ... or with a result, a skip, or a flag that means nothing yet */
    for (i = 0; i < ARRAY_SIZE(bad_csum_flags); i++) {
        g_autofree char *msg =
            g_strdup_printf("RS_CSUM packet: unknown flags 0x%" PRIx32,
                            bad_csum_flags[i].unknown);

        RESET(csum);
        stl_be_p(buf + OV_FLAGS, bad_csum_flags[i].flags);
        /* whatever length the flags may suggest */
        REFUSED_WITH(DRBD_CMD_RS_CSUM, OV_SIZE, DISK_SIZE, dsize, msg);
        REFUSED_WITH(DRBD_CMD_RS_CSUM, OV_RESULT_SIZE, DISK_SIZE, dsize, msg);
        REFUSED_WITH(DRBD_CMD_RS_CSUM, csum_len, DISK_SIZE, dsize, msg);
        REFUSED_WITH(DRBD_CMD_RS_CSUM, csum_len + 8, DISK_SIZE, dsize, msg);
    }

    /* Digests to a node without a csums-alg; its verify-alg is no help */
    RESET(csum);
    REFUSED_WITH(DRBD_CMD_RS_CSUM, csum_len, DISK_SIZE, 0,
                 "RS_CSUM packet carries digests, but this node has no "
                 "csums-alg");
    REFUSED_WITH(DRBD_CMD_RS_CSUM, OV_SIZE, DISK_SIZE, 0,
                 "RS_CSUM packet carries digests, but this node has no "
                 "csums-alg");

    /* A reply has a result: not digests, not a skip, not nothing */
    RESET(res);
    stl_be_p(buf + OV_FLAGS, 0);
    REFUSED_WITH(DRBD_CMD_RS_CSUM_REPLY, OV_RESULT_SIZE, DISK_SIZE, dsize,
                 "RS_CSUM_REPLY packet: flags 0x0 are not exactly one of "
                 "those it may have (0x2)");
    REFUSED(DRBD_CMD_RS_CSUM_REPLY, OV_SIZE, DISK_SIZE, dsize);
    for (i = 0; i < ARRAY_SIZE(bad_reply_flags); i++) {
        g_autofree char *msg =
            g_strdup_printf("RS_CSUM_REPLY packet: unknown flags 0x%" PRIx32,
                            bad_reply_flags[i].unknown);

        RESET(csum);
        stl_be_p(buf + OV_FLAGS, bad_reply_flags[i].flags);
        REFUSED_WITH(DRBD_CMD_RS_CSUM_REPLY, OV_SIZE, DISK_SIZE, dsize, msg);
        REFUSED_WITH(DRBD_CMD_RS_CSUM_REPLY, OV_RESULT_SIZE, DISK_SIZE, dsize,
                     msg);
        REFUSED_WITH(DRBD_CMD_RS_CSUM_REPLY, csum_len, DISK_SIZE, dsize,
                     msg);
        /* a node without a csums-alg says the same */
        REFUSED_WITH(DRBD_CMD_RS_CSUM_REPLY, csum_len, DISK_SIZE, 0, msg);
    }

    /* A result that names blocks beyond its range */
    RESET(res);
    stq_be_p(buf + OV_SIZE, 0x8);
    REFUSED_WITH(DRBD_CMD_RS_CSUM_REPLY, OV_RESULT_SIZE, DISK_SIZE, dsize,
                 "RS_CSUM_REPLY packet: mismatch mask 0x8 names blocks "
                 "beyond its 3");
    stq_be_p(buf + OV_SIZE, 0xf);
    REFUSED(DRBD_CMD_RS_CSUM_REPLY, OV_RESULT_SIZE, DISK_SIZE, dsize);
    stq_be_p(buf + OV_SIZE, 1ULL << 63);
    REFUSED(DRBD_CMD_RS_CSUM_REPLY, OV_RESULT_SIZE, DISK_SIZE, dsize);
    stq_be_p(buf + OV_SIZE, UINT64_MAX);
    REFUSED(DRBD_CMD_RS_CSUM_REPLY, OV_RESULT_SIZE, DISK_SIZE, dsize);
    REFUSED(DRBD_CMD_RS_CSUM_REPLY, OV_RESULT_SIZE, 0, dsize);
    /* the short last block counts: 2 blocks and 512 bytes are 3 */
    stq_be_p(buf + OV_SIZE, 0x7);
    stl_be_p(buf + OV_BYTES, 2 * 4096 + 512);
    g_assert_cmpint(GET(DRBD_CMD_RS_CSUM_REPLY, OV_RESULT_SIZE, DISK_SIZE,
                        dsize), ==, 0);
    g_assert_cmpuint(p.mismatch, ==, 0x7);
    stl_be_p(buf + OV_BYTES, 2 * 4096);
    REFUSED_WITH(DRBD_CMD_RS_CSUM_REPLY, OV_RESULT_SIZE, DISK_SIZE, dsize,
                 "RS_CSUM_REPLY packet: mismatch mask 0x7 names blocks "
                 "beyond its 2");
    /* one block (a short one too): bit 0 only */
    stl_be_p(buf + OV_BYTES, 512);
    stq_be_p(buf + OV_SIZE, 0x2);
    REFUSED(DRBD_CMD_RS_CSUM_REPLY, OV_RESULT_SIZE, DISK_SIZE, dsize);
    stq_be_p(buf + OV_SIZE, 0x1);
    g_assert_cmpint(GET(DRBD_CMD_RS_CSUM_REPLY, OV_RESULT_SIZE, DISK_SIZE,
                        dsize), ==, 0);
    /* 63 blocks: not bit 63; 64 blocks: any */
    stl_be_p(buf + OV_BYTES, 63 * 4096);
    stq_be_p(buf + OV_SIZE, UINT64_MAX >> 1);
    g_assert_cmpint(GET(DRBD_CMD_RS_CSUM_REPLY, OV_RESULT_SIZE, DISK_SIZE,
                        dsize), ==, 0);
    stq_be_p(buf + OV_SIZE, UINT64_MAX);
    REFUSED_WITH(DRBD_CMD_RS_CSUM_REPLY, OV_RESULT_SIZE, DISK_SIZE, dsize,
                 "RS_CSUM_REPLY packet: mismatch mask 0xffffffffffffffff "
                 "names blocks beyond its 63");
    stl_be_p(buf + OV_BYTES, 64 * 4096);
    g_assert_cmpint(GET(DRBD_CMD_RS_CSUM_REPLY, OV_RESULT_SIZE, DISK_SIZE,
                        dsize), ==, 0);
    g_assert_cmpuint(p.mismatch, ==, UINT64_MAX);

    /* The range: zero bytes, too many, unaligned, beyond the disk */
    RESET(csum);
    stl_be_p(buf + OV_BYTES, 0);
    REFUSED_WITH(DRBD_CMD_RS_CSUM, OV_SIZE, DISK_SIZE, dsize,
                 "RS_CSUM packet: request of zero bytes");
    stl_be_p(buf + OV_BYTES, DRBD_OV_MAX_BYTES + 4096);
    REFUSED_WITH(DRBD_CMD_RS_CSUM, OV_MAX_SIZE, DISK_SIZE, dsize,
                 "RS_CSUM packet: 266240 bytes is more than the limit of "
                 "262144");
    stl_be_p(buf + OV_BYTES, 3 * 4096 + 1);
    REFUSED(DRBD_CMD_RS_CSUM, csum_len, DISK_SIZE, dsize);
    stl_be_p(buf + OV_BYTES, 3 * 4096);
    stq_be_p(buf + OV_OFFSET, 8192 + 100);
    REFUSED(DRBD_CMD_RS_CSUM, csum_len, DISK_SIZE, dsize);
    stq_be_p(buf + OV_OFFSET, DISK_SIZE - 2 * 4096);
    REFUSED_WITH(DRBD_CMD_RS_CSUM, csum_len, DISK_SIZE, dsize,
                 "RS_CSUM packet: offset 67100672 + 12288 bytes is beyond "
                 "the device (67108864 bytes)");
    stq_be_p(buf + OV_OFFSET, UINT64_MAX - 4095);
    REFUSED(DRBD_CMD_RS_CSUM, csum_len, 0, dsize);
    RESET(res);
    stq_be_p(buf + OV_OFFSET, DISK_SIZE);
    REFUSED_WITH(DRBD_CMD_RS_CSUM_REPLY, OV_RESULT_SIZE, DISK_SIZE, dsize,
                 "RS_CSUM_REPLY packet: offset 67108864 + 12288 bytes is "
                 "beyond the device (67108864 bytes)");
    stl_be_p(buf + OV_BYTES, 0);
    REFUSED_WITH(DRBD_CMD_RS_CSUM_REPLY, OV_RESULT_SIZE, DISK_SIZE, dsize,
                 "RS_CSUM_REPLY packet: request of zero bytes");

    /* Right payload, wrong command; and each decoded as the other */
    RESET(csum);
    for (i = 0; i < ARRAY_SIZE(wrong_cmds); i++) {
        REFUSED(wrong_cmds[i], csum_len, DISK_SIZE, dsize);
    }
    memset(&p, 0xa5, sizeof(p));
    ret = GET(DRBD_CMD_DATA, csum_len, DISK_SIZE, dsize);
    assert_failed_with(ret, &err, "DATA packet: cannot decode it as "
                       "OV_REQUEST, OV_REPLY, RS_CSUM or RS_CSUM_REPLY");
    REFUSED_WITH(DRBD_CMD_RS_CSUM_REPLY, csum_len, DISK_SIZE, dsize,
                 "RS_CSUM_REPLY packet: unknown flags 0x1");
    RESET(res);
    REFUSED_WITH(DRBD_CMD_RS_CSUM, OV_RESULT_SIZE, DISK_SIZE, dsize,
                 "RS_CSUM packet: unknown flags 0x2");
    {
        DrbdBlockAck a;
        DrbdDataPacket d;

        assert_failed(drbd_wire_get_block_ack(DRBD_CMD_RS_CSUM_REPLY, buf,
                                              ACK_SIZE, DISK_SIZE, &a, &err),
                      &err);
        assert_failed(drbd_wire_get_data(DRBD_CMD_RS_CSUM, buf,
                                         OV_RESULT_SIZE, 0, &d, &err), &err);
    }

    /* The largest payload: 64 blocks of 64-byte digests, and no more */
    big = g_malloc0(OV_MAX_SIZE + 1);
    stl_be_p(big + OV_BYTES, DRBD_OV_MAX_BYTES);
    stl_be_p(big + OV_FLAGS, DRBD_OV_DIGESTS);
    g_assert_cmpint(drbd_wire_get_ov(DRBD_CMD_RS_CSUM, big, OV_MAX_SIZE,
                                     DISK_SIZE, DRBD_WIRE_DIGEST_MAX, &p,
                                     &error_abort), ==, 0);
    assert_failed(drbd_wire_get_ov(DRBD_CMD_RS_CSUM, big, OV_MAX_SIZE + 1,
                                   DISK_SIZE, DRBD_WIRE_DIGEST_MAX, &p,
                                   &err), &err);

    /* The header bounds the length: an RS_CSUM_REPLY has but one */
    make_header(hdr, DRBD_WIRE_MAGIC, DRBD_CMD_RS_CSUM, 0, OV_MAX_SIZE + 1);
    assert_failed_with(drbd_wire_get_header(hdr, &h, &err), &err,
                       "RS_CSUM packet: payload length 4121 is impossible "
                       "(expected 24 to 4120 bytes)");
    make_header(hdr, DRBD_WIRE_MAGIC, DRBD_CMD_RS_CSUM_REPLY, 0, OV_SIZE);
    assert_failed_with(drbd_wire_get_header(hdr, &h, &err), &err,
                       "RS_CSUM_REPLY packet: payload length 24 is "
                       "impossible (expected 32 bytes)");
    for (n = 0; n <= OV_MAX_SIZE; n++) {
        make_header(hdr, DRBD_WIRE_MAGIC, DRBD_CMD_RS_CSUM_REPLY, 0, n);
        ret = drbd_wire_get_header(hdr, &h, n == OV_RESULT_SIZE ?
                                   &error_abort : &err);
        if (n == OV_RESULT_SIZE) {
            g_assert_cmpint(ret, ==, 0);
            g_assert_cmpuint(h.cmd, ==, DRBD_CMD_RS_CSUM_REPLY);
        } else {
            assert_failed(ret, &err);
        }
    }

#undef REFUSED_WITH
#undef REFUSED
#undef GET
#undef RESET
}

/*
 * DATA and RS_DATA with a digest of each length data-integrity-alg can
 * give: fixed part, digest, data, and the decoder points at each
 */
static void test_round_trip_digest(void)
{
    static const uint16_t cmds[] = { DRBD_CMD_DATA, DRBD_CMD_RS_DATA };
    static const uint32_t sizes[] = { 512, 8192, DRBD_WIRE_MAX_DATA };
    size_t c, d, b;

    for (c = 0; c < ARRAY_SIZE(cmds); c++) {
        for (d = 0; d < ARRAY_SIZE(digest_lens); d++) {
            for (b = 0; b < ARRAY_SIZE(sizes); b++) {
                uint16_t cmd = cmds[c];
                uint32_t dlen = digest_lens[d];
                uint32_t bytes = sizes[b];
                uint64_t offset = DISK_SIZE - DRBD_WIRE_MAX_DATA;
                g_autofree uint8_t *data = NULL;
                g_autoptr(GByteArray) pkt =
                    digest_packet(cmd, offset, bytes, DRBD_DP_FUA, dlen,
                                  &data);
                g_autoptr(GByteArray) split = g_byte_array_new();
                const uint8_t *payload = check_header(pkt, cmd);
                uint8_t digest[DRBD_WIRE_DIGEST_MAX];
                DrbdDataPacket out;

                fill_pattern(digest, dlen, 0xd0 + dlen);
                g_assert_cmpuint(pkt->len, ==, HDR + DATA_SIZE + dlen + bytes);
                g_assert_cmpuint(ldl_be_p(payload + DATA_BYTES), ==, bytes);
                g_assert_cmpmem(payload + DATA_SIZE, dlen, digest, dlen);
                g_assert_cmpmem(payload + DATA_SIZE + dlen, bytes, data,
                                bytes);

                memset(&out, 0xa5, sizeof(out));
                g_assert_cmpint(drbd_wire_get_data(cmd, payload,
                                                   pkt->len - HDR, DISK_SIZE,
                                                   &out, &error_abort), ==, 0);
                g_assert_cmpuint(out.offset, ==, offset);
                g_assert_cmpuint(out.id, ==, 0x0123456789abcdefULL);
                g_assert_cmpuint(out.epoch, ==, 42);
                g_assert_cmpuint(out.flags, ==, DRBD_DP_FUA);
                g_assert_cmpuint(out.bytes, ==, bytes);
                g_assert_cmpuint(out.unordered, ==,
                                 cmd == DRBD_CMD_RS_DATA ? 0 : 31);
                g_assert_cmpuint(out.digest_len, ==, dlen);
                g_assert_true(out.digest == payload + DATA_SIZE);
                g_assert_true(out.data == payload + DATA_SIZE + dlen);
                g_assert_cmpmem(out.digest, out.digest_len, digest, dlen);
                g_assert_cmpmem(out.data, out.bytes, data, bytes);

                /* Header, fixed part and digest, then the data: the same */
                out.data = NULL;
                drbd_wire_put_data_header(split, cmd, &out);
                g_assert_cmpuint(split->len, ==, HDR + DATA_SIZE + dlen);
                g_byte_array_append(split, data, bytes);
                g_assert_cmpmem(split->data, split->len, pkt->data, pkt->len);
            }
        }
    }

    /* Without a digest there is none to point at */
    {
        g_autoptr(GByteArray) pkt = data_packet(DRBD_CMD_DATA, 0, 512, 0,
                                                NULL);
        DrbdDataPacket out;

        memset(&out, 0xa5, sizeof(out));
        g_assert_cmpint(drbd_wire_get_data(DRBD_CMD_DATA, pkt->data + HDR,
                                           pkt->len - HDR, DISK_SIZE, &out,
                                           &error_abort), ==, 0);
        g_assert_null(out.digest);
        g_assert_cmpuint(out.digest_len, ==, 0);
        g_assert_true(out.data == pkt->data + HDR + DATA_SIZE);
    }

    /* The largest payload there is: 1 MiB of data and a 64-byte digest */
    g_assert_cmpuint(DATA_SIZE + DRBD_WIRE_DIGEST_MAX + DRBD_WIRE_MAX_DATA,
                     <=, DRBD_WIRE_MAX_PAYLOAD);
}

/*
 * Between the fixed part and the data there is 0, or 4 to 64 bytes of
 * digest: anything else is refused, by the header where its length
 * shows it (what is left beside whole sectors), by the payload decoder
 * always (which knows how many bytes of data there are)
 */
static void test_digest_invalid(void)
{
    static const uint16_t cmds[] = { DRBD_CMD_DATA, DRBD_CMD_RS_DATA };
    /* Extra bytes the header cannot take for a digest */
    static const uint32_t bad_in_header[] = {
        1, 2, 3, 65, 66, 100, 128, 511, 512 + 1, 512 + 3, 512 + 65,
        4096 + 2,
    };
    /* ... and those it takes for a digest or whole sectors of data */
    static const uint32_t bad_in_payload[] = {
        512, 512 + 4, 512 + 64, 1024, 4096 + 16,
    };
    const uint32_t bytes = 4096;
    Error *err = NULL;
    uint8_t hdr[HDR];
    DrbdDataPacket p;
    DrbdHeader h;
    uint32_t extra;
    size_t c, i;

    for (c = 0; c < ARRAY_SIZE(cmds); c++) {
        uint16_t cmd = cmds[c];
        g_autoptr(GByteArray) pkt = data_packet(cmd, 8192, bytes, 0, NULL);
        g_autofree uint8_t *buf = g_malloc0(DATA_SIZE + bytes + 8192);

        memcpy(buf, pkt->data + HDR, pkt->len - HDR);

        for (i = 0; i < ARRAY_SIZE(bad_in_header); i++) {
            extra = bad_in_header[i];
            make_header(hdr, DRBD_WIRE_MAGIC, cmd, 0,
                        DATA_SIZE + bytes + extra);
            assert_failed(drbd_wire_get_header(hdr, &h, &err), &err);
            memset(&p, 0xa5, sizeof(p));
            assert_failed(drbd_wire_get_data(cmd, buf,
                                             DATA_SIZE + bytes + extra,
                                             DISK_SIZE, &p, &err), &err);
            g_assert_cmpuint(p.digest_len, ==, 0xa5a5a5a5);
        }
        for (i = 0; i < ARRAY_SIZE(bad_in_payload); i++) {
            extra = bad_in_payload[i];
            make_header(hdr, DRBD_WIRE_MAGIC, cmd, 0,
                        DATA_SIZE + bytes + extra);
            g_assert_cmpint(drbd_wire_get_header(hdr, &h, &error_abort), ==,
                            0);
            assert_failed(drbd_wire_get_data(cmd, buf,
                                             DATA_SIZE + bytes + extra,
                                             DISK_SIZE, &p, &err), &err);
        }
        /* Every legal length is accepted */
        for (extra = DRBD_WIRE_DIGEST_MIN; extra <= DRBD_WIRE_DIGEST_MAX;
             extra++) {
            make_header(hdr, DRBD_WIRE_MAGIC, cmd, 0,
                        DATA_SIZE + bytes + extra);
            g_assert_cmpint(drbd_wire_get_header(hdr, &h, &error_abort), ==,
                            0);
            g_assert_cmpint(drbd_wire_get_data(cmd, buf,
                                               DATA_SIZE + bytes + extra,
                                               DISK_SIZE, &p, &error_abort),
                            ==, 0);
            g_assert_cmpuint(p.digest_len, ==, extra);
            g_assert_true(p.digest == buf + DATA_SIZE);
            g_assert_true(p.data == buf + DATA_SIZE + extra);
        }
    }

    /* At the largest data, a digest of 65 bytes is past the limit too */
    make_header(hdr, DRBD_WIRE_MAGIC, DRBD_CMD_DATA, 0,
                DATA_SIZE + DRBD_WIRE_MAX_DATA + DRBD_WIRE_DIGEST_MAX);
    g_assert_cmpint(drbd_wire_get_header(hdr, &h, &error_abort), ==, 0);
    make_header(hdr, DRBD_WIRE_MAGIC, DRBD_CMD_DATA, 0,
                DATA_SIZE + DRBD_WIRE_MAX_DATA + DRBD_WIRE_DIGEST_MAX + 1);
    assert_failed(drbd_wire_get_header(hdr, &h, &err), &err);

    /* The messages */
    make_header(hdr, DRBD_WIRE_MAGIC, DRBD_CMD_DATA, 0,
                DATA_SIZE + bytes + 3);
    assert_failed_with(drbd_wire_get_header(hdr, &h, &err), &err,
                       "DATA packet: payload length 4131 is impossible "
                       "(data is not a multiple of 512 bytes)");
    make_header(hdr, DRBD_WIRE_MAGIC, DRBD_CMD_RS_DATA, 0,
                DATA_SIZE + bytes + 65);
    assert_failed_with(drbd_wire_get_header(hdr, &h, &err), &err,
                       "RS_DATA packet: payload length 4193 is impossible "
                       "(data is not a multiple of 512 bytes)");
    {
        g_autoptr(GByteArray) pkt = data_packet(DRBD_CMD_RS_DATA, 0, bytes,
                                                0, NULL);
        g_autofree uint8_t *buf = g_malloc0(DATA_SIZE + bytes + 65);

        memcpy(buf, pkt->data + HDR, pkt->len - HDR);
        assert_failed_with(drbd_wire_get_data(DRBD_CMD_RS_DATA, buf,
                                              DATA_SIZE + bytes + 65, 0, &p,
                                              &err), &err,
                           "RS_DATA packet: payload is 4193 bytes (expected "
                           "4128, plus a digest of 4 to 64)");
        assert_failed_with(drbd_wire_get_data(DRBD_CMD_RS_DATA, buf,
                                              DATA_SIZE + bytes + 2, 0, &p,
                                              &err), &err,
                           "RS_DATA packet: payload is 4130 bytes (expected "
                           "4128, plus a digest of 4 to 64)");
    }

    /* ZEROES and DISCARD carry no data, so no digest either */
    {
        g_autoptr(GByteArray) pkt = data_packet(DRBD_CMD_ZEROES, 0, bytes, 0,
                                                NULL);
        uint8_t buf[DATA_SIZE + DRBD_WIRE_DIGEST_MAX] = { 0 };

        memcpy(buf, pkt->data + HDR, DATA_SIZE);
        for (extra = DRBD_WIRE_DIGEST_MIN; extra <= DRBD_WIRE_DIGEST_MAX;
             extra += 12) {
            make_header(hdr, DRBD_WIRE_MAGIC, DRBD_CMD_ZEROES, 0,
                        DATA_SIZE + extra);
            assert_failed(drbd_wire_get_header(hdr, &h, &err), &err);
            make_header(hdr, DRBD_WIRE_MAGIC, DRBD_CMD_DISCARD, 0,
                        DATA_SIZE + extra);
            assert_failed(drbd_wire_get_header(hdr, &h, &err), &err);
            assert_failed(drbd_wire_get_data(DRBD_CMD_ZEROES, buf,
                                             DATA_SIZE + extra, 0, &p, &err),
                          &err);
            assert_failed(drbd_wire_get_data(DRBD_CMD_DISCARD, buf,
                                             DATA_SIZE + extra, 0, &p, &err),
                          &err);
        }
    }
}

/*
 * The wire does not say how long the digest is: the payload length does.
 * Cut by a whole digest, a packet decodes as one without; cut by part of
 * one, with a shorter digest.  So the receiver must check the length
 * against the agreed algorithm (drbd_check_integrity() does).
 */
static void test_digest_length_from_payload(void)
{
    g_autoptr(GByteArray) pkt = digest_packet(DRBD_CMD_DATA, 0, 512, 0, 32,
                                              NULL);
    const uint8_t *payload = check_header(pkt, DRBD_CMD_DATA);
    size_t len = pkt->len - HDR;
    Error *err = NULL;
    DrbdDataPacket p;
    size_t cut;

    for (cut = 0; cut <= 32; cut++) {
        int ret = drbd_wire_get_data(DRBD_CMD_DATA, payload, len - cut,
                                     DISK_SIZE, &p, &err);

        if (cut == 32 || 32 - cut >= DRBD_WIRE_DIGEST_MIN) {
            g_assert_cmpint(ret, ==, 0);
            g_assert_cmpuint(p.digest_len, ==, 32 - cut);
            g_assert_true(p.data == payload + DATA_SIZE + 32 - cut);
        } else {
            assert_failed(ret, &err);
        }
    }
}

/* The messages name the packet and the problem */
static void test_messages(void)
{
    g_autoptr(GByteArray) pkt = data_packet(DRBD_CMD_DATA, 4096, 8192, 0,
                                            NULL);
    uint8_t buf[HELLO_NAME + 4] = { 0 };
    uint8_t hdr[HDR];
    Error *err = NULL;
    DrbdDataPacket p;
    DrbdHeader h;
    DrbdHello hello;

    assert_failed_with(drbd_wire_get_data(DRBD_CMD_DATA, pkt->data + HDR,
                                          pkt->len - HDR, 8192, &p, &err),
                       &err, "DATA packet: offset 4096 + 8192 bytes is "
                       "beyond the device (8192 bytes)");
    assert_failed_with(drbd_wire_get_data(DRBD_CMD_DATA, pkt->data + HDR,
                                          pkt->len - HDR - 1, 0, &p, &err),
                       &err, "DATA packet: payload is 8223 bytes "
                       "(expected 8224, plus a digest of 4 to 64)");
    assert_failed_with(drbd_wire_get_data(DRBD_CMD_PING, pkt->data + HDR,
                                          pkt->len - HDR, 0, &p, &err),
                       &err, "PING packet: cannot decode it as DATA, "
                       "ZEROES, DISCARD, RS_DATA or RS_ZEROES");

    make_header(hdr, 0x12345678, DRBD_CMD_DATA, 0, 0);
    assert_failed_with(drbd_wire_get_header(hdr, &h, &err), &err,
                       "packet header: bad magic 0x12345678 "
                       "(expected 0x44524251)");
    make_header(hdr, DRBD_WIRE_MAGIC, 0xffff, 0, 0);
    assert_failed_with(drbd_wire_get_header(hdr, &h, &err), &err,
                       "packet header: unknown command 65535");
    make_header(hdr, DRBD_WIRE_MAGIC, DRBD_CMD_BARRIER, 0, 9);
    assert_failed_with(drbd_wire_get_header(hdr, &h, &err), &err,
                       "BARRIER packet: payload length 9 is impossible "
                       "(expected 12 bytes)");

    stl_be_p(buf, 1);
    stl_be_p(buf + 4, 1);
    stw_be_p(buf + HELLO_NAME_LEN, 4);
    memcpy(buf + HELLO_NAME, "abcd", 4);
    g_assert_cmpint(drbd_wire_get_hello(buf, sizeof(buf), &hello,
                                        &error_abort), ==, 0);
    g_assert_cmpstr(hello.resource, ==, "abcd");
    stw_be_p(buf + HELLO_NAME_LEN, 0);
    assert_failed_with(drbd_wire_get_hello(buf, sizeof(buf), &hello, &err),
                       &err, "HELLO packet: empty resource name");
}

/*
 * Every proper prefix of the payload of a valid packet is refused.  Each
 * is decoded from a buffer of exactly its size, so that a read beyond it
 * shows up under valgrind or ASan.
 */
static void test_truncation(void)
{
    g_autoptr(GPtrArray) pkts = valid_packets();
    Error *err = NULL;
    guint i;

    for (i = 0; i < pkts->len; i++) {
        GByteArray *pkt = g_ptr_array_index(pkts, i);
        uint16_t cmd = lduw_be_p(pkt->data + 4);
        size_t len = pkt->len - HDR;
        size_t n;

        check_header(pkt, cmd);
        g_assert_cmpint(decode_payload(cmd, pkt->data + HDR, len, DISK_SIZE,
                                       &error_abort), ==, 0);

        for (n = 0; n < len; n++) {
            g_autofree uint8_t *buf = g_memdup2(pkt->data + HDR, n);

            assert_failed(decode_payload(cmd, buf, n, DISK_SIZE, &err),
                          &err);
        }
    }
}

/*
 * Mangle valid packets at random, with a fixed seed so that a failure
 * can be reproduced.  Nothing may crash, and whatever decodes must be
 * within bounds (decode_payload() checks that).
 */
static void test_mutation(void)
{
    g_autoptr(GPtrArray) pkts = valid_packets();
    g_autoptr(GRand) rand = g_rand_new_with_seed(0x64726264);
    unsigned accepted = 0, rejected = 0;
    int iter;

    add_variable_packets(pkts);
    for (iter = 0; iter < 20000; iter++) {
        GByteArray *orig = g_ptr_array_index(
            pkts, g_rand_int_range(rand, 0, pkts->len));
        g_autofree uint8_t *pkt = g_memdup2(orig->data, orig->len);
        size_t pkt_len = orig->len;
        uint16_t orig_cmd = lduw_be_p(orig->data + 4);
        int flips = g_rand_int_range(rand, 1, 5);
        Error *err = NULL;
        DrbdHeader h;
        int i, ret;

        for (i = 0; i < flips; i++) {
            /* Mostly in the header and fixed fields, where it matters */
            size_t pos = g_rand_boolean(rand)
                ? g_rand_int_range(rand, 0, MIN(pkt_len, HDR + DATA_SIZE))
                : g_rand_int_range(rand, 0, pkt_len);

            switch (g_rand_int_range(rand, 0, 3)) {
            case 0:
                pkt[pos] ^= 1u << g_rand_int_range(rand, 0, 8);
                break;
            case 1:
                pkt[pos] = g_rand_int_range(rand, 0, 256);
                break;
            default:
                pkt[pos] = g_rand_boolean(rand) ? 0 : 0xff;
                break;
            }
        }

        /* Sometimes cut the packet short too */
        if (pkt_len > HDR && g_rand_int_range(rand, 0, 8) == 0) {
            pkt_len = g_rand_int_range(rand, HDR, pkt_len);
        }

        /* As a receiver would: the header, then what it announces */
        ret = drbd_wire_get_header(pkt, &h, &err);
        if (ret == 0) {
            size_t len = MIN(h.length, pkt_len - HDR);
            g_autofree uint8_t *payload = g_memdup2(pkt + HDR, len);

            g_assert_null(err);
            g_assert_cmpuint(h.cmd, >, 0);
            g_assert_cmpuint(h.cmd, <, DRBD_CMD__MAX);
            g_assert_cmpuint(h.length, <=, DRBD_WIRE_MAX_PAYLOAD);
            ret = decode_payload(h.cmd, payload, len,
                                 iter & 1 ? DISK_SIZE : 0, &err);
        }
        if (ret == 0) {
            g_assert_null(err);
            accepted++;
        } else {
            assert_failed(ret, &err);
            rejected++;
        }

        /* And the payload as the original command, whatever the header */
        {
            size_t len = pkt_len - HDR;
            g_autofree uint8_t *payload = g_memdup2(pkt + HDR, len);

            ret = decode_payload(orig_cmd, payload, len, DISK_SIZE, &err);
            if (ret < 0) {
                assert_failed(ret, &err);
            }
            ret = decode_payload(g_rand_int_range(rand, 0, DRBD_CMD__MAX + 2),
                                 payload, len, DISK_SIZE, &err);
            if (ret < 0) {
                assert_failed(ret, &err);
            }
        }
    }

    g_test_message("%u mangled packets accepted, %u refused",
                   accepted, rejected);

    /* Both outcomes must have happened, or the loop tests little */
    g_assert_cmpuint(accepted, >, 0);
    g_assert_cmpuint(rejected, >, 0);
}

/*
 * A guest read served by the peer (version 3): DATA_REQUEST and
 * NEG_DREPLY carry a block ack's fields, DATA_REPLY a data packet's with
 * the data read
 */
static void test_read_round_trip(void)
{
    static const uint16_t cmds[] = {
        DRBD_CMD_DATA_REQUEST, DRBD_CMD_NEG_DREPLY,
    };
    DrbdBlockAck in = { .offset = 1 * MiB, .id = 77, .bytes = 1 * MiB };
    g_autoptr(GByteArray) reply = NULL;
    g_autofree uint8_t *data = NULL;
    DrbdDataPacket p;
    DrbdBlockAck out;
    size_t i;

    for (i = 0; i < ARRAY_SIZE(cmds); i++) {
        g_autoptr(GByteArray) pkt = g_byte_array_new();

        drbd_wire_put_block_ack(pkt, cmds[i], &in);
        g_assert_cmpuint(pkt->len, ==, HDR + ACK_SIZE);
        g_assert_cmpint(drbd_wire_get_block_ack(cmds[i], pkt->data + HDR,
                                                ACK_SIZE, DISK_SIZE, &out,
                                                &error_abort), ==, 0);
        g_assert_cmpuint(out.offset, ==, in.offset);
        g_assert_cmpuint(out.id, ==, in.id);
        g_assert_cmpuint(out.bytes, ==, in.bytes);
    }

    reply = data_packet(DRBD_CMD_DATA_REPLY, 4096, 64 * KiB, 0, &data);
    g_assert_cmpint(drbd_wire_get_data(DRBD_CMD_DATA_REPLY,
                                       reply->data + HDR, reply->len - HDR,
                                       DISK_SIZE, &p, &error_abort), ==, 0);
    g_assert_cmpuint(p.offset, ==, 4096);
    g_assert_cmpuint(p.bytes, ==, 64 * KiB);
    g_assert_cmpuint(p.epoch, ==, 0);
    g_assert_cmpmem(p.data, p.bytes, data, 64 * KiB);
    g_assert_cmpstr(drbd_cmd_name(DRBD_CMD_DATA_REQUEST), ==, "DATA_REQUEST");
    g_assert_cmpstr(drbd_cmd_name(DRBD_CMD_DATA_REPLY), ==, "DATA_REPLY");
    g_assert_cmpstr(drbd_cmd_name(DRBD_CMD_NEG_DREPLY), ==, "NEG_DREPLY");
}

static void test_read_invalid(void)
{
    DrbdBlockAck in = { .offset = 0, .id = 1, .bytes = 1 * MiB };
    g_autoptr(GByteArray) req = g_byte_array_new();
    g_autoptr(GByteArray) reply = NULL;
    Error *err = NULL;
    DrbdDataPacket p;
    DrbdBlockAck a;
    uint8_t *buf;

    /* A read asks for at most what one DATA_REPLY carries */
    drbd_wire_put_block_ack(req, DRBD_CMD_DATA_REQUEST, &in);
    buf = req->data + HDR;
    stl_be_p(buf + ACK_BYTES, DRBD_WIRE_MAX_DATA + 512);
    assert_failed(drbd_wire_get_block_ack(DRBD_CMD_DATA_REQUEST, buf,
                                          ACK_SIZE, 0, &a, &err), &err);
    assert_failed(drbd_wire_get_block_ack(DRBD_CMD_NEG_DREPLY, buf,
                                          ACK_SIZE, 0, &a, &err), &err);
    stl_be_p(buf + ACK_BYTES, 4096);
    stq_be_p(buf + ACK_OFFSET, DISK_SIZE);
    assert_failed(drbd_wire_get_block_ack(DRBD_CMD_DATA_REQUEST, buf,
                                          ACK_SIZE, DISK_SIZE, &a, &err),
                  &err);

    /* Read data is no write: no epoch, no flags, no unordered writes */
    reply = data_packet(DRBD_CMD_DATA_REPLY, 0, 4096, 0, NULL);
    buf = reply->data + HDR;
    stl_be_p(buf + DATA_EPOCH, 1);
    assert_failed(drbd_wire_get_data(DRBD_CMD_DATA_REPLY, buf,
                                     reply->len - HDR, DISK_SIZE, &p, &err),
                  &err);
    stl_be_p(buf + DATA_EPOCH, 0);
    stl_be_p(buf + DATA_FLAGS, DRBD_DP_FUA);
    assert_failed(drbd_wire_get_data(DRBD_CMD_DATA_REPLY, buf,
                                     reply->len - HDR, DISK_SIZE, &p, &err),
                  &err);
    stl_be_p(buf + DATA_FLAGS, 0);
    stl_be_p(buf + DATA_UNORDERED, 1);
    assert_failed(drbd_wire_get_data(DRBD_CMD_DATA_REPLY, buf,
                                     reply->len - HDR, DISK_SIZE, &p, &err),
                  &err);
    stl_be_p(buf + DATA_UNORDERED, 0);
    g_assert_cmpint(drbd_wire_get_data(DRBD_CMD_DATA_REPLY, buf,
                                       reply->len - HDR, DISK_SIZE, &p,
                                       &error_abort), ==, 0);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    g_test_add_func("/drbd-wire/cmd-name", test_cmd_name);
    g_test_add_func("/drbd-wire/round-trip/hello", test_round_trip_hello);
    g_test_add_func("/drbd-wire/round-trip/sizes", test_round_trip_sizes);
    g_test_add_func("/drbd-wire/round-trip/state", test_round_trip_state);
    g_test_add_func("/drbd-wire/state/wire-values", test_state_wire_values);
    g_test_add_func("/drbd-wire/round-trip/data", test_round_trip_data);
    g_test_add_func("/drbd-wire/round-trip/block-ack",
                    test_round_trip_block_ack);
    g_test_add_func("/drbd-wire/round-trip/barrier", test_round_trip_barrier);
    g_test_add_func("/drbd-wire/round-trip/empty", test_round_trip_empty);
    g_test_add_func("/drbd-wire/header/invalid", test_header_invalid);
    g_test_add_func("/drbd-wire/bitmap", test_bitmap);
    g_test_add_func("/drbd-wire/uuids", test_uuids);
    g_test_add_func("/drbd-wire/data/invalid", test_data_invalid);
    g_test_add_func("/drbd-wire/block-ack/invalid", test_block_ack_invalid);
    g_test_add_func("/drbd-wire/barrier/invalid", test_barrier_invalid);
    g_test_add_func("/drbd-wire/hello/invalid", test_hello_invalid);
    g_test_add_func("/drbd-wire/sizes/invalid", test_sizes_invalid);
    g_test_add_func("/drbd-wire/state/invalid", test_state_invalid);
    g_test_add_func("/drbd-wire/state/request", test_state_request);
    g_test_add_func("/drbd-wire/messages", test_messages);
    g_test_add_func("/drbd-wire/hello/flags", test_hello_flags);
    g_test_add_func("/drbd-wire/sizes/integrity", test_sizes_integrity);
    g_test_add_func("/drbd-wire/auth/challenge", test_auth_challenge);
    g_test_add_func("/drbd-wire/auth/response", test_auth_response);
    g_test_add_func("/drbd-wire/sizes/verify", test_sizes_verify);
    g_test_add_func("/drbd-wire/round-trip/ov", test_round_trip_ov);
    g_test_add_func("/drbd-wire/ov/invalid", test_ov_invalid);
    g_test_add_func("/drbd-wire/sizes/csums", test_sizes_csums);
    g_test_add_func("/drbd-wire/round-trip/csum", test_round_trip_csum);
    g_test_add_func("/drbd-wire/csum/invalid", test_csum_invalid);
    g_test_add_func("/drbd-wire/round-trip/digest", test_round_trip_digest);
    g_test_add_func("/drbd-wire/digest/invalid", test_digest_invalid);
    g_test_add_func("/drbd-wire/digest/length",
                    test_digest_length_from_payload);
    g_test_add_func("/drbd-wire/read/round-trip", test_read_round_trip);
    g_test_add_func("/drbd-wire/new-uuid", test_new_uuid);
    g_test_add_func("/drbd-wire/refuse", test_refuse);
    g_test_add_func("/drbd-wire/decision", test_decision);
    g_test_add_func("/drbd-wire/resize", test_resize);
    g_test_add_func("/drbd-wire/read/invalid", test_read_invalid);
    g_test_add_func("/drbd-wire/truncation", test_truncation);
    g_test_add_func("/drbd-wire/mutation", test_mutation);

    return g_test_run();
}
