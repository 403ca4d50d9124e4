// SPDX-License-Identifier: MIT
/* A vLLM-like engine in model time: batching, chunked prefill, caching. */
#include "engine.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kvsplice/hash.h"

int kvs_engine_init(struct kvs_engine *e, const struct kvs_model_params *m, uint32_t max_seqs)
{
	int err;

	memset(e, 0, sizeof(*e));
	e->model = *m;
	e->max_seqs = max_seqs ? max_seqs : KVS_ENGINE_MAX_SEQS;
	if (e->model.step_tokens == 0)
		e->model.step_tokens = KVS_MODEL_STEP_TOKENS;
	err = kvs_pcache_init(&e->cache, m->kv_blocks);
	if (err)
		return err;
	e->events_cap = e->max_seqs;
	e->events = calloc(e->events_cap, sizeof(*e->events));
	if (!e->events) {
		kvs_pcache_free(&e->cache);
		return -ENOMEM;
	}
	return 0;
}

void kvs_engine_free(struct kvs_engine *e)
{
	kvs_pcache_free(&e->cache);
	free(e->events);
	e->events = NULL;
}

void kvs_engine_submit(struct kvs_engine *e, struct kvs_eng_req *r)
{
	r->state = KVS_ENG_WAITING;
	r->cached_tokens = r->computed = r->emitted = r->reserved = 0;
	r->start_ms = r->first_ms = r->end_ms = 0;
	r->next = NULL;
	if (e->wait_tail)
		e->wait_tail->next = r;
	else
		e->wait_head = r;
	e->wait_tail = r;
	e->nwaiting++;
}

bool kvs_engine_idle(const struct kvs_engine *e)
{
	return !e->running && !e->wait_head;
}

/* Blocks neither pinned by running requests nor reserved for them. */
static uint32_t free_blocks(const struct kvs_engine *e)
{
	uint32_t pinned = e->cache.used - e->cache.evictable;
	uint32_t held = pinned + e->reserved_blocks;

	return e->cache.max_capacity > held ? e->cache.max_capacity - held : 0;
}

/* The prefix cache may use what is not reserved; shrinking evicts LRU. */
static void fit_cache(struct kvs_engine *e)
{
	kvs_pcache_set_capacity(&e->cache, e->cache.max_capacity - e->reserved_blocks);
}

static uint32_t full_blocks(const struct kvs_eng_req *r, uint32_t tokens)
{
	uint32_t b = tokens / KVS_BLOCK_TOKENS;

	return b < r->nblocks ? b : r->nblocks;
}

/*
 * Admit r if the KV capacity allows: pin its cached prefix and reserve the
 * blocks it will compute and generate (kvs_max_cached_blocks: a prompt
 * cached in full still computes its last block).
 */
static bool admit(struct kvs_engine *e, struct kvs_eng_req *r, double now_ms)
{
	uint32_t hit = kvs_pcache_match(&e->cache, r->hashes, r->nblocks);
	uint32_t max_cached = kvs_max_cached_blocks(r->prompt_tokens);
	uint32_t total = kvs_engine_blocks_needed(r);
	uint32_t need;

	if (hit > max_cached)
		hit = max_cached;
	need = (total > hit ? total - hit : 0);
	if (need > free_blocks(e))
		return false;
	if (kvs_pcache_acquire(&e->cache, r->hashes, hit))
		return false;
	r->reserved = need;
	e->reserved_blocks += need;
	fit_cache(e);
	r->cached_tokens = r->computed = hit * KVS_BLOCK_TOKENS;
	r->state = KVS_ENG_PREFILL;
	r->start_ms = now_ms;
	return true;
}

/* Newly computed full blocks of the prompt become cached (and pinned): the
 * reservation made for them turns into cache use. */
static void commit_blocks(struct kvs_engine *e, struct kvs_eng_req *r, uint32_t before)
{
	uint32_t from = full_blocks(r, before), to = full_blocks(r, r->computed), n = to - from;

	if (!n)
		return;
	if (n > r->reserved)
		n = r->reserved;
	r->reserved -= n;
	e->reserved_blocks -= n;
	fit_cache(e);
	kvs_pcache_acquire(&e->cache, r->hashes + from, to - from);
}

static void finish(struct kvs_engine *e, struct kvs_eng_req *r, double end_ms)
{
	kvs_pcache_release(&e->cache, r->hashes, full_blocks(r, r->computed));
	e->reserved_blocks -= r->reserved;
	r->reserved = 0;
	fit_cache(e);
	r->state = KVS_ENG_DONE;
	r->end_ms = end_ms;
}

/* Unlinks r from the list at *head; whether it was there. */
static bool unlink_req(struct kvs_eng_req **head, struct kvs_eng_req *r)
{
	for (struct kvs_eng_req **pp = head; *pp; pp = &(*pp)->next) {
		if (*pp == r) {
			*pp = r->next;
			r->next = NULL;
			return true;
		}
	}
	return false;
}

void kvs_engine_cancel(struct kvs_engine *e, struct kvs_eng_req *r)
{
	uint32_t i, n = 0;

	if (r->state == KVS_ENG_WAITING && unlink_req(&e->wait_head, r)) {
		e->nwaiting--;
		/* the tail is the last of the list, if any is left */
		for (e->wait_tail = e->wait_head; e->wait_tail && e->wait_tail->next;
		     e->wait_tail = e->wait_tail->next)
			;
	} else if (r->state != KVS_ENG_WAITING && r->state != KVS_ENG_DONE &&
		   unlink_req(&e->running, r)) {
		e->nrunning--;
		finish(e, r, r->start_ms);
	}
	/* What the last step produced for it is not delivered. */
	for (i = 0; i < e->nevents_last; i++)
		if (e->events[i].req != r)
			e->events[n++] = e->events[i];
	e->nevents_last = n;
}

static void emit(struct kvs_engine *e, uint32_t *n, struct kvs_eng_req *r, bool done)
{
	if (*n < e->events_cap)
		e->events[(*n)++] = (struct kvs_eng_event){ .req = r, .done = done };
}

/* What one step schedules, as it is planned. */
struct step_plan {
	uint32_t budget, tokens, n;
	double attn, ctx;
};

/*
 * r's prefill chunk this step: the rest of its prompt or the rest of the
 * budget. Its full blocks are cached as the chunk is scheduled, before the
 * step runs, as vLLM v1's allocate_slots caches them: a request admitted
 * after it in the same step hits them (every layer's KV is written before
 * attention reads it), where caching them at the step's end would have it
 * recompute them.
 */
static void prefill_chunk(struct kvs_engine *e, struct kvs_eng_req *r, struct step_plan *p)
{
	uint32_t chunk = r->prompt_tokens - r->computed, before = r->computed;

	if (chunk > p->budget)
		chunk = p->budget;
	p->attn += (double)chunk * ((double)r->computed + chunk / 2.0);
	p->tokens += chunk;
	p->budget -= chunk;
	r->computed += chunk;
	commit_blocks(e, r, before);
	if (r->computed == r->prompt_tokens) {
		/* The step that completes the prefill samples the first token. */
		r->state = KVS_ENG_DECODE;
		r->emitted = r->max_tokens ? 1 : 0;
		emit(e, &p->n, r, r->emitted >= r->max_tokens);
	}
}

double kvs_engine_step(struct kvs_engine *e, double now_ms, struct kvs_eng_event **events,
		       uint32_t *nevents)
{
	struct step_plan p = { .budget = e->model.step_tokens };
	struct kvs_eng_req **pp, *r;
	double dur;

	/* As vLLM v1's scheduler: what runs first, decoding sequences one
	 * token each, then the prefills begun, oldest first (the running list
	 * is newest first; a chunk either completes its prompt or takes the
	 * rest of the budget, so no request gets two chunks in one step). */
	for (r = e->running; r && p.budget; r = r->next) {
		if (r->state != KVS_ENG_DECODE)
			continue;
		p.budget--;
		p.tokens++;
		p.ctx += r->prompt_tokens + r->emitted;
		r->emitted++;
		emit(e, &p.n, r, r->emitted >= r->max_tokens);
	}
	while (p.budget) {
		struct kvs_eng_req *oldest = NULL;

		for (r = e->running; r; r = r->next)
			if (r->state == KVS_ENG_PREFILL &&
			    (!oldest || r->start_ms <= oldest->start_ms))
				oldest = r;
		if (!oldest)
			break;
		prefill_chunk(e, oldest, &p);
	}
	/* Then the waiting, first-come first-served while the budget lasts (a
	 * request that does not fit blocks those behind it, as in vLLM), each
	 * matched against the cache as it stands with what this step has
	 * scheduled already, and given its first chunk at once. */
	while (p.budget && e->wait_head && e->nrunning < e->max_seqs &&
	       admit(e, e->wait_head, now_ms)) {
		r = e->wait_head;
		e->wait_head = r->next;
		if (!e->wait_head)
			e->wait_tail = NULL;
		e->nwaiting--;
		r->next = e->running;
		e->running = r;
		e->nrunning++;
		prefill_chunk(e, r, &p);
	}
	dur = p.tokens ? kvs_model_step_ms(&e->model, p.tokens, p.attn, p.ctx) : 0;

	/* Account the step's end: first tokens, finished requests. */
	for (uint32_t i = 0; i < p.n; i++) {
		r = e->events[i].req;
		if (r->first_ms == 0)
			r->first_ms = now_ms + dur;
	}
	for (pp = &e->running; (r = *pp);) {
		if (r->state == KVS_ENG_DECODE && r->emitted >= r->max_tokens) {
			*pp = r->next;
			e->nrunning--;
			finish(e, r, now_ms + dur);
			continue;
		}
		pp = &r->next;
	}
	e->steps += p.tokens ? 1 : 0;
	e->nevents_last = p.n;
	*events = e->events;
	*nevents = p.n;
	return dur;
}
