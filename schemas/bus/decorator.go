package bus

import (
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// A UniversalDecorator runs through the same pipeline as a
// UniversalController, under a controller name of its own: "ucd=" and the
// decorator's name. Kubernetes names never hold "=", so a decorator's
// subjects, consumers, NATS user and fence keys never meet those of a
// UniversalController, whatever the two are called; and "=" is allowed in
// every NATS subject token, consumer name and key-value key. Metacontroller's
// own objects, served with --metacontroller-api, are named the same way:
// "cc=" and a CompositeController's name, "dc=" and a DecoratorController's.
const (
	decoratorPrefix   = "ucd="
	compositePrefix   = "cc="
	mcDecoratorPrefix = "dc="
)

// DecoratorController is the controller name of the UniversalDecorator of
// that name on the bus.
func DecoratorController(decorator string) string { return decoratorPrefix + decorator }

// CompositeController is the controller name of Metacontroller's
// CompositeController of that name on the bus.
func CompositeController(name string) string { return compositePrefix + name }

// MetacontrollerDecorator is the controller name of Metacontroller's
// DecoratorController of that name on the bus.
func MetacontrollerDecorator(name string) string { return mcDecoratorPrefix + name }

// DecoratorOf returns the decorator's name of a decorator's controller name
// (a UniversalDecorator's or a DecoratorController's), and false for any
// other controller's.
func DecoratorOf(controller string) (string, bool) {
	if name, ok := strings.CutPrefix(controller, decoratorPrefix); ok {
		return name, true
	}
	if name, ok := strings.CutPrefix(controller, mcDecoratorPrefix); ok {
		return name, true
	}
	return "", false
}

// ApplyKey identifies one parent of one controller in the appliers: what
// they apply one at a time, and what the fence remembers. A
// UniversalController's parent is its UID. An object can be decorated by
// several decorators, and be a controller's parent too, each with replies
// of its own, so a decorated object's key also names the decorator: one's
// replies never supersede nor fence out another's.
func (a Address) ApplyKey() types.UID {
	if _, ok := DecoratorOf(a.Controller); !ok {
		return a.ParentUID
	}
	return types.UID(string(a.ParentUID) + "." + Token(a.Controller))
}
