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

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    qcrypto_init(&error_abort);
    g_test_add_func("/drbd/secure/answer-layout", test_answer_layout);
    g_test_add_func("/drbd/secure/answer-binds", test_answer_binds);
    g_test_add_func("/drbd/secure/answer-bad-digest", test_answer_bad_digest);
    g_test_add_func("/drbd/secure/digest-vectors", test_digest_vectors);
    g_test_add_func("/drbd/secure/digest-iov", test_digest_iov);
    return g_test_run();
}
