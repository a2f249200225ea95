package rbac

import (
	"bytes"
	"fmt"
	"io"
	"strings"

	"go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"
)

// Write writes the objects as YAML documents, header (a comment, one line
// per line) first, each object under its comment and each of its rules
// under theirs; lists of words are written [a, b].
func Write(w io.Writer, header string, objs []Object) error {
	var buf bytes.Buffer
	if header != "" {
		buf.WriteString(comment(header) + "\n")
	}
	for i, o := range objs {
		if i > 0 {
			buf.WriteString("---\n")
		}
		doc, err := node(o)
		if err != nil {
			return err
		}
		buf.WriteString(comment(o.Comment))
		enc := yaml.NewEncoder(&buf)
		enc.SetIndent(2)
		if err := enc.Encode(doc); err != nil {
			return fmt.Errorf("write %s: %w", o.Comment, err)
		}
		if err := enc.Close(); err != nil {
			return err
		}
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// node is the object as a YAML node, its fields as Kubernetes writes them,
// metadata's name and namespace first, and its rules commented.
func node(o Object) (*yaml.Node, error) {
	b, err := sigsyaml.Marshal(o.Object)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	root := doc.Content[0]
	if meta := field(root, "metadata"); meta != nil {
		first(meta, "namespace")
		first(meta, "name")
	}
	if rules := field(root, "rules"); rules != nil {
		for i, r := range rules.Content {
			if i < len(o.RuleComments) {
				r.HeadComment = wrap(capitalized(o.RuleComments[i]), 72)
			}
		}
	}
	flowWords(root)
	return root, nil
}

// field is the value of a mapping's key, or nil.
func field(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// first moves a mapping's key, if it has it, to the front.
func first(m *yaml.Node, key string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			kv := append([]*yaml.Node{}, m.Content[i:i+2]...)
			m.Content = append(kv, append(m.Content[:i:i], m.Content[i+2:]...)...)
			return
		}
	}
}

// flowWords writes every list of scalars [a, b].
func flowWords(n *yaml.Node) {
	if n.Kind == yaml.SequenceNode && len(n.Content) > 0 {
		scalars := true
		for _, c := range n.Content {
			scalars = scalars && c.Kind == yaml.ScalarNode
		}
		if scalars {
			n.Style = yaml.FlowStyle
		}
	}
	for _, c := range n.Content {
		flowWords(c)
	}
}

// comment is text as YAML comment lines, wrapped.
func comment(text string) string {
	if text == "" {
		return ""
	}
	var b strings.Builder
	for line := range strings.SplitSeq(wrap(text, 76), "\n") {
		b.WriteString(strings.TrimRight("# "+line, " ") + "\n")
	}
	return b.String()
}

// wrap breaks text's lines into lines of at most width characters, at
// spaces, keeping its own line breaks.
func wrap(text string, width int) string {
	var out []string
	for para := range strings.SplitSeq(text, "\n") {
		line := ""
		for _, w := range strings.Fields(para) {
			if line != "" && len(line)+1+len(w) > width {
				out = append(out, line)
				line = ""
			}
			if line != "" {
				line += " "
			}
			line += w
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

func capitalized(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
