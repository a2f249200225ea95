// The CatSet sync hook: a pure function from the observed state of a CatSet
// and its Pods to their desired state (Metacontroller's hook contract).
//
// Pods are named <catset>-<ordinal>. A missing Pod is created only when every
// Pod before it is Ready, so they come up one at a time, in order. Pods past
// spec.replicas go one at a time, the highest ordinal first.

/** @returns {number} the ordinal of a Pod of the CatSet, or -1 */
export function ordinalOf(catset, podName) {
  const prefix = `${catset}-`;
  if (!podName.startsWith(prefix)) return -1;
  const rest = podName.slice(prefix.length);
  return /^(0|[1-9][0-9]*)$/.test(rest) ? Number(rest) : -1;
}

export function isReady(pod) {
  return (pod?.status?.conditions ?? []).some((c) => c.type === "Ready" && c.status === "True");
}

function newPod(catset, ordinal) {
  const name = `${catset.metadata.name}-${ordinal}`;
  const template = catset.spec.template ?? {};
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, labels: { ...(template.metadata?.labels ?? {}) } },
    spec: {
      ...structuredClone(template.spec ?? {}),
      hostname: name,
      ...(catset.spec.serviceName ? { subdomain: catset.spec.serviceName } : {}),
    },
  };
}

/**
 * @param {{parent: object, children: Record<string, Record<string, object>>}} request
 * @returns {{status: object, children: object[]}}
 */
export function sync({ parent, children }) {
  const replicas = parent.spec.replicas ?? 1;
  const observed = new Map();
  for (const pod of Object.values(children["Pod.v1"] ?? {})) {
    const ordinal = ordinalOf(parent.metadata.name, pod.metadata.name);
    if (ordinal >= 0) observed.set(ordinal, pod);
  }

  const desired = [];
  let allReady = true;
  for (let i = 0; i < replicas; i++) {
    if (observed.has(i) || allReady) desired.push(newPod(parent, i));
    allReady &&= isReady(observed.get(i));
  }
  // Keep every surplus Pod but the highest: it goes first.
  const surplus = [...observed.keys()].filter((i) => i >= replicas).sort((a, b) => a - b);
  for (const i of surplus.slice(0, -1)) desired.push(newPod(parent, i));

  const pods = [...observed.values()];
  return {
    status: { replicas: pods.length, readyReplicas: pods.filter(isReady).length },
    children: desired,
  };
}
