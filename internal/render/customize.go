package render

import (
	"context"
	"errors"
	"io"

	"universalcontroller.dev/uc/schemas/hooks"
)

// relatedObjects are the related objects of the parent's sync request.
func (in *inputs) relatedObjects(_ context.Context, _ caller, _ string) (hooks.GroupedObjects, error) {
	if in.ctl.Spec.Hooks.Customize == nil {
		return hooks.GroupedObjects{}, nil
	}
	return nil, errors.New("customize hooks are not supported yet")
}

func renderCustomize(context.Context, *inputs, caller, Options, io.Writer) error {
	return errors.New("customize hooks are not supported yet")
}
