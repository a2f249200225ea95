package hooks

import (
	"errors"

	sigsjson "sigs.k8s.io/json"
)

// DecodeReply decodes a hook's reply into v, case-sensitively as the
// apiserver reads JSON. Strict (a webhook's responseUnMarshallMode, see
// v1alpha1.Hook.StrictReplies), a field v does not have, or a field given
// twice, makes the reply invalid, with an error naming each; loose, they
// are ignored, as in Metacontroller.
func DecodeReply(data []byte, v any, strict bool) error {
	problems, err := sigsjson.UnmarshalStrict(data, v)
	if err != nil {
		return err
	}
	if strict {
		return errors.Join(problems...)
	}
	return nil
}
