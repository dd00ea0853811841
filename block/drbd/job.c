/*
 * DRBD-style replication: the jobs that run the resync and the verify
 *
 * A resync and an online verify are QEMU jobs of their own types
 * ('drbd-resync', 'drbd-verify'), so that query-jobs, job-pause,
 * job-resume and job-cancel work on them.  The work is the job's .run
 * (resync.c, verify.c), which calls job_pause_point() between two steps,
 * as block/mirror.c does:
 *
 *   drbd-resync   from the first resync of the node's data until the
 *                 peer is in sync again, across lost connections (a
 *                 resync interrupted goes on when the peer is back).
 *                 On the sync source its run sends the data; between
 *                 connections, and on a sync target, it waits.
 *                 Cancelled, the node disconnects and stands alone until
 *                 drbd-connect, as DRBD's "drbdadm disconnect": the
 *                 bitmap keeps what is left, and the next connection
 *                 resyncs it.
 *   drbd-verify   one drbd-verify, until its DRBD_VERIFY_FINISHED.
 *                 Cancelled, the verify stops as if it had failed.
 *
 * Each peer has its own (a resync, like a verify, is between two
 * nodes).  Their ids are "drbd-resync-NODE" and "drbd-verify-NODE",
 * with "-PEER" after them (the peer's node id) where the node has more
 * than one peer.  A node
 * whose name is no valid id (a node the user did not name), or whose id
 * the user took, gets an internal job instead, which query-jobs does not
 * list: the work always runs in a job.
 *
 * A job belongs to the main loop.  Its run works in the node's home
 * while it holds a reference to a peer (DrbdJob.peer: the connection's
 * teardown waits for it), and pauses and waits in the main loop, where
 * what it waits for reaches it:
 *
 *   job-resume, job-cancel     QEMU enters the job
 *   a state change, a peer     drbd_jobs_wake_locked() schedules job_bh,
 *   that breaks                which enters a waiting job, and a paused
 *                              one whose peer broke (it must let go of
 *                              it); the run looks again
 *   the node's close           drbd_job_detach() enters the job, which
 *                              ends (the connection is gone by then)
 *
 * A run decides to wait in the main loop, in the same turn in which it
 * yields: a wake cannot come between the two (job_bh runs in the main
 * loop too, and job_enter() of a job that does not wait is lost).
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "qemu/coroutine.h"
#include "qemu/error-report.h"
#include "qemu/id.h"
#include "qemu/job.h"
#include "qemu/main-loop.h"
#include "trace.h"

#include "drbd-int.h"

/* A paused job must let go of its peer: it is entered, and ends */
static bool drbd_job_must_stop_locked(DrbdJob *dj)
{
    return dj->peer && qatomic_read(&dj->peer->broken);
}

/*
 * Main loop: enter the jobs that wait for what happened, or that must let
 * go of their peer (a job paused by the user otherwise stays so)
 */
static void drbd_job_wake_bh(void *opaque)
{
    DrbdConnection *c = opaque;
    BDRVDrbdState *s = c->s;
    DrbdJob *found[2], *wake[2];
    int i, n = 0;

    qemu_mutex_lock(&s->lock);
    found[0] = c->resync_job;
    found[1] = c->verify ? &c->verify->job : NULL;
    for (i = 0; i < ARRAY_SIZE(found); i++) {
        if (found[i] &&
            (!found[i]->paused || drbd_job_must_stop_locked(found[i]))) {
            wake[n++] = found[i];
        }
    }
    qemu_mutex_unlock(&s->lock);
    /*
     * Without s->lock: a job of the main loop runs here, at once.  Each
     * is alive: a job leaves c->resync_job or c->verify as it ends, in
     * the main loop, before it is freed.
     */
    for (i = 0; i < n; i++) {
        job_enter(&wake[i]->common);
    }
}

DrbdJob *drbd_job_new(DrbdConnection *c, const JobDriver *driver)
{
    BDRVDrbdState *s = c->s;
    const char *name = bdrv_get_node_name(s->bs);
    g_autofree char *id = NULL;
    Error *local_err = NULL;
    DrbdJob *dj = NULL;

    GLOBAL_STATE_CODE();
    if (id_wellformed(name)) {
        id = s->nr_conns > 1 ?
             g_strdup_printf("%s-%s-%u", JobType_str(driver->job_type), name,
                             c->peer_node_id) :
             g_strdup_printf("%s-%s", JobType_str(driver->job_type), name);
        dj = job_create(id, driver, NULL, qemu_get_aio_context(),
                        JOB_DEFAULT, NULL, NULL, &local_err);
        if (!dj) {
            warn_reportf_err(local_err, "drbd node '%s': its %s runs as "
                             "an internal job: ", drbd_name(s),
                             JobType_str(driver->job_type));
            g_clear_pointer(&id, g_free);
        }
    }
    if (!dj) {
        dj = job_create(NULL, driver, NULL, qemu_get_aio_context(),
                        JOB_INTERNAL, NULL, NULL, &error_abort);
    }
    dj->s = s;
    dj->conn = c;
    qemu_mutex_lock(&s->lock);
    if (!c->job_bh) {
        c->job_bh = aio_bh_new(qemu_get_aio_context(), drbd_job_wake_bh, c);
    }
    qemu_mutex_unlock(&s->lock);
    trace_drbd_job_new(s->bs, id ?: "(internal)");
    return dj;
}

/* The scheduled calls of drbd_job_defer() */
typedef struct DrbdJobDeferred {
    DrbdConnection *c;
    void (*fn)(DrbdConnection *c);
} DrbdJobDeferred;

static void drbd_job_deferred_bh(void *opaque)
{
    DrbdJobDeferred *d = opaque;
    DrbdConnection *c = d->c;

    d->fn(c);
    g_free(d);
    qatomic_dec(&c->job_bhs);
    aio_wait_kick();
}

void drbd_job_defer(DrbdConnection *c, void (*fn)(DrbdConnection *c))
{
    DrbdJobDeferred *d = g_new(DrbdJobDeferred, 1);

    *d = (DrbdJobDeferred) { .c = c, .fn = fn };
    qatomic_inc(&c->job_bhs);
    aio_bh_schedule_oneshot(qemu_get_aio_context(), drbd_job_deferred_bh, d);
}

/* Enter a job that drbd_job_pause() kept a reference to */
static void drbd_job_enter_bh(void *opaque)
{
    Job *job = opaque;

    JOB_LOCK_GUARD();
    job_enter_cond_locked(job, NULL);
    job_unref_locked(job);
}

void coroutine_fn drbd_job_pause(Job *job)
{
    DrbdJob *dj = container_of(job, DrbdJob, common);
    bool must_stop = true;

    /* Paused in the main loop: wakes are seen there (see above) */
    aio_co_reschedule_self(qemu_get_aio_context());
    if (dj->s) {
        qemu_mutex_lock(&dj->s->lock);
        dj->paused = true;
        must_stop = drbd_job_must_stop_locked(dj);
        qemu_mutex_unlock(&dj->s->lock);
    }
    if (must_stop) {
        /*
         * Its peer broke, or the node closed, before the pause: the wake
         * came already.  This one comes once the job waits.
         */
        WITH_JOB_LOCK_GUARD() {
            job_ref_locked(job);
        }
        aio_bh_schedule_oneshot(qemu_get_aio_context(), drbd_job_enter_bh,
                                job);
    }
}

void coroutine_fn drbd_job_resume(Job *job)
{
    DrbdJob *dj = container_of(job, DrbdJob, common);

    /* In the main loop, where drbd_job_pause() took the job */
    if (dj->s) {
        qemu_mutex_lock(&dj->s->lock);
        dj->paused = false;
        qemu_mutex_unlock(&dj->s->lock);
    }
}

static void drbd_job_detach_conn(DrbdConnection *c)
{
    BDRVDrbdState *s = c->s;
    DrbdVerify *v;
    DrbdJob *dj;
    QEMUBH *bh;

    GLOBAL_STATE_CODE();
    /* A job the node asked for before its connection stopped: made or not */
    AIO_WAIT_WHILE_UNLOCKED(NULL, qatomic_read(&c->job_bhs));
    qemu_mutex_lock(&s->lock);
    v = c->verify;
    c->verify = NULL;
    dj = c->resync_job;
    c->resync_job = NULL;
    bh = c->job_bh;
    c->job_bh = NULL;
    qemu_mutex_unlock(&s->lock);
    if (bh) {
        qemu_bh_delete(bh);
    }
    if (v) {
        /* Its run let go of the peer, whose end the close awaited: over */
        v->job.s = NULL;
    }
    if (dj) {
        /*
         * It holds no peer: it waits, or is on its way to the main loop,
         * where it sees that the node closed
         */
        dj->s = NULL;
        job_enter(&dj->common);
    }
}

void drbd_job_detach(BDRVDrbdState *s)
{
    unsigned i;

    for (i = 0; i < s->nr_conns; i++) {
        drbd_job_detach_conn(s->conns[i]);
    }
}
