// Command pod-name-label-hook serves the pod-name-label decorator's sync
// hook on the bus.
package main

import (
	servicepp "universalcontroller.dev/uc/examples/service-per-pod"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/sdk/go/hook"
)

func main() {
	hook.Main(bus.DecoratorController(servicepp.PodNameLabel), hook.DecoratorSync(servicepp.SyncPodNameLabel))
}
