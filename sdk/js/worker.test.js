// Unit tests of serving a hook, on a fake JetStream: node --test. The e2e
// test TestJSWorkerDelivery (test/e2e) shows the same on uc's real bus.
import assert from "node:assert/strict";
import { test } from "node:test";
import { HEADER_FAILURE_MESSAGE, HEADER_FAILURE_REASON, HookError, Reason, newLogger, serveHook } from "./index.js";
import { FakeJetStream, delivery, eventually } from "./testdata/fake.js";

const REPLIES = "uc.reply.c.sync.0.uid-p";
const FAST = { timeout: "300ms", maxDeliveries: 3, backoffDelay: "200ms", maxBackoffDelay: "1s" };

/** Serves hook as controller c's sync hook on a fake JetStream until the test ends. */
function serving(t, hook) {
  const js = new FakeJetStream();
  const stop = new AbortController();
  const lines = [];
  const served = serveHook(js, "c", "sync", hook, { concurrency: 2, log: newLogger({ level: "debug", write: (l) => lines.push(l) }), signal: stop.signal });
  t.after(async () => {
    stop.abort();
    await served;
  });
  return { js, lines };
}

/** Delivers msg and waits until it is settled; returns how. */
async function deliver(js, msg) {
  js.pending.push(msg);
  await eventually(() => msg.settled.length > 0);
  return msg.settled[0];
}

const dataOf = (published) => JSON.parse(published.body);

test("a reply is published on the reply subject, then the request acked", async (t) => {
  const { js } = serving(t, (request) => ({ status: { name: request.parent.metadata.name }, children: [] }));
  assert.deepEqual(await deliver(js, delivery()), ["ack"]);
  const [reply] = js.on(REPLIES);
  assert.equal(reply.headers.get("ce-type"), "dev.universalcontroller.sync.response");
  assert.equal(reply.headers.get("ce-ucrequestid"), "request-1-1");
  assert.equal(reply.msgID, reply.headers.get("ce-id"));
  assert.deepEqual(dataOf(reply), { status: { name: "p" }, children: [] });
});

test("a failed first delivery is reported at once, and retried after the backoff", async (t) => {
  const { js } = serving(t, () => {
    throw new Error("the hook broke");
  });
  const [how, delay] = await deliver(js, delivery({ delivery: FAST }));
  assert.equal(how, "nak");
  assert.ok(delay >= 100 && delay <= 200, `retry in ${delay}ms, want 200ms less up to half`);
  const [failure] = js.on(REPLIES);
  assert.equal(failure.headers.get("ce-type"), "dev.universalcontroller.sync.failure");
  assert.deepEqual(dataOf(failure), { reason: Reason.WorkerError, message: "the hook broke", deliveries: 1, retrying: true });

  // Later deliveries are not reported until the last.
  assert.equal((await deliver(js, delivery({ delivery: FAST, deliveries: 2 })))[0], "nak");
  assert.equal(js.on(REPLIES).length, 1);
});

test("after the last delivery the request is dead-lettered and the failure published", async (t) => {
  const { js } = serving(t, () => {
    throw new HookError("500 Internal Server Error", { reason: Reason.HTTPError });
  });
  assert.deepEqual(await deliver(js, delivery({ delivery: FAST, deliveries: 3 })), ["term", Reason.HTTPError]);
  const [dead] = js.on("uc.dlq.c.sync.0.uid-p");
  assert.equal(dead.headers.get(HEADER_FAILURE_REASON), Reason.HTTPError);
  assert.equal(dead.headers.get(HEADER_FAILURE_MESSAGE), "500 Internal Server Error");
  assert.equal(dead.headers.get("Nats-Msg-Id"), "request-1"); // the request's: the stream holds it once
  assert.equal(dead.headers.get("ce-uccontroller"), "c");
  assert.equal(dataOf(dead).parent.metadata.name, "p");
  const [failure] = js.on(REPLIES);
  assert.deepEqual(dataOf(failure), { reason: Reason.HTTPError, message: "500 Internal Server Error", deliveries: 3 });
});

test("a retry of a parent whose requests failed before (ucfailures) is tried once: dead-lettered at its first failure", async (t) => {
  const { js } = serving(t, () => {
    throw new HookError("500 Internal Server Error", { reason: Reason.HTTPError });
  });
  assert.deepEqual(await deliver(js, delivery({ delivery: FAST, edit: { "ce-ucfailures": "2" } })), ["term", Reason.HTTPError]);
  const [failure] = js.on(REPLIES);
  assert.equal(failure.headers.get("ce-ucfailures"), "2");
  assert.deepEqual(dataOf(failure), { reason: Reason.HTTPError, message: "500 Internal Server Error", deliveries: 1 });
  assert.equal(js.on("uc.dlq.c.sync.0.uid-p").length, 1);
});

test("a call past the timeout fails with Timeout and is left behind", async (t) => {
  const { js } = serving(t, (_, call) => new Promise((_, reject) => call.signal.addEventListener("abort", () => reject(new Error("aborted")))));
  const started = Date.now();
  assert.deepEqual(await deliver(js, delivery({ delivery: FAST, deliveries: 3 })), ["term", Reason.Timeout]);
  assert.ok(Date.now() - started >= 300);
  assert.equal(dataOf(js.on(REPLIES)[0]).message, "no reply within 300ms");
});

test("a 429 holds the parent back for its Retry-After, and is not reported as a failure", async (t) => {
  let calls = 0;
  const { js } = serving(t, () => {
    calls++;
    throw new HookError("429 Too Many Requests", { reason: Reason.HTTPError, retryAfterSeconds: 2 });
  });
  const [how, delay] = await deliver(js, delivery({ delivery: FAST }));
  assert.equal(how, "nak");
  assert.ok(delay > 1900 && delay <= 2000, `retry in ${delay}ms, want 2s`);
  assert.equal(js.on(REPLIES).length, 0);
  // Another request of the parent waits too, without a call.
  const [how2, delay2] = await deliver(js, delivery({ delivery: FAST, seq: 2 }));
  assert.equal(how2, "nak");
  assert.ok(delay2 > 0 && delay2 <= 2000);
  assert.equal(calls, 1);
});

test("a reply that cannot be encoded fails with InvalidReply", async (t) => {
  const { js } = serving(t, () => ({ status: { big: 1n } }));
  assert.deepEqual(await deliver(js, delivery({ delivery: FAST, deliveries: 3 })), ["term", Reason.InvalidReply]);
  assert.match(dataOf(js.on(REPLIES)[0]).message, /^encode dev\.universalcontroller\.sync\.response: /);
});

test("a request that cannot be decoded is terminated, and the worker goes on", async (t) => {
  const { js, lines } = serving(t, () => ({ children: [] }));
  assert.deepEqual(await deliver(js, delivery({ edit: { "ce-ucname": undefined } })), ["term", undefined]);
  assert.ok(lines.some((l) => l.includes('msg="bad request"')));
  assert.deepEqual(await deliver(js, delivery({ seq: 2 })), ["ack"]);
});
