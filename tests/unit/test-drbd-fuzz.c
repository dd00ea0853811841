/*
 * The fuzz targets of tests/fuzz, each run once over its seed corpus
 * (tests/fuzz/corpus/TARGET/): every seed, and every input a fuzzer once
 * found and that was added there, must go through without breaking an
 * invariant.  The fuzzing itself is `make fuzz` (scripts/fuzz.sh).
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "../fuzz/fuzz.h"

typedef struct FuzzTarget {
    const char *name;
    int (*run)(const uint8_t *data, size_t size);
} FuzzTarget;

static const FuzzTarget targets[] = {
    { "wire", drbd_fuzz_wire },
    { "rle", drbd_fuzz_rle },
    { "superblock", drbd_fuzz_superblock },
    { "al", drbd_fuzz_al },
    { "gate", drbd_fuzz_gate },
};

static void test_corpus(gconstpointer opaque)
{
    const FuzzTarget *t = opaque;
    g_autofree char *dir_name = g_build_filename(DRBD_FUZZ_CORPUS, t->name,
                                                 NULL);
    g_autoptr(GError) err = NULL;
    g_autoptr(GDir) dir = g_dir_open(dir_name, 0, &err);
    const char *name;
    unsigned n = 0;

    g_assert_no_error(err);
    while ((name = g_dir_read_name(dir))) {
        g_autofree char *path = g_build_filename(dir_name, name, NULL);
        g_autofree char *data = NULL;
        size_t len;

        if (!g_file_get_contents(path, &data, &len, &err)) {
            g_assert_no_error(err);
        }
        g_assert_cmpint(t->run((const uint8_t *)data, len), ==, 0);
        n++;
    }
    /* A target without seeds would test nothing */
    g_assert_cmpuint(n, >, 0);
    g_test_message("%s: %u inputs", t->name, n);
}

int main(int argc, char **argv)
{
    size_t i;

    g_test_init(&argc, &argv, NULL);
    for (i = 0; i < ARRAY_SIZE(targets); i++) {
        g_autofree char *path = g_strdup_printf("/drbd-fuzz/corpus/%s",
                                                targets[i].name);

        g_test_add_data_func(path, &targets[i], test_corpus);
    }
    return g_test_run();
}
