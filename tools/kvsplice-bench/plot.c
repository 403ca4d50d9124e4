// SPDX-License-Identifier: MIT
/*
 * kvsplice-bench --plot: TTFT CDFs and requests per backend written as
 * gnuplot data and script, and drawn by gnuplot (plot.h says what each
 * function leaves in DIR).
 */
#include "plot.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Points per CDF: enough for a smooth curve, few enough that a 20,000-request
 * run gives a small file. */
#define CDF_POINTS 1000

static FILE *open_in(const char *prog, const char *dir, const char *name)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	if (!f)
		fprintf(stderr, "%s: --plot: cannot write %s: %s\n", prog, path, strerror(errno));
	return f;
}

static int close_checked(const char *prog, FILE *f, const char *name)
{
	if (ferror(f) | fclose(f)) {
		fprintf(stderr, "%s: --plot: write error on %s\n", prog, name);
		return -EIO;
	}
	return 0;
}

/* One gnuplot data block per series (blank-line separated; `index i`). */
static int write_cdf(const char *prog, const char *dir, const struct bench_series *s, uint32_t ns)
{
	FILE *f = open_in(prog, dir, "ttft_cdf.dat");

	if (!f)
		return -errno;
	fprintf(f, "# TTFT (ms) and the fraction of requests at or below it, per series\n");
	for (uint32_t i = 0; i < ns; i++) {
		uint32_t m = s[i].n < CDF_POINTS ? s[i].n : CDF_POINTS;

		fprintf(f, "# %s\n", s[i].name);
		for (uint32_t k = 0; k < m; k++) {
			/* evenly spaced ranks, always including the last */
			uint32_t idx = m > 1 ? (uint32_t)((uint64_t)k * (s[i].n - 1) / (m - 1)) : 0;

			fprintf(f, "%.4f %.6f\n", s[i].ttft_ms[idx], (double)(idx + 1) / s[i].n);
		}
		fprintf(f, "\n\n");
	}
	return close_checked(prog, f, "ttft_cdf.dat");
}

static int write_load(const char *prog, const char *dir, const struct bench_series *s, uint32_t ns)
{
	FILE *f = open_in(prog, dir, "load.dat");
	uint32_t nb = 0;

	if (!f)
		return -errno;
	for (uint32_t i = 0; i < ns; i++)
		if (s[i].nloads > nb)
			nb = s[i].nloads;
	fprintf(f, "backend");
	for (uint32_t i = 0; i < ns; i++)
		fprintf(f, " %s", s[i].name);
	fprintf(f, "\n");
	for (uint32_t b = 0; b < nb; b++) {
		fprintf(f, "%u", b + 1);
		for (uint32_t i = 0; i < ns; i++)
			fprintf(f, " %.0f", b < s[i].nloads ? s[i].loads[b] : 0.0);
		fprintf(f, "\n");
	}
	return close_checked(prog, f, "load.dat");
}

static int write_script(const char *prog, const char *dir, const char *title,
			const struct bench_series *s, uint32_t ns)
{
	FILE *f = open_in(prog, dir, "plot.gp");

	if (!f)
		return -errno;
	fprintf(f,
		"# gnuplot plot.gp (in this directory) redraws the pictures.\n"
		"set datafile commentschars '#'\n"
		"set key bottom right\n"
		"set grid\n"
		"do for [fmt in 'svg png'] {\n"
		"  if (fmt eq 'svg') { set terminal svg size 900,560 dynamic font 'sans,12' }\n"
		"  else { set terminal pngcairo size 900,560 font 'sans,11' }\n"
		"  set output 'ttft_cdf.'.fmt\n"
		"  set title \"TTFT CDF: %s\" noenhanced\n"
		"  set xlabel 'time to first token (ms, log scale)'\n"
		"  set ylabel 'fraction of requests'\n"
		"  set logscale x\n"
		"  set yrange [0:1]\n"
		"  plot ",
		title);
	for (uint32_t i = 0; i < ns; i++)
		fprintf(f, "%s'ttft_cdf.dat' index %u using 1:2 with lines lw 2 title '%s'",
			i ? ", \\\n       " : "", i, s[i].name);
	fprintf(f,
		"\n"
		"  unset logscale x\n"
		"  set yrange [0:*]\n"
		"  set output 'load.'.fmt\n"
		"  set title \"Requests per backend: %s\" noenhanced\n"
		"  set xlabel 'backend'\n"
		"  set ylabel 'requests served'\n"
		"  set style data histograms\n"
		"  set style histogram clustered gap 1\n"
		"  set style fill solid 0.8 border -1\n"
		"  set key outside right top\n"
		"  plot for [i=2:%u] 'load.dat' using i:xtic(1) title columnheader(i)\n"
		"  set key inside bottom right\n"
		"  set style data lines\n"
		"  unset output\n"
		"}\n",
		title, ns + 1);
	return close_checked(prog, f, "plot.gp");
}

int bench_gnuplot(const char *prog, const char *dir, const char *script)
{
	pid_t pid = fork();
	int st;

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		if (chdir(dir))
			_exit(126);
		execlp("gnuplot", "gnuplot", script, (char *)NULL);
		_exit(errno == ENOENT ? 127 : 126);
	}
	if (waitpid(pid, &st, 0) < 0)
		return -errno;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 127) {
		fprintf(stderr,
			"%s: --plot: gnuplot not found (apt-get install gnuplot-nox); "
			"data and %s are in %s\n",
			prog, script, dir);
		return -ENOENT;
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		fprintf(stderr, "%s: --plot: gnuplot failed on %s/%s\n", prog, dir, script);
		return -EIO;
	}
	return 0;
}

int bench_plot(const char *prog, const char *dir, const char *title, const struct bench_series *s,
	       uint32_t ns)
{
	char safe[256];
	size_t i;
	int rc;

	/* The title sits in a double-quoted gnuplot string. */
	for (i = 0; i < sizeof(safe) - 1 && title[i]; i++)
		safe[i] = title[i] == '"' || title[i] == '\\' ? '_' : title[i];
	safe[i] = 0;
	title = safe;

	if (mkdir(dir, 0755) && errno != EEXIST) {
		rc = -errno;
		fprintf(stderr, "%s: --plot: cannot create %s: %s\n", prog, dir, strerror(errno));
		return rc;
	}
	rc = write_cdf(prog, dir, s, ns);
	if (!rc)
		rc = write_load(prog, dir, s, ns);
	if (!rc)
		rc = write_script(prog, dir, title, s, ns);
	if (!rc)
		rc = bench_gnuplot(prog, dir, "plot.gp");
	return rc;
}
