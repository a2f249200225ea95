// Command cluster-parent-hook serves the ClusterConfig controller's sync hook
// on the bus.
package main

import (
	clusterparent "universalcontroller.dev/uc/examples/cluster-parent"
	"universalcontroller.dev/uc/sdk/go/hook"
)

func main() { hook.Main(clusterparent.Controller, hook.Sync(clusterparent.Sync)) }
