// How one hook's requests are delivered — the Go SDK's hook.Policy: how
// long a call may take, how many times a request is tried before it is
// dead-lettered, and how long to wait between two tries. The controller's
// spec.hooks.<hook>.delivery, carried in every request, overrides it.

/** The policy of a hook whose controller sets none (milliseconds). */
export const DEFAULT_POLICY = Object.freeze({ timeout: 10_000, maxDeliveries: 10, backoffDelay: 1000, maxBackoffDelay: 60_000 });

/** The reasons a call fails, as a failure event reports them. */
export const Reason = Object.freeze({
  Timeout: "Timeout",
  HTTPError: "HTTPError",
  InvalidReply: "InvalidReply",
  WorkerError: "WorkerError",
});

/**
 * A failed call that says why: throw one from a hook to name the reason
 * reported on the parent, or to ask for a delay before the next try (a
 * webhook's 429 Retry-After): then no request of the same parent is tried
 * before it has passed. Anything else a hook throws is a WorkerError.
 */
export class HookError extends Error {
  constructor(message, { reason = Reason.WorkerError, retryAfterSeconds = 0, cause } = {}) {
    super(message, { cause });
    this.name = "HookError";
    this.reason = reason;
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

/** The reason of a failed call and the delay it asks for (ms). */
export function reasonOf(err) {
  if (err instanceof HookError) return { reason: err.reason, retryAfter: Math.max(err.retryAfterSeconds, 0) * 1000 };
  return { reason: Reason.WorkerError, retryAfter: 0 };
}

const UNIT_MS = { ns: 1e-6, us: 1e-3, "µs": 1e-3, "μs": 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** Parses a Go duration ("1m30s", "200ms": a metav1.Duration in JSON) into milliseconds, or undefined. */
export function parseDuration(s) {
  const m = /^([-+]?)((?:\d*\.?\d+(?:ns|us|µs|μs|ms|s|m|h))+)$/.exec(s ?? "");
  if (!m) return s === "0" ? 0 : undefined;
  let ms = 0;
  for (const [, n, unit] of m[2].matchAll(/(\d*\.?\d+)(ns|us|µs|μs|ms|s|m|h)/g)) ms += Number(n) * UNIT_MS[unit];
  return m[1] === "-" ? -ms : ms;
}

/** Formats milliseconds as Go prints a duration ("1.5s", "1m0s", "200ms"), so that messages read alike. */
export function formatDuration(ms) {
  if (ms < 1000) return `${ms}ms`;
  const h = Math.floor(ms / 3_600_000);
  const m = Math.floor((ms % 3_600_000) / 60_000);
  const s = `${(ms % 60_000) / 1000}s`;
  if (h > 0) return `${h}h${m}m${s}`;
  return m > 0 ? `${m}m${s}` : s;
}

/** policy overridden by what a hook's spec (spec.hooks.<hook>) sets. */
export function withSpec(policy, hook) {
  const p = { ...policy };
  const set = (field, value) => {
    const ms = parseDuration(value);
    if (ms > 0) p[field] = ms;
  };
  const d = hook?.delivery;
  if (d) {
    set("timeout", d.timeout);
    set("backoffDelay", d.backoffDelay);
    set("maxBackoffDelay", d.maxBackoffDelay);
    if (Number.isInteger(d.maxDeliveries) && d.maxDeliveries > 0) p.maxDeliveries = d.maxDeliveries;
  }
  if (hook?.webhook) set("timeout", hook.webhook.timeout);
  return p;
}

/**
 * policy overridden by the delivery spec of the hook in the request's
 * controller, so that a controller's settings reach every worker of its
 * hooks, however they are deployed.
 */
export const forRequest = (policy, request, hook) => withSpec(policy, request?.controller?.spec?.hooks?.[hook]);

/**
 * policy for a request that is a retry: one whose parent's requests
 * failed `failures` times in a row before it (ucfailures). A retry is tried
 * once — uc's backoff across a parent's requests spaces the calls of a hook
 * that keeps failing — and dead-lettered when it fails.
 */
export const forRetry = (policy, failures) => (Number(failures) > 0 ? { ...policy, maxDeliveries: 1 } : policy);

/**
 * The delay after the n-th delivery (n ≥ 1) failed: backoffDelay·2ⁿ⁻¹,
 * capped at maxBackoffDelay, less a random part of up to its half (jitter)
 * that r, in [0, 1), picks.
 */
export function backoff(policy, n, r = Math.random()) {
  let d = policy.backoffDelay;
  for (let i = 1; i < n && d > 0 && d < policy.maxBackoffDelay; i++) d *= 2;
  d = Math.min(d, policy.maxBackoffDelay);
  return Math.round(d - r * (d / 2));
}
