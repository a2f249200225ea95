// Command tfjob-hook serves the TFJob controller's sync hook on the bus.
package main

import (
	"universalcontroller.dev/uc/dispatcher/worker"
	"universalcontroller.dev/uc/examples/tfjob"
)

func main() { worker.Main(tfjob.Controller, worker.Sync(tfjob.Sync)) }
