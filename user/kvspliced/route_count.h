/* SPDX-License-Identifier: MIT */
/*
 * The routes map's entries as the kernel counts them (bpf/route_count.bpf.c):
 * one system call instead of a walk of the map.
 */
#ifndef KVS_GW_ROUTE_COUNT_H
#define KVS_GW_ROUTE_COUNT_H

struct route_count_bpf;

struct kvs_route_counter {
	struct route_count_bpf *skel;
	int tried; /* 1: opened, or failed for good (skel NULL) */
};

/* The count of the map whose descriptor is routes_fd, or -EOPNOTSUPP on
 * a kernel without it (before Linux 6.6: the program does not load, which
 * is tried once, at the first call, and logged at info). */
long kvs_route_count(struct kvs_route_counter *c, int routes_fd);
void kvs_route_count_close(struct kvs_route_counter *c);

#endif
