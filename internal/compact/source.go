package compact

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// An informer over client-go's dynamic client receives each object decoded
// into unstructured maps, which Transform then makes compact: every key and
// value an allocation, the metadata converted by reflection and the rest
// encoded again, for maps thrown away at once. At 1,000 parents that was a
// tenth of uc's CPU. A Source's informers decode the apiserver's JSON
// straight into Objects instead: the metadata typed, the rest of the object
// kept as the bytes the apiserver sent.

// Source lists and watches resources for informers whose caches hold
// Objects.
type Source struct {
	client rest.Interface
}

// NewSource is a Source of the apiserver of cfg, over httpClient (one of
// cfg's).
func NewSource(cfg *rest.Config, httpClient *http.Client) (*Source, error) {
	c := rest.CopyConfig(cfg)
	c.AcceptContentTypes, c.ContentType = runtime.ContentTypeJSON, runtime.ContentTypeJSON
	c.NegotiatedSerializer = negotiated{}
	c.GroupVersion = &schema.GroupVersion{} // for serializing the options
	c.APIPath = "/never-sent"               // every request has its absolute path
	client, err := rest.RESTClientForConfigAndClient(c, httpClient)
	if err != nil {
		return nil, fmt.Errorf("a client of compact objects: %w", err)
	}
	return &Source{client: client}, nil
}

// Informer is a shared informer of every object of resource gvr in every
// namespace, tweak (may be nil) setting its list and watch options.
func (s *Source) Informer(gvr schema.GroupVersionResource, tweak func(*metav1.ListOptions), indexers cache.Indexers) cache.SharedIndexInformer {
	path := []string{"api", gvr.Version, gvr.Resource}
	if gvr.Group != "" {
		path = []string{"apis", gvr.Group, gvr.Version, gvr.Resource}
	}
	request := func(opts *metav1.ListOptions) *rest.Request {
		if tweak != nil {
			tweak(opts)
		}
		return s.client.Get().AbsPath(path...).SpecificallyVersionedParams(opts, metav1.ParameterCodec, metav1.SchemeGroupVersion)
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			list := &List{}
			return list, request(&opts).Do(ctx).Into(list)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.Watch = true
			return request(&opts).Watch(ctx)
		},
	}
	return cache.NewSharedIndexInformer(lw, &Object{}, 0, indexers)
}

// List is a list of Objects, as a Source lists them.
type List struct {
	metav1.TypeMeta
	metav1.ListMeta
	Items []*Object
}

// DeepCopyObject copies the list; its Objects are shared, as a cache's are
// never changed.
func (l *List) DeepCopyObject() runtime.Object {
	c := &List{TypeMeta: l.TypeMeta, Items: slices.Clone(l.Items)}
	l.ListMeta.DeepCopyInto(&c.ListMeta)
	return c
}

// FromJSON decodes an object's JSON into an Object.
func FromJSON(data []byte) (*Object, error) {
	fs, err := splitObject(data)
	if err != nil {
		return nil, err
	}
	return fromFields(fs)
}

// The JSON an apiserver sends is split, not scanned through encoding/json:
// json.Unmarshal into json.RawMessages reads every byte of an object twice
// (once to check it, once to decode it) and copies every field; a watch
// event's envelope, the object in it and a list's items were each read so.
// The split reads each byte once and copies nothing; the metadata is then
// decoded, and checked, by encoding/json, and the rest of the object kept
// as it came, decoded when it is read.

// fields are the top-level fields of a JSON object, their values
// undecoded, in the order they came.
type fields []field

// get is the value of the field name; of a field named twice, as
// encoding/json reads it, the last.
func (fs fields) get(name string) ([]byte, bool) {
	for i := len(fs) - 1; i >= 0; i-- {
		if fs[i].name == name {
			return fs[i].value, true
		}
	}
	return nil, false
}

// count is how many times the field name is given.
func (fs fields) count(name string) int {
	n := 0
	for _, f := range fs {
		if f.name == name {
			n++
		}
	}
	return n
}

func fromFields(fs fields) (*Object, error) {
	o := &Object{}
	// The managedFields, which an Object drops, are skipped, not decoded.
	meta := func(data []byte) error { return decodeMeta(data, &o.ObjectMeta) }
	if fs.count("metadata") > 1 {
		// encoding/json merges them, each decoded into the one ObjectMeta.
		meta = func(data []byte) error { return jsonMeta(data, &o.ObjectMeta) }
	}
	if err := unmarshalFields(fs, &o.APIVersion, &o.Kind, meta); err != nil {
		return nil, err
	}
	o.compact()
	rest := make(fields, 0, len(fs))
	size := 1
	for _, f := range fs {
		switch f.name {
		case "apiVersion", "kind", "metadata":
			continue
		}
		rest = append(rest, f)
		size += len(f.name) + len(f.value) + 4
	}
	if len(rest) == 0 {
		return o, nil
	}
	// Sorted by name, as encoding/json writes a map; of a field named
	// twice, the last (the sort is stable).
	slices.SortStableFunc(rest, func(a, b field) int { return strings.Compare(a.name, b.name) })
	b := bytes.NewBuffer(make([]byte, 0, size))
	for i, f := range rest {
		if i+1 < len(rest) && rest[i+1].name == f.name {
			continue
		}
		if b.Len() == 0 {
			b.WriteByte('{')
		} else {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(f.name)
		b.Write(name)
		b.WriteByte(':')
		b.Write(f.value)
	}
	b.WriteByte('}')
	o.rest = b.Bytes()
	return o, nil
}

// skipped is a JSON value left undecoded.
type skipped struct{}

func (*skipped) UnmarshalJSON([]byte) error { return nil }

// unmarshalFields decodes the type and metadata of an object or a list,
// the metadata with meta.
func unmarshalFields(fs fields, apiVersion, kind *string, meta func([]byte) error) error {
	for _, f := range fs {
		var err error
		switch f.name {
		case "apiVersion":
			err = unmarshalString(f.value, apiVersion)
		case "kind":
			err = unmarshalString(f.value, kind)
		case "metadata":
			err = meta(f.value)
		default:
			continue
		}
		if err != nil {
			return fmt.Errorf("decode %s: %w", f.name, err)
		}
	}
	return nil
}

// unmarshalString decodes a JSON string into s, as json.Unmarshal does.
func unmarshalString(value []byte, s *string) error {
	if len(value) < 2 || value[0] != '"' {
		return json.Unmarshal(value, s)
	}
	var err error
	*s, err = unquote(value)
	return err
}

// decodeJSON decodes an object, a list of objects, or the Status of a
// failed request.
func decodeJSON(data []byte) (runtime.Object, error) {
	fs, err := splitObject(data)
	if err != nil {
		return nil, err
	}
	if kind, _ := fs.get("kind"); string(kind) == `"Status"` {
		status := &metav1.Status{}
		return status, json.Unmarshal(data, status)
	}
	items, ok := fs.get("items")
	if !ok {
		return fromFields(fs)
	}
	list := &List{}
	listMeta := func(data []byte) error { return json.Unmarshal(data, &list.ListMeta) }
	if err := unmarshalFields(fs, &list.APIVersion, &list.Kind, listMeta); err != nil {
		return nil, err
	}
	raw, err := splitArray(items)
	if err != nil {
		return nil, fmt.Errorf("decode the items of a %s: %w", list.Kind, err)
	}
	list.Items = make([]*Object, len(raw))
	for i, item := range raw {
		if list.Items[i], err = FromJSON(item); err != nil {
			return nil, fmt.Errorf("decode item %d of a %s: %w", i, list.Kind, err)
		}
	}
	return list, nil
}

// decodeEvent decodes a watch event: its type, and a copy of its object's
// JSON (the stream reads the next event into data's bytes).
func decodeEvent(data []byte, into *metav1.WatchEvent) error {
	fs, err := splitObject(data)
	if err != nil {
		return err
	}
	for _, f := range fs {
		switch f.name {
		case "type":
			err = unmarshalString(f.value, &into.Type)
		case "object":
			if string(f.value) != "null" {
				into.Object.Raw = append(into.Object.Raw[:0], f.value...)
			}
		}
		if err != nil {
			return fmt.Errorf("decode %s: %w", f.name, err)
		}
	}
	return nil
}

// codec decodes the JSON of objects, lists of them, Statuses and watch
// events; it encodes nothing (a Source sends no body).
type codec struct{}

func (codec) Decode(data []byte, _ *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	var out runtime.Object
	var err error
	switch into := into.(type) {
	case *metav1.WatchEvent:
		out, err = into, decodeEvent(data, into)
	case *List:
		out, err = decodeJSON(data)
		if l, ok := out.(*List); ok {
			*into, out = *l, into
		}
	default:
		out, err = decodeJSON(data)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("compact: %w", err)
	}
	gvk := out.GetObjectKind().GroupVersionKind()
	return out, &gvk, nil
}

func (codec) Encode(obj runtime.Object, _ io.Writer) error {
	return fmt.Errorf("compact: cannot encode a %T", obj)
}

func (codec) Identifier() runtime.Identifier { return "compact-json" }

// negotiated offers codec for JSON, the only type a Source accepts.
type negotiated struct{}

func (negotiated) SupportedMediaTypes() []runtime.SerializerInfo {
	return []runtime.SerializerInfo{{
		MediaType: runtime.ContentTypeJSON, MediaTypeType: "application", MediaTypeSubType: "json",
		EncodesAsText: true, Serializer: codec{},
		StreamSerializer: &runtime.StreamSerializerInfo{EncodesAsText: true, Serializer: codec{}, Framer: framer{}},
	}}
}

func (negotiated) EncoderForVersion(e runtime.Encoder, _ runtime.GroupVersioner) runtime.Encoder {
	return e
}

func (negotiated) DecoderToVersion(d runtime.Decoder, _ runtime.GroupVersioner) runtime.Decoder {
	return d
}
