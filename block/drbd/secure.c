/*
 * DRBD-style replication: securing the channels
 *
 * A channel starts with the HELLO exchange in the clear.  Each HELLO says
 * whether its sender requires TLS and a proof of the shared secret, so
 * that when two nodes are configured differently both logs say which
 * side wants what.  Then, before anything else crosses it, the channel is
 * upgraded to TLS (the connecting node is the TLS client) and the two
 * nodes prove to each other that they know the secret:
 *
 *   each sends AUTH_CHALLENGE: its HMAC algorithm and 32 random bytes;
 *   each answers the other's with AUTH_RESPONSE,
 *       HMAC(secret, label | own side | peer's nonce | own nonce),
 *   and checks the answer to its own challenge.
 *
 * The side ("connect" or "accept") inside the HMAC keeps an answer from
 * being reflected back at its author, and the two nonces tie it to this
 * channel.  Nothing else is read from a channel before both checks pass.
 *
 * (The digests of data, verify and checksum resync are digest.c's.)
 *
 * QIOChannelTLS drives its handshake from GSource watches.  The node's
 * AioContext dispatches none (it may be an iothread's, or the main loop
 * blocked in a drain), so the handshake runs in a worker thread with a
 * GMainContext of its own, and the coroutine waits for it.
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "crypto/hash.h"
#include "crypto/hmac.h"
#include "crypto/random.h"
#include "crypto/secret_common.h"
#include "io/channel-tls.h"
#include "qapi/error.h"
#include "qom/object_interfaces.h"
#include "trace.h"

#include "drbd-int.h"

static QCryptoTLSCreds *drbd_tls_creds(const char *id, bool client,
                                       Error **errp)
{
    Object *obj = object_resolve_path_component(object_get_objects_root(),
                                                id);
    QCryptoTLSCreds *creds;

    if (!obj) {
        error_setg(errp, "tls-creds: no object with id '%s'", id);
        return NULL;
    }
    creds = (QCryptoTLSCreds *)object_dynamic_cast(obj,
                                                   TYPE_QCRYPTO_TLS_CREDS);
    if (!creds) {
        error_setg(errp, "tls-creds: object '%s' is not TLS credentials "
                   "(tls-creds-x509 or tls-creds-psk)", id);
        return NULL;
    }
    if (!qcrypto_tls_creds_check_endpoint(creds, client ?
                                          QCRYPTO_TLS_CREDS_ENDPOINT_CLIENT :
                                          QCRYPTO_TLS_CREDS_ENDPOINT_SERVER,
                                          NULL)) {
        error_setg(errp, "tls-creds: '%s' is for the %s endpoint, but this "
                   "node %s, so it is the TLS %s", id,
                   client ? "server" : "client",
                   client ? "connects to its peer" : "accepts its peer",
                   client ? "client" : "server");
        error_append_hint(errp, "Give this node credentials with "
                          "endpoint=%s.  Where both listen and peer are "
                          "set, the node with the lower node-id "
                          "connects.\n", client ? "client" : "server");
        return NULL;
    }
    object_ref(obj);
    return creds;
}

int drbd_secure_open(DrbdConnection *conn, BlockdevOptionsDrbd *o,
                     const DrbdPeerOptions *po, Error **errp)
{
    bool client = conn->connects;
    /* A peer's own credentials: a node is the client of some peers */
    const char *creds = po && po->tls_creds ? po->tls_creds : o->tls_creds;

    if (creds) {
        if (!conn->listen_addr && !conn->peer_addr) {
            error_setg(errp, "tls-creds needs a peer: set listen or peer");
            return -EINVAL;
        }
        conn->tls_creds = drbd_tls_creds(creds, client, errp);
        if (!conn->tls_creds) {
            if (po) {
                error_prepend(errp, "peer node %d: ", po->node_id);
            }
            return -EINVAL;
        }
    } else if (o->tls_authz || o->tls_hostname) {
        error_setg(errp, "tls-authz and tls-hostname need tls-creds");
        return -EINVAL;
    }
    if (po && o->tls_authz && client) {
        /* With peers, tls-authz checks those that connect to this node */
    } else if (o->tls_authz) {
        if (client) {
            error_setg(errp, "tls-authz checks the peers that connect, but "
                       "this node connects to its peer");
            error_append_hint(errp, "Set tls-authz on the accepting node, "
                              "and tls-hostname here.\n");
            return -EINVAL;
        }
        conn->tls_authz = g_strdup(o->tls_authz);
    }
    if (po && o->tls_hostname && !client) {
        /* ... and tls-hostname those this node connects to */
    } else if (o->tls_hostname) {
        if (!client) {
            error_setg(errp, "tls-hostname names the peer that this node "
                       "connects to, but this node accepts its peer");
            error_append_hint(errp, "Use tls-authz to check the identity "
                              "of the peers that connect.\n");
            return -EINVAL;
        }
        conn->tls_hostname = g_strdup(o->tls_hostname);
    } else if (client && conn->tls_creds &&
               conn->peer_addr->type == SOCKET_ADDRESS_TYPE_INET) {
        conn->tls_hostname = g_strdup(conn->peer_addr->u.inet.host);
    }

    if (o->secret) {
        QCryptoHashAlgo alg = o->has_cram_hmac_alg ? o->cram_hmac_alg :
                              QCRYPTO_HASH_ALGO_SHA256;

        if (!conn->listen_addr && !conn->peer_addr) {
            error_setg(errp, "secret needs a peer: set listen or peer");
            return -EINVAL;
        }
        if (!drbd_digest_of_hash(alg, &conn->auth_digest) ||
            !qcrypto_hmac_supports(alg)) {
            error_setg(errp, "cram-hmac-alg %s cannot key an HMAC in this "
                       "build", QCryptoHashAlgo_str(alg));
            return -EINVAL;
        }
        if (qcrypto_secret_lookup(o->secret, &conn->auth_key,
                                  &conn->auth_key_len, errp) < 0) {
            error_prepend(errp, "secret: ");
            return -EINVAL;
        }
        if (!conn->auth_key_len) {
            error_setg(errp, "secret: '%s' is empty", o->secret);
            return -EINVAL;
        }
    } else if (o->has_cram_hmac_alg) {
        error_setg(errp, "cram-hmac-alg needs a secret");
        return -EINVAL;
    }

    if (o->has_data_integrity_alg) {
        conn->integrity = drbd_digest_of_alg(o->data_integrity_alg);
        if (!drbd_digest_size(conn->integrity)) {
            error_setg(errp, "data-integrity-alg %s is not available in "
                       "this build",
                       DrbdDigestAlg_str(o->data_integrity_alg));
            return -EINVAL;
        }
    }
    if (o->has_csums_alg) {
        conn->csums_alg = drbd_digest_of_alg(o->csums_alg);
        if (!drbd_digest_size(conn->csums_alg)) {
            error_setg(errp, "csums-alg %s is not available in this build",
                       DrbdDigestAlg_str(o->csums_alg));
            return -EINVAL;
        }
    }
    if (o->has_verify_alg) {
        conn->verify_alg = drbd_digest_of_alg(o->verify_alg);
        if (!drbd_digest_size(conn->verify_alg)) {
            error_setg(errp, "verify-alg %s is not available in this build",
                       DrbdDigestAlg_str(o->verify_alg));
            return -EINVAL;
        }
    }
    return 0;
}

void drbd_secure_close(DrbdConnection *conn)
{
    if (conn->tls_creds) {
        object_unref(OBJECT(conn->tls_creds));
        conn->tls_creds = NULL;
    }
    g_clear_pointer(&conn->tls_authz, g_free);
    g_clear_pointer(&conn->tls_hostname, g_free);
    if (conn->auth_key) {
        memset(conn->auth_key, 0, conn->auth_key_len);
        g_clear_pointer(&conn->auth_key, g_free);
    }
}

uint32_t drbd_secure_hello_flags(DrbdConnection *conn)
{
    return (conn->tls_creds ? DRBD_HELLO_TLS : 0) |
           (conn->auth_key ? DRBD_HELLO_AUTH : 0);
}

/* Do the peer's HELLO and ours ask for the same protection? */
int drbd_secure_check_hello(DrbdConnection *conn, const DrbdHello *h,
                            Error **errp)
{
    bool we_tls = conn->tls_creds, they_tls = h->flags & DRBD_HELLO_TLS;
    bool we_auth = conn->auth_key, they_auth = h->flags & DRBD_HELLO_AUTH;

    if (we_tls && !they_tls) {
        error_setg(errp, "this node requires TLS (tls-creds), the peer does "
                   "not use it: refused");
        return -EACCES;
    }
    if (!we_tls && they_tls) {
        error_setg(errp, "the peer requires TLS, this node has no "
                   "tls-creds: refused");
        return -EACCES;
    }
    if (we_auth && !they_auth) {
        error_setg(errp, "this node requires the peer to prove the shared "
                   "secret (secret), the peer has none: refused");
        return -EACCES;
    }
    if (!we_auth && they_auth) {
        error_setg(errp, "the peer requires a shared secret, this node has "
                   "none (secret): refused");
        return -EACCES;
    }
    return 0;
}

/*
 * The answer of the @connector side (or the accepting one) to the
 * challenge @their_nonce, with @our_nonce its own challenge
 */
int drbd_auth_answer(uint32_t digest, const uint8_t *key, size_t key_len,
                     bool connector, const uint8_t *their_nonce,
                     const uint8_t *our_nonce, DrbdAuthResponse *r,
                     Error **errp)
{
    static const char label[] = "qemu-drbd auth v1";
    const char *side = connector ? "connect" : "accept";
    g_autoptr(QCryptoHmac) hmac = NULL;
    g_autofree uint8_t *result = NULL;
    size_t result_len = 0;
    QCryptoHashAlgo alg;
    struct iovec iov[] = {
        { (void *)label, sizeof(label) },
        { (void *)side, strlen(side) + 1 },
        { (void *)their_nonce, DRBD_AUTH_NONCE_SIZE },
        { (void *)our_nonce, DRBD_AUTH_NONCE_SIZE },
    };

    if (!drbd_digest_hash_alg(digest, &alg)) {
        error_setg(errp, "%s cannot key an HMAC", drbd_digest_name(digest));
        return -EINVAL;
    }
    hmac = qcrypto_hmac_new(alg, key, key_len, errp);
    if (!hmac ||
        qcrypto_hmac_bytesv(hmac, iov, ARRAY_SIZE(iov), &result, &result_len,
                            errp) < 0) {
        return -EIO;
    }
    if (result_len < DRBD_AUTH_DIGEST_MIN ||
        result_len > DRBD_AUTH_DIGEST_MAX) {
        error_setg(errp, "an HMAC of %zu bytes does not fit AUTH_RESPONSE",
                   result_len);
        return -EINVAL;
    }
    r->len = result_len;
    memcpy(r->digest, result, result_len);
    return 0;
}

/* Compare two answers in a time that does not depend on where they differ */
static bool drbd_auth_equal(const DrbdAuthResponse *a,
                            const DrbdAuthResponse *b)
{
    uint8_t diff = 0;

    if (a->len != b->len) {
        return false;
    }
    for (uint32_t i = 0; i < a->len; i++) {
        diff |= a->digest[i] ^ b->digest[i];
    }
    return diff == 0;
}

static int coroutine_fn drbd_send_auth(QIOChannel *ioc, uint16_t cmd,
                                       const void *what, Error **errp)
{
    g_autoptr(GByteArray) pkt = g_byte_array_new();

    if (cmd == DRBD_CMD_AUTH_CHALLENGE) {
        drbd_wire_put_auth_challenge(pkt, what);
    } else {
        drbd_wire_put_auth_response(pkt, what);
    }
    return drbd_write_packet(ioc, pkt, errp) < 0 ? -EIO : 0;
}

/* The challenge-response in both directions over @ioc */
static int coroutine_fn drbd_authenticate(DrbdConnection *conn, QIOChannel *ioc,
                                          bool connector, Error **errp)
{
    BDRVDrbdState *s = conn->s;
    DrbdAuthChallenge ours = { .digest = conn->auth_digest }, theirs;
    DrbdAuthResponse answer, got, expected;
    g_autofree uint8_t *payload = NULL;
    g_autofree uint8_t *payload2 = NULL;
    uint32_t len;

    if (qcrypto_random_bytes(ours.nonce, sizeof(ours.nonce), errp) < 0 ||
        drbd_send_auth(ioc, DRBD_CMD_AUTH_CHALLENGE, &ours, errp) < 0 ||
        drbd_expect_packet(ioc, DRBD_CMD_AUTH_CHALLENGE, &payload, &len,
                           errp) < 0 ||
        drbd_wire_get_auth_challenge(payload, len, &theirs, errp) < 0) {
        return -EPROTO;
    }
    if (theirs.digest != ours.digest) {
        error_setg(errp, "the peer's cram-hmac-alg is %s, this node's %s: "
                   "refused", drbd_digest_name(theirs.digest),
                   drbd_digest_name(ours.digest));
        return -EACCES;
    }
    if (!memcmp(theirs.nonce, ours.nonce, DRBD_AUTH_NONCE_SIZE)) {
        error_setg(errp, "the peer sent this node's own challenge back: "
                   "refused");
        return -EACCES;
    }
    if (drbd_auth_answer(conn->auth_digest, conn->auth_key, conn->auth_key_len,
                         connector, theirs.nonce, ours.nonce, &answer,
                         errp) < 0 ||
        drbd_send_auth(ioc, DRBD_CMD_AUTH_RESPONSE, &answer, errp) < 0 ||
        drbd_expect_packet(ioc, DRBD_CMD_AUTH_RESPONSE, &payload2, &len,
                           errp) < 0 ||
        drbd_wire_get_auth_response(payload2, len, &got, errp) < 0 ||
        drbd_auth_answer(conn->auth_digest, conn->auth_key, conn->auth_key_len,
                         !connector, ours.nonce, theirs.nonce, &expected,
                         errp) < 0) {
        return -EPROTO;
    }
    if (!drbd_auth_equal(&got, &expected)) {
        error_setg(errp, "the peer failed to prove the shared secret (its "
                   "answer to this node's challenge is wrong): refused");
        error_append_hint(errp, "Both nodes need the same secret.\n");
        return -EACCES;
    }
    trace_drbd_authenticated(s->bs, drbd_digest_name(conn->auth_digest));
    return 0;
}

typedef struct DrbdTlsHandshake {
    QIOChannelTLS *tioc;
    bool done;                  /* the handshake thread's */
    Error *err;
    Coroutine *co;              /* woken when the thread is done */
    QemuThread thread;
} DrbdTlsHandshake;

static void drbd_tls_handshake_done(QIOTask *task, void *opaque)
{
    DrbdTlsHandshake *hs = opaque;

    qio_task_propagate_error(task, &hs->err);
    hs->done = true;
}

/*
 * A thread of its own for the whole TLS handshake, on a GMainContext of
 * its own.  Not one of the AioContext's thread pool: a peer that stalls
 * holds the thread until ping-timeout, and the pool's workers are the
 * ones the node's file I/O (aio=threads) waits for; with a few stalled
 * handshakes a flush queued behind them waited the whole ping-timeout.
 * The connection manager ends a stalled handshake by shutting its socket
 * down (a deadline, or the node closing).
 */
static void *drbd_tls_handshake_thread(void *opaque)
{
    DrbdTlsHandshake *hs = opaque;
    GMainContext *ctx = g_main_context_new();

    qio_channel_tls_handshake(hs->tioc, drbd_tls_handshake_done, hs, NULL,
                              ctx);
    while (!hs->done) {
        g_main_context_iteration(ctx, TRUE);
    }
    g_main_context_unref(ctx);
    aio_co_wake(hs->co);
    return NULL;
}

/* Upgrade *@ioc to TLS; on success *@ioc is the TLS channel over it */
static int coroutine_fn drbd_start_tls(DrbdConnection *conn, QIOChannel **ioc,
                                       bool connector, Error **errp)
{
    BDRVDrbdState *s = conn->s;
    DrbdTlsHandshake hs = { 0 };
    g_autofree char *name = NULL;

    if (connector) {
        hs.tioc = qio_channel_tls_new_client(*ioc, conn->tls_creds,
                                             conn->tls_hostname, errp);
    } else {
        hs.tioc = qio_channel_tls_new_server(*ioc, conn->tls_creds,
                                             conn->tls_authz, errp);
    }
    if (!hs.tioc) {
        error_prepend(errp, "TLS: ");
        return -EINVAL;
    }
    hs.co = qemu_coroutine_self();
    qemu_thread_create(&hs.thread, "drbd-tls", drbd_tls_handshake_thread,
                       &hs, QEMU_THREAD_JOINABLE);
    /* Woken by the thread only: nothing else knows this coroutine */
    qemu_coroutine_yield();
    qemu_thread_join(&hs.thread);
    if (hs.err) {
        error_propagate_prepend(errp, hs.err, "TLS handshake with the "
                                "peer: ");
        object_unref(OBJECT(hs.tioc));
        return -EACCES;
    }
    name = g_strdup_printf("%s-tls", (*ioc)->name ?: "drbd");
    drbd_setup_channel(QIO_CHANNEL(hs.tioc), name);
    /* The TLS channel holds the socket */
    object_unref(OBJECT(*ioc));
    *ioc = QIO_CHANNEL(hs.tioc);
    trace_drbd_tls_established(s->bs, connector ? "client" : "server");
    return 0;
}

int coroutine_fn drbd_secure_channel(DrbdConnection *conn, QIOChannel **ioc,
                                     bool connector, Error **errp)
{
    int ret;

    if (conn->tls_creds) {
        ret = drbd_start_tls(conn, ioc, connector, errp);
        if (ret < 0) {
            return ret;
        }
    }
    if (conn->auth_key) {
        return drbd_authenticate(conn, *ioc, connector, errp);
    }
    return 0;
}
