// Package core is uc's decision core: what a controller is and what it
// decides, with no I/O. It holds the controller model (a UniversalController
// or UniversalDecorator resolved: its parent, child and decorated resources,
// their update methods), the claim rule, and the status schema of a parent
// kind. The roles (watcher, applier) and the tools (uc render) take their
// decisions here and do the reading and writing around them; nothing in
// this package talks to the apiserver or to NATS.
package core
