package webhook

import (
	"cmp"
	"context"
	"encoding/json"
	"sync"
	"time"

	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/v1alpha1"
	"universalcontroller.dev/uc/sdk/go/hook"
)

// etagCache is a webhook's webhook.etag: its last reply that came with an
// ETag, for each parent. A call sends the cached ETag in If-None-Match, and
// a 304 or 412 answer means that reply again.
type etagCache struct {
	timeout time.Duration // 0: replies never expire
	cleanup time.Duration // 0: expired replies are never dropped
	now     func() time.Time

	mu      sync.Mutex
	entries map[etagKey]etagEntry
	swept   time.Time
}

// etagKey is the parent a reply is for, as Metacontroller keys its cache
// (kind, namespace, name), and the revision it was asked about: a rolling
// controller's hook is asked about each of a parent's revisions.
type etagKey struct{ kind, namespace, name, revision string }

type etagEntry struct {
	etag    string
	reply   []byte
	expires time.Time // zero: never
}

// newEtagCache is the cache a webhook's etag settings ask for, or nil.
func newEtagCache(c *v1alpha1.WebhookEtag) *etagCache {
	if c == nil || c.Enabled == nil || !*c.Enabled {
		return nil
	}
	seconds := func(s *int32) time.Duration {
		if s == nil {
			return 0
		}
		return time.Duration(max(*s, 0)) * time.Second
	}
	return &etagCache{timeout: seconds(c.CacheTimeoutSeconds), cleanup: seconds(c.CacheCleanupSeconds),
		now: time.Now, entries: map[etagKey]etagEntry{}}
}

// etagKeyOf is the key of a request: its parent (a decorator's request
// names it object) and the revision the call is about.
func etagKeyOf(ctx context.Context, request []byte) etagKey {
	var root struct {
		Parent, Object *struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Namespace string `json:"namespace"`
				Name      string `json:"name"`
			} `json:"metadata"`
		}
	}
	_ = json.Unmarshal(request, &root) // a request uc made; at worst, an empty key
	var k etagKey
	if o := cmp.Or(root.Parent, root.Object); o != nil {
		k = etagKey{kind: o.Kind, namespace: o.Metadata.Namespace, name: o.Metadata.Name}
	}
	if e, ok := hook.Request(ctx); ok {
		if m, err := bus.MetaOf(e); err == nil {
			k.revision = m.Revision
		}
	}
	return k
}

// get is the unexpired entry of key.
func (c *etagCache) get(key etagKey) (etagEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || c.expired(e, c.now()) {
		return etagEntry{}, false
	}
	return e, true
}

// put keeps the reply of key with its ETag, and drops the expired entries
// when the last sweep is cleanup ago.
func (c *etagCache) put(key etagKey, etag string, reply []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	e := etagEntry{etag: etag, reply: reply}
	if c.timeout > 0 {
		e.expires = now.Add(c.timeout)
	}
	c.entries[key] = e
	if c.cleanup > 0 && now.Sub(c.swept) >= c.cleanup {
		for k, e := range c.entries {
			if c.expired(e, now) {
				delete(c.entries, k)
			}
		}
		c.swept = now
	}
}

func (c *etagCache) expired(e etagEntry, now time.Time) bool {
	return !e.expires.IsZero() && !now.Before(e.expires)
}
