/*
 * Write the seed corpus of the fuzz targets: valid inputs of every kind,
 * made with the driver's own encoders, in the input format of each
 * target (see the comment at the top of each tests/fuzz/fuzz-*.c)
 *
 * usage: gen-corpus DIR   (scripts/fuzz.sh corpus writes tests/fuzz/corpus)
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "qemu/bswap.h"
#include "qemu/hbitmap.h"
#include "../../block/drbd/gate.h"
#include "../../block/drbd/md-format.h"
#include "../../block/drbd/rle.h"
#include "../../block/drbd/wire.h"

#define DISK_SIZE   (64 * MiB)
#define BLOCK       DRBD_MD_BLOCK_SIZE

static const char *corpus_dir;

static void write_seed(const char *target, const char *name,
                       const GByteArray *seed)
{
    g_autofree char *dir = g_build_filename(corpus_dir, target, NULL);
    g_autofree char *path = g_build_filename(dir, name, NULL);
    g_autoptr(GError) err = NULL;

    if (g_mkdir_with_parents(dir, 0755) < 0 ||
        !g_file_set_contents(path, (const char *)seed->data, seed->len,
                             &err)) {
        fprintf(stderr, "gen-corpus: cannot write %s\n", path);
        exit(1);
    }
}

static void put_u8(GByteArray *b, uint8_t v)
{
    g_byte_array_append(b, &v, 1);
}

static void put_be16(GByteArray *b, uint16_t v)
{
    uint8_t buf[2];

    stw_be_p(buf, v);
    g_byte_array_append(b, buf, sizeof(buf));
}

static void put_be32(GByteArray *b, uint32_t v)
{
    uint8_t buf[4];

    stl_be_p(buf, v);
    g_byte_array_append(b, buf, sizeof(buf));
}

static void put_be64(GByteArray *b, uint64_t v)
{
    uint8_t buf[8];

    stq_be_p(buf, v);
    g_byte_array_append(b, buf, sizeof(buf));
}

static void put_write(GByteArray *b, uint16_t cmd, uint64_t offset,
                      uint32_t bytes, uint64_t id, uint32_t epoch,
                      uint32_t unordered, uint32_t digest_len)
{
    g_autofree uint8_t *data = g_malloc(bytes);
    uint8_t digest[DRBD_WIRE_DIGEST_MAX];
    DrbdDataPacket p = {
        .offset = offset, .id = id, .epoch = epoch, .bytes = bytes,
        .unordered = unordered, .data = data,
        .digest = digest_len ? digest : NULL, .digest_len = digest_len,
    };

    memset(data, 0x5a, bytes);
    memset(digest, 0xd1, sizeof(digest));
    drbd_wire_put_data(b, cmd, &p);
}

static void put_ack(GByteArray *b, uint16_t cmd, uint64_t offset,
                    uint32_t bytes, uint64_t id)
{
    DrbdBlockAck a = { .offset = offset, .bytes = bytes, .id = id };

    drbd_wire_put_block_ack(b, cmd, &a);
}

static void put_barrier(GByteArray *b, uint16_t cmd, uint32_t epoch,
                        uint32_t set_size, uint32_t flags)
{
    DrbdBarrier bar = { .epoch = epoch, .set_size = set_size,
                        .flags = flags };

    drbd_wire_put_barrier(b, cmd, &bar);
}

/*
 * An OV packet; with DRBD_OV_DIGESTS, one digest of @digest_size bytes
 * per 4 KiB block of the range
 */
static void put_ov(GByteArray *b, uint16_t cmd, uint64_t offset,
                   uint32_t bytes, uint64_t id, uint32_t flags,
                   uint32_t digest_size, uint64_t mismatch)
{
    g_autofree uint8_t *digests =
        g_malloc((size_t)drbd_ov_blocks(bytes) * digest_size + 1);
    DrbdOvPacket p = {
        .offset = offset, .id = id, .bytes = bytes, .flags = flags,
        .mismatch = mismatch,
    };

    if (flags & DRBD_OV_DIGESTS) {
        memset(digests, 0xd5, drbd_ov_blocks(bytes) * digest_size);
        p.digests = digests;
        p.digest_size = digest_size;
    }
    drbd_wire_put_ov(b, cmd, &p);
}

static void put_state(GByteArray *b, bool req, DrbdRole role,
                      DrbdDiskState disk)
{
    DrbdStatePacket st = { .role = role, .disk_state = disk };

    if (req) {
        drbd_wire_put_state_req(b, &st);
    } else {
        drbd_wire_put_state(b, &st);
    }
}

/* The bitmap of rle.h's example: 200 bits, 0-2, 10 and 150-199 set */
static HBitmap *example_bitmap(void)
{
    HBitmap *hb = hbitmap_alloc(200, 0);

    hbitmap_set(hb, 0, 3);
    hbitmap_set(hb, 10, 1);
    hbitmap_set(hb, 150, 50);
    return hb;
}

/* A sparse bitmap of @bits bits: every 37th bit and a long run */
static HBitmap *sparse_bitmap(uint64_t bits)
{
    HBitmap *hb = hbitmap_alloc(bits, 0);
    uint64_t i;

    for (i = 5; i < bits; i += 37) {
        hbitmap_set(hb, i, 1 + i % 3);
    }
    hbitmap_set(hb, bits / 2, bits / 4);
    return hb;
}

/* Append BITMAP packets (or, @framed, rle's length-prefixed chunks) */
static unsigned put_chunks(GByteArray *b, const HBitmap *hb, uint64_t bits,
                           size_t max_len, bool framed)
{
    g_autofree uint8_t *chunk = g_malloc(max_len);
    uint64_t pos = 0;
    unsigned n = 0;
    size_t len;

    while ((len = drbd_rle_encode(hb, bits, &pos, chunk, max_len)) != 0) {
        if (framed) {
            put_be16(b, len);
            g_byte_array_append(b, chunk, len);
        } else {
            drbd_wire_put_bitmap(b, chunk, len);
        }
        n++;
    }
    return n;
}

static void gen_wire(void)
{
    DrbdHello hello = {
        .version_min = DRBD_PROTO_VERSION_MIN,
        .version_max = DRBD_PROTO_VERSION_MAX,
        .node_id = 1,
        .flags = DRBD_HELLO_META_CHANNEL,
        .resource = "r0",
    };
    DrbdSizes sizes = {
        .disk_size = DISK_SIZE, .max_epoch_size = 2048, .protocol = 'C',
        .integrity = DRBD_DIGEST_CRC32C,
    };
    DrbdUuidsPacket uuids = {
        .current = 0x1234567890abcdefULL, .bitmap = 0x2468ace013579bdfULL,
        .history = { 0x1111, 0x2222 }, .changes = 42,
        .flags = DRBD_UUIDS_CRASHED_PRIMARY, .after_sb = { 1, 2, 3 },
    };
    DrbdAuthChallenge challenge = { .digest = DRBD_DIGEST_SHA256 };
    DrbdAuthResponse response = { .len = 32 };
    GByteArray *b;
    HBitmap *hb;

    memset(challenge.nonce, 0x42, sizeof(challenge.nonce));
    memset(response.digest, 0x24, sizeof(response.digest));

    /* A handshake, as the data channel carries it */
    b = g_byte_array_new();
    drbd_wire_put_hello(b, &hello);
    drbd_wire_put_auth_challenge(b, &challenge);
    drbd_wire_put_auth_response(b, &response);
    drbd_wire_put_sizes(b, &sizes);
    drbd_wire_put_uuids(b, &uuids);
    put_state(b, false, DRBD_ROLE_PRIMARY, DRBD_DISK_STATE_UP_TO_DATE);
    hb = sparse_bitmap(DISK_SIZE / 4096);
    put_chunks(b, hb, DISK_SIZE / 4096, 4096, false);
    hbitmap_free(hb);
    drbd_wire_put_decision(b, &(DrbdDecision) {
        .outcome = DRBD_DECISION_SOURCE, .rule = 50,
    });
    write_seed("wire", "handshake", b);
    g_byte_array_free(b, true);

    /* A HELLO refused (version 7): why, in place of the answer's HELLO */
    b = g_byte_array_new();
    drbd_wire_put_hello(b, &hello);
    drbd_wire_put_refuse(b, &(DrbdRefuse) {
        .reason = DRBD_REFUSE_SAME_NODE_ID, .node_id = 1,
    });
    write_seed("wire", "refuse", b);
    g_byte_array_free(b, true);

    /* Replication: writes, barriers, a resync */
    b = g_byte_array_new();
    put_write(b, DRBD_CMD_DATA, 0, 4096, 1, 7, 0, 0);
    put_write(b, DRBD_CMD_DATA, 8192, 512, 2, 7, 1, 4);
    put_write(b, DRBD_CMD_ZEROES, 1 * MiB, 64 * KiB, 3, 7, 0, 0);
    put_write(b, DRBD_CMD_DISCARD, 2 * MiB, 1 * MiB, 4, 7, 2, 0);
    put_barrier(b, DRBD_CMD_BARRIER, 7, 4, DRBD_BARRIER_FLUSH);
    put_ack(b, DRBD_CMD_OUT_OF_SYNC, 0, 256 * KiB, 0);
    put_write(b, DRBD_CMD_RS_DATA, 0, 4096, DRBD_GATE_RESYNC_ID, 0, 0, 32);
    drbd_wire_put_empty(b, DRBD_CMD_RS_DONE);
    put_state(b, true, DRBD_ROLE_PRIMARY, DRBD_DISK_STATE_UP_TO_DATE);
    write_seed("wire", "data-channel", b);
    g_byte_array_free(b, true);

    /* Acks and pings, as the meta channel carries them */
    b = g_byte_array_new();
    drbd_wire_put_empty(b, DRBD_CMD_PING);
    drbd_wire_put_empty(b, DRBD_CMD_PING_ACK);
    put_ack(b, DRBD_CMD_RECV_ACK, 0, 4096, 1);
    put_ack(b, DRBD_CMD_WRITE_ACK, 0, 4096, 1);
    put_ack(b, DRBD_CMD_NEG_ACK, 8192, 512, 2);
    put_barrier(b, DRBD_CMD_BARRIER_ACK, 7, 4, 0);
    drbd_wire_put_state_reply(b, DRBD_STATE_REPLY_REFUSED);
    write_seed("wire", "meta-channel", b);
    g_byte_array_free(b, true);

    /*
     * Online verify with sha1 (20-byte digests) on a disk whose last
     * 4 KiB block is short: requests with and without digests, a reply
     * of each kind, the last range ending at the end of the disk
     */
    sizes.disk_size = DISK_SIZE + 1536;
    sizes.verify = DRBD_DIGEST_SHA1;
    b = g_byte_array_new();
    drbd_wire_put_sizes(b, &sizes);
    put_ov(b, DRBD_CMD_OV_REQUEST, 0, DRBD_OV_MAX_BYTES, 1, 0, 0, 0);
    put_ov(b, DRBD_CMD_OV_REPLY, 0, DRBD_OV_MAX_BYTES, 1, DRBD_OV_DIGESTS,
           20, 0);
    put_ov(b, DRBD_CMD_OV_REQUEST, DRBD_OV_MAX_BYTES, 8192, 2,
           DRBD_OV_DIGESTS, 20, 0);
    put_ov(b, DRBD_CMD_OV_REPLY, DRBD_OV_MAX_BYTES, 8192, 2, DRBD_OV_RESULT,
           0, 0x2);
    put_ov(b, DRBD_CMD_OV_REQUEST, DISK_SIZE - 8192, 8192 + 1536, 3,
           DRBD_OV_DIGESTS, 20, 0);
    put_ov(b, DRBD_CMD_OV_REPLY, DISK_SIZE - 8192, 8192 + 1536, 3,
           DRBD_OV_RESULT, 0, 0x5);
    put_ov(b, DRBD_CMD_OV_REPLY, 1 * MiB, 4096, 4, DRBD_OV_SKIPPED, 0, 0);
    write_seed("wire", "verify", b);
    g_byte_array_free(b, true);

    /* The largest OV packets, with sha512: 64 digests of 64 bytes */
    sizes.disk_size = DISK_SIZE;
    sizes.verify = DRBD_DIGEST_SHA512;
    b = g_byte_array_new();
    drbd_wire_put_sizes(b, &sizes);
    put_ov(b, DRBD_CMD_OV_REQUEST, 0, DRBD_OV_MAX_BYTES, 7,
           DRBD_OV_DIGESTS, 64, 0);
    put_ov(b, DRBD_CMD_OV_REPLY, 0, DRBD_OV_MAX_BYTES, 7, DRBD_OV_RESULT,
           0, UINT64_MAX);
    put_ov(b, DRBD_CMD_OV_REPLY, DISK_SIZE - DRBD_OV_MAX_BYTES,
           DRBD_OV_MAX_BYTES, 8, DRBD_OV_DIGESTS, 64, 0);
    write_seed("wire", "verify-sha512", b);
    g_byte_array_free(b, true);

    /*
     * Checksum-based resync with md5 (16-byte digests) on a disk whose
     * last 4 KiB block is short: the checksums of a whole chunk, of three
     * blocks and of the last, short chunk, and a reply to each
     */
    sizes.disk_size = DISK_SIZE + 1536;
    sizes.verify = DRBD_DIGEST_NONE;
    sizes.csums = DRBD_DIGEST_MD5;
    b = g_byte_array_new();
    drbd_wire_put_sizes(b, &sizes);
    put_ov(b, DRBD_CMD_RS_CSUM, 0, DRBD_OV_MAX_BYTES, DRBD_GATE_RESYNC_ID,
           DRBD_OV_DIGESTS, 16, 0);
    put_ov(b, DRBD_CMD_RS_CSUM, 1 * MiB, 12288, DRBD_GATE_RESYNC_ID | 1 * MiB,
           DRBD_OV_DIGESTS, 16, 0);
    put_ov(b, DRBD_CMD_RS_CSUM, DISK_SIZE - 8192, 8192 + 1536,
           DRBD_GATE_RESYNC_ID | (DISK_SIZE - 8192), DRBD_OV_DIGESTS, 16, 0);
    put_ov(b, DRBD_CMD_RS_CSUM_REPLY, 0, DRBD_OV_MAX_BYTES,
           DRBD_GATE_RESYNC_ID, DRBD_OV_RESULT, 0, 0x8000000000000001ULL);
    put_ov(b, DRBD_CMD_RS_CSUM_REPLY, 1 * MiB, 12288,
           DRBD_GATE_RESYNC_ID | 1 * MiB, DRBD_OV_RESULT, 0, 0);
    put_ov(b, DRBD_CMD_RS_CSUM_REPLY, DISK_SIZE - 8192, 8192 + 1536,
           DRBD_GATE_RESYNC_ID | (DISK_SIZE - 8192), DRBD_OV_RESULT, 0, 0x4);
    write_seed("wire", "csums", b);
    g_byte_array_free(b, true);
}

/* fuzz-rle.c's header: the bitmap's size and the chunk size selector */
static void put_rle_header(GByteArray *b, uint32_t bits, uint8_t chunk_sel)
{
    put_u8(b, (bits - 1) >> 16);
    put_be16(b, bits - 1);
    put_u8(b, chunk_sel);
}

static void gen_rle(void)
{
    GByteArray *b;
    HBitmap *hb;

    /* rle.h's example, in one chunk */
    b = g_byte_array_new();
    put_rle_header(b, 200, 0);
    hb = example_bitmap();
    put_chunks(b, hb, 200, DRBD_RLE_MIN_CHUNK, true);
    hbitmap_free(hb);
    write_seed("rle", "example", b);
    g_byte_array_free(b, true);

    /* A sparse bitmap in chunks of the smallest size: runs are split */
    b = g_byte_array_new();
    put_rle_header(b, 0x4001, 1);
    hb = sparse_bitmap(0x4001);
    put_chunks(b, hb, 0x4001, DRBD_RLE_MIN_CHUNK, true);
    hbitmap_free(hb);
    write_seed("rle", "sparse-small-chunks", b);
    g_byte_array_free(b, true);

    /* All set, in the largest bitmap: one run */
    b = g_byte_array_new();
    put_rle_header(b, 1 << 20, 255);
    hb = hbitmap_alloc(1 << 20, 0);
    hbitmap_set(hb, 0, 1 << 20);
    put_chunks(b, hb, 1 << 20, DRBD_RLE_MIN_CHUNK, true);
    hbitmap_free(hb);
    write_seed("rle", "all-set", b);
    g_byte_array_free(b, true);
}

static void put_superblock(GByteArray *b, DrbdMdPlacement placement,
                           uint64_t data_size, uint32_t al_extents,
                           uint32_t max_peers, uint64_t flags)
{
    uint8_t *blk = g_malloc(BLOCK);
    DrbdMdLayout l;
    DrbdSuperblock sb;

    if (placement == DRBD_MD_INTERNAL) {
        drbd_md_layout_internal(data_size, al_extents, max_peers, &l,
                                &error_abort);
    } else {
        drbd_md_layout_external(data_size, al_extents, max_peers, &l,
                                &error_abort);
    }
    drbd_md_sb_init(&sb, &l, 1, 0xfeedfacecafebeefULL);
    sb.flags = flags;
    sb.uuid_current = 0x1234567890abcdefULL;
    sb.uuid_history[0] = 0x1111;
    sb.al_tr_number = 12;
    if (max_peers > 1) {
        /* One slot assigned, with a bitmap UUID */
        sb.slots[1].node_id = 2;
        sb.slots[1].bitmap_uuid = 0x2222;
    }
    drbd_md_sb_encode(&sb, blk);

    put_u8(b, 0);               /* sealed already */
    put_be64(b, l.image_size);
    g_byte_array_append(b, blk, BLOCK);
    g_free(blk);
}

static void gen_superblock(void)
{
    GByteArray *b;

    b = g_byte_array_new();
    put_superblock(b, DRBD_MD_INTERNAL, DISK_SIZE, 257, 1,
                   DRBD_MDF_CONSISTENT | DRBD_MDF_AL_CLEAN);
    write_seed("superblock", "internal", b);
    g_byte_array_free(b, true);

    b = g_byte_array_new();
    put_superblock(b, DRBD_MD_EXTERNAL, 3 * GiB + 512, DRBD_AL_EXTENTS_MAX,
                   1, DRBD_MDF_ALL);
    write_seed("superblock", "external", b);
    g_byte_array_free(b, true);

    b = g_byte_array_new();
    put_superblock(b, DRBD_MD_INTERNAL, DISK_SIZE, 257, 3,
                   DRBD_MDF_CONSISTENT | DRBD_MDF_AL_CLEAN);
    write_seed("superblock", "slots", b);
    g_byte_array_free(b, true);
}

/*
 * A ring of @al_blocks blocks holding transactions @first .. @last of a
 * device with @al_extents slots, each putting extent tr * 3 into slot
 * tr % al_extents, with the rotating context a writer adds
 */
static void put_ring(GByteArray *b, uint32_t al_extents, uint32_t al_blocks,
                     uint64_t first, uint64_t last)
{
    g_autofree uint8_t *ring = g_malloc0(al_blocks * BLOCK);
    g_autofree uint32_t *slots = g_new(uint32_t, al_extents);
    g_autofree DrbdAlTransaction *tr = g_new0(DrbdAlTransaction, 1);
    uint64_t n;
    uint32_t i;

    for (i = 0; i < al_extents; i++) {
        slots[i] = DRBD_AL_EXTENT_NONE;
    }
    for (n = first; n <= last; n++) {
        uint32_t start, size;

        memset(tr, 0, sizeof(*tr));
        tr->tr_number = n;
        tr->al_extents = al_extents;
        tr->n_updates = 1;
        tr->updates[0].slot = n % al_extents;
        tr->updates[0].extent = n * 3;
        slots[n % al_extents] = n * 3;
        drbd_al_next_context(n, al_extents, al_blocks, &start, &size);
        tr->context_start = start;
        tr->context_size = MIN(size, al_extents);
        for (i = 0; i < tr->context_size; i++) {
            tr->context[i] = slots[(start + i) % al_extents];
        }
        drbd_al_tr_encode(tr, ring + (n % al_blocks) * BLOCK);
    }

    put_u8(b, 0);               /* sealed already */
    put_be16(b, al_extents);
    put_u8(b, al_blocks - 2);
    /* the blocks after the last one written are zero: the target pads */
    g_byte_array_append(b, ring, MIN(last + 1, al_blocks) * BLOCK);
}

static void gen_al(void)
{
    GByteArray *b;

    b = g_byte_array_new();
    put_ring(b, 61, DRBD_MD_AL_BLOCKS, 0, 2);
    write_seed("al", "three-transactions", b);
    g_byte_array_free(b, true);

    b = g_byte_array_new();
    put_ring(b, 7, DRBD_MD_AL_BLOCKS, 5, 12);
    write_seed("al", "wrapped", b);
    g_byte_array_free(b, true);

    b = g_byte_array_new();
    put_ring(b, 12, 3, 100, 101);
    write_seed("al", "short-ring", b);
    g_byte_array_free(b, true);
}

/* fuzz-gate.c's configuration; a verify-alg goes in @flags' bits 4-7 */
static void put_config(GByteArray *b, uint8_t flags, DrbdSyncDecision d,
                       DrbdRole peer_role, DrbdDiskState peer_disk,
                       uint64_t disk_size, uint32_t epoch)
{
    put_u8(b, flags);
    put_u8(b, d);
    put_u8(b, peer_role);
    put_u8(b, peer_disk);
    put_be32(b, disk_size / 512 - 1);
    put_be32(b, epoch);
}

#define GATE_RECV   0x80    /* a packet follows */
#define GATE_VERIFY(alg)    ((alg) << 4)
#define GATE_CSUMS(alg)     (0x08 | (alg) << 4)

/* fuzz-gate.c's step 6: the node sends a verify request */
static void put_verify_request(GByteArray *b, uint16_t block, uint8_t blocks,
                               bool digests)
{
    put_u8(b, 6);
    put_be16(b, block);
    put_u8(b, (blocks - 1) | (digests ? 0x40 : 0));
}

/* fuzz-gate.c's step 7: the node sends the checksums of a resync chunk */
static void put_csum_step(GByteArray *b, uint16_t block, uint8_t blocks)
{
    put_u8(b, 7);
    put_be16(b, block);
    put_u8(b, blocks - 1);
}

static void gen_gate(void)
{
    GByteArray *b;

    /* A secondary applies writes in epochs, and finishes them */
    b = g_byte_array_new();
    put_config(b, 0, DRBD_SYNC_NONE, DRBD_ROLE_PRIMARY,
               DRBD_DISK_STATE_UP_TO_DATE, DISK_SIZE, 1);
    put_u8(b, GATE_RECV);
    put_write(b, DRBD_CMD_DATA, 0, 4096, 1, 1, 0, 0);
    put_u8(b, GATE_RECV);
    put_write(b, DRBD_CMD_ZEROES, 1 * MiB, 64 * KiB, 2, 1, 1, 0);
    put_u8(b, GATE_RECV);
    put_barrier(b, DRBD_CMD_BARRIER, 1, 2, DRBD_BARRIER_FLUSH);
    put_u8(b, 3);               /* a write finishes */
    put_u8(b, 1);
    put_u8(b, GATE_RECV);
    put_write(b, DRBD_CMD_DISCARD, 2 * MiB, 4096, 3, 2, 0, 0);
    put_u8(b, GATE_RECV);
    put_barrier(b, DRBD_CMD_BARRIER, 2, 1, 0);
    put_u8(b, GATE_RECV);
    put_state(b, false, DRBD_ROLE_SECONDARY, DRBD_DISK_STATE_UP_TO_DATE);
    write_seed("gate", "secondary-applies", b);
    g_byte_array_free(b, true);

    /* A primary sends writes and epochs; the peer acks them */
    b = g_byte_array_new();
    put_config(b, 1, DRBD_SYNC_NONE, DRBD_ROLE_SECONDARY,
               DRBD_DISK_STATE_UP_TO_DATE, DISK_SIZE, UINT32_MAX);
    put_u8(b, 0);
    put_u8(b, 0);
    put_u8(b, 1);               /* epoch UINT32_MAX closed */
    put_u8(b, 0);
    put_u8(b, 1);               /* epoch 0 closed: the numbers wrap */
    put_u8(b, GATE_RECV);
    put_ack(b, DRBD_CMD_RECV_ACK, 0, 4096, 1);
    put_u8(b, GATE_RECV);
    put_ack(b, DRBD_CMD_WRITE_ACK, 0, 4096, 2);
    put_u8(b, GATE_RECV);
    put_ack(b, DRBD_CMD_NEG_ACK, 4096, 4096, 3);
    put_u8(b, GATE_RECV);
    put_barrier(b, DRBD_CMD_BARRIER_ACK, UINT32_MAX, 2, 0);
    put_u8(b, GATE_RECV);
    put_barrier(b, DRBD_CMD_BARRIER_ACK, 0, 1, 0);
    put_u8(b, GATE_RECV);
    drbd_wire_put_empty(b, DRBD_CMD_PING);
    write_seed("gate", "primary-acked", b);
    g_byte_array_free(b, true);

    /* A sync source sends chunks; the target acks them */
    b = g_byte_array_new();
    put_config(b, 4, DRBD_SYNC_SOURCE, DRBD_ROLE_SECONDARY,
               DRBD_DISK_STATE_INCONSISTENT, DISK_SIZE + 512, 0);
    put_u8(b, 2);               /* a chunk at block 0, 64 blocks */
    put_be16(b, 0);
    put_u8(b, 63);
    put_u8(b, 2);               /* the last, short chunk */
    put_be16(b, DISK_SIZE / 4096);
    put_u8(b, 0);
    put_u8(b, GATE_RECV);
    put_ack(b, DRBD_CMD_WRITE_ACK, 0, 256 * KiB, DRBD_GATE_RESYNC_ID);
    put_u8(b, GATE_RECV);
    put_ack(b, DRBD_CMD_WRITE_ACK, DISK_SIZE, 512,
            DRBD_GATE_RESYNC_ID | DISK_SIZE);
    write_seed("gate", "sync-source", b);
    g_byte_array_free(b, true);

    /* A sync target is told what it lacks, gets it, and is done */
    b = g_byte_array_new();
    put_config(b, 2, DRBD_SYNC_TARGET, DRBD_ROLE_PRIMARY,
               DRBD_DISK_STATE_UP_TO_DATE, DISK_SIZE + 512, 0);
    put_u8(b, GATE_RECV);
    put_ack(b, DRBD_CMD_OUT_OF_SYNC, 0, 256 * KiB, 0);
    put_u8(b, GATE_RECV);
    put_ack(b, DRBD_CMD_OUT_OF_SYNC, DISK_SIZE, 512, 0);
    put_u8(b, GATE_RECV);
    put_write(b, DRBD_CMD_RS_DATA, 0, 4096, DRBD_GATE_RESYNC_ID, 0, 0, 0);
    put_u8(b, GATE_RECV);
    put_write(b, DRBD_CMD_RS_DATA, DISK_SIZE, 512,
              DRBD_GATE_RESYNC_ID | DISK_SIZE, 0, 0, 4);
    put_u8(b, GATE_RECV);
    drbd_wire_put_empty(b, DRBD_CMD_RS_DONE);
    write_seed("gate", "sync-target", b);
    g_byte_array_free(b, true);

    /* An up-to-date primary marks what changed while we were away */
    b = g_byte_array_new();
    put_config(b, 0, DRBD_SYNC_NONE, DRBD_ROLE_PRIMARY,
               DRBD_DISK_STATE_UP_TO_DATE, DISK_SIZE, 0);
    put_u8(b, GATE_RECV);
    put_ack(b, DRBD_CMD_OUT_OF_SYNC, 4 * MiB, 4096, 0);
    put_u8(b, GATE_RECV);
    put_state(b, true, DRBD_ROLE_PRIMARY, DRBD_DISK_STATE_UP_TO_DATE);
    put_u8(b, 4);               /* promoted: a write is refused now */
    put_u8(b, GATE_RECV);
    put_write(b, DRBD_CMD_DATA, 0, 512, 1, 0, 0, 0);
    write_seed("gate", "primary-marks", b);
    g_byte_array_free(b, true);

    /*
     * A secondary runs a verify (sha256) against a primary: requests with
     * our digests, answered with a result, and without, answered with the
     * primary's digests; the last range is short, at the end of the disk;
     * one reply is a skip.  Small, so that mutations reach the steps.
     */
    b = g_byte_array_new();
    put_config(b, GATE_VERIFY(DRBD_DIGEST_SHA256), DRBD_SYNC_NONE,
               DRBD_ROLE_PRIMARY, DRBD_DISK_STATE_UP_TO_DATE,
               DISK_SIZE + 512, 0);
    put_verify_request(b, 0, 64, true);
    put_verify_request(b, 64, 2, false);
    put_verify_request(b, DISK_SIZE / 4096, 1, true);
    put_verify_request(b, 128, 2, false);
    put_u8(b, GATE_RECV);
    put_ov(b, DRBD_CMD_OV_REPLY, 256 * KiB, 8192, 2, DRBD_OV_DIGESTS, 32, 0);
    put_u8(b, GATE_RECV);
    put_ov(b, DRBD_CMD_OV_REPLY, 0, 256 * KiB, 1, DRBD_OV_RESULT, 0,
           0x8000000000000001ULL);
    put_u8(b, GATE_RECV);
    put_ov(b, DRBD_CMD_OV_REPLY, DISK_SIZE, 512, 3, DRBD_OV_RESULT, 0, 1);
    put_u8(b, GATE_RECV);
    put_ov(b, DRBD_CMD_OV_REPLY, 512 * KiB, 8192, 4, DRBD_OV_SKIPPED, 0, 0);
    /* answered already: refused */
    put_u8(b, GATE_RECV);
    put_ov(b, DRBD_CMD_OV_REPLY, 0, 256 * KiB, 1, DRBD_OV_RESULT, 0, 0);
    write_seed("gate", "verify-source", b);
    g_byte_array_free(b, true);

    /*
     * A primary answers a verify (crc32c) the secondary runs: it asks
     * for digests; a secondary target gets the source's digests
     */
    b = g_byte_array_new();
    put_config(b, 1 | GATE_VERIFY(DRBD_DIGEST_CRC32C), DRBD_SYNC_NONE,
               DRBD_ROLE_SECONDARY, DRBD_DISK_STATE_UP_TO_DATE,
               DISK_SIZE + 1536, 0);
    put_u8(b, GATE_RECV);
    put_ov(b, DRBD_CMD_OV_REQUEST, 0, 256 * KiB, 1, 0, 0, 0);
    put_u8(b, GATE_RECV);
    put_ov(b, DRBD_CMD_OV_REQUEST, DISK_SIZE - 4096, 4096 + 1536, 2, 0, 0,
           0);
    put_u8(b, 4);               /* demoted: now the source anchors */
    put_u8(b, GATE_RECV);
    put_ov(b, DRBD_CMD_OV_REQUEST, 1 * MiB, 64 * KiB, 3, DRBD_OV_DIGESTS,
           4, 0);
    put_u8(b, GATE_RECV);
    put_ov(b, DRBD_CMD_OV_REQUEST, DISK_SIZE, 1536, 4, DRBD_OV_DIGESTS, 4,
           0);
    /* not on the bitmap's blocks: refused */
    put_u8(b, GATE_RECV);
    put_ov(b, DRBD_CMD_OV_REQUEST, 512, 4096, 5, 0, 0, 0);
    write_seed("gate", "verify-target", b);
    g_byte_array_free(b, true);

    /*
     * A sync source with a csums-alg (sha1) sends the checksums of a
     * whole chunk, of two blocks and of the last, short chunk; the target
     * answers each with the blocks that differ, and one data chunk is
     * acked besides.  Small, so that mutations reach the steps.
     */
    b = g_byte_array_new();
    put_config(b, 4 | GATE_CSUMS(DRBD_DIGEST_SHA1), DRBD_SYNC_SOURCE,
               DRBD_ROLE_SECONDARY, DRBD_DISK_STATE_INCONSISTENT,
               DISK_SIZE + 512, 0);
    put_csum_step(b, 0, 64);
    put_csum_step(b, 256, 2);
    put_csum_step(b, DISK_SIZE / 4096, 1);
    put_u8(b, 2);               /* a data chunk at block 64 */
    put_be16(b, 64);
    put_u8(b, 0);
    put_u8(b, GATE_RECV);
    put_ov(b, DRBD_CMD_RS_CSUM_REPLY, 1 * MiB, 8192,
           DRBD_GATE_RESYNC_ID | 1 * MiB, DRBD_OV_RESULT, 0, 0x2);
    put_u8(b, GATE_RECV);
    put_ov(b, DRBD_CMD_RS_CSUM_REPLY, 0, 256 * KiB, DRBD_GATE_RESYNC_ID,
           DRBD_OV_RESULT, 0, UINT64_MAX);
    put_u8(b, GATE_RECV);
    put_ack(b, DRBD_CMD_WRITE_ACK, 256 * KiB, 4096,
            DRBD_GATE_RESYNC_ID | 256 * KiB);
    put_u8(b, GATE_RECV);
    put_ov(b, DRBD_CMD_RS_CSUM_REPLY, DISK_SIZE, 512,
           DRBD_GATE_RESYNC_ID | DISK_SIZE, DRBD_OV_RESULT, 0, 0);
    /* answered already: refused */
    put_u8(b, GATE_RECV);
    put_ov(b, DRBD_CMD_RS_CSUM_REPLY, 0, 256 * KiB, DRBD_GATE_RESYNC_ID,
           DRBD_OV_RESULT, 0, 0);
    write_seed("gate", "csums-source", b);
    g_byte_array_free(b, true);

    /*
     * A sync target with a csums-alg (crc32c) gets the source's
     * checksums of a whole chunk and of the last, short one, the data of
     * a block, and the end of the resync; checksums after it are refused
     */
    b = g_byte_array_new();
    put_config(b, 2 | GATE_CSUMS(DRBD_DIGEST_CRC32C), DRBD_SYNC_TARGET,
               DRBD_ROLE_PRIMARY, DRBD_DISK_STATE_UP_TO_DATE,
               DISK_SIZE + 1536, 0);
    put_u8(b, GATE_RECV);
    put_ov(b, DRBD_CMD_RS_CSUM, 0, 256 * KiB, DRBD_GATE_RESYNC_ID,
           DRBD_OV_DIGESTS, 4, 0);
    put_u8(b, GATE_RECV);
    put_ov(b, DRBD_CMD_RS_CSUM, DISK_SIZE - 4096, 4096 + 1536,
           DRBD_GATE_RESYNC_ID | (DISK_SIZE - 4096), DRBD_OV_DIGESTS, 4, 0);
    put_u8(b, GATE_RECV);
    put_write(b, DRBD_CMD_RS_DATA, 4096, 4096, DRBD_GATE_RESYNC_ID | 4096,
              0, 0, 0);
    put_u8(b, GATE_RECV);
    drbd_wire_put_empty(b, DRBD_CMD_RS_DONE);
    put_u8(b, GATE_RECV);
    put_ov(b, DRBD_CMD_RS_CSUM, 1 * MiB, 4096, DRBD_GATE_RESYNC_ID | 1 * MiB,
           DRBD_OV_DIGESTS, 4, 0);
    write_seed("gate", "csums-target", b);
    g_byte_array_free(b, true);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    corpus_dir = argv[1];
    gen_wire();
    gen_rle();
    gen_superblock();
    gen_al();
    gen_gate();
    return 0;
}
