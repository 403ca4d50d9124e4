// SPDX-License-Identifier: MIT
/* Socket helpers: addresses, listen and connect, options, CIDRs. */
#include "netutil.h"

#include "kvsplice/maps.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifndef SO_COOKIE
#define SO_COOKIE 57
#endif

int kvs_parse_addr(const char *s, struct kvs_addr *a)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
	struct addrinfo *res = NULL;
	char host[256];
	const char *colon, *port;
	size_t hlen;
	char *end;
	long pnum;

	if (!s)
		return -EINVAL;
	if (s[0] == '[') {
		const char *rb = strchr(s, ']');

		if (!rb || rb[1] != ':')
			return -EINVAL;
		hlen = (size_t)(rb - s - 1);
		memcpy(host, s + 1, hlen < sizeof(host) ? hlen : 0);
		port = rb + 2;
	} else {
		colon = strrchr(s, ':');
		if (!colon)
			return -EINVAL;
		hlen = (size_t)(colon - s);
		if (hlen < sizeof(host))
			memcpy(host, s, hlen);
		port = colon + 1;
	}
	if (hlen == 0 || hlen >= sizeof(host))
		return -EINVAL;
	host[hlen] = '\0';
	pnum = strtol(port, &end, 10);
	if (!*port || *end || pnum < 0 || pnum > 65535)
		return -EINVAL;
	if (getaddrinfo(host, port, &hints, &res) != 0 || !res)
		return -EINVAL;
	memcpy(&a->ss, res->ai_addr, res->ai_addrlen);
	a->len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

uint16_t kvs_addr_port(const struct kvs_addr *a)
{
	if (a->ss.ss_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)&a->ss)->sin6_port);
	return ntohs(((const struct sockaddr_in *)&a->ss)->sin_port);
}

const char *kvs_addr_str(const struct kvs_addr *a, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";

	if (a->ss.ss_family == AF_INET6) {
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)&a->ss)->sin6_addr, host,
			  sizeof(host));
		snprintf(buf, len, "[%s]:%u", host, kvs_addr_port(a));
	} else {
		inet_ntop(AF_INET, &((const struct sockaddr_in *)&a->ss)->sin_addr, host,
			  sizeof(host));
		snprintf(buf, len, "%s:%u", host, kvs_addr_port(a));
	}
	return buf;
}

int kvs_listen(const struct kvs_addr *a, int backlog)
{
	int fd, one = 1, err;

	fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)&a->ss, a->len) || listen(fd, backlog)) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

int kvs_connect_start(const struct kvs_addr *a, bool *pending)
{
	int fd, err;

	fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	*pending = false;
	if (connect(fd, (const struct sockaddr *)&a->ss, a->len) == 0)
		return fd;
	if (errno == EINPROGRESS) {
		*pending = true;
		return fd;
	}
	err = -errno;
	close(fd);
	return err;
}

int kvs_connect_result(int fd)
{
	socklen_t elen = sizeof(int);
	int err = 0;

	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen))
		return -errno;
	if (err)
		return -err;
	return kvs_set_nonblock(fd, 0);
}

int kvs_connect(const struct kvs_addr *a, int timeout_ms)
{
	struct pollfd pfd;
	bool pending;
	int fd = kvs_connect_start(a, &pending), err;

	if (fd < 0)
		return fd;
	pfd = (struct pollfd){ .fd = fd, .events = POLLOUT };
	if (pending && poll(&pfd, 1, timeout_ms) <= 0)
		err = -ETIMEDOUT;
	else
		err = kvs_connect_result(fd);
	if (err) {
		close(fd);
		return err;
	}
	return fd;
}

int kvs_local_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct kvs_addr a;

	if (getsockname(fd, (struct sockaddr *)&ss, &len))
		return -errno;
	a.ss = ss;
	a.len = len;
	return kvs_addr_port(&a);
}

int kvs_set_nonblock(int fd, int on)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return -errno;
	fl = on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK);
	return fcntl(fd, F_SETFL, fl) ? -errno : 0;
}

int kvs_set_nodelay(int fd)
{
	int one = 1;

	return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) ? -errno : 0;
}

int kvs_size_rcvbuf(int fd, uint32_t max_frame)
{
	/* The kernel doubles the value for bookkeeping overhead; ask for the
	 * frame plus headroom so a frame and its successor's start both fit. */
	int want = (int)(max_frame + (max_frame >> 1) + 65536), got = 0;
	socklen_t len = sizeof(got);

	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &want, sizeof(want)) &&
	    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &want, sizeof(want)))
		return -errno;
	if (getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &got, &len))
		return -errno;
	return (uint32_t)got > max_frame ? 0 : -EMSGSIZE;
}

uint64_t kvs_sock_cookie(int fd)
{
	uint64_t cookie = 0;
	socklen_t len = sizeof(cookie);

	if (getsockopt(fd, SOL_SOCKET, SO_COOKIE, &cookie, &len))
		return 0;
	return cookie;
}

int kvs_write_all(int fd, const void *p, size_t n)
{
	const uint8_t *c = p;

	while (n) {
		ssize_t w = write(fd, c, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

int kvs_read_all(int fd, void *p, size_t n)
{
	uint8_t *c = p;

	while (n) {
		ssize_t r = read(fd, c, n);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return -EPIPE;
		c += r;
		n -= (size_t)r;
	}
	return 0;
}

int kvs_write_port_file(const char *path, int port)
{
	char tmp[4096];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f)
		return -errno;
	fprintf(f, "%d\n", port);
	if (fclose(f))
		return -errno;
	return rename(tmp, path) ? -errno : 0;
}

uint64_t kvs_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int kvs_cidr_parse(const char *s, int *family, uint8_t addr[16], uint32_t *prefixlen)
{
	char buf[INET6_ADDRSTRLEN + 8], *slash, *end;
	unsigned long len;
	uint32_t bits, i;

	if (!s || strlen(s) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, s);
	slash = strchr(buf, '/');
	if (slash)
		*slash = 0;
	memset(addr, 0, 16);
	if (inet_pton(AF_INET, buf, addr) == 1) {
		*family = 4;
		bits = 32;
	} else if (inet_pton(AF_INET6, buf, addr) == 1) {
		*family = 6;
		bits = 128;
	} else {
		return -EINVAL;
	}
	if (slash) {
		if (!slash[1])
			return -EINVAL;
		errno = 0;
		len = strtoul(slash + 1, &end, 10);
		if (errno || *end || len > bits || slash[1] == '-' || slash[1] == '+')
			return -EINVAL;
		bits = (uint32_t)len;
	}
	/* Host bits cleared, so that 10.1.2.3/8 means 10.0.0.0/8. */
	for (i = bits; i < (*family == 4 ? 32u : 128u); i++)
		addr[i / 8] &= (uint8_t) ~(0x80u >> (i % 8));
	*prefixlen = bits;
	return 0;
}

void kvs_endpoint_of(const struct sockaddr_storage *ss, struct kvs_endpoint *e)
{
	memset(e, 0, sizeof(*e));
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)ss;

		memcpy(e->addr, &in->sin_addr, 4);
		e->port = ntohs(in->sin_port);
		e->family = AF_INET;
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;

		memcpy(e->addr, &in6->sin6_addr, 16);
		e->port = ntohs(in6->sin6_port);
		e->family = AF_INET6;
	}
}

void kvs_sock_endpoints(int fd, struct kvs_endpoint *local, struct kvs_endpoint *remote)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	memset(&ss, 0, sizeof(ss));
	if (getsockname(fd, (struct sockaddr *)&ss, &len))
		ss.ss_family = AF_UNSPEC;
	kvs_endpoint_of(&ss, local);
	len = sizeof(ss);
	memset(&ss, 0, sizeof(ss));
	if (getpeername(fd, (struct sockaddr *)&ss, &len))
		ss.ss_family = AF_UNSPEC;
	kvs_endpoint_of(&ss, remote);
}

const char *kvs_endpoint_str(const struct kvs_endpoint *e, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";

	if (e->family == AF_INET6) {
		inet_ntop(AF_INET6, e->addr, host, sizeof(host));
		snprintf(buf, len, "[%s]:%u", host, e->port);
	} else if (e->family == AF_INET) {
		inet_ntop(AF_INET, e->addr, host, sizeof(host));
		snprintf(buf, len, "%s:%u", host, e->port);
	} else {
		snprintf(buf, len, "-");
	}
	return buf;
}

uint64_t kvs_peer_host(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	uint64_t h = 0xcbf29ce484222325ULL;
	size_t off = 0, n = 0, i;
	const uint8_t *p;

	memset(&ss, 0, sizeof(ss));
	if (getpeername(fd, (struct sockaddr *)&ss, &len))
		return 0;
	p = (const uint8_t *)&ss;
	if (ss.ss_family == AF_INET) {
		off = offsetof(struct sockaddr_in, sin_addr);
		n = sizeof(struct in_addr);
	} else if (ss.ss_family == AF_INET6) {
		off = offsetof(struct sockaddr_in6, sin6_addr);
		n = sizeof(struct in6_addr);
	}
	for (i = 0; i < n; i++) /* FNV-1a */
		h = (h ^ p[off + i]) * 0x100000001b3ULL;
	return h;
}

int kvs_addr_of(const struct sockaddr_storage *ss, uint8_t a[16])
{
	static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	memset(a, 0, 16);
	if (ss->ss_family == AF_INET) {
		memcpy(a, &((const struct sockaddr_in *)ss)->sin_addr, 4);
		return 4;
	}
	if (ss->ss_family != AF_INET6)
		return 0;
	memcpy(a, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
	if (memcmp(a, mapped, 12))
		return 6;
	memmove(a, a + 12, 4); /* a dual-stack listener's IPv4 peer */
	memset(a + 4, 0, 12);
	return 4;
}

int kvs_cidr_contains(const struct kvs_cidr *nets, uint32_t n, const struct sockaddr_storage *ss)
{
	uint8_t a[16];
	uint32_t i, bit;
	int family = kvs_addr_of(ss, a);

	if (!family)
		return 0;
	for (i = 0; i < n; i++) {
		if (nets[i].family != family)
			continue;
		for (bit = 0; bit < nets[i].prefixlen; bit++)
			if ((a[bit / 8] ^ nets[i].addr[bit / 8]) & (0x80 >> (bit % 8)))
				break;
		if (bit == nets[i].prefixlen)
			return 1;
	}
	return 0;
}
