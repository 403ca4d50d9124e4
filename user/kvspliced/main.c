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

/* gw_hooks.load: the configuration as it is now. Messages go to stderr
 * (the log) and, in short, to msg. */
static int reload(void *ctx, struct gw_config *cfg, char *msg, size_t len)
{
	struct reloader *r = ctx;
	enum kvs_log_level level;
	int err;

	kvs_config_store_free(&r->store);
	err = kvs_config_parse(r->argc, r->argv, cfg, &level, &r->store);
	if (err) {
		snprintf(msg, len, "the configuration has errors (see the log); nothing changed");
		return -EINVAL;
	}
	return 0;
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
	int err = kvs_config_parse(argc, argv, &cfg, &level, &store);

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
