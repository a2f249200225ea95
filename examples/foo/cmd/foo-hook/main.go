// Command foo-hook serves the Foo controller's sync hook on the bus.
package main

import (
	"universalcontroller.dev/uc/examples/foo"
	hook "universalcontroller.dev/uc/sdk/go"
)

func main() { hook.Main(foo.Controller, hook.Sync(foo.Sync)) }
