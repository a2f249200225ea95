// How a worker reaches NATS — bus.Connection, as the Go SDK uses it: the servers,
// the credentials and TLS, from the same flags and variables.
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { connect, credsAuthenticator } from "nats";

/** The flags of a connection, each with its variable (the Go SDK's hook.Main). */
const FLAGS = {
  url: ["nats-url", "NATS_URL", "NATS server URL (default nats://127.0.0.1:4222)"],
  creds: ["nats-creds", "NATS_CREDS", "NATS credentials file (user JWT and NKey seed)"],
  user: ["nats-user", "NATS_USER", "NATS user name"],
  password: ["nats-password", "NATS_PASSWORD", "NATS password of --nats-user"],
  token: ["nats-token", "NATS_TOKEN", "NATS authentication token"],
  tlsCA: ["nats-tls-ca", "NATS_TLS_CA", "CA certificates (PEM) that verify the NATS servers; enables TLS"],
  tlsCert: ["nats-tls-cert", "NATS_TLS_CERT", "client certificate (PEM) for NATS servers that verify clients; needs --nats-tls-key"],
  tlsKey: ["nats-tls-key", "NATS_TLS_KEY", "private key (PEM) of --nats-tls-cert"],
};

/** The usage of the flags, for --help and a wrong command line. */
export const usage = Object.values(FLAGS)
  .map(([flag, env, help]) => `  --${flag} VALUE\t${help} ($${env})`)
  .join("\n");

/**
 * The connection the command line and the environment give: --nats-url
 * ($NATS_URL), --nats-creds ($NATS_CREDS), --nats-user ($NATS_USER),
 * --nats-password ($NATS_PASSWORD), --nats-token ($NATS_TOKEN),
 * --nats-tls-ca ($NATS_TLS_CA), --nats-tls-cert ($NATS_TLS_CERT),
 * --nats-tls-key ($NATS_TLS_KEY); a flag wins over its variable. It throws
 * on an unknown flag or argument.
 */
export function connectionFromArgs(args = process.argv.slice(2), env = process.env) {
  const { values } = parseArgs({
    args,
    options: Object.fromEntries(Object.values(FLAGS).map(([flag]) => [flag, { type: "string" }])),
  });
  const conn = {};
  for (const [field, [flag, variable]] of Object.entries(FLAGS)) {
    conn[field] = values[flag] ?? env[variable] ?? "";
  }
  conn.url ||= "nats://127.0.0.1:4222";
  return conn;
}

/** The nats.js connection options of the credentials and TLS, checked. */
export function connectOptions(conn) {
  const opts = {};
  let auths = 0;
  if (conn.creds) {
    auths++;
    opts.authenticator = credsAuthenticator(readFileSync(conn.creds));
  }
  if (conn.user || conn.password) {
    auths++;
    if (!conn.user) throw new Error("--nats-password needs --nats-user");
    Object.assign(opts, { user: conn.user, pass: conn.password });
  }
  if (conn.token) {
    auths++;
    opts.token = conn.token;
  }
  if (auths > 1) throw new Error("give one of --nats-creds, --nats-user or --nats-token");
  if (!conn.tlsCert !== !conn.tlsKey) throw new Error("--nats-tls-cert and --nats-tls-key go together");
  if (conn.tlsCA || conn.tlsCert) {
    opts.tls = { caFile: conn.tlsCA || undefined, certFile: conn.tlsCert || undefined, keyFile: conn.tlsKey || undefined };
  }
  if (conn.inboxPrefix) opts.inboxPrefix = conn.inboxPrefix;
  return opts;
}

/**
 * Connects to conn.url as name, reconnecting forever. Errors the server
 * reports on the connection (a permissions violation: the user may not use
 * a subject) are logged, and passed to onError.
 */
export async function connectNATS(conn, name, log, onError) {
  const opts = connectOptions(conn);
  let nc;
  try {
    nc = await connect({ servers: conn.url.split(","), name, maxReconnectAttempts: -1, ...opts });
  } catch (err) {
    throw new Error(`connect to NATS at ${conn.url}: ${err.message}`, { cause: err });
  }
  (async () => {
    for await (const s of nc.status()) {
      if (s.type !== "error") continue;
      log.error("NATS refused an operation", { err: s.data, subject: s.permissionContext?.subject, operation: s.permissionContext?.operation, user: conn.user || undefined });
      onError?.(s);
    }
  })();
  return nc;
}
