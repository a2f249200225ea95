package helmchart

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestReadmeListsValues: the chart's README has a row for every value
// values.schema.json declares, with its default, and none for a value it
// does not. A row's first cell names its values, `<role>.x` standing for
// the three roles' and `<component>.x` for theirs and nats.server's.
func TestReadmeListsValues(t *testing.T) {
	b, err := os.ReadFile(chartDir + "/README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			continue
		}
		for _, key := range codeSpan.FindAllStringSubmatch(cells[1], -1) {
			for _, k := range expandComponents(key[1]) {
				rows[k] = strings.TrimSpace(cells[2])
			}
		}
	}
	declared := valuePaths(chartSchema(t), "")
	for _, p := range declared {
		if p == "global" {
			continue
		}
		if def, ok := rows[p]; !ok {
			t.Errorf("README.md has no row for %s", p)
		} else if def == "" {
			t.Errorf("README.md gives no default for %s", p)
		}
	}
	for p := range rows {
		if !slices.Contains(declared, p) {
			t.Errorf("README.md has a row for %s, which values.schema.json does not declare", p)
		}
	}
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// expandComponents expands <role> and <component> in a value's path.
func expandComponents(key string) []string {
	switch {
	case strings.HasPrefix(key, "<role>."):
		var out []string
		for _, r := range []string{"watcher", "dispatcher", "applier"} {
			out = append(out, r+strings.TrimPrefix(key, "<role>"))
		}
		return out
	case strings.HasPrefix(key, "<component>."):
		var out []string
		for _, c := range []string{"watcher", "dispatcher", "applier", "nats.server"} {
			out = append(out, c+strings.TrimPrefix(key, "<component>"))
		}
		return out
	}
	return []string{key}
}
