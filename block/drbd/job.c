/*
 * DRBD-style replication: the resync and the verify as QEMU jobs
 *
 * A resync and an online verify run in the node's AioContext, as
 * coroutines of the connection (resync.c, verify.c).  Each is shown as a
 * job of its own type ('drbd-resync', 'drbd-verify', id
 * "drbd-resync-NODE" and "drbd-verify-NODE") so that query-jobs,
 * job-pause, job-resume and job-cancel work on it.  The job is a view:
 * its coroutine runs in the main loop, reads the progress every 100 ms,
 * and passes a pause, a resume or a cancel on through flags that the
 * work looks at between two chunks.
 *
 *   drbd-resync   from the first resync of the node's data until the
 *                 peer is in sync again, across lost connections (a
 *                 resync interrupted goes on when the peer is back).
 *                 Cancelled, the node disconnects and stands alone until
 *                 drbd-connect, as DRBD's "drbdadm disconnect": the
 *                 bitmap keeps what is left, and the next connection
 *                 resyncs it.
 *   drbd-verify   one drbd-verify, until its DRBD_VERIFY_FINISHED.
 *                 Cancelled, the verify stops as if it had failed.
 *
 * A node without a name of the user's has no jobs (a job id must be
 * well formed); its resync and verify run all the same.
 *
 * The jobs and conn->jobs[] are the main loop's; the flags in
 * conn are read by the work under s->lock.
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qapi/error.h"
#include "qemu/coroutine.h"
#include "qemu/id.h"
#include "qemu/job.h"
#include "qemu/main-loop.h"
#include "trace.h"

#include "drbd-int.h"

/* How often a job looks at the work's progress */
#define DRBD_JOB_POLL_NS    (100 * SCALE_MS)

struct DrbdJob {
    Job common;
    BDRVDrbdState *s;           /* NULL once the node closed */
    DrbdJobKind kind;
    uint64_t reported;          /* progress given to the job so far */
    /* drbd-verify: the verify it shows, and how it ended */
    DrbdVerify *verify;
    bool verify_done;
    char *verify_error;
    QemuCoSleep verify_end;     /* a cancelled job waits here for it */
};

static const char *const drbd_job_prefix[DRBD_JOB__MAX] = {
    [DRBD_JOB_RESYNC] = "drbd-resync-",
    [DRBD_JOB_VERIFY] = "drbd-verify-",
};

/* Give the job the work's progress: @done of @total bytes */
static void drbd_job_progress(DrbdJob *dj, uint64_t done, uint64_t total)
{
    done = MIN(done, total);
    if (done > dj->reported) {
        job_progress_update(&dj->common, done - dj->reported);
        dj->reported = done;
    }
    job_progress_set_remaining(&dj->common, total - MIN(done, total));
}

/*
 * Look at the work under s->lock: whether it runs on, and its progress.
 * A resync job ends when the peer is in sync, or with an error when the
 * node stands alone; a verify job when its verify reported its end.
 */
static bool drbd_job_poll(DrbdJob *dj, Error **errp)
{
    BDRVDrbdState *s = dj->s;
    DrbdConnection *conn;
    bool running = true;

    if (!s) {
        error_setg(errp, "the drbd node was closed");
        return false;
    }
    conn = drbd_conn(s);
    qemu_mutex_lock(&s->lock);
    if (dj->kind == DRBD_JOB_RESYNC) {
        DrbdConnState cs = conn->cstate;

        if (cs == DRBD_CONN_STATE_SYNC_SOURCE ||
            cs == DRBD_CONN_STATE_SYNC_TARGET) {
            uint64_t done = drbd_resync_done_locked(conn);

            drbd_pace_marks_note(&conn->resync_marks,
                                 qemu_clock_get_ns(QEMU_CLOCK_REALTIME),
                                 done);

            /* A resync after a reconnect starts again from its total */
            if (done < dj->reported) {
                dj->reported = 0;
                dj->common.progress.current = 0;
            }
            drbd_job_progress(dj, done, conn->resync_total);
        } else if (cs == DRBD_CONN_STATE_CONNECTED &&
                   !hbitmap_count(s->oos)) {
            drbd_job_progress(dj, conn->resync_total,
                              conn->resync_total);
            running = false;
        } else if (cs == DRBD_CONN_STATE_STANDALONE) {
            error_setg(errp, "the node stands alone (%s): the resync goes "
                       "on after drbd-connect", s->last_error ?:
                       "disconnected");
            running = false;
        }
    } else {
        if (dj->verify_done) {
            if (dj->verify_error) {
                error_setg(errp, "%s", dj->verify_error);
            }
            running = false;
        } else {
            drbd_job_progress(dj, dj->verify->done,
                              dj->verify->end - dj->verify->start);
        }
    }
    qemu_mutex_unlock(&s->lock);
    return running;
}

/* Cancelled: stop the work as the job's kind says */
static void drbd_job_stop_work(DrbdJob *dj)
{
    BDRVDrbdState *s = dj->s;
    DrbdConnection *conn;
    DrbdPeer *peer = NULL;

    if (!s) {
        return;
    }
    conn = drbd_conn(s);
    qemu_mutex_lock(&s->lock);
    conn->job_paused[dj->kind] = false;
    if (dj->kind == DRBD_JOB_RESYNC) {
        conn->connect_held = true;
        conn->held_reason = "resync cancelled: waiting for drbd-connect";
        peer = drbd_peer_get_locked(conn);
    } else if (!dj->verify_done && !dj->verify->error) {
        dj->verify->error = g_strdup("the verify was cancelled");
    }
    qemu_mutex_unlock(&s->lock);
    drbd_job_kick(s);
    if (peer) {
        drbd_peer_fail(peer, "the resync was cancelled (job-cancel)");
        drbd_peer_put(peer);
    }
}

static int coroutine_fn drbd_job_run(Job *job, Error **errp)
{
    DrbdJob *dj = container_of(job, DrbdJob, common);

    for (;;) {
        if (!drbd_job_poll(dj, errp)) {
            break;
        }
        if (job_is_cancelled(job)) {
            drbd_job_stop_work(dj);
            /*
             * A verify writes its end into the job: wait for it, woken
             * then (job_sleep_ns() would not sleep: the job is cancelled)
             */
            while (dj->kind == DRBD_JOB_VERIFY && dj->s &&
                   !qatomic_read(&dj->verify_done)) {
                qemu_co_sleep_ns_wakeable(&dj->verify_end,
                                          QEMU_CLOCK_REALTIME,
                                          DRBD_JOB_POLL_NS);
            }
            break;
        }
        job_sleep_ns(job, DRBD_JOB_POLL_NS);
    }
    if (dj->s) {
        drbd_conn(dj->s)->jobs[dj->kind] = NULL;
    }
    return job_is_cancelled(job) ? -ECANCELED : (*errp ? -EIO : 0);
}

/* Paused and resumed: the work waits between two chunks */
static void coroutine_fn drbd_job_set_paused(DrbdJob *dj, bool paused)
{
    BDRVDrbdState *s = dj->s;

    if (s) {
        qemu_mutex_lock(&s->lock);
        drbd_conn(s)->job_paused[dj->kind] = paused;
        qemu_mutex_unlock(&s->lock);
        if (!paused) {
            drbd_job_kick(s);
        }
    }
}

static void coroutine_fn drbd_job_pause(Job *job)
{
    drbd_job_set_paused(container_of(job, DrbdJob, common), true);
}

static void coroutine_fn drbd_job_resume(Job *job)
{
    drbd_job_set_paused(container_of(job, DrbdJob, common), false);
}

static void drbd_job_free(Job *job)
{
    DrbdJob *dj = container_of(job, DrbdJob, common);

    g_free(dj->verify_error);
}

static const JobDriver drbd_job_driver[DRBD_JOB__MAX] = {
    [DRBD_JOB_RESYNC] = {
        .instance_size  = sizeof(DrbdJob),
        .job_type       = JOB_TYPE_DRBD_RESYNC,
        .run            = drbd_job_run,
        .pause          = drbd_job_pause,
        .resume         = drbd_job_resume,
        .free           = drbd_job_free,
    },
    [DRBD_JOB_VERIFY] = {
        .instance_size  = sizeof(DrbdJob),
        .job_type       = JOB_TYPE_DRBD_VERIFY,
        .run            = drbd_job_run,
        .pause          = drbd_job_pause,
        .resume         = drbd_job_resume,
        .free           = drbd_job_free,
    },
};

/* Main loop: the job of @kind, or NULL if the node has none */
static DrbdJob *drbd_job_new(BDRVDrbdState *s, DrbdJobKind kind)
{
    const char *name = bdrv_get_node_name(s->bs);
    g_autofree char *id = NULL;
    Error *local_err = NULL;
    DrbdJob *dj;

    GLOBAL_STATE_CODE();
    if (!id_wellformed(name)) {
        return NULL;
    }
    id = g_strconcat(drbd_job_prefix[kind], name, NULL);
    dj = job_create(id, &drbd_job_driver[kind], NULL, qemu_get_aio_context(),
                    JOB_DEFAULT, NULL, NULL, &local_err);
    if (!dj) {
        /* The user took the id: the work runs without a job */
        warn_reportf_err(local_err, "drbd node '%s': no job for it: ",
                         drbd_name(s));
        return NULL;
    }
    dj->s = s;
    dj->kind = kind;
    drbd_conn(s)->jobs[kind] = dj;
    trace_drbd_job_new(s->bs, id);
    return dj;
}

static void drbd_job_resync_bh(void *opaque)
{
    BDRVDrbdState *s = opaque;
    DrbdConnection *conn = drbd_conn(s);
    DrbdJob *dj;

    if (!qatomic_read(&s->closing) && !conn->jobs[DRBD_JOB_RESYNC]) {
        dj = drbd_job_new(s, DRBD_JOB_RESYNC);
        if (dj) {
            job_start(&dj->common);
        }
    }
    qatomic_dec(&conn->job_bhs);
    aio_wait_kick();
}

void drbd_job_resync_started(BDRVDrbdState *s)
{
    /* The resync runs in the node's context; jobs are the main loop's */
    qatomic_inc(&drbd_conn(s)->job_bhs);
    aio_bh_schedule_oneshot(qemu_get_aio_context(), drbd_job_resync_bh, s);
}

DrbdJob *drbd_job_verify_new(BDRVDrbdState *s, DrbdVerify *v)
{
    DrbdJob *dj = drbd_job_new(s, DRBD_JOB_VERIFY);

    if (dj) {
        dj->verify = v;
    }
    return dj;
}

void drbd_job_verify_start(DrbdJob *dj)
{
    job_start(&dj->common);
}

void drbd_job_verify_done_locked(DrbdJob *dj, const char *error)
{
    dj->verify_error = g_strdup(error);
    dj->verify = NULL;
    qatomic_set(&dj->verify_done, true);
    qemu_co_sleep_wake(&dj->verify_end);
    /*
     * End the job now, not at its next look: a verify started after the
     * event finds the id free.  (The job reads verify_done under
     * s->lock, which we hold: it cannot be gone yet.)
     */
    job_enter(&dj->common);
}

void drbd_job_kick(BDRVDrbdState *s)
{
    DrbdPeer *peer;

    qemu_mutex_lock(&s->lock);
    peer = drbd_peer_get_locked(drbd_conn(s));
    qemu_mutex_unlock(&s->lock);
    if (peer) {
        /*
         * A resync asleep while paused, or at its rate, looks again (a
         * paused verify looks every 100 ms)
         */
        drbd_sleep_wake(s, &peer->resync_sleep, false);
        drbd_peer_put(peer);
    }
}

bool drbd_job_paused(BDRVDrbdState *s, DrbdJobKind kind)
{
    bool paused;

    qemu_mutex_lock(&s->lock);
    paused = drbd_conn(s)->job_paused[kind];
    qemu_mutex_unlock(&s->lock);
    return paused;
}

void drbd_job_detach(BDRVDrbdState *s)
{
    DrbdConnection *conn = drbd_conn(s);
    int i;

    GLOBAL_STATE_CODE();
    /* A job the resync asked for before it ended: let it be made, or not */
    AIO_WAIT_WHILE_UNLOCKED(NULL, qatomic_read(&conn->job_bhs));
    for (i = 0; i < DRBD_JOB__MAX; i++) {
        DrbdJob *dj = conn->jobs[i];

        if (dj) {
            /* Its next look ends it, with the reason */
            dj->s = NULL;
            conn->jobs[i] = NULL;
            job_enter(&dj->common);
        }
    }
}
