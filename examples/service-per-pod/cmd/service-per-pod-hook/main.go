// Command service-per-pod-hook serves the service-per-pod decorator's sync
// and finalize hooks on the bus.
package main

import (
	servicepp "universalcontroller.dev/uc/examples/service-per-pod"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/sdk/go/hook"
)

func main() {
	hook.Main(bus.DecoratorController(servicepp.ServicePerPod),
		hook.DecoratorSync(servicepp.SyncServicePerPod), hook.DecoratorFinalize(servicepp.FinalizeServicePerPod))
}
