/*
 * DRBD-style replicated block device: the /proc/drbd view of a node
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "qemu/units.h"

#include "proc.h"

static const char *const drbd_proc_cstate_names[DRBD_CONN_STATE__MAX] = {
    [DRBD_CONN_STATE_STANDALONE]        = "StandAlone",
    [DRBD_CONN_STATE_WF_CONNECTION]     = "WFConnection",
    [DRBD_CONN_STATE_WF_REPORT_PARAMS]  = "WFReportParams",
    [DRBD_CONN_STATE_CONNECTED]         = "Connected",
    [DRBD_CONN_STATE_SYNC_SOURCE]       = "SyncSource",
    [DRBD_CONN_STATE_SYNC_TARGET]       = "SyncTarget",
    [DRBD_CONN_STATE_AHEAD]             = "Ahead",
    [DRBD_CONN_STATE_BEHIND]            = "Behind",
};

static const char *const drbd_proc_role_names[DRBD_ROLE__MAX] = {
    [DRBD_ROLE_PRIMARY]                 = "Primary",
    [DRBD_ROLE_SECONDARY]               = "Secondary",
    [DRBD_ROLE_UNKNOWN]                 = "Unknown",
};

static const char *const drbd_proc_disk_names[DRBD_DISK_STATE__MAX] = {
    [DRBD_DISK_STATE_DISKLESS]          = "Diskless",
    [DRBD_DISK_STATE_ATTACHING]         = "Attaching",
    [DRBD_DISK_STATE_FAILED]            = "Failed",
    [DRBD_DISK_STATE_INCONSISTENT]      = "Inconsistent",
    [DRBD_DISK_STATE_OUTDATED]          = "Outdated",
    [DRBD_DISK_STATE_DUNKNOWN]          = "DUnknown",
    [DRBD_DISK_STATE_CONSISTENT]        = "Consistent",
    [DRBD_DISK_STATE_UP_TO_DATE]        = "UpToDate",
};

const char *drbd_proc_cstate_name(DrbdConnState cstate)
{
    assert(cstate < DRBD_CONN_STATE__MAX);
    return drbd_proc_cstate_names[cstate];
}

const char *drbd_proc_role_name(DrbdRole role)
{
    assert(role < DRBD_ROLE__MAX);
    return drbd_proc_role_names[role];
}

const char *drbd_proc_disk_name(DrbdDiskState disk)
{
    assert(disk < DRBD_DISK_STATE__MAX);
    return drbd_proc_disk_names[disk];
}

/*
 * Progress as DRBD draws it: a bar of 20 steps, the part done in tenths
 * of a percent, and what is left of the total
 */
static void drbd_proc_bar(GString *out, const char *what, uint64_t total,
                          uint64_t done)
{
    uint64_t left = (total - MIN(done, total)) / KiB;
    unsigned permille;
    unsigned x;
    unsigned i;

    total /= KiB;
    permille = total ? (total - left) * 1000 / total : 1000;
    x = permille / 50;

    g_string_append(out, "\t[");
    for (i = 1; i < x; i++) {
        g_string_append_c(out, '=');
    }
    g_string_append_c(out, '>');
    for (i = x; i < 20; i++) {
        g_string_append_c(out, '.');
    }
    g_string_append_printf(out, "] %s:%3u.%u%% (%" PRIu64 "/%" PRIu64
                           ")K\n", what, permille / 10, permille % 10, left,
                           total);
}

/* @n with a comma between groups of three digits, as DRBD prints rates */
static void drbd_proc_grouped(GString *out, uint64_t n)
{
    g_autofree char *digits = g_strdup_printf("%" PRIu64, n);
    size_t len = strlen(digits);
    size_t i;

    for (i = 0; i < len; i++) {
        if (i && (len - i) % 3 == 0) {
            g_string_append_c(out, ',');
        }
        g_string_append_c(out, digits[i]);
    }
}

/*
 * The line under a bar: the time left at the current speed, the current
 * and the average speed, and the limit (@want, 0 for none), in KiB/s
 */
static void drbd_proc_speed(GString *out, uint64_t speed, uint64_t average,
                            bool has_finish, uint64_t finish, uint64_t want)
{
    if (has_finish) {
        g_string_append_printf(out, "\tfinish: %" PRIu64 ":%02u:%02u",
                               finish / 3600, (unsigned)(finish % 3600 / 60),
                               (unsigned)(finish % 60));
    } else {
        g_string_append(out, "\tfinish: -:--:--");
    }
    g_string_append(out, " speed: ");
    drbd_proc_grouped(out, speed / KiB);
    g_string_append(out, " (");
    drbd_proc_grouped(out, average / KiB);
    g_string_append_c(out, ')');
    if (want) {
        g_string_append(out, " want: ");
        drbd_proc_grouped(out, want / KiB);
    }
    g_string_append_printf(out, " K/sec%s\n", has_finish ? "" : " (stalled)");
}

static void drbd_proc_resync(GString *out, const DrbdResyncInfo *r)
{
    drbd_proc_bar(out, "sync'ed", r->total, r->done);
    drbd_proc_speed(out, r->speed, r->average_speed, r->has_finish,
                    r->finish, r->rate);
}

void drbd_proc_format(GString *out, unsigned minor, const DrbdInfo *info)
{
    const DrbdCounters *c = info->counters;
    strList *h;

    g_string_append_printf(out, "%s: resource %s, node-id %u%s%s\n",
                           info->node_name, info->resource, info->node_id,
                           info->quorum ? "" : ", quorum:no",
                           !info->io_suspended ? "" :
                           info->quorum ? ", suspended:fencing" :
                           ", suspended:quorum");
    g_string_append_printf(out, "%2u: cs:%s ro:%s/%s ds:%s/%s %c r%c-%c--\n",
                           minor, drbd_proc_cstate_name(info->connection),
                           drbd_proc_role_name(info->role),
                           drbd_proc_role_name(info->peer_role),
                           drbd_proc_disk_name(info->disk),
                           drbd_proc_disk_name(info->peer_disk),
                           'A' + info->protocol,
                           info->resync && info->resync->paused_after ?
                           'a' : '-',
                           info->resync && info->resync->paused ? 'u' : '-');
    g_string_append_printf(out, "    ns:%" PRIu64 " nr:%" PRIu64
                           " dw:%" PRIu64 " dr:%" PRIu64
                           " al:%" PRIu64 " bm:%" PRIu64
                           " lo:%u pe:%u ua:%u ap:%u ep:%u wo:f"
                           " oos:%" PRIu64 "\n",
                           c->ns / KiB, c->nr / KiB, c->dw / KiB,
                           c->dr / KiB, c->al, c->bm, c->lo, c->pe, c->ua,
                           c->ap, c->ep, c->oos / KiB);
    if (info->peers && info->peers->next) {
        /* More than one peer: each on a line of its own, DRBD 9's way */
        const DrbdPeerInfoList *l;

        for (l = info->peers; l; l = l->next) {
            const DrbdPeerInfo *p = l->value;

            g_string_append_printf(out, "    peer %u: cs:%s ro:%s ds:%s %c"
                                   " ns:%" PRIu64 " nr:%" PRIu64
                                   " pe:%u ua:%u oos:%" PRIu64 "\n",
                                   p->node_id,
                                   drbd_proc_cstate_name(p->connection),
                                   drbd_proc_role_name(p->role),
                                   drbd_proc_disk_name(p->disk),
                                   'A' + p->protocol, p->ns / KiB,
                                   p->nr / KiB, p->pe, p->ua,
                                   p->out_of_sync / KiB);
        }
    }
    if (info->resync) {
        drbd_proc_resync(out, info->resync);
    }
    if (info->verify) {
        const DrbdVerifyInfo *v = info->verify;

        drbd_proc_bar(out, "verified", v->length, v->done);
        drbd_proc_speed(out, v->speed, v->average_speed, v->has_finish,
                        v->finish, 0);
    }
    g_string_append_printf(out, "    uuids: %s:%s", info->uuids->current,
                           info->uuids->bitmap);
    for (h = info->uuids->history; h; h = h->next) {
        g_string_append_printf(out, ":%s", h->value);
    }
    g_string_append_c(out, '\n');
    if (info->last_error) {
        g_string_append_printf(out, "    last error: %s\n",
                               info->last_error);
    }
    if (info->peers && info->peers->next) {
        const DrbdPeerInfoList *l;

        for (l = info->peers; l; l = l->next) {
            if (l->value->last_error &&
                g_strcmp0(l->value->last_error, info->last_error)) {
                g_string_append_printf(out, "    peer %u last error: %s\n",
                                       l->value->node_id,
                                       l->value->last_error);
            }
        }
    }
    if (info->degraded) {
        g_string_append_printf(out, "    %s\n", info->degraded);
    }
}
