// SPDX-License-Identifier: MIT
/*
 * kvsplicectl conns: every socket in the gateway's conns map (clients,
 * upstream connections, the controller's two pairs) with its TCP state,
 * RTT and queues as the kernel reports them over inet_diag (libnl's
 * idiag), matched by address pair. Reads no controller state: it works
 * while the controller is down.
 */
#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <errno.h>
#include <netinet/tcp.h>
#include <netlink/addr.h>
#include <netlink/cache.h>
#include <netlink/idiag/idiagnl.h>
#include <netlink/idiag/msg.h>
#include <netlink/netlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl.h"
#include "kvsplice/maps.h"
#include "mapwalk.h"
#include "netutil.h"
#include "pins.h"

struct row {
	__u64 cookie;
	struct kvs_conn c;
	bool seen; /* inet_diag reported it */
	uint8_t state;
	uint32_t rqueue, wqueue, rtt_us, rttvar_us;
};

struct rows {
	struct row *r;
	size_t n;
};

static const char *role_name(__u32 role)
{
	switch (role) {
	case KVS_ROLE_CLIENT:
		return "client";
	case KVS_ROLE_UPSTREAM:
		return "upstream";
	case KVS_ROLE_INJECT:
		return "inject";
	case KVS_ROLE_PUNT:
		return "punt";
	}
	return "?";
}

static const char *tcp_state_name(uint8_t st)
{
	static const char *const names[] = {
		"?",	     "ESTABLISHED", "SYN-SENT",	  "SYN-RECV", "FIN-WAIT-1", "FIN-WAIT-2",
		"TIME-WAIT", "CLOSE",	    "CLOSE-WAIT", "LAST-ACK", "LISTEN",	    "CLOSING",
	};

	return st < sizeof(names) / sizeof(names[0]) ? names[st] : "?";
}

/* libnl 3.7 hands ports over in network byte order and IPv4 addresses in
 * a 16-byte buffer: both are allowed for, so a libnl that fixes either
 * still matches. */
static bool same(const struct kvs_endpoint *e, struct nl_addr *a, uint16_t port)
{
	unsigned int len = e->family == AF_INET ? 4 : 16;

	return a && (e->port == ntohs(port) || e->port == port) &&
	       (unsigned int)nl_addr_get_family(a) == e->family && nl_addr_get_len(a) >= len &&
	       !memcmp(e->addr, nl_addr_get_binary_addr(a), len);
}

static void match(struct nl_object *obj, void *arg)
{
	struct idiagnl_msg *m = (struct idiagnl_msg *)obj;
	struct rows *rs = arg;
	struct nl_addr *src = idiagnl_msg_get_src(m), *dst = idiagnl_msg_get_dst(m);
	uint16_t sport = idiagnl_msg_get_sport(m), dport = idiagnl_msg_get_dport(m);

	for (size_t i = 0; i < rs->n; i++) {
		struct row *r = &rs->r[i];
		struct tcp_info ti;

		if (r->seen || !same(&r->c.local, src, sport) || !same(&r->c.remote, dst, dport))
			continue;
		ti = idiagnl_msg_get_tcpinfo(m);
		r->seen = true;
		r->state = idiagnl_msg_get_state(m);
		r->rqueue = idiagnl_msg_get_rqueue(m);
		r->wqueue = idiagnl_msg_get_wqueue(m);
		r->rtt_us = ti.tcpi_rtt;
		r->rttvar_us = ti.tcpi_rttvar;
		return;
	}
}

/* Fills the TCP fields of the rows from inet_diag. 0 or a libnl error. */
static int diag(struct rows *rs)
{
	static const int families[] = { AF_INET, AF_INET6 };
	struct nl_sock *sk = nl_socket_alloc();
	int err = sk ? idiagnl_connect(sk) : -NLE_NOMEM;

	for (size_t f = 0; !err && f < 2; f++) {
		struct nl_cache *cache = NULL;

		err = idiagnl_msg_alloc_cache(sk, families[f], IDIAGNL_SS_ALL, &cache);
		if (!err) {
			nl_cache_foreach(cache, match, rs);
			nl_cache_free(cache);
		}
	}
	if (sk)
		nl_socket_free(sk);
	return err;
}

int ctl_conns(const struct ctl_opts *o, int argc, char **argv)
{
	int fd = ctl_open_map(o, KVS_MAP_CONNS), err;
	struct rows rs = { 0 };
	struct kvs_conn *vals;
	__u64 *keys;
	size_t n;

	if (fd < 0)
		return 1;
	/* by bucket (mapwalk.h) */
	err = kvs_map_read_all(fd, sizeof(*keys), sizeof(*vals), (void **)&keys, (void **)&vals,
			       &n);
	if (!err && !(rs.r = calloc(n ? n : 1, sizeof(*rs.r))))
		err = -ENOMEM;
	for (size_t i = 0; !err && i < n; i++, rs.n++) {
		rs.r[i].cookie = keys[i];
		rs.r[i].c = vals[i];
	}
	free(keys);
	free(vals);
	if (err) {
		fprintf(o->err, PROG ": cannot read the connections: %s\n", strerror(-err));
		free(rs.r);
		close(fd);
		return 1;
	}
	close(fd);
	err = diag(&rs);
	if (err)
		fprintf(o->err, PROG ": inet_diag: %s (TCP state, RTT and queues not shown)\n",
			nl_geterror(err));
	if (o->json)
		fprintf(o->out, "[");
	else
		fprintf(o->out,
			"%-8s %-6s %-7s %-22s %-22s %-11s %8s %8s %8s %8s %10s %12s %8s %10s\n",
			"role", "path", "backend", "local", "remote", "state", "rtt_ms", "rttvar",
			"recv_q", "send_q", "frames", "bytes", "inflight", "over");
	for (size_t i = 0; i < rs.n; i++) {
		const struct row *r = &rs.r[i];
		char l[80], p[80], be[16] = "-";

		kvs_endpoint_str(&r->c.local, l, sizeof(l));
		kvs_endpoint_str(&r->c.remote, p, sizeof(p));
		if (r->c.role == KVS_ROLE_UPSTREAM)
			snprintf(be, sizeof(be), "%u/%u", r->c.by_role.backend, r->c.slot);
		if (o->json)
			fprintf(o->out,
				"%s{\"cookie\":%llu,\"role\":\"%s\",\"path\":\"%s\",\"backend\":%d,"
				"\"slot\":%d,"
				"\"local\":\"%s\",\"remote\":\"%s\",\"state\":\"%s\",\"rtt_us\":%u,"
				"\"rttvar_us\":%u,\"recv_q\":%u,\"send_q\":%u,\"frames\":%llu,"
				"\"bytes\":%llu,\"inflight\":%u,\"over_budget\":%llu}",
				i ? "," : "", (unsigned long long)r->cookie, role_name(r->c.role),
				r->c.path ? "user" : "kernel",
				r->c.role == KVS_ROLE_UPSTREAM ? (int)r->c.by_role.backend : -1,
				r->c.role == KVS_ROLE_UPSTREAM ? (int)r->c.slot : -1, l, p,
				r->seen ? tcp_state_name(r->state) : "unknown", r->rtt_us,
				r->rttvar_us, r->rqueue, r->wqueue, (unsigned long long)r->c.frames,
				(unsigned long long)r->c.bytes, r->c.inflight,
				(unsigned long long)r->c.ctl.over);
		else
			fprintf(o->out,
				"%-8s %-6s %-7s %-22s %-22s %-11s %8.3f %8.3f %8u %8u %10llu %12llu "
				"%8u %10llu\n",
				role_name(r->c.role), r->c.path ? "user" : "kernel", be, l, p,
				r->seen ? tcp_state_name(r->state) : "unknown", r->rtt_us / 1000.0,
				r->rttvar_us / 1000.0, r->rqueue, r->wqueue,
				(unsigned long long)r->c.frames, (unsigned long long)r->c.bytes,
				r->c.inflight, (unsigned long long)r->c.ctl.over);
	}
	if (o->json)
		fprintf(o->out, "]\n");
	free(rs.r);
	return err ? 1 : 0;
}
