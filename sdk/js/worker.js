// Serving one hook of one controller on the bus: the Go SDK's hook.Serve,
// request for request. docs/bus.md is the contract.
import { setTimeout as sleep } from "node:timers/promises";
import { headers as natsHeaders } from "nats";
import * as bus from "./bus.js";
import { newLogger } from "./log.js";
import { DEFAULT_POLICY, HookError, Reason, backoff, forRequest, forRetry, formatDuration, reasonOf } from "./policy.js";
import { ParentQueue } from "./queue.js";

/** Bounds one pull: a pull the server lost (it restarted) is replaced within it. */
const PULL_WAIT_MS = 5000;

/** Waits ms, or less when signal aborts. */
const pause = (ms, signal) => sleep(ms, undefined, { signal }).catch(() => {});

/** Whether an error of the JetStream API says the consumer or its stream does not exist. */
const notFound = (err) => [10014, 10059].includes(err?.api_error?.err_code) || /consumer not found|stream not found/i.test(err?.message);

/**
 * Whether an error of a pull says the consumer may be gone: deleted (the
 * server ends the pulls), not found, or silent — no heartbeats, as after a
 * NATS restart that lost it (bus.ConsumerLost), or no one answering.
 */
const consumerLost = (err) => notFound(err) || ["409", "503"].includes(err?.code) || /consumer deleted|no responders|heartbeats? missed/i.test(err?.message);

/** The text of anything thrown. */
const messageOf = (err) => (err instanceof Error ? err.message : String(err));

/**
 * Serves handle as the named controller's hook until signal aborts, then
 * stops taking requests and waits for those in flight. It waits for the
 * hook's consumer, which uc creates when the controller is registered, and,
 * when the consumer is gone (a NATS server restarted without it) or made
 * anew, waits for it again and goes on with the new one.
 *
 * handle(request, call) gets the request's JSON data and returns the reply
 * (or a promise of it); call holds the CloudEvent (event), the parent's
 * meta, a logger naming the parent (log), and a signal that aborts at the
 * call's timeout.
 */
export async function serveHook(js, controller, hook, handle, { concurrency = 16, policy = DEFAULT_POLICY, log = newLogger(), signal = new AbortController().signal } = {}) {
  await new HookServer(js, controller, hook, handle, { concurrency, policy, log, signal }).run();
}

class HookServer {
  constructor(js, controller, hook, handle, { concurrency, policy, log, signal }) {
    Object.assign(this, { js, controller, hook, handle, concurrency, policy, signal });
    this.log = log.with({ controller, hook });
    this.consumerName = bus.hookConsumer(controller, hook);
    this.source = `/universalcontroller/${controller}/js-worker`;
    this.notBefore = new Map(); // parents whose hook asked to wait (429 Retry-After), by UID
    this.progressEvery = bus.ACK_WAIT_MS / 3;
  }

  async run() {
    // One queue across consumers: a request in service when its consumer
    // was made anew is not served twice at once.
    const q = new ParentQueue(this.concurrency);
    const heartbeat = this.#heartbeat(q);
    try {
      for (;;) {
        const cons = await this.#consumer();
        if (!cons) return;
        await this.#consume(cons, q);
        if (this.signal.aborted) return;
        this.log.warn("the hook's consumer is gone or was made anew; waiting for it", { consumer: this.consumerName });
      }
    } finally {
      await q.idle();
      heartbeat.stop();
    }
  }

  /** Waits until the hook's durable consumer exists; null once signal aborts. */
  async #consumer() {
    for (let delay = 100; !this.signal.aborted; delay = Math.min(2 * delay, 5000)) {
      try {
        return await this.js.consumers.get(bus.REQUEST_STREAM, this.consumerName); // bind; uc creates it
      } catch (err) {
        if (notFound(err)) this.log.info("waiting for the controller to be registered", { consumer: this.consumerName });
        // A bus that is down or electing a leader: wait for it.
        else if (!this.signal.aborted) this.log.warn("waiting for the bus", { consumer: this.consumerName, err });
      }
      await pause(delay, this.signal);
    }
    return null;
  }

  /**
   * Serves the consumer's requests until signal aborts, or the consumer is
   * gone or made anew. It pulls only as many requests as it has free slots:
   * a request waits in this process only behind its own parent's call,
   * where the heartbeat covers it, never in a client-side buffer, where
   * nothing would and the consumer's short ack wait would deliver it again.
   */
  async #consume(cons, q) {
    const consuming = new AbortController();
    const stop = () => consuming.abort();
    this.signal.addEventListener("abort", stop, { once: true });
    const { config, created } = await cons.info(true);
    // The consumer's ack wait as it was bound, or uc's if uc shortened it since.
    this.progressEvery = Math.max(Math.min(config.ack_wait / 1e6, bus.ACK_WAIT_MS) / 3, 100);
    const watching = this.#watchConsumer(cons, created, consuming);
    this.log.info("serving");
    const serve = (msg) => this.#serve(msg);
    try {
      for (;;) {
        const n = await q.free(consuming.signal);
        if (n === 0) return;
        try {
          await pull(cons, n, consuming.signal, (msg) => q.add(msg, serve));
        } catch (err) {
          if (consuming.signal.aborted || consumerLost(err)) return; // run waits for the consumer
          // The bus is down or electing a leader: pull again soon.
          this.log.warn("pull requests", { err });
          await pause(1000, consuming.signal);
        }
      }
    } finally {
      consuming.abort();
      this.signal.removeEventListener("abort", stop);
      await watching;
    }
  }

  /**
   * Aborts consuming when the consumer is gone or was made anew, checking
   * every bus.CHECK_EVERY_MS. Nothing tells a client that a NATS server
   * restarted without the consumer: its pulls go unanswered.
   */
  async #watchConsumer(cons, created, consuming) {
    for (;;) {
      await pause(bus.CHECK_EVERY_MS, consuming.signal);
      if (consuming.signal.aborted) return;
      try {
        if ((await cons.info()).created !== created) return consuming.abort();
      } catch (err) {
        if (notFound(err)) return consuming.abort();
      }
    }
  }

  /**
   * Tells JetStream every progressEvery that each request the queue holds
   * is still being worked on, so that a long call, or a request waiting for
   * its parent's call, is not delivered again meanwhile.
   */
  #heartbeat(q) {
    let timer;
    const beat = () => {
      q.each((msg) => {
        try {
          msg.working();
        } catch {
          // The connection is closed: the request comes again.
        }
      });
      timer = setTimeout(beat, this.progressEvery);
    };
    timer = setTimeout(beat, this.progressEvery);
    return { stop: () => clearTimeout(timer) };
  }

  /**
   * Answers one request. A failed call is retried after a backoff; after its
   * last delivery the request is dead-lettered. A request that cannot be
   * decoded is terminated. It never throws.
   */
  async #serve(msg) {
    let request, meta;
    try {
      request = bus.decode(msg);
      meta = bus.metaOf(request);
    } catch (err) {
      this.log.error("bad request", { subject: msg.subject, err });
      msg.term();
      return;
    }
    const log = this.log.with({ parent: bus.parentKey(meta), uid: meta.parentUID, request: request.id });
    try {
      const wait = this.#holdOff(meta.parentUID, 0);
      if (wait > 0) {
        log.debug("hook asked to wait", { retryIn: formatDuration(wait) });
        msg.nak(wait);
        return;
      }
      const policy = forRetry(forRequest(this.policy, request.data, meta.hook), meta.failures);
      try {
        const reply = await this.#call(request, meta, policy.timeout, log);
        await this.#publish(request, meta, bus.responseType(meta.hook), reply);
      } catch (err) {
        await this.#failed(msg, request, meta, policy, err, log);
        return;
      }
      log.debug("replied");
      msg.ack();
    } catch (err) {
      // Settling failed: the connection is closed. The request comes again.
      log.warn("settle the request", { err });
    }
  }

  /** Retries a failed call after the backoff, or dead-letters its request after the last delivery. */
  async #failed(msg, request, meta, policy, err, log) {
    const deliveries = msg.info.deliveryCount || 1;
    const { reason, retryAfter } = reasonOf(err);
    const failure = { reason, message: messageOf(err), deliveries };
    if (deliveries >= policy.maxDeliveries) {
      await this.#deadLetter(msg, request, meta, failure, log);
      return;
    }
    const delay = retryAfter > 0 ? this.#holdOff(meta.parentUID, retryAfter) : backoff(policy, deliveries);
    log.warn("hook failed; will retry", { reason, err: failure.message, delivery: deliveries, retryIn: formatDuration(delay) });
    if (err instanceof Error && !(err instanceof HookError)) log.debug("hook stack", { stack: err.stack });
    if (deliveries === 1 && retryAfter === 0 && meta.revisions.length <= 1) {
      // The parent says so at once, not only when the request is
      // dead-lettered minutes later. A hook asking to wait (429) is busy,
      // not failing; and where the applier waits for the replies about
      // several revisions, a report would stand for one of them.
      try {
        await this.#publish(request, meta, bus.failureType(meta.hook), { ...failure, retrying: true });
      } catch (err) {
        log.warn("report the failure", { err });
      }
    }
    msg.nak(delay);
  }

  /**
   * Records that the parent's hook asked not to be called for ms, when ms
   * is positive, and returns how long it must still wait.
   */
  #holdOff(parentUID, ms) {
    const now = Date.now();
    if (ms > 0) this.notBefore.set(parentUID, now + ms);
    const wait = (this.notBefore.get(parentUID) ?? now) - now;
    if (wait <= 0) this.notBefore.delete(parentUID);
    return Math.max(wait, 0);
  }

  /**
   * Calls the hook with the timeout. A hook that does not return in time is
   * left behind, so it never holds up other requests; its call's signal
   * aborts.
   */
  async #call(request, meta, timeout, log) {
    const expired = new AbortController();
    let timer;
    const late = new Promise((_, reject) => {
      timer = setTimeout(() => {
        expired.abort();
        reject(new HookError(`no reply within ${formatDuration(timeout)}`, { reason: Reason.Timeout }));
      }, timeout);
    });
    try {
      return await Promise.race([Promise.resolve().then(() => this.handle(request.data, { event: request, meta, log, signal: expired.signal })), late]);
    } catch (err) {
      if (expired.signal.aborted && !(err instanceof HookError && err.reason === Reason.Timeout)) {
        throw new HookError(`no reply within ${formatDuration(timeout)}: ${messageOf(err)}`, { reason: Reason.Timeout, cause: err });
      }
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Publishes an event answering request on its reply subject — the hook's
   * reply, or a failure — and waits for the PubAck.
   */
  async #publish(request, meta, type, data) {
    let out;
    try {
      if (data === undefined) throw new Error("the hook returned nothing");
      out = bus.encode(bus.answer(request, meta, type, data, this.source));
    } catch (err) {
      throw new HookError(`encode ${type}: ${messageOf(err)}`, { reason: Reason.InvalidReply, cause: err });
    }
    try {
      await this.js.publish(bus.replySubject(meta), out.body, { headers: out.headers, msgID: out.headers.get("ce-id") });
    } catch (err) {
      throw new Error(`publish ${type}: ${messageOf(err)}`, { cause: err });
    }
  }

  /**
   * Moves a request whose last delivery failed to the dead-letter stream,
   * tells the applier why on the reply subject, and terminates the request.
   * When a publish fails, the request is tried again and dead-lettered
   * again; the dead letter keeps the request's message id, so the stream
   * holds it once.
   */
  async #deadLetter(msg, request, meta, failure, log) {
    log = log.with({ reason: failure.reason, deliveries: failure.deliveries });
    const headers = natsHeaders();
    for (const key of msg.headers?.keys() ?? []) for (const v of msg.headers.values(key)) headers.append(key, v);
    headers.set(HEADER_FAILURE_REASON, oneLine(failure.reason));
    headers.set(HEADER_FAILURE_MESSAGE, oneLine(failure.message));
    try {
      await this.js.publish(bus.deadLetterSubject(meta), msg.data, { headers });
      await this.#publish(request, meta, bus.failureType(meta.hook), failure);
    } catch (err) {
      log.error("dead-letter failed; will retry", { err });
      msg.nak(1000);
      return;
    }
    log.error("hook failed; request dead-lettered", { err: failure.message });
    msg.term(failure.reason);
  }
}

/** Headers a dead letter carries besides the request's own. */
export const HEADER_FAILURE_REASON = "Uc-Failure-Reason";
export const HEADER_FAILURE_MESSAGE = "Uc-Failure-Message";

/** A header value: one line. */
const oneLine = (s) => s.replace(/[\r\n]+/g, " ");

/**
 * Asks the consumer for up to n requests, waiting at most PULL_WAIT_MS,
 * and hands each one to add as it comes.
 */
async function pull(cons, n, signal, add) {
  const batch = await cons.fetch({ max_messages: n, expires: PULL_WAIT_MS });
  const stop = () => batch.stop();
  signal.addEventListener("abort", stop, { once: true });
  try {
    for await (const msg of batch) add(msg);
  } finally {
    signal.removeEventListener("abort", stop);
  }
}
