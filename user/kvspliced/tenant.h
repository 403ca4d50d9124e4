/* SPDX-License-Identifier: MIT */
/*
 * Tenants bound to where their clients come from (--tenant-source
 * CIDR=SALT): the gateway writes the tenant's salt into every REQUEST of a
 * client from CIDR, whatever salt the client chose, so that no client can
 * enter another tenant's cache domain (docs/RUNBOOK.md, "Tenants").
 */
#ifndef KVS_GW_TENANT_H
#define KVS_GW_TENANT_H

#include <stdint.h>
#include <sys/socket.h>

#include "kvsplice/maps.h"
#include "netutil.h"

#define GW_MAX_TENANTS (KVS_MAX_TENANTS - 1) /* map entry 0 is "none" */

struct gw_tenants {
	struct kvs_cidr nets[GW_MAX_TENANTS];
	uint64_t salt[GW_MAX_TENANTS];
	uint32_t n;
};

/* "CIDR=SALT", SALT decimal or 0x-hex, 64 bits. 0 or -EINVAL. */
int gw_tenant_parse(const char *s, struct kvs_cidr *net, uint64_t *salt);
/* From the option strings, checked when they were read: 0 or -EINVAL. */
int gw_tenants_init(struct gw_tenants *t, const char *const *src, uint32_t n);
/* The tenant of a client from ss: its map index (the first CIDR that
 * holds ss, counted from 1), or 0 for none. */
uint32_t gw_tenant_of(const struct gw_tenants *t, const struct sockaddr_storage *ss);
/* The salt of tenant i (from gw_tenant_of, not 0). */
static inline uint64_t gw_tenant_salt(const struct gw_tenants *t, uint32_t i)
{
	return t->salt[i - 1];
}
/* Writes each tenant's salt into the tenants map (entry i), keeping its
 * counters (a take-over's map has them); clears the entries past n. 0 or
 * -errno; map_fd < 0 (no BPF): nothing to do. */
int gw_tenants_publish(const struct gw_tenants *t, int map_fd);
/* The same, leaving the entries from end on alone (a staging copy). */
int gw_tenants_publish_below(const struct gw_tenants *t, int map_fd, uint32_t end);
/* Tenant i's salt also into entry base + i (i = 1..n, counters zero): a
 * take-over binds the clients whose tenant index changes there while
 * entries 1..n change, so that none is ever bound to an entry holding
 * another tenant's salt. 0, -ENOSPC (base + n past the map) or -errno. */
int gw_tenants_stage(const struct gw_tenants *t, int map_fd, uint32_t base);

#endif
