// SPDX-License-Identifier: MIT
/* The routing policy: which backend a request goes to (pure). */
#include "policy.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "chash.h"
#include "kvsplice/hash.h"

/* Index entries for a capacity in blocks (at least one). */
static uint32_t groups_of(uint32_t blocks)
{
	uint32_t g = (uint32_t)(((uint64_t)blocks + KVS_INDEX_GROUP - 1) / KVS_INDEX_GROUP);

	return g ? g : 1;
}

/* The most entries any index may have, said or learnt: the memory the
 * operator allowed (p.index_blocks). */
static uint64_t index_ceiling(const struct kvs_policy *pol)
{
	return (uint64_t)groups_of(pol->p.index_blocks) * KVS_POLICY_FEEDBACK_GROW;
}

void kvs_policy_defaults(struct kvs_policy_params *p)
{
	memset(p, 0, sizeof(*p));
	p->index_blocks = KVS_POLICY_INDEX_BLOCKS;
	p->balance = KVS_POLICY_BALANCE;
	p->keep_balance = KVS_POLICY_KEEP_BALANCE;
	p->min_match_share = KVS_POLICY_MIN_MATCH_SHARE;
	p->recompute_weight = KVS_POLICY_RECOMPUTE_WEIGHT;
	p->hot = 1;
}

uint32_t kvs_policy_balance_fp(double balance)
{
	return balance < 1.0 ? KVS_PLACE_ONE : (uint32_t)lround(balance * KVS_PLACE_ONE);
}

/* Placement seeds from the backends' names (0 for an empty slot). */
static void set_seeds(struct kvs_policy *pol, const char *const *names, uint32_t n)
{
	for (uint32_t b = 0; b < n; b++)
		pol->place[b].seed = names[b] ? kvs_str_hash(names[b]) : 0;
}

int kvs_policy_init(struct kvs_policy *pol, const struct kvs_policy_params *p,
		    const char *const *names)
{
	uint32_t b;
	int err;

	memset(pol, 0, sizeof(*pol));
	if (p->nbackends == 0 || p->nbackends > KVS_MAX_BACKENDS || p->index_blocks == 0)
		return -EINVAL;
	pol->p = *p;
	if (pol->p.balance < 1.0)
		pol->p.balance = 1.0;
	if (pol->p.keep_balance < pol->p.balance)
		pol->p.keep_balance = pol->p.balance;
	pol->balance_fp = kvs_policy_balance_fp(pol->p.balance);
	for (b = 0; b < p->nbackends; b++) {
		pol->conf[b] = groups_of(p->index_blocks);
		err = kvs_pcache_init(&pol->index[b], pol->conf[b]);
		if (err)
			goto fail;
	}
	err = kvs_hot_table_init(&pol->hot, KVS_POLICY_HOT_SLOTS);
	if (err)
		goto fail;
	set_seeds(pol, names, p->nbackends);
	return 0;
fail:
	kvs_policy_free(pol);
	return err;
}

void kvs_policy_free(struct kvs_policy *pol)
{
	uint32_t b;

	for (b = 0; b < KVS_MAX_BACKENDS; b++)
		if (pol->index[b].table)
			kvs_pcache_free(&pol->index[b]);
	kvs_hot_table_free(&pol->hot);
}

void kvs_policy_observe(struct kvs_policy *pol, uint64_t now_ns, uint64_t fleet_charged,
			uint64_t expect_output)
{
	pol->now_ns = now_ns;
	pol->charged = fleet_charged;
	pol->expect_output = expect_output;
	kvs_hot_roll(&pol->hot_fleet, fleet_charged, now_ns);
}

/*
 * Hot prefixes where the controller decides (kvs_policy_observe): counts
 * the request in the window of each checkpoint prefix of its longest
 * match (best blocks), and returns the replicas the deepest one needs, as
 * a mask of backends (its holder, the one with best blocks cached and the
 * least load, among them), or 0 when it is not hot.
 */
static uint64_t hot_members(struct kvs_policy *pol, const uint64_t *h, uint32_t best,
			    uint32_t prompt_tokens, const uint32_t *cached, const uint64_t *load,
			    const uint8_t *eligible, uint32_t n_ok)
{
	uint32_t j, cp, deep = 0, k, b;
	uint64_t charge, share;
	int holder = -1;

	if (!pol->p.hot || !pol->now_ns)
		return 0;
	for (j = 0; j < KVS_MAX_CHECKPOINTS && (cp = kvs_checkpoint(j)) <= best; j++) {
		kvs_hot_table_count(&pol->hot, h[cp - 1], pol->now_ns);
		deep = cp;
	}
	if (!deep)
		return 0;
	charge = (prompt_tokens > (uint64_t)best * KVS_BLOCK_TOKENS ?
			  prompt_tokens - (uint64_t)best * KVS_BLOCK_TOKENS :
			  0) +
		 pol->expect_output;
	share = kvs_hot_share(&pol->hot_fleet, pol->charged, pol->now_ns, n_ok);
	k = kvs_hot_replicas(kvs_hot_table_rate(&pol->hot, h[deep - 1], pol->now_ns), charge, share,
			     n_ok);
	if (k < 2)
		return 0;
	for (b = 0; b < pol->p.nbackends; b++)
		if (eligible[b] && cached[b] >= best && (holder < 0 || load[b] < load[holder]))
			holder = (int)b;
	if (holder < 0)
		return 0;
	for (b = 0; b < pol->p.nbackends; b++) {
		pol->place[b].load = load[b];
		pol->place[b].ok = eligible[b];
	}
	return kvs_hot_members(h[deep - 1], (uint32_t)holder, pol->place, pol->p.nbackends, k);
}

/* The prompt as the index sees it: its group hashes, into pol->group_h. */
static uint32_t group_hashes(struct kvs_policy *pol, const uint64_t *h, uint32_t n)
{
	uint32_t ng = n / KVS_INDEX_GROUP, j;

	if (ng > sizeof(pol->group_h) / sizeof(pol->group_h[0]))
		ng = sizeof(pol->group_h) / sizeof(pol->group_h[0]);
	for (j = 0; j < ng; j++)
		pol->group_h[j] = h[(j + 1) * KVS_INDEX_GROUP - 1];
	return ng;
}

/* Blocks of the prompt in pol->group_h[0..ng) that backend b holds: a
 * binary search (kvs_pcache_match_prefix), O(log n) lookups per backend. */
static uint32_t cached_blocks(const struct kvs_policy *pol, uint32_t b, uint32_t ng)
{
	return kvs_pcache_match_prefix(&pol->index[b], pol->group_h, ng) * KVS_INDEX_GROUP;
}

uint32_t kvs_policy_cached(struct kvs_policy *pol, uint32_t b, const uint64_t *h, uint32_t n)
{
	return cached_blocks(pol, b, group_hashes(pol, h, n));
}

/* A new prefix (nobody holds it, or only a shared part of it): the
 * kernel's rule, include/kvsplice/place.h, which also counts it. */
static int place_new(struct kvs_policy *pol, uint64_t key, const uint64_t *load,
		     const uint8_t *eligible)
{
	for (uint32_t b = 0; b < pol->p.nbackends; b++) {
		pol->place[b].load = load[b];
		pol->place[b].ok = eligible[b];
	}
	return kvs_place(key, pol->place, pol->p.nbackends);
}

void kvs_policy_decide(struct kvs_policy *pol, const struct kvs_prompt *p,
		       const struct kvs_fleet_view *f, struct kvs_decision *d)
{
	const uint64_t *h = p->h, *load = f->load, place_key = p->place_key;
	const uint32_t n = p->n, hint_blocks = p->hint_blocks, prompt_tokens = p->tokens;
	const uint8_t *eligible = f->eligible;
	const uint32_t *known = f->known;
	uint32_t cached[KVS_MAX_BACKENDS], b, i, start, n_ok = 0, best = 0;
	uint32_t ng = group_hashes(pol, h, n);
	uint64_t total = 0, bound, keep_bound, members;
	double est, best_est = INFINITY;
	int pick = -1, pick_in_bound = 0, shared;

	memset(d, 0, sizeof(*d));
	d->backend = -1;
	for (b = 0; b < pol->p.nbackends; b++) {
		cached[b] = 0;
		if (!eligible[b])
			continue;
		n_ok++;
		total += load[b];
		cached[b] = cached_blocks(pol, b, ng);
		if (known && known[b] > cached[b])
			cached[b] = known[b] < n ? known[b] : n;
		if (cached[b] > best)
			best = cached[b];
	}
	if (n_ok == 0) {
		pol->decisions[KVS_R_NONE]++;
		return;
	}
	d->best_blocks = best;

	/* Only a prefix too short to matter is cached anywhere (a system
	 * prompt every request shares): a new prefix all the same, placed as
	 * the kernel places one. Unless it covers what the client hinted is
	 * the reusable part (its conversation's first messages). */
	shared = best > 0 && !(hint_blocks && best >= hint_blocks) &&
		 (double)best * KVS_BLOCK_TOKENS < pol->p.min_match_share * prompt_tokens;
	members = best ? hot_members(pol, h, best, prompt_tokens, cached, load, eligible, n_ok) : 0;
	if (best == 0 || shared) {
		pick = place_new(pol, place_key, load, eligible);
		d->reason = shared ? KVS_R_SHARED : KVS_R_COLD;
		goto out;
	}
	if (members) {
		/* among its replicas by the placement rule, counted as a
		 * placement, as the kernel places a hot route's request */
		for (b = 0; b < pol->p.nbackends; b++)
			pol->place[b].ok = eligible[b] && ((members >> b) & 1);
		pick = kvs_place(place_key, pol->place, pol->p.nbackends);
		d->reason = KVS_R_HOT;
		if (pick >= 0 && cached[pick] < best)
			pol->hot_replicas++;
		goto out;
	}

	/* Bounded load: a backend may take the request only if its load is
	 * within balance x the mean, plus this request's tokens. Without that
	 * slack one long prompt is a large share of the mean in a small fleet
	 * and holders keep falling out of bound and spilling. A tighter slack
	 * (the request's uncached tokens only) balances a single very hot
	 * prefix better but loses most of the hit rate the slack buys (docs/
	 * EVALUATION.md, "The fleet in virtual time"); telling hot prefixes
	 * from load noise is future work. */
	bound = (uint64_t)ceil(pol->p.balance * (double)total / n_ok) + prompt_tokens;
	/* A backend holding the longest cached prefix has a wider bound of
	 * its own, the kernel's keep rule (kvs_place_keep): past `balance` it
	 * keeps the request while its estimate is the lowest, within
	 * keep_balance x the mean. Without it the controller spilled what
	 * the kernel, deciding the same request, would have kept. */
	keep_bound = (uint64_t)ceil(pol->p.keep_balance * (double)total / n_ok) + prompt_tokens;
	/* The scan starts at a backend the request's placement key chooses:
	 * full ties then spread over the fleet instead of all going to
	 * backend 0. */
	start = (uint32_t)(place_key % pol->p.nbackends);
	for (i = 0; i < pol->p.nbackends; i++) {
		uint64_t uncached;
		int in_bound;

		b = (start + i) % pol->p.nbackends;

		if (!eligible[b])
			continue;
		uncached = (uint64_t)prompt_tokens > (uint64_t)cached[b] * KVS_BLOCK_TOKENS ?
				   prompt_tokens - (uint64_t)cached[b] * KVS_BLOCK_TOKENS :
				   0;
		in_bound = load[b] <= bound || (cached[b] == best && load[b] <= keep_bound);
		est = (double)load[b] + pol->p.recompute_weight * (double)uncached;
		/* In-bound backends first; among them the lowest estimate; on
		 * a tie the longer cached prefix (moving would duplicate it for
		 * nothing), then the lower load, then the first scanned. */
		if (pick < 0 || in_bound > pick_in_bound ||
		    (in_bound == pick_in_bound &&
		     (est < best_est ||
		      (est == best_est && (cached[b] > cached[pick] || (cached[b] == cached[pick] &&
									load[b] < load[pick])))))) {
			pick = (int)b;
			pick_in_bound = in_bound;
			best_est = est;
		}
	}
	if (cached[pick] + 0u >= best)
		d->reason = KVS_R_PREFIX;
	else
		d->reason = KVS_R_SPILL;
out:
	if (pick < 0) {
		pol->decisions[KVS_R_NONE]++;
		d->reason = KVS_R_NONE;
		return;
	}
	d->backend = pick;
	d->cached_blocks = cached[pick];
	pol->decisions[d->reason]++;
	kvs_pcache_touch(&pol->index[pick], pol->group_h, ng);
}

int kvs_policy_feedback(struct kvs_policy *pol, uint32_t b, const struct kvs_feedback *f)
{
	struct kvs_pcache *c = &pol->index[b];
	uint32_t conf = pol->conf[b], cap = c->capacity;
	uint32_t floor =
		conf / KVS_POLICY_FEEDBACK_SHRINK > 16 ? conf / KVS_POLICY_FEEDBACK_SHRINK : 16;
	uint64_t ceiling = index_ceiling(pol);
	uint64_t surprising = f->unexpected > pol->known[b] ? f->unexpected - pol->known[b] : 0;
	uint64_t seen = f->predicted + surprising;
	uint64_t need = (uint64_t)cap * KVS_INDEX_GROUP * KVS_BLOCK_TOKENS / 16;
	uint64_t cap_tokens = (uint64_t)cap * KVS_INDEX_GROUP * KVS_BLOCK_TOKENS;
	double miss, surprise, squeeze, next = cap;

	/* A step rests on a sample of the index, a sixteenth of its size in
	 * cached tokens: over one or two requests a share is 0 or 1, and a
	 * per-tick step would make the correction's speed the tick's. */
	if (seen < KVS_POLICY_FEEDBACK_MIN || seen < need)
		return 0;
	miss = f->predicted ? (double)f->mispredicted / (double)f->predicted : 0;
	surprise = (double)surprising / (double)seen;
	pol->known[b] = 0;
	/* Misses the backend's load explains are not evidence: under a load
	 * that fills its KV with running requests, a server keeps little of
	 * its cache, the gateway's predictions miss, and an index shrunk on
	 * that forgets where prefixes live, places them anew across the fleet
	 * (copies everywhere, more misses), and the hit rate collapses to
	 * round robin's (docs/EVALUATION.md, "Heavy load (item 5)"). */
	squeeze = cap_tokens ? (double)f->peak_work / (double)cap_tokens : 0;
	if (squeeze > 1)
		squeeze = 1;
	miss -= squeeze;
	if (miss > 0.05) {
		/* Too large: in proportion to what was believed and not
		 * there, at most half. Near the truth misses are few, so the
		 * steps shrink as it gets there. */
		next = cap * (1.0 - (miss < 1 ? miss : 1) / 2);
	} else if (surprise > 0.01) {
		/* Too small: a prefix the index forgot comes back placed as
		 * new, on its holder about one time in n; so each surprise
		 * stands for about n forgotten. At most a quarter a step. */
		double g = surprise * pol->p.nbackends / 2;

		next = cap * (1.0 + (g < 0.25 ? g : 0.25));
	}
	if (next < floor)
		next = floor;
	if (next > (double)ceiling)
		next = (double)ceiling;
	kvs_pcache_set_capacity(c, (uint32_t)next);
	return 1;
}

void kvs_policy_record(struct kvs_policy *pol, uint32_t b, const uint64_t *g, uint32_t ng)
{
	if (b < pol->p.nbackends)
		kvs_pcache_touch(&pol->index[b], g, ng);
}

void kvs_policy_report(struct kvs_policy *pol, uint32_t b, const uint64_t *g, uint32_t ng,
		       uint32_t pred_blocks)
{
	uint32_t held, bound;

	if (b >= pol->p.nbackends)
		return;
	/* as kvs_unexpected_cached() bounds what the END counts; the index
	 * knows a prefix to within a group (it may go on 3 blocks) */
	held = kvs_pcache_match_prefix(&pol->index[b], g, ng) * KVS_INDEX_GROUP;
	if (held)
		held += KVS_INDEX_GROUP - 1;
	bound = kvs_checkpoint_after(pred_blocks);
	if (held > bound)
		pol->known[b] += (uint64_t)(held - bound) * KVS_BLOCK_TOKENS;
	kvs_pcache_touch(&pol->index[b], g, ng);
}

int kvs_policy_set_capacity(struct kvs_policy *pol, uint32_t b, uint32_t blocks)
{
	uint64_t ceiling = index_ceiling(pol);
	uint32_t g = blocks ? groups_of(blocks) : groups_of(pol->p.index_blocks);

	if (b >= pol->p.nbackends)
		return 0;
	if (g > ceiling)
		g = (uint32_t)ceiling;
	if (g == pol->conf[b])
		return 0;
	pol->conf[b] = g;
	kvs_pcache_set_capacity(&pol->index[b], g);
	return 1;
}

uint32_t kvs_policy_index_blocks(const struct kvs_policy *pol, uint32_t b)
{
	return pol->index[b].capacity * KVS_INDEX_GROUP;
}

static void forward_evict(void *ctx, uint64_t hash)
{
	struct kvs_policy_hook *h = ctx;

	if (h->pol->on_evict)
		h->pol->on_evict(h->pol->evict_ctx, h->backend, hash);
}

static void hook_index(struct kvs_policy *pol, uint32_t b)
{
	pol->hooks[b] = (struct kvs_policy_hook){ .pol = pol, .backend = b };
	pol->index[b].on_evict = forward_evict;
	pol->index[b].evict_ctx = &pol->hooks[b];
}

void kvs_policy_on_evict(struct kvs_policy *pol, kvs_policy_evict_fn fn, void *ctx)
{
	uint32_t b;

	pol->on_evict = fn;
	pol->evict_ctx = ctx;
	for (b = 0; b < pol->p.nbackends; b++)
		hook_index(pol, b);
}

void kvs_policy_mark(struct kvs_policy *pol, uint32_t b, uint64_t hash)
{
	kvs_pcache_mark(&pol->index[b], hash);
}

int kvs_policy_set_backends(struct kvs_policy *pol, const char *const *names, uint32_t n)
{
	uint32_t b, old = pol->p.nbackends;
	int err;

	if (n < old || n > KVS_MAX_BACKENDS)
		return -EINVAL;
	for (b = old; b < n; b++) {
		pol->conf[b] = groups_of(pol->p.index_blocks);
		err = kvs_pcache_init(&pol->index[b], pol->conf[b]);
		if (err) {
			while (b-- > old)
				kvs_pcache_free(&pol->index[b]);
			return err;
		}
		pol->place[b].placed = 0;
		if (pol->on_evict)
			hook_index(pol, b);
	}
	set_seeds(pol, names, n);
	pol->p.nbackends = n;
	return 0;
}

static void reset_index(struct kvs_policy *pol, uint32_t b, uint32_t cap)
{
	kvs_pcache_free(&pol->index[b]);
	kvs_pcache_init(&pol->index[b], cap);
	pol->known[b] = 0;
	if (pol->on_evict)
		hook_index(pol, b);
}

void kvs_policy_forget_backend(struct kvs_policy *pol, uint32_t b)
{
	/* what the reports taught of its size stays */
	reset_index(pol, b, pol->index[b].capacity);
}

void kvs_policy_remove_backend(struct kvs_policy *pol, uint32_t b)
{
	/* the next backend in the slot is another cache: the configured size,
	 * until it says its own */
	pol->conf[b] = groups_of(pol->p.index_blocks);
	reset_index(pol, b, pol->conf[b]);
}

const char *kvs_reason_name(enum kvs_reason r)
{
	static const char *const names[] = {
		[KVS_R_NONE] = "none",	   [KVS_R_PREFIX] = "prefix", [KVS_R_SPILL] = "spill",
		[KVS_R_SHARED] = "shared", [KVS_R_COLD] = "cold",     [KVS_R_HOT] = "hot",
	};

	return r <= KVS_R_HOT ? names[r] : "unknown";
}
