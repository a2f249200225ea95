// Package finalizecleanup is a finalize hook that cleans up something
// outside the children before the parent goes. A Registration (spec.value)
// puts an entry in an external registry — a key-value store outside the
// cluster, here a NATS JetStream key-value bucket — and owns a ConfigMap
// recording it. Kubernetes' garbage collector deletes the ConfigMap with the
// Registration, but it knows nothing of the registry: the finalize hook
// removes the entry, and says finalized only once the registry no longer
// has it. Until then the Registration stays (uc's finalizer holds it), its
// ConfigMap is still managed (it shows phase Finalizing), and any change to
// it calls the finalize hook again.
package finalizecleanup

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"universalcontroller.dev/uc/sdk/go/hook"
)

// Controller is the name of the UniversalController in controller.yaml.
const Controller = "registration-controller"

// Finalizer is the finalizer uc puts on Registrations, because the
// controller has a finalize hook.
const Finalizer = "universalcontroller.dev/" + Controller

// Bucket is the key-value bucket the hook worker uses as the registry.
const Bucket = "uc_example_registrations"

// GVR is the Registration resource.
var GVR = schema.GroupVersionResource{Group: "examples.universalcontroller.dev", Version: "v1alpha1", Resource: "registrations"}

// The manifests, for programs that install the example.
var (
	//go:embed crd.yaml
	CRD []byte
	//go:embed controller.yaml
	ControllerManifest []byte
)

// Store is the external registry.
type Store interface {
	Put(ctx context.Context, key, value string) error
	// Delete removes the entry; it succeeds when there is none.
	Delete(ctx context.Context, key string) error
	Has(ctx context.Context, key string) (bool, error)
}

// Key is the registry key of a Registration.
func Key(namespace, name string) string { return namespace + "." + name }

// ChildName is the name of a Registration's ConfigMap.
func ChildName(parent string) string { return parent + "-registration" }

// Hooks serve the sync and finalize hooks against a registry.
type Hooks struct {
	Store Store
	// RetryAfterSeconds asks for another finalize call while the entry is
	// still there (0: only a change of the Registration calls it again).
	RetryAfterSeconds float64
}

// Registration is the parent, as far as the hooks read it.
type Registration struct {
	Spec struct {
		Value string `json:"value"`
	} `json:"spec"`
}

// Sync registers the Registration and records it in its ConfigMap.
func (h *Hooks) Sync(ctx context.Context, req *hook.SyncRequest) (*hook.SyncResponse, error) {
	r, err := hook.Decode[Registration](req.Parent)
	if err != nil {
		return nil, err
	}
	key := Key(req.Parent.GetNamespace(), req.Parent.GetName())
	if err := h.Store.Put(ctx, key, r.Spec.Value); err != nil {
		return nil, fmt.Errorf("register %s: %w", key, err)
	}
	return &hook.SyncResponse{
		Status:   map[string]any{"phase": "Registered", "key": key},
		Children: []any{record(req.Parent.GetName(), key, r.Spec.Value, "Registered")},
	}, nil
}

// Finalize removes the registry entry. It says finalized once the registry
// no longer has it; until then it keeps the ConfigMap, showing the phase.
func (h *Hooks) Finalize(ctx context.Context, req *hook.SyncRequest) (*hook.SyncResponse, error) {
	r, err := hook.Decode[Registration](req.Parent)
	if err != nil {
		return nil, err
	}
	key := Key(req.Parent.GetNamespace(), req.Parent.GetName())
	if err := h.Store.Delete(ctx, key); err != nil {
		return nil, fmt.Errorf("unregister %s: %w", key, err)
	}
	has, err := h.Store.Has(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("unregister %s: %w", key, err)
	}
	if !has {
		return &hook.SyncResponse{Status: map[string]any{"phase": "Unregistered", "key": key}, Finalized: true}, nil
	}
	return &hook.SyncResponse{
		Status:             map[string]any{"phase": "Finalizing", "key": key},
		Children:           []any{record(req.Parent.GetName(), key, r.Spec.Value, "Finalizing")},
		ResyncAfterSeconds: h.RetryAfterSeconds,
	}, nil
}

func record(parent, key, value, phase string) hook.Object {
	return hook.Object{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata":   map[string]any{"name": ChildName(parent)},
		"data":       map[string]any{"key": key, "value": value, "phase": phase},
	}
}

// KVStore is a registry in a NATS JetStream key-value bucket.
type KVStore struct{ KV jetstream.KeyValue }

// OpenKVStore opens (or creates) the bucket.
func OpenKVStore(ctx context.Context, js jetstream.JetStream, bucket string) (*KVStore, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket, Description: "the registration example's registry"})
	if err != nil {
		return nil, fmt.Errorf("registry bucket %s: %w", bucket, err)
	}
	return &KVStore{kv}, nil
}

// Put sets the entry.
func (s *KVStore) Put(ctx context.Context, key, value string) error {
	_, err := s.KV.PutString(ctx, key, value)
	return err
}

// Delete removes the entry.
func (s *KVStore) Delete(ctx context.Context, key string) error {
	if err := s.KV.Delete(ctx, key); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return err
	}
	return nil
}

// Has tells whether there is an entry.
func (s *KVStore) Has(ctx context.Context, key string) (bool, error) {
	_, err := s.KV.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return false, nil
	}
	return err == nil, err
}
