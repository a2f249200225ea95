// Command tfjob-hook serves the TFJob controller's sync hook on the bus.
package main

import (
	"universalcontroller.dev/uc/examples/tfjob"
	"universalcontroller.dev/uc/sdk/go/hook"
)

func main() { hook.Main(tfjob.Controller, hook.Sync(tfjob.Sync)) }
