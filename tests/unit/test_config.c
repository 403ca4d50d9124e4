// SPDX-License-Identifier: MIT
/* kvspliced's configuration: the INI file's keys are the long options, the
 * command line overrides it (a list given there replaces the file's), and
 * every kind of mistake is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"

static char path[64];

static void write_file(const char *text)
{
	FILE *f;

	snprintf(path, sizeof(path), "/tmp/kvs-config-test-%d.conf", (int)getpid());
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static char said[1024]; /* what the last parse() said, on the stream it passed */

/* Parses argv (NULL-terminated; argv[0] added); the parse's return. */
static int parse(struct gw_config *cfg, struct kvs_config_store *st, const char **args)
{
	char *argv[32] = { "kvspliced" }, *text = NULL;
	enum kvs_log_level level;
	int argc = 1, r;
	size_t n = 0;
	FILE *err = open_memstream(&text, &n);

	assert_non_null(err);
	while (*args)
		argv[argc++] = (char *)*args++;
	r = kvs_config_parse(err, argc, argv, cfg, &level, st);
	fclose(err);
	snprintf(said, sizeof(said), "%s", text);
	free(text);
	return r;
}

static void file_then_command_line(void **state)
{
	struct gw_config cfg;
	struct kvs_config_store st;
	char a[64];

	(void)state;
	write_file("# a comment\n; another\n[gateway]\nlisten = 127.0.0.1:7000\n"
		   "backend = 10.0.0.1:8000\nbackend=10.0.0.2:8000\n\n[limits]\n"
		   "max-outstanding = 99\nkeep-pins = yes\nbalance = 1.5\nkeep-balance = 3\n"
		   "log-level = debug\n");
	assert_int_equal(parse(&cfg, &st, (const char *[]){ "--config", path, NULL }), 0);
	assert_string_equal(said, "");
	assert_int_equal(cfg.nbackends, 2);
	assert_string_equal(kvs_addr_str(&cfg.backends[1], a, sizeof(a)), "10.0.0.2:8000");
	assert_int_equal(cfg.max_outstanding, 99);
	assert_int_equal(cfg.keep_pins, 1);
	assert_true(cfg.balance > 1.49 && cfg.balance < 1.51);
	assert_true(cfg.keep_balance > 2.99 && cfg.keep_balance < 3.01);
	assert_int_equal(kvs_addr_port(&cfg.listen), 7000);
	assert_string_equal(cfg.config_path, path);
	kvs_config_store_free(&st);

	/* The command line wins; its backend list replaces the file's. */
	assert_int_equal(parse(&cfg, &st,
			       (const char *[]){ "--max-outstanding", "5", "-c", path, "--backend",
						 "10.0.0.9:8000", NULL }),
			 0);
	assert_int_equal(cfg.max_outstanding, 5);
	assert_int_equal(cfg.nbackends, 1);
	assert_string_equal(kvs_addr_str(&cfg.backends[0], a, sizeof(a)), "10.0.0.9:8000");
	kvs_config_store_free(&st);

	/* Every spelling getopt takes reads the file: -cFILE and an
	 * abbreviation were parsed, and the file not read. */
	{
		char glued[80];

		snprintf(glued, sizeof(glued), "-c%s", path);
		assert_int_equal(parse(&cfg, &st, (const char *[]){ glued, NULL }), 0);
		assert_string_equal(said, "");
		assert_int_equal(cfg.nbackends, 2);
		assert_string_equal(cfg.config_path, path);
		kvs_config_store_free(&st);
	}
	assert_int_equal(parse(&cfg, &st, (const char *[]){ "--conf", path, NULL }), 0);
	assert_int_equal(cfg.nbackends, 2);
	assert_int_equal(cfg.max_outstanding, 99);
	kvs_config_store_free(&st);
	assert_int_equal(
		parse(&cfg, &st, (const char *[]){ "--config=/dev/null", "-c", path, NULL }), 0);
	assert_int_equal(cfg.nbackends, 2);
	kvs_config_store_free(&st);

	/* false turns a flag off; without a file, defaults. */
	write_file("backend = 10.0.0.1:8000\nkeep-pins = false\n");
	assert_int_equal(parse(&cfg, &st,
			       (const char *[]){ "--config=/dev/null", "--config", path, NULL }),
			 0);
	assert_int_equal(cfg.keep_pins, 0);
	assert_int_equal(cfg.max_outstanding, KVS_DEFAULT_MAX_OUTSTANDING);
	assert_true(cfg.keep_balance > 1.99 && cfg.keep_balance < 2.01);
	kvs_config_store_free(&st);
	unlink(path);
}

static void mistakes_refused(void **state)
{
	static const char *const bad[] = {
		"backend = 10.0.0.1:8000\nlissen = 1.2.3.4:5\n",      /* unknown key */
		"backend = 10.0.0.1:8000\nmax-outstanding = 12x\n",   /* bad number */
		"backend = 10.0.0.1:8000\nmax-outstanding\n",	      /* no '=' */
		"backend = 10.0.0.1:8000\npool =\n",		      /* no value */
		"backend = 10.0.0.1:8000\nkeep-pins = maybe\n",	      /* not a truth value */
		"backend = 10.0.0.1:8000\nbackend = 10.0.0.1:8000\n", /* twice */
		"backend = nowhere\n",				      /* not ADDR:PORT */
		"listen = 127.0.0.1:7000\n",			      /* no backend */
		"backend = 10.0.0.1:8000\ntakeover = true\n",	      /* an action, not a setting */
		"backend = 10.0.0.1:8000\nconfig = /etc/other\n",     /* no nesting */
		"backend = 10.0.0.1:8000\nallow = 10.0.0.0/8\n",      /* needs xdp-iface */
		"backend = 10.0.0.1:8000\nkeep-balance = 0.5\n",      /* under the mean */
		"backend = 10.0.0.1:0\n",			      /* no port */
		"[gateway\nbackend = 10.0.0.1:8000\n",		      /* unterminated section */
		"backend = 10.0.0.1:8000\nlisten = 127.0.0.1:7480\nmetrics = 127.0.0.1:7480\n",
		/* metrics on listen's address */
	};
	struct gw_config cfg;
	struct kvs_config_store st;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		write_file(bad[i]);
		assert_int_equal(parse(&cfg, &st, (const char *[]){ "--config", path, NULL }), -1);
		/* said on the stream passed (a reload's log line), not on stderr */
		assert_int_equal(strncmp(said, "kvspliced: ", 11), 0);
		kvs_config_store_free(&st);
	}
	unlink(path);
	assert_int_equal(parse(&cfg, &st, (const char *[]){ "--config", "/nonexistent/x", NULL }),
			 -1);
	kvs_config_store_free(&st);
}

/* Each kind of row in the table: lists, words, addresses, flags, levels. */
static void every_kind_of_value(void **state)
{
	struct gw_config cfg;
	struct kvs_config_store st;
	enum kvs_log_level level;
	char *argv[] = { "kvspliced",	"--config",    path,   "--allow",
			 "10.9.0.0/16", "--log-level", "warn", NULL };
	int out;

	(void)state;
	write_file("backend = 10.0.0.1:8000\nxdp-iface = lo\nallow = 10.0.0.0/8\n"
		   "allow = fd00::/8\ndeny = 10.1.0.0/16\ndatapath = user\n"
		   "release-prefill = end\nmetrics = 127.0.0.1:9100\nsyn-rate = 5\n"
		   "log-level = debug\npin-dir = /tmp/p\n");
	assert_int_equal(kvs_config_parse(stderr, 7, argv, &cfg, &level, &st), 0);
	assert_int_equal(cfg.adm.nallow, 1); /* the command line's list replaces the file's */
	assert_string_equal(cfg.adm.allow[0], "10.9.0.0/16");
	assert_int_equal(cfg.adm.ndeny, 1);
	assert_string_equal(cfg.adm.ifname, "lo");
	assert_int_equal(cfg.adm.syn_rate, 5);
	assert_int_equal(cfg.user_path, 1);
	assert_int_equal(cfg.release_prefill_early, 0);
	assert_int_equal(cfg.metrics_set, 1);
	assert_int_equal(kvs_addr_port(&cfg.metrics), 9100);
	assert_string_equal(cfg.pin_dir, "/tmp/p");
	assert_int_equal(level, KVS_LOG_WARN);
	assert_int_equal(cfg.pool_size, KVS_DEFAULT_POOL);
	assert_int_equal(kvs_addr_port(&cfg.listen), 7480);
	kvs_config_store_free(&st);
	unlink(path);

	/* --help: 1, the text on stdout. */
	fflush(stdout);
	out = dup(1);
	assert_true(freopen("/dev/null", "w", stdout) != NULL);
	assert_int_equal(parse(&cfg, &st, (const char *[]){ "--pool", "3", "-h", NULL }), 1);
	fflush(stdout);
	dup2(out, 1);
	close(out);
	kvs_config_store_free(&st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(file_then_command_line),
		cmocka_unit_test(mistakes_refused),
		cmocka_unit_test(every_kind_of_value),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
