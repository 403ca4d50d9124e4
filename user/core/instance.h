/* SPDX-License-Identifier: MIT */
/*
 * A backend's instance: the number its PONGs carry (include/kvsplice/
 * proto.h, KVS_OFF_INSTANCE), new whenever its cache starts empty, so that
 * a gateway can tell a restart from a backend that only went quiet.
 */
#ifndef KVS_INSTANCE_H
#define KVS_INSTANCE_H

#include <stdint.h>

/* A random nonzero instance other than was (the one being replaced; 0:
 * none): from getrandom(2), or the clock and the process id if that
 * fails, as a collision costs only routes kept that should not be. */
uint32_t kvs_new_instance(uint32_t was);

#endif
