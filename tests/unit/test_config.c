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

/* Parses argv (NULL-terminated; argv[0] added); the parse's return. */
static int parse(struct gw_config *cfg, struct kvs_config_store *st, const char **args)
{
	char *argv[32] = { "kvspliced" };
	enum kvs_log_level level;
	int argc = 1, r;

	while (*args)
		argv[argc++] = (char *)*args++;
	r = kvs_config_parse(argc, argv, cfg, &level, st);
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
		   "max-outstanding = 99\nkeep-pins = yes\nbalance = 1.5\nlog-level = debug\n");
	assert_int_equal(parse(&cfg, &st, (const char *[]){ "--config", path, NULL }), 0);
	assert_int_equal(cfg.nbackends, 2);
	assert_string_equal(kvs_addr_str(&cfg.backends[1], a, sizeof(a)), "10.0.0.2:8000");
	assert_int_equal(cfg.max_outstanding, 99);
	assert_int_equal(cfg.keep_pins, 1);
	assert_true(cfg.balance > 1.49 && cfg.balance < 1.51);
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

	/* false turns a flag off; without a file, defaults. */
	write_file("backend = 10.0.0.1:8000\nkeep-pins = false\n");
	assert_int_equal(parse(&cfg, &st, (const char *[]){ "--config=/dev/null", "--config", path,
						     NULL }),
			 0);
	assert_int_equal(cfg.keep_pins, 0);
	assert_int_equal(cfg.max_outstanding, KVS_DEFAULT_MAX_OUTSTANDING);
	kvs_config_store_free(&st);
	unlink(path);
}

static void mistakes_refused(void **state)
{
	static const char *const bad[] = {
		"backend = 10.0.0.1:8000\nlissen = 1.2.3.4:5\n", /* unknown key */
		"backend = 10.0.0.1:8000\nmax-outstanding = 12x\n", /* bad number */
		"backend = 10.0.0.1:8000\nmax-outstanding\n",     /* no '=' */
		"backend = 10.0.0.1:8000\npool =\n",              /* no value */
		"backend = 10.0.0.1:8000\nkeep-pins = maybe\n",   /* not a truth value */
		"backend = 10.0.0.1:8000\nbackend = 10.0.0.1:8000\n", /* twice */
		"backend = nowhere\n",                             /* not ADDR:PORT */
		"listen = 127.0.0.1:7000\n",                       /* no backend */
		"backend = 10.0.0.1:8000\ntakeover = true\n",      /* an action, not a setting */
		"backend = 10.0.0.1:8000\nconfig = /etc/other\n",  /* no nesting */
		"backend = 10.0.0.1:8000\nallow = 10.0.0.0/8\n",   /* needs xdp-iface */
	};
	struct gw_config cfg;
	struct kvs_config_store st;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		write_file(bad[i]);
		assert_int_equal(parse(&cfg, &st, (const char *[]){ "--config", path, NULL }), -1);
		kvs_config_store_free(&st);
	}
	unlink(path);
	assert_int_equal(parse(&cfg, &st, (const char *[]){ "--config", "/nonexistent/x", NULL }),
			 -1);
	kvs_config_store_free(&st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(file_then_command_line),
		cmocka_unit_test(mistakes_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
