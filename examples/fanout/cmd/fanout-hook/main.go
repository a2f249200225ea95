// Command fanout-hook serves the Fanout controller's sync hook on the bus.
package main

import (
	"universalcontroller.dev/uc/examples/fanout"
	"universalcontroller.dev/uc/sdk/go/hook"
)

func main() { hook.Main(fanout.Controller, hook.Sync(fanout.Sync)) }
