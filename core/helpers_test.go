package core

import "universalcontroller.dev/uc/internal/objtest"

// The objects the core's tests observe, as the roles' tests make them.
var (
	object     = objtest.Object
	claimable  = objtest.Claimable
	rev        = objtest.Rev
	wants      = objtest.Wants
	ready      = objtest.Ready
	testParent = objtest.Parent
)

// fakeLive is a Cache of the live objects it holds.
type fakeLive = objtest.Live
