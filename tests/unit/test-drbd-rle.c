/*
 * drbd bitmap run-length encoding: what is encoded decodes to the same
 * bitmap, in chunks of any allowed size, and what the network may send
 * (bad fields, truncated or mangled chunks) is refused without touching
 * the destination bitmap
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/cutils.h"
#include "qapi/error.h"
#include "qemu/bswap.h"
#include "qemu/hbitmap.h"
#include "../../block/drbd/rle.h"

/*
 * The layout as rle.h documents it, written out again here so that the
 * tests check the encoder against the document.
 */
#define HDR             24
#define OFF_START       0
#define OFF_NBITS       8
#define OFF_FIRST       16
#define OFF_PAD         17

/* Bytes after the end of an encoder's buffer that must stay untouched */
#define GUARD           32
#define GUARD_BYTE      0xa5

/* Maps up to this size are also compared bit by bit */
#define SMALL_MAP       (1 << 20)

static const size_t chunk_sizes[] = { 64, 100, 4096 };

static const uint64_t small_sizes[] = {
    1, 2, 63, 64, 65, 127, 128, 129, 1000, 16384, 100003, 1 << 21,
};

typedef struct RoundTrip {
    uint64_t chunks;
    uint64_t bytes;
} RoundTrip;

/* The length of @v as a varint, counted independently of rle.c */
static uint64_t leb128_size(uint64_t v)
{
    uint64_t n = 0;

    do {
        n++;
        v /= 128;
    } while (v);
    return n;
}

static HBitmap *map_new(uint64_t size)
{
    return hbitmap_alloc(size, 0);
}

static HBitmap *map_copy(const HBitmap *hb, uint64_t size)
{
    HBitmap *empty = map_new(size);
    HBitmap *copy = map_new(size);

    hbitmap_merge(hb, empty, copy);
    hbitmap_free(empty);
    return copy;
}

/* Assert that @a and @b of @size bits have exactly the same bits set */
static void assert_maps_equal(const HBitmap *a, const HBitmap *b,
                              uint64_t size)
{
    int64_t off = 0;
    int64_t sa, ca, sb, cb;

    g_assert_cmpuint(hbitmap_count(a), ==, hbitmap_count(b));
    while (hbitmap_next_dirty_area(a, off, size, INT64_MAX, &sa, &ca)) {
        g_assert_true(hbitmap_next_dirty_area(b, off, size, INT64_MAX,
                                              &sb, &cb));
        g_assert_cmpint(sa, ==, sb);
        g_assert_cmpint(ca, ==, cb);
        off = sa + ca;
    }
    g_assert_false(hbitmap_next_dirty_area(b, off, size, INT64_MAX,
                                           &sb, &cb));

    if (size <= SMALL_MAP) {
        uint64_t i;

        for (i = 0; i < size; i++) {
            g_assert_cmpint(hbitmap_get(a, i), ==, hbitmap_get(b, i));
        }
    }
}

/*
 * Encode @src from bit @from to its end in chunks of at most @max_len
 * bytes, checking each chunk's fixed part, and decode each into @dst.
 */
static RoundTrip encode_decode(const HBitmap *src, uint64_t size,
                               size_t max_len, uint64_t from, HBitmap *dst)
{
    g_autofree uint8_t *buf = g_malloc(max_len + GUARD);
    uint64_t pos = from;
    uint64_t expected = from;
    RoundTrip rt = { 0 };

    for (;;) {
        uint64_t before = pos;
        uint64_t next = 0;
        size_t n;
        size_t i;

        memset(buf, GUARD_BYTE, max_len + GUARD);
        n = drbd_rle_encode(src, size, &pos, buf, max_len);
        for (i = max_len; i < max_len + GUARD; i++) {
            g_assert_cmphex(buf[i], ==, GUARD_BYTE);
        }
        if (n == 0) {
            g_assert_cmpuint(before, ==, size);
            g_assert_cmpuint(pos, ==, size);
            g_assert_cmphex(buf[0], ==, GUARD_BYTE);
            break;
        }

        g_assert_cmpuint(n, >, HDR);
        g_assert_cmpuint(n, <=, max_len);
        g_assert_cmpuint(pos, >, before);
        g_assert_cmpuint(pos, <=, size);
        g_assert_cmpuint(ldq_be_p(buf + OFF_START), ==, before);
        g_assert_cmpuint(ldq_be_p(buf + OFF_NBITS), ==, pos - before);
        g_assert_cmpuint(buf[OFF_FIRST], ==, hbitmap_get(src, before));
        g_assert_true(buffer_is_zero(buf + OFF_PAD, HDR - OFF_PAD));
        /* Every chunk but the last is filled up */
        if (pos < size) {
            g_assert_cmpuint(n, ==, max_len);
        }

        g_assert_cmpint(drbd_rle_decode(buf, n, expected, dst, size, &next,
                                        &error_abort), ==, 0);
        g_assert_cmpuint(next, ==, pos);
        expected = next;
        rt.chunks++;
        rt.bytes += n;
    }

    if (from == 0) {
        uint64_t nchunks = 0;

        g_assert_cmpuint(drbd_rle_encoded_size(src, size, max_len, &nchunks),
                         ==, rt.bytes);
        g_assert_cmpuint(nchunks, ==, rt.chunks);
    }
    return rt;
}

/* Encode all of @src and decode it into an empty map, which must match */
static RoundTrip round_trip(const HBitmap *src, uint64_t size,
                            size_t max_len)
{
    HBitmap *dst = map_new(size);
    RoundTrip rt = encode_decode(src, size, max_len, 0, dst);

    assert_maps_equal(src, dst, size);
    hbitmap_free(dst);
    return rt;
}

/* Set runs of random lengths (1 to 2^@max_log2 bits), alternating */
static void set_random_runs(HBitmap *hb, uint64_t size, int max_log2)
{
    uint64_t pos = 0;
    bool value = g_test_rand_bit();

    while (pos < size) {
        uint64_t len = g_test_rand_int_range(1,
                            (1 << g_test_rand_int_range(1, max_log2 + 1)) + 1);

        len = MIN(len, size - pos);
        if (value) {
            hbitmap_set(hb, pos, len);
        }
        pos += len;
        value = !value;
    }
}

/*
 * Round trips
 */

static void test_empty(void)
{
    size_t i, j;

    for (i = 0; i < ARRAY_SIZE(small_sizes); i++) {
        uint64_t size = small_sizes[i];
        HBitmap *src = map_new(size);

        for (j = 0; j < ARRAY_SIZE(chunk_sizes); j++) {
            RoundTrip rt = round_trip(src, size, chunk_sizes[j]);

            g_assert_cmpuint(rt.chunks, ==, 1);
            g_assert_cmpuint(rt.bytes, ==, HDR + leb128_size(size));
        }
        hbitmap_free(src);
    }
}

static void test_full(void)
{
    size_t i, j;

    for (i = 0; i < ARRAY_SIZE(small_sizes); i++) {
        uint64_t size = small_sizes[i];
        HBitmap *src = map_new(size);

        hbitmap_set(src, 0, size);
        for (j = 0; j < ARRAY_SIZE(chunk_sizes); j++) {
            RoundTrip rt = round_trip(src, size, chunk_sizes[j]);

            g_assert_cmpuint(rt.chunks, ==, 1);
            g_assert_cmpuint(rt.bytes, ==, HDR + leb128_size(size));
        }
        hbitmap_free(src);
    }
}

static void test_one_bit(void)
{
    size_t i, j;

    for (i = 0; i < ARRAY_SIZE(small_sizes); i++) {
        uint64_t size = small_sizes[i];
        HBitmap *at_start = map_new(size);
        HBitmap *at_end = map_new(size);
        /* a set bit and a clear run, or a single set bit */
        uint64_t bytes = HDR + 1 + (size > 1 ? leb128_size(size - 1) : 0);

        hbitmap_set(at_start, 0, 1);
        hbitmap_set(at_end, size - 1, 1);
        for (j = 0; j < ARRAY_SIZE(chunk_sizes); j++) {
            RoundTrip rt = round_trip(at_start, size, chunk_sizes[j]);

            g_assert_cmpuint(rt.chunks, ==, 1);
            g_assert_cmpuint(rt.bytes, ==, bytes);

            rt = round_trip(at_end, size, chunk_sizes[j]);
            g_assert_cmpuint(rt.chunks, ==, 1);
            g_assert_cmpuint(rt.bytes, ==, bytes);
        }
        hbitmap_free(at_start);
        hbitmap_free(at_end);
    }
}

/* The worst case: every run is one bit, every chunk is split */
static void test_alternating(void)
{
    static const uint64_t sizes[] = { 1000, 64 * 50, 10007 };
    size_t i, j;
    int phase;

    for (i = 0; i < ARRAY_SIZE(sizes); i++) {
        uint64_t size = sizes[i];

        for (phase = 0; phase < 2; phase++) {
            HBitmap *src = map_new(size);
            uint64_t bit;

            for (bit = phase; bit < size; bit += 2) {
                hbitmap_set(src, bit, 1);
            }
            g_assert_cmpuint(hbitmap_count(src), ==, (size + 1 - phase) / 2);

            for (j = 0; j < ARRAY_SIZE(chunk_sizes); j++) {
                size_t max_len = chunk_sizes[j];
                RoundTrip rt = round_trip(src, size, max_len);
                uint64_t chunks = DIV_ROUND_UP(size, max_len - HDR);

                g_assert_cmpuint(rt.chunks, ==, chunks);
                g_assert_cmpuint(rt.bytes, ==, chunks * HDR + size);
            }
            hbitmap_free(src);
        }
    }
}

/* Runs of all lengths, so that varints of 1 to 3 bytes get split */
static void test_random_runs(void)
{
    const uint64_t size = 3000017;
    int round;
    size_t j;

    for (round = 0; round < 4; round++) {
        HBitmap *src = map_new(size);

        set_random_runs(src, size, 4 + round * 5);
        for (j = 0; j < ARRAY_SIZE(chunk_sizes); j++) {
            round_trip(src, size, chunk_sizes[j]);
        }
        hbitmap_free(src);
    }
}

static void test_sparse_random(void)
{
    const uint64_t size = 10000019;
    HBitmap *src = map_new(size);
    int i;
    size_t j;

    for (i = 0; i < 300; i++) {
        hbitmap_set(src, g_test_rand_int_range(0, size), 1);
    }
    for (i = 0; i < 20; i++) {
        uint64_t start = g_test_rand_int_range(0, size - 5000);

        hbitmap_set(src, start, g_test_rand_int_range(1, 5000));
    }
    for (j = 0; j < ARRAY_SIZE(chunk_sizes); j++) {
        round_trip(src, size, chunk_sizes[j]);
    }
    hbitmap_free(src);
}

static void test_dense_random(void)
{
    const uint64_t size = 200003;
    HBitmap *src = map_new(size);
    uint64_t bit;
    size_t j;

    for (bit = 0; bit < size; bit++) {
        if (g_test_rand_bit()) {
            hbitmap_set(src, bit, 1);
        }
    }
    g_assert_cmpuint(hbitmap_count(src), >, size / 3);
    g_assert_cmpuint(hbitmap_count(src), <, size * 2 / 3);
    for (j = 0; j < ARRAY_SIZE(chunk_sizes); j++) {
        round_trip(src, size, chunk_sizes[j]);
    }
    hbitmap_free(src);
}

/* The last word of the map is partly used */
static void test_unaligned_size(void)
{
    static const uint64_t sizes[] = { 65, 130, 1000001 };
    size_t i, j;

    for (i = 0; i < ARRAY_SIZE(sizes); i++) {
        uint64_t size = sizes[i];
        HBitmap *tail = map_new(size);
        HBitmap *all_but_tail = map_new(size);

        hbitmap_set(tail, size - 3, 3);
        hbitmap_set(all_but_tail, 0, size - 1);
        for (j = 0; j < ARRAY_SIZE(chunk_sizes); j++) {
            RoundTrip rt = round_trip(tail, size, chunk_sizes[j]);

            g_assert_cmpuint(rt.bytes, ==, HDR + leb128_size(size - 3) + 1);
            rt = round_trip(all_but_tail, size, chunk_sizes[j]);
            g_assert_cmpuint(rt.bytes, ==, HDR + leb128_size(size - 1) + 1);
        }
        hbitmap_free(tail);
        hbitmap_free(all_but_tail);
    }
}

/*
 * A sparse map of 2^30 bits (what a 4 TiB disk has): two of them cost
 * 2 * 128 MiB of address space, of which only the touched pages are
 * allocated.  Encoding must skip the empty parts without walking them.
 */
static void test_large_sparse(void)
{
    const uint64_t size = (UINT64_C(1) << 30) + 13;
    HBitmap *src = map_new(size);
    int i;
    size_t j;

    hbitmap_set(src, 0, 1);
    hbitmap_set(src, (UINT64_C(1) << 29) - 100, 200);
    hbitmap_set(src, size - 1, 1);
    for (i = 0; i < 1000; i++) {
        uint64_t start = (uint64_t)(uint32_t)g_test_rand_int() * 4;

        hbitmap_set(src, start % (size - 100), g_test_rand_int_range(1, 100));
    }
    for (j = 0; j < ARRAY_SIZE(chunk_sizes); j++) {
        RoundTrip rt = round_trip(src, size, chunk_sizes[j]);

        /* at most 2 runs per range set above, at most 5 bytes each */
        g_assert_cmpuint(rt.bytes, <=, 2 * 1003 * 5 + rt.chunks * HDR);
    }
    hbitmap_free(src);
}

/*
 * Beyond 2^32 bits (16 TiB of disk), with a run longer than 2^32 bits:
 * nothing may be truncated to 32 bits.  Only one map exists at a time
 * (each is 1 GiB of address space, nearly all of it never touched): the
 * decoded map is checked against the ranges that were set.
 */
static void test_huge_sparse(void)
{
    const uint64_t size = (UINT64_C(1) << 33) + 77;
    const uint64_t ranges[][2] = {
        { 0, 1 },
        { (UINT64_C(1) << 32) + 10, 3 },          /* after 2^32 + 9 zeroes */
        { (UINT64_C(1) << 32) + (1 << 20), 197 },
        { (UINT64_C(1) << 33) - 5, 1 },
        { size - 1, 1 },
    };
    g_autoptr(GPtrArray) chunks = g_ptr_array_new_with_free_func(g_free);
    HBitmap *hb = map_new(size);
    uint64_t pos = 0;
    uint64_t expected = 0;
    uint64_t count = 0;
    uint64_t bytes = 0;
    int64_t off = 0;
    int64_t start, len;
    size_t i;

    for (i = 0; i < ARRAY_SIZE(ranges); i++) {
        hbitmap_set(hb, ranges[i][0], ranges[i][1]);
        count += ranges[i][1];
    }
    for (;;) {
        uint8_t *buf = g_malloc(64);
        size_t n = drbd_rle_encode(hb, size, &pos, buf, 64);

        if (!n) {
            g_free(buf);
            break;
        }
        g_assert_cmpuint(n, <=, 60);
        stl_be_p(buf + 60, n);      /* not part of the chunk: its length */
        g_ptr_array_add(chunks, buf);
        bytes += n;
    }
    /* 9 runs, of 1 to 5 bytes; all fit in one chunk of 64 */
    g_assert_cmpuint(chunks->len, ==, 1);
    g_assert_cmpuint(bytes, ==, HDR + 1 + 5 + 1 + 3 + 2 + 5 + 1 + 1 + 1);
    g_assert_cmpuint(drbd_rle_encoded_size(hb, size, 4096, NULL), ==, bytes);
    hbitmap_free(hb);

    hb = map_new(size);
    for (i = 0; i < chunks->len; i++) {
        const uint8_t *buf = g_ptr_array_index(chunks, i);

        g_assert_cmpint(drbd_rle_decode(buf, ldl_be_p(buf + 60), expected,
                                        hb, size, &expected, &error_abort),
                        ==, 0);
    }
    g_assert_cmpuint(expected, ==, size);
    g_assert_cmpuint(hbitmap_count(hb), ==, count);
    for (i = 0; i < ARRAY_SIZE(ranges); i++) {
        g_assert_true(hbitmap_next_dirty_area(hb, off, size, INT64_MAX,
                                              &start, &len));
        g_assert_cmpint(start, ==, ranges[i][0]);
        g_assert_cmpint(len, ==, ranges[i][1]);
        off = start + len;
    }
    hbitmap_free(hb);
}

/* Decoding ORs into what the destination already has */
static void test_or(void)
{
    const uint64_t size = 50021;
    size_t j;

    for (j = 0; j < ARRAY_SIZE(chunk_sizes); j++) {
        HBitmap *src = map_new(size);
        HBitmap *dst = map_new(size);
        HBitmap *expected = map_new(size);

        set_random_runs(src, size, 8);
        set_random_runs(dst, size, 8);
        hbitmap_merge(src, dst, expected);
        g_assert_cmpuint(hbitmap_count(expected), >, hbitmap_count(src));
        g_assert_cmpuint(hbitmap_count(expected), >, hbitmap_count(dst));

        encode_decode(src, size, chunk_sizes[j], 0, dst);
        assert_maps_equal(expected, dst, size);

        hbitmap_free(src);
        hbitmap_free(dst);
        hbitmap_free(expected);
    }
}

/* A sequence may start anywhere; the chunks then describe only the rest */
static void test_from_middle(void)
{
    const uint64_t size = 30011;
    const uint64_t from = 777;
    size_t j;

    for (j = 0; j < ARRAY_SIZE(chunk_sizes); j++) {
        HBitmap *src = map_new(size);
        HBitmap *dst = map_new(size);
        HBitmap *expected;

        set_random_runs(src, size, 6);
        hbitmap_set(src, from - 10, 20);
        expected = map_copy(src, size);
        hbitmap_reset(expected, 0, from);

        encode_decode(src, size, chunk_sizes[j], from, dst);
        assert_maps_equal(expected, dst, size);

        hbitmap_free(src);
        hbitmap_free(dst);
        hbitmap_free(expected);
    }
}

/*
 * Exact bytes
 */

/* Encode @hb into chunks of @max_len and compare with @expected */
static void check_encoding(const HBitmap *hb, uint64_t size, size_t max_len,
                           const uint8_t *const *expected,
                           const size_t *expected_len, size_t nchunks)
{
    g_autofree uint8_t *buf = g_malloc(max_len);
    HBitmap *dst = map_new(size);
    uint64_t pos = 0;
    uint64_t next = 0;
    size_t i;

    for (i = 0; i < nchunks; i++) {
        size_t n = drbd_rle_encode(hb, size, &pos, buf, max_len);

        g_assert_cmpmem(buf, n, expected[i], expected_len[i]);
        /* the hand-written bytes decode to the map */
        g_assert_cmpint(drbd_rle_decode(expected[i], expected_len[i], next,
                                        dst, size, &next, &error_abort),
                        ==, 0);
        g_assert_cmpuint(next, ==, pos);
    }
    g_assert_cmpuint(pos, ==, size);
    g_assert_cmpuint(drbd_rle_encode(hb, size, &pos, buf, max_len), ==, 0);
    assert_maps_equal(hb, dst, size);
    hbitmap_free(dst);
}

/* The example in rle.h */
static void test_bytes_example(void)
{
    static const uint8_t chunk[] = {
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xc8,
        0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x03, 0x07, 0x01, 0x8b, 0x01, 0x32,
    };
    const uint8_t *const chunks[] = { chunk };
    const size_t lens[] = { sizeof(chunk) };
    HBitmap *hb = map_new(200);
    size_t j;

    hbitmap_set(hb, 0, 3);
    hbitmap_set(hb, 10, 1);
    hbitmap_set(hb, 150, 50);
    for (j = 0; j < ARRAY_SIZE(chunk_sizes); j++) {
        check_encoding(hb, 200, chunk_sizes[j], chunks, lens, 1);
    }
    hbitmap_free(hb);
}

/*
 * 39 one-bit runs fill 39 of the 40 bytes that a chunk of 64 has for
 * runs; the run of 1000 zeroes that follows needs 2, so 127 of it go in
 * the last byte and the next chunk continues with the other 873.
 */
static void test_bytes_split(void)
{
    uint8_t first[64] = {
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xa6,     /* 166 */
        0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    };
    static const uint8_t second[] = {
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xa6,     /* 166 */
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x69,     /* 873 */
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0xe9, 0x06,
    };
    uint8_t whole[65] = {
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x0f,     /* 1039 */
        0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    };
    const uint8_t *const split[] = { first, second };
    const size_t split_lens[] = { sizeof(first), sizeof(second) };
    const uint8_t *const one[] = { whole };
    const size_t one_lens[] = { sizeof(whole) };
    HBitmap *hb = map_new(1039);
    int i;

    for (i = 0; i < 39; i++) {
        first[HDR + i] = 0x01;
        whole[HDR + i] = 0x01;
        if (i % 2 == 0) {
            hbitmap_set(hb, i, 1);
        }
    }
    first[63] = 0x7f;
    whole[63] = 0xe8;       /* 1000 */
    whole[64] = 0x07;

    check_encoding(hb, 1039, 64, split, split_lens, 2);
    check_encoding(hb, 1039, 100, one, one_lens, 1);
    hbitmap_free(hb);
}

/* The same, splitting a 3-byte varint into 2 bytes and 3 bytes */
static void test_bytes_split_long(void)
{
    const uint64_t size = 38 + 32768;
    uint8_t first[64] = {
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x40, 0x25,     /* 16421 */
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    };
    static const uint8_t second[] = {
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x40, 0x25,     /* 16421 */
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x40, 0x01,     /* 16385 */
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x81, 0x80, 0x01,
    };
    const uint8_t *const split[] = { first, second };
    const size_t split_lens[] = { sizeof(first), sizeof(second) };
    HBitmap *hb = map_new(size);
    int i;

    /* runs of one bit from 0 (clear) to 37 (set), then 32768 clear */
    for (i = 0; i < 38; i++) {
        first[HDR + i] = 0x01;
        if (i % 2) {
            hbitmap_set(hb, i, 1);
        }
    }
    first[62] = 0xff;       /* 16383 */
    first[63] = 0x7f;

    check_encoding(hb, size, 64, split, split_lens, 2);
    hbitmap_free(hb);
}

/* Run lengths at the edges of varint sizes */
static void test_bytes_varint(void)
{
    static const struct {
        uint64_t run;
        uint8_t bytes[4];
        size_t len;
    } cases[] = {
        { 1, { 0x01 }, 1 },
        { 127, { 0x7f }, 1 },
        { 128, { 0x80, 0x01 }, 2 },
        { 200, { 0xc8, 0x01 }, 2 },
        { 16383, { 0xff, 0x7f }, 2 },
        { 16384, { 0x80, 0x80, 0x01 }, 3 },
        { 2097151, { 0xff, 0xff, 0x7f }, 3 },
        { 2097152, { 0x80, 0x80, 0x80, 0x01 }, 4 },
    };
    size_t i;

    for (i = 0; i < ARRAY_SIZE(cases); i++) {
        /* @run set bits and one clear one */
        uint64_t size = cases[i].run + 1;
        HBitmap *hb = map_new(size);
        uint8_t chunk[HDR + 5] = { 0 };
        const uint8_t *const chunks[] = { chunk };
        const size_t lens[] = { HDR + cases[i].len + 1 };

        hbitmap_set(hb, 0, cases[i].run);
        stq_be_p(chunk + OFF_NBITS, size);
        chunk[OFF_FIRST] = 1;
        memcpy(chunk + HDR, cases[i].bytes, cases[i].len);
        chunk[HDR + cases[i].len] = 0x01;

        check_encoding(hb, size, 64, chunks, lens, 1);
        hbitmap_free(hb);
    }
}

/*
 * Malformed chunks
 */

#define BAD_SIZE 4000

/* A destination with bits of its own, and a copy to compare it with */
static HBitmap *bad_dst(void)
{
    HBitmap *hb = map_new(BAD_SIZE);

    hbitmap_set(hb, 500, 10);
    hbitmap_set(hb, BAD_SIZE - 10, 10);
    return hb;
}

/*
 * A chunk of @nbits from @start whose first value is @first, then the
 * @nruns bytes of @runs
 */
static size_t make_chunk(uint8_t *buf, uint64_t start, uint64_t nbits,
                         uint8_t first, const uint8_t *runs, size_t nruns)
{
    memset(buf, 0, HDR);
    stq_be_p(buf + OFF_START, start);
    stq_be_p(buf + OFF_NBITS, nbits);
    buf[OFF_FIRST] = first;
    if (nruns) {
        /* runs may be NULL then: memcpy() must not be given NULL */
        memcpy(buf + HDR, runs, nruns);
    }
    return HDR + nruns;
}

/*
 * Decode @len bytes of @buf into a destination with bits of its own and
 * check that it fails with @msg (if not NULL), leaving the destination
 * and *next alone
 */
static void check_bad(const uint8_t *buf, size_t len, uint64_t expected,
                      const char *msg)
{
    HBitmap *dst = bad_dst();
    HBitmap *ref = bad_dst();
    uint64_t next = 0xdeadbeef;
    Error *err = NULL;
    int ret;

    ret = drbd_rle_decode(buf, len, expected, dst, BAD_SIZE, &next, &err);
    g_assert_cmpint(ret, ==, -EINVAL);
    g_assert_nonnull(err);
    if (msg) {
        g_assert_cmpstr(error_get_pretty(err), ==, msg);
    } else {
        g_assert_cmpstr(error_get_pretty(err), !=, "");
    }
    error_free(err);
    g_assert_cmpuint(next, ==, 0xdeadbeef);
    assert_maps_equal(ref, dst, BAD_SIZE);
    hbitmap_free(dst);
    hbitmap_free(ref);
}

/* Runs of 5 set, 5 clear, 5 set, 5 clear: 20 bits that are all valid */
static const uint8_t good_runs[] = { 0x05, 0x05, 0x05, 0x05 };

static void test_good_base(void)
{
    uint8_t buf[64];
    size_t len = make_chunk(buf, 0, 20, 1, good_runs, sizeof(good_runs));
    HBitmap *dst = bad_dst();
    HBitmap *expected = bad_dst();
    uint64_t next = 0;

    hbitmap_set(expected, 0, 5);
    hbitmap_set(expected, 10, 5);
    g_assert_cmpint(drbd_rle_decode(buf, len, 0, dst, BAD_SIZE, &next,
                                    &error_abort), ==, 0);
    g_assert_cmpuint(next, ==, 20);
    assert_maps_equal(expected, dst, BAD_SIZE);

    /* the last bits of the map, and the whole map */
    len = make_chunk(buf, BAD_SIZE - 20, 20, 0, good_runs, sizeof(good_runs));
    g_assert_cmpint(drbd_rle_decode(buf, len, BAD_SIZE - 20, dst, BAD_SIZE,
                                    &next, &error_abort), ==, 0);
    g_assert_cmpuint(next, ==, BAD_SIZE);
    hbitmap_set(expected, BAD_SIZE - 15, 5);
    assert_maps_equal(expected, dst, BAD_SIZE);

    len = make_chunk(buf, 0, BAD_SIZE, 1, (const uint8_t[]) { 0xa0, 0x1f },
                     2);
    g_assert_cmpint(drbd_rle_decode(buf, len, 0, dst, BAD_SIZE, &next,
                                    &error_abort), ==, 0);
    g_assert_cmpuint(next, ==, BAD_SIZE);
    g_assert_cmpuint(hbitmap_count(dst), ==, BAD_SIZE);

    hbitmap_free(dst);
    hbitmap_free(expected);
}

static void test_bad_short(void)
{
    uint8_t buf[64];
    size_t len = make_chunk(buf, 0, 20, 1, good_runs, sizeof(good_runs));
    size_t i;

    for (i = 0; i < HDR; i++) {
        g_autofree char *msg = g_strdup_printf(
            "bitmap chunk: %zu bytes is shorter than its 24-byte header", i);

        check_bad(buf, i, 0, msg);
    }
    check_bad(buf, HDR, 0, "bitmap chunk: runs sum to 0 of its 20 bits");
    for (i = HDR + 1; i < len; i++) {
        g_autofree char *msg = g_strdup_printf(
            "bitmap chunk: runs sum to %zu of its 20 bits", (i - HDR) * 5);

        check_bad(buf, i, 0, msg);
    }
}

static void test_bad_header(void)
{
    uint8_t buf[64];
    size_t len;
    size_t i;

    for (i = OFF_PAD; i < HDR; i++) {
        g_autofree char *msg = g_strdup_printf(
            "bitmap chunk: padding byte %zu is 0x80, not zero", i);

        len = make_chunk(buf, 0, 20, 1, good_runs, sizeof(good_runs));
        buf[i] = 0x80;
        check_bad(buf, len, 0, msg);
    }

    len = make_chunk(buf, 0, 20, 2, good_runs, sizeof(good_runs));
    check_bad(buf, len, 0, "bitmap chunk: first run value is 2, not 0 or 1");
    buf[OFF_FIRST] = 0xff;
    check_bad(buf, len, 0,
              "bitmap chunk: first run value is 255, not 0 or 1");

    len = make_chunk(buf, 20, 20, 1, good_runs, sizeof(good_runs));
    check_bad(buf, len, 0,
              "bitmap chunk: starts at bit 20, expected bit 0");
    len = make_chunk(buf, 0, 20, 1, good_runs, sizeof(good_runs));
    check_bad(buf, len, 20,
              "bitmap chunk: starts at bit 0, expected bit 20");
    /* a start that differs only in the upper 32 bits */
    len = make_chunk(buf, UINT64_C(1) << 32, 20, 1, good_runs,
                     sizeof(good_runs));
    check_bad(buf, len, 0,
              "bitmap chunk: starts at bit 4294967296, expected bit 0");

    len = make_chunk(buf, 0, 0, 1, NULL, 0);
    check_bad(buf, len, 0, "bitmap chunk: describes no bits");
    len = make_chunk(buf, 0, 0, 1, good_runs, sizeof(good_runs));
    check_bad(buf, len, 0, "bitmap chunk: describes no bits");
}

static void test_bad_range(void)
{
    uint8_t buf[64];
    size_t len;

    /* 4001 bits: 4000 set, 1 clear */
    len = make_chunk(buf, 0, BAD_SIZE + 1, 1,
                     (const uint8_t[]) { 0xa0, 0x1f, 0x01 }, 3);
    check_bad(buf, len, 0, "bitmap chunk: 4001 bits from bit 0 reach beyond "
              "the bitmap's 4000 bits");

    len = make_chunk(buf, BAD_SIZE, 1, 1, (const uint8_t[]) { 0x01 }, 1);
    check_bad(buf, len, BAD_SIZE, "bitmap chunk: 1 bits from bit 4000 reach "
              "beyond the bitmap's 4000 bits");

    len = make_chunk(buf, BAD_SIZE - 19, 20, 1, good_runs, sizeof(good_runs));
    check_bad(buf, len, BAD_SIZE - 19, "bitmap chunk: 20 bits from bit 3981 "
              "reach beyond the bitmap's 4000 bits");

    /* nbits that would wrap start + nbits around to a small number */
    len = make_chunk(buf, 20, UINT64_MAX - 9, 1, good_runs,
                     sizeof(good_runs));
    check_bad(buf, len, 20, "bitmap chunk: 18446744073709551606 bits from "
              "bit 20 overflow");
    len = make_chunk(buf, UINT64_MAX, 1, 1, (const uint8_t[]) { 0x01 }, 1);
    check_bad(buf, len, UINT64_MAX, "bitmap chunk: 1 bits from bit "
              "18446744073709551615 overflow");
    /* up to 2^64 exactly overflows; up to 2^64 - 1 is only beyond */
    len = make_chunk(buf, UINT64_MAX - 19, 20, 1, good_runs,
                     sizeof(good_runs));
    check_bad(buf, len, UINT64_MAX - 19, "bitmap chunk: 20 bits from bit "
              "18446744073709551596 overflow");
    len = make_chunk(buf, UINT64_MAX - 20, 20, 1, good_runs,
                     sizeof(good_runs));
    check_bad(buf, len, UINT64_MAX - 20, "bitmap chunk: 20 bits from bit "
              "18446744073709551595 reach beyond the bitmap's 4000 bits");
}

static void test_bad_runs(void)
{
    static const struct {
        uint8_t runs[16];
        size_t len;
        const char *msg;
    } cases[] = {
        { { 0x05, 0x00, 0x05, 0x05, 0x05 }, 5,
          "bitmap chunk: run length at byte 25 is zero" },
        { { 0x05, 0x05, 0x05, 0x05, 0x00 }, 5,
          "bitmap chunk: trailing data after the last run (1 bytes)" },
        { { 0x05, 0x05, 0x05, 0x05, 0x01, 0x01 }, 6,
          "bitmap chunk: trailing data after the last run (2 bytes)" },
        /* overlong: 5 as 2 and 3 bytes, 0 as 2 bytes */
        { { 0x05, 0x85, 0x00, 0x05, 0x05 }, 5,
          "bitmap chunk: run length at byte 25 has an overlong encoding" },
        { { 0x05, 0x85, 0x80, 0x00, 0x05, 0x05 }, 6,
          "bitmap chunk: run length at byte 25 has an overlong encoding" },
        { { 0x05, 0x80, 0x00, 0x05, 0x05 }, 5,
          "bitmap chunk: run length at byte 25 has an overlong encoding" },
        /* truncated */
        { { 0x05, 0x05, 0x05, 0x85 }, 4,
          "bitmap chunk: run length at byte 27 is truncated" },
        { { 0x05, 0x05, 0x05, 0x80, 0x80 }, 5,
          "bitmap chunk: run length at byte 27 is truncated" },
        /* beyond 64 bits: 2^64, and 11 bytes */
        { { 0x05, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
            0x02 }, 11,
          "bitmap chunk: run length at byte 25 does not fit in 64 bits" },
        { { 0x05, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            0x7f }, 11,
          "bitmap chunk: run length at byte 25 does not fit in 64 bits" },
        { { 0x05, 0x85, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
            0x80, 0x00 }, 12,
          "bitmap chunk: run length at byte 25 is longer than 10 bytes" },
        { { 0x05, 0x85, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
            0x81 }, 11,
          "bitmap chunk: run length at byte 25 is longer than 10 bytes" },
        /* 10 bytes of 2^64 - 1 and of 2^63 are valid varints, too long */
        { { 0x05, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
            0x01 }, 11,
          "bitmap chunk: runs sum to more than its 20 bits" },
        { { 0x05, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
            0x01 }, 11,
          "bitmap chunk: runs sum to more than its 20 bits" },
        /* sums */
        { { 0x05, 0x05, 0x05, 0x06 }, 4,
          "bitmap chunk: runs sum to more than its 20 bits" },
        { { 0x15 }, 1,
          "bitmap chunk: runs sum to more than its 20 bits" },
        { { 0x05, 0x05, 0x05 }, 3,
          "bitmap chunk: runs sum to 15 of its 20 bits" },
        { { 0x05, 0x05, 0x05, 0x04 }, 4,
          "bitmap chunk: runs sum to 19 of its 20 bits" },
    };
    uint8_t buf[64];
    size_t i;

    for (i = 0; i < ARRAY_SIZE(cases); i++) {
        size_t len = make_chunk(buf, 0, 20, 1, cases[i].runs, cases[i].len);

        check_bad(buf, len, 0, cases[i].msg);
    }

}

/*
 * Encoded chunks of a map with mostly short runs (1-byte varints) and
 * some of 128 bits or more (2-byte varints)
 */
static GPtrArray *some_chunks(uint64_t size, size_t max_len)
{
    GPtrArray *chunks = g_ptr_array_new_with_free_func(
        (GDestroyNotify)g_byte_array_unref);
    HBitmap *hb = map_new(size);
    uint64_t pos = 0;
    uint8_t *buf = g_malloc(max_len);
    bool value = g_test_rand_bit();
    size_t n;

    while (pos < size) {
        uint64_t len;

        if (g_test_rand_int_range(0, 8)) {
            len = g_test_rand_int_range(1, 5);
        } else {
            len = g_test_rand_int_range(128, 160);
        }
        len = MIN(len, size - pos);
        if (value) {
            hbitmap_set(hb, pos, len);
        }
        pos += len;
        value = !value;
    }
    pos = 0;
    while ((n = drbd_rle_encode(hb, size, &pos, buf, max_len)) != 0) {
        g_ptr_array_add(chunks, g_byte_array_append(g_byte_array_new(),
                                                    buf, n));
    }
    g_free(buf);
    hbitmap_free(hb);
    return chunks;
}

/* Every proper prefix of every chunk fails; so does any longer chunk */
static void test_truncation(void)
{
    g_autoptr(GPtrArray) chunks = some_chunks(BAD_SIZE, 64);
    uint64_t start = 0;
    size_t i, len;

    g_assert_cmpuint(chunks->len, >, 3);
    for (i = 0; i < chunks->len; i++) {
        GByteArray *c = g_ptr_array_index(chunks, i);
        g_autofree uint8_t *longer = g_malloc(c->len + 1);
        HBitmap *dst = bad_dst();
        uint64_t next;

        for (len = 0; len < c->len; len++) {
            check_bad(c->data, len, start, NULL);
        }
        memcpy(longer, c->data, c->len);
        longer[c->len] = 0x01;
        check_bad(longer, c->len + 1, start, "bitmap chunk: trailing data "
                  "after the last run (1 bytes)");

        g_assert_cmpint(drbd_rle_decode(c->data, c->len, start, dst, BAD_SIZE,
                                        &next, &error_abort), ==, 0);
        start = next;
        hbitmap_free(dst);
    }
    g_assert_cmpuint(start, ==, BAD_SIZE);
}

/*
 * Mangled chunks either fail and leave the map alone, or succeed and
 * change it only within the bits they describe
 */
static void test_mutation(void)
{
    unsigned accepted = 0, rejected = 0;
    int round;

    for (round = 0; round < 20; round++) {
        g_autoptr(GPtrArray) chunks = some_chunks(BAD_SIZE, 100);
        uint64_t start = 0;
        size_t i;
        int m;

        for (i = 0; i < chunks->len; i++) {
            GByteArray *c = g_ptr_array_index(chunks, i);
            uint64_t next = 0;

            for (m = 0; m < 50; m++) {
                g_autofree uint8_t *buf = g_memdup2(c->data, c->len);
                HBitmap *dst = bad_dst();
                HBitmap *ref = bad_dst();
                int flips = g_test_rand_int_range(1, 4);
                Error *err = NULL;
                uint64_t got = 0xdeadbeef;
                int f;

                for (f = 0; f < flips; f++) {
                    buf[g_test_rand_int_range(0, c->len)] ^=
                        1 << g_test_rand_int_range(0, 8);
                }
                if (drbd_rle_decode(buf, c->len, start, dst, BAD_SIZE, &got,
                                    &err) == 0) {
                    uint64_t nbits = ldq_be_p(buf + OFF_NBITS);

                    g_assert_null(err);
                    g_assert_cmpuint(ldq_be_p(buf + OFF_START), ==, start);
                    g_assert_cmpuint(nbits, >, 0);
                    g_assert_cmpuint(got, ==, start + nbits);
                    g_assert_cmpuint(got, <=, BAD_SIZE);
                    hbitmap_reset(dst, start, nbits);
                    hbitmap_reset(ref, start, nbits);
                    accepted++;
                } else {
                    g_assert_nonnull(err);
                    error_free(err);
                    g_assert_cmpuint(got, ==, 0xdeadbeef);
                    rejected++;
                }
                assert_maps_equal(ref, dst, BAD_SIZE);
                hbitmap_free(dst);
                hbitmap_free(ref);
            }

            {
                HBitmap *dst = bad_dst();

                g_assert_cmpint(drbd_rle_decode(c->data, c->len, start, dst,
                                                BAD_SIZE, &next,
                                                &error_abort), ==, 0);
                hbitmap_free(dst);
            }
            start = next;
        }
    }

    g_test_message("%u mangled chunks accepted, %u refused",
                   accepted, rejected);
    g_assert_cmpuint(accepted, >, 0);
    g_assert_cmpuint(rejected, >, 0);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);

    g_test_add_func("/drbd-rle/round-trip/empty", test_empty);
    g_test_add_func("/drbd-rle/round-trip/full", test_full);
    g_test_add_func("/drbd-rle/round-trip/one-bit", test_one_bit);
    g_test_add_func("/drbd-rle/round-trip/alternating", test_alternating);
    g_test_add_func("/drbd-rle/round-trip/random-runs", test_random_runs);
    g_test_add_func("/drbd-rle/round-trip/sparse-random", test_sparse_random);
    g_test_add_func("/drbd-rle/round-trip/dense-random", test_dense_random);
    g_test_add_func("/drbd-rle/round-trip/unaligned-size",
                    test_unaligned_size);
    g_test_add_func("/drbd-rle/round-trip/large-sparse", test_large_sparse);
    g_test_add_func("/drbd-rle/round-trip/huge-sparse", test_huge_sparse);
    g_test_add_func("/drbd-rle/round-trip/or", test_or);
    g_test_add_func("/drbd-rle/round-trip/from-middle", test_from_middle);
    g_test_add_func("/drbd-rle/bytes/example", test_bytes_example);
    g_test_add_func("/drbd-rle/bytes/split", test_bytes_split);
    g_test_add_func("/drbd-rle/bytes/split-long", test_bytes_split_long);
    g_test_add_func("/drbd-rle/bytes/varint", test_bytes_varint);
    g_test_add_func("/drbd-rle/decode/good", test_good_base);
    g_test_add_func("/drbd-rle/decode/short", test_bad_short);
    g_test_add_func("/drbd-rle/decode/header", test_bad_header);
    g_test_add_func("/drbd-rle/decode/range", test_bad_range);
    g_test_add_func("/drbd-rle/decode/runs", test_bad_runs);
    g_test_add_func("/drbd-rle/decode/truncation", test_truncation);
    g_test_add_func("/drbd-rle/decode/mutation", test_mutation);

    return g_test_run();
}
