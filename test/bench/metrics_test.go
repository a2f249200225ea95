package main

import (
	"testing"
	"time"
)

func TestParseMetrics(t *testing.T) {
	raw := []byte(`# HELP apiserver_request_total Counter of apiserver requests.
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="configmaps",scope="resource",subresource="",verb="POST",version="v1"} 5000
apiserver_request_total{code="201",component="apiserver",dry_run="All",group="",resource="configmaps",scope="resource",subresource="",verb="APPLY",version="v1"} 7
apiserver_request_total{code="200",component="apiserver",dry_run="",group="x",resource="fanouts",scope="resource",subresource="status",verb="APPLY",version="v1"} 3
apiserver_request_total{code="200",component="",dry_run="",group="",resource="",scope="",subresource="/metrics",verb="GET",version=""} 9
apiserver_longrunning_requests{component="apiserver",group="",resource="configmaps",scope="cluster",subresource="",verb="WATCH",version="v1"} 2
apiserver_longrunning_requests{component="apiserver",group="",resource="configmaps",scope="namespace",subresource="",verb="WATCH",version="v1"} 1
apiserver_longrunning_requests{component="apiserver",group="",resource="pods",scope="cluster",subresource="log",verb="CONNECT",version="v1"} 1
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="odd\"name",scope="resource",subresource="",verb="GET",version="v1"} 1e+00
# HELP apiserver_terminated_watchers_total [ALPHA] Counter of watchers closed due to unresponsiveness broken by resource type.
# TYPE apiserver_terminated_watchers_total counter
apiserver_terminated_watchers_total{group="",resource="configmaps"} 91
apiserver_terminated_watchers_total{group="examples.universalcontroller.dev",resource="fanouts"} 291
`)
	m, err := parseMetrics(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]verbCounts{
		"configmaps":     {"POST": 5000, "APPLY dry-run": 7},
		"fanouts/status": {"APPLY": 3},
		`odd"name`:       {"GET": 1},
	}
	if len(m.requests) != len(want) {
		t.Errorf("requests = %v, want %v", m.requests, want)
	}
	for res, v := range want {
		if got := m.requests[res].String(); got != v.String() {
			t.Errorf("requests[%s] = %s, want %s", res, got, v)
		}
	}
	if len(m.watches) != 1 || m.watches["configmaps"] != 3 {
		t.Errorf("watches = %v, want configmaps 3", m.watches)
	}
	earlier := apiMetrics{closed: map[string]int64{"configmaps": 91, "fanouts": 200}}
	if got := m.closedSince(earlier); len(got) != 1 || got["fanouts"] != 91 {
		t.Errorf("watches closed since = %v, want fanouts 91", got)
	}
	if got := m.closedSince(apiMetrics{}); len(got) != 2 || got["configmaps"] != 91 || got["fanouts"] != 291 {
		t.Errorf("watches closed = %v, want configmaps 91, fanouts 291", got)
	}
	if w := byVerb(want).writes(); w != 5003 {
		t.Errorf("writes = %d, want 5003 (no dry runs, no reads)", w)
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 200; i++ {
		d = append(d, time.Duration(i))
	}
	if p50, p99 := percentile(d, 0.5), percentile(d, 0.99); p50 != 100 || p99 != 198 {
		t.Errorf("p50, p99 = %d, %d; want 100, 198", p50, p99)
	}
	if percentile(nil, 0.5) != 0 {
		t.Error("percentile of nothing is not 0")
	}
}
