// The Go SDK's parentQueue: at most one request per parent in service, at
// most `concurrency` parents at once.

/** The per-parent token of a request: the last token of its subject. */
const parentOf = (msg) => msg.subject.slice(msg.subject.lastIndexOf(".") + 1);

/** Whether two deliveries are of the same stream message. */
export const sameMessage = (a, b) => a.info.streamSequence === b.info.streamSequence;

/**
 * Serves at most one request per parent at a time. A request that arrives
 * while its parent is being served waits, and a newer one replaces it: many
 * changes during one hook call give one more call, with the latest state.
 */
export class ParentQueue {
  #concurrency;
  #parents = new Map(); // by parent, while it is being served: {serving, waiting}
  #freed = []; // resolvers of free() and idle() waiting for a slot to be freed

  constructor(concurrency) {
    this.#concurrency = concurrency;
  }

  /** How many parents are being served. */
  get busy() {
    return this.#parents.size;
  }

  /**
   * Serves msg with serve (an async function that never throws), or queues
   * it behind its parent's request in service.
   */
  add(msg, serve) {
    const parent = parentOf(msg);
    const held = this.#parents.get(parent);
    if (held) {
      if (sameMessage(held.serving, msg)) return; // delivered again while in service: served once
      const prev = held.waiting;
      held.waiting = msg;
      if (prev && !sameMessage(prev, msg)) prev.ack(); // superseded: the stream already holds only msg
      return;
    }
    const h = { serving: msg, waiting: null };
    this.#parents.set(parent, h);
    (async () => {
      while (h.serving) {
        await serve(h.serving);
        [h.serving, h.waiting] = [h.waiting, null];
      }
      this.#parents.delete(parent);
      for (const resolve of this.#freed.splice(0)) resolve();
    })();
  }

  /**
   * Waits until a slot is free and returns how many are, or 0 once signal
   * aborts. As many requests as it returned can be added at once.
   */
  async free(signal) {
    while (!signal.aborted) {
      const n = this.#concurrency - this.#parents.size;
      if (n > 0) return n;
      await new Promise((resolve) => {
        const done = () => {
          signal.removeEventListener("abort", done);
          resolve();
        };
        this.#freed.push(done);
        signal.addEventListener("abort", done, { once: true });
      });
    }
    return 0;
  }

  /** Calls fn with every request the queue holds. */
  each(fn) {
    for (const { serving, waiting } of [...this.#parents.values()]) {
      for (const m of [serving, waiting]) if (m) fn(m);
    }
  }

  /** Waits until no request is in service. */
  async idle() {
    while (this.#parents.size > 0) await new Promise((resolve) => this.#freed.push(resolve));
  }
}
