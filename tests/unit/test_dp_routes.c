// SPDX-License-Identifier: MIT
/*
 * The controller's route installs (kvs_dp_add_routes) on a real routes map
 * (needs CAP_BPF): through the kvs_install program, as the controller runs
 * them, and through the fallback that does its work from userspace. A
 * route installed over one the map holds keeps the kernel's counters
 * (hits, the hot window), and only routes new to the map, or moved from
 * another tenant, count against the tenant's share of the map.
 */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "datapath.h"
#include "kvsplice.skel.h"

struct fixture {
	struct kvs_datapath dp;
};

static int fixture_init(struct fixture *f)
{
	f->dp.backends = calloc(KVS_MAX_BACKENDS, sizeof(*f->dp.backends));
	f->dp.shares = calloc(KVS_MAX_TENANTS, sizeof(*f->dp.shares));
	if (f->dp.routes_fd < 0 || !f->dp.backends || !f->dp.shares) {
		print_error("routes map: %s (needs CAP_BPF)\n", strerror(errno));
		return -1;
	}
	for (uint32_t t = 0; t < 4; t++)
		f->dp.shares[t].share = 100;
	return 0;
}

/* A routes map of the test's own, installs done from userspace. */
static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	f->dp.routes_fd = bpf_map_create(BPF_MAP_TYPE_LRU_HASH, "test_routes", sizeof(__u64),
					 sizeof(struct kvs_route), 1024, NULL);
	*state = f;
	return fixture_init(f);
}

/* The gateway's own object: kvs_install alone loaded, nothing pinned. */
static int setup_prog(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct bpf_program *p;
	struct bpf_map *m;

	if (!f)
		return -1;
	*state = f;
	f->dp.routes_fd = -1;
	f->dp.skel = kvsplice_bpf__open();
	if (!f->dp.skel)
		return -1;
	bpf_object__for_each_program(p, f->dp.skel->obj)
		bpf_program__set_autoload(p, p == f->dp.skel->progs.kvs_install);
	bpf_object__for_each_map(m, f->dp.skel->obj) bpf_map__set_pin_path(m, NULL);
	if (kvsplice_bpf__load(f->dp.skel)) {
		print_error("kvsplice.bpf.o: %s (needs CAP_BPF)\n", strerror(errno));
		return -1;
	}
	f->dp.routes_fd = bpf_map__fd(f->dp.skel->maps.routes);
	return fixture_init(f);
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	if (f->dp.skel)
		kvsplice_bpf__destroy(f->dp.skel);
	else if (f->dp.routes_fd >= 0)
		close(f->dp.routes_fd);
	free(f->dp.backends);
	free(f->dp.shares);
	free(f);
	return 0;
}

static struct kvs_route get(struct fixture *f, uint64_t hash)
{
	struct kvs_route r;

	assert_int_equal(bpf_map_lookup_elem(f->dp.routes_fd, &hash, &r), 0);
	return r;
}

/* The kernel's counting on a route: followed hits times, in its hot window. */
static void count(struct fixture *f, uint64_t hash, uint64_t hits, uint32_t cur, uint32_t prev)
{
	struct kvs_route r = get(f, hash);

	r.hits = hits;
	r.hot_at = 12345;
	r.hot_cur = cur;
	r.hot_prev = prev;
	assert_int_equal(bpf_map_update_elem(f->dp.routes_fd, &hash, &r, BPF_EXIST), 0);
}

static void reinstall_keeps_counters(void **state)
{
	struct fixture *f = *state;
	const uint64_t h[] = { 11, 22, 33 };
	const uint32_t depth[] = { 16, 32, 64 };
	struct kvs_route r;

	assert_int_equal(kvs_dp_add_routes(&f->dp, h, depth, 3, 0, 1), 3);
	count(f, 22, 7, 40, 35);
	/* the controller re-decides the prefix, to backend 2 */
	f->dp.backends[2].route_gen = 5;
	assert_int_equal(kvs_dp_add_routes(&f->dp, h, depth, 3, 2, 1), 3);
	r = get(f, 22);
	assert_int_equal(r.backend, 2);
	assert_int_equal(r.gen, 5);
	assert_int_equal(r.depth_blocks, 32);
	assert_int_equal(r.hits, 7);
	assert_int_equal(r.hot_at, 12345);
	assert_int_equal(r.hot_cur, 40);
	assert_int_equal(r.hot_prev, 35);
	r = get(f, 33); /* a route never counted stays at zero */
	assert_int_equal(r.hits, 0);
	assert_int_equal(r.hot_cur, 0);
}

static void reinstall_counts_once(void **state)
{
	struct fixture *f = *state;
	const uint64_t h[] = { 11, 22, 33 }, more[] = { 22, 44, 44 };
	const uint32_t depth[] = { 16, 32, 64 };

	assert_int_equal(kvs_dp_add_routes(&f->dp, h, depth, 3, 0, 1), 3);
	assert_int_equal(f->dp.shares[1].routes, 3);
	assert_int_equal(kvs_dp_add_routes(&f->dp, h, depth, 3, 1, 1), 3);
	assert_int_equal(f->dp.shares[1].routes, 3);
	/* one existing, one new given twice (a hint at a checkpoint's depth) */
	assert_int_equal(kvs_dp_add_routes(&f->dp, more, depth, 3, 1, 1), 3);
	assert_int_equal(f->dp.shares[1].routes, 4);
}

static void reinstall_moves_tenant(void **state)
{
	struct fixture *f = *state;
	const uint64_t h[] = { 11, 22 };
	const uint32_t depth[] = { 16, 32 };

	assert_int_equal(kvs_dp_add_routes(&f->dp, h, depth, 2, 0, 1), 2);
	/* tenant 2's request shares the prefix: the routes count for it now */
	assert_int_equal(kvs_dp_add_routes(&f->dp, h, depth, 1, 0, 2), 1);
	assert_int_equal(get(f, 11).tenant, 2);
	assert_int_equal(f->dp.shares[1].routes, 1);
	assert_int_equal(f->dp.shares[2].routes, 1);
}

static void full_share_reinstalls(void **state)
{
	struct fixture *f = *state;
	const uint64_t h[] = { 11, 22 }, other[] = { 11, 55 };
	const uint32_t depth[] = { 16, 32 };

	f->dp.shares[1].share = 2;
	assert_int_equal(kvs_dp_add_routes(&f->dp, h, depth, 2, 0, 1), 2);
	assert_int_equal(f->dp.shares[1].routes, 2);
	/* full: re-pointing what it has adds nothing and goes in */
	assert_int_equal(kvs_dp_add_routes(&f->dp, h, depth, 2, 3, 1), 2);
	assert_int_equal(get(f, 22).backend, 3);
	assert_int_equal(f->dp.shares[1].refused, 0);
	/* a new route does not fit: none of the request's go in */
	assert_int_equal(kvs_dp_add_routes(&f->dp, other, depth, 2, 4, 1), 0);
	assert_int_equal(get(f, 11).backend, 3);
	assert_int_equal(f->dp.shares[1].refused, 1);
	assert_int_equal(f->dp.shares[1].routes, 2);
}

/* The program itself runs, and says what each hash had: kvs_dp_add_routes
 * falls back to installing from userspace when it does not, so the tests
 * above pass either way and could not tell a program the kernel refuses to
 * run (a context it no longer takes, say). */
static void install_program_runs(void **state)
{
	struct fixture *f = *state;
	struct kvs_install_batch b = { .n = 2, .backend = 1, .gen = 3, .tenant = 2 };
	LIBBPF_OPTS(bpf_test_run_opts, run, .ctx_in = &b, .ctx_size_in = sizeof(b));
	const uint64_t h[] = { 11 };
	const uint32_t depth[] = { 16 };

	assert_int_equal(kvs_dp_add_routes(&f->dp, h, depth, 1, 0, 1), 1);
	b.e[0] = (struct kvs_install){ .hash = 11, .depth_blocks = 16 };
	b.e[1] = (struct kvs_install){ .hash = 77, .depth_blocks = 32 };
	assert_int_equal(
		bpf_prog_test_run_opts(bpf_program__fd(f->dp.skel->progs.kvs_install), &run), 0);
	assert_int_equal(run.retval, 2);
	assert_int_equal(b.e[0].was, 1);
	assert_int_equal(b.e[1].was, KVS_INSTALL_NEW);
	assert_int_equal(get(f, 11).tenant, 2);
	assert_int_equal(get(f, 77).backend, 1);
}

/*
 * A share's count never wraps below 0. The recount corrects a count by
 * what its walk of the map found less the count read before the walk;
 * routes removed meanwhile (a `kvsplicectl routes flush`, the kernel
 * replacing a void route) were taken off by their remover too, so the
 * correction may exceed what is left: here tenant 1 had 3 routes when the
 * recount read its count, a flush took them off (0), and the walk found
 * none (-3). Wrapped, the count read ~2^64 and the tenant's share refused
 * every route, the kernel's and the controller's, until the next recount.
 */
static void share_count_never_wraps(void **state)
{
	struct fixture *f = *state;
	const uint64_t h[] = { 11 };
	const uint32_t depth[] = { 16 };

	f->dp.shares[1].routes = 0;
	kvs_dp_share_adjust(&f->dp, 1, -3);
	assert_int_equal(f->dp.shares[1].routes, 0);
	f->dp.shares[1].routes = 5;
	kvs_dp_share_adjust(&f->dp, 1, -3);
	assert_int_equal(f->dp.shares[1].routes, 2);
	kvs_dp_share_adjust(&f->dp, 1, INT64_MIN);
	assert_int_equal(f->dp.shares[1].routes, 0);
	/* and the tenant may install routes again */
	assert_int_equal(kvs_dp_add_routes(&f->dp, h, depth, 1, 0, 1), 1);
	assert_int_equal(f->dp.shares[1].routes, 1);
	kvs_dp_share_put(&f->dp, 1, 2);
	assert_int_equal(f->dp.shares[1].routes, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(reinstall_keeps_counters, setup_prog, teardown),
		cmocka_unit_test_setup_teardown(reinstall_counts_once, setup_prog, teardown),
		cmocka_unit_test_setup_teardown(reinstall_moves_tenant, setup_prog, teardown),
		cmocka_unit_test_setup_teardown(full_share_reinstalls, setup_prog, teardown),
		cmocka_unit_test_setup_teardown(install_program_runs, setup_prog, teardown),
		cmocka_unit_test_setup_teardown(reinstall_keeps_counters, setup, teardown),
		cmocka_unit_test_setup_teardown(reinstall_counts_once, setup, teardown),
		cmocka_unit_test_setup_teardown(reinstall_moves_tenant, setup, teardown),
		cmocka_unit_test_setup_teardown(full_share_reinstalls, setup, teardown),
		cmocka_unit_test_setup_teardown(share_count_never_wraps, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
