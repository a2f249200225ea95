// Fakes of what the unit tests need from NATS.
import { headers as natsHeaders } from "nats";

// The request of docs/bus.md's worked example, as uc writes it.
export const WORKED_EXAMPLE = {
  subject: "uc.req.foo-controller.sync.24.6f1c2a3e-0b5c-4d2e-9a1f-2b7c8d9e0f11",
  headers: {
    "ce-specversion": "1.0",
    "ce-id": "5b0e6a52-6d0f-4c47-9a39-1f8f3c1f0a01",
    "ce-type": "dev.universalcontroller.sync.request",
    "ce-source": "/universalcontroller/foo-controller",
    "ce-subject": "default/example-foo",
    "ce-time": "2026-01-01T12:00:00.123456789Z",
    "ce-datacontenttype": "application/json",
    "ce-traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    "ce-uccontroller": "foo-controller",
    "ce-uchook": "sync",
    "ce-ucparentuid": "6f1c2a3e-0b5c-4d2e-9a1f-2b7c8d9e0f11",
    "ce-ucnamespace": "default",
    "ce-ucname": "example-foo",
    "ce-ucgeneration": "2",
    "ce-ucresourceversion": "48213",
    "ce-ucpartition": "24",
    "ce-ucobservation": "1767268800123456789",
    "Nats-Msg-Id": "5b0e6a52-6d0f-4c47-9a39-1f8f3c1f0a01",
  },
  body: { parent: { metadata: { name: "example-foo" } }, children: { "Deployment.apps/v1": {} } },
};

/** A NATS message of the request, with the headers edited by edit. */
export function requestMsg({ subject, headers, body } = WORKED_EXAMPLE, edit = {}) {
  const h = natsHeaders();
  for (const [k, v] of Object.entries({ ...headers, ...edit })) if (v !== undefined) h.set(k, v);
  return { subject, headers: h, data: new TextEncoder().encode(typeof body === "string" ? body : JSON.stringify(body)) };
}


/**
 * A delivery of a sync request of controller c about the parent name (its
 * UID uid), whose hook's delivery spec is delivery: a JetStream message
 * that records how it is settled (settled) and its progress acks.
 */
export function delivery({ name = "p", uid = `uid-${name}`, seq = 1, deliveries = 1, delivery = {}, edit = {} } = {}) {
  const body = { controller: { spec: { hooks: { sync: { delivery } } } }, parent: { metadata: { name } } };
  const headers = {
    ...WORKED_EXAMPLE.headers,
    "ce-id": `request-${seq}-${deliveries}`,
    "ce-uccontroller": "c",
    "ce-ucparentuid": uid,
    "ce-ucname": name,
    "ce-ucpartition": "0",
    "Nats-Msg-Id": `request-${seq}`,
  };
  const msg = requestMsg({ subject: `uc.req.c.sync.0.${uid}`, headers, body }, edit);
  return Object.assign(msg, {
    info: { streamSequence: seq, deliveryCount: deliveries },
    settled: [],
    progress: 0,
    ack() {
      this.settled.push(["ack"]);
    },
    nak(ms) {
      this.settled.push(["nak", ms]);
    },
    term(reason) {
      this.settled.push(["term", reason]);
    },
    working() {
      this.progress++;
    },
  });
}

/**
 * A JetStream of one hook consumer: fetch hands out the deliveries in
 * pending; publish records what was published.
 */
export class FakeJetStream {
  pending = [];
  published = [];
  fetched = 0;
  consumer = {
    info: async () => ({ config: { ack_wait: 5e9 }, created: "2026-01-01T00:00:00Z" }),
    fetch: async ({ max_messages }) => {
      const batch = this.pending.splice(0, max_messages);
      this.fetched += batch.length;
      return {
        stop() {},
        async *[Symbol.asyncIterator]() {
          if (batch.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
          yield* batch;
        },
      };
    },
  };
  consumers = { get: async () => this.consumer };

  async publish(subject, body, { headers, msgID } = {}) {
    this.published.push({ subject, headers, body: typeof body === "string" ? body : new TextDecoder().decode(body), msgID });
    return { seq: this.published.length };
  }

  /** What was published on subject. */
  on(subject) {
    return this.published.filter((m) => m.subject === subject);
  }
}

/** Waits until ok() is true, for at most ms. */
export async function eventually(ok, ms = 5000) {
  for (const deadline = Date.now() + ms; !ok(); ) {
    if (Date.now() > deadline) throw new Error(`not so within ${ms}ms: ${ok}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
