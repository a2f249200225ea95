// Package verdict says what a worker loop (internal/workloop) does with an
// item whose handling failed, as controller-runtime's TerminalError and
// Knative's permanent errors do: the code that knows what an error means
// marks it where it makes it, and the loops read the mark through any
// wrapping, never the error's text.
//
// There are three verdicts. Retry, the default (an error that says nothing),
// is a failure: the item is requeued with the queue's backoff, and the loop
// logs and reports it. Wait is not a failure: the world has to catch up — a
// cache behind, a controller not registered here yet, a write that met a
// newer object, a lease or hold that lapsed — and the item is requeued with
// the same backoff, counted as today (the watcher bounds how long it waits
// for its cache, and the applier reports a conflict that persists, by the
// count), but not logged as an error nor reported. Permanent is a failure
// the same item meets again however often it is retried: it is reported
// once, where the user looks, and not retried.
package verdict

import "errors"

// Verdict is what a loop does with an item whose handling failed.
type Verdict int

const (
	// Retry requeues the item with the queue's backoff and reports the
	// failure. It is the verdict of an error that carries none.
	Retry Verdict = iota
	// Wait requeues the item with the queue's backoff, as Retry does, but
	// it is no failure: logged at debug level, not reported.
	Wait
	// Permanent gives the item up: it is reported once and not retried.
	Permanent
)

func (v Verdict) String() string {
	switch v {
	case Wait:
		return "wait"
	case Permanent:
		return "permanent"
	default:
		return "retry"
	}
}

// Mark returns err marked with the verdict v; nil stays nil. Its message is
// err's. A sentinel marked once (var errX = verdict.Wait.Mark(...)) carries
// its verdict through every fmt.Errorf("%w") that wraps it, and errors.Is
// still finds it.
func (v Verdict) Mark(err error) error {
	if err == nil {
		return nil
	}
	return &marked{v, err}
}

// Of is the verdict on err: the outermost mark errors.As finds in it (so a
// mark wrapped around another overrides it), Retry if none.
func Of(err error) Verdict {
	var m *marked
	if errors.As(err, &m) {
		return m.verdict
	}
	return Retry
}

// marked is an error with a verdict.
type marked struct {
	verdict Verdict
	err     error
}

func (m *marked) Error() string { return m.err.Error() }
func (m *marked) Unwrap() error { return m.err }
