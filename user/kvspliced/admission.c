// SPDX-License-Identifier: MIT
/* XDP admission: CIDR lists loaded, the program attached and pinned. */
#include "admission.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admission.skel.h"
#include "kvsplice/admission.h"
#include "log.h"
#include "netutil.h"
#include "pins.h"

static int fill(struct bpf_map *v4, struct bpf_map *v6, const char *const *list, uint32_t n,
		const char *what)
{
	uint8_t one = 1;
	uint32_t i;

	for (i = 0; i < n; i++) {
		struct kvs_lpm_v6 k6 = { 0 };
		struct kvs_lpm_v4 k4 = { 0 };
		int family, err;

		if (kvs_cidr_parse(list[i], &family, k6.addr, &k6.prefixlen)) {
			pr_warn("event=bad_cidr list=%s value=\"%s\"", what, list[i]);
			return -EINVAL;
		}
		if (family == 4) {
			k4.prefixlen = k6.prefixlen;
			memcpy(k4.addr, k6.addr, 4);
			err = bpf_map__update_elem(v4, &k4, sizeof(k4), &one, sizeof(one), BPF_ANY);
		} else {
			err = bpf_map__update_elem(v6, &k6, sizeof(k6), &one, sizeof(one), BPF_ANY);
		}
		if (err) {
			pr_warn("event=cidr_load_failed list=%s value=\"%s\" err=\"%s\"", what,
				list[i], strerror(-err));
			return err;
		}
	}
	return 0;
}

int kvs_adm_open(struct kvs_admission *a, const struct kvs_adm_opts *o)
{
	LIBBPF_OPTS(bpf_object_open_opts, oo, .pin_root_path = o->pin_dir);
	int err;

	memset(a, 0, sizeof(*a));
	a->ifindex = (int)if_nametoindex(o->ifname);
	if (!a->ifindex) {
		err = -errno;
		pr_warn("event=xdp_no_interface iface=%s err=\"%s\"", o->ifname, strerror(-err));
		return err;
	}
	a->skel = admission_bpf__open_opts(&oo);
	if (!a->skel) {
		err = -errno;
		pr_warn("event=xdp_open_failed err=\"%s\"", strerror(-err));
		return err;
	}
	a->skel->rodata->cfg_port = o->port;
	a->skel->rodata->cfg_syn_rate = o->syn_rate;
	a->skel->rodata->cfg_syn_burst = o->syn_burst ? o->syn_burst :
							(o->syn_rate ? o->syn_rate : 1);
	a->skel->rodata->cfg_allow_only = o->nallow > 0;
	err = admission_bpf__load(a->skel);
	if (err) {
		pr_warn("event=xdp_load_failed err=\"%s\"", strerror(-err));
		goto fail;
	}
	err = fill(a->skel->maps.xdp_allow_v4, a->skel->maps.xdp_allow_v6, o->allow, o->nallow,
		   "allow");
	if (!err)
		err = fill(a->skel->maps.xdp_deny_v4, a->skel->maps.xdp_deny_v6, o->deny, o->ndeny,
			   "deny");
	if (err)
		goto fail;
	/* Native where the driver has it; generic (skb) mode otherwise. */
	a->xdp_flags = XDP_FLAGS_DRV_MODE;
	err = bpf_xdp_attach(a->ifindex, bpf_program__fd(a->skel->progs.kvs_admission),
			     a->xdp_flags | XDP_FLAGS_UPDATE_IF_NOEXIST, NULL);
	if (err == -EOPNOTSUPP || err == -EINVAL) {
		a->xdp_flags = XDP_FLAGS_SKB_MODE;
		err = bpf_xdp_attach(a->ifindex, bpf_program__fd(a->skel->progs.kvs_admission),
				     a->xdp_flags | XDP_FLAGS_UPDATE_IF_NOEXIST, NULL);
	}
	if (err) {
		pr_warn("event=xdp_attach_failed iface=%s err=\"%s\" hint=\"another XDP program "
			"on the interface?\"",
			o->ifname, strerror(-err));
		goto fail;
	}
	pr_info("event=xdp_attached iface=%s mode=%s port=%u allow=%u deny=%u syn_rate=%u "
		"syn_burst=%u",
		o->ifname, a->xdp_flags == XDP_FLAGS_DRV_MODE ? "native" : "generic", o->port,
		o->nallow, o->ndeny, o->syn_rate, a->skel->rodata->cfg_syn_burst);
	return 0;
fail:
	admission_bpf__destroy(a->skel);
	a->skel = NULL;
	return err;
}

int kvs_adm_stats(const struct kvs_admission *a, struct kvs_xdp_stats *x)
{
	if (!a->skel)
		return -ENOENT;
	return kvs_read_percpu_sum(bpf_map__fd(a->skel->maps.xdp_stats), x, sizeof(*x));
}

void kvs_adm_close(struct kvs_admission *a)
{
	if (!a->skel)
		return;
	bpf_xdp_detach(a->ifindex, a->xdp_flags, NULL);
	bpf_map__unpin(a->skel->maps.xdp_allow_v4, NULL);
	bpf_map__unpin(a->skel->maps.xdp_deny_v4, NULL);
	bpf_map__unpin(a->skel->maps.xdp_allow_v6, NULL);
	bpf_map__unpin(a->skel->maps.xdp_deny_v6, NULL);
	bpf_map__unpin(a->skel->maps.xdp_syn, NULL);
	bpf_map__unpin(a->skel->maps.xdp_stats, NULL);
	admission_bpf__destroy(a->skel);
	a->skel = NULL;
}
