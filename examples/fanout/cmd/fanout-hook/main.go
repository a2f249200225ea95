// Command fanout-hook serves the Fanout controller's sync hook on the bus.
package main

import (
	"universalcontroller.dev/uc/dispatcher/worker"
	"universalcontroller.dev/uc/examples/fanout"
)

func main() { worker.Main(fanout.Controller, worker.Sync(fanout.Sync)) }
