/* SPDX-License-Identifier: MIT */
/*
 * The inference server's lives as the adapter sees them: the instance its
 * PONGs say (include/kvsplice/proto.h, KVS_OFF_INSTANCE) changes when the
 * server behind it restarted, its cache lost, so that a gateway withdraws
 * the routes to that cache even though the adapter itself stayed up. Pure:
 * state.c feeds it each poll's reading.
 *
 * A restart is seen two ways. A server whose /metrics has the standard
 * process_start_time_seconds (the Prometheus client's process metric,
 * which a Python server such as vLLM serves unless in multiprocess mode)
 * says when its process started: another start time is another process,
 * and a health check that failed and passed again without it changing is
 * not a restart. Without one, a
 * server that refused connections or answered its health check with an
 * error after having been ready, then is ready again, is taken to have
 * restarted. A check that got no answer (timed out, reset) says nothing:
 * a hung or overloaded server keeps its cache, as a silent backend does at
 * the gateway. A restart that falls between two polls and is not seen
 * either way keeps the instance: --poll-ms bounds what can be missed.
 * Once the process has said its start time, a ready reading whose /metrics
 * gave no answer (timed out, failed) cannot say whether it is the same
 * process: a down seen before it waits for the next reading that says
 * (a check that failed and passed in the same process, its /metrics slow
 * at that poll, was taken for a restart; a restart so read was read again
 * when the new start time came).
 */
#ifndef KVS_ADAPTER_LIFE_H
#define KVS_ADAPTER_LIFE_H

#include <stdbool.h>
#include <stdint.h>

enum life_seen {
	LIFE_READY,  /* its health check passed */
	LIFE_DOWN,   /* it refused, or answered that it is not healthy */
	LIFE_SILENT, /* no answer: says nothing of its cache */
};

struct server_life {
	uint32_t instance; /* what PONGs say: nonzero */
	bool was_ready;	   /* ready once in this instance */
	bool went_down;	   /* ... and down (LIFE_DOWN) since */
	double started;	   /* its process_start_time_seconds; 0: not known */
};

/* A ready reading's start time when /metrics gave no answer. */
#define LIFE_START_UNKNOWN (-1.0)

void life_init(struct server_life *l, uint32_t instance);
/* One reading: how the server answered, and (ready) its start time from
 * /metrics, 0 when it has none, LIFE_START_UNKNOWN when /metrics did not
 * answer. True when it shows a restart: the caller then gives it a new
 * instance (kvs_new_instance()). */
bool life_seen(struct server_life *l, enum life_seen seen, double started);

#endif
