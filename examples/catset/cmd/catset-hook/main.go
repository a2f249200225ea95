// Command catset-hook serves the CatSet controller's sync and finalize hooks
// on the bus.
package main

import (
	"universalcontroller.dev/uc/examples/catset"
	"universalcontroller.dev/uc/sdk/go/hook"
)

func main() {
	hook.Main(catset.Controller, hook.Sync(catset.Sync), hook.Finalize(catset.Finalize))
}
