// Command cluster-parent-hook serves the ClusterConfig controller's sync hook
// on the bus.
package main

import (
	"universalcontroller.dev/uc/dispatcher/worker"
	clusterparent "universalcontroller.dev/uc/examples/cluster-parent"
)

func main() { worker.Main(clusterparent.Controller, worker.Sync(clusterparent.Sync)) }
