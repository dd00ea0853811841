/*
 * What the libFuzzer targets need to link against QEMU's libqemuutil.a
 * and nothing else of QEMU
 *
 * Objects that libqemuutil.a brings in for what the targets use refer to
 * QOM (util/thread-context.c, registered with module_init(), which the
 * targets never run) and to the crypto hash (hbitmap_sha256(), which they
 * never call).  These stand in for them and abort if ever called.  The
 * unit test test-drbd-fuzz links the real ones and not this file.
 *
 * Copyright (c) 2026 The qemu-drbd authors
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "qemu/osdep.h"
#include "crypto/hash.h"
#include "qom/object.h"

static void G_NORETURN unreachable(const char *what)
{
    fprintf(stderr, "fuzz stub: %s called\n", what);
    abort();
}

Object *object_dynamic_cast_assert(Object *obj, const char *typename,
                                   const char *file, int line,
                                   const char *func)
{
    unreachable(__func__);
}

ObjectClass *object_class_dynamic_cast_assert(ObjectClass *klass,
                                              const char *typename,
                                              const char *file, int line,
                                              const char *func)
{
    unreachable(__func__);
}

ObjectProperty *object_class_property_add(ObjectClass *klass,
                                          const char *name,
                                          const char *type,
                                          ObjectPropertyAccessor *get,
                                          ObjectPropertyAccessor *set,
                                          ObjectPropertyRelease *release,
                                          void *opaque)
{
    unreachable(__func__);
}

const char *object_get_canonical_path_component(const Object *obj)
{
    unreachable(__func__);
}

Type type_register_static(const TypeInfo *info)
{
    unreachable(__func__);
}

int qcrypto_hash_digest(QCryptoHashAlgo alg, const char *buf, size_t len,
                        char **digest, Error **errp)
{
    unreachable(__func__);
}
