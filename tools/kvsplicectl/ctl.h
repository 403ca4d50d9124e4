/* SPDX-License-Identifier: MIT */
/*
 * kvsplicectl's shared declarations: the options every command sees, and
 * the commands main.c's table dispatches to, a file per kind: what the maps
 * say (maps.c), the sockets behind them (conns.c), and what only the
 * running controller can do (control.c).
 */
#ifndef KVS_CTL_H
#define KVS_CTL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define PROG "kvsplicectl"

struct ctl_opts {
	const char *pin_dir;
	const char *socket; /* control socket; NULL: the pin dir's default */
	int json;
	uint32_t limit;	     /* routes: how many to list */
	uint32_t timeout_ms; /* how long the controller has to answer */
	FILE *out, *err;     /* what the commands print on (struct ctl_jsonerr's) */
};

/*
 * With --json, a failure as JSON on stdout too (jsonerr.c): begun before
 * the options are parsed, ended with the exit status, which it returns.
 * Between the two, everything is printed on its out and err: stdout and
 * stderr, or with --json streams of its own that write through to them.
 */
struct ctl_jsonerr {
	FILE *out, *err;
	FILE *text; /* with --json: a copy of what was said on err, into buf */
	char *buf;
	size_t len;
	bool printed;	   /* something went to out */
	const char *argv0; /* getopt's errors begin with it */
};
struct kvs_optset;
/* Whether argv asks for --json, by the options of set (main.c's table). */
bool ctl_jsonerr_wanted(const struct kvs_optset *set, int argc, char **argv);
void ctl_jsonerr_begin(struct ctl_jsonerr *j, bool json, const char *argv0);
int ctl_jsonerr_end(struct ctl_jsonerr *j, int rc);

/* fd of the pinned map, or -errno (and a message saying why). */
int ctl_open_map(const struct ctl_opts *o, const char *name);
/* Backends by state from the backends map, for status without a
 * controller; -errno if the map cannot be read. */
int ctl_count_backends(const struct ctl_opts *o, uint32_t *by_state, uint32_t nstates);
/* The sockets the kernel's SOCKHASH holds now, by kind: what it can still
 * splice without a controller. 0 or -errno. */
struct ctl_spliced {
	uint32_t clients, upstreams, punt, other;
};
int ctl_count_spliced(const struct ctl_opts *o, struct ctl_spliced *n);

/*
 * The commands. Each takes the argc words after its name (main.c has
 * checked there are no more than the table allows) and returns the exit
 * status: 0, 1 (failed), 2 (bad usage), 3 (controller not running).
 */
/* maps.c */
int ctl_stats(const struct ctl_opts *o, int argc, char **argv);
int ctl_backends(const struct ctl_opts *o, int argc, char **argv);
/* routes, or routes flush */
int ctl_routes(const struct ctl_opts *o, int argc, char **argv);
/* conns.c */
int ctl_conns(const struct ctl_opts *o, int argc, char **argv);
/* control.c */
int ctl_status(const struct ctl_opts *o, int argc, char **argv);
/* backend add|remove|drain|undrain ADDR:PORT */
int ctl_backend(const struct ctl_opts *o, int argc, char **argv);
int ctl_reload(const struct ctl_opts *o, int argc, char **argv);
/* datapath [kernel|user]: without an argument, asks which */
int ctl_datapath(const struct ctl_opts *o, int argc, char **argv);
/* Starts a successor and waits (30 s at most) until it answers. */
int ctl_upgrade(const struct ctl_opts *o, int argc, char **argv);

#endif
