// The Echo hook (webhook_test.go) on uc's bus, with the JavaScript SDK
// (sdk/js), for the controller named by $CONTROLLER. The parent's
// spec.mode steers it: "" answers; "fail" throws; "hang" never answers;
// "busy" asks the first call of each parent to wait 2s, as a webhook's 429
// with Retry-After: 2. Each call is a JSON line on stdout.
import { HookError, Reason, serve } from "../../../sdk/js/index.js";

const calls = new Map(); // by parent UID

serve(process.env.CONTROLLER, {
  sync({ parent }) {
    const { name, uid, resourceVersion } = parent.metadata;
    const { message = "", mode = "" } = parent.spec ?? {};
    const n = (calls.get(uid) ?? 0) + 1;
    calls.set(uid, n);
    process.stdout.write(`${JSON.stringify({ name, mode, resourceVersion, at: new Date().toISOString() })}\n`);
    switch (mode) {
      case "fail":
        throw new Error("the echo hook broke");
      case "hang":
        return new Promise(() => {});
      case "busy":
        if (n === 1) throw new HookError("429 Too Many Requests", { reason: Reason.HTTPError, retryAfterSeconds: 2 });
    }
    return {
      status: { message },
      children: [{ apiVersion: "v1", kind: "ConfigMap", metadata: { name }, data: { message, server: "js" } }],
    };
  },
});
