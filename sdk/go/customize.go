package hook

import (
	"context"
	"encoding/json"
	"fmt"

	"universalcontroller.dev/uc/schemas/hooks"
)

// CustomizeFunc says which related objects a parent's sync requests carry.
type CustomizeFunc func(ctx context.Context, req *hooks.CustomizeRequest) (*hooks.CustomizeResponse, error)

// Customize serves fn as the customize hook.
func Customize(fn CustomizeFunc) Handler { return customizeHandler(fn) }

type customizeHandler CustomizeFunc

func (customizeHandler) Hook() string { return hooks.Customize }

func (h customizeHandler) Handle(ctx context.Context, data []byte) (any, error) {
	var req hooks.CustomizeRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return nil, fmt.Errorf("decode customize request: %w", err)
	}
	return h(ctx, &req)
}
