// Package compact keeps the objects of uc's informer caches small. A
// dynamic informer holds each object as unstructured maps: a small Go map
// costs some 300 bytes however few entries it has, and every key and value
// is an allocation of its own, so an object takes several times its JSON
// size. A compact Object holds the metadata typed (what the informers'
// indexes and uc's event handlers read on every change) and the rest of the
// object as its JSON, decoded only when a request or a plan needs the whole
// object.
//
// A Source's informers decode the apiserver's JSON straight into Objects;
// Transform, set on a dynamic informer, makes its cache hold Objects too;
// Unstructured gives the object back as client-go's and uc's core read it.
package compact

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"universalcontroller.dev/uc/internal/ujson"
)

// Object is a Kubernetes object held compactly: its type and metadata
// typed (without managedFields, which nothing in uc reads), the rest as
// JSON. It is a runtime.Object and a metav1.Object, so informers, listers
// and indexers take it as they take any object; it must not be changed once
// in a cache.
type Object struct {
	metav1.TypeMeta
	// ObjectMeta holds the metadata but for its labels and annotations,
	// which are in labels and annotations (GetLabels, GetAnnotations).
	metav1.ObjectMeta
	labels, annotations pairs
	// rest is the JSON object of every top-level field but apiVersion,
	// kind and metadata (spec, status, data…); nil when there is none.
	rest []byte
}

var _ interface {
	runtime.Object
	metav1.Object
} = (*Object)(nil)

// New makes a compact Object of u, which it does not change.
func New(u *unstructured.Unstructured) (*Object, error) {
	o := &Object{TypeMeta: metav1.TypeMeta{APIVersion: u.GetAPIVersion(), Kind: u.GetKind()}}
	if m, ok := u.Object["metadata"].(map[string]any); ok {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, &o.ObjectMeta); err != nil {
			return nil, fmt.Errorf("metadata of %s %s: %w", u.GetKind(), key(u), err)
		}
	}
	o.compact()
	rest := make(map[string]any, len(u.Object))
	for k, v := range u.Object {
		if k != "apiVersion" && k != "kind" && k != "metadata" {
			rest[k] = v
		}
	}
	if len(rest) > 0 {
		b, err := json.Marshal(rest)
		if err != nil {
			return nil, fmt.Errorf("encode %s %s: %w", u.GetKind(), key(u), err)
		}
		o.rest = b
	}
	return o, nil
}

// compact drops the managedFields, interns the strings many objects share,
// keeps the labels and annotations as pairs and packs the rest.
func (o *Object) compact() {
	o.APIVersion, o.Kind = intern(o.APIVersion), intern(o.Kind)
	o.ManagedFields = nil
	internMeta(&o.ObjectMeta)
	o.SetLabels(o.ObjectMeta.Labels)
	o.SetAnnotations(o.ObjectMeta.Annotations)
	o.pack()
}

// pack makes the strings the object alone holds — its name, generateName,
// UID, resourceVersion and short annotation values — parts of one string, its
// labels and annotations one slice, and its owners' flags the flags every
// object shares. Each was an allocation of its own: eleven for one of uc's
// ConfigMaps, five once packed. The garbage collector marks every live
// allocation on each cycle, so at 10,000 parents and more, where marking
// takes a sixth of uc's CPU, the fewer the cheaper; and each small one
// wasted some of its size class.
func (o *Object) pack() {
	var held [8]*string
	own := append(held[:0], &o.Name, &o.GenerateName, (*string)(&o.UID), &o.ResourceVersion)
	for i := 1; i < len(o.annotations); i += 2 {
		if len(o.annotations[i]) <= maxPackedValue {
			own = append(own, &o.annotations[i])
		}
	}
	size := 0
	for _, s := range own {
		size += len(*s)
	}
	var b strings.Builder
	b.Grow(size)
	for _, s := range own {
		b.WriteString(*s)
	}
	all := b.String()
	for _, s := range own {
		n := len(*s)
		if n > 0 {
			*s, all = all[:n], all[n:]
		}
	}
	for i := range o.OwnerReferences {
		r := &o.OwnerReferences[i]
		r.Controller, r.BlockOwnerDeletion = shared(r.Controller), shared(r.BlockOwnerDeletion)
	}
	if len(o.labels) > 0 && len(o.annotations) > 0 {
		both := append(slices.Clip(o.labels), o.annotations...)
		o.labels, o.annotations = both[:len(o.labels):len(o.labels)], both[len(o.labels):]
	}
}

// maxPackedValue bounds an annotation value packed with the object's name:
// whatever holds on to the name (a queue's key, a log line) holds the pack,
// and a large value (kubectl's last-applied-configuration) keeps an
// allocation of its own.
const maxPackedValue = 128

// yes and no are the flags of every cached object's owner references,
// never changed (nothing changes a cached object).
var yes, no = true, false

// shared is the shared flag of b's value; nil for nil.
func shared(b *bool) *bool {
	switch {
	case b == nil:
		return nil
	case *b:
		return &yes
	}
	return &no
}

// Unstructured returns the whole object, decoded anew: the caller may
// change it.
func (o *Object) Unstructured() (*unstructured.Unstructured, error) {
	var obj map[string]any
	if o.rest != nil {
		// As k8s.io's decoder, client-go's, decodes it: whole numbers are
		// int64.
		var err error
		if obj, err = ujson.DecodeObject(o.rest); err != nil {
			return nil, fmt.Errorf("decode %s %s: %w", o.Kind, o.key(), err)
		}
	}
	if obj == nil {
		obj = map[string]any{}
	}
	return o.withType(obj), nil
}

// withType is obj, the object's fields but its type and metadata, with
// them added.
func (o *Object) withType(obj map[string]any) *unstructured.Unstructured {
	obj["metadata"] = metadata(&o.ObjectMeta, o.labels.unstructured(), o.annotations.unstructured())
	if o.APIVersion != "" {
		obj["apiVersion"] = o.APIVersion
	}
	if o.Kind != "" {
		obj["kind"] = o.Kind
	}
	return &unstructured.Unstructured{Object: obj}
}

// Contains tells whether the object's JSON, but for its type and metadata,
// holds s: a cheap test before decoding it for a field that holds s.
func (o *Object) Contains(s string) bool {
	return bytes.Contains(o.rest, []byte(s))
}

// DeepCopyObject copies o; its JSON, never changed, is shared.
func (o *Object) DeepCopyObject() runtime.Object {
	c := &Object{TypeMeta: o.TypeMeta, labels: slices.Clone(o.labels), annotations: slices.Clone(o.annotations), rest: o.rest}
	o.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	return c
}

// GetLabels returns the object's labels, a map made anew.
func (o *Object) GetLabels() map[string]string { return o.labels.asMap() }

// SetLabels sets the object's labels.
func (o *Object) SetLabels(labels map[string]string) {
	o.labels, o.ObjectMeta.Labels = newPairs(labels, intern), nil
}

// GetAnnotations returns the object's annotations, a map made anew.
func (o *Object) GetAnnotations() map[string]string { return o.annotations.asMap() }

// SetAnnotations sets the object's annotations.
func (o *Object) SetAnnotations(annotations map[string]string) {
	// Their values are mostly one of a kind (hashes, JSON): not interned.
	o.annotations, o.ObjectMeta.Annotations = newPairs(annotations, func(v string) string { return v }), nil
}

// GetObjectMeta is o itself, whose labels and annotations its ObjectMeta
// does not hold.
func (o *Object) GetObjectMeta() metav1.Object { return o }

// Transform is an informer's transform (cache.TransformFunc): it makes the
// cache hold compact Objects in place of unstructured ones. Anything else
// (a tombstone holds an object already transformed) passes as it is.
func Transform(obj any) (any, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return New(u)
	}
	return obj, nil
}

var _ cache.TransformFunc = Transform

// Decode returns the whole object an informer handed out (an Object, a
// tombstone of one, or an unstructured object), decoded anew.
func Decode(obj any) (*unstructured.Unstructured, error) {
	switch o := unwrap(obj).(type) {
	case *Object:
		return o.Unstructured()
	case *unstructured.Unstructured:
		return o, nil
	}
	return nil, fmt.Errorf("not an object of uc's caches: %T", obj)
}

// Meta returns the metadata of an object an informer handed out (an
// Object, a tombstone of one, or any object with metadata); false when it
// has none.
func Meta(obj any) (metav1.Object, bool) {
	m, ok := unwrap(obj).(metav1.Object)
	return m, ok
}

// unwrap returns the object a tombstone holds, or obj.
func unwrap(obj any) any {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}

// internMeta makes the strings many cached objects repeat — the namespace,
// owners (siblings share theirs), finalizers — one string each, shared by
// every object that holds it. (Labels and annotations are interned as
// pairs.)
func internMeta(m *metav1.ObjectMeta) {
	m.Namespace = intern(m.Namespace)
	for i := range m.OwnerReferences {
		r := &m.OwnerReferences[i]
		r.APIVersion, r.Kind, r.Name = intern(r.APIVersion), intern(r.Kind), intern(r.Name)
		r.UID = types.UID(intern(string(r.UID)))
	}
	for i, f := range m.Finalizers {
		m.Finalizers[i] = intern(f)
	}
}

// intern returns the one copy of s that every interned s shares; it is
// freed when nothing holds it any more.
func intern(s string) string {
	if s == "" {
		return ""
	}
	return unique.Make(s).Value()
}

func key(u *unstructured.Unstructured) string {
	if ns := u.GetNamespace(); ns != "" {
		return ns + "/" + u.GetName()
	}
	return u.GetName()
}

func (o *Object) key() string {
	if o.Namespace != "" {
		return o.Namespace + "/" + o.Name
	}
	return o.Name
}
