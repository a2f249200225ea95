package compact

import (
	"bytes"
	"encoding/json"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// decodeMeta decodes an object's metadata into m, empty, as encoding/json
// decodes it into an ObjectMeta, but for its managedFields, which it
// skips. Every change an informer receives is decoded so, and
// encoding/json, checking the whole metadata and then reflecting over each
// field, was a tenth of the cost of a watch event. The metadata an
// apiserver writes is read here from its split JSON: ObjectMeta's fields
// by their names, each once, of their JSON types, without nulls. Any other
// goes to encoding/json, as before (a field named in another case, given
// twice, or of another type, and an unknown field, which it ignores).
func decodeMeta(data []byte, m *metav1.ObjectMeta) error {
	var read metav1.ObjectMeta
	if readMeta(data, &read) {
		*m = read
		return nil
	}
	return jsonMeta(data, m)
}

// jsonMeta decodes metadata into m with encoding/json, managedFields
// skipped.
func jsonMeta(data []byte, m *metav1.ObjectMeta) error {
	meta := struct {
		*metav1.ObjectMeta
		ManagedFields skipped `json:"managedFields"`
	}{ObjectMeta: m}
	return json.Unmarshal(data, &meta)
}

// readMeta reads the metadata an apiserver writes into m; false for any
// other, which it may have half read.
func readMeta(data []byte, m *metav1.ObjectMeta) bool {
	return readObject(data, func(name string, value []byte) bool {
		var ok bool
		switch name {
		case "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion":
			*metaText(m, name), ok = text(value)
		case "generation":
			m.Generation, ok = integer(value)
		case "creationTimestamp":
			m.CreationTimestamp, ok = timestamp(value)
		case "deletionTimestamp":
			var t metav1.Time
			t, ok = timestamp(value)
			m.DeletionTimestamp = &t
		case "deletionGracePeriodSeconds":
			var n int64
			n, ok = integer(value)
			m.DeletionGracePeriodSeconds = &n
		case "labels":
			m.Labels, ok = textMap(value)
		case "annotations":
			m.Annotations, ok = textMap(value)
		case "ownerReferences":
			m.OwnerReferences, ok = ownerReferences(value)
		case "finalizers":
			m.Finalizers, ok = texts(value)
		case "managedFields": // skipped
			ok = true
		}
		return ok
	})
}

// metaText is m's string field name.
func metaText(m *metav1.ObjectMeta, name string) *string {
	switch name {
	case "name":
		return &m.Name
	case "generateName":
		return &m.GenerateName
	case "namespace":
		return &m.Namespace
	case "selfLink":
		//lint:ignore SA1019 no apiserver sets selfLink since 1.20, but an aggregated API may: it is kept as it came
		return &m.SelfLink
	case "uid":
		return (*string)(&m.UID)
	}
	return &m.ResourceVersion
}

// readObject reads each field of a JSON object with read; false if read
// is false for one, if a field is named twice, or if a name holds a
// control character or bytes that are not UTF-8 (encoding/json's to
// refuse or replace).
func readObject(data []byte, read func(name string, value []byte) bool) bool {
	var buf [16]field // most often large enough
	fs, err := appendSplit(buf[:0], data)
	if err != nil || !distinct(fs) {
		return false
	}
	for _, f := range fs {
		if !controlFree(f.name) || !utf8.ValidString(f.name) || !read(f.name, f.value) {
			return false
		}
	}
	return true
}

// distinct tells whether no two fields have the same name: by comparing
// each pair for a few (metadata, an owner reference), with a set for many
// (an object may have thousands of annotations).
func distinct(fs fields) bool {
	if len(fs) > 16 {
		seen := make(map[string]struct{}, len(fs))
		for _, f := range fs {
			seen[f.name] = struct{}{}
		}
		return len(seen) == len(fs)
	}
	for i, f := range fs {
		for _, before := range fs[:i] {
			if before.name == f.name {
				return false
			}
		}
	}
	return true
}

// controlFree tells whether s holds no control character.
func controlFree[T string | []byte](s T) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' {
			return false
		}
	}
	return true
}

// text reads a JSON string. One with an escape, a control character or
// bytes that are not UTF-8 is decoded by encoding/json.
func text(value []byte) (string, bool) {
	if len(value) < 2 || value[0] != '"' || value[len(value)-1] != '"' {
		return "", false
	}
	inner := value[1 : len(value)-1]
	if bytes.IndexByte(inner, '\\') < 0 && controlFree(inner) && utf8.Valid(inner) {
		return string(inner), true
	}
	var s string
	return s, json.Unmarshal(value, &s) == nil
}

// integer reads a JSON number into an int64 as encoding/json does: a whole
// one, written without a fraction or an exponent, that fits.
func integer(value []byte) (int64, bool) {
	digits := bytes.TrimPrefix(value, []byte("-"))
	if len(digits) == 0 || len(digits) > 1 && digits[0] == '0' {
		return 0, false
	}
	var n uint64
	for _, c := range digits {
		if c < '0' || c > '9' || n > (1<<63)/10 {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	switch negative := len(digits) < len(value); {
	case negative && n <= 1<<63:
		return -int64(n), true // -(1<<63) too, in two's complement
	case !negative && n < 1<<63:
		return int64(n), true
	}
	return 0, false
}

// timestamp reads a time as metav1.Time's UnmarshalJSON does, but for null.
func timestamp(value []byte) (metav1.Time, bool) {
	s, ok := text(value)
	if !ok {
		return metav1.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, s)
	return metav1.Time{Time: t.Local()}, err == nil
}

// textMap reads a JSON object of strings (labels, annotations).
func textMap(value []byte) (map[string]string, bool) {
	m := map[string]string{}
	ok := readObject(value, func(name string, value []byte) bool {
		var ok bool
		m[name], ok = text(value)
		return ok
	})
	return m, ok
}

// texts reads a JSON array of strings.
func texts(value []byte) ([]string, bool) {
	items, ok := array(value)
	out := make([]string, len(items))
	for i := 0; ok && i < len(items); i++ {
		out[i], ok = text(items[i])
	}
	return out, ok
}

// array splits a JSON array, not null, into its items.
func array(value []byte) ([][]byte, bool) {
	if len(value) == 0 || value[0] != '[' {
		return nil, false
	}
	items, err := splitArray(value)
	return items, err == nil
}

func ownerReferences(value []byte) ([]metav1.OwnerReference, bool) {
	items, ok := array(value)
	out := make([]metav1.OwnerReference, len(items))
	for i := 0; ok && i < len(items); i++ {
		ref := &out[i]
		ok = readObject(items[i], func(name string, value []byte) bool {
			var ok bool
			switch name {
			case "apiVersion":
				ref.APIVersion, ok = text(value)
			case "kind":
				ref.Kind, ok = text(value)
			case "name":
				ref.Name, ok = text(value)
			case "uid":
				*(*string)(&ref.UID), ok = text(value)
			case "controller":
				ref.Controller, ok = flag(value)
			case "blockOwnerDeletion":
				ref.BlockOwnerDeletion, ok = flag(value)
			}
			return ok
		})
	}
	return out, ok
}

// flag reads a JSON boolean into a *bool: the one every cached object
// shares (see shared), as compact would make it.
func flag(value []byte) (*bool, bool) {
	switch string(value) {
	case "true":
		return &yes, true
	case "false":
		return &no, true
	}
	return nil, false
}
