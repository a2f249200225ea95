// Unit tests of the delivery policy: node --test
import assert from "node:assert/strict";
import { test } from "node:test";
import { DEFAULT_POLICY, HookError, Reason, backoff, forRequest, formatDuration, parseDuration, reasonOf } from "./policy.js";

test("backoff doubles per delivery up to the cap, less up to half as jitter (as the Go SDK's)", () => {
  const p = { backoffDelay: 1000, maxBackoffDelay: 10_000 };
  for (const [delivery, jitter, want] of [
    [1, 0, 1000],
    [2, 0, 2000],
    [3, 0, 4000],
    [4, 0, 8000],
    [5, 0, 10_000], // capped
    [500, 0, 10_000],
    [1, 0.5, 750],
    [3, 0.999, 2002],
    [5, 0.5, 7500],
  ]) {
    assert.equal(backoff(p, delivery, jitter), want, `backoff(${delivery}, ${jitter})`);
  }
});

test("the controller's delivery spec in the request overrides the policy", () => {
  const def = DEFAULT_POLICY;
  for (const [name, request, want] of [
    ["no controller", { parent: {} }, def],
    ["not an object", "<html>", def],
    ["no delivery", { controller: { spec: { hooks: { sync: { webhook: { url: "http://x" } } } } } }, def],
    [
      "delivery",
      { controller: { spec: { hooks: { sync: { delivery: { timeout: "2s", maxDeliveries: 3, backoffDelay: "100ms", maxBackoffDelay: "5s" } } } } } },
      { timeout: 2000, maxDeliveries: 3, backoffDelay: 100, maxBackoffDelay: 5000 },
    ],
    ["webhook timeout wins", { controller: { spec: { hooks: { sync: { webhook: { timeout: "3s" }, delivery: { timeout: "2s" } } } } } }, { ...def, timeout: 3000 }],
    ["other hook", { controller: { spec: { hooks: { finalize: { delivery: { maxDeliveries: 1 } } } } } }, def],
  ]) {
    assert.deepEqual(forRequest(def, request, "sync"), want, name);
  }
});

test("Go durations, read and written", () => {
  for (const [s, ms] of [["1m30s", 90_000], ["200ms", 200], ["1.5s", 1500], ["2h0m0s", 7_200_000], ["0", 0], ["-1s", -1000], ["500us", 0.5]]) {
    assert.equal(parseDuration(s), ms, s);
  }
  for (const bad of ["", "1", "s", "1 s", "1d", undefined]) assert.equal(parseDuration(bad), undefined, bad);
  for (const [ms, s] of [[200, "200ms"], [1500, "1.5s"], [60_000, "1m0s"], [90_000, "1m30s"], [7_200_000, "2h0m0s"], [10_000, "10s"]]) {
    assert.equal(formatDuration(ms), s, String(ms));
  }
});

test("a failure's reason: a HookError's, else WorkerError", () => {
  assert.deepEqual(reasonOf(new Error("boom")), { reason: Reason.WorkerError, retryAfter: 0 });
  assert.deepEqual(reasonOf("a string"), { reason: Reason.WorkerError, retryAfter: 0 });
  assert.deepEqual(reasonOf(new HookError("429", { reason: Reason.HTTPError, retryAfterSeconds: 3 })), { reason: Reason.HTTPError, retryAfter: 3000 });
  assert.deepEqual(reasonOf(new HookError("html", { reason: Reason.InvalidReply })), { reason: Reason.InvalidReply, retryAfter: 0 });
});
