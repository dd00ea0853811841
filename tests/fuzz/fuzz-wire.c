/*
 * Fuzz target: the packet decoder (block/drbd/wire.c)
 *
 * The input is what a receiver reads from a channel: packets one after
 * the other, each a header and its payload.  Like a receiver, the target
 * decodes the header, takes the payload it announces and hands it to the
 * decoder for its command; the first packet that fails ends the
 * connection, and so the input.  A SIZES packet sets the disk size that
 * later requests are checked against, and the verify-alg and csums-alg
 * whose digest sizes OV_REQUEST, OV_REPLY, RS_CSUM and RS_CSUM_REPLY are
 * decoded with (until then: sha256 and none); BITMAP chunks are decoded
 * in sequence into a bitmap of that size, as during a handshake.
 *
 * Every packet that decodes must encode back to the very same bytes:
 * the format has one way to say each thing.
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "qemu/hbitmap.h"
#include "../../block/drbd/rle.h"
#include "../../block/drbd/wire.h"
#include "fuzz.h"

/* Until a SIZES packet says otherwise */
#define DEFAULT_DISK_SIZE   (64 * MiB)
#define DEFAULT_VERIFY      DRBD_DIGEST_SHA256
#define DEFAULT_CSUMS       DRBD_DIGEST_NONE
/* The fixed part of an OV packet (docs/interop/drbd-protocol.rst) */
#define OV_FIXED_SIZE       24
/* The bitmap the target decodes BITMAP chunks into: at most this many bits */
#define MAX_BITMAP_BITS     (1 << 20)

typedef struct WireState {
    uint64_t disk_size;
    uint32_t verify_size;       /* the digest size of verify-alg, or 0 */
    uint32_t csums_size;        /* ... of csums-alg */
    HBitmap *bitmap;
    uint64_t bitmap_bits;
    uint64_t bitmap_next;       /* where the next chunk must start */
} WireState;

/* The packet @pkt encoded must be the bytes @orig it was decoded from */
static void assert_same(GByteArray *pkt, const uint8_t *orig, size_t len)
{
    assert(pkt->len == len);
    assert(memcmp(pkt->data, orig, len) == 0);
}

static void decode_bitmap(WireState *ws, const uint8_t *chunk, uint32_t len)
{
    uint64_t before, next;
    Error *err = NULL;

    if (!ws->bitmap) {
        ws->bitmap_bits = MIN(DIV_ROUND_UP(ws->disk_size, 4096),
                              MAX_BITMAP_BITS);
        ws->bitmap = hbitmap_alloc(MAX(ws->bitmap_bits, 1), 0);
        ws->bitmap_next = 0;
    }
    before = hbitmap_count(ws->bitmap);
    if (drbd_rle_decode(chunk, len, ws->bitmap_next, ws->bitmap,
                        ws->bitmap_bits, &next, &err) < 0) {
        /* a refused chunk leaves the bitmap alone */
        assert(err);
        error_free(err);
        assert(hbitmap_count(ws->bitmap) == before);
        return;
    }
    assert(next > ws->bitmap_next && next <= ws->bitmap_bits);
    assert(hbitmap_count(ws->bitmap) - before <= next - ws->bitmap_next);
    ws->bitmap_next = next;
}

/*
 * Decode the payload @buf (@len bytes) of the packet @orig (header and
 * payload) as its command @cmd says; false if the decoder refused it
 */
static bool decode_payload(WireState *ws, uint16_t cmd, const uint8_t *buf,
                           uint32_t len, const uint8_t *orig)
{
    g_autoptr(GByteArray) pkt = g_byte_array_new();
    size_t total = DRBD_WIRE_HEADER_SIZE + len;
    Error *err = NULL;
    int ret;

    switch (cmd) {
    case DRBD_CMD_HELLO: {
        DrbdHello h;

        ret = drbd_wire_get_hello(buf, len, &h, &err);
        if (ret == 0) {
            assert(h.version_min >= 1 && h.version_min <= h.version_max);
            assert(strlen(h.resource) >= 1 &&
                   strlen(h.resource) <= DRBD_RESOURCE_NAME_MAX);
            drbd_wire_put_hello(pkt, &h);
            assert_same(pkt, orig, total);
        }
        break;
    }
    case DRBD_CMD_SIZES: {
        DrbdSizes s;

        ret = drbd_wire_get_sizes(buf, len, &s, &err);
        if (ret == 0) {
            assert(s.disk_size <= INT64_MAX);
            assert(s.integrity < DRBD_DIGEST__MAX);
            assert(s.verify < DRBD_DIGEST__MAX);
            assert(s.csums < DRBD_DIGEST__MAX);
            drbd_wire_put_sizes(pkt, &s);
            assert_same(pkt, orig, total);
            ws->verify_size = fuzz_digest_size(s.verify);
            ws->csums_size = fuzz_digest_size(s.csums);
            /* the bitmap is sized once, as on a connection */
            if (s.disk_size && !ws->bitmap) {
                ws->disk_size = s.disk_size;
            }
        }
        break;
    }
    case DRBD_CMD_STATE:
    case DRBD_CMD_STATE_REQ: {
        DrbdStatePacket st;

        ret = drbd_wire_get_state(buf, len, &st, &err);
        if (ret == 0) {
            assert(st.role < DRBD_ROLE__MAX);
            assert(st.disk_state < DRBD_DISK_STATE__MAX);
            if (cmd == DRBD_CMD_STATE) {
                drbd_wire_put_state(pkt, &st);
            } else {
                drbd_wire_put_state_req(pkt, &st);
            }
            assert_same(pkt, orig, total);
        }
        break;
    }
    case DRBD_CMD_STATE_REPLY: {
        uint32_t result;

        ret = drbd_wire_get_state_reply(buf, len, &result, &err);
        if (ret == 0) {
            drbd_wire_put_state_reply(pkt, result);
            assert_same(pkt, orig, total);
        }
        break;
    }
    case DRBD_CMD_REFUSE: {
        DrbdRefuse r;

        ret = drbd_wire_get_refuse(buf, len, &r, &err);
        if (ret == 0) {
            assert(r.reason >= 1 && r.reason <= DRBD_REFUSE_MAX);
            assert(r.node_id <= DRBD_WIRE_NODE_ID_MAX);
            drbd_wire_put_refuse(pkt, &r);
            assert_same(pkt, orig, total);
        }
        break;
    }
    case DRBD_CMD_DECISION: {
        DrbdDecision d;

        ret = drbd_wire_get_decision(buf, len, &d, &err);
        if (ret == 0) {
            assert(d.outcome <= DRBD_DECISION_MAX);
            assert(d.rule <= DRBD_DECISION_RULE_MAX);
            drbd_wire_put_decision(pkt, &d);
            assert_same(pkt, orig, total);
        }
        break;
    }
    case DRBD_CMD_NEW_UUID: {
        uint64_t uuid;

        ret = drbd_wire_get_new_uuid(buf, len, &uuid, &err);
        if (ret == 0) {
            drbd_wire_put_new_uuid(pkt, uuid);
            assert_same(pkt, orig, total);
        }
        break;
    }
    case DRBD_CMD_RESIZE: {
        uint64_t size;

        ret = drbd_wire_get_resize(buf, len, &size, &err);
        if (ret == 0) {
            assert(size && size % DRBD_WIRE_ALIGN == 0);
            drbd_wire_put_resize(pkt, size);
            assert_same(pkt, orig, total);
        }
        break;
    }
    case DRBD_CMD_RESIZE_REPLY: {
        uint32_t result;

        ret = drbd_wire_get_resize_reply(buf, len, &result, &err);
        if (ret == 0) {
            drbd_wire_put_resize_reply(pkt, result);
            assert_same(pkt, orig, total);
        }
        break;
    }
    case DRBD_CMD_DATA_REQUEST:
    case DRBD_CMD_NEG_DREPLY: {
        DrbdBlockAck a;

        ret = drbd_wire_get_block_ack(cmd, buf, len, ws->disk_size, &a,
                                      &err);
        if (ret == 0) {
            assert(a.bytes > 0 && a.offset + a.bytes <= ws->disk_size);
        }
        break;
    }
    case DRBD_CMD_DATA_REPLY: {
        DrbdDataPacket p;

        ret = drbd_wire_get_data(cmd, buf, len, ws->disk_size, &p, &err);
        if (ret == 0) {
            assert(p.bytes > 0 && p.offset + p.bytes <= ws->disk_size);
        }
        break;
    }
    case DRBD_CMD_UUIDS: {
        DrbdUuidsPacket u;

        ret = drbd_wire_get_uuids(buf, len, &u, &err);
        if (ret == 0) {
            drbd_wire_put_uuids(pkt, &u);
            assert_same(pkt, orig, total);
        }
        break;
    }
    case DRBD_CMD_DATA:
    case DRBD_CMD_ZEROES:
    case DRBD_CMD_DISCARD:
    case DRBD_CMD_RS_DATA:
    case DRBD_CMD_RS_ZEROES: {
        DrbdDataPacket p;

        ret = drbd_wire_get_data(cmd, buf, len, ws->disk_size, &p, &err);
        if (ret == 0) {
            assert(p.bytes > 0 && p.bytes % DRBD_WIRE_ALIGN == 0);
            assert(p.offset % DRBD_WIRE_ALIGN == 0);
            assert(p.offset + p.bytes <= ws->disk_size);
            if (cmd == DRBD_CMD_DATA || cmd == DRBD_CMD_RS_DATA) {
                /* a digest, if any, then the data fill the payload */
                assert(p.digest_len == 0 ||
                       (p.digest_len >= DRBD_WIRE_DIGEST_MIN &&
                        p.digest_len <= DRBD_WIRE_DIGEST_MAX));
                assert(p.digest == (p.digest_len ?
                                    buf + DRBD_WIRE_DATA_FIXED_SIZE : NULL));
                assert(p.data == buf + DRBD_WIRE_DATA_FIXED_SIZE +
                       p.digest_len);
                assert(DRBD_WIRE_DATA_FIXED_SIZE + p.digest_len + p.bytes ==
                       len);
            } else {
                assert(!p.data && !p.digest && !p.digest_len);
            }
            if (cmd == DRBD_CMD_RS_DATA || cmd == DRBD_CMD_RS_ZEROES) {
                /* resync writes are no guest writes */
                assert(p.unordered == 0);
            }
            drbd_wire_put_data(pkt, cmd, &p);
            assert_same(pkt, orig, total);
        }
        break;
    }
    case DRBD_CMD_RECV_ACK:
    case DRBD_CMD_WRITE_ACK:
    case DRBD_CMD_NEG_ACK:
    case DRBD_CMD_OUT_OF_SYNC: {
        DrbdBlockAck a;

        ret = drbd_wire_get_block_ack(cmd, buf, len, ws->disk_size, &a,
                                      &err);
        if (ret == 0) {
            assert(a.bytes > 0 && a.offset + a.bytes <= ws->disk_size);
            drbd_wire_put_block_ack(pkt, cmd, &a);
            assert_same(pkt, orig, total);
        }
        break;
    }
    case DRBD_CMD_BARRIER:
    case DRBD_CMD_BARRIER_ACK: {
        DrbdBarrier b;

        ret = drbd_wire_get_barrier(cmd, buf, len, &b, &err);
        if (ret == 0) {
            drbd_wire_put_barrier(pkt, cmd, &b);
            assert_same(pkt, orig, total);
        }
        break;
    }
    case DRBD_CMD_AUTH_CHALLENGE: {
        DrbdAuthChallenge c;

        ret = drbd_wire_get_auth_challenge(buf, len, &c, &err);
        if (ret == 0) {
            assert(c.digest != DRBD_DIGEST_NONE &&
                   c.digest != DRBD_DIGEST_CRC32C &&
                   c.digest < DRBD_DIGEST__MAX);
            assert(strcmp(drbd_digest_name(c.digest), "unknown") != 0);
            drbd_wire_put_auth_challenge(pkt, &c);
            assert_same(pkt, orig, total);
        }
        break;
    }
    case DRBD_CMD_AUTH_RESPONSE: {
        DrbdAuthResponse r;

        ret = drbd_wire_get_auth_response(buf, len, &r, &err);
        if (ret == 0) {
            drbd_wire_put_auth_response(pkt, &r);
            assert_same(pkt, orig, total);
        }
        break;
    }
    case DRBD_CMD_OV_REQUEST:
    case DRBD_CMD_OV_REPLY:
    case DRBD_CMD_RS_CSUM:
    case DRBD_CMD_RS_CSUM_REPLY: {
        bool csums = cmd == DRBD_CMD_RS_CSUM ||
                     cmd == DRBD_CMD_RS_CSUM_REPLY;
        uint32_t dsize = csums ? ws->csums_size : ws->verify_size;
        uint32_t blocks;
        DrbdOvPacket p;

        ret = drbd_wire_get_ov(cmd, buf, len, ws->disk_size, dsize, &p,
                               &err);
        if (ret == 0) {
            blocks = drbd_ov_blocks(p.bytes);
            assert(p.bytes > 0 && p.bytes <= DRBD_OV_MAX_BYTES);
            assert(p.bytes % DRBD_WIRE_ALIGN == 0);
            assert(p.offset % DRBD_WIRE_ALIGN == 0);
            assert(p.offset + p.bytes <= ws->disk_size);
            assert(blocks >= 1 && blocks <= DRBD_OV_MAX_BLOCKS);
            assert(!(p.flags & ~DRBD_OV_REPLY_KINDS));
            if (cmd == DRBD_CMD_OV_REQUEST) {
                /* a request carries digests or nothing */
                assert(!(p.flags & ~DRBD_OV_DIGESTS));
            } else if (cmd == DRBD_CMD_OV_REPLY) {
                /* a reply is exactly one of the three kinds */
                assert(p.flags == DRBD_OV_DIGESTS ||
                       p.flags == DRBD_OV_RESULT ||
                       p.flags == DRBD_OV_SKIPPED);
            }
            /* the payload is the fixed part and what the flags say */
            if (p.flags & DRBD_OV_DIGESTS) {
                assert(dsize && p.digest_size == dsize);
                assert(p.digests == buf + OV_FIXED_SIZE);
                assert(len == OV_FIXED_SIZE + blocks * dsize);
            } else {
                assert(!p.digests && !p.digest_size);
            }
            if (p.flags & DRBD_OV_RESULT) {
                assert(len == OV_FIXED_SIZE + 8);
                assert(blocks == 64 || !(p.mismatch >> blocks));
            } else {
                assert(!p.mismatch);
            }
            if (!(p.flags & (DRBD_OV_DIGESTS | DRBD_OV_RESULT))) {
                assert(len == OV_FIXED_SIZE);
            }
            drbd_wire_put_ov(pkt, cmd, &p);
            assert_same(pkt, orig, total);
        }
        break;
    }
    case DRBD_CMD_PING:
    case DRBD_CMD_PING_ACK:
    case DRBD_CMD_RS_DONE:
        /* the header allows no payload */
        assert(len == 0);
        drbd_wire_put_empty(pkt, cmd);
        assert_same(pkt, orig, total);
        ret = 0;
        break;
    case DRBD_CMD_BITMAP:
        drbd_wire_put_bitmap(pkt, buf, len);
        assert_same(pkt, orig, total);
        decode_bitmap(ws, buf, len);
        ret = 0;
        break;
    default:
        /* drbd_wire_get_header() knows no other: teach the target */
        abort();
    }

    if (ret < 0) {
        /* a refusal says why */
        assert(ret == -EINVAL && err);
        assert(*error_get_pretty(err));
        fuzz_refused(err);
        error_free(err);
        return false;
    }
    assert(!err);
    return true;
}

DRBD_FUZZ_TARGET(wire)
{
    FuzzInput in = { data, size };
    WireState ws = {
        .disk_size = DEFAULT_DISK_SIZE,
        .verify_size = fuzz_digest_size(DEFAULT_VERIFY),
        .csums_size = fuzz_digest_size(DEFAULT_CSUMS),
    };

    for (;;) {
        const uint8_t *orig = in.p;
        const uint8_t *hdr = fuzz_take(&in, DRBD_WIRE_HEADER_SIZE);
        g_autofree uint8_t *payload = NULL;
        Error *err = NULL;
        DrbdHeader h;

        if (!hdr) {
            break;
        }
        if (drbd_wire_get_header(hdr, &h, &err) < 0) {
            assert(err);
            fuzz_refused(err);
            error_free(err);
            break;
        }
        assert(h.cmd < DRBD_CMD__MAX);
        assert(h.length <= DRBD_WIRE_MAX_PAYLOAD);
        assert(strcmp(drbd_cmd_name(h.cmd), "unknown") != 0);
        /* the connection ends in the middle of the payload */
        if (!fuzz_take_copy(&in, h.length, &payload)) {
            break;
        }
        if (!decode_payload(&ws, h.cmd, payload, h.length, orig)) {
            break;
        }
    }

    if (ws.bitmap) {
        hbitmap_free(ws.bitmap);
    }
    return 0;
}
