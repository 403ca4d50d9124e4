// SPDX-License-Identifier: MIT
/* kvspliced: the kvsplice gateway and controller. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpflog.h"
#include "config.h"
#include "gateway.h"
#include "log.h"

#define PROG "kvspliced"

static volatile sig_atomic_t stop_flag, reload_flag, upgrade_flag;

static void on_signal(int sig)
{
	if (sig == SIGHUP)
		reload_flag = 1;
	else if (sig == SIGUSR2)
		upgrade_flag = 1;
	else if (stop_flag < 2)
		stop_flag++; /* the first drains (--stop-drain-ms), the second ends it */
}

/* The command line, kept to read the configuration again on a reload. */
struct reloader {
	int argc;
	char **argv;
	struct kvs_config_store store; /* the last reload's */
};

/* What the parser said (lines of "kvspliced: FILE:LINE: ..."), in msg:
 * one line, each without the program's name. */
static void parse_errors(const char *said, char *msg, size_t len)
{
	size_t off = (size_t)snprintf(msg, len, "the configuration has errors, nothing changed");
	const char *sep = ": ";

	for (const char *p = said; p && *p && off < len;) {
		size_t n = strcspn(p, "\n");

		if (!strncmp(p, PROG ": ", strlen(PROG ": "))) {
			p += strlen(PROG ": ");
			n -= strlen(PROG ": ");
		}
		off += (size_t)snprintf(msg + off, len - off, "%s%.*s", sep, (int)n, p);
		sep = "; ";
		p += n;
		p += *p == '\n';
	}
}

/* gw_hooks.load: the configuration as it is now. At start the parser says
 * what is wrong on stderr; now stderr is the log, whose lines are logfmt:
 * its words go to a stream of their own and into msg, which the reload
 * logs (event=reload_failed) and kvsplicectl reload answers. */
static int reload(void *ctx, struct gw_config *cfg, char *msg, size_t len)
{
	struct reloader *r = ctx;
	enum kvs_log_level level;
	char *text = NULL;
	size_t n = 0;
	FILE *said = open_memstream(&text, &n);
	int err;

	kvs_config_store_free(&r->store);
	if (!said) {
		snprintf(msg, len,
			 "the configuration was not read: out of memory, nothing changed");
		return -ENOMEM;
	}
	err = kvs_config_parse(said, r->argc, r->argv, cfg, &level, &r->store);
	fclose(said);
	if (err)
		parse_errors(text, msg, len);
	free(text);
	return err ? -EINVAL : 0;
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_signal };
	struct kvs_config_store store;
	struct reloader rl = { argc, argv, { 0 } };
	struct gw_hooks hooks = { .stop = &stop_flag,
				  .reload = &reload_flag,
				  .upgrade = &upgrade_flag,
				  .argc = argc,
				  .argv = argv,
				  .load = reload,
				  .ctx = &rl };
	enum kvs_log_level level;
	struct gw_config cfg;
	int err = kvs_config_parse(stderr, argc, argv, &cfg, &level, &store);

	if (err) {
		kvs_config_store_free(&store);
		return err > 0 ? 0 : 2;
	}
	if (cfg.check_only) {
		char listen[96];

		printf(PROG ": configuration OK: %u backends, listening on %s\n", cfg.nbackends,
		       kvs_addr_str(&cfg.listen, listen, sizeof(listen)));
		kvs_config_store_free(&store);
		return 0;
	}
	kvs_log_init(PROG, level);
	kvs_log_libbpf();
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGUSR2, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	err = gw_run(&cfg, &hooks);
	kvs_config_store_free(&store);
	kvs_config_store_free(&rl.store);
	return err ? 1 : 0;
}
