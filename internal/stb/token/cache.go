package token

import (
	"hash/maphash"
	"sync"
)

const cacheShards = 16

// cache holds verified tokens by their full text (a tampered token is a
// different key, so it can only miss). Each shard is emptied when full:
// cheaper than LRU bookkeeping on every hit, and a miss only costs one
// verification.
type cache struct {
	seed  maphash.Seed
	limit int
	shard [cacheShards]struct {
		mu sync.RWMutex
		m  map[string]Claims
	}
}

func newCache(size int) *cache {
	c := &cache{seed: maphash.MakeSeed(), limit: max(size/cacheShards, 1)}
	for i := range c.shard {
		c.shard[i].m = make(map[string]Claims)
	}
	return c
}

func (c *cache) get(tok string) (Claims, bool) {
	sh := &c.shard[maphash.String(c.seed, tok)%cacheShards]
	sh.mu.RLock()
	cl, ok := sh.m[tok]
	sh.mu.RUnlock()
	return cl, ok
}

func (c *cache) put(tok string, cl Claims) {
	sh := &c.shard[maphash.String(c.seed, tok)%cacheShards]
	sh.mu.Lock()
	if len(sh.m) >= c.limit {
		clear(sh.m)
	}
	sh.m[tok] = cl
	sh.mu.Unlock()
}
