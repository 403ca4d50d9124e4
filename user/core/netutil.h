/* SPDX-License-Identifier: MIT */
/* Socket helpers shared by the gateway, the simulator and the tools. */
#ifndef KVS_NETUTIL_H
#define KVS_NETUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct kvs_addr {
	struct sockaddr_storage ss;
	socklen_t len;
};

/* "127.0.0.1:9000", "[::1]:9000", "localhost:9000". 0 or -EINVAL. */
int kvs_parse_addr(const char *s, struct kvs_addr *a);
/* "ADDR:PORT" of a into buf. */
const char *kvs_addr_str(const struct kvs_addr *a, char *buf, size_t len);
uint16_t kvs_addr_port(const struct kvs_addr *a);

/* Listening TCP socket with SO_REUSEADDR; returns fd or -errno. */
int kvs_listen(const struct kvs_addr *a, int backlog);
/* Blocking connect with a timeout; returns a blocking fd or -errno. */
int kvs_connect(const struct kvs_addr *a, int timeout_ms);
/* A connect begun, not waited for: returns a non-blocking fd, *pending
 * true while the handshake is under way (its outcome: kvs_connect_result
 * once the fd is writable), or -errno. */
int kvs_connect_start(const struct kvs_addr *a, bool *pending);
/* The outcome of a connect begun: 0 (the fd made blocking), or -errno. */
int kvs_connect_result(int fd);
/* The port a bound socket got (for port 0). */
int kvs_local_port(int fd);

int kvs_set_nonblock(int fd, int on);
int kvs_set_nodelay(int fd);
/*
 * Receive buffer large enough for a frame of max_frame bytes: the
 * strparser aborts any frame larger than sk_rcvbuf (EMSGSIZE), so this is
 * checked, not hoped for. Uses SO_RCVBUFFORCE when allowed, so rmem_max
 * does not cap it. Returns 0 or -errno.
 */
int kvs_size_rcvbuf(int fd, uint32_t max_frame);
/* SO_COOKIE: the kernel's id of the socket; 0 on error. */
uint64_t kvs_sock_cookie(int fd);
/* A hash of the peer's address without its port (0 if unknown): which host
 * a connection comes from. A backend tells two gateways apart by it, since
 * their socket cookies (gw_conn) are unique only on each host. */
uint64_t kvs_peer_host(int fd);

struct kvs_endpoint;
/* The address in a, as the maps record it. */
void kvs_endpoint_of(const struct sockaddr_storage *ss, struct kvs_endpoint *e);
/* A connected socket's two ends (getsockname, getpeername); zeros where
 * one is not known. */
void kvs_sock_endpoints(int fd, struct kvs_endpoint *local, struct kvs_endpoint *remote);
/* "ADDR:PORT" ("[ADDR]:PORT" for IPv6, "-" when unknown) into buf. */
const char *kvs_endpoint_str(const struct kvs_endpoint *e, char *buf, size_t len);

/* Blocking helpers for the tools: all n bytes, or -errno / -EPIPE on EOF. */
int kvs_write_all(int fd, const void *p, size_t n);
int kvs_read_all(int fd, void *p, size_t n);

/* Writes the number to path atomically (tests read ports from files). */
int kvs_write_port_file(const char *path, int port);

uint64_t kvs_now_ns(void);

/*
 * "10.0.0.0/8", "2001:db8::/32", or a bare address (a /32 or /128). Sets
 * *family (4 or 6), addr (4 or 16 bytes, network order, host bits cleared)
 * and *prefixlen. 0 or -EINVAL.
 */
int kvs_cidr_parse(const char *s, int *family, uint8_t addr[16], uint32_t *prefixlen);
/* A CIDR as kvs_cidr_parse reads it: parsed once, matched many times. */
struct kvs_cidr {
	int family; /* 4 or 6 */
	uint8_t addr[16];
	uint32_t prefixlen;
};
/* The address in ss: family 4 (an IPv4-mapped IPv6 one too) with its 4
 * bytes first, or 6 with its 16; the rest of a zero. 0 for any other
 * family (a Unix socket). */
int kvs_addr_of(const struct sockaddr_storage *ss, uint8_t a[16]);
/* 1 when the address in ss (IPv4, IPv6, or IPv4-mapped IPv6) is in one of
 * the n CIDRs, else 0. */
int kvs_cidr_contains(const struct kvs_cidr *nets, uint32_t n, const struct sockaddr_storage *ss);

#endif
