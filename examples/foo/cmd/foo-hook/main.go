// Command foo-hook serves the Foo controller's sync hook on the bus.
package main

import (
	"universalcontroller.dev/uc/dispatcher/worker"
	"universalcontroller.dev/uc/examples/foo"
)

func main() { worker.Main(foo.Controller, worker.Sync(foo.Sync)) }
