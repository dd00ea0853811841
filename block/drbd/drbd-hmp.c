/*
 * DRBD-style replicated block device: HMP "info drbd"
 *
 * The layout follows /proc/drbd, which DRBD operators read every day.
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "block/block-hmp-cmds.h"
#include "monitor/monitor.h"
#include "qapi/error.h"
#include "qapi/qapi-commands-drbd.h"

void hmp_info_drbd(Monitor *mon, const QDict *qdict)
{
    g_autoptr(DrbdInfoList) list = qmp_query_drbd(&error_abort);
    DrbdInfoList *l;

    if (!list) {
        monitor_printf(mon, "No drbd nodes\n");
        return;
    }
    for (l = list; l; l = l->next) {
        DrbdInfo *i = l->value;
        DrbdCounters *c = i->counters;
        strList *h;

        monitor_printf(mon, "%s: resource %s node-id %u protocol %s\n",
                       i->node_name, i->resource, i->node_id,
                       DrbdProtocol_str(i->protocol));
        monitor_printf(mon, "    cs:%s ro:%s/%s ds:%s/%s\n",
                       DrbdConnState_str(i->connection),
                       DrbdRole_str(i->role), DrbdRole_str(i->peer_role),
                       DrbdDiskState_str(i->disk),
                       DrbdDiskState_str(i->peer_disk));
        monitor_printf(mon, "    ns:%" PRIu64 " nr:%" PRIu64 " dw:%" PRIu64
                       " dr:%" PRIu64 " al:%" PRIu64 " bm:%" PRIu64
                       " lo:%u pe:%u ua:%u ap:%u ep:%u oos:%" PRIu64 "\n",
                       c->ns, c->nr, c->dw, c->dr, c->al, c->bm, c->lo,
                       c->pe, c->ua, c->ap, c->ep, c->oos);
        if (i->resync) {
            monitor_printf(mon, "    resync: %" PRIu64 " of %" PRIu64
                           " bytes", i->resync->done, i->resync->total);
            if (i->resync->rate) {
                monitor_printf(mon, " at up to %" PRIu64 " bytes/s",
                               i->resync->rate);
            }
            monitor_printf(mon, "\n");
        }
        monitor_printf(mon, "    uuids: %s:%s", i->uuids->current,
                       i->uuids->bitmap);
        for (h = i->uuids->history; h; h = h->next) {
            monitor_printf(mon, ":%s", h->value);
        }
        monitor_printf(mon, "\n");
        if (i->last_error) {
            monitor_printf(mon, "    last error: %s\n", i->last_error);
        }
    }
}
