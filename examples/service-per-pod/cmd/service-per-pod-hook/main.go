// Command service-per-pod-hook serves the service-per-pod decorator's sync
// and finalize hooks on the bus.
package main

import (
	"universalcontroller.dev/uc/dispatcher/worker"
	servicepp "universalcontroller.dev/uc/examples/service-per-pod"
	"universalcontroller.dev/uc/schemas/bus"
)

func main() {
	worker.Main(bus.DecoratorController(servicepp.ServicePerPod),
		worker.DecoratorSync(servicepp.SyncServicePerPod), worker.DecoratorFinalize(servicepp.FinalizeServicePerPod))
}
