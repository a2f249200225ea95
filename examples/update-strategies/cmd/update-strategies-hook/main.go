// Command update-strategies-hook serves the StrategyDemo controller's sync
// hook on the bus.
package main

import (
	updatestrategies "universalcontroller.dev/uc/examples/update-strategies"
	"universalcontroller.dev/uc/sdk/go/hook"
)

func main() { hook.Main(updatestrategies.Controller, hook.Sync(updatestrategies.Sync)) }
