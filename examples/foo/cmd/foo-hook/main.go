// Command foo-hook serves the Foo controller's sync hook on the bus.
package main

import (
	"universalcontroller.dev/uc/examples/foo"
	"universalcontroller.dev/uc/sdk/go/hook"
)

func main() { hook.Main(foo.Controller, hook.Sync(foo.Sync)) }
