// Unit tests of the per-parent queue: node --test
import assert from "node:assert/strict";
import { test } from "node:test";
import { ParentQueue } from "./queue.js";
import { delivery, eventually } from "./testdata/fake.js";

/** A serve function whose calls wait until released. */
function gate() {
  const calls = [];
  const serve = (msg) => new Promise((resolve) => calls.push({ msg, done: resolve }));
  return { calls, serve };
}

test("one call per parent at a time; changes meanwhile give one more call, with the latest", async () => {
  const q = new ParentQueue(4);
  const { calls, serve } = gate();
  const first = delivery({ name: "a", seq: 1 });
  const second = delivery({ name: "a", seq: 2 });
  const third = delivery({ name: "a", seq: 3 });
  const again = delivery({ name: "a", seq: 1, deliveries: 2 }); // the first, delivered again while in service
  q.add(first, serve);
  q.add(again, serve);
  const held = [];
  q.each((m) => held.push(m));
  assert.deepEqual(held, [first]);
  q.add(second, serve);
  q.add(third, serve);
  assert.equal(calls.length, 1);
  assert.deepEqual(second.settled, [["ack"]]); // superseded by the third
  assert.deepEqual(again.settled, []);
  held.length = 0;
  q.each((m) => held.push(m));
  assert.deepEqual(held, [first, third]);
  calls[0].done();
  await eventually(() => calls.length === 2);
  assert.equal(calls[1].msg, third);
  calls[1].done();
  await q.idle();
  assert.equal(q.busy, 0);
});

test("at most concurrency parents at once; free waits for a slot", async () => {
  const q = new ParentQueue(2);
  const { calls, serve } = gate();
  const stop = new AbortController();
  assert.equal(await q.free(stop.signal), 2);
  q.add(delivery({ name: "a" }), serve);
  q.add(delivery({ name: "b", seq: 2 }), serve);
  let free;
  q.free(stop.signal).then((n) => (free = n));
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.equal(free, undefined);
  calls[0].done();
  await eventually(() => free === 1);
  calls[1].done();
  await q.idle();
  stop.abort();
  assert.equal(await q.free(stop.signal), 0);
});
