// A bus-native uc hook worker: serves one hook of one controller from NATS
// JetStream, following uc's wire contract (docs/bus.md). Requests and
// replies are CloudEvents in binary mode: ce-* NATS headers, JSON body.
import { randomBytes, randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { readFileSync } from "node:fs";
import { connect, credsAuthenticator, headers as natsHeaders } from "nats";
import { CloudEvent, HTTP } from "cloudevents";

const REQUEST_STREAM = "UC_REQUESTS";

const token = (controller) => controller.replaceAll(".", "_");

/** The uc* extensions a reply copies from its request. */
const UC_EXTENSIONS = [
  "uccontroller", "uchook", "ucparentuid", "ucnamespace", "ucname",
  "ucgeneration", "ucresourceversion", "ucpartition", "ucobservation",
  "ucrevision", "ucrevisions",
];

/** Decodes a request message into a CloudEvent. */
export function decode(msg) {
  const headers = {};
  for (const key of msg.headers?.keys() ?? []) {
    // NATS carries the data content type as ce-datacontenttype; the HTTP
    // binding reads it from content-type.
    headers[key === "ce-datacontenttype" ? "content-type" : key] = msg.headers.get(key);
  }
  const event = HTTP.toEvent({ headers, body: msg.string() });
  for (const ext of ["uccontroller", "uchook", "ucparentuid", "ucname"]) {
    if (!event[ext]) throw new Error(`request ${event.id} lacks ${ext}`);
  }
  return event;
}

/** The W3C trace context of a call within the request's trace. */
function childTraceparent(parent) {
  const span = randomBytes(8).toString("hex");
  return parent?.length === 55 ? `${parent.slice(0, 36)}${span}${parent.slice(52)}` : `00-${randomBytes(16).toString("hex")}-${span}-01`;
}

/** The reply to a request: the hook's response, with the request's uc* extensions. */
export function replyTo(request, data, source) {
  const extensions = Object.fromEntries(UC_EXTENSIONS.map((e) => [e, request[e] ?? ""]));
  return new CloudEvent({
    id: randomUUID(),
    type: `dev.universalcontroller.${request.uchook}.response`,
    source,
    subject: request.subject,
    time: new Date().toISOString(),
    datacontenttype: "application/json",
    data,
    ...extensions,
    ucrequestid: request.id,
    traceparent: childTraceparent(request.traceparent),
  });
}

/** Encodes a CloudEvent as NATS headers and body, in binary mode. */
export function encode(event) {
  const { headers, body } = HTTP.binary(event);
  const h = natsHeaders();
  for (const [key, value] of Object.entries(headers)) {
    h.set(key === "content-type" ? "ce-datacontenttype" : key, String(value));
  }
  return { headers: h, body };
}

/** The delay before the next try after the n-th failed delivery: 1s, 2s, 4s … 1m. */
const backoff = (n) => Math.min(1000 * 2 ** Math.max(n - 1, 0), 60_000);

/** uc's ack wait, in milliseconds (docs/bus.md): at most this long between two in-progress acks. */
const UC_ACK_WAIT = 5000;

/**
 * Serves handle as the hook of the controller until signal aborts; then it
 * lets the request in progress finish and drains the connection. Requests
 * are pulled one at a time, when the previous one is done, so never two of
 * one parent at once, and none waits in a client-side buffer, where nothing
 * would keep it from being delivered again after the ack wait. The request
 * being served gets an in-progress ack every third of the ack wait.
 */
export async function serve({ servers, controller, hook, handle, signal, auth = {}, log = console }) {
  const nc = await connect({
    servers,
    name: `uc-js-worker-${controller}`,
    maxReconnectAttempts: -1,
    // The controller's NATS user may subscribe only under its own inbox
    // prefix (docs/bus.md, "Permissions").
    inboxPrefix: `_INBOX.hook_${token(controller)}`,
    ...auth,
  });
  const js = nc.jetstream();
  const name = `hook_${token(controller)}_${hook}`;
  const source = `/universalcontroller/${controller}/js-worker`;
  let consumer;
  for (let delay = 100; !consumer && !signal?.aborted; delay = Math.min(2 * delay, 5000)) {
    try {
      consumer = await js.consumers.get(REQUEST_STREAM, name); // bind; uc creates it
    } catch (err) {
      if (!/consumer not found|stream not found/i.test(err.message)) throw err;
      log.info(`waiting for ${controller} to be registered (consumer ${name})`);
      await sleep(delay);
    }
  }
  if (consumer) {
    const { config } = await consumer.info(true);
    const progressEvery = Math.min(Number(config.ack_wait) / 1e6, UC_ACK_WAIT) / 3;
    log.info(`serving the ${hook} hook of ${controller}`);
    while (!signal?.aborted) {
      let msg;
      try {
        // Pulls by the consumer's name: a consumer uc made anew (after a
        // NATS restart) is pulled from without binding again.
        msg = await consumer.next({ expires: 5000 });
      } catch (err) {
        log.warn(`${controller}: pull: ${err.message}`);
        await sleep(1000);
        continue;
      }
      if (!msg) continue;
      const progress = setInterval(() => msg.working(), progressEvery);
      try {
        await serveOne(msg);
      } finally {
        clearInterval(progress);
      }
    }
  }
  await nc.drain();

  async function serveOne(msg) {
    let request;
    try {
      request = decode(msg);
    } catch (err) {
      log.error(`bad request on ${msg.subject}: ${err.message}`);
      msg.term();
      return;
    }
    const parent = request.subject;
    try {
      const reply = replyTo(request, await handle(request.data), source);
      const { headers, body } = encode(reply);
      await js.publish(msg.subject.replace(/^uc\.req\./, "uc.reply."), body, { headers, msgID: reply.id });
      msg.ack();
      log.info(`${controller}: replied for ${parent}`);
    } catch (err) {
      const delay = backoff(msg.info.redeliveryCount);
      log.error(`${controller}: hook failed for ${parent}, retry in ${delay}ms: ${err.stack ?? err}`);
      msg.nak(delay);
    }
  }
}

/**
 * The connection options of the NATS_* environment variables, as the Go
 * SDK's worker.Main reads them: NATS_CREDS, NATS_USER and NATS_PASSWORD,
 * NATS_TOKEN, NATS_TLS_CA, NATS_TLS_CERT and NATS_TLS_KEY.
 */
export function authFromEnv(env = process.env) {
  const auth = {};
  if (env.NATS_CREDS) auth.authenticator = credsAuthenticator(readFileSync(env.NATS_CREDS));
  if (env.NATS_USER) Object.assign(auth, { user: env.NATS_USER, pass: env.NATS_PASSWORD });
  if (env.NATS_TOKEN) auth.token = env.NATS_TOKEN;
  if (env.NATS_TLS_CA || env.NATS_TLS_CERT) {
    auth.tls = { caFile: env.NATS_TLS_CA, certFile: env.NATS_TLS_CERT, keyFile: env.NATS_TLS_KEY };
  }
  return auth;
}
