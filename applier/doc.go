// Package applier makes the cluster match the hook replies on the bus. It
// consumes replies, keeps only the newest per parent, applies one parent at a
// time, creates and updates children with server-side apply (one field
// manager per controller), deletes children no longer desired with UID
// preconditions, and writes the parent's status. A reply computed from an
// older observation than one already applied is dropped (the fence), and an
// invalid reply is rejected whole, with a Warning Event and a status
// condition on the parent.
//
// An Applier is three parts, each a type of its own, behind the Applier
// façade (New, Run, Consumers, Rollouts, PartitionParents):
//
//   - intake takes the replies off the bus: it consumes the partitions this
//     replica holds, keeps the newest replies of each parent, queues the
//     parent once they are complete, runs the worker loop (one parent at a
//     time, each apply within a deadline, a panic recovered) and puts a
//     failed batch back for the retry. The replicas share the partitions
//     with internal/shares, whose Holder here (holder) consumes each
//     partition held and hands it to intake; in a sharded installation
//     (Options.Caches) it also starts the partition's caches, which the
//     partition's applies wait for, and stops them when it gives the
//     partition back. Intake alone takes its lock; it hands each batch to
//     the reconciler through parentApplier.
//   - reconciler applies one parent: the registry's controller, the fence,
//     the decoded replies, a rollout's step and its revisions, the plan,
//     the status, the finalizer, the hook's Events; a rejected or failing
//     reply reported on the parent; decorators, dry runs and shadows.
//   - writer makes the planned writes of one reply, never half-applied,
//     and records the Event that names the children it changed.
//
// What to write is decided by the core (package core): decoding and
// checking a reply, planning the writes and a rollout's step, composing the
// status. The applier carries the core's decisions out and reads the live
// objects the core plans against from the registry's caches (core.Cache).
//
//	part        files
//	façade      applier.go (Applier, Options), doc.go
//	intake      intake.go (intake, worker loop), partitions.go (partition,
//	            holder), batch.go (reply, batch)
//	reconciler  reconcile.go (apply, reject, reportFailing), decode.go,
//	            fence.go (and knownParents), status.go, rollout.go (a
//	            rollout's revisions), metacontroller.go, parent.go,
//	            feedback.go, decorator.go, dryrun.go, shadow.go, trace.go,
//	            observe.go
//	writer      write.go (execute, write, ownership, errors), preflight.go,
//	            gate.go, wrote.go
package applier
