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
 * NOT_READY); another -errno (closed, timed out, a wrong frame) with why
 * saying so. After a PONG, ready or not, c->probe_instance holds the
 * instance it said (0: none), for gw_backend_instance(). The callback may
 * close c.
 */
typedef void (*gw_probed_fn)(struct gw *g, struct gw_conn *c, int err, const char *why);

/* Writes the probe's PING on c (connected, in no map, not read yet); its
 * answer is read from then on (c->ops are the probe's until it is done).
 * 0, or -errno (then done is never called). */
int gw_probe_start(struct gw *g, struct gw_conn *c, gw_probed_fn done);
/* Reads the answers of backend b's probes (b < 0: every backend's) in
 * place, for up to wait_ms; those still unanswered then are left to the
 * event loop, and to the tick's timeout. */
void gw_probe_settle(struct gw *g, int b, uint32_t wait_ms);
/* On the tick: probes unanswered after gw_probe_timeout_ms() fail. */
void gw_probe_tick(struct gw *g, uint64_t now);
/* What a probe is given: three health intervals, as a health check's
 * PONG (3 s when health checks are off). */
uint32_t gw_probe_timeout_ms(const struct gw *g);

#endif
