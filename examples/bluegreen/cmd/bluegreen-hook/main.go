// Command bluegreen-hook serves the BlueGreenDeployment controller's sync
// hook on the bus.
package main

import (
	"universalcontroller.dev/uc/dispatcher/worker"
	"universalcontroller.dev/uc/examples/bluegreen"
)

func main() { worker.Main(bluegreen.Controller, worker.Sync(bluegreen.Sync)) }
