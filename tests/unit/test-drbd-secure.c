/*
 * drbd peer security: the challenge-response answers and the data
 * digests, checked against the layout docs/interop/drbd-protocol.rst
 * gives and against known vectors
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "crypto/hmac.h"
#include "crypto/init.h"
#include "qapi/error.h"
#include "qemu/bswap.h"
#include "qemu/crc32c.h"
#include "../../block/drbd/drbd-int.h"

static const uint8_t key[] = "a shared secret";

static void fill_nonce(uint8_t *nonce, uint8_t seed)
{
    for (int i = 0; i < DRBD_AUTH_NONCE_SIZE; i++) {
        nonce[i] = seed + i * 7;
    }
}

/* The answer computed here from the document, not from secure.c */
static void documented_answer(QCryptoHashAlgo alg, const char *side,
                              const uint8_t *their, const uint8_t *ours,
                              uint8_t **out, size_t *len)
{
    g_autoptr(GByteArray) msg = g_byte_array_new();
    g_autoptr(QCryptoHmac) hmac = qcrypto_hmac_new(alg, key, sizeof(key) - 1,
                                                   &error_abort);

    /* "qemu-drbd auth v1" and the side, each with its NUL */
    g_byte_array_append(msg, (const uint8_t *)"qemu-drbd auth v1", 18);
    g_byte_array_append(msg, (const uint8_t *)side, strlen(side) + 1);
    g_byte_array_append(msg, their, DRBD_AUTH_NONCE_SIZE);
    g_byte_array_append(msg, ours, DRBD_AUTH_NONCE_SIZE);
    *out = NULL;
    g_assert_cmpint(qcrypto_hmac_bytes(hmac, (const char *)msg->data,
                                       msg->len, out, len, &error_abort),
                    ==, 0);
}

static void test_answer_layout(void)
{
    static const struct {
        uint32_t digest;
        QCryptoHashAlgo alg;
        size_t len;
    } algs[] = {
        { DRBD_DIGEST_MD5, QCRYPTO_HASH_ALGO_MD5, 16 },
        { DRBD_DIGEST_SHA1, QCRYPTO_HASH_ALGO_SHA1, 20 },
        { DRBD_DIGEST_SHA256, QCRYPTO_HASH_ALGO_SHA256, 32 },
        { DRBD_DIGEST_SHA512, QCRYPTO_HASH_ALGO_SHA512, 64 },
    };
    uint8_t a[DRBD_AUTH_NONCE_SIZE], b[DRBD_AUTH_NONCE_SIZE];

    fill_nonce(a, 1);
    fill_nonce(b, 2);
    for (size_t i = 0; i < ARRAY_SIZE(algs); i++) {
        for (int connector = 0; connector < 2; connector++) {
            g_autofree uint8_t *want = NULL;
            DrbdAuthResponse r;
            size_t len;

            documented_answer(algs[i].alg, connector ? "connect" : "accept",
                              a, b, &want, &len);
            g_assert_cmpint(drbd_auth_answer(algs[i].digest, key,
                                             sizeof(key) - 1, connector, a,
                                             b, &r, &error_abort), ==, 0);
            g_assert_cmpuint(r.len, ==, algs[i].len);
            g_assert_cmpuint(len, ==, algs[i].len);
            g_assert(!memcmp(r.digest, want, len));
        }
    }
}

/* An answer depends on the side, on both nonces and their order, the key */
static void test_answer_binds(void)
{
    uint8_t a[DRBD_AUTH_NONCE_SIZE], b[DRBD_AUTH_NONCE_SIZE];
    uint8_t other_key[] = "a shared secreT";
    DrbdAuthResponse base, r;

    fill_nonce(a, 1);
    fill_nonce(b, 2);
    drbd_auth_answer(DRBD_DIGEST_SHA256, key, sizeof(key) - 1, true, a, b,
                     &base, &error_abort);

    /* The same inputs, the same answer */
    drbd_auth_answer(DRBD_DIGEST_SHA256, key, sizeof(key) - 1, true, a, b,
                     &r, &error_abort);
    g_assert(r.len == base.len && !memcmp(r.digest, base.digest, r.len));

    /* The other side's answer to the same challenge: reflection fails */
    drbd_auth_answer(DRBD_DIGEST_SHA256, key, sizeof(key) - 1, false, a, b,
                     &r, &error_abort);
    g_assert(memcmp(r.digest, base.digest, r.len));

    /* Nonces swapped */
    drbd_auth_answer(DRBD_DIGEST_SHA256, key, sizeof(key) - 1, true, b, a,
                     &r, &error_abort);
    g_assert(memcmp(r.digest, base.digest, r.len));

    /* One bit of the challenge */
    a[31] ^= 1;
    drbd_auth_answer(DRBD_DIGEST_SHA256, key, sizeof(key) - 1, true, a, b,
                     &r, &error_abort);
    g_assert(memcmp(r.digest, base.digest, r.len));
    a[31] ^= 1;

    /* Another key */
    drbd_auth_answer(DRBD_DIGEST_SHA256, other_key, sizeof(other_key) - 1,
                     true, a, b, &r, &error_abort);
    g_assert(memcmp(r.digest, base.digest, r.len));
}

static void test_answer_bad_digest(void)
{
    uint8_t a[DRBD_AUTH_NONCE_SIZE] = { 0 }, b[DRBD_AUTH_NONCE_SIZE] = { 1 };
    uint32_t bad[] = { DRBD_DIGEST_NONE, DRBD_DIGEST_CRC32C, DRBD_DIGEST__MAX,
                       UINT32_MAX };
    DrbdAuthResponse r;

    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        Error *err = NULL;

        g_assert_cmpint(drbd_auth_answer(bad[i], key, sizeof(key) - 1, true,
                                         a, b, &r, &err), <, 0);
        g_assert(err);
        g_assert(strstr(error_get_pretty(err), "cannot key an HMAC"));
        error_free(err);
    }
}

/* Known answers: CRC-32C's check value, SHA-256 of "abc" */
static void test_digest_vectors(void)
{
    static const uint8_t sha256_abc[32] = {
        0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea,
        0x41, 0x41, 0x40, 0xde, 0x5d, 0xae, 0x22, 0x23,
        0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17, 0x7a, 0x9c,
        0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00, 0x15, 0xad,
    };
    struct iovec check = { (void *)"123456789", 9 };
    struct iovec abc = { (void *)"abc", 3 };
    uint8_t out[DRBD_WIRE_DIGEST_MAX];

    g_assert_cmpint(drbd_digest_iov(DRBD_DIGEST_CRC32C, &check, 1, out,
                                    &error_abort), ==, 4);
    g_assert_cmphex((uint32_t)ldl_be_p(out), ==, 0xe3069283);
    g_assert_cmpint(drbd_digest_iov(DRBD_DIGEST_SHA256, &abc, 1, out,
                                    &error_abort), ==, 32);
    g_assert(!memcmp(out, sha256_abc, 32));
}

/* drbd_crc32c_iov_upto(@max) of @len bytes at @p is iov_crc32c()'s */
static void assert_crc32c(const uint8_t *p, size_t len, int max)
{
    struct iovec iov = { (void *)p, len };

    g_assert_cmphex(drbd_crc32c_iov_upto(&iov, 1, max), ==,
                    iov_crc32c(0xffffffff, &iov, 1));
}

/*
 * crc32c as QEMU's iov_crc32c() computes it, each way the node may (those
 * that this CPU has; the others fall back): every length and alignment of
 * the head and the tail, around the lengths of the three streams and of
 * the folding, and several pieces
 */
static void test_crc32c(void)
{
    g_autofree uint8_t *buf = g_malloc(16384 + 64);
    uint8_t out[4];

    for (int i = 0; i < 16384 + 64; i++) {
        buf[i] = i * 131 + (i >> 7) + 7;
    }
    for (int max = DRBD_CRC32C_SOFT; max <= DRBD_CRC32C_FOLDING; max++) {
        for (size_t start = 0; start < 16; start++) {
            for (size_t len = 0; len < 80; len++) {
                assert_crc32c(buf + start, len, max);
            }
        }
        /* Around the length that runs three streams (4080) */
        for (size_t len = 4000; len <= 4096; len += 3) {
            assert_crc32c(buf + len % 16, len, max);
        }
        for (size_t len = 4070; len <= 4096; len++) {
            assert_crc32c(buf + 64 - len % 64, len, max);
        }
        /* Around the lengths that fold (multiples of 256), misaligned */
        for (size_t len = 240; len <= 1040; len += 7) {
            assert_crc32c(buf + 1 + len % 63, len, max);
        }
        /* Several rounds of either, and what is left after them */
        for (size_t len = 8150; len <= 16384; len += 1019) {
            assert_crc32c(buf + len % 64, len, max);
        }
    }
    for (size_t cut = 0; cut <= 4096; cut += 1 + cut / 3) {
        struct iovec parts[] = {
            { buf + 3, cut }, { buf + 3 + cut, 4096 - cut },
        };

        g_assert_cmphex(drbd_crc32c_iov(parts, 2), ==,
                        iov_crc32c(0xffffffff, parts, 2));
        g_assert_cmpint(drbd_digest_iov(DRBD_DIGEST_CRC32C, parts, 2, out,
                                        &error_abort), ==, 4);
        g_assert_cmphex((uint32_t)ldl_be_p(out), ==,
                        iov_crc32c(0xffffffff, parts, 2));
    }
}

/* A digest over several pieces is the digest over their concatenation */
static void test_digest_iov(void)
{
    uint32_t digests[] = { DRBD_DIGEST_CRC32C, DRBD_DIGEST_MD5,
                           DRBD_DIGEST_SHA1, DRBD_DIGEST_SHA256,
                           DRBD_DIGEST_SHA512 };
    g_autofree uint8_t *buf = g_malloc(12288);
    struct iovec whole = { buf, 12288 };
    struct iovec parts[] = {
        { buf, 512 }, { buf + 512, 3584 }, { buf + 4096, 8192 },
    };

    for (int i = 0; i < 12288; i++) {
        buf[i] = i * 31 + (i >> 8);
    }
    for (size_t i = 0; i < ARRAY_SIZE(digests); i++) {
        uint8_t a[DRBD_WIRE_DIGEST_MAX], b[DRBD_WIRE_DIGEST_MAX];
        int la, lb;

        la = drbd_digest_iov(digests[i], &whole, 1, a, &error_abort);
        lb = drbd_digest_iov(digests[i], parts, ARRAY_SIZE(parts), b,
                             &error_abort);
        g_assert_cmpint(la, ==, drbd_digest_size(digests[i]));
        g_assert_cmpint(la, >=, DRBD_WIRE_DIGEST_MIN);
        g_assert_cmpint(la, <=, DRBD_WIRE_DIGEST_MAX);
        g_assert_cmpint(la, ==, lb);
        g_assert(!memcmp(a, b, la));
        /* and it sees a flipped byte */
        buf[5000] ^= 0x10;
        lb = drbd_digest_iov(digests[i], &whole, 1, b, &error_abort);
        buf[5000] ^= 0x10;
        g_assert(memcmp(a, b, la));
    }
    g_assert_cmpuint(drbd_digest_size(DRBD_DIGEST_NONE), ==, 0);
    g_assert_cmpuint(drbd_digest_size(DRBD_DIGEST__MAX), ==, 0);
}

/*
 * The digest of each 4 KiB block, the last one short or whole, and which
 * of two lists of them differ: one changed byte shows in its block's bit
 * and in no other
 */
static void test_block_digests(void)
{
    static const uint32_t digests[] = {
        DRBD_DIGEST_CRC32C, DRBD_DIGEST_MD5, DRBD_DIGEST_SHA1,
        DRBD_DIGEST_SHA256, DRBD_DIGEST_SHA512,
    };
    /* whole chunks, a short last block, one block, a part of one */
    static const uint32_t sizes[] = {
        DRBD_OV_MAX_BYTES, 5 * DRBD_OV_BLOCK, 4 * DRBD_OV_BLOCK + 512,
        63 * DRBD_OV_BLOCK + 1536, DRBD_OV_BLOCK, 512,
    };
    /* beyond what is digested, so that a read past it would change them */
    g_autofree uint8_t *buf = g_malloc(DRBD_OV_MAX_BYTES + DRBD_OV_BLOCK);
    size_t max = DRBD_OV_MAX_BLOCKS * DRBD_WIRE_DIGEST_MAX;
    /* and a byte more, that must stay as it is */
    g_autofree uint8_t *mine = g_malloc(max + 1);
    g_autofree uint8_t *theirs = g_malloc(max + 1);

    for (size_t i = 0; i < DRBD_OV_MAX_BYTES + DRBD_OV_BLOCK; i++) {
        buf[i] = i * 13 + (i >> 12);
    }
    for (size_t d = 0; d < ARRAY_SIZE(digests); d++) {
        size_t dsize = drbd_digest_size(digests[d]);

        for (size_t s = 0; s < ARRAY_SIZE(sizes); s++) {
            uint32_t bytes = sizes[s];
            uint32_t blocks = drbd_ov_blocks(bytes);
            uint32_t last = blocks - 1;

            memset(mine, 0xa5, max + 1);
            g_assert_cmpint(drbd_block_digests(digests[d], buf, bytes, mine,
                                               &error_abort), ==, 0);
            /* one after the other, each that of its block alone */
            for (uint32_t b = 0; b < blocks; b++) {
                struct iovec iov = {
                    buf + b * DRBD_OV_BLOCK,
                    MIN(DRBD_OV_BLOCK, bytes - b * DRBD_OV_BLOCK),
                };
                uint8_t one[DRBD_WIRE_DIGEST_MAX];

                g_assert_cmpint(drbd_digest_iov(digests[d], &iov, 1, one,
                                                &error_abort), ==, dsize);
                g_assert(!memcmp(mine + b * dsize, one, dsize));
            }
            /* and not a byte more */
            g_assert_cmphex(mine[blocks * dsize], ==, 0xa5);

            /* the same data: nothing differs */
            buf[bytes] ^= 0xff;     /* past the end: not digested */
            g_assert_cmpint(drbd_block_digests(digests[d], buf, bytes,
                                               theirs, &error_abort), ==, 0);
            buf[bytes] ^= 0xff;
            g_assert_cmphex(drbd_block_digests_differ(mine, theirs, bytes,
                                                      dsize), ==, 0);

            /* one byte in block 3: bit 3 and no other */
            if (blocks > 3) {
                buf[3 * DRBD_OV_BLOCK + 1000] ^= 0x01;
                drbd_block_digests(digests[d], buf, bytes, theirs,
                                   &error_abort);
                buf[3 * DRBD_OV_BLOCK + 1000] ^= 0x01;
                g_assert_cmphex(drbd_block_digests_differ(mine, theirs,
                                                          bytes, dsize),
                                ==, 1ULL << 3);
                g_assert_cmphex(drbd_block_digests_differ(theirs, mine,
                                                          bytes, dsize),
                                ==, 1ULL << 3);
            }

            /* the last byte of the last block, short or whole */
            buf[bytes - 1] ^= 0x80;
            drbd_block_digests(digests[d], buf, bytes, theirs, &error_abort);
            buf[bytes - 1] ^= 0x80;
            g_assert_cmphex(drbd_block_digests_differ(mine, theirs, bytes,
                                                      dsize),
                            ==, 1ULL << last);

            /* the first byte and the last: the first block and the last */
            buf[0] ^= 0x10;
            buf[bytes - 1] ^= 0x10;
            drbd_block_digests(digests[d], buf, bytes, theirs, &error_abort);
            buf[0] ^= 0x10;
            buf[bytes - 1] ^= 0x10;
            g_assert_cmphex(drbd_block_digests_differ(mine, theirs, bytes,
                                                      dsize),
                            ==, 1ULL | (1ULL << last));
        }
    }

    /* Every block differs: all 64 bits, and bits past a short range not */
    memset(mine, 0x11, max);
    memset(theirs, 0x22, max);
    g_assert_cmphex(drbd_block_digests_differ(mine, theirs,
                                              DRBD_OV_MAX_BYTES, 4),
                    ==, UINT64_MAX);
    g_assert_cmphex(drbd_block_digests_differ(mine, theirs,
                                              2 * DRBD_OV_BLOCK + 512, 32),
                    ==, 0x7);
    /* only the digests of the range are compared */
    memset(theirs, 0x11, 3 * 32);
    g_assert_cmphex(drbd_block_digests_differ(mine, theirs,
                                              2 * DRBD_OV_BLOCK + 512, 32),
                    ==, 0);
    g_assert_cmphex(drbd_block_digests_differ(mine, theirs,
                                              3 * DRBD_OV_BLOCK + 512, 32),
                    ==, 0x8);
}

/*
 * data-integrity-alg: a received write's digest is compared whole.  One
 * that is right in its first bytes and wrong further on (a comparison
 * cut short would take it) fails; the right one passes.
 */
static void test_integrity_whole_digest(void)
{
    static const uint32_t digests[] = {
        DRBD_DIGEST_CRC32C, DRBD_DIGEST_SHA1, DRBD_DIGEST_SHA256,
    };
    g_autofree uint8_t *data = g_malloc(2 * DRBD_OV_BLOCK);
    uint8_t right[DRBD_WIRE_DIGEST_MAX], sent[DRBD_WIRE_DIGEST_MAX];
    struct iovec iov = { data, 2 * DRBD_OV_BLOCK };
    DrbdDataPacket p = {
        .offset = 4 * DRBD_OV_BLOCK, .bytes = 2 * DRBD_OV_BLOCK,
        .data = data, .digest = sent,
    };

    for (int i = 0; i < 2 * DRBD_OV_BLOCK; i++) {
        data[i] = i * 7 + (i >> 9);
    }
    for (size_t i = 0; i < ARRAY_SIZE(digests); i++) {
        int len = drbd_digest_iov(digests[i], &iov, 1, right, &error_abort);
        /* the last byte, one in the middle, the first one */
        int flip[] = { len - 1, len / 2, 0 };

        p.digest_len = len;
        memcpy(sent, right, len);
        g_assert_cmpint(drbd_check_integrity(digests[i], DRBD_CMD_DATA, &p,
                                             &error_abort), ==, 0);

        for (size_t j = 0; j < ARRAY_SIZE(flip); j++) {
            Error *err = NULL;

            memcpy(sent, right, len);
            sent[flip[j]] ^= 0x01;
            g_assert_cmpint(drbd_check_integrity(digests[i], DRBD_CMD_DATA,
                                                 &p, &err), ==, -EBADMSG);
            g_assert(strstr(error_get_pretty(err), "does not match"));
            error_free(err);
        }
    }
}

/* A digest this node cannot compute is an error, not garbage */
static void test_block_digests_bad(void)
{
    static const uint32_t bad[] = {
        DRBD_DIGEST_NONE, DRBD_DIGEST__MAX, UINT32_MAX,
    };
    g_autofree uint8_t *buf = g_malloc0(2 * DRBD_OV_BLOCK);
    uint8_t out[2 * DRBD_WIRE_DIGEST_MAX];

    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        Error *err = NULL;

        g_assert_cmpint(drbd_block_digests(bad[i], buf, 2 * DRBD_OV_BLOCK,
                                           out, &err), <, 0);
        g_assert(err);
        g_assert(strstr(error_get_pretty(err), "cannot compute"));
        error_free(err);
    }
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    qcrypto_init(&error_abort);
    g_test_add_func("/drbd/secure/answer-layout", test_answer_layout);
    g_test_add_func("/drbd/secure/answer-binds", test_answer_binds);
    g_test_add_func("/drbd/secure/answer-bad-digest", test_answer_bad_digest);
    g_test_add_func("/drbd/secure/digest-vectors", test_digest_vectors);
    g_test_add_func("/drbd/secure/digest-iov", test_digest_iov);
    g_test_add_func("/drbd/secure/crc32c", test_crc32c);
    g_test_add_func("/drbd/secure/block-digests", test_block_digests);
    g_test_add_func("/drbd/secure/block-digests-bad",
                    test_block_digests_bad);
    g_test_add_func("/drbd/secure/integrity-whole-digest",
                    test_integrity_whole_digest);
    return g_test_run();
}
