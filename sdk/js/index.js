// @universalcontroller/worker: serve a uc hook from JavaScript on uc's NATS
// JetStream bus, as the Go SDK (sdk/go/hook) does. docs/writing-hooks.md
// says how.
//
//   import { serve } from "@universalcontroller/worker";
//   serve("catset-controller", { sync });
import { connectNATS, connectionFromArgs, usage } from "./connect.js";
import { HOOKS, hookInbox } from "./bus.js";
import { newLogger } from "./log.js";
import { DEFAULT_POLICY } from "./policy.js";
import { serveHook } from "./worker.js";

export { connectionFromArgs } from "./connect.js";
export { decoratorController } from "./bus.js";
export { newLogger } from "./log.js";
export { DEFAULT_POLICY, HookError, Reason } from "./policy.js";
export { HEADER_FAILURE_MESSAGE, HEADER_FAILURE_REASON, serveHook } from "./worker.js";

/**
 * A hook worker's whole main program — the Go SDK's hook.Main: it reads
 * the NATS connection from the command line and the environment
 * (--nats-url or $NATS_URL, default nats://127.0.0.1:4222; --nats-creds,
 * --nats-user, --nats-password, --nats-token, --nats-tls-ca,
 * --nats-tls-cert, --nats-tls-key, each also $NATS_CREDS …), serves the
 * handlers — {sync, finalize, customize}, each a function of the request
 * JSON returning the reply JSON — until SIGINT or SIGTERM, then lets the
 * calls in flight finish and drains. It sets the exit code: 1 when the
 * worker stopped on an error, 2 on a wrong command line.
 *
 * options: concurrency (requests served at once per hook, default 16),
 * timeout (ms, for a controller without delivery.timeout, default 10s),
 * log (a logger as newLogger makes), logLevel (debug, info, warn, error),
 * args and env (default process.argv.slice(2) and process.env).
 */
export async function serve(controller, handlers, { args = process.argv.slice(2), env = process.env, log, logLevel, ...options } = {}) {
  log ??= newLogger({ level: logLevel });
  if (args.includes("-h") || args.includes("--help")) {
    process.stdout.write(`Serves the hooks ${Object.keys(handlers).join(", ")} of ${controller} on uc's bus.\n\nFlags:\n${usage}\n`);
    return;
  }
  let conn;
  try {
    conn = connectionFromArgs(args, env);
  } catch (err) {
    process.stderr.write(`${err.message}\n\nFlags:\n${usage}\n`);
    process.exitCode = 2;
    return;
  }
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  try {
    await run(conn, controller, handlers, { ...options, log, signal: stop.signal });
  } catch (err) {
    log.error("worker stopped", { controller, err });
    process.exitCode = 1;
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
  }
}

/**
 * Connects to NATS and serves the handlers until signal aborts — the Go
 * SDK's hook.Run. conn is a connection as connectionFromArgs returns it.
 * Responses come to the controller's own inbox prefix (_INBOX.hook_<controller>)
 * unless conn.inboxPrefix sets one. It throws when the server refuses an
 * operation: a worker whose NATS user may not serve this controller cannot
 * do its work.
 */
export async function run(conn, controller, handlers, { concurrency = 16, timeout, log = newLogger(), signal = new AbortController().signal } = {}) {
  const hooks = Object.entries(handlers);
  for (const [hook, handle] of hooks) {
    if (!HOOKS.includes(hook)) throw new Error(`unknown hook ${hook}: serve ${HOOKS.join(", ")}`);
    if (typeof handle !== "function") throw new Error(`the ${hook} hook is not a function`);
  }
  if (hooks.length === 0) throw new Error("no hook to serve");
  const policy = timeout > 0 ? { ...DEFAULT_POLICY, timeout } : DEFAULT_POLICY;

  // Ends when signal aborts, or when a hook's serving or the server's
  // refusal stops the worker, with the first error.
  const stopped = new AbortController();
  let failure;
  const stop = (err) => {
    failure ??= err;
    stopped.abort();
  };
  const onAbort = () => stop();
  signal.addEventListener("abort", onAbort, { once: true });
  if (signal.aborted) stop();
  const nc = await connectNATS({ ...conn, inboxPrefix: conn.inboxPrefix || hookInbox(controller) }, `uc-worker-${controller}`, log, (status) => {
    if (status.data === "PERMISSIONS_VIOLATION") {
      stop(new Error(`NATS user ${JSON.stringify(conn.user ?? "")} may not serve controller ${controller}: permissions violation for ${status.permissionContext?.operation ?? "an operation"} on ${status.permissionContext?.subject ?? "a subject"}`));
    }
  });
  try {
    const js = nc.jetstream();
    await Promise.all(
      hooks.map(([hook, handle]) =>
        serveHook(js, controller, hook, handle, { concurrency, policy, log, signal: stopped.signal }).catch((err) => stop(err)),
      ),
    );
  } finally {
    signal.removeEventListener("abort", onAbort);
    await nc.drain();
  }
  if (failure) throw failure;
}
