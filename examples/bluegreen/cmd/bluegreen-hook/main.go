// Command bluegreen-hook serves the BlueGreenDeployment controller's sync
// hook on the bus.
package main

import (
	"universalcontroller.dev/uc/examples/bluegreen"
	"universalcontroller.dev/uc/sdk/go/hook"
)

func main() { hook.Main(bluegreen.Controller, hook.Sync(bluegreen.Sync)) }
