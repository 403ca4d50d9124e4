/* SPDX-License-Identifier: MIT */
/*
 * --plot DIR for kvsplice-bench: a TTFT CDF per policy (or run) and the
 * requests each backend served, as gnuplot data, a gnuplot script, and the
 * SVG and PNG gnuplot draws from them. The data and script stay beside the
 * pictures so a reader can restyle them or plot them with another tool.
 */
#ifndef KVS_BENCH_PLOT_H
#define KVS_BENCH_PLOT_H

#include <stdint.h>

struct bench_series {
	const char *name;
	const double *ttft_ms; /* sorted ascending */
	uint32_t n;
	const double *loads; /* requests served per backend */
	uint32_t nloads;
};

/* Writes DIR/{ttft_cdf,load}.dat and DIR/plot.gp, then runs gnuplot for
 * DIR/{ttft_cdf,load}.{svg,png}. Returns 0, or -errno with a message on
 * stderr (prog: ...); when gnuplot is missing the data and script are still
 * written and -ENOENT returned. */
int bench_plot(const char *prog, const char *dir, const char *title, const struct bench_series *s,
	       uint32_t ns);
/* Runs gnuplot on DIR/script (in DIR). 0, -ENOENT without gnuplot, or
 * -errno/-EIO, with a message on stderr. */
int bench_gnuplot(const char *prog, const char *dir, const char *script);

#endif
