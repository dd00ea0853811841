/*
 * drbd block driver: the node opens over its local image and what is
 * written through it lands there
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "block/block_int.h"
#include "system/block-backend.h"
#include "qapi/error.h"
#include "qemu/main-loop.h"
#include "qemu/units.h"
#include "qobject/qdict.h"

#define IMG_SIZE (1 * MiB)

typedef struct Fixture {
    char *path;
    BlockBackend *blk;
} Fixture;

static QDict *drbd_options(const char *path)
{
    QDict *opts = qdict_new();

    qdict_put_str(opts, "driver", "drbd");
    qdict_put_str(opts, "role", "primary");
    qdict_put_str(opts, "meta-disk", "none");
    qdict_put_str(opts, "file.driver", "file");
    qdict_put_str(opts, "file.filename", path);
    return opts;
}

static void fixture_setup(Fixture *f, gconstpointer data)
{
    int fd = g_file_open_tmp("test-drbd-XXXXXX", &f->path, NULL);

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(ftruncate(fd, IMG_SIZE), ==, 0);
    close(fd);

    f->blk = blk_new_open(NULL, NULL, drbd_options(f->path),
                          BDRV_O_RDWR, &error_abort);
}

static void fixture_teardown(Fixture *f, gconstpointer data)
{
    blk_unref(f->blk);
    unlink(f->path);
    g_free(f->path);
}

/* Read @len bytes at @offset of the image file itself, around the driver */
static uint8_t *read_image(Fixture *f, int64_t offset, size_t len)
{
    uint8_t *buf = g_malloc(len);
    int fd = open(f->path, O_RDONLY);

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(pread(fd, buf, len, offset), ==, len);
    close(fd);
    return buf;
}

static void test_size(Fixture *f, gconstpointer data)
{
    g_assert_cmpint(blk_getlength(f->blk), ==, IMG_SIZE);
    g_assert_cmpstr(bdrv_get_format_name(blk_bs(f->blk)), ==, "drbd");
}

static void test_write_lands_in_image(Fixture *f, gconstpointer data)
{
    g_autofree uint8_t *pattern = g_malloc(64 * KiB);
    g_autofree uint8_t *back = g_malloc(64 * KiB);
    g_autofree uint8_t *disk = NULL;

    memset(pattern, 0xa5, 64 * KiB);
    g_assert_cmpint(blk_pwrite(f->blk, 192 * KiB, 64 * KiB, pattern, 0),
                    ==, 0);
    g_assert_cmpint(blk_flush(f->blk), ==, 0);

    disk = read_image(f, 192 * KiB, 64 * KiB);
    g_assert(memcmp(disk, pattern, 64 * KiB) == 0);

    g_assert_cmpint(blk_pread(f->blk, 192 * KiB, 64 * KiB, back, 0), ==, 0);
    g_assert(memcmp(back, pattern, 64 * KiB) == 0);
}

static void test_write_zeroes_and_discard(Fixture *f, gconstpointer data)
{
    g_autofree uint8_t *pattern = g_malloc(128 * KiB);
    g_autofree uint8_t *disk = NULL;
    g_autofree uint8_t *zero = g_malloc0(64 * KiB);

    memset(pattern, 0x5a, 128 * KiB);
    g_assert_cmpint(blk_pwrite(f->blk, 0, 128 * KiB, pattern, 0), ==, 0);
    g_assert_cmpint(blk_pwrite_zeroes(f->blk, 0, 64 * KiB, 0), ==, 0);
    g_assert_cmpint(blk_pdiscard(f->blk, 64 * KiB, 64 * KiB, 0), ==, 0);
    g_assert_cmpint(blk_flush(f->blk), ==, 0);

    disk = read_image(f, 0, 64 * KiB);
    g_assert(memcmp(disk, zero, 64 * KiB) == 0);
}

static void test_block_status_maps_to_file(Fixture *f, gconstpointer data)
{
    BlockDriverState *bs = blk_bs(f->blk);
    BlockDriverState *file = NULL;
    int64_t pnum, map;
    int ret;

    bdrv_graph_rdlock_main_loop();
    ret = bdrv_block_status(bs, 4 * KiB, 8 * KiB, &pnum, &map, &file);
    bdrv_graph_rdunlock_main_loop();

    g_assert_cmpint(ret, >=, 0);
    g_assert(ret & BDRV_BLOCK_OFFSET_VALID);
    g_assert_cmpint(map, ==, 4 * KiB);
    g_assert(file == bs->file->bs);
}

static void test_unknown_option(void)
{
    QDict *opts = drbd_options("/nonexistent");
    Error *err = NULL;
    BlockBackend *blk;

    qdict_put_str(opts, "no-such-option", "1");
    blk = blk_new_open(NULL, NULL, opts, BDRV_O_RDWR, &err);
    g_assert_null(blk);
    g_assert_nonnull(err);
    error_free(err);
}

static void test_missing_file(void)
{
    QDict *opts = qdict_new();
    Error *err = NULL;
    BlockBackend *blk;

    qdict_put_str(opts, "driver", "drbd");
    blk = blk_new_open(NULL, NULL, opts, BDRV_O_RDWR, &err);
    g_assert_null(blk);
    g_assert_nonnull(err);
    g_assert_nonnull(strstr(error_get_pretty(err), "file"));
    error_free(err);
}

/* A plain file is not a drbd image unless told there is no metadata */
static void test_no_metadata(void)
{
    g_autofree char *path = NULL;
    int fd = g_file_open_tmp("test-drbd-XXXXXX", &path, NULL);
    QDict *opts;
    Error *err = NULL;
    BlockBackend *blk;

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(ftruncate(fd, IMG_SIZE), ==, 0);
    close(fd);

    opts = drbd_options(path);
    qdict_del(opts, "meta-disk");
    blk = blk_new_open(NULL, NULL, opts, BDRV_O_RDWR, &err);
    g_assert_null(blk);
    g_assert_nonnull(err);
    g_assert_nonnull(strstr(error_get_pretty(err),
                            "holds no usable drbd metadata"));
    error_free(err);
    unlink(path);
}

int main(int argc, char **argv)
{
    bdrv_init();
    qemu_init_main_loop(&error_abort);
    g_test_init(&argc, &argv, NULL);

    g_test_add_func("/drbd/driver/no-metadata", test_no_metadata);
    g_test_add("/drbd/driver/size", Fixture, NULL,
               fixture_setup, test_size, fixture_teardown);
    g_test_add("/drbd/driver/write-lands-in-image", Fixture, NULL,
               fixture_setup, test_write_lands_in_image, fixture_teardown);
    g_test_add("/drbd/driver/write-zeroes-and-discard", Fixture, NULL,
               fixture_setup, test_write_zeroes_and_discard,
               fixture_teardown);
    g_test_add("/drbd/driver/block-status", Fixture, NULL,
               fixture_setup, test_block_status_maps_to_file,
               fixture_teardown);
    g_test_add_func("/drbd/driver/unknown-option", test_unknown_option);
    g_test_add_func("/drbd/driver/missing-file", test_missing_file);

    return g_test_run();
}
