// Unit tests of the wire format: node --test
import assert from "node:assert/strict";
import { test } from "node:test";
import { WORKED_EXAMPLE, requestMsg } from "./testdata/fake.js";
import { answer, decode, deadLetterSubject, encode, hookConsumer, hookInbox, metaOf, replySubject, responseType } from "./bus.js";

test("a request decodes, with its parent's meta", () => {
  const request = decode(requestMsg());
  assert.deepEqual(request.data, WORKED_EXAMPLE.body);
  const meta = metaOf(request);
  assert.equal(meta.observation, "1767268800123456789"); // not rounded to a JavaScript number
  assert.equal(replySubject(meta), "uc.reply.foo-controller.sync.24.6f1c2a3e-0b5c-4d2e-9a1f-2b7c8d9e0f11");
  assert.equal(deadLetterSubject(meta), "uc.dlq.foo-controller.sync.24.6f1c2a3e-0b5c-4d2e-9a1f-2b7c8d9e0f11");
});

test("a request that lacks what a reply needs is refused", () => {
  for (const edit of [{ "ce-ucname": undefined }, { "ce-ucparentuid": undefined }, { "ce-ucobservation": "soon" }, { "ce-ucpartition": "" }, { "ce-ucfailures": "two" }]) {
    assert.throws(() => metaOf(decode(requestMsg(undefined, edit))), undefined, JSON.stringify(edit));
  }
  assert.throws(() => decode(requestMsg({ ...WORKED_EXAMPLE, body: "{not json" })));
});

test("a reply copies the request's uc* extensions, names the request and continues its trace", () => {
  const request = decode(requestMsg());
  const reply = encode(answer(request, metaOf(request), responseType("sync"), { status: {}, children: [] }, "/test"));
  const want = Object.entries(WORKED_EXAMPLE.headers).filter(([k]) => k.startsWith("ce-uc"));
  for (const [k, v] of want) assert.equal(reply.headers.get(k), v, k);
  assert.equal(reply.headers.get("ce-ucrequestid"), request.id);
  assert.equal(reply.headers.get("ce-type"), "dev.universalcontroller.sync.response");
  assert.equal(reply.headers.get("ce-specversion"), "1.0");
  assert.equal(reply.headers.get("ce-datacontenttype"), "application/json");
  assert.equal(reply.headers.get("ce-subject"), "default/example-foo");
  const trace = reply.headers.get("ce-traceparent");
  assert.match(trace, /^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-01$/);
  assert.notEqual(trace, WORKED_EXAMPLE.headers["ce-traceparent"]);
  assert.deepEqual(JSON.parse(reply.body), { status: {}, children: [] });
});

test("a request about an older revision, and one of a cluster-scoped parent", () => {
  const older = decode(requestMsg(undefined, { "ce-ucrevision": "abc", "ce-ucrevisions": "def,abc", "ce-ucnamespace": "" }));
  const meta = metaOf(older);
  assert.equal(replySubject(meta), "uc.reply.foo-controller.sync.24.6f1c2a3e-0b5c-4d2e-9a1f-2b7c8d9e0f11_abc");
  const reply = encode(answer(older, meta, responseType("sync"), {}, "/test"));
  assert.equal(reply.headers.get("ce-ucrevision"), "abc");
  assert.equal(reply.headers.get("ce-ucrevisions"), "def,abc");
  assert.equal(reply.headers.get("ce-ucnamespace"), "");
  const latest = metaOf(decode(requestMsg(undefined, { "ce-ucrevision": "def", "ce-ucrevisions": "def,abc" })));
  assert.equal(replySubject(latest), "uc.reply.foo-controller.sync.24.6f1c2a3e-0b5c-4d2e-9a1f-2b7c8d9e0f11");
});

test("names: dots in a controller's name become underscores", () => {
  assert.equal(hookConsumer("foo.example.com", "sync"), "hook_foo_example_com_sync");
  assert.equal(hookInbox("foo.example.com"), "_INBOX.hook_foo_example_com");
});
