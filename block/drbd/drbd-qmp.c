/*
 * DRBD-style replicated block device: QMP commands
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "block/block_int.h"
#include "qapi/error.h"
#include "qapi/qapi-commands-drbd.h"

#include "drbd-int.h"

static BDRVDrbdState *drbd_find(const char *node_name, Error **errp)
{
    BlockDriverState *bs = bdrv_find_node(node_name);

    if (!bs) {
        error_setg(errp, "no block node named '%s'", node_name);
        return NULL;
    }
    if (!drbd_is_drbd_node(bs)) {
        error_setg(errp, "block node '%s' is not a drbd node (driver %s)",
                   node_name, bdrv_get_format_name(bs));
        return NULL;
    }
    return bs->opaque;
}

DrbdInfoList *qmp_query_drbd(Error **errp)
{
    DrbdInfoList *head = NULL, **tail = &head;
    BlockDriverState *bs = NULL;

    GLOBAL_STATE_CODE();
    GRAPH_RDLOCK_GUARD_MAINLOOP();

    while ((bs = bdrv_next_all_states(bs))) {
        DrbdInfo *info;

        if (!drbd_is_drbd_node(bs)) {
            continue;
        }
        info = g_new0(DrbdInfo, 1);
        drbd_fill_info(bs->opaque, info);
        QAPI_LIST_APPEND(tail, info);
    }
    return head;
}

void coroutine_fn qmp_drbd_promote(const char *node_name, bool has_force,
                                   bool force, Error **errp)
{
    BDRVDrbdState *s = drbd_find(node_name, errp);

    if (s) {
        drbd_co_promote(s, has_force && force, errp);
    }
}

void qmp_drbd_resume_io(const char *node_name, Error **errp)
{
    BDRVDrbdState *s = drbd_find(node_name, errp);

    if (s) {
        if (drbd_fence_answer(s) && drbd_md_sync_all(s) < 0) {
            error_setg(errp, "drbd node '%s': could not record in its "
                       "metadata that its peers are outdated", node_name);
        }
        drbd_resume_io(s);
    }
}

void coroutine_fn qmp_drbd_outdate(const char *node_name, Error **errp)
{
    BDRVDrbdState *s = drbd_find(node_name, errp);

    if (s) {
        drbd_co_outdate(s, errp);
    }
}

void qmp_drbd_connect(const char *node_name, bool has_discard_my_data,
                      bool discard_my_data, Error **errp)
{
    BDRVDrbdState *s = drbd_find(node_name, errp);

    if (!s) {
        return;
    }
    if (!drbd_replicates(s)) {
        error_setg(errp, "drbd node '%s' has no peer to connect to",
                   node_name);
        return;
    }
    drbd_connect_again(s, has_discard_my_data && discard_my_data);
}

void qmp_drbd_disconnect(const char *node_name, bool has_peer_node_id,
                         uint8_t peer_node_id, Error **errp)
{
    BDRVDrbdState *s = drbd_find(node_name, errp);

    if (!s) {
        return;
    }
    if (!drbd_replicates(s)) {
        error_setg(errp, "drbd node '%s' has no peer to disconnect from",
                   node_name);
        return;
    }
    drbd_disconnect(s, has_peer_node_id ? peer_node_id : -1, errp);
}

void coroutine_fn qmp_drbd_invalidate(const char *node_name, Error **errp)
{
    BDRVDrbdState *s = drbd_find(node_name, errp);

    if (s) {
        drbd_co_invalidate(s, false, errp);
    }
}

void coroutine_fn qmp_drbd_invalidate_remote(const char *node_name,
                                            Error **errp)
{
    BDRVDrbdState *s = drbd_find(node_name, errp);

    if (s) {
        drbd_co_invalidate(s, true, errp);
    }
}

void qmp_drbd_set_resync_rate(const char *node_name, uint64_t rate,
                              Error **errp)
{
    BDRVDrbdState *s = drbd_find(node_name, errp);

    if (s) {
        drbd_resync_set_rate(s, rate);
    }
}

void qmp_drbd_verify(const char *node_name, bool has_start, uint64_t start,
                     bool has_length, uint64_t length, bool has_resync,
                     bool resync, bool has_peer_node_id,
                     uint8_t peer_node_id, Error **errp)
{
    BDRVDrbdState *s = drbd_find(node_name, errp);

    if (s) {
        drbd_verify_start(s, has_start, start, has_length, length,
                          has_resync && resync,
                          has_peer_node_id ? peer_node_id : -1, errp);
    }
}

void coroutine_fn qmp_drbd_demote(const char *node_name, Error **errp)
{
    BDRVDrbdState *s = drbd_find(node_name, errp);

    if (!s) {
        return;
    }
    if (s->auto_promote && qatomic_read(&s->write_perm)) {
        error_setg(errp, "'%s' is open for writing and manages its role "
                   "itself (role auto): it is demoted when its last writer "
                   "lets go", node_name);
        error_append_hint(errp, "Remove the device or export that writes "
                          "to it, or open it with role=primary to promote "
                          "and demote it yourself.\n");
        return;
    }
    drbd_co_demote(s, errp);
}

void coroutine_fn qmp_drbd_detach(const char *node_name, Error **errp)
{
    BDRVDrbdState *s = drbd_find(node_name, errp);

    if (s) {
        drbd_co_detach_disk(s, errp);
    }
}

void qmp_drbd_attach(const char *node_name, const char *file,
                     const char *meta, Error **errp)
{
    BDRVDrbdState *s = drbd_find(node_name, errp);

    if (s) {
        drbd_attach_disk(s, file, meta, errp);
    }
}
