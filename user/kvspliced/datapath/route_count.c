// SPDX-License-Identifier: MIT
#include "datapath/route_count.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <string.h>

#include "kvsplice/maps.h"
#include "log.h"
#include "route_count.skel.h"

int kvs_route_count_open(struct kvs_route_counter *c, int routes_fd)
{
	struct route_count_bpf *skel = route_count_bpf__open();
	int err = skel ? 0 : -errno;

	if (!err)
		err = bpf_map__reuse_fd(skel->maps.routes, routes_fd);
	if (!err)
		err = route_count_bpf__load(skel);
	if (err) {
		route_count_bpf__destroy(skel);
		pr_info("event=routes_count_unavailable err=\"%s\" hint=\"the kernel "
			"keeps no count of the routes map (Linux 6.6 and later do): "
			"it is walked to be counted, at most every 10 s\"",
			strerror(-err));
		return err;
	}
	c->skel = skel;
	return 0;
}

long kvs_route_count(const struct kvs_route_counter *c)
{
	struct kvs_route_count rc = { 0 };
	/* (a syscall program's context is copied back where it came from) */
	LIBBPF_OPTS(bpf_test_run_opts, run, .ctx_in = &rc, .ctx_size_in = sizeof(rc));

	if (!c->skel)
		return -EOPNOTSUPP;
	if (bpf_prog_test_run_opts(bpf_program__fd(c->skel->progs.kvs_count_routes), &run))
		return -errno;
	return rc.routes < 0 ? 0 : (long)rc.routes;
}

void kvs_route_count_close(struct kvs_route_counter *c)
{
	route_count_bpf__destroy(c->skel);
	c->skel = NULL;
}
