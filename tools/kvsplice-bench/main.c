// SPDX-License-Identifier: MIT
/*
 * kvsplice-bench: load generator, fleet simulator and benchmarks for
 * kvsplice. The command table and the top-level --help; each command's
 * options and work are in its own files (live*.c, sim*.c, decisions.c,
 * datapath*.c, http.c).
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "datapath.h"
#include "decisions.h"
#include "http.h"
#include "live.h"
#include "sim.h"

#define PROG "kvsplice-bench"

struct cmd {
	const char *name;
	int (*fn)(int argc, char **argv); /* argv[0] is the command's name */
	/* after "kvsplice-bench NAME" in --help; NULL: an alias, not listed */
	const char *synopsis;
};

static int cmd_live(int argc, char **argv);

static const struct cmd cmds[] = {
	{ "live", cmd_live, " --connect ADDR:PORT [options]   ('run' is the same)\n" },
	{ "run", cmd_live, NULL },
	{ "sim", bench_sim,
	  " [options]         (the fleet in virtual time, policies side\n"
	  "                                       by side; see sim --help)\n" },
	{ "decisions", bench_decisions,
	  " [options]   (routing decisions per second;\n"
	  "                                       see decisions --help)\n" },
	{ "datapath", bench_datapath,
	  " [options]    (bytes through the kernel path, the\n"
	  "                                       userspace path and HAProxy; see\n"
	  "                                       datapath --help)\n" },
	{ "http", bench_http,
	  " --url URL [options]   (straight to an OpenAI-compatible\n"
	  "                                       server: the adapter's baseline;\n"
	  "                                       see http --help)\n" },
};

#define NCMDS (sizeof(cmds) / sizeof(cmds[0]))

/* The commands, then live's help: live is the default workload. */
static void usage(FILE *f)
{
	const char *lead = "Usage: ";

	for (size_t i = 0; i < NCMDS; i++) {
		if (!cmds[i].synopsis)
			continue;
		fprintf(f, "%s" PROG " %s%s", lead, cmds[i].name, cmds[i].synopsis);
		lead = "       ";
	}
	fprintf(f, "\n");
	live_usage(f);
}

/* Every command runs with this handler installed: it only sets the flag,
 * which live reads to end its run and report. */
static volatile sig_atomic_t stop_flag;

static void on_signal(int sig)
{
	(void)sig;
	stop_flag = 1;
}

static int cmd_live(int argc, char **argv)
{
	return bench_live(argc, argv, usage, &stop_flag);
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_signal };
	const char *sep = "";

	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	for (size_t i = 0; i < NCMDS; i++)
		if (!strcmp(argv[1], cmds[i].name))
			return cmds[i].fn(argc - 1, argv + 1);
	fprintf(stderr, PROG ": unknown command '%s' (commands: ", argv[1]);
	for (size_t i = 0; i < NCMDS; i++) {
		if (!cmds[i].synopsis)
			continue;
		fprintf(stderr, "%s%s", sep, cmds[i].name);
		sep = ", ";
	}
	fprintf(stderr, "; see --help)\n");
	return 2;
}
