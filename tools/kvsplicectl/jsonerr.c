// SPDX-License-Identifier: MIT
/*
 * With --json, a command that fails says so on stdout too: a script that
 * reads stdout as JSON gets {"error":"...","exit":N} rather than nothing.
 * Errors are said in many places (the commands, the option parser, getopt's
 * complaints), each on the err stream they are given; with --json, err
 * writes through to stderr and keeps a copy, and out writes through to
 * stdout and notes whether anything was printed. A command that printed its
 * JSON before it failed (status without a controller, conns without
 * inet_diag) is left as it is: one document on stdout.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl.h"
#include "jsonstr.h"
#include "opts.h"

/* To stderr, and a copy. */
static ssize_t err_write(void *cookie, const char *buf, size_t len)
{
	struct ctl_jsonerr *j = cookie;

	fwrite(buf, 1, len, j->text);
	return (ssize_t)fwrite(buf, 1, len, stderr);
}

static ssize_t out_write(void *cookie, const char *buf, size_t len)
{
	struct ctl_jsonerr *j = cookie;

	j->printed |= len > 0;
	return (ssize_t)fwrite(buf, 1, len, stdout);
}

/* Whether argv asks for --json, looked for before the options are parsed
 * so that their errors are caught too: --json or a prefix of it getopt
 * would take, --json=... (which getopt refuses), or -j alone or in a
 * cluster of short options before one that takes an argument (-jp DIR).
 * main() checks again with what getopt made of them. */
bool ctl_jsonerr_wanted(const struct kvs_optset *set, int argc, char **argv)
{
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++) {
		const char *a = argv[i];
		size_t n = strcspn(a, "=");

		if (a[0] == '-' && a[1] == '-') {
			if (n >= 3 && !strncmp(a, "--json", n))
				return true;
			continue;
		}
		for (size_t k = 1; a[0] == '-' && a[k]; k++) {
			if (a[k] == 'j')
				return true;
			if (kvs_opts_short_takes_arg(set, a[k]))
				break;
		}
	}
	return false;
}

void ctl_jsonerr_begin(struct ctl_jsonerr *j, bool json, const char *argv0)
{
	static const cookie_io_functions_t err_io = { .write = err_write };
	static const cookie_io_functions_t out_io = { .write = out_write };
	FILE *t, *e, *o;

	memset(j, 0, sizeof(*j));
	j->argv0 = argv0;
	j->out = stdout;
	j->err = stderr;
	if (!json)
		return;
	t = open_memstream(&j->buf, &j->len);
	e = fopencookie(j, "w", err_io);
	o = fopencookie(j, "w", out_io);
	if (!t || !e || !o) { /* out of memory: plain errors only */
		if (t)
			fclose(t);
		if (e)
			fclose(e);
		if (o)
			fclose(o);
		free(j->buf);
		j->buf = NULL;
		return;
	}
	setvbuf(e, NULL, _IONBF, 0); /* in order with what others write on fd 2 */
	if (isatty(fileno(stdout)))  /* as a terminal's stdout would be */
		setvbuf(o, NULL, _IOLBF, 0);
	j->text = t;
	j->out = o;
	j->err = e;
}

/* The line that says what failed: the first one of ours, "kvsplicectl: ",
 * not a usage text printed after it; else the first, less the path it was
 * run as, with which getopt begins its own. */
static void error_line(const char *text, const char *argv0, const char **line, int *len)
{
	const char *p = text;
	size_t a = argv0 ? strlen(argv0) : 0;

	*line = text;
	if (a && !strncmp(text, argv0, a) && !strncmp(text + a, ": ", 2))
		*line = text + a + 2;
	while (p && *p) {
		const char *colon = strstr(p, ": ");
		size_t n = strlen(PROG);

		if (colon && colon - p >= (long)n && !strncmp(colon - n, PROG, n) &&
		    !memchr(p, '\n', (size_t)(colon - p))) {
			*line = colon + 2;
			break;
		}
		p = strchr(p, '\n');
		p = p ? p + 1 : NULL;
	}
	*len = (int)strcspn(*line, "\n");
}

int ctl_jsonerr_end(struct ctl_jsonerr *j, int rc)
{
	const char *line;
	int len;

	if (!j->text)
		return rc;
	fclose(j->err);
	fclose(j->out); /* flushed through out_write */
	j->out = stdout;
	j->err = stderr;
	fclose(j->text);
	j->text = NULL; /* ended: a second end does nothing */
	if (rc && !j->printed) {
		error_line(j->buf ? j->buf : "", j->argv0, &line, &len);
		fputs("{\"error\":", stdout);
		if (len)
			kvs_json_str(stdout, line, (size_t)len);
		else
			fputs("\"failed\"", stdout);
		printf(",\"exit\":%d}\n", rc);
	}
	free(j->buf);
	j->buf = NULL;
	return rc;
}
