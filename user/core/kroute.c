// SPDX-License-Identifier: MIT
/* The kernel's routing as the simulator runs it (pure): see kroute.h. */
#include "kroute.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kvsplice/hash.h"
#include "kvsplice/maps.h"
#include "kvsplice/place.h"

#define NIL UINT32_MAX

struct kvs_kr_route {
	uint64_t hash;
	uint32_t backend, depth, gen;
	uint32_t prev, next; /* LRU list; NIL ends */
	__u64 hot_at;	     /* its hot window (include/kvsplice/place.h) */
	__u32 hot_cur, hot_prev;
	uint64_t replicas; /* struct kvs_route's: replicas sent its prefix */
};

void kvs_kr_defaults(struct kvs_kr_params *p, double balance)
{
	memset(p, 0, sizeof(*p));
	p->routes = KVS_KR_ROUTES;
	p->window_blocks = KVS_MAX_WINDOW_BLOCKS;
	p->min_match_pct = (uint32_t)(KVS_POLICY_MIN_MATCH_SHARE * 100 + 0.5);
	p->kernel_slack = KVS_KR_KERNEL_SLACK;
	p->recompute_weight = (uint32_t)KVS_POLICY_RECOMPUTE_WEIGHT;
	p->balance = balance;
	p->keep_balance = KVS_POLICY_KEEP_BALANCE;
	p->hot = 1;
}

static uint32_t home_of(const struct kvs_kr *kr, uint64_t hash)
{
	return (uint32_t)kvs_fmix64(hash) & kr->mask;
}

/* The table slot holding hash, or NIL. */
static uint32_t find_slot(const struct kvs_kr *kr, uint64_t hash)
{
	uint32_t i = home_of(kr, hash);

	for (; kr->table[i] != NIL; i = (i + 1) & kr->mask)
		if (kr->node[kr->table[i]].hash == hash)
			return i;
	return NIL;
}

static void lru_unlink(struct kvs_kr *kr, uint32_t x)
{
	struct kvs_kr_route *e = &kr->node[x];

	if (e->prev != NIL)
		kr->node[e->prev].next = e->next;
	else
		kr->lru_head = e->next;
	if (e->next != NIL)
		kr->node[e->next].prev = e->prev;
	else
		kr->lru_tail = e->prev;
}

static void lru_push(struct kvs_kr *kr, uint32_t x)
{
	struct kvs_kr_route *e = &kr->node[x];

	e->prev = NIL;
	e->next = kr->lru_head;
	if (kr->lru_head != NIL)
		kr->node[kr->lru_head].prev = x;
	kr->lru_head = x;
	if (kr->lru_tail == NIL)
		kr->lru_tail = x;
}

/* Empties slot i, shifting back the entries of its probe run that would
 * otherwise no longer be found (linear probing's deletion). */
static void table_delete(struct kvs_kr *kr, uint32_t i)
{
	uint32_t j = i, home;

	kr->table[i] = NIL;
	for (;;) {
		j = (j + 1) & kr->mask;
		if (kr->table[j] == NIL)
			return;
		home = home_of(kr, kr->node[kr->table[j]].hash);
		/* j's entry stays if its home lies cyclically in (i, j] */
		if (i <= j ? (i < home && home <= j) : (i < home || home <= j))
			continue;
		kr->table[i] = kr->table[j];
		kr->table[j] = NIL;
		i = j;
	}
}

static void route_remove(struct kvs_kr *kr, uint32_t slot)
{
	uint32_t x = kr->table[slot];

	table_delete(kr, slot);
	lru_unlink(kr, x);
	kr->node[x].next = kr->free_head;
	kr->free_head = x;
	kr->used--;
}

/* The route for hash, counted as just used (the kernel's LRU map marks a
 * looked-up entry referenced), or NULL. */
static struct kvs_kr_route *lookup(struct kvs_kr *kr, uint64_t hash)
{
	uint32_t s = find_slot(kr, hash), x;

	if (s == NIL)
		return NULL;
	x = kr->table[s];
	lru_unlink(kr, x);
	lru_push(kr, x);
	return &kr->node[x];
}

/* bpf_map_update_elem: BPF_NOEXIST (replace 0) installs the route unless
 * hash has one; BPF_ANY (replace) overwrites it too. A full map makes room
 * by its least recently used entry. 1 if written. */
static int install(struct kvs_kr *kr, uint64_t hash, uint32_t b, uint32_t depth, int replace)
{
	struct kvs_kr_route e = { .hash = hash, .backend = b, .depth = depth, .gen = kr->gen[b] };
	uint32_t i = find_slot(kr, hash), x;

	if (i != NIL) {
		if (!replace)
			return 0;
		x = kr->table[i];
		lru_unlink(kr, x);
		kr->node[x] = e;
		lru_push(kr, x);
		kr->learned++;
		return 1;
	}
	if (kr->used == kr->p.routes) {
		route_remove(kr, find_slot(kr, kr->node[kr->lru_tail].hash));
		kr->lru_evicted++;
	}
	x = kr->free_head;
	kr->free_head = kr->node[x].next;
	kr->node[x] = e;
	for (i = home_of(kr, hash); kr->table[i] != NIL; i = (i + 1) & kr->mask)
		;
	kr->table[i] = x;
	lru_push(kr, x);
	kr->used++;
	kr->learned++;
	return 1;
}

/* b's index evicted a block a route of b's names: withdrawn, if the route
 * still names b (gw_withdraw_route, then kvs_withdraw in the kernel); a
 * route naming another backend no longer counts b among its replicas. */
static void withdraw(void *ctx, uint32_t b, uint64_t hash)
{
	struct kvs_kr *kr = ctx;
	uint32_t s = find_slot(kr, hash);

	if (s == NIL)
		return;
	if (kr->node[kr->table[s]].backend != b) {
		kr->node[kr->table[s]].replicas &= ~(1ull << (b & 63));
		return;
	}
	route_remove(kr, s);
	kr->withdrawn++;
}

int kvs_kr_route(const struct kvs_kr *kr, uint64_t hash, uint32_t *backend, uint32_t *depth)
{
	uint32_t s = find_slot(kr, hash);

	if (s == NIL)
		return -1;
	*backend = kr->node[kr->table[s]].backend;
	*depth = kr->node[kr->table[s]].depth;
	return 0;
}

uint32_t kvs_kr_routes(const struct kvs_kr *kr)
{
	return kr->used;
}

int kvs_kr_init(struct kvs_kr *kr, const struct kvs_kr_params *p, struct kvs_policy *pol)
{
	uint32_t size = 2, i;
	uint8_t up[KVS_MAX_BACKENDS];
	uint64_t zero[KVS_MAX_BACKENDS] = { 0 };

	memset(kr, 0, sizeof(*kr));
	if (!p->routes || p->routes > (1u << 28) || !p->window_blocks ||
	    p->window_blocks > KVS_POLICY_MAX_BLOCKS)
		return -EINVAL;
	kr->p = *p;
	kr->pol = pol;
	while (size < 2 * p->routes)
		size *= 2;
	kr->mask = size - 1;
	kr->table = malloc(sizeof(*kr->table) * size);
	kr->node = malloc(sizeof(*kr->node) * p->routes);
	kr->g = malloc(sizeof(*kr->g) * (p->window_blocks / KVS_INDEX_GROUP + 1));
	if (!kr->table || !kr->node || !kr->g) {
		kvs_kr_free(kr);
		return -ENOMEM;
	}
	memset(kr->table, 0xff, sizeof(*kr->table) * size);
	for (i = 0; i < p->routes; i++)
		kr->node[i].next = i + 1 < p->routes ? i + 1 : NIL;
	kr->lru_head = kr->lru_tail = NIL;
	while (kvs_checkpoint(kr->ncp) <= p->window_blocks)
		kr->ncp++;
	kvs_policy_on_evict(pol, withdraw, kr);
	/* The controller publishes the limit as it starts. */
	memset(up, 1, sizeof(up));
	for (i = pol->p.nbackends; i < KVS_MAX_BACKENDS; i++)
		up[i] = 0;
	kvs_kr_refresh(kr, zero, up);
	return 0;
}

void kvs_kr_free(struct kvs_kr *kr)
{
	if (kr->pol)
		kvs_policy_on_evict(kr->pol, NULL, NULL);
	free(kr->table);
	free(kr->node);
	free(kr->g);
	kr->table = NULL;
	kr->node = NULL;
	kr->g = NULL;
}

void kvs_kr_backend_left(struct kvs_kr *kr, uint32_t b)
{
	kr->gen[b]++;
}

void kvs_kr_refresh(struct kvs_kr *kr, const uint64_t *load, const uint8_t *up)
{
	uint64_t work = 0, slack, limit;
	uint32_t b, nup = 0;

	for (b = 0; b < kr->pol->p.nbackends; b++) {
		if (!up[b])
			continue;
		work += load[b];
		nup++;
	}
	if (kr->sent > kr->seen_sent && kr->charged >= kr->seen_charged) {
		uint64_t avg = (kr->charged - kr->seen_charged) / (kr->sent - kr->seen_sent);

		kr->typical = kr->typical ? (3 * kr->typical + avg) / 4 : avg;
	}
	kvs_hot_roll(&kr->hot_fleet, kr->charged, kr->clock_ns);
	kr->seen_charged = kr->charged;
	kr->seen_sent = kr->sent;
	if (!nup)
		return;
	slack = kr->typical > kr->p.kernel_slack ? kr->typical : kr->p.kernel_slack;
	limit = (uint64_t)(kr->p.balance * (double)work / nup) + slack;
	if (nup == 1)
		limit = 0; /* nowhere else to go: the kernel keeps it */
	else if (!limit)
		limit = 1; /* (0 would mean none) */
	kr->work_limit = limit;
}

/* The controller reads the report (reports.c, mark_learned): every
 * checkpoint deeper than the match within what was hashed, and for a
 * placement the hint's, marked in the index of the backend they name; it
 * cannot tell which routes the kernel installed, and withdrawing one only
 * removes it if it names that backend. */
void kvs_kr_report(struct kvs_kr *kr, const struct kvs_kr_req *r, const struct kvs_kr_decision *d)
{
	uint32_t ng = d->blocks / KVS_INDEX_GROUP, j, cp, b = (uint32_t)d->backend;

	if (d->backend < 0)
		return;
	for (j = 0; j < ng; j++)
		kr->g[j] = r->h[(j + 1) * KVS_INDEX_GROUP - 1];
	/* charged for the route's depth, or as if nothing were cached */
	kvs_policy_report(kr->pol, b, kr->g, ng, d->why < KVS_WHY_COLD ? d->depth : 0);
	for (j = 0; j < kr->ncp; j++) {
		cp = kvs_checkpoint(j);
		if (cp <= d->depth)
			continue;
		if (cp > d->blocks)
			break;
		kvs_policy_mark(kr->pol, b, r->h[cp - 1]);
	}
	if (d->why >= KVS_WHY_COLD && r->hint > d->depth && r->hint <= d->blocks)
		kvs_policy_mark(kr->pol, b, r->h[r->hint - 1]);
}

/* Whether a match depth blocks deep decides the route of a prompt of
 * tokens tokens (deep_enough in the verdict): against the part of the
 * prompt the kernel hashes. */
static int deep_enough(const struct kvs_kr *kr, uint32_t depth, uint32_t tokens)
{
	if (tokens > kr->p.window_blocks * KVS_BLOCK_TOKENS)
		tokens = kr->p.window_blocks * KVS_BLOCK_TOKENS;
	return (uint64_t)depth * KVS_BLOCK_BYTES * 100 >=
	       (uint64_t)kr->p.min_match_pct * tokens * KVS_BYTES_PER_TOKEN;
}

/* The route to follow, or NULL; d->why and d->depth say which (route_request
 * and route_by_depth in the verdict: the cache key's, then deepest first the
 * checkpoints deeper than the hint, the hint, the checkpoints under it; the
 * hint's route looked up, a use in the LRU, before them all). */
static struct kvs_kr_route *route_request(struct kvs_kr *kr, const struct kvs_kr_req *r,
					  struct kvs_kr_decision *d)
{
	struct kvs_kr_route *rt, *hinted = NULL;
	uint32_t k, cp, n = d->blocks, hint = r->hint;

	if (r->cache_key && (rt = lookup(kr, r->cache_key))) {
		d->why = KVS_WHY_KEY;
		d->key = r->cache_key;
		return rt;
	}
	if (hint > 0 && hint <= n)
		hinted = lookup(kr, r->h[hint - 1]);
	else
		hint = 0;
	for (k = kr->ncp; k > 0; k--) {
		cp = kvs_checkpoint(k - 1);
		if (cp > n)
			continue;
		if (cp <= hint && hinted)
			break;
		if (!(rt = lookup(kr, r->h[cp - 1])))
			continue;
		d->depth = cp;
		d->key = r->h[cp - 1];
		if ((cp <= hint || !hint) && !deep_enough(kr, cp, r->prompt_tokens)) {
			d->why = KVS_WHY_SHALLOW;
			return NULL;
		}
		d->why = KVS_WHY_PREFIX;
		if (hinted && rt->gen != kr->gen[rt->backend])
			break; /* a backend that left: the hint's route (follow) */
		return rt;
	}
	if (hinted) {
		d->why = KVS_WHY_HINT;
		d->depth = hint;
		d->key = r->h[hint - 1];
		return hinted;
	}
	d->why = KVS_WHY_COLD;
	return NULL;
}

/*
 * hot_count in the verdict: r counts in the hot window of the route it
 * matched and of every shallower checkpoint's and hinted prefix's route on
 * its path, so a prefix's rate is that of the requests sharing it,
 * whichever deeper route they follow (a system prompt's: every turn of
 * every conversation, not only the first turns that follow its route).
 */
static void hot_count(struct kvs_kr *kr, const struct kvs_kr_req *r,
		      const struct kvs_kr_decision *d, struct kvs_kr_route *rt)
{
	uint32_t k, cp;

	if (!kr->p.hot || (rt && rt->gen != kr->gen[rt->backend]))
		return;
	if (rt && (d->why == KVS_WHY_KEY || d->why == KVS_WHY_HINT))
		kvs_hot_count(&rt->hot_at, &rt->hot_cur, &rt->hot_prev, r->now_ns);
	if (d->why != KVS_WHY_PREFIX && d->why != KVS_WHY_SHALLOW)
		return;
	for (k = 0; k < kr->ncp; k++) {
		struct kvs_kr_route *e;

		cp = kvs_checkpoint(k);
		if (cp > d->depth)
			break;
		if ((e = lookup(kr, r->h[cp - 1])))
			kvs_hot_count(&e->hot_at, &e->hot_cur, &e->hot_prev, r->now_ns);
	}
	if (r->hint && r->hint < d->depth && kvs_checkpoint_after(r->hint - 1) != r->hint) {
		struct kvs_kr_route *e = lookup(kr, r->h[r->hint - 1]);

		if (e)
			kvs_hot_count(&e->hot_at, &e->hot_cur, &e->hot_prev, r->now_ns);
	}
}

/* may_place in the verdict: up, under its request limit. */
static int may_place(const struct kvs_kr *kr, uint32_t b, const uint64_t *outstanding,
		     const uint8_t *up)
{
	return up[b] && (!kr->p.max_outstanding || outstanding[b] < kr->p.max_outstanding);
}

/* backend_accepts in the verdict: may_place, and within the work limit. */
static int accepts(const struct kvs_kr *kr, uint32_t b, const uint64_t *load,
		   const uint64_t *outstanding, const uint8_t *up)
{
	return may_place(kr, b, outstanding, up) && (!kr->work_limit || load[b] <= kr->work_limit);
}

/* The depth whose hash places the prompt: kvs_place_depth, continued over
 * a what-if window's extra checkpoints. */
static uint32_t place_depth(const struct kvs_kr *kr, uint32_t hint, uint32_t n)
{
	uint32_t j, best = 0;

	if (kr->ncp <= KVS_MAX_CHECKPOINTS)
		return kvs_place_depth(hint, n);
	if (hint && hint <= n)
		return hint;
	for (j = 0; j < kr->ncp && kvs_checkpoint(j) <= n; j++)
		best = kvs_checkpoint(j);
	return best ? best : n;
}

/*
 * place_request: include/kvsplice/place.h on the placement key, among the
 * backends that may take new work (up, under max_outstanding). A holder
 * over the work limit (d->why KVS_WHY_SPILL, hb) keeps the request if the
 * rule picks it anyway or if moving would cost more (kvs_place_keep):
 * that is no placement, and it is charged for the blocks it holds,
 * cached (its route's depth; 0 for a hot replica that was never sent the
 * prefix).
 */
static int place(struct kvs_kr *kr, const struct kvs_kr_req *r, const uint64_t *load,
		 const uint64_t *outstanding, const uint8_t *up, int hb, uint32_t cached,
		 struct kvs_kr_decision *d)
{
	struct kvs_policy *pol = kr->pol;
	struct kvs_place_sum s;
	uint32_t b, k;
	int pick;

	if (r->cache_key) {
		d->key = r->cache_key;
	} else {
		k = place_depth(kr, r->hint, d->blocks);
		d->key = k ? r->h[k - 1] : r->seed;
	}
	for (b = 0; b < pol->p.nbackends; b++) {
		pol->place[b].load = load[b];
		pol->place[b].ok = may_place(kr, b, outstanding, up);
	}
	pick = kvs_place_choose(d->key, pol->place, pol->p.nbackends, d->why == KVS_WHY_SPILL, &s);
	if (pick < 0)
		return -1;
	if (d->why == KVS_WHY_SPILL && hb >= 0 && may_place(kr, (uint32_t)hb, outstanding, up) &&
	    (hb == pick || kvs_place_keep(&s, kvs_policy_balance_fp(kr->p.keep_balance),
					  kr->p.recompute_weight, r->prompt_tokens, load[hb],
					  (uint64_t)cached * KVS_BLOCK_TOKENS, load[pick]))) {
		d->why = KVS_WHY_KEPT;
		return hb;
	}
	if (d->why != KVS_WHY_SPILL) /* a spill is no new prefix (place.h) */
		pol->place[pick].placed += KVS_PLACE_UNIT;
	return pick;
}

/*
 * learn() in the verdict: a followed route teaches every checkpoint deeper
 * than it; a placement its cache key and hint too, and a stale route is
 * overwritten (it would send every request of its prefix through
 * placement for good). Returns the routes written.
 */
static uint32_t learn(struct kvs_kr *kr, const struct kvs_kr_req *r,
		      const struct kvs_kr_decision *d)
{
	uint32_t j, cp, k = 0, b = (uint32_t)d->backend, n = d->blocks;
	int placed = d->why >= KVS_WHY_COLD, stale = d->why == KVS_WHY_STALE;

	if (placed && r->cache_key)
		k += (uint32_t)install(kr, r->cache_key, b, 0, stale && !d->depth);
	if (stale && d->depth)
		k += (uint32_t)install(kr, r->h[d->depth - 1], b, d->depth, 1);
	if (placed && r->hint > d->depth && r->hint <= n)
		k += (uint32_t)install(kr, r->h[r->hint - 1], b, r->hint, 0);
	if (!d->depth && !placed) /* a cache key followed */
		return k;
	for (j = 0; j < kr->ncp; j++) {
		cp = kvs_checkpoint(j);
		if (cp <= d->depth)
			continue;
		if (cp > n)
			break;
		k += (uint32_t)install(kr, r->h[cp - 1], b, cp, 0);
	}
	return k;
}

/*
 * For a hot route (include/kvsplice/place.h, "Hot prefixes") the placement
 * rule's pick among its replicas, or -1 to send r to the route's own
 * backend (hot_route in the verdict). The caller counts the pick as a
 * placement once r goes there.
 */
static int hot_replica(struct kvs_kr *kr, struct kvs_kr_route *rt, const struct kvs_kr_req *r,
		       const struct kvs_kr_decision *d, const uint64_t *load,
		       const uint64_t *outstanding, const uint8_t *up)
{
	struct kvs_policy *pol = kr->pol;
	struct kvs_place_sum s;
	uint32_t b, k, kd, nup = 0;
	uint64_t rate, charge, members, key, share;

	if (!kr->p.hot)
		return -1;
	charge = (uint64_t)kvs_work_blocks(r->prompt_tokens, d->depth, r->max_tokens) *
		 KVS_BLOCK_TOKENS;
	rate = kvs_hot_rate(rt->hot_at, rt->hot_cur, rt->hot_prev, r->now_ns);
	if (!rate)
		return -1;
	for (b = 0; b < pol->p.nbackends; b++) {
		pol->place[b].load = load[b];
		pol->place[b].ok = may_place(kr, b, outstanding, up);
	}
	if (rate <= 4 * KVS_HOT_FP) /* never hot: as the kernel, no more */
		return -1;
	for (b = 0; b < pol->p.nbackends; b++)
		nup += up[b] != 0;
	share = kr->hot_share ? kr->hot_share :
				kvs_hot_share(&kr->hot_fleet, kr->charged, r->now_ns, nup);
	/* the eligible backends cap k in the member pass, as the kernel's */
	k = kvs_hot_replicas(rate, charge, share, KVS_MAX_BACKENDS);
	if (k < 2)
		return -1;
	members = kvs_hot_members(d->key, rt->backend, pol->place, pol->p.nbackends, k);
	for (b = 0; b < pol->p.nbackends; b++)
		pol->place[b].ok &= (uint32_t)(members >> b) & 1;
	kd = place_depth(kr, r->hint, d->blocks);
	key = r->cache_key ? r->cache_key : kd ? r->h[kd - 1] : r->seed;
	return kvs_place_choose(key, pol->place, pol->p.nbackends, 0, &s);
}

int kvs_kr_decide(struct kvs_kr *kr, const struct kvs_kr_req *r, const uint64_t *load,
		  const uint64_t *outstanding, const uint8_t *up, struct kvs_kr_decision *d)
{
	struct kvs_kr_route *rt;
	int b = -1, hb = -1, first = 0;
	uint32_t cached;

	memset(d, 0, sizeof(*d));
	d->blocks = r->n < kr->p.window_blocks ? r->n : kr->p.window_blocks;
	rt = route_request(kr, r, d);
	hot_count(kr, r, d, rt);
	if (rt && rt->gen != kr->gen[rt->backend]) {
		d->why = KVS_WHY_STALE;
	} else if (rt) {
		int hot = hot_replica(kr, rt, r, d, load, outstanding, up);
		uint32_t rb = hot >= 0 ? (uint32_t)hot : rt->backend;

		/* a replica the route never sent its prefix to recomputes it */
		first = hot >= 0 && rb != rt->backend && !((rt->replicas >> rb) & 1);
		if (accepts(kr, rb, load, outstanding, up)) {
			b = (int)rb;
			/* counted once it goes there: a replica picked and
			 * then spilled from took nothing */
			if (hot >= 0) {
				kr->pol->place[rb].placed += KVS_PLACE_UNIT;
				if (rb != rt->backend)
					kr->hot++;
			}
		} else {
			d->why = KVS_WHY_SPILL;
			hb = (int)rb;
		}
	}
	cached = first ? 0 : d->depth;
	if (b < 0)
		b = place(kr, r, load, outstanding, up, hb, cached, d);
	if (b < 0) { /* punted: the controller answers */
		d->backend = -1;
		d->why = 0;
		kr->why[0]++;
		return -1;
	}
	d->backend = b;
	/* it holds the prefix from now on (hot_placed, or place_request's
	 * kept holder, in the verdict) */
	if (first && d->why < KVS_WHY_COLD)
		rt->replicas |= 1ull << ((uint32_t)b & 63);
	/* a route says what b holds; a placement assumes nothing */
	d->charge = (uint64_t)kvs_work_blocks(r->prompt_tokens, d->why < KVS_WHY_COLD ? cached : 0,
					      r->max_tokens) *
		    KVS_BLOCK_TOKENS;
	d->learned = learn(kr, r, d);
	kr->charged += d->charge;
	kr->sent++;
	kr->why[d->why]++;
	return b;
}
