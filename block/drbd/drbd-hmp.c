/*
 * DRBD-style replicated block device: HMP "info drbd"
 *
 * The layout is /proc/drbd's, which DRBD operators and their scripts
 * read every day (see proc.h).
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

#include "proc.h"

void hmp_info_drbd(Monitor *mon, const QDict *qdict)
{
    g_autoptr(DrbdInfoList) list = qmp_query_drbd(&error_abort);
    g_autoptr(GString) out = g_string_new(NULL);
    DrbdInfoList *l;
    unsigned minor = 0;

    if (!list) {
        monitor_printf(mon, "No drbd nodes\n");
        return;
    }
    for (l = list; l; l = l->next) {
        drbd_proc_format(out, minor++, l->value);
    }
    monitor_puts(mon, out->str);
}
