// Command catset-hook serves the CatSet controller's sync and finalize hooks
// on the bus.
package main

import (
	"universalcontroller.dev/uc/dispatcher/worker"
	"universalcontroller.dev/uc/examples/catset"
)

func main() {
	worker.Main(catset.Controller, worker.Sync(catset.Sync), worker.Finalize(catset.Finalize))
}
