// Command pod-name-label-hook serves the pod-name-label decorator's sync
// hook on the bus.
package main

import (
	"universalcontroller.dev/uc/dispatcher/worker"
	servicepp "universalcontroller.dev/uc/examples/service-per-pod"
	"universalcontroller.dev/uc/schemas/bus"
)

func main() {
	worker.Main(bus.DecoratorController(servicepp.PodNameLabel), worker.DecoratorSync(servicepp.SyncPodNameLabel))
}
