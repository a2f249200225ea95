package hook

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
)

// ExecHookEnv is the environment variable that tells a command uc runs as
// an exec hook (`uc worker -- COMMAND`, `uc render --exec COMMAND`) which
// hook it serves: sync, finalize or customize. A worker whose main is Main
// serves that one request when it is set, so the same program is a
// bus-native worker and an exec hook.
const ExecHookEnv = "UC_EXEC_HOOK"

// serveOne serves the request read from in with the handler of hook and
// writes its reply to out, as an exec hook does.
func serveOne(ctx context.Context, hook string, handlers []Handler, in io.Reader, out io.Writer) error {
	i := slices.IndexFunc(handlers, func(h Handler) bool { return h.Hook() == hook })
	if i < 0 {
		return fmt.Errorf("%s=%s: this worker serves no %s hook", ExecHookEnv, hook, hook)
	}
	data, err := io.ReadAll(in)
	if err != nil {
		return fmt.Errorf("read the request: %w", err)
	}
	reply, err := handlers[i].Handle(ctx, data)
	if err != nil {
		return err
	}
	b, ok := reply.([]byte)
	if !ok {
		if b, err = json.Marshal(reply); err != nil {
			return fmt.Errorf("encode the reply: %w", err)
		}
	}
	_, err = out.Write(b)
	return err
}
