// SPDX-License-Identifier: MIT
/*
 * A controller taking over (--takeover) goes on with the maps its
 * predecessor pinned (libbpf reuses a pinned map whose type and key and
 * value sizes match, whatever the fields inside) and with the controller
 * counters handed over in the STATE message (struct kvs_ctl_stats): a field
 * moved among others of its size is read as another, with no error. What
 * refuses such a take-over is KVS_HO_VERSION (user/kvspliced/handover_msg.h),
 * so each version must name one layout. This test fingerprints the layout
 * of the pinned maps' values, from the BTF of the gateway's own objects,
 * and the maps' shapes (a pinned map of another size is not reused), and
 * fails when it differs from the one recorded for this version: bump the
 * version, say why there, and record the new fingerprint below (the
 * failure prints it; `test_ho_layout KVSPLICE.bpf.o ADMISSION.bpf.o`
 * prints another build's).
 *
 * Not covered: the hand-over's own messages besides kvs_ctl_stats
 * (struct kvs_ho_conn, kvs_ho_backend: userspace only, no BTF here).
 */
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "admission.skel.h"
#include "handover_msg.h"
#include "kvsplice.skel.h"

/* The layout each hand-over version stands for (and its renames). */
static const struct {
	uint32_t version;
	uint64_t fingerprint;
} layouts[] = {
	{ 7, 0xed3f9646eb25917eULL }, /* 63195be: health_held after health_failures */
	{ 8, 0x35faa323ebb60d0cULL }, /* e4fca92: health_held last in kvs_ctl_stats */
	/* each route's hot replicas (kvs_route.replicas); and from bc3f1c6
	 * the backend_ttft map's kvs_ttft in vLLM's 23 buckets
	 * (0xee7b7de181118327 without it; its 14 buckets of 00bfb01 never
	 * left the day they were made): a map the version 9 controllers
	 * before it have not, which their successor makes and they leave
	 * alone (KVS_HO_BE_TTFT) */
	{ 9, 0xabca527224c85610ULL },
	/* the chain map a slot per verdict nested on a CPU (KVS_NEST
	 * entries, not 1), their count pinned (nest), and kvs_stats' counts
	 * of them; from this version the fingerprint covers the pinned maps'
	 * shapes too */
	{ 10, 0xe751d9bada5c563eULL },
	/* kvs_conn's anonymous union named (by_role): a member's name only,
	 * every offset and size as before (bpftool btf dump shows the one
	 * line changed), so version 10's bytes: a take-over between the two
	 * reads the same maps. The names stay in the fingerprint, which is
	 * how two same-sized fields swapped are caught; a rename is recorded
	 * here as the same version's. */
	{ 10, 0x44d1532fe77af096ULL },
};

/* The values of the maps a take-over reuses, by the object defining them. */
static const char *const gateway_values[] = {
	"kvs_conn",	"kvs_tenant", "kvs_backend",   "kvs_route", "kvs_route_share",
	"kvs_inflight", "kvs_stats",  "kvs_ctl_stats", "kvs_chain", "kvs_ttft",
};
static const char *const admission_values[] = { "kvs_syn_bucket", "kvs_xdp_stats" };

static uint64_t mix(uint64_t h, const void *p, size_t n)
{
	const unsigned char *c = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ c[i]) * 0x100000001b3ULL; /* FNV-1a */
	return h;
}

static uint64_t mix_u64(uint64_t h, uint64_t v)
{
	return mix(h, &v, sizeof(v));
}

static uint64_t mix_str(uint64_t h, const char *s)
{
	return mix(h, s ? s : "", s ? strlen(s) + 1 : 1);
}

/* Type id's layout: sizes, and for a struct or union each member's name,
 * offset and layout, for an array its length and element's layout. */
static uint64_t layout(const struct btf *btf, __u32 id, uint64_t h, int depth)
{
	const struct btf_type *t;
	int rid = btf__resolve_type(btf, id);

	if (rid < 0 || depth > 16)
		return mix_u64(h, ~0ULL);
	t = btf__type_by_id(btf, (__u32)rid);
	h = mix_u64(h, btf_kind(t));
	h = mix_u64(h, (uint64_t)btf__resolve_size(btf, (__u32)rid));
	if (btf_is_composite(t)) {
		const struct btf_member *m = btf_members(t);

		for (__u16 i = 0; i < btf_vlen(t); i++, m++) {
			h = mix_str(h, btf__name_by_offset(btf, m->name_off));
			h = mix_u64(h, btf_member_bit_offset(t, i));
			h = mix_u64(h, btf_member_bitfield_size(t, i));
			h = layout(btf, m->type, h, depth + 1);
		}
	} else if (btf_is_array(t)) {
		h = mix_u64(h, btf_array(t)->nelems);
		h = layout(btf, btf_array(t)->type, h, depth + 1);
	}
	return h;
}

/* The named structs' layouts into h; 0 if obj lacks one (or its BTF). */
static uint64_t fingerprint(struct bpf_object *obj, const char *const *names, size_t n, uint64_t h)
{
	const struct btf *btf = obj ? bpf_object__btf(obj) : NULL;

	if (!btf)
		return 0;
	for (size_t i = 0; i < n; i++) {
		int id = btf__find_by_name_kind(btf, names[i], BTF_KIND_STRUCT);

		if (id < 0) {
			fprintf(stderr, "test_ho_layout: no struct %s in the object's BTF\n",
				names[i]);
			return 0;
		}
		h = mix_str(h, names[i]);
		h = layout(btf, (__u32)id, h, 0);
	}
	return h;
}

/* The pinned maps' shapes into h: libbpf reuses a pinned map only if its
 * type, key and value sizes and entries match, and a controller that
 * cannot reuse one fails to load. */
static uint64_t shapes(struct bpf_object *obj, uint64_t h)
{
	struct bpf_map *m;

	bpf_object__for_each_map(m, obj)
	{
		if (!bpf_map__pin_path(m))
			continue;
		h = mix_str(h, bpf_map__name(m));
		h = mix_u64(h, bpf_map__type(m));
		h = mix_u64(h, bpf_map__key_size(m));
		h = mix_u64(h, bpf_map__value_size(m));
		h = mix_u64(h, bpf_map__max_entries(m));
	}
	return h;
}

#define N(a) (sizeof(a) / sizeof((a)[0]))

static uint64_t both(struct bpf_object *gw, struct bpf_object *adm)
{
	uint64_t h = fingerprint(gw, gateway_values, N(gateway_values), 0xcbf29ce484222325ULL);

	h = h ? fingerprint(adm, admission_values, N(admission_values), h) : 0;
	return h ? shapes(adm, shapes(gw, h)) : 0;
}

static void one_layout_per_version(void **state)
{
	size_t gsz = 0, asz = 0;
	const void *gbytes = kvsplice_bpf__elf_bytes(&gsz),
		   *abytes = admission_bpf__elf_bytes(&asz);
	struct bpf_object *gw = bpf_object__open_mem(gbytes, gsz, NULL);
	struct bpf_object *adm = bpf_object__open_mem(abytes, asz, NULL);
	uint64_t fp = both(gw, adm), want = 0;
	bool known = false;

	(void)state;
	bpf_object__close(gw);
	bpf_object__close(adm);
	assert_true(fp != 0);
	for (size_t i = 0; i < N(layouts); i++) {
		if (layouts[i].version != KVS_HO_VERSION)
			continue;
		want = layouts[i].fingerprint;
		known |= fp == want;
	}
	if (!known)
		fail_msg("the pinned maps' layout is 0x%016llx, version %u's is 0x%016llx: a "
			 "take-over would read these maps (and the handed-over counters) as "
			 "another layout; bump KVS_HO_VERSION and record the new layout here",
			 (unsigned long long)fp, KVS_HO_VERSION, (unsigned long long)want);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(one_layout_per_version),
	};

	if (argc == 3) { /* another build's objects: their fingerprint */
		struct bpf_object *gw = bpf_object__open_file(argv[1], NULL);
		struct bpf_object *adm = bpf_object__open_file(argv[2], NULL);
		uint64_t fp = both(gw, adm);

		bpf_object__close(gw);
		bpf_object__close(adm);
		printf("0x%016llx\n", (unsigned long long)fp);
		return fp ? 0 : 1;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
