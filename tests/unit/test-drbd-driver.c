/*
 * drbd block driver: the node opens over its local image, what is
 * written through it lands there, and it reports the image's blocks as
 * its own
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "block/block_int.h"
#include "block/graph-lock.h"
#include "system/block-backend.h"
#include "qapi/error.h"
#include "qemu/coroutine.h"
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

/* A new temporary file of IMG_SIZE bytes, all holes; returns its name */
static char *make_image(void)
{
    char *path = NULL;
    int fd = g_file_open_tmp("test-drbd-XXXXXX", &path, NULL);

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(ftruncate(fd, IMG_SIZE), ==, 0);
    close(fd);
    return path;
}

/* With @data non-NULL, the node is opened with discard=unmap */
static void fixture_setup(Fixture *f, gconstpointer data)
{
    QDict *opts;

    f->path = make_image();
    opts = drbd_options(f->path);
    if (data) {
        qdict_put_str(opts, "discard", "unmap");
    }
    f->blk = blk_new_open(NULL, NULL, opts, BDRV_O_RDWR, &error_abort);
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

/* Read @len bytes at @offset through the drbd node */
static uint8_t *read_node(Fixture *f, int64_t offset, size_t len)
{
    uint8_t *buf = g_malloc(len);

    g_assert_cmpint(blk_pread(f->blk, offset, len, buf, 0), ==, 0);
    return buf;
}

/* Whether all @len bytes at @buf are @c */
static bool all_bytes(const uint8_t *buf, size_t len, uint8_t c)
{
    size_t i;

    for (i = 0; i < len; i++) {
        if (buf[i] != c) {
            return false;
        }
    }
    return true;
}

static void test_write_zeroes(Fixture *f, gconstpointer data)
{
    g_autofree uint8_t *pattern = g_malloc(192 * KiB);
    g_autofree uint8_t *node = NULL;
    g_autofree uint8_t *disk = NULL;

    memset(pattern, 0x5a, 192 * KiB);
    g_assert_cmpint(blk_pwrite(f->blk, 0, 192 * KiB, pattern, 0), ==, 0);
    g_assert_cmpint(blk_pwrite_zeroes(f->blk, 64 * KiB, 64 * KiB, 0), ==, 0);
    g_assert_cmpint(blk_flush(f->blk), ==, 0);

    /* Zeroes in the range, the pattern around it, on the node and file */
    node = read_node(f, 0, 192 * KiB);
    disk = read_image(f, 0, 192 * KiB);
    g_assert_true(all_bytes(node, 64 * KiB, 0x5a));
    g_assert_true(all_bytes(node + 64 * KiB, 64 * KiB, 0));
    g_assert_true(all_bytes(node + 128 * KiB, 64 * KiB, 0x5a));
    g_assert_cmpmem(disk, 192 * KiB, node, 192 * KiB);
}

/*
 * What a plain file node over a temporary file, opened with
 * discard=unmap like the drbd node, reads after @len bytes at @offset of
 * @pattern (@size bytes) were written and discarded: zeroes where the
 * file system punches holes, the old data where it cannot discard
 */
static uint8_t *discarded_by_file(const uint8_t *pattern, size_t size,
                                  int64_t offset, int64_t len)
{
    g_autofree char *path = make_image();
    QDict *opts = qdict_new();
    BlockBackend *blk;
    uint8_t *buf = g_malloc(size);

    qdict_put_str(opts, "driver", "file");
    qdict_put_str(opts, "filename", path);
    qdict_put_str(opts, "discard", "unmap");
    blk = blk_new_open(NULL, NULL, opts, BDRV_O_RDWR, &error_abort);
    g_assert_cmpint(blk_pwrite(blk, 0, size, pattern, 0), ==, 0);
    g_assert_cmpint(blk_pdiscard(blk, offset, len, 0), ==, 0);
    g_assert_cmpint(blk_flush(blk), ==, 0);
    g_assert_cmpint(blk_pread(blk, 0, size, buf, 0), ==, 0);
    blk_unref(blk);
    unlink(path);
    return buf;
}

static void test_discard(Fixture *f, gconstpointer data)
{
    g_autofree uint8_t *pattern = g_malloc(192 * KiB);
    g_autofree uint8_t *expected = NULL;
    g_autofree uint8_t *node = NULL;
    g_autofree uint8_t *disk = NULL;
    bool punched;

    memset(pattern, 0xc3, 192 * KiB);
    expected = discarded_by_file(pattern, 192 * KiB, 64 * KiB, 64 * KiB);
    /* The file node either punched a hole or left the data, not a mix */
    punched = all_bytes(expected + 64 * KiB, 64 * KiB, 0);
    g_assert_true(punched || all_bytes(expected + 64 * KiB, 64 * KiB, 0xc3));
    g_test_message("discard on %s: %s", g_get_tmp_dir(),
                   punched ? "reads as zeroes" : "keeps the data");

    g_assert_cmpint(blk_pwrite(f->blk, 0, 192 * KiB, pattern, 0), ==, 0);
    g_assert_cmpint(blk_pdiscard(f->blk, 64 * KiB, 64 * KiB, 0), ==, 0);
    g_assert_cmpint(blk_flush(f->blk), ==, 0);

    /* The node reads what the file node reads, and so does the image */
    node = read_node(f, 0, 192 * KiB);
    disk = read_image(f, 0, 192 * KiB);
    g_assert_cmpmem(node, 192 * KiB, expected, 192 * KiB);
    g_assert_cmpmem(disk, 192 * KiB, expected, 192 * KiB);
    /* and around the discarded range, the data is untouched */
    g_assert_true(all_bytes(node, 64 * KiB, 0xc3));
    g_assert_true(all_bytes(node + 128 * KiB, 64 * KiB, 0xc3));
}

/* The driver's own answer, as the block layer asks for it */
typedef struct BlockStatusCo {
    BlockDriverState *bs;
    int64_t offset;
    int64_t bytes;
    int64_t pnum;
    int64_t map;
    BlockDriverState *file;
    int ret;
    bool done;
} BlockStatusCo;

static void coroutine_fn block_status_co(void *opaque)
{
    BlockStatusCo *c = opaque;

    bdrv_graph_co_rdlock();
    c->ret = c->bs->drv->bdrv_co_block_status(c->bs, true, c->offset,
                                              c->bytes, &c->pnum, &c->map,
                                              &c->file);
    bdrv_graph_co_rdunlock();
    c->done = true;
}

static void test_block_status(Fixture *f, gconstpointer data)
{
    static const struct {
        int64_t offset;
        int64_t bytes;
    } cases[] = {
        { 0, 512 },
        { 4 * KiB, 8 * KiB },
        { 64 * KiB, 128 * KiB },
        { IMG_SIZE - 4 * KiB, 4 * KiB },
        { 0, IMG_SIZE },
    };
    BlockDriverState *bs = blk_bs(f->blk);
    BlockDriverState *file_bs = bs->file->bs;
    g_autofree uint8_t *pattern = g_malloc(64 * KiB);
    size_t i;

    /* Data in the first 64 KiB, a hole after it (where the fs has holes) */
    memset(pattern, 0x11, 64 * KiB);
    g_assert_cmpint(blk_pwrite(f->blk, 0, 64 * KiB, pattern, 0), ==, 0);
    g_assert_cmpint(blk_flush(f->blk), ==, 0);

    for (i = 0; i < ARRAY_SIZE(cases); i++) {
        BlockStatusCo c = {
            .bs = bs,
            .offset = cases[i].offset,
            .bytes = cases[i].bytes,
            .pnum = -1,
            .map = -1,
        };
        int64_t pnum, map, file_pnum, file_map;
        BlockDriverState *file = NULL, *file_file = NULL;
        int ret, file_ret;

        /*
         * The driver maps every range whole, 1:1, onto its file, and
         * leaves the rest (data or zeroes) to the file
         */
        qemu_coroutine_enter(qemu_coroutine_create(block_status_co, &c));
        while (!c.done) {
            aio_poll(qemu_get_aio_context(), true);
        }
        g_assert_cmpint(c.ret, ==, BDRV_BLOCK_RAW | BDRV_BLOCK_OFFSET_VALID);
        g_assert_cmpint(c.pnum, ==, cases[i].bytes);
        g_assert_cmpint(c.map, ==, cases[i].offset);
        g_assert_true(c.file == file_bs);

        /* So the block layer answers for the node what the file says */
        bdrv_graph_rdlock_main_loop();
        ret = bdrv_block_status(bs, cases[i].offset, cases[i].bytes,
                                &pnum, &map, &file);
        file_ret = bdrv_block_status(file_bs, cases[i].offset,
                                     cases[i].bytes, &file_pnum, &file_map,
                                     &file_file);
        bdrv_graph_rdunlock_main_loop();

        g_assert_cmpint(file_ret, >=, 0);
        g_assert_cmpint(ret, ==, file_ret);
        g_assert_cmpint(pnum, ==, file_pnum);
        g_assert_cmpint(map, ==, file_map);
        g_assert_true(file == file_file);
        g_assert_true(file == file_bs);
        g_assert_cmpint(map, ==, cases[i].offset);
        g_assert_cmpint(pnum, >, 0);
        g_assert_cmpint(pnum, <=, cases[i].bytes);
        g_assert_true(ret & BDRV_BLOCK_OFFSET_VALID);
        g_assert_false(ret & BDRV_BLOCK_RAW);
        /* What was written is data, whatever the file system */
        if (cases[i].offset < 64 * KiB) {
            g_assert_cmphex(ret & (BDRV_BLOCK_DATA | BDRV_BLOCK_ZERO), ==,
                            BDRV_BLOCK_DATA);
        }
    }
}

static void test_unknown_option(void)
{
    g_autofree char *path = make_image();
    QDict *opts;
    Error *err = NULL;
    BlockBackend *blk;

    /* The options open the image, without the unknown one */
    blk = blk_new_open(NULL, NULL, drbd_options(path), BDRV_O_RDWR,
                       &error_abort);
    blk_unref(blk);

    opts = drbd_options(path);
    qdict_put_str(opts, "no-such-option", "1");
    blk = blk_new_open(NULL, NULL, opts, BDRV_O_RDWR, &err);
    g_assert_null(blk);
    g_assert_nonnull(err);
    g_assert_cmpstr(error_get_pretty(err), ==,
                    "Block format 'drbd' does not support the option "
                    "'no-such-option'");
    error_free(err);
    unlink(path);
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
    g_autofree char *path = make_image();
    QDict *opts;
    Error *err = NULL;
    BlockBackend *blk;

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
    g_test_add("/drbd/driver/write-zeroes", Fixture, NULL,
               fixture_setup, test_write_zeroes, fixture_teardown);
    g_test_add("/drbd/driver/discard", Fixture, "unmap",
               fixture_setup, test_discard, fixture_teardown);
    g_test_add("/drbd/driver/block-status", Fixture, NULL,
               fixture_setup, test_block_status, fixture_teardown);
    g_test_add_func("/drbd/driver/unknown-option", test_unknown_option);
    g_test_add_func("/drbd/driver/missing-file", test_missing_file);

    return g_test_run();
}
