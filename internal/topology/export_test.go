package topology

import "context"

// CheckWithoutDisplacing is the check Keep makes when the consumption
// reports its consumer lost.
func CheckWithoutDisplacing(ctx context.Context, k *KeptConsumer) (bool, error) {
	return k.check(ctx, false)
}
