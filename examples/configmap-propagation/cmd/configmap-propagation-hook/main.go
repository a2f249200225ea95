// Command configmap-propagation-hook serves the ConfigMapPropagation
// controller's customize and sync hooks on the bus.
package main

import (
	"universalcontroller.dev/uc/dispatcher/worker"
	propagation "universalcontroller.dev/uc/examples/configmap-propagation"
)

func main() {
	worker.Main(propagation.Controller, worker.Customize(propagation.Customize), worker.Sync(propagation.Sync))
}
