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
// every NATS subject token, consumer name and key-value key.
const decoratorPrefix = "ucd="

// DecoratorController is the controller name of the UniversalDecorator of
// that name on the bus.
func DecoratorController(decorator string) string { return decoratorPrefix + decorator }

// DecoratorOf returns the UniversalDecorator's name of a decorator's
// controller name, and false for a UniversalController's.
func DecoratorOf(controller string) (string, bool) {
	return strings.CutPrefix(controller, decoratorPrefix)
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
