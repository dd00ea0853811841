/*
 * drbd on-disk metadata: superblock and activity-log codecs, layout, and
 * activity-log recovery.  What is encoded decodes to the same; what a
 * damaged or foreign image may hold is refused with a message that says
 * what is wrong.
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "qemu/bswap.h"
#include "qemu/crc32c.h"
#include "../../block/drbd/md-format.h"

/*
 * The layout as docs/interop/drbd-metadata.rst describes it, written out
 * again here so that the tests check the encoder against the document.
 */
#define BLOCK           4096
#define SB_MAGIC        0
#define SB_VERSION      4
#define SB_CRC          8
#define SB_PLACEMENT    12
#define SB_FLAGS        16
#define SB_DATA_SIZE    24
#define SB_BM_OFFSET    32
#define SB_AL_OFFSET    40
#define SB_BM_BLOCK     48
#define SB_AL_EXTENTS   52
#define SB_AL_BLOCKS    56
#define SB_NODE_ID      60
#define SB_DEVICE_UUID  64
#define SB_UUID_CURRENT 72
#define SB_UUID_BITMAP  80
#define SB_UUID_HISTORY 88
#define SB_AL_TR        104
#define SB_RESERVED     112

#define TR_MAGIC        0
#define TR_CRC          4
#define TR_NUMBER       8
#define TR_AL_EXTENTS   16
#define TR_N_UPDATES    20
#define TR_CONTEXT_SIZE 22
#define TR_CONTEXT_START 24
#define TR_RESERVED     28
#define TR_UPDATES      32
#define TR_CONTEXT      544

#define AL_BLOCKS       8
#define RING_BYTES      (AL_BLOCKS * BLOCK)
#define NONE            DRBD_AL_EXTENT_NONE

static uint32_t be32(const uint8_t *p)
{
    return ldl_be_p(p);
}

/* Assert that a call failed with -EINVAL and exactly the message @msg */
static void assert_failed_with(int ret, Error **errp, const char *msg)
{
    g_assert_cmpint(ret, ==, -EINVAL);
    g_assert_nonnull(*errp);
    g_assert_cmpstr(error_get_pretty(*errp), ==, msg);
    error_free(*errp);
    *errp = NULL;
}

/* Likewise, with a message that starts with @prefix */
static void assert_failed_prefix(int ret, Error **errp, const char *prefix)
{
    g_assert_cmpint(ret, ==, -EINVAL);
    g_assert_nonnull(*errp);
    if (!g_str_has_prefix(error_get_pretty(*errp), prefix)) {
        g_error("message '%s' does not start with '%s'",
                error_get_pretty(*errp), prefix);
    }
    error_free(*errp);
    *errp = NULL;
}

/* The checksum as the document defines it, computed the plain way */
static uint32_t reference_crc(const uint8_t *buf, size_t crc_off)
{
    uint8_t copy[BLOCK];

    memcpy(copy, buf, BLOCK);
    memset(copy + crc_off, 0, 4);
    return crc32c(0xffffffff, copy, BLOCK);
}

static void fix_crc(uint8_t *buf, size_t crc_off)
{
    stl_be_p(buf + crc_off, reference_crc(buf, crc_off));
}

/*
 * Superblock
 */

static void sample_sb(DrbdSuperblock *sb)
{
    DrbdMdLayout l;

    g_assert_cmpint(drbd_md_layout_internal(1 * GiB, 257, 1, &l, &error_abort),
                    ==, 0);
    drbd_md_sb_init(sb, &l, 3, 0x1122334455667788ULL);
    sb->flags = DRBD_MDF_CONSISTENT | DRBD_MDF_WAS_UP_TO_DATE |
                DRBD_MDF_PEER_OUTDATED;
    sb->uuid_current = 0xa1a2a3a4a5a6a7a8ULL;
    sb->uuid_bitmap = 0xb1b2b3b4b5b6b7b8ULL;
    sb->uuid_history[0] = 0xc1c2c3c4c5c6c7c8ULL;
    sb->uuid_history[1] = 0xd1d2d3d4d5d6d7d8ULL;
    sb->al_tr_number = 0x0102030405060708ULL;
}

static void assert_sb_equal(const DrbdSuperblock *a, const DrbdSuperblock *b)
{
    g_assert_cmpuint(a->version, ==, b->version);
    g_assert_cmpuint(a->placement, ==, b->placement);
    g_assert_cmpuint(a->flags, ==, b->flags);
    g_assert_cmpuint(a->data_size, ==, b->data_size);
    g_assert_cmpuint(a->bm_offset, ==, b->bm_offset);
    g_assert_cmpuint(a->al_offset, ==, b->al_offset);
    g_assert_cmpuint(a->bm_block_size, ==, b->bm_block_size);
    g_assert_cmpuint(a->al_extents, ==, b->al_extents);
    g_assert_cmpuint(a->al_blocks, ==, b->al_blocks);
    g_assert_cmpuint(a->node_id, ==, b->node_id);
    g_assert_cmpuint(a->device_uuid, ==, b->device_uuid);
    g_assert_cmpuint(a->uuid_current, ==, b->uuid_current);
    g_assert_cmpuint(a->uuid_bitmap, ==, b->uuid_bitmap);
    g_assert_cmpuint(a->uuid_history[0], ==, b->uuid_history[0]);
    g_assert_cmpuint(a->uuid_history[1], ==, b->uuid_history[1]);
    g_assert_cmpuint(a->al_tr_number, ==, b->al_tr_number);
    g_assert_cmpuint(a->partial_uuid, ==, b->partial_uuid);
}

static void test_sb_init(void)
{
    DrbdMdLayout l;
    DrbdSuperblock sb;

    g_assert_cmpint(drbd_md_layout_external(64 * MiB, 1000, 1, &l,
                                            &error_abort), ==, 0);
    drbd_md_sb_init(&sb, &l, 9, 42);
    g_assert_cmpuint(sb.version, ==, 1);
    g_assert_cmpuint(sb.placement, ==, DRBD_MD_EXTERNAL);
    g_assert_cmpuint(sb.flags, ==, DRBD_MDF_AL_CLEAN);
    g_assert_cmpuint(sb.data_size, ==, 64 * MiB);
    g_assert_cmpuint(sb.bm_offset, ==, l.bm_offset);
    g_assert_cmpuint(sb.al_offset, ==, l.al_offset);
    g_assert_cmpuint(sb.bm_block_size, ==, 4096);
    g_assert_cmpuint(sb.al_extents, ==, 1000);
    g_assert_cmpuint(sb.al_blocks, ==, 8);
    g_assert_cmpuint(sb.node_id, ==, 9);
    g_assert_cmpuint(sb.device_uuid, ==, 42);
    g_assert_cmpuint(sb.uuid_current, ==, 4);
    g_assert_cmpuint(sb.uuid_bitmap, ==, 0);
    g_assert_cmpuint(sb.uuid_history[0], ==, 0);
    g_assert_cmpuint(sb.uuid_history[1], ==, 0);
    g_assert_cmpuint(sb.al_tr_number, ==, 0);
    g_assert_cmpuint(sb.partial_uuid, ==, 0);
    /* and it is valid where it was laid out */
    g_assert_cmpint(drbd_md_layout_check(&sb, l.image_size, NULL,
                                         &error_abort), ==, 0);
}

static void test_sb_round_trip(void)
{
    DrbdSuperblock sb, out;
    uint8_t buf[BLOCK];
    static const uint8_t magic[] = { 'D', 'R', 'B', 'M' };
    static const uint8_t data_size[] = { 0, 0, 0, 0, 0x40, 0, 0, 0 };
    size_t i;

    sample_sb(&sb);
    memset(buf, 0xa5, sizeof(buf));
    drbd_md_sb_encode(&sb, buf);

    /* A few fields by hand, as the document places them */
    g_assert_cmpmem(buf + SB_MAGIC, 4, magic, 4);
    g_assert_cmpuint(be32(buf + SB_VERSION), ==, 1);
    g_assert_cmpuint(be32(buf + SB_CRC), ==, reference_crc(buf, SB_CRC));
    g_assert_cmpuint(be32(buf + SB_PLACEMENT), ==, 0);
    g_assert_cmpuint(ldq_be_p(buf + SB_FLAGS), ==, 0x31);
    g_assert_cmpmem(buf + SB_DATA_SIZE, 8, data_size, 8);
    g_assert_cmpuint(ldq_be_p(buf + SB_BM_OFFSET), ==, 1 * GiB);
    g_assert_cmpuint(ldq_be_p(buf + SB_AL_OFFSET), ==, 1 * GiB + 32 * KiB);
    g_assert_cmpuint(be32(buf + SB_BM_BLOCK), ==, 4096);
    g_assert_cmpuint(be32(buf + SB_AL_EXTENTS), ==, 257);
    g_assert_cmpuint(be32(buf + SB_AL_BLOCKS), ==, 8);
    g_assert_cmpuint(be32(buf + SB_NODE_ID), ==, 3);
    g_assert_cmpuint(buf[SB_DEVICE_UUID], ==, 0x11);
    g_assert_cmpuint(buf[SB_DEVICE_UUID + 7], ==, 0x88);
    g_assert_cmpuint(ldq_be_p(buf + SB_UUID_CURRENT), ==,
                     0xa1a2a3a4a5a6a7a8ULL);
    g_assert_cmpuint(ldq_be_p(buf + SB_UUID_BITMAP), ==,
                     0xb1b2b3b4b5b6b7b8ULL);
    g_assert_cmpuint(ldq_be_p(buf + SB_UUID_HISTORY), ==,
                     0xc1c2c3c4c5c6c7c8ULL);
    g_assert_cmpuint(ldq_be_p(buf + SB_UUID_HISTORY + 8), ==,
                     0xd1d2d3d4d5d6d7d8ULL);
    g_assert_cmpuint(ldq_be_p(buf + SB_AL_TR), ==, 0x0102030405060708ULL);
    for (i = SB_RESERVED; i < BLOCK; i++) {
        g_assert_cmpuint(buf[i], ==, 0);
    }

    g_assert_cmpint(drbd_md_sb_decode(buf, sizeof(buf), &out, &error_abort),
                    ==, 0);
    assert_sb_equal(&sb, &out);

    /* external too */
    sb.placement = DRBD_MD_EXTERNAL;
    sb.flags = DRBD_MDF_ALL;
    drbd_md_sb_encode(&sb, buf);
    g_assert_cmpint(drbd_md_sb_decode(buf, sizeof(buf), &out, &error_abort),
                    ==, 0);
    assert_sb_equal(&sb, &out);
}

/* Reserved bytes are ignored when read (forward compatibility) */
static void test_sb_reserved_ignored(void)
{
    DrbdSuperblock sb, out;
    uint8_t buf[BLOCK];

    sample_sb(&sb);
    drbd_md_sb_encode(&sb, buf);
    buf[SB_RESERVED] = 1;
    buf[BLOCK - 1] = 0xff;
    fix_crc(buf, SB_CRC);
    g_assert_cmpint(drbd_md_sb_decode(buf, sizeof(buf), &out, &error_abort),
                    ==, 0);
    assert_sb_equal(&sb, &out);
}

/*
 * partial_uuid sits at 616 in both versions, past the largest slot
 * table, in bytes a writer before it left zero (and a reader before it
 * ignores): such metadata reads as holding no partial generation
 */
static void test_sb_partial_uuid(void)
{
    DrbdSuperblock sb, out;
    DrbdMdLayout l;
    uint8_t buf[BLOCK];
    unsigned i, max_peers;

    for (max_peers = 1; max_peers <= DRBD_MD_MAX_PEERS; max_peers += 30) {
        g_assert_cmpint(drbd_md_layout_internal(1 * GiB, 257, max_peers, &l,
                                                &error_abort), ==, 0);
        drbd_md_sb_init(&sb, &l, 3, 0x1122334455667788ULL);
        for (i = 1; i < max_peers; i++) {
            sb.slots[i].node_id = i < 3 ? i - 1 : i + 1;
            sb.slots[i].bitmap_uuid = ~0ULL - i;
        }
        sb.partial_uuid = 0xf1f2f3f4f5f6f7f8ULL;
        drbd_md_sb_encode(&sb, buf);
        g_assert_cmpuint(ldq_be_p(buf + 616), ==, 0xf1f2f3f4f5f6f7f8ULL);
        /* the last slot's bitmap UUID ends right before it */
        if (max_peers == DRBD_MD_MAX_PEERS) {
            g_assert_cmpuint(ldq_be_p(buf + 608), ==, ~0ULL - 30);
        }
        for (i = 624; i < BLOCK; i++) {
            g_assert_cmpuint(buf[i], ==, 0);
        }
        g_assert_cmpint(drbd_md_sb_decode(buf, BLOCK, &out, &error_abort),
                        ==, 0);
        assert_sb_equal(&sb, &out);
        for (i = 1; i < max_peers; i++) {
            g_assert_cmpuint(out.slots[i].bitmap_uuid, ==, ~0ULL - i);
        }

        /* As a writer that did not know the field left it */
        memset(buf + 616, 0, 8);
        fix_crc(buf, SB_CRC);
        g_assert_cmpint(drbd_md_sb_decode(buf, BLOCK, &out, &error_abort),
                        ==, 0);
        g_assert_cmpuint(out.partial_uuid, ==, 0);
    }
}

/*
 * Encode the sample superblock, store @val of @size bytes at @off, fix
 * the checksum and decode: it must fail with @msg, output untouched
 */
static void sb_refused(size_t off, int size, uint64_t val, const char *msg)
{
    DrbdSuperblock sb, out, untouched;
    uint8_t buf[BLOCK];
    Error *err = NULL;

    sample_sb(&sb);
    drbd_md_sb_encode(&sb, buf);
    if (size == 4) {
        stl_be_p(buf + off, val);
    } else {
        stq_be_p(buf + off, val);
    }
    fix_crc(buf, SB_CRC);
    memset(&out, 0x5a, sizeof(out));
    memcpy(&untouched, &out, sizeof(out));
    assert_failed_with(drbd_md_sb_decode(buf, sizeof(buf), &out, &err),
                       &err, msg);
    g_assert_cmpmem(&out, sizeof(out), &untouched, sizeof(untouched));
}

/* A superblock with three bitmap slots, one assigned */
static void sample_sb_slots(DrbdSuperblock *sb, DrbdMdLayout *l)
{
    g_assert_cmpint(drbd_md_layout_internal(1 * GiB, 257, 3, l,
                                            &error_abort), ==, 0);
    drbd_md_sb_init(sb, l, 3, 0x1122334455667788ULL);
    sb->uuid_bitmap = 0xb1b2b3b4b5b6b7b8ULL;
    sb->slots[0].node_id = 1;
    sb->slots[2].node_id = 7;
    sb->slots[2].bitmap_uuid = 0xe1e2e3e4e5e6e7e8ULL;
}

static void test_sb_slots(void)
{
    DrbdSuperblock sb, out;
    DrbdMdLayout l, checked;
    uint8_t buf[BLOCK];
    Error *err = NULL;
    unsigned i;

    sample_sb_slots(&sb, &l);
    g_assert_cmpuint(sb.version, ==, 2);
    g_assert_cmpuint(sb.max_peers, ==, 3);
    g_assert_cmpuint(sb.slots[1].node_id, ==, DRBD_MD_SLOT_FREE);

    /* Three bitmaps of 32 KiB between the data and the activity log */
    g_assert_cmpuint(l.bm_offset, ==, 1 * GiB);
    g_assert_cmpuint(l.bm_bytes, ==, 32 * KiB);
    g_assert_cmpuint(l.al_offset, ==, 1 * GiB + 96 * KiB);
    g_assert_cmpuint(l.image_size, ==, 1 * GiB + 96 * KiB + 36 * KiB);

    drbd_md_sb_encode(&sb, buf);
    g_assert_cmpuint(be32(buf + SB_VERSION), ==, 2);
    g_assert_cmpuint(be32(buf + 112), ==, 3);
    g_assert_cmpuint(be32(buf + 120), ==, 1);
    g_assert_cmpuint(be32(buf + 136), ==, DRBD_MD_SLOT_FREE);
    g_assert_cmpuint(be32(buf + 152), ==, 7);
    g_assert_cmpuint(ldq_be_p(buf + 160), ==, 0xe1e2e3e4e5e6e7e8ULL);
    /* slot 0's bitmap UUID is uuid_bitmap's, at 80 */
    g_assert_cmpuint(ldq_be_p(buf + 128), ==, 0);
    g_assert_cmpuint(ldq_be_p(buf + 80), ==, 0xb1b2b3b4b5b6b7b8ULL);
    for (i = 168; i < BLOCK; i++) {
        g_assert_cmpuint(buf[i], ==, 0);
    }

    g_assert_cmpint(drbd_md_sb_decode(buf, BLOCK, &out, &error_abort), ==,
                    0);
    assert_sb_equal(&sb, &out);
    g_assert_cmpuint(out.max_peers, ==, 3);
    for (i = 0; i < 3; i++) {
        g_assert_cmpuint(out.slots[i].node_id, ==, sb.slots[i].node_id);
        g_assert_cmpuint(out.slots[i].bitmap_uuid, ==,
                         sb.slots[i].bitmap_uuid);
    }
    g_assert_cmpint(drbd_md_layout_check(&out, l.image_size, &checked,
                                         &error_abort), ==, 0);
    g_assert_cmpuint(checked.max_peers, ==, 3);
    g_assert_cmpuint(checked.bm_bytes, ==, 32 * KiB);

    /* An image too short for the third bitmap */
    out.al_offset = 1 * GiB + 64 * KiB;
    assert_failed_prefix(drbd_md_layout_check(&out, l.image_size, NULL,
                                              &err), &err,
                         "drbd metadata: activity log at offset 1073807360 "
                         "(32768 bytes) overlaps the bitmap at offset "
                         "1073741824 (98304 bytes)");

    /* Version 1 reads as one free slot */
    sample_sb(&sb);
    drbd_md_sb_encode(&sb, buf);
    g_assert_cmpint(drbd_md_sb_decode(buf, BLOCK, &out, &error_abort), ==,
                    0);
    g_assert_cmpuint(out.max_peers, ==, 1);
    g_assert_cmpuint(out.slots[0].node_id, ==, DRBD_MD_SLOT_FREE);

    /* Bad slot tables */
    sample_sb_slots(&sb, &l);
    drbd_md_sb_encode(&sb, buf);
    stl_be_p(buf + 112, 32);
    fix_crc(buf, SB_CRC);
    assert_failed_with(drbd_md_sb_decode(buf, BLOCK, &out, &err), &err,
                       "drbd metadata: max_peers 32 is out of range (2 to "
                       "31 in version 2)");
    drbd_md_sb_encode(&sb, buf);
    stl_be_p(buf + 136, 3);
    fix_crc(buf, SB_CRC);
    assert_failed_with(drbd_md_sb_decode(buf, BLOCK, &out, &err), &err,
                       "drbd metadata: bitmap slot 1 is for node id 3, "
                       "which cannot be a peer of node 3");
    drbd_md_sb_encode(&sb, buf);
    stl_be_p(buf + 136, 32);
    fix_crc(buf, SB_CRC);
    assert_failed_with(drbd_md_sb_decode(buf, BLOCK, &out, &err), &err,
                       "drbd metadata: bitmap slot 1 is for node id 32, "
                       "which cannot be a peer of node 3");
    drbd_md_sb_encode(&sb, buf);
    stl_be_p(buf + 152, 1);
    fix_crc(buf, SB_CRC);
    assert_failed_with(drbd_md_sb_decode(buf, BLOCK, &out, &err), &err,
                       "drbd metadata: bitmap slots 0 and 2 are both for "
                       "node id 1");

    /* max-peers out of range */
    assert_failed_with(drbd_md_layout_internal(1 * GiB, 257, 0, &l, &err),
                       &err, "max-peers must be between 1 and 31, not 0");
    assert_failed_with(drbd_md_layout_external(1 * GiB, 257, 32, &l, &err),
                       &err, "max-peers must be between 1 and 31, not 32");
    g_assert_cmpint(drbd_md_layout_external(1 * GiB, 257, 31, &l,
                                            &error_abort), ==, 0);
    g_assert_cmpuint(l.image_size, ==, 36 * KiB + 31 * 32 * KiB);
}

static void test_sb_invalid(void)
{
    DrbdSuperblock sb, out;
    uint8_t buf[BLOCK];
    Error *err = NULL;
    char *msg;

    sample_sb(&sb);
    drbd_md_sb_encode(&sb, buf);

    /* length */
    assert_failed_with(drbd_md_sb_decode(buf, BLOCK - 1, &out, &err), &err,
                       "drbd metadata: superblock is 4095 bytes "
                       "(expected 4096)");
    assert_failed_with(drbd_md_sb_decode(buf, 0, &out, &err), &err,
                       "drbd metadata: superblock is 0 bytes "
                       "(expected 4096)");

    /* magic: checked before the checksum, so no fixing needed */
    buf[SB_MAGIC + 3] ^= 1;
    assert_failed_with(drbd_md_sb_decode(buf, BLOCK, &out, &err), &err,
                       "not drbd metadata (no magic: is this a drbd "
                       "image?)");
    memset(buf, 0, sizeof(buf));
    assert_failed_with(drbd_md_sb_decode(buf, BLOCK, &out, &err), &err,
                       "not drbd metadata (no magic: is this a drbd "
                       "image?)");

    /* checksum: one bit anywhere */
    drbd_md_sb_encode(&sb, buf);
    buf[2000] ^= 0x10;
    msg = g_strdup_printf("drbd metadata: checksum mismatch: metadata "
                          "damaged (stored 0x%08x, computed 0x%08x)",
                          be32(buf + SB_CRC),
                          reference_crc(buf, SB_CRC));
    assert_failed_with(drbd_md_sb_decode(buf, BLOCK, &out, &err), &err, msg);
    g_free(msg);
    drbd_md_sb_encode(&sb, buf);
    buf[SB_CRC] ^= 0x80;
    assert_failed_prefix(drbd_md_sb_decode(buf, BLOCK, &out, &err), &err,
                         "drbd metadata: checksum mismatch: metadata "
                         "damaged");

    /* version, even with a good checksum, and even with a bad one */
    sb_refused(SB_VERSION, 4, 3, "drbd metadata version 3 is not supported "
               "(this QEMU supports versions 1 and 2)");
    sb_refused(SB_VERSION, 4, 0, "drbd metadata version 0 is not supported "
               "(this QEMU supports versions 1 and 2)");
    drbd_md_sb_encode(&sb, buf);
    stl_be_p(buf + SB_VERSION, 7);
    assert_failed_with(drbd_md_sb_decode(buf, BLOCK, &out, &err), &err,
                       "drbd metadata version 7 is not supported "
                       "(this QEMU supports versions 1 and 2)");
    /* Version 2 has bitmap slots: version 1's reserved zeroes are none */
    sb_refused(SB_VERSION, 4, 2, "drbd metadata: max_peers 0 is out of "
               "range (2 to 31 in version 2)");

    sb_refused(SB_PLACEMENT, 4, 2, "drbd metadata: unknown placement 2 "
               "(expected 0 for internal or 1 for external)");
    sb_refused(SB_FLAGS, 8, 0x100, "drbd metadata: unknown flags 0x100");
    sb_refused(SB_FLAGS, 8, 0x8000000000000001ULL,
               "drbd metadata: unknown flags 0x8000000000000000");
    sb_refused(SB_DATA_SIZE, 8, 0, "drbd metadata: data size must not be "
               "zero");
    sb_refused(SB_DATA_SIZE, 8, 1 * GiB + 100, "drbd metadata: data size "
               "1073741924 is not a multiple of 512");
    sb_refused(SB_DATA_SIZE, 8, 4 * PiB + 512, "drbd metadata: data size "
               "4503599627371008 is above the limit of 4503599627370496 "
               "bytes");
    sb_refused(SB_DATA_SIZE, 8, UINT64_MAX - 511, "drbd metadata: data size "
               "18446744073709551104 is above the limit of "
               "4503599627370496 bytes");
    sb_refused(SB_BM_BLOCK, 4, 512, "drbd metadata: bitmap block size 512 "
               "is not supported (only 4096)");
    sb_refused(SB_AL_BLOCKS, 4, 16, "drbd metadata: 16 activity-log blocks "
               "are not supported (only 8)");
    sb_refused(SB_AL_BLOCKS, 4, 0, "drbd metadata: 0 activity-log blocks "
               "are not supported (only 8)");
    sb_refused(SB_AL_EXTENTS, 4, 6, "drbd metadata: al_extents 6 is out of "
               "range (7 to 6216)");
    sb_refused(SB_AL_EXTENTS, 4, 6217, "drbd metadata: al_extents 6217 is "
               "out of range (7 to 6216)");
    sb_refused(SB_AL_EXTENTS, 4, 0, "drbd metadata: al_extents 0 is out of "
               "range (7 to 6216)");

    /* The limits themselves are accepted */
    sb.al_extents = 7;
    sb.data_size = 512;
    drbd_md_sb_encode(&sb, buf);
    g_assert_cmpint(drbd_md_sb_decode(buf, BLOCK, &out, &error_abort), ==, 0);
    sb.al_extents = 6216;
    sb.data_size = 4 * PiB;
    drbd_md_sb_encode(&sb, buf);
    g_assert_cmpint(drbd_md_sb_decode(buf, BLOCK, &out, &error_abort), ==, 0);
}

/* Random corruption: refused with a message, or decoded to sane fields */
static void test_sb_mutation(void)
{
    DrbdSuperblock sb, out;
    uint8_t orig[BLOCK], buf[BLOCK];
    unsigned accepted = 0, refused = 0, i, j;
    Error *err = NULL;

    sample_sb(&sb);
    drbd_md_sb_encode(&sb, orig);
    for (i = 0; i < 2000; i++) {
        memcpy(buf, orig, BLOCK);
        for (j = g_test_rand_int_range(1, 4); j > 0; j--) {
            /* mostly in the fields, where it matters */
            int off = g_test_rand_int_range(0, i % 4 ? SB_RESERVED : BLOCK);

            buf[off] ^= 1 << g_test_rand_int_range(0, 8);
        }
        if (i % 2) {
            fix_crc(buf, SB_CRC);
        }
        if (drbd_md_sb_decode(buf, BLOCK, &out, &err) == 0) {
            g_assert_null(err);
            g_assert_cmpuint(out.version, ==,
                             out.max_peers > 1 ? 2 : 1);
            g_assert_cmpuint(out.max_peers, >=, 1);
            g_assert_cmpuint(out.max_peers, <=, 31);
            g_assert_cmpuint(out.placement, <=, 1);
            g_assert_cmpuint(out.flags & ~DRBD_MDF_ALL, ==, 0);
            g_assert_cmpuint(out.data_size, >, 0);
            g_assert_cmpuint(out.data_size % 512, ==, 0);
            g_assert_cmpuint(out.data_size, <=, DRBD_MD_MAX_DATA_SIZE);
            g_assert_cmpuint(out.bm_block_size, ==, 4096);
            g_assert_cmpuint(out.al_blocks, ==, 8);
            g_assert_cmpuint(out.al_extents, >=, 7);
            g_assert_cmpuint(out.al_extents, <=, 6216);
            /* and the layout check does not trip over whatever it has */
            if (drbd_md_layout_check(&out, 1 * GiB + 68 * KiB, NULL,
                                     &err) < 0) {
                error_free(err);
                err = NULL;
            }
            accepted++;
        } else {
            g_assert_nonnull(err);
            g_assert_cmpstr(error_get_pretty(err), !=, "");
            error_free(err);
            err = NULL;
            refused++;
        }
    }
    g_test_message("%u mangled superblocks accepted, %u refused",
                   accepted, refused);
    g_assert_cmpuint(accepted, >, 0);
    g_assert_cmpuint(refused, >, 0);
}

static void test_flags_str(void)
{
    static const struct {
        uint64_t flags;
        const char *str;
    } cases[] = {
        { 0, "" },
        { DRBD_MDF_CONSISTENT, "consistent" },
        { DRBD_MDF_CONSISTENT | DRBD_MDF_AL_CLEAN, "consistent,al-clean" },
        { DRBD_MDF_ALL, "consistent,primary-ind,connected-ind,full-sync,"
                        "was-up-to-date,peer-outdated,crashed-primary,"
                        "al-clean,primary-lost-quorum" },
        { DRBD_MDF_FULL_SYNC | 0x300, "full-sync,primary-lost-quorum,0x100" },
        { DRBD_MDF_FULL_SYNC | 0x500, "full-sync,0x500" },
        { 1ULL << 63, "0x8000000000000000" },
    };
    size_t i;

    for (i = 0; i < ARRAY_SIZE(cases); i++) {
        g_autofree char *s = drbd_md_flags_str(cases[i].flags);

        g_assert_cmpstr(s, ==, cases[i].str);
    }

    /* The values are DRBD's */
    g_assert_cmpuint(DRBD_MDF_CONSISTENT, ==, 0x01);
    g_assert_cmpuint(DRBD_MDF_PRIMARY_IND, ==, 0x02);
    g_assert_cmpuint(DRBD_MDF_CONNECTED_IND, ==, 0x04);
    g_assert_cmpuint(DRBD_MDF_FULL_SYNC, ==, 0x08);
    g_assert_cmpuint(DRBD_MDF_WAS_UP_TO_DATE, ==, 0x10);
    g_assert_cmpuint(DRBD_MDF_PEER_OUTDATED, ==, 0x20);
    g_assert_cmpuint(DRBD_MDF_CRASHED_PRIMARY, ==, 0x40);
    g_assert_cmpuint(DRBD_MDF_AL_CLEAN, ==, 0x80);
}

/*
 * Layout
 */

static void assert_layout_equal(const DrbdMdLayout *a, const DrbdMdLayout *b)
{
    g_assert_cmpuint(a->placement, ==, b->placement);
    g_assert_cmpuint(a->data_size, ==, b->data_size);
    g_assert_cmpuint(a->image_size, ==, b->image_size);
    g_assert_cmpuint(a->sb_offset, ==, b->sb_offset);
    g_assert_cmpuint(a->bm_offset, ==, b->bm_offset);
    g_assert_cmpuint(a->bm_bytes, ==, b->bm_bytes);
    g_assert_cmpuint(a->al_offset, ==, b->al_offset);
    g_assert_cmpuint(a->al_blocks, ==, b->al_blocks);
    g_assert_cmpuint(a->al_extents, ==, b->al_extents);
}

typedef struct LayoutCase {
    uint64_t data_size;
    uint64_t bm_bytes;
    /* internal */
    uint64_t bm_offset, al_offset, sb_offset, image_size;
    /* external: superblock at 0, AL at 4096, bitmap at 36864 */
    uint64_t ext_image_size;
} LayoutCase;

static void test_layout_sizes(void)
{
    static const LayoutCase cases[] = {
        /* 1 bit, in one 8-byte word, in one block */
        { 512, 4096, 4096, 8192, 40960, 45056, 40960 },
        { 4096, 4096, 4096, 8192, 40960, 45056, 40960 },
        { 4096 + 512, 4096, 8192, 12288, 45056, 49152, 40960 },
        /* 32768 bits exactly fill one block */
        { 128 * MiB, 4096, 128 * MiB, 128 * MiB + 4096,
          128 * MiB + 36864, 128 * MiB + 40960, 40960 },
        /* one more bit takes a second block */
        { 128 * MiB + 512, 8192, 128 * MiB + 4096, 128 * MiB + 12288,
          128 * MiB + 45056, 128 * MiB + 49152, 45056 },
        /* 262144 bits = 32 KiB */
        { 1 * GiB, 32 * KiB, 1 * GiB, 1 * GiB + 32 * KiB,
          1 * GiB + 64 * KiB, 1 * GiB + 68 * KiB, 36864 + 32 * KiB },
        /* 2^28 + 1 bits: 32 MiB + one word, rounded to a block */
        { 1 * TiB + 512, 32 * MiB + 4096, 1 * TiB + 4096,
          1 * TiB + 32 * MiB + 8192, 1 * TiB + 32 * MiB + 40960,
          1 * TiB + 32 * MiB + 45056, 36864 + 32 * MiB + 4096 },
        /* the largest: 2^40 bits = 128 GiB of bitmap */
        { 4 * PiB, 128 * GiB, 4 * PiB, 4 * PiB + 128 * GiB,
          4 * PiB + 128 * GiB + 32 * KiB, 4 * PiB + 128 * GiB + 36 * KiB,
          36864 + 128 * GiB },
    };
    size_t i;

    for (i = 0; i < ARRAY_SIZE(cases); i++) {
        const LayoutCase *c = &cases[i];
        DrbdMdLayout l;
        DrbdSuperblock sb;
        DrbdMdLayout checked;

        g_assert_cmpuint(drbd_md_bm_bytes(c->data_size), ==, c->bm_bytes);
        g_assert_cmpuint(drbd_md_bm_bits(c->data_size), ==,
                         DIV_ROUND_UP(c->data_size, 4096));

        g_assert_cmpint(drbd_md_layout_internal(c->data_size, 257, 1, &l,
                                                &error_abort), ==, 0);
        g_assert_cmpuint(l.placement, ==, DRBD_MD_INTERNAL);
        g_assert_cmpuint(l.data_size, ==, c->data_size);
        g_assert_cmpuint(l.bm_bytes, ==, c->bm_bytes);
        g_assert_cmpuint(l.bm_offset, ==, c->bm_offset);
        g_assert_cmpuint(l.al_offset, ==, c->al_offset);
        g_assert_cmpuint(l.sb_offset, ==, c->sb_offset);
        g_assert_cmpuint(l.image_size, ==, c->image_size);
        g_assert_cmpuint(l.al_blocks, ==, 8);
        g_assert_cmpuint(l.al_extents, ==, 257);
        /* the superblock is the last block */
        g_assert_cmpuint(l.sb_offset + 4096, ==, l.image_size);

        drbd_md_sb_init(&sb, &l, 0, 1);
        g_assert_cmpint(drbd_md_layout_check(&sb, l.image_size, &checked,
                                             &error_abort), ==, 0);
        assert_layout_equal(&checked, &l);

        g_assert_cmpint(drbd_md_layout_external(c->data_size, 7, 1, &l,
                                                &error_abort), ==, 0);
        g_assert_cmpuint(l.placement, ==, DRBD_MD_EXTERNAL);
        g_assert_cmpuint(l.sb_offset, ==, 0);
        g_assert_cmpuint(l.al_offset, ==, 4096);
        g_assert_cmpuint(l.bm_offset, ==, 36864);
        g_assert_cmpuint(l.bm_bytes, ==, c->bm_bytes);
        g_assert_cmpuint(l.image_size, ==, c->ext_image_size);
        g_assert_cmpuint(l.al_extents, ==, 7);

        drbd_md_sb_init(&sb, &l, 0, 1);
        g_assert_cmpint(drbd_md_layout_check(&sb, l.image_size, &checked,
                                             &error_abort), ==, 0);
        assert_layout_equal(&checked, &l);
    }
}

static void test_layout_invalid(void)
{
    DrbdMdLayout l, untouched;
    Error *err = NULL;

    memset(&l, 0x5a, sizeof(l));
    memcpy(&untouched, &l, sizeof(l));
    assert_failed_with(drbd_md_layout_internal(0, 257, 1, &l, &err), &err,
                       "drbd metadata: data size must not be zero");
    assert_failed_with(drbd_md_layout_external(0, 257, 1, &l, &err), &err,
                       "drbd metadata: data size must not be zero");
    assert_failed_with(drbd_md_layout_internal(1000, 257, 1, &l, &err), &err,
                       "drbd metadata: data size 1000 is not a multiple of "
                       "512");
    assert_failed_with(drbd_md_layout_internal(4 * PiB + 512, 257, 1, &l,
                                               &err),
                       &err, "drbd metadata: data size 4503599627371008 is "
                       "above the limit of 4503599627370496 bytes");
    assert_failed_with(drbd_md_layout_external(UINT64_MAX - 511, 257, 1, &l,
                                               &err),
                       &err, "drbd metadata: data size 18446744073709551104 "
                       "is above the limit of 4503599627370496 bytes");
    assert_failed_with(drbd_md_layout_internal(1 * GiB, 6, 1, &l, &err), &err,
                       "al-extents must be between 7 and 6216, not 6");
    assert_failed_with(drbd_md_layout_external(1 * GiB, 6217, 1, &l, &err),
                       &err, "al-extents must be between 7 and 6216, "
                       "not 6217");
    g_assert_cmpmem(&l, sizeof(l), &untouched, sizeof(untouched));
}

/* Does [a, a + alen) meet [b, b + blen)? */
static bool ranges_meet(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
    return a < b + blen && b < a + alen;
}

/*
 * More slots: the new layout passes the check at its new length, keeps
 * slot 0 and the data where they were, and writes nothing new where the
 * old activity log and superblock are (the new slots cover them, which
 * are free), so that the old superblock holds until the new one lands
 */
/*
 * A resize: every new layout checks, keeps the old superblock out of the
 * way until the new one is written, and keeps the data below the metadata
 */
static void test_layout_resize(void)
{
    static const struct {
        DrbdMdPlacement placement;
        uint64_t from, to;
        uint32_t peers;
    } cases[] = {
        { DRBD_MD_INTERNAL, 8 * MiB, 16 * MiB, 1 },
        { DRBD_MD_INTERNAL, 1 * GiB, 1 * GiB + 4 * KiB, 1 },  /* < md size */
        { DRBD_MD_INTERNAL, 1 * GiB, 4 * GiB, 3 },
        { DRBD_MD_INTERNAL, 1 * GiB, 512 * MiB, 2 },
        { DRBD_MD_EXTERNAL, 1 * GiB, 2 * GiB, 2 },
        { DRBD_MD_EXTERNAL, 1 * GiB, 512 * MiB, 1 },
    };
    Error *err = NULL;
    unsigned i;

    for (i = 0; i < ARRAY_SIZE(cases); i++) {
        DrbdMdLayout old, l, chk;
        DrbdSuperblock sb;

        if (cases[i].placement == DRBD_MD_INTERNAL) {
            drbd_md_layout_internal(cases[i].from, 257, cases[i].peers, &old,
                                    &error_abort);
        } else {
            drbd_md_layout_external(cases[i].from, 257, cases[i].peers, &old,
                                    &error_abort);
        }
        drbd_md_sb_init(&sb, &old, 0, 7);
        g_assert_cmpint(drbd_md_layout_resize(&sb, old.image_size,
                                              cases[i].to, &l, &error_abort),
                        ==, 0);
        g_assert_cmpuint(l.data_size, ==, cases[i].to);
        g_assert_cmpuint(l.bm_bytes, ==, drbd_md_bm_bytes(cases[i].to));
        sb.data_size = cases[i].to;
        sb.bm_offset = l.bm_offset;
        sb.al_offset = l.al_offset;
        g_assert_cmpint(drbd_md_layout_check(&sb, l.image_size, &chk,
                                             &error_abort), ==, 0);
        g_assert_cmpuint(chk.sb_offset, ==, l.sb_offset);
        if (cases[i].placement == DRBD_MD_EXTERNAL) {
            /* new slots past the old meta image; superblock first */
            g_assert_cmpuint(l.sb_offset, ==, 0);
            g_assert_cmpuint(l.bm_offset, >=, old.image_size);
        } else if (cases[i].to > cases[i].from) {
            /* past the old end, a block never written in between */
            g_assert_cmpuint(l.bm_offset, >=, old.image_size + 4096);
            g_assert_cmpuint(l.bm_offset, >=, cases[i].to);
        } else {
            /* below the old metadata: the cut makes it the image's */
            g_assert_cmpuint(l.image_size, <=, old.bm_offset);
            g_assert_cmpuint(l.image_size, ==, chk.image_size);
        }
    }

    /* A shrink by less than the metadata's size */
    {
        DrbdMdLayout old, l;
        DrbdSuperblock sb;

        drbd_md_layout_internal(1 * GiB, 257, 1, &old, &error_abort);
        drbd_md_sb_init(&sb, &old, 0, 1);
        assert_failed_with(drbd_md_layout_resize(&sb, old.image_size,
                                                 1 * GiB - 4 * KiB, &l,
                                                 &err), &err,
                           "drbd metadata: the data can shrink by 69632 "
                           "bytes at least (the metadata's size), not by "
                           "4096");
    }
}

static void test_layout_grow(void)
{
    static const struct {
        DrbdMdPlacement placement;
        uint64_t data_size;
        uint32_t from, to;
        uint64_t image_size;
    } cases[] = {
        /* 64 MiB: 4 KiB slots; the activity log goes past the old end */
        { DRBD_MD_INTERNAL, 64 * MiB, 1, 2,
          64 * MiB + 4 * KiB + 36 * KiB + 36 * KiB },
        { DRBD_MD_INTERNAL, 64 * MiB, 1, 31,
          64 * MiB + 31 * 4 * KiB + 36 * KiB },
        /* 1 GiB: 32 KiB slots, not enough to clear the old 36 KiB */
        { DRBD_MD_INTERNAL, 1 * GiB, 1, 2,
          1 * GiB + 32 * KiB + 36 * KiB + 36 * KiB },
        /* 4 GiB: 128 KiB slots, as a fresh image of 3 slots */
        { DRBD_MD_INTERNAL, 4 * GiB, 1, 3, 4 * GiB + 3 * 128 * KiB + 36 * KiB },
        { DRBD_MD_INTERNAL, 4 * GiB, 2, 4, 4 * GiB + 4 * 128 * KiB + 36 * KiB },
        { DRBD_MD_EXTERNAL, 1 * GiB, 1, 3, 36 * KiB + 3 * 32 * KiB },
        { DRBD_MD_EXTERNAL, 1 * GiB, 3, 31, 36 * KiB + 31 * 32 * KiB },
    };
    Error *err = NULL;
    unsigned i;

    for (i = 0; i < ARRAY_SIZE(cases); i++) {
        DrbdMdLayout old, l, chk;
        DrbdSuperblock sb, grown;

        if (cases[i].placement == DRBD_MD_INTERNAL) {
            drbd_md_layout_internal(cases[i].data_size, 257, cases[i].from,
                                    &old, &error_abort);
        } else {
            drbd_md_layout_external(cases[i].data_size, 257, cases[i].from,
                                    &old, &error_abort);
        }
        drbd_md_sb_init(&sb, &old, 2, 7);
        sb.slots[0].node_id = 1;
        g_assert_cmpint(drbd_md_layout_grow(&sb, old.image_size, cases[i].to,
                                            &l, &error_abort), ==, 0);
        g_assert_cmpuint(l.image_size, ==, cases[i].image_size);
        g_assert_cmpuint(l.max_peers, ==, cases[i].to);
        g_assert_cmpuint(l.bm_offset, ==, old.bm_offset);
        g_assert_cmpuint(l.bm_bytes, ==, old.bm_bytes);
        g_assert_cmpuint(l.image_size, >=, old.image_size);

        grown = sb;
        drbd_md_sb_relayout(&grown, &l);
        g_assert_cmpuint(grown.version, ==, DRBD_MD_VERSION_SLOTS);
        g_assert_cmpuint(grown.max_peers, ==, cases[i].to);
        g_assert_cmpuint(grown.slots[0].node_id, ==, 1);
        g_assert_cmpuint(grown.slots[cases[i].to - 1].node_id, ==,
                         DRBD_MD_SLOT_FREE);
        g_assert_cmpint(drbd_md_layout_check(&grown, l.image_size, &chk,
                                             &error_abort), ==, 0);
        g_assert_cmpuint(chk.sb_offset, ==, l.sb_offset);
        g_assert_cmpuint(chk.al_offset, ==, l.al_offset);

        if (cases[i].placement == DRBD_MD_INTERNAL) {
            uint64_t old_tail = old.al_offset;
            uint64_t old_tail_len = old.image_size - old.al_offset;

            /* the new activity log and superblock: past the old end */
            g_assert_cmpuint(l.al_offset, >=, old.image_size);
            g_assert_false(ranges_meet(l.sb_offset, 4096, old_tail,
                                       old_tail_len));
            /* the old slots did not move */
            g_assert_false(ranges_meet(old.bm_offset,
                                       cases[i].from * old.bm_bytes,
                                       old_tail, old_tail_len));
        } else {
            /* superblock and activity log stay at the start */
            g_assert_cmpuint(l.sb_offset, ==, 0);
            g_assert_cmpuint(l.al_offset, ==, old.al_offset);
        }
    }

    /* fewer or as many slots; an invalid count; damaged metadata */
    {
        DrbdMdLayout old, l;
        DrbdSuperblock sb;

        drbd_md_layout_internal(1 * GiB, 257, 2, &old, &error_abort);
        drbd_md_sb_init(&sb, &old, 0, 1);
        assert_failed_with(drbd_md_layout_grow(&sb, old.image_size, 2, &l,
                                               &err), &err,
                           "drbd metadata: it has 2 bitmap slots already; "
                           "slots can be added, not removed");
        assert_failed_with(drbd_md_layout_grow(&sb, old.image_size, 1, &l,
                                               &err), &err,
                           "drbd metadata: it has 2 bitmap slots already; "
                           "slots can be added, not removed");
        assert_failed_with(drbd_md_layout_grow(&sb, old.image_size, 32, &l,
                                               &err), &err,
                           "max-peers must be between 1 and 31, not 32");
        assert_failed_with(drbd_md_layout_grow(&sb, old.image_size - 4096, 3,
                                               &l, &err), &err,
                           "drbd metadata: superblock at offset 1073836032 "
                           "(4096 bytes) overlaps the activity log at offset "
                           "1073807360 (32768 bytes)");
    }
}

static void test_sb_offset(void)
{
    uint64_t off = 12345;
    Error *err = NULL;

    g_assert_cmpint(drbd_md_sb_offset(DRBD_MD_INTERNAL, 45056, &off,
                                      &error_abort), ==, 0);
    g_assert_cmpuint(off, ==, 40960);
    g_assert_cmpint(drbd_md_sb_offset(DRBD_MD_EXTERNAL, 45056, &off,
                                      &error_abort), ==, 0);
    g_assert_cmpuint(off, ==, 0);
    g_assert_cmpint(drbd_md_sb_offset(DRBD_MD_INTERNAL, 4096, &off,
                                      &error_abort), ==, 0);
    g_assert_cmpuint(off, ==, 0);

    off = 12345;
    assert_failed_with(drbd_md_sb_offset(DRBD_MD_INTERNAL, 4095, &off, &err),
                       &err, "drbd metadata: image of 4095 bytes is too "
                       "small to hold metadata");
    assert_failed_with(drbd_md_sb_offset(DRBD_MD_EXTERNAL, 0, &off, &err),
                       &err, "drbd metadata: metadata image of 0 bytes is "
                       "too small to hold metadata");
    assert_failed_with(drbd_md_sb_offset(DRBD_MD_INTERNAL, 45056 + 512, &off,
                                         &err),
                       &err, "drbd metadata: image length 45568 is not a "
                       "multiple of 4096 (was the image resized?)");
    assert_failed_with(drbd_md_sb_offset(2, 45056, &off, &err), &err,
                       "drbd metadata: unknown placement 2");
    g_assert_cmpuint(off, ==, 12345);
}

/* Check @sb against @len: it must fail with @msg */
static void layout_refused(const DrbdSuperblock *sb, uint64_t len,
                           const char *msg)
{
    DrbdMdLayout out, untouched;
    Error *err = NULL;

    memset(&out, 0x5a, sizeof(out));
    memcpy(&untouched, &out, sizeof(out));
    assert_failed_with(drbd_md_layout_check(sb, len, &out, &err), &err, msg);
    g_assert_cmpmem(&out, sizeof(out), &untouched, sizeof(untouched));
}

static void test_layout_check(void)
{
    DrbdMdLayout l;
    DrbdSuperblock good, sb;
    uint64_t len;

    /* internal, 1 GiB: bitmap 1G (32K), AL 1G+32K (32K), sb 1G+64K */
    g_assert_cmpint(drbd_md_layout_internal(1 * GiB, 257, 1, &l, &error_abort),
                    ==, 0);
    drbd_md_sb_init(&good, &l, 0, 1);
    len = l.image_size;

    /* a longer image moves the superblock, and the rest still fits */
    g_assert_cmpint(drbd_md_layout_check(&good, len + 4096, NULL,
                                         &error_abort), ==, 0);

    layout_refused(&good, len - 512, "drbd metadata: image length "
                   "1073810944 is not a multiple of 4096 (was the image "
                   "resized?)");
    layout_refused(&good, 0, "drbd metadata: image of 0 bytes is too small "
                   "to hold metadata");
    /* shorter: the superblock lands on the activity log */
    layout_refused(&good, len - 4096, "drbd metadata: superblock at offset "
                   "1073803264 (4096 bytes) overlaps the activity log at "
                   "offset 1073774592 (32768 bytes)");
    /* far shorter: the activity log is beyond the end */
    layout_refused(&good, 1 * GiB, "drbd metadata: activity log at offset "
                   "1073774592 (32768 bytes) reaches beyond the end of the "
                   "image (1073741824 bytes)");

    sb = good;
    sb.bm_offset += 512;
    layout_refused(&sb, len, "drbd metadata: bitmap offset 1073742336 is "
                   "not a multiple of 4096");
    sb = good;
    sb.al_offset = 1 * GiB + 100;
    layout_refused(&sb, len, "drbd metadata: activity log offset "
                   "1073741924 is not a multiple of 4096");

    /* the bitmap and the activity log overlap */
    sb = good;
    sb.al_offset -= 4096;
    layout_refused(&sb, len, "drbd metadata: activity log at offset "
                   "1073770496 (32768 bytes) overlaps the bitmap at offset "
                   "1073741824 (32768 bytes)");
    /* the bitmap is too small for data_size (it grows into the AL) */
    sb = good;
    sb.data_size = 1 * GiB - 4096;
    g_assert_cmpint(drbd_md_layout_check(&sb, len, NULL, &error_abort), ==,
                    0);
    sb.data_size = 1 * GiB + 512;
    layout_refused(&sb, len, "drbd metadata: activity log at offset "
                   "1073774592 (32768 bytes) overlaps the bitmap at offset "
                   "1073741824 (36864 bytes)");
    /* data over the bitmap */
    sb = good;
    sb.bm_offset -= 4096;
    sb.data_size -= 4096;
    g_assert_cmpint(drbd_md_layout_check(&sb, len, NULL, &error_abort), ==,
                    0);
    sb.data_size += 512;
    layout_refused(&sb, len, "drbd metadata: data (1073738240 bytes) "
                   "overlaps the bitmap at offset 1073737728");
    /* data over the activity log, with the bitmap moved away */
    sb = good;
    sb.al_offset = good.bm_offset;
    sb.bm_offset = good.al_offset;
    g_assert_cmpint(drbd_md_layout_check(&sb, len, NULL, &error_abort), ==,
                    0);
    sb.al_offset -= 4096;
    sb.bm_offset -= 4096;
    layout_refused(&sb, len, "drbd metadata: data (1073741824 bytes) "
                   "overlaps the activity log at offset 1073737728");
    /* offsets that would overflow */
    sb = good;
    sb.bm_offset = UINT64_MAX - 4095;
    layout_refused(&sb, len, "drbd metadata: bitmap at offset "
                   "18446744073709547520 (32768 bytes) reaches beyond the "
                   "end of the image (1073811456 bytes)");
    sb = good;
    sb.al_offset = len;
    layout_refused(&sb, len, "drbd metadata: activity log at offset "
                   "1073811456 (32768 bytes) reaches beyond the end of the "
                   "image (1073811456 bytes)");
    /* fields that the decoder refuses are refused here too */
    sb = good;
    sb.data_size = 0;
    layout_refused(&sb, len, "drbd metadata: data size must not be zero");
    sb = good;
    sb.al_extents = 5;
    layout_refused(&sb, len, "al-extents must be between 7 and 6216, not 5");
    sb = good;
    sb.al_blocks = 9;
    layout_refused(&sb, len, "drbd metadata: 9 activity-log blocks are not "
                   "supported (only 8)");

    /* external: superblock 0, AL 4096, bitmap 36864 */
    g_assert_cmpint(drbd_md_layout_external(1 * GiB, 257, 1, &l, &error_abort),
                    ==, 0);
    drbd_md_sb_init(&good, &l, 0, 1);
    len = l.image_size;
    g_assert_cmpuint(len, ==, 36864 + 32768);
    /* the data is elsewhere: its size does not constrain the offsets */
    g_assert_cmpint(drbd_md_layout_check(&good, len, NULL, &error_abort), ==,
                    0);
    layout_refused(&good, len - 4096, "drbd metadata: bitmap at offset "
                   "36864 (32768 bytes) reaches beyond the end of the image "
                   "(65536 bytes)");
    sb = good;
    sb.al_offset = 0;
    layout_refused(&sb, len, "drbd metadata: superblock at offset 0 (4096 "
                   "bytes) overlaps the activity log at offset 0 (32768 "
                   "bytes)");
    sb = good;
    sb.bm_offset = 32768;
    layout_refused(&sb, len, "drbd metadata: activity log at offset 4096 "
                   "(32768 bytes) overlaps the bitmap at offset 32768 (32768 "
                   "bytes)");
    /* another order works as long as nothing overlaps */
    sb = good;
    sb.bm_offset = 4096;
    sb.al_offset = 4096 + 32768;
    g_assert_cmpint(drbd_md_layout_check(&sb, len, NULL, &error_abort), ==,
                    0);
    /* an internal superblock read from the external meta image */
    sb = good;
    sb.placement = DRBD_MD_INTERNAL;
    layout_refused(&sb, len, "drbd metadata: superblock at offset 65536 "
                   "(4096 bytes) overlaps the bitmap at offset 36864 (32768 "
                   "bytes)");
}

/*
 * Activity log
 */

static void test_al_extents_valid(void)
{
    Error *err = NULL;

    g_assert_cmpint(drbd_al_extents_valid(7, &error_abort), ==, 0);
    g_assert_cmpint(drbd_al_extents_valid(257, &error_abort), ==, 0);
    g_assert_cmpint(drbd_al_extents_valid(6216, &error_abort), ==, 0);
    g_assert_cmpint(DRBD_AL_EXTENTS_DEFAULT, ==, 1237);
    assert_failed_with(drbd_al_extents_valid(0, &err), &err,
                       "al-extents must be between 7 and 6216, not 0");
    assert_failed_with(drbd_al_extents_valid(6, &err), &err,
                       "al-extents must be between 7 and 6216, not 6");
    assert_failed_with(drbd_al_extents_valid(6217, &err), &err,
                       "al-extents must be between 7 and 6216, not 6217");
    assert_failed_with(drbd_al_extents_valid(UINT32_MAX, &err), &err,
                       "al-extents must be between 7 and 6216, not "
                       "4294967295");

    g_assert_cmpuint(drbd_md_al_extent_count(512), ==, 1);
    g_assert_cmpuint(drbd_md_al_extent_count(4 * MiB), ==, 1);
    g_assert_cmpuint(drbd_md_al_extent_count(4 * MiB + 512), ==, 2);
    g_assert_cmpuint(drbd_md_al_extent_count(4 * PiB), ==, 1ULL << 30);
}

static void test_al_next_context(void)
{
    static const uint32_t extents[] = { 7, 8, 13, 257, 888, 889, 6215, 6216 };
    static const uint64_t starts[] = {
        0, 1, 5, 6, 1000, UINT64_MAX - 20,
    };
    size_t i, k;

    for (i = 0; i < ARRAY_SIZE(extents); i++) {
        uint32_t n = extents[i];
        uint32_t expect_size = DIV_ROUND_UP(n, 7);

        for (k = 0; k < ARRAY_SIZE(starts); k++) {
            g_autofree bool *covered = g_new0(bool, n);
            uint64_t t;
            uint32_t s, start, size;

            /* any 7 consecutive transactions carry every slot */
            for (t = starts[k]; t != starts[k] + 7; t++) {
                drbd_al_next_context(t, n, 8, &start, &size);
                g_assert_cmpuint(size, ==, expect_size);
                g_assert_cmpuint(size, <=, DRBD_AL_MAX_CONTEXT);
                g_assert_cmpuint(start, <, n);
                for (s = 0; s < size; s++) {
                    covered[(start + s) % n] = true;
                }
            }
            for (s = 0; s < n; s++) {
                g_assert_true(covered[s]);
            }
        }
    }

    {
        uint32_t start, size;

        /* exact values for one case: 257 slots, windows of 37 */
        drbd_al_next_context(0, 257, 8, &start, &size);
        g_assert_cmpuint(start, ==, 0);
        g_assert_cmpuint(size, ==, 37);
        drbd_al_next_context(1, 257, 8, &start, &size);
        g_assert_cmpuint(start, ==, 37);
        drbd_al_next_context(7, 257, 8, &start, &size);
        g_assert_cmpuint(start, ==, 259 % 257);
        drbd_al_next_context(257, 257, 8, &start, &size);
        g_assert_cmpuint(start, ==, 0);
    }
}

static void sample_tr(DrbdAlTransaction *tr)
{
    uint32_t i;

    memset(tr, 0, sizeof(*tr));
    tr->tr_number = 0x1122334455667788ULL;
    tr->al_extents = 6216;
    tr->n_updates = 64;
    for (i = 0; i < 64; i++) {
        tr->updates[i].slot = 6215 - i * 3;
        tr->updates[i].extent = i == 5 ? NONE : 0x10000 + i;
    }
    drbd_al_next_context(tr->tr_number, 6216, 8, &tr->context_start, &i);
    tr->context_size = i;
    for (i = 0; i < tr->context_size; i++) {
        tr->context[i] = i % 3 ? 0xabc00000 + i : NONE;
    }
}

static void assert_tr_equal(const DrbdAlTransaction *a,
                            const DrbdAlTransaction *b)
{
    size_t i;

    g_assert_cmpuint(a->tr_number, ==, b->tr_number);
    g_assert_cmpuint(a->al_extents, ==, b->al_extents);
    g_assert_cmpuint(a->n_updates, ==, b->n_updates);
    g_assert_cmpuint(a->context_size, ==, b->context_size);
    g_assert_cmpuint(a->context_start, ==, b->context_start);
    for (i = 0; i < a->n_updates; i++) {
        g_assert_cmpuint(a->updates[i].slot, ==, b->updates[i].slot);
        g_assert_cmpuint(a->updates[i].extent, ==, b->updates[i].extent);
    }
    g_assert_cmpmem(a->context, a->context_size * 4,
                    b->context, b->context_size * 4);
}

static void test_al_round_trip(void)
{
    g_autofree DrbdAlTransaction *tr = g_new(DrbdAlTransaction, 1);
    g_autofree DrbdAlTransaction *out = g_new(DrbdAlTransaction, 1);
    uint8_t buf[BLOCK];
    static const uint8_t magic[] = { 'D', 'R', 'A', 'L' };
    size_t i;

    sample_tr(tr);
    g_assert_cmpuint(tr->context_size, ==, 888);
    memset(buf, 0xa5, sizeof(buf));
    drbd_al_tr_encode(tr, buf);

    g_assert_cmpmem(buf + TR_MAGIC, 4, magic, 4);
    g_assert_cmpuint(be32(buf + TR_CRC), ==, reference_crc(buf, TR_CRC));
    g_assert_cmpuint(ldq_be_p(buf + TR_NUMBER), ==, 0x1122334455667788ULL);
    g_assert_cmpuint(be32(buf + TR_AL_EXTENTS), ==, 6216);
    g_assert_cmpuint(lduw_be_p(buf + TR_N_UPDATES), ==, 64);
    g_assert_cmpuint(lduw_be_p(buf + TR_CONTEXT_SIZE), ==, 888);
    g_assert_cmpuint(be32(buf + TR_CONTEXT_START), ==,
                     tr->context_start);
    g_assert_cmpuint(be32(buf + TR_RESERVED), ==, 0);
    g_assert_cmpuint(be32(buf + TR_UPDATES), ==, 6215);
    g_assert_cmpuint(be32(buf + TR_UPDATES + 4), ==, 0x10000);
    g_assert_cmpuint(be32(buf + TR_UPDATES + 5 * 8 + 4), ==, NONE);
    g_assert_cmpuint(be32(buf + TR_UPDATES + 63 * 8), ==, 6215 - 189);
    g_assert_cmpuint(be32(buf + TR_CONTEXT), ==, NONE);
    g_assert_cmpuint(be32(buf + TR_CONTEXT + 4), ==, 0xabc00001);
    g_assert_cmpuint(be32(buf + BLOCK - 4), ==, 0xabc00000 + 887);

    g_assert_cmpint(drbd_al_tr_decode(buf, BLOCK, out, &error_abort), ==, 0);
    assert_tr_equal(tr, out);

    /* a small one: unused updates and context are zero */
    tr->n_updates = 1;
    tr->al_extents = 7;
    tr->updates[0].slot = 6;
    tr->context_size = 1;
    tr->context_start = 6;
    drbd_al_tr_encode(tr, buf);
    for (i = TR_UPDATES + 8; i < TR_CONTEXT; i++) {
        g_assert_cmpuint(buf[i], ==, 0);
    }
    for (i = TR_CONTEXT + 4; i < BLOCK; i++) {
        g_assert_cmpuint(buf[i], ==, 0);
    }
    g_assert_cmpint(drbd_al_tr_decode(buf, BLOCK, out, &error_abort), ==, 0);
    assert_tr_equal(tr, out);

    /* and an empty one */
    tr->n_updates = 0;
    tr->context_size = 0;
    tr->context_start = 0;
    drbd_al_tr_encode(tr, buf);
    g_assert_cmpint(drbd_al_tr_decode(buf, BLOCK, out, &error_abort), ==, 0);
    assert_tr_equal(tr, out);
}

/*
 * Encode a transaction of 100 slots, store @val of @size bytes at @off,
 * fix the checksum and decode: it must fail with @msg, output untouched
 */
static void tr_refused(size_t off, int size, uint32_t val, const char *msg)
{
    g_autofree DrbdAlTransaction *tr = g_new0(DrbdAlTransaction, 1);
    g_autofree DrbdAlTransaction *out = g_new(DrbdAlTransaction, 1);
    g_autofree DrbdAlTransaction *untouched = NULL;
    uint8_t buf[BLOCK];
    Error *err = NULL;

    tr->tr_number = 77;
    tr->al_extents = 100;
    tr->n_updates = 2;
    tr->updates[0] = (DrbdAlUpdate) { 3, 1000 };
    tr->updates[1] = (DrbdAlUpdate) { 99, NONE };
    tr->context_start = 90;
    tr->context_size = 15;
    drbd_al_tr_encode(tr, buf);
    if (size == 2) {
        stw_be_p(buf + off, val);
    } else {
        stl_be_p(buf + off, val);
    }
    fix_crc(buf, TR_CRC);
    memset(out, 0x5a, sizeof(*out));
    untouched = g_memdup2(out, sizeof(*out));
    assert_failed_with(drbd_al_tr_decode(buf, BLOCK, out, &err), &err, msg);
    g_assert_cmpmem(out, sizeof(*out), untouched, sizeof(*untouched));
}

static void test_al_invalid(void)
{
    g_autofree DrbdAlTransaction *tr = g_new(DrbdAlTransaction, 1);
    g_autofree DrbdAlTransaction *out = g_new(DrbdAlTransaction, 1);
    uint8_t buf[BLOCK];
    Error *err = NULL;
    char *msg;

    sample_tr(tr);
    drbd_al_tr_encode(tr, buf);

    assert_failed_with(drbd_al_tr_decode(buf, BLOCK - 1, out, &err), &err,
                       "activity-log transaction is 4095 bytes "
                       "(expected 4096)");
    assert_failed_with(drbd_al_tr_decode(buf, BLOCK * 2, out, &err), &err,
                       "activity-log transaction is 8192 bytes "
                       "(expected 4096)");

    buf[0] = 'X';
    assert_failed_with(drbd_al_tr_decode(buf, BLOCK, out, &err), &err,
                       "activity-log transaction: bad magic 0x5852414c "
                       "(expected 0x4452414c)");
    memset(buf, 0, BLOCK);
    assert_failed_with(drbd_al_tr_decode(buf, BLOCK, out, &err), &err,
                       "activity-log transaction: bad magic 0x00000000 "
                       "(expected 0x4452414c)");

    drbd_al_tr_encode(tr, buf);
    buf[BLOCK - 1] ^= 1;
    msg = g_strdup_printf("activity-log transaction: checksum mismatch "
                          "(stored 0x%08x, computed 0x%08x)",
                          be32(buf + TR_CRC),
                          reference_crc(buf, TR_CRC));
    assert_failed_with(drbd_al_tr_decode(buf, BLOCK, out, &err), &err, msg);
    g_free(msg);

    tr_refused(TR_AL_EXTENTS, 4, 6, "activity-log transaction 77: "
               "al_extents 6 is out of range (7 to 6216)");
    tr_refused(TR_AL_EXTENTS, 4, 6217, "activity-log transaction 77: "
               "al_extents 6217 is out of range (7 to 6216)");
    tr_refused(TR_N_UPDATES, 2, 65, "activity-log transaction 77: 65 "
               "updates is more than the limit of 64");
    tr_refused(TR_N_UPDATES, 2, 0xffff, "activity-log transaction 77: 65535 "
               "updates is more than the limit of 64");
    tr_refused(TR_CONTEXT_SIZE, 2, 101, "activity-log transaction 77: "
               "context of 101 slots is more than the limit of 100");
    tr_refused(TR_CONTEXT_SIZE, 2, 889, "activity-log transaction 77: "
               "context of 889 slots is more than the limit of 100");
    tr_refused(TR_CONTEXT_START, 4, 100, "activity-log transaction 77: "
               "context starts at slot 100, beyond the last slot 99");
    tr_refused(TR_RESERVED, 4, 1, "activity-log transaction 77: reserved "
               "field is 0x00000001, not zero");
    tr_refused(TR_UPDATES + 8, 4, 100, "activity-log transaction 77: update "
               "1 is of slot 100, beyond the last slot 99");
    tr_refused(TR_UPDATES, 4, UINT32_MAX, "activity-log transaction 77: "
               "update 0 is of slot 4294967295, beyond the last slot 99");
    /* the third update is unused */
    tr_refused(TR_UPDATES + 2 * 8 + 4, 4, 5, "activity-log transaction 77: "
               "unused updates are not zero");
    tr_refused(TR_CONTEXT - 4, 4, 1, "activity-log transaction 77: unused "
               "updates are not zero");
    tr_refused(TR_CONTEXT + 15 * 4, 4, NONE, "activity-log transaction 77: "
               "unused context is not zero");
    tr_refused(BLOCK - 4, 4, 1, "activity-log transaction 77: unused context "
               "is not zero");

    /* the limit itself: a context as large as the slot count */
    tr->al_extents = 100;
    tr->n_updates = 0;
    tr->context_size = 100;
    tr->context_start = 99;
    drbd_al_tr_encode(tr, buf);
    g_assert_cmpint(drbd_al_tr_decode(buf, BLOCK, out, &error_abort), ==, 0);
    assert_tr_equal(tr, out);
}

/* Random corruption of a transaction: refused, or in range */
static void test_al_mutation(void)
{
    g_autofree DrbdAlTransaction *tr = g_new(DrbdAlTransaction, 1);
    g_autofree DrbdAlTransaction *out = g_new(DrbdAlTransaction, 1);
    uint8_t orig[BLOCK], buf[BLOCK];
    unsigned accepted = 0, refused = 0, i, j;
    Error *err = NULL;

    memset(tr, 0, sizeof(*tr));
    tr->tr_number = 5;
    tr->al_extents = 300;
    tr->n_updates = 3;
    tr->updates[0] = (DrbdAlUpdate) { 0, 1 };
    tr->updates[1] = (DrbdAlUpdate) { 299, 2 };
    tr->updates[2] = (DrbdAlUpdate) { 150, NONE };
    tr->context_start = 250;
    tr->context_size = 43;
    drbd_al_tr_encode(tr, orig);

    for (i = 0; i < 2000; i++) {
        memcpy(buf, orig, BLOCK);
        for (j = g_test_rand_int_range(1, 3); j > 0; j--) {
            int off = g_test_rand_int_range(0, i % 4 ? 64 : BLOCK);

            buf[off] ^= 1 << g_test_rand_int_range(0, 8);
        }
        if (i % 2) {
            fix_crc(buf, TR_CRC);
        }
        if (drbd_al_tr_decode(buf, BLOCK, out, &err) == 0) {
            g_assert_null(err);
            g_assert_cmpuint(out->al_extents, >=, 7);
            g_assert_cmpuint(out->al_extents, <=, 6216);
            g_assert_cmpuint(out->n_updates, <=, 64);
            g_assert_cmpuint(out->context_size, <=, out->al_extents);
            g_assert_cmpuint(out->context_start, <, out->al_extents);
            for (j = 0; j < out->n_updates; j++) {
                g_assert_cmpuint(out->updates[j].slot, <, out->al_extents);
            }
            accepted++;
        } else {
            g_assert_nonnull(err);
            error_free(err);
            err = NULL;
            refused++;
        }
    }
    g_test_message("%u mangled transactions accepted, %u refused",
                   accepted, refused);
    g_assert_cmpuint(accepted, >, 0);
    g_assert_cmpuint(refused, >, 0);
}

/*
 * Recovery, against a reference model of the writer: the hot set is a
 * plain array of slots changed at random, each change written as a
 * transaction into the ring with the context rotation, every extent in
 * one slot at most (as the activity-log cache keeps it)
 */

typedef struct AlModel {
    uint32_t al_extents;
    uint32_t *slots;
    uint8_t *ring;
    uint64_t first_tr;
    uint64_t next_tr;
    GPtrArray *history;     /* the slots after each transaction */
} AlModel;

static AlModel *model_new(uint32_t al_extents, uint64_t first_tr)
{
    AlModel *m = g_new0(AlModel, 1);
    uint32_t i;

    m->al_extents = al_extents;
    m->slots = g_new(uint32_t, al_extents);
    for (i = 0; i < al_extents; i++) {
        m->slots[i] = NONE;
    }
    /* a fresh ring is all zeros */
    m->ring = g_malloc0(RING_BYTES);
    m->first_tr = first_tr;
    m->next_tr = first_tr;
    m->history = g_ptr_array_new_with_free_func(g_free);
    return m;
}

static void model_free(AlModel *m)
{
    g_free(m->slots);
    g_free(m->ring);
    g_ptr_array_unref(m->history);
    g_free(m);
}

static bool model_has(const AlModel *m, uint32_t extent)
{
    uint32_t i;

    for (i = 0; i < m->al_extents; i++) {
        if (m->slots[i] == extent) {
            return true;
        }
    }
    return false;
}

/* Write the model's pending @tr (its updates already chosen) */
static void model_write(AlModel *m, DrbdAlTransaction *tr)
{
    uint32_t i, size;

    tr->tr_number = m->next_tr++;
    tr->al_extents = m->al_extents;
    drbd_al_next_context(tr->tr_number, m->al_extents, AL_BLOCKS,
                         &tr->context_start, &size);
    tr->context_size = size;
    for (i = 0; i < size; i++) {
        tr->context[i] = m->slots[(tr->context_start + i) % m->al_extents];
    }
    drbd_al_tr_encode(tr, m->ring + (tr->tr_number % AL_BLOCKS) * BLOCK);
    g_ptr_array_add(m->history,
                    g_memdup2(m->slots, m->al_extents * sizeof(uint32_t)));
}

/* One transaction of random changes */
static void model_step(AlModel *m)
{
    g_autofree DrbdAlTransaction *tr = g_new0(DrbdAlTransaction, 1);
    uint32_t n = g_test_rand_int_range(0, DRBD_AL_MAX_UPDATES + 1);
    uint32_t i;

    for (i = 0; i < n; i++) {
        uint32_t slot = g_test_rand_int_range(0, m->al_extents);
        uint32_t extent;

        if (g_test_rand_int_range(0, 8) == 0) {
            extent = NONE;
        } else {
            do {
                /* a small range, so that extents come back */
                extent = g_test_rand_int_range(0, 3 * m->al_extents);
            } while (model_has(m, extent));
        }
        m->slots[slot] = extent;
        tr->updates[i] = (DrbdAlUpdate) { slot, extent };
    }
    tr->n_updates = n;
    model_write(m, tr);
}

/* Recover from @ring and expect the model's state after @tr */
static void assert_recovers_to(AlModel *m, const uint8_t *ring, uint64_t tr)
{
    g_autofree uint32_t *slots = g_new(uint32_t, m->al_extents);
    const uint32_t *expect = g_ptr_array_index(m->history,
                                               tr - m->first_tr);
    uint64_t last = UINT64_MAX;
    bool found = false;

    g_assert_cmpint(drbd_al_recover(ring, RING_BYTES, m->al_extents,
                                    AL_BLOCKS, slots, &last, &found,
                                    &error_abort), ==, 0);
    g_assert_true(found);
    g_assert_cmpuint(last, ==, tr);
    g_assert_cmpmem(slots, m->al_extents * 4, expect, m->al_extents * 4);
}

/* Recover from @ring: it must fail with a message starting with @prefix */
static void assert_recovery_fails(const uint8_t *ring, uint32_t al_extents,
                                  const char *prefix)
{
    g_autofree uint32_t *slots = g_new(uint32_t, MAX(al_extents, 1));
    uint64_t last = 12345;
    bool found = true;
    Error *err = NULL;

    slots[0] = 777;
    assert_failed_prefix(drbd_al_recover(ring, RING_BYTES, al_extents,
                                         AL_BLOCKS, slots, &last, &found,
                                         &err),
                         &err, prefix);
    g_assert_cmpuint(slots[0], ==, 777);
    g_assert_cmpuint(last, ==, 12345);
    g_assert_true(found);
}

static void test_recover_empty(void)
{
    g_autofree uint8_t *ring = g_malloc0(RING_BYTES);
    uint32_t slots[257];
    uint64_t last = 99;
    bool found = true;
    size_t i;

    for (i = 0; i < ARRAY_SIZE(slots); i++) {
        slots[i] = i;
    }
    g_assert_cmpint(drbd_al_recover(ring, RING_BYTES, 257, AL_BLOCKS, slots,
                                    &last, &found, &error_abort), ==, 0);
    g_assert_false(found);
    g_assert_cmpuint(last, ==, 0);
    for (i = 0; i < ARRAY_SIZE(slots); i++) {
        g_assert_cmpuint(slots[i], ==, NONE);
    }

    /* garbage everywhere is no transaction either */
    for (i = 0; i < RING_BYTES; i++) {
        ring[i] = g_test_rand_int();
    }
    g_assert_cmpint(drbd_al_recover(ring, RING_BYTES, 257, AL_BLOCKS, slots,
                                    &last, &found, &error_abort), ==, 0);
    g_assert_false(found);
}

/* The model's ring recovers to the model after every transaction */
static void test_recover_model(void)
{
    static const uint32_t extents[] = { 7, 8, 61, 257, 6216 };
    size_t i;

    for (i = 0; i < ARRAY_SIZE(extents); i++) {
        /* the transaction numbers need not start at 0 */
        AlModel *m = model_new(extents[i], i == 1 ? 1000 : 0);
        int k;

        /* wrap the ring more than twice */
        for (k = 0; k < 2 * AL_BLOCKS + 5; k++) {
            model_step(m);
            assert_recovers_to(m, m->ring, m->first_tr + k);
        }
        g_assert_cmpuint(m->next_tr - m->first_tr, ==, 21);
        model_free(m);
    }
}

/* A torn (garbage) newest block: the state of the transaction before */
static void test_recover_torn_newest(void)
{
    AlModel *m = model_new(257, 0);
    uint8_t *before = g_malloc(RING_BYTES);
    uint8_t *ring = g_malloc(RING_BYTES);
    uint64_t last;
    bool found;
    uint32_t slots[257];
    int k, j;

    for (k = 0; k < 2 * AL_BLOCKS + 3; k++) {
        size_t off = (k % AL_BLOCKS) * BLOCK;

        memcpy(before, m->ring, RING_BYTES);
        model_step(m);

        /*
         * torn: the first sector written, the rest still the block that
         * was there (zeros at first); the context, from byte 544, is
         * never empty, so the block did change
         */
        memcpy(ring, before, RING_BYTES);
        memcpy(ring + off, m->ring + off, 512);
        g_assert_true(memcmp(ring + off, m->ring + off, BLOCK) != 0);
        if (k == 0) {
            g_assert_cmpint(drbd_al_recover(ring, RING_BYTES, 257, AL_BLOCKS,
                                            slots, &last, &found,
                                            &error_abort), ==, 0);
            g_assert_false(found);
            continue;
        }
        assert_recovers_to(m, ring, k - 1);

        /* garbage */
        for (j = 0; j < BLOCK; j++) {
            ring[off + j] = g_test_rand_int();
        }
        assert_recovers_to(m, ring, k - 1);

        /* one bit */
        memcpy(ring + off, m->ring + off, BLOCK);
        ring[off + g_test_rand_int_range(0, BLOCK)] ^= 4;
        assert_recovers_to(m, ring, k - 1);

        /* and the whole block: this transaction */
        memcpy(ring + off, m->ring + off, BLOCK);
        assert_recovers_to(m, ring, k);
    }
    g_free(ring);
    g_free(before);
    model_free(m);
}

/*
 * The oldest block of a full ring is not needed: the seven after it
 * carry every slot in their contexts
 */
static void test_recover_torn_oldest(void)
{
    AlModel *m = model_new(6216, 0);
    uint8_t *ring = g_malloc(RING_BYTES);
    int k;

    for (k = 0; k < 2 * AL_BLOCKS + 3; k++) {
        model_step(m);
        if (k < AL_BLOCKS - 1) {
            continue;
        }
        memcpy(ring, m->ring, RING_BYTES);
        memset(ring + ((k + 1) % AL_BLOCKS) * BLOCK, 0, BLOCK);
        assert_recovers_to(m, ring, k);
    }
    g_free(ring);
    model_free(m);
}

/* A damaged block in the middle: its updates are lost, recovery refuses */
static void test_recover_torn_middle(void)
{
    AlModel *m = model_new(257, 0);
    uint8_t *ring = g_malloc(RING_BYTES);
    char *msg;
    int k;

    for (k = 0; k < AL_BLOCKS + 4; k++) {
        model_step(m);
    }
    /* the ring holds transactions 4 .. 11; damage 9 */
    memcpy(ring, m->ring, RING_BYTES);
    ring[(9 % AL_BLOCKS) * BLOCK + 100] ^= 1;
    assert_recovery_fails(ring, 257, "activity log: transaction 9 is missing "
                          "or damaged (found transactions 4 to 11): the hot "
                          "extents cannot be recovered");
    /* and two of them: the first gap is named */
    memset(ring + (6 % AL_BLOCKS) * BLOCK, 0, BLOCK);
    assert_recovery_fails(ring, 257, "activity log: transaction 6 is missing");

    /* a fresh ring, transactions 0 .. 3 written, 1 lost */
    model_free(m);
    m = model_new(257, 0);
    for (k = 0; k < 4; k++) {
        model_step(m);
    }
    memcpy(ring, m->ring, RING_BYTES);
    memset(ring + BLOCK, 0, BLOCK);
    msg = g_strdup("activity log: transaction 1 is missing or damaged "
                   "(found transactions 0 to 3)");
    assert_recovery_fails(ring, 257, msg);
    g_free(msg);

    g_free(ring);
    model_free(m);
}

static void test_recover_duplicate(void)
{
    AlModel *m = model_new(257, 0);
    uint8_t *ring = g_malloc(RING_BYTES);
    int k;

    for (k = 0; k < AL_BLOCKS + 2; k++) {
        model_step(m);
    }
    /* transaction 9 (block 1) also in block 4 */
    memcpy(ring, m->ring, RING_BYTES);
    memcpy(ring + 4 * BLOCK, ring + 1 * BLOCK, BLOCK);
    assert_recovery_fails(ring, 257, "activity log: transaction 9 is in "
                          "blocks 1 and 4");

    /* a lone transaction in the wrong block */
    memset(ring, 0, RING_BYTES);
    memcpy(ring + 5 * BLOCK, m->ring + 3 * BLOCK, BLOCK);
    assert_recovery_fails(ring, 257, "activity log block 5 holds "
                          "transaction 3, which belongs in block 3");
    g_free(ring);
    model_free(m);
}

static void test_recover_foreign(void)
{
    AlModel *m = model_new(257, 0);
    uint8_t *ring = g_malloc(RING_BYTES);
    uint8_t *b;
    int k;

    for (k = 0; k < 5; k++) {
        model_step(m);
    }
    /* the superblock says another number of slots */
    assert_recovery_fails(m->ring, 256, "activity log block 0: transaction "
                          "0 is for 257 slots, not 256 (foreign or damaged "
                          "metadata)");
    assert_recovery_fails(m->ring, 258, "activity log block 0: transaction "
                          "0 is for 257 slots, not 258 (foreign or damaged "
                          "metadata)");

    /* a valid block with a slot out of range */
    memcpy(ring, m->ring, RING_BYTES);
    b = ring + 2 * BLOCK;
    stw_be_p(b + TR_N_UPDATES, 1);
    memset(b + TR_UPDATES, 0, 64 * 8);
    stl_be_p(b + TR_UPDATES, 257);
    fix_crc(b, TR_CRC);
    assert_recovery_fails(ring, 257, "activity log block 2: activity-log "
                          "transaction 2: update 0 is of slot 257, beyond "
                          "the last slot 256");

    /* the same block with its checksum wrong is only torn: skipped */
    b[TR_CRC] ^= 1;
    memset(ring + 3 * BLOCK, 0, 2 * BLOCK);
    assert_recovers_to(m, ring, 1);

    g_free(ring);
    model_free(m);
}

/*
 * A writer that restarted with an empty hot set (after a clean close)
 * and goes on numbering: the old contexts may still name an extent that
 * a new transaction put in another slot.  It is kept once, in the slot
 * written last; the recovered set is a superset of the writer's.
 */
static void test_recover_restart(void)
{
    AlModel *m = model_new(7, 0);
    g_autofree DrbdAlTransaction *tr = g_new0(DrbdAlTransaction, 1);
    static const uint32_t expect[7] = {
        103, 101, 102, NONE, 104, 105, 106,
    };
    uint32_t slots[7];
    uint64_t last;
    bool found;
    int k;

    /* transactions 0 .. 6: slot k gets extent 100 + k */
    for (k = 0; k < 7; k++) {
        m->slots[k] = 100 + k;
        tr->n_updates = 1;
        tr->updates[0] = (DrbdAlUpdate) { k, 100 + k };
        model_write(m, tr);
    }
    assert_recovers_to(m, m->ring, 6);

    /* restart: all empty; transaction 7 puts 103 in slot 0 */
    for (k = 0; k < 7; k++) {
        m->slots[k] = NONE;
    }
    m->slots[0] = 103;
    tr->updates[0] = (DrbdAlUpdate) { 0, 103 };
    model_write(m, tr);

    g_assert_cmpint(drbd_al_recover(m->ring, RING_BYTES, 7, AL_BLOCKS, slots,
                                    &last, &found, &error_abort), ==, 0);
    g_assert_true(found);
    g_assert_cmpuint(last, ==, 7);
    g_assert_cmpmem(slots, sizeof(slots), expect, sizeof(expect));

    /* seven more transactions rotate the old contexts out entirely */
    for (k = 0; k < 7; k++) {
        tr->n_updates = 0;
        model_write(m, tr);
    }
    assert_recovers_to(m, m->ring, 14);
    g_assert_cmpuint(((uint32_t *)g_ptr_array_index(m->history, 14))[3], ==,
                     NONE);
    model_free(m);
}

static void test_recover_args(void)
{
    g_autofree uint8_t *ring = g_malloc0(RING_BYTES);
    uint32_t slots[8];
    uint64_t last;
    bool found;
    Error *err = NULL;

    assert_failed_with(drbd_al_recover(ring, RING_BYTES - 1, 7, AL_BLOCKS,
                                       slots, &last, &found, &err),
                       &err, "activity log: ring is 32767 bytes (expected 8 "
                       "blocks of 4096)");
    assert_failed_with(drbd_al_recover(ring, RING_BYTES, 7, 1, slots, &last,
                                       &found, &err),
                       &err, "activity log: 1 blocks is not a valid ring");
    assert_failed_with(drbd_al_recover(ring, RING_BYTES, 0, AL_BLOCKS, slots,
                                       &last, &found, &err),
                       &err, "activity log: 0 slots do not fit a ring of 8 "
                       "blocks");
    assert_failed_with(drbd_al_recover(ring, 2 * BLOCK, 889, 2, slots, &last,
                                       &found, &err),
                       &err, "activity log: 889 slots do not fit a ring of 2 "
                       "blocks");
    /* a smaller ring works the same */
    g_assert_cmpint(drbd_al_recover(ring, 2 * BLOCK, 8, 2, slots, &last,
                                    &found, &error_abort), ==, 0);
    g_assert_false(found);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    g_test_add_func("/drbd-md/sb/init", test_sb_init);
    g_test_add_func("/drbd-md/sb/round-trip", test_sb_round_trip);
    g_test_add_func("/drbd-md/sb/reserved-ignored", test_sb_reserved_ignored);
    g_test_add_func("/drbd-md/sb/invalid", test_sb_invalid);
    g_test_add_func("/drbd-md/sb/slots", test_sb_slots);
    g_test_add_func("/drbd-md/sb/partial-uuid", test_sb_partial_uuid);
    g_test_add_func("/drbd-md/sb/mutation", test_sb_mutation);
    g_test_add_func("/drbd-md/sb/flags-str", test_flags_str);
    g_test_add_func("/drbd-md/layout/sizes", test_layout_sizes);
    g_test_add_func("/drbd-md/layout/invalid", test_layout_invalid);
    g_test_add_func("/drbd-md/layout/sb-offset", test_sb_offset);
    g_test_add_func("/drbd-md/layout/check", test_layout_check);
    g_test_add_func("/drbd-md/layout/grow", test_layout_grow);
    g_test_add_func("/drbd-md/layout/resize", test_layout_resize);
    g_test_add_func("/drbd-md/al/extents-valid", test_al_extents_valid);
    g_test_add_func("/drbd-md/al/next-context", test_al_next_context);
    g_test_add_func("/drbd-md/al/round-trip", test_al_round_trip);
    g_test_add_func("/drbd-md/al/invalid", test_al_invalid);
    g_test_add_func("/drbd-md/al/mutation", test_al_mutation);
    g_test_add_func("/drbd-md/recover/empty", test_recover_empty);
    g_test_add_func("/drbd-md/recover/model", test_recover_model);
    g_test_add_func("/drbd-md/recover/torn-newest", test_recover_torn_newest);
    g_test_add_func("/drbd-md/recover/torn-oldest", test_recover_torn_oldest);
    g_test_add_func("/drbd-md/recover/torn-middle", test_recover_torn_middle);
    g_test_add_func("/drbd-md/recover/duplicate", test_recover_duplicate);
    g_test_add_func("/drbd-md/recover/foreign", test_recover_foreign);
    g_test_add_func("/drbd-md/recover/restart", test_recover_restart);
    g_test_add_func("/drbd-md/recover/args", test_recover_args);

    return g_test_run();
}
