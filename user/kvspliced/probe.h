/* SPDX-License-Identifier: MIT */
/*
 * A new upstream connection's first exchange, before it joins a data path:
 * a PING, and its PONG. What a backend that does not speak KVS1 answers
 * instead (an HTTP status line, a TLS alert) is seen here, while the
 * controller still reads the socket; once in the kernel's SOCKHASH its bytes
 * would only be dropped by the verdict.
 */
#ifndef KVS_GW_PROBE_H
#define KVS_GW_PROBE_H

#include "gw.h"

/* How long someone waiting on a backend's connections (an operator's
 * command, a data-path switch) may hold the event loop for their probes;
 * what has not answered by then is finished by the event loop. */
#define GW_PROBE_WAIT_MS 500

/*
 * The outcome of c's probe, given to the callback passed to
 * gw_probe_start(), once: 0 (a PONG, ready); -EPROTO (the answer is not
 * KVS1: why holds its first bytes, escaped); -EAGAIN (a PONG that says
 * NOT_READY); another -errno (refused, closed, timed out, a wrong frame)
 * with why saying so. After a PONG, ready or not, c->probe_instance holds the
 * instance it said (0: none), for gw_backend_instance(). The callback may
 * close c.
 */
typedef void (*gw_probed_fn)(struct gw *g, struct gw_conn *c, int err, const char *why);

/* How long a new upstream connection's handshake may take. */
#define GW_CONNECT_TIMEOUT_MS 300

/* Starts c's probe (c in no map, not read yet; c->ops are the probe's
 * until it is done): its PING is written now, or, connecting (its socket
 * from kvs_connect_start, pending), once its handshake is over, which the
 * event loop waits for, up to GW_CONNECT_TIMEOUT_MS; a connection refused
 * or timed out is then the probe's outcome. Nothing waits on a handshake:
 * a backend whose host is gone (its SYNs unanswered) held the event loop
 * 300 ms at every retry. 0, or -errno (then done is never called). */
int gw_probe_start(struct gw *g, struct gw_conn *c, gw_probed_fn done, bool connecting);
/* c's probe answer read by the event loop: its receive armed now, or once
 * it has connected. 0 or -errno. */
int gw_probe_read(struct gw *g, struct gw_conn *c);
/* Reads the answers of backend b's probes (b < 0: every backend's) in
 * place, for up to wait_ms; those still unanswered then are left to the
 * event loop, and to the tick's timeout. */
void gw_probe_settle(struct gw *g, int b, uint32_t wait_ms);
/* On the tick: probes not connected after GW_CONNECT_TIMEOUT_MS, or
 * unanswered after gw_probe_timeout_ms(), fail. */
void gw_probe_tick(struct gw *g, uint64_t now);
/* What a probe is given: three health intervals, as a health check's
 * PONG (3 s when health checks are off). */
uint32_t gw_probe_timeout_ms(const struct gw *g);

#endif
