// Command update-strategies-hook serves the StrategyDemo controller's sync
// hook on the bus.
package main

import (
	"universalcontroller.dev/uc/dispatcher/worker"
	updatestrategies "universalcontroller.dev/uc/examples/update-strategies"
)

func main() { worker.Main(updatestrategies.Controller, worker.Sync(updatestrategies.Sync)) }
