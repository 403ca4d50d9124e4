/* SPDX-License-Identifier: MIT */
/*
 * The routes map's entries as the kernel counts them (bpf/route_count.bpf.c):
 * one system call instead of a walk of the map.
 */
#ifndef KVS_GW_ROUTE_COUNT_H
#define KVS_GW_ROUTE_COUNT_H

struct route_count_bpf;

struct kvs_route_counter {
	struct route_count_bpf *skel; /* NULL: not opened, or no count here */
};

/* Loads the count's program on the map whose descriptor is routes_fd;
 * -errno on a kernel without the count (before Linux 6.6: the program
 * does not load), logged at info. */
int kvs_route_count_open(struct kvs_route_counter *c, int routes_fd);
/* The map's entries as the kernel counts them, or -EOPNOTSUPP when
 * kvs_route_count_open failed or was not called. */
long kvs_route_count(const struct kvs_route_counter *c);
void kvs_route_count_close(struct kvs_route_counter *c);

#endif
