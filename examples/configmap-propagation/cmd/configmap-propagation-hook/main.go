// Command configmap-propagation-hook serves the ConfigMapPropagation
// controller's customize and sync hooks on the bus.
package main

import (
	propagation "universalcontroller.dev/uc/examples/configmap-propagation"
	"universalcontroller.dev/uc/sdk/go/hook"
)

func main() {
	hook.Main(propagation.Controller, hook.Customize(propagation.Customize), hook.Sync(propagation.Sync))
}
