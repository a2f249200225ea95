package registry

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// informerSet holds one shared informer per resource type. An informer runs
// while at least one user (a controller, by name) uses its resource, and
// stops when the last one stops using it, so watches follow the resource
// types in use, not the number of controllers.
type informerSet struct {
	dyn dynamic.Interface

	mu    sync.Mutex
	byGVR map[schema.GroupVersionResource]*sharedInformer
}

type sharedInformer struct {
	informers.GenericInformer
	users map[string]bool
	stop  chan struct{} // nil until started
}

func newInformerSet(dyn dynamic.Interface) *informerSet {
	return &informerSet{dyn: dyn, byGVR: map[schema.GroupVersionResource]*sharedInformer{}}
}

// get returns the informer of a resource, making it (not started) if needed.
func (s *informerSet) get(gvr schema.GroupVersionResource) informers.GenericInformer {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.entry(gvr)
}

func (s *informerSet) entry(gvr schema.GroupVersionResource) *sharedInformer {
	e := s.byGVR[gvr]
	if e == nil {
		e = &sharedInformer{
			GenericInformer: dynamicinformer.NewFilteredDynamicInformer(s.dyn, gvr, metav1.NamespaceAll, 0,
				cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, nil),
			users: map[string]bool{},
		}
		s.byGVR[gvr] = e
	}
	return e
}

// use adds resources to what user uses, starting their informers.
func (s *informerSet) use(user string, gvrs ...schema.GroupVersionResource) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, gvr := range gvrs {
		e := s.entry(gvr)
		e.users[user] = true
		if e.stop == nil {
			e.stop = make(chan struct{})
			go e.Informer().Run(e.stop)
		}
	}
}

// only makes user use exactly gvrs (none: user is gone), stopping the
// informers nobody uses any more.
func (s *informerSet) only(user string, gvrs ...schema.GroupVersionResource) {
	s.use(user, gvrs...)
	keep := map[schema.GroupVersionResource]bool{}
	for _, gvr := range gvrs {
		keep[gvr] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for gvr, e := range s.byGVR {
		if keep[gvr] || !e.users[user] {
			continue
		}
		delete(e.users, user)
		if len(e.users) == 0 && e.stop != nil {
			close(e.stop)
			delete(s.byGVR, gvr)
		}
	}
}
