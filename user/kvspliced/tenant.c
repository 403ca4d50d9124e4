// SPDX-License-Identifier: MIT
#include "tenant.h"

#include <bpf/bpf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

int gw_tenant_parse(const char *s, struct kvs_cidr *net, uint64_t *salt)
{
	const char *eq = strchr(s, '=');
	char cidr[64], *end;
	size_t n;

	if (!eq || eq == s || !eq[1] || (n = (size_t)(eq - s)) >= sizeof(cidr))
		return -EINVAL;
	memcpy(cidr, s, n);
	cidr[n] = '\0';
	if (kvs_cidr_parse(cidr, &net->family, net->addr, &net->prefixlen))
		return -EINVAL;
	if (eq[1] == '-')
		return -EINVAL; /* strtoull would take it, wrapped */
	errno = 0;
	*salt = strtoull(eq + 1, &end, 0);
	return errno || *end ? -EINVAL : 0;
}

int gw_tenants_init(struct gw_tenants *t, const char *const *src, uint32_t n)
{
	t->n = 0;
	if (n > GW_MAX_TENANTS)
		return -EINVAL;
	for (uint32_t i = 0; i < n; i++)
		if (gw_tenant_parse(src[i], &t->nets[i], &t->salt[i]))
			return -EINVAL;
	t->n = n;
	return 0;
}

uint32_t gw_tenant_of(const struct gw_tenants *t, const struct sockaddr_storage *ss)
{
	for (uint32_t i = 0; i < t->n; i++)
		if (kvs_cidr_contains(&t->nets[i], 1, ss))
			return i + 1;
	return 0;
}

int gw_tenants_publish(const struct gw_tenants *t, int map_fd)
{
	return gw_tenants_publish_below(t, map_fd, KVS_MAX_TENANTS);
}

int gw_tenants_publish_below(const struct gw_tenants *t, int map_fd, uint32_t end)
{
	if (map_fd < 0)
		return 0;
	for (uint32_t i = 1; i < end && i < KVS_MAX_TENANTS; i++) {
		struct kvs_tenant v = { 0 };

		if (bpf_map_lookup_elem(map_fd, &i, &v))
			return -errno;
		if (i > t->n && !v.salt && !v.requests)
			continue;
		if (i > t->n) /* a former tenant's: its counters go with it */
			memset(&v, 0, sizeof(v));
		else
			v.salt = t->salt[i - 1];
		if (bpf_map_update_elem(map_fd, &i, &v, BPF_ANY))
			return -errno;
	}
	return 0;
}

int gw_tenants_stage(const struct gw_tenants *t, int map_fd, uint32_t base)
{
	if (map_fd < 0)
		return 0;
	if (base + t->n >= KVS_MAX_TENANTS)
		return -ENOSPC;
	for (uint32_t i = 1; i <= t->n; i++) {
		struct kvs_tenant v = { .salt = t->salt[i - 1] };
		uint32_t k = base + i;

		if (bpf_map_update_elem(map_fd, &k, &v, BPF_ANY))
			return -errno;
	}
	return 0;
}
