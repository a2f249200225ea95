package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
)

// verbCounts counts requests by apiserver verb (POST, PUT, PATCH, APPLY,
// DELETE, GET, LIST, WATCH, …); dry runs count under "<VERB> dry-run".
type verbCounts map[string]int64

// writeVerbs are the verbs that change something when they are not dry runs.
var writeVerbs = []string{"POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION"}

// writes is the number of requests that changed something (no dry runs).
func (v verbCounts) writes() int64 {
	var n int64
	for _, verb := range writeVerbs {
		n += v[verb]
	}
	return n
}

// total is the number of requests.
func (v verbCounts) total() int64 {
	var n int64
	for _, c := range v {
		n += c
	}
	return n
}

// dryRuns is the number of dry-run requests.
func (v verbCounts) dryRuns() int64 {
	var n int64
	for verb, c := range v {
		if strings.HasSuffix(verb, " dry-run") {
			n += c
		}
	}
	return n
}

func (v verbCounts) minus(o verbCounts) verbCounts {
	out := verbCounts{}
	for k, n := range v {
		if d := n - o[k]; d != 0 {
			out[k] = d
		}
	}
	for k, n := range o {
		if _, ok := v[k]; !ok && n != 0 {
			out[k] = -n
		}
	}
	return out
}

func (v verbCounts) String() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(v)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, v[k]))
	}
	return strings.Join(parts, ", ")
}

func verbKey(verb string, dryRun bool) string {
	if dryRun {
		return verb + " dry-run"
	}
	return verb
}

// apiMetrics is what the bench reads from the apiserver's /metrics.
type apiMetrics struct {
	// requests is apiserver_request_total of resource requests, by
	// resource ("configmaps", "fanouts/status", …) and verb.
	requests map[string]verbCounts
	// watches is apiserver_longrunning_requests{verb="WATCH"}: the watches
	// open now, by resource.
	watches map[string]int64
	// closed is apiserver_terminated_watchers_total: the watches the
	// apiserver closed because their consumer fell behind, by resource.
	closed map[string]int64
}

// since is the requests made between earlier and m, by resource and verb.
func (m apiMetrics) since(earlier apiMetrics) map[string]verbCounts {
	out := map[string]verbCounts{}
	for res, v := range m.requests {
		if d := v.minus(earlier.requests[res]); len(d) > 0 {
			out[res] = d
		}
	}
	return out
}

// closedSince is the watches the apiserver closed between earlier and m,
// by resource; nil when none.
func (m apiMetrics) closedSince(earlier apiMetrics) map[string]int64 {
	var out map[string]int64
	for res, n := range m.closed {
		if d := n - earlier.closed[res]; d > 0 {
			if out == nil {
				out = map[string]int64{}
			}
			out[res] = d
		}
	}
	return out
}

// byVerb sums requests over resources.
func byVerb(byResource map[string]verbCounts) verbCounts {
	out := verbCounts{}
	for _, v := range byResource {
		for verb, n := range v {
			out[verb] += n
		}
	}
	return out
}

// scrapeMetrics reads the apiserver's /metrics.
func scrapeMetrics(ctx context.Context, rc rest.Interface) (apiMetrics, error) {
	raw, err := rc.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return apiMetrics{}, fmt.Errorf("scrape apiserver metrics: %w", err)
	}
	return parseMetrics(raw)
}

// parseMetrics reads the metric families the bench uses from the
// Prometheus text format.
func parseMetrics(raw []byte) (apiMetrics, error) {
	m := apiMetrics{requests: map[string]verbCounts{}, watches: map[string]int64{}, closed: map[string]int64{}}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name, _, _ := strings.Cut(line, "{")
		if name != "apiserver_request_total" && name != "apiserver_longrunning_requests" && name != "apiserver_terminated_watchers_total" {
			continue
		}
		labels, value, err := parseSample(line[len(name):])
		if err != nil {
			return m, fmt.Errorf("metrics line %q: %w", line, err)
		}
		resource := labels["resource"]
		if resource == "" {
			continue // a non-resource request such as /metrics itself
		}
		if sub := labels["subresource"]; sub != "" {
			resource += "/" + sub
		}
		switch {
		case name == "apiserver_request_total":
			if m.requests[resource] == nil {
				m.requests[resource] = verbCounts{}
			}
			m.requests[resource][verbKey(labels["verb"], labels["dry_run"] != "")] += int64(value)
		case name == "apiserver_terminated_watchers_total":
			m.closed[resource] += int64(value)
		case labels["verb"] == "WATCH":
			m.watches[resource] += int64(value)
		}
	}
	return m, sc.Err()
}

// parseSample parses `{k="v",…} value [timestamp]`.
func parseSample(s string) (map[string]string, float64, error) {
	labels := map[string]string{}
	if !strings.HasPrefix(s, "{") {
		return nil, 0, fmt.Errorf("no labels")
	}
	s = s[1:]
	for !strings.HasPrefix(s, "}") {
		key, rest, ok := strings.Cut(s, `="`)
		if !ok {
			return nil, 0, fmt.Errorf("malformed labels")
		}
		var val strings.Builder
		i := 0
		for ; i < len(rest) && rest[i] != '"'; i++ {
			if rest[i] == '\\' && i+1 < len(rest) {
				i++
				if rest[i] == 'n' {
					val.WriteByte('\n')
					continue
				}
			}
			val.WriteByte(rest[i])
		}
		if i == len(rest) {
			return nil, 0, fmt.Errorf("unterminated label value")
		}
		labels[key] = val.String()
		s = strings.TrimPrefix(rest[i+1:], ",")
	}
	fields := strings.Fields(s[1:])
	if len(fields) == 0 {
		return nil, 0, fmt.Errorf("no value")
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	return labels, v, err
}

// requestCounter counts the requests a client makes, by apiserver verb, so
// the driver's own requests can be told from everyone else's.
type requestCounter struct {
	mu sync.Mutex
	n  verbCounts
}

func newRequestCounter() *requestCounter { return &requestCounter{n: verbCounts{}} }

func (c *requestCounter) snapshot() verbCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}

// wrap is a rest.Config WrapTransport.
func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		c.mu.Lock()
		c.n[requestVerb(r)]++
		c.mu.Unlock()
		return rt.RoundTrip(r)
	})
}

// requestVerb is the verb the apiserver files a request under. GETs count
// as GET: the counted clients only write.
func requestVerb(r *http.Request) string {
	verb := r.Method
	q := r.URL.Query()
	switch {
	case r.Method == http.MethodGet && (q.Get("watch") == "true" || q.Get("watch") == "1"):
		verb = "WATCH"
	case r.Method == http.MethodPatch && strings.HasPrefix(r.Header.Get("Content-Type"), "application/apply-patch"):
		verb = "APPLY"
	}
	return verbKey(verb, q.Has("dryRun"))
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
