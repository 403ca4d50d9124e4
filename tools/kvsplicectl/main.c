// SPDX-License-Identifier: MIT
/*
 * kvsplicectl: the operator's view of a kvsplice gateway. Options, then the
 * command table: what the pinned maps say it reads from them (maps.c,
 * conns.c: works while the controller is down); what only the controller
 * can do it asks over the controller's socket (control.c). See usage() and
 * docs/RUNBOOK.md.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h> /* optind */

#include "ctl.h"
#include "kvsplice/maps.h"
#include "netutil.h"
#include "opts.h"
#include "pins.h"

enum cmd_source { FROM_MAPS, FROM_CONTROLLER };

struct cmd {
	const char *name;
	int (*fn)(const struct ctl_opts *o, int argc, char **argv);
	int max_args; /* words after the name it takes; -1: it checks them itself */
	/* Checks the words before anything is asked of the controller, whose
	 * refusal would exit 1: a usage error exits 2. NULL: none. */
	int (*check)(const struct ctl_opts *o, int argc, char **argv);
	enum cmd_source source;
	const char *help; /* its lines of --help, as printed */
};

/* backend VERB ADDR:PORT: an address the controller could not parse is a
 * usage error (its own check, kvs_parse_addr, made here first). A wrong
 * verb or count is ctl_backend's to say. */
static int check_backend(const struct ctl_opts *o, int argc, char **argv)
{
	static const char *const verbs[] = { "add", "remove", "drain", "undrain" };
	struct kvs_addr a;

	if (argc != 2)
		return 0;
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++) {
		if (strcmp(argv[0], verbs[i]))
			continue;
		if (!kvs_parse_addr(argv[1], &a))
			return 0;
		fprintf(o->err, PROG ": backend %s: '%s' is not ADDR:PORT (see --help)\n", argv[0],
			argv[1]);
		return 2;
	}
	return 0;
}

static const struct cmd cmds[] = {
	{ "stats", ctl_stats, 0, NULL, FROM_MAPS,
	  "  stats      kernel and controller counters: frames routed by the kernel\n"
	  "             (fast path) and by the controller (slow path), responses,\n"
	  "             drops, routes, connections, the controller's decisions by\n"
	  "             reason, and (with --json) each backend's outstanding work\n" },
	{ "backends", ctl_backends, 0, NULL, FROM_MAPS,
	  "  backends   per backend: address, state (up, draining, removing, down,\n"
	  "             probation, not-ready), outstanding requests and work, requests,\n"
	  "             bytes each way, hit rate and mean time to first token (its own\n"
	  "             END reports), running/waiting from its last PONG (--json adds\n"
	  "             prediction counters, index size, TTFT's queue and prefill\n"
	  "             parts)\n" },
	{ "routes", ctl_routes, 1, NULL, FROM_MAPS,
	  "  routes     the routes map: how many, and the --limit N (default 20) with the\n"
	  "             most hits: prefix hash, backend, depth in 64-byte blocks (0: an\n"
	  "             explicit cache key), age, hits, whether still current\n"
	  "  routes flush  delete every route (the controller re-learns them as the\n"
	  "             prompts come again; the kernel's fast path restarts cold), and\n"
	  "             take them off their tenants' route counts (route_shares)\n" },
	{ "conns", ctl_conns, 0, NULL, FROM_MAPS,
	  "  conns      every client and upstream connection (and the controller's two\n"
	  "             pairs): addresses, TCP state, RTT, queues (inet_diag), frames,\n"
	  "             bytes, requests in flight\n" },
	{ "status", ctl_status, 0, NULL, FROM_CONTROLLER,
	  "  status     controller, listener, backends by state, clients, requests,\n"
	  "             routes (without a controller: what the maps still say)\n" },
	{ "backend", ctl_backend, -1, check_backend, FROM_CONTROLLER,
	  "  backend add ADDR:PORT      a new backend, connected at once; exit 1, and\n"
	  "             not added, if it cannot be reached (list a backend that\n"
	  "             should wait for its server in the config file and reload)\n"
	  "  backend drain ADDR:PORT    no new requests; those in flight finish\n"
	  "  backend undrain ADDR:PORT  back in service (calls off a removal)\n"
	  "  backend remove ADDR:PORT   drain, then remove once nothing is in flight\n"
	  "             (or after kvspliced's --drain-timeout-ms)\n" },
	{ "reload", ctl_reload, 0, NULL, FROM_CONTROLLER,
	  "  reload     re-read kvspliced's --config file now (as SIGHUP does)\n" },
	{ "datapath", ctl_datapath, 1, NULL, FROM_CONTROLLER,
	  "  datapath [kernel|user]  which data path new clients take: the kernel's\n"
	  "             (BPF splicing) or the userspace one (the controller copies\n"
	  "             every frame; the kill switch if BPF misbehaves). Clients\n"
	  "             connected stay on theirs until they close. Without an\n"
	  "             argument: which one, and how many clients are on each\n" },
	{ "upgrade", ctl_upgrade, 0, NULL, FROM_CONTROLLER,
	  "  upgrade    start kvspliced's program file anew (install the new binary\n"
	  "             first): it takes every connection over, the old one exits;\n"
	  "             waits (30 s at most) until the new one answers\n" },
};

#define NCMDS (sizeof(cmds) / sizeof(cmds[0]))

static const struct cmd *find_cmd(const char *name)
{
	for (size_t i = 0; i < NCMDS; i++)
		if (!strcmp(cmds[i].name, name))
			return &cmds[i];
	return NULL;
}

static void print_cmds(FILE *f, enum cmd_source source)
{
	for (size_t i = 0; i < NCMDS; i++)
		if (cmds[i].source == source)
			fputs(cmds[i].help, f);
}

static void usage(FILE *f);

/* --limit: its own check (base 10, 1..1000000). */
static int parse_limit(FILE *err, const char *who, const struct kvs_opt *row, const char *v,
		       void *dst)
{
	char *end;
	unsigned long n = strtoul(v, &end, 10);

	if (*end || !*v || n == 0 || n > 1000000) {
		fprintf(err, "%s: --limit: '%s' is not 1..1000000\n", who, v);
		return -1;
	}
	*(uint32_t *)dst = (uint32_t)n;
	return 0;
}

static const struct ctl_opts defaults = { .pin_dir = KVS_DEFAULT_PIN_DIR,
					  .limit = 20,
					  .timeout_ms = 10000 };

/* -p, -s and -l work too; --help does not say so. */
#define O struct ctl_opts
static const struct kvs_opt rows[] = {
	{ "pin-dir", 'p', KVS_OPT_STR(O, pin_dir), .short_unlisted = true, .arg = "DIR",
	  .help = "the gateway's pin directory (default {default})" },
	{ "socket", 's', KVS_OPT_STR(O, socket), .short_unlisted = true, .arg = "PATH",
	  .help = "the controller's control socket (default\n" KVS_CONTROL_DIR
		  "/<last part of the pin dir>.sock)" },
	{ "json", 'j', KVS_OPT_FLAG(O, json),
	  .help = "machine-readable output; a command that fails with nothing\n"
		  "else to print prints {\"error\":\"...\",\"exit\":N}" },
	{ "limit", 'l', KVS_OPT_FUNC(O, limit, parse_limit), .short_unlisted = true, .arg = "N",
	  .help = "routes: how many to list" },
	{ "timeout", 0, KVS_OPT_U32(O, timeout_ms, 1, 3600000), .arg = "MS",
	  .help = "how long the controller has to answer a command\n"
		  "(default {default}; a monitor may want less)" },
	KVS_OPT_ROW_HELP,
};
#undef O

/* Options anywhere: kvsplicectl stats --json, kvsplicectl --json stats. */
static const struct kvs_optset optset = {
	.prog = PROG,
	KVS_OPT_ROWS(rows),
	.defaults = &defaults,
	.usage = "  Changes last until the next reload or restart: put them in the config file\n"
		 "  to keep them.\n"
		 "\n"
		 "Options:\n",
	.footer = "\n"
		  "Root is needed: the maps and the socket are root's.\n",
	.help_col = 22,
	.print_help = usage,
	.help_on_error = true,
	.operands = true,
};

static void usage(FILE *f)
{
	fprintf(f, "Usage: " PROG " [--pin-dir DIR] [--socket PATH] [--json] COMMAND [ARGS]\n"
		   "\n"
		   "The operator's view of a kvsplice gateway: state read from its pinned BPF\n"
		   "maps (works while the controller is down), changes asked of the running\n"
		   "controller over its control socket.\n"
		   "\n"
		   "From the maps:\n");
	print_cmds(f, FROM_MAPS);
	fprintf(f, "\n"
		   "From the controller (exit status 3 when none answers):\n");
	print_cmds(f, FROM_CONTROLLER);
	kvs_opts_usage(&optset, f);
}

/* The command line after the options: the command's exit status. */
static int dispatch(const struct ctl_opts *o, int argc, char **argv)
{
	const struct cmd *c;
	int rc, nargs;

	if (optind >= argc) {
		fprintf(o->err, PROG ": no command given\n");
		usage(o->err);
		return 2;
	}
	c = find_cmd(argv[optind]);
	nargs = argc - optind - 1;
	if (!c) {
		fprintf(o->err, PROG ": unknown command '%s' (see --help)\n", argv[optind]);
		return 2;
	}
	/* Too many words: the first past those the command takes is the one
	 * reported (routes flush EXTRA names EXTRA). */
	if (c->max_args >= 0 && nargs > c->max_args) {
		fprintf(o->err, PROG ": unexpected argument '%s' (see --help)\n",
			argv[optind + 1 + c->max_args]);
		return 2;
	}
	if (c->check && (rc = c->check(o, nargs, argv + optind + 1)))
		return rc;
	return c->fn(o, nargs, argv + optind + 1);
}

int main(int argc, char **argv)
{
	struct ctl_opts o = defaults;
	struct ctl_jsonerr je;
	int rc;

	ctl_jsonerr_begin(&je, ctl_jsonerr_wanted(&optset, argc, argv), argv[0]);
	rc = kvs_opts_argv(&optset, je.err, argc, argv, &o);
	if (rc)
		return ctl_jsonerr_end(&je, rc > 0 ? 0 : 2);
	/* The options parsed: --json is what getopt made of them. */
	if (o.json != (je.text != NULL)) {
		ctl_jsonerr_end(&je, 0);
		ctl_jsonerr_begin(&je, o.json, argv[0]);
	}
	o.out = je.out;
	o.err = je.err;
	return ctl_jsonerr_end(&je, dispatch(&o, argc, argv));
}
