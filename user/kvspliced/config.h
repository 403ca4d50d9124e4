/* SPDX-License-Identifier: MIT */
/*
 * kvspliced's configuration: its command line and the INI file that
 * --config names, which takes every long option as a key:
 *
 *     # comments start with # or ;   [sections] are allowed, for grouping
 *     listen = 0.0.0.0:7480
 *     backend = 10.0.0.11:8000
 *     backend = 10.0.0.12:8000
 *     max-outstanding = 512
 *     keep-pins = true
 *
 * The file is read first; the command line then overrides it, and a list
 * given there (backend, allow, deny) replaces the file's list. Errors name
 * the file and line. The options, their checks and --help are one table
 * in config.c.
 */
#ifndef KVS_CONFIG_H
#define KVS_CONFIG_H

#include "gateway.h"
#include "log.h"
#include "opts.h"

/* What the parsed configuration's strings point into: keep it while the
 * configuration is used. */
struct kvs_config_store {
	const char *path;   /* the file read, or NULL */
	struct kvs_ini ini; /* its text and settings */
};

/*
 * Parses argv (and the --config file it names) into *cfg and *level.
 * Returns 0, 1 when --help was printed (on stdout; exit 0), or -1 when a
 * message on err said what is wrong (exit 2).
 */
int kvs_config_parse(FILE *err, int argc, char **argv, struct gw_config *cfg,
		     enum kvs_log_level *level, struct kvs_config_store *store);
void kvs_config_store_free(struct kvs_config_store *store);

#endif
