package testbed

import (
	"fmt"
	"os"
	"regexp"
	"strings"
)

// DocumentedMetrics are the names of the metrics in the table of the
// "Metrics" section of doc (docs/operating.md), in its order: the first column of each row,
// `between backticks`. Tests check that uc serves each of them, and that
// what refers to uc's metrics (the Grafana dashboard) names only these.
func DocumentedMetrics(doc string) ([]string, error) {
	b, err := os.ReadFile(doc)
	if err != nil {
		return nil, err
	}
	_, section, ok := strings.Cut(string(b), "\n## Metrics\n")
	if !ok {
		return nil, fmt.Errorf("%s has no section Metrics", doc)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var names []string
	for _, m := range metricRow.FindAllStringSubmatch(section, -1) {
		names = append(names, m[1])
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s: the section Metrics has no table of metrics", doc)
	}
	return names, nil
}

var metricRow = regexp.MustCompile("(?m)^\\| `([a-zA-Z_:][a-zA-Z0-9_:]*)` \\|")
