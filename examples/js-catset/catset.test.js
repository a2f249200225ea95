// Unit tests of the CatSet hook: node --test
import assert from "node:assert/strict";
import { test } from "node:test";
import { ordinalOf, sync } from "./catset.js";

const catset = (replicas) => ({
  metadata: { name: "web" },
  spec: { replicas, serviceName: "web", template: { metadata: { labels: { app: "web" } }, spec: { containers: [{ name: "c", image: "nginx" }] } } },
});
const pod = (ordinal, ready) => ({
  metadata: { name: `web-${ordinal}` },
  status: { conditions: [{ type: "Ready", status: ready ? "True" : "False" }] },
});
const observe = (...pods) => ({ "Pod.v1": Object.fromEntries(pods.map((p) => [p.metadata.name, p])) });
const names = (reply) => reply.children.map((c) => c.metadata.name);

test("ordinals", () => {
  assert.equal(ordinalOf("web", "web-0"), 0);
  assert.equal(ordinalOf("web", "web-12"), 12);
  for (const name of ["web-", "web-01", "web-x", "webs-1", "other-1"]) assert.equal(ordinalOf("web", name), -1, name);
});

test("scales up one Pod at a time, in order", () => {
  assert.deepEqual(names(sync({ parent: catset(3), children: observe() })), ["web-0"]);
  assert.deepEqual(names(sync({ parent: catset(3), children: observe(pod(0, false)) })), ["web-0"]);
  assert.deepEqual(names(sync({ parent: catset(3), children: observe(pod(0, true)) })), ["web-0", "web-1"]);
  assert.deepEqual(names(sync({ parent: catset(3), children: observe(pod(0, true), pod(1, true)) })), ["web-0", "web-1", "web-2"]);
});

test("keeps a Pod after one that is not Ready", () => {
  assert.deepEqual(names(sync({ parent: catset(3), children: observe(pod(0, true), pod(1, false), pod(2, true)) })), ["web-0", "web-1", "web-2"]);
});

test("scales down from the highest ordinal, one at a time", () => {
  const reply = sync({ parent: catset(1), children: observe(pod(0, true), pod(1, true), pod(2, true)) });
  assert.deepEqual(names(reply), ["web-0", "web-1"]);
  assert.deepEqual(reply.status, { replicas: 3, readyReplicas: 3 });
});

test("Pods get the template, a stable hostname and the service's subdomain", () => {
  const [p] = sync({ parent: catset(1), children: observe() }).children;
  assert.deepEqual(p.metadata.labels, { app: "web" });
  assert.equal(p.spec.hostname, "web-0");
  assert.equal(p.spec.subdomain, "web");
  assert.equal(p.spec.containers[0].image, "nginx");
});
