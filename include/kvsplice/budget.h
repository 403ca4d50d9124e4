/* SPDX-License-Identifier: MIT */
/*
 * What one client connection may make the controller do: a token bucket of
 * frames (PINGs, requests the kernel passes up, CANCELs that follow them,
 * requests refused busy), per second with a burst, in integers. The verdict
 * keeps it in the connection's conns entry (bpf/datapath/request.bpf.h),
 * the userspace path in the connection itself (user/kvspliced/upath.c):
 * one definition, compiled by clang and gcc (tests/unit/test_budget.c
 * checks the arithmetic, tests/integration/test_ctl_fairness.sh the
 * verdict's).
 *
 * A connection over its budget is answered cheaply (a PING or CANCEL is
 * dropped, a request answered busy without a decision); one that stays
 * over, close_after frames beyond its budget without ever letting its
 * bucket fill again, is closed (docs/RUNBOOK.md, "One client and the
 * controller").
 */
#ifndef KVSPLICE_BUDGET_H
#define KVSPLICE_BUDGET_H

#include <linux/types.h>

#define KVS_NS_PER_S 1000000000ull

struct kvs_budget {
	__u32 rate;	   /* frames a second; 0: no limit (a front) */
	__u32 burst;	   /* frames at once, at most */
	__u32 close_after; /* frames over budget in a row before it is closed;
			    * 0: never */
	__u32 tokens;	   /* frames it may send now */
	__u64 at_ns;	   /* tokens are as of then; 0: never used (full) */
	__u32 run;	   /* frames over budget since the bucket was last full */
	__u32 pad;
	__u64 over; /* frames over budget, in all */
};

enum kvs_budget_verdict {
	KVS_BUDGET_OK = 0,    /* within it: one token taken */
	KVS_BUDGET_OVER = 1,  /* over it: answer cheaply */
	KVS_BUDGET_CLOSE = 2, /* over it close_after times in a row (once): close */
};

/* Tokens earned since at_ns, the bucket capped at burst; a full bucket
 * forgets the run of frames over budget (the client paused). */
static inline void kvs_budget_refill(struct kvs_budget *b, __u64 now_ns)
{
	__u64 el, add, full_ns;

	if (!b->at_ns) {
		b->tokens = b->burst;
		b->at_ns = now_ns;
		return;
	}
	el = now_ns > b->at_ns ? now_ns - b->at_ns : 0;
	/* Time to fill an empty bucket: el is bounded below it, so that
	 * el x rate cannot overflow (burst x 1e9 < 2^64). */
	full_ns = (__u64)b->burst * KVS_NS_PER_S / b->rate;
	if (el >= full_ns) {
		add = b->burst;
	} else {
		add = el * b->rate / KVS_NS_PER_S;
		if (!add)
			return; /* less than a token: at_ns keeps the fraction */
	}
	if (b->tokens + add >= b->burst) {
		b->tokens = b->burst;
		b->at_ns = now_ns;
		b->run = 0;
		return;
	}
	b->tokens += (__u32)add;
	b->at_ns += add * KVS_NS_PER_S / b->rate; /* the fraction of a token stays */
}

/* One frame for the controller at now_ns: enum kvs_budget_verdict. */
static inline int kvs_budget_take(struct kvs_budget *b, __u64 now_ns)
{
	if (!b->rate)
		return KVS_BUDGET_OK;
	kvs_budget_refill(b, now_ns);
	if (b->tokens) {
		b->tokens--;
		return KVS_BUDGET_OK;
	}
	b->over++;
	if (b->run < 0xffffffffu)
		b->run++;
	return b->close_after && b->run == b->close_after ? KVS_BUDGET_CLOSE : KVS_BUDGET_OVER;
}

#endif /* KVSPLICE_BUDGET_H */
