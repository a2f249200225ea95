package compact

import "slices"

// pairs holds a small string map — an object's labels or annotations — as
// its keys and values one after the other, sorted by key. A Go map of a few
// entries takes some 300 bytes whatever it holds; its pairs take the
// strings' headers.
type pairs []string

// newPairs makes the pairs of m, its keys interned and its values passed
// through value; nil when m is empty.
func newPairs(m map[string]string, value func(string) string) pairs {
	if len(m) == 0 {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	p := make(pairs, 0, 2*len(m))
	for _, k := range keys {
		p = append(p, intern(k), value(m[k]))
	}
	return p
}

// asMap is p as a map made anew; nil when p is empty.
func (p pairs) asMap() map[string]string {
	if len(p) == 0 {
		return nil
	}
	m := make(map[string]string, len(p)/2)
	for i := 0; i < len(p); i += 2 {
		m[p[i]] = p[i+1]
	}
	return m
}

// unstructured is p as an unstructured object's map; nil when p is empty.
func (p pairs) unstructured() map[string]any {
	if len(p) == 0 {
		return nil
	}
	m := make(map[string]any, len(p)/2)
	for i := 0; i < len(p); i += 2 {
		m[p[i]] = p[i+1]
	}
	return m
}
