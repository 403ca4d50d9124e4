/* SPDX-License-Identifier: MIT */
/*
 * kvsplicectl's commands, one file per kind: what the maps say
 * (kvsplicectl.c: stats, backends, routes), the sockets behind them
 * (ctl_conns.c), and what only the running controller can do
 * (ctl_control.c: status, backend add|remove|drain|undrain, reload).
 * Each returns the exit status: 0, 1 (failed), 3 (controller not running).
 */
#ifndef KVS_CTL_H
#define KVS_CTL_H

#include <stdbool.h>
#include <stdint.h>

#define PROG "kvsplicectl"

struct ctl_opts {
	const char *pin_dir;
	const char *socket; /* control socket; NULL: the pin dir's default */
	bool json;
	uint32_t limit; /* routes: how many to list */
};

/* fd of the pinned map, or -errno (and a message saying why). */
int ctl_open_map(const struct ctl_opts *o, const char *name);
/* Backends by state from the backends map, for status without a
 * controller; -errno if the map cannot be read. */
int ctl_count_backends(const struct ctl_opts *o, uint32_t *by_state, uint32_t nstates);

int ctl_status(const struct ctl_opts *o);
/* verb: add, remove, drain, undrain. */
int ctl_backend(const struct ctl_opts *o, const char *verb, const char *addr);
int ctl_reload(const struct ctl_opts *o);
/* which: kernel, user, or NULL to ask. */
int ctl_datapath(const struct ctl_opts *o, const char *which);
/* Starts a successor and waits (at most timeout_s) until it answers. */
int ctl_upgrade(const struct ctl_opts *o, int timeout_s);
int ctl_conns(const struct ctl_opts *o);

#endif
