package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"universalcontroller.dev/uc/internal/registry"
)

var cachedObjectsDesc = prometheus.NewDesc("uc_cached_objects",
	"Objects in the process's informer caches of controllers' parents, children and revisions, by resource (resource.group): a watcher shard (--shard-watchers) holds only those of its partitions, an applier of a sharded installation those of the partitions it holds and those in no partition.",
	[]string{"resource"}, nil)

// cacheCollector reports, on every scrape, what the process's registries
// cache.
type cacheCollector struct {
	registries func() []*registry.Registry
}

func (c cacheCollector) Describe(ch chan<- *prometheus.Desc) { ch <- cachedObjectsDesc }

func (c cacheCollector) Collect(ch chan<- prometheus.Metric) {
	total := map[string]int{}
	for _, reg := range c.registries() {
		for gvr, n := range reg.Cached() {
			total[gvr.GroupResource().String()] += n
		}
	}
	for resource, n := range total {
		ch <- prometheus.MustNewConstMetric(cachedObjectsDesc, prometheus.GaugeValue, float64(n), resource)
	}
}
