// Serves the CatSet sync hook on uc's bus until SIGINT or SIGTERM. NATS_URL
// says where the bus is; NATS_USER/NATS_PASSWORD, NATS_TOKEN, NATS_CREDS and
// NATS_TLS_* how to log in.
import { authFromEnv, serve } from "./bus.js";
import { sync } from "./catset.js";

const stop = new AbortController();
process.once("SIGTERM", () => stop.abort());
process.once("SIGINT", () => stop.abort());

await serve({
  servers: process.env.NATS_URL ?? "nats://127.0.0.1:4222",
  controller: "catset-controller",
  hook: "sync",
  handle: sync,
  signal: stop.signal,
  auth: authFromEnv(),
});
