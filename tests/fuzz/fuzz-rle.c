/*
 * Fuzz target: the run-length decoder of the out-of-sync bitmap
 * (block/drbd/rle.c)
 *
 * Input:
 *
 *   3 bytes    the bitmap's size in bits: 1 + (value % 2^20)
 *   1 byte     the chunk size of the re-encoding: 64 + 16 * value
 *   then       chunks, each a 2-byte big-endian length and that many
 *              bytes, decoded one after the other into the bitmap as a
 *              receiver does (the first at bit 0, each next where the
 *              previous ended)
 *
 * Checked: a refused chunk leaves the bitmap alone; an accepted one
 * stays inside it, and encodes back to the very same bytes (the format
 * has one way to say each run); and whatever bitmap the chunks built
 * encodes, in chunks of the chosen size, to chunks that decode to the
 * same bitmap, of the size drbd_rle_encoded_size() announces.
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "qemu/bswap.h"
#include "qemu/hbitmap.h"
#include "../../block/drbd/rle.h"
#include "fuzz.h"

#define MAX_BITS    (1 << 20)

/* The bitmap's bits, serialized, for comparison */
static uint8_t *serialize(const HBitmap *hb, uint64_t size, size_t *len)
{
    uint64_t bytes = hbitmap_serialization_size(hb, 0, size);
    uint8_t *buf = g_malloc0(bytes);

    hbitmap_serialize_part(hb, buf, 0, size);
    *len = bytes;
    return buf;
}

/*
 * The chunk @buf (@len bytes) was accepted at @start and ended at
 * @next: on its own, in a bitmap that ends where it does, it encodes
 * back to itself
 */
static void check_chunk_round_trip(const uint8_t *buf, size_t len,
                                   uint64_t start, uint64_t next)
{
    HBitmap *hb = hbitmap_alloc(next, 0);
    size_t max_len = MAX(len, DRBD_RLE_MIN_CHUNK);
    g_autofree uint8_t *out = g_malloc(max_len);
    uint64_t end, pos = start;
    size_t n;

    if (drbd_rle_decode(buf, len, start, hb, next, &end, &error_abort) < 0) {
        abort();
    }
    assert(end == next);
    n = drbd_rle_encode(hb, next, &pos, out, max_len);
    assert(n == len);
    assert(pos == next);
    assert(memcmp(out, buf, len) == 0);
    hbitmap_free(hb);
}

/* @hb, encoded in chunks of @max_len bytes, decodes to the same bitmap */
static void check_bitmap_round_trip(const HBitmap *hb, uint64_t size,
                                    size_t max_len)
{
    HBitmap *copy = hbitmap_alloc(size, 0);
    g_autofree uint8_t *chunk = g_malloc(max_len);
    g_autofree uint8_t *a = NULL, *b = NULL;
    uint64_t pos = 0, nchunks = 0, total = 0, expected_chunks, expected;
    size_t alen, blen, n;

    expected = drbd_rle_encoded_size(hb, size, max_len, &expected_chunks);
    while ((n = drbd_rle_encode(hb, size, &pos, chunk, max_len)) != 0) {
        uint64_t start = ldq_be_p(chunk);
        uint64_t next;

        assert(n > DRBD_RLE_HEADER_SIZE && n <= max_len);
        if (drbd_rle_decode(chunk, n, start, copy, size, &next,
                            &error_abort) < 0) {
            abort();
        }
        assert(next == pos);
        total += n;
        nchunks++;
    }
    assert(pos == size);
    assert(total == expected && nchunks == expected_chunks);

    a = serialize(hb, size, &alen);
    b = serialize(copy, size, &blen);
    assert(alen == blen && memcmp(a, b, alen) == 0);
    hbitmap_free(copy);
}

DRBD_FUZZ_TARGET(rle)
{
    FuzzInput in = { data, size };
    const uint8_t *p = fuzz_take(&in, 4);
    uint64_t bits, expected = 0;
    size_t max_len;
    bool any = false;
    HBitmap *hb;

    if (!p) {
        return 0;
    }
    bits = 1 + ((p[0] << 16 | p[1] << 8 | p[2]) % MAX_BITS);
    max_len = DRBD_RLE_MIN_CHUNK + 16 * p[3];
    hb = hbitmap_alloc(bits, 0);

    for (;;) {
        g_autofree uint8_t *chunk = NULL;
        const uint8_t *lenp = fuzz_take(&in, 2);
        uint64_t before = hbitmap_count(hb);
        Error *err = NULL;
        uint64_t next;
        size_t len;

        if (!lenp) {
            break;
        }
        len = lduw_be_p(lenp);
        if (!fuzz_take_copy(&in, len, &chunk)) {
            break;
        }
        if (drbd_rle_decode(chunk, len, expected, hb, bits, &next,
                            &err) < 0) {
            assert(err && *error_get_pretty(err));
            error_free(err);
            assert(hbitmap_count(hb) == before);
            /* a receiver drops the connection */
            break;
        }
        assert(!err);
        assert(next > expected && next <= bits);
        assert(hbitmap_count(hb) - before <= next - expected);
        check_chunk_round_trip(chunk, len, expected, next);
        expected = next;
        any = true;
    }

    if (any) {
        check_bitmap_round_trip(hb, bits, max_len);
    }
    hbitmap_free(hb);
    return 0;
}
