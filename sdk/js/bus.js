// The names of uc's bus and how a CloudEvent travels on it: the JavaScript
// side of the Go package schemas/bus. docs/bus.md is the contract.
import { randomBytes, randomUUID } from "node:crypto";
import { CloudEvent, HTTP } from "cloudevents";
import { headers as natsHeaders } from "nats";

/** The stream of hook requests. */
export const REQUEST_STREAM = "UC_REQUESTS";

/** bus.AckWait: a message not acked within it is delivered again. */
export const ACK_WAIT_MS = 5000;

/** bus.CheckEvery: how often a worker checks that its consumer is still there. */
export const CHECK_EVERY_MS = 5000;

/** The hooks a controller may have. */
export const HOOKS = ["sync", "finalize", "customize"];

/** Makes a name safe as one subject token: dots become underscores. */
export const token = (name) => name.replaceAll(".", "_");

/** The durable consumer every worker of one controller's hook shares. */
export const hookConsumer = (controller, hook) => `hook_${token(controller)}_${hook}`;

/** The inbox prefix the controller's least-privilege NATS user may subscribe to. */
export const hookInbox = (controller) => `_INBOX.hook_${token(controller)}`;

/** The name on the bus of the UniversalDecorator called name. */
export const decoratorController = (name) => `ucd=${name}`;

/** The CloudEvent type of a hook's replies. */
export const responseType = (hook) => `dev.universalcontroller.${hook}.response`;

/** The CloudEvent type of a report that a hook could not be served. */
export const failureType = (hook) => `dev.universalcontroller.${hook}.failure`;

/**
 * What a request says about its parent: its ce-uc* extensions, checked as
 * bus.MetaOf checks them. The integers stay strings: ucobservation does not
 * fit in a JavaScript number.
 */
export function metaOf(event) {
  const ext = (name) => (typeof event[name] === "string" ? event[name] : "");
  const meta = {
    controller: ext("uccontroller"),
    hook: ext("uchook"),
    parentUID: ext("ucparentuid"),
    namespace: ext("ucnamespace"),
    name: ext("ucname"),
    generation: ext("ucgeneration"),
    resourceVersion: ext("ucresourceversion"),
    partition: ext("ucpartition"),
    observation: ext("ucobservation"),
    observed: ext("ucobserved"),
    revisions: ext("ucrevisions") ? ext("ucrevisions").split(",") : [],
    revision: "",
    resource: ext("ucresource"),
    // A retry of a parent whose hook keeps failing: tried once (forRetry).
    failures: ext("ucfailures"),
  };
  if (!meta.controller || !meta.hook || !meta.parentUID || !meta.name) {
    throw new Error(`event ${event.id} lacks uccontroller, uchook, ucparentuid or ucname`);
  }
  if (meta.failures !== "" && !/^\d+$/.test(meta.failures)) throw new Error(`event ${event.id}: ucfailures ${JSON.stringify(meta.failures)} is not an integer`);
  for (const name of ["generation", "partition", "observation"]) {
    if (!/^-?\d+$/.test(meta[name])) throw new Error(`event ${event.id}: uc${name.toLowerCase()} ${JSON.stringify(meta[name])} is not an integer`);
  }
  if (meta.revisions.length > 0 && ext("ucrevision") !== meta.revisions[0]) meta.revision = ext("ucrevision");
  return meta;
}

/** The parent's namespace/name, for logs. */
export const parentKey = (meta) => (meta.namespace ? `${meta.namespace}/${meta.name}` : meta.name);

/** The subject of the parent's messages under prefix (uc.reply, uc.dlq). */
function subject(prefix, meta) {
  const parent = meta.revision ? `${meta.parentUID}_${meta.revision}` : meta.parentUID;
  return `${prefix}.${token(meta.controller)}.${meta.hook}.${meta.partition}.${parent}`;
}

export const replySubject = (meta) => subject("uc.reply", meta);
export const deadLetterSubject = (meta) => subject("uc.dlq", meta);

/** Decodes a NATS message into the CloudEvent it carries (binary mode). */
export function decode(msg) {
  const headers = {};
  for (const key of msg.headers?.keys() ?? []) {
    // NATS carries the data content type as ce-datacontenttype; the HTTP
    // binding reads it from content-type.
    headers[key === "ce-datacontenttype" ? "content-type" : key] = msg.headers.get(key);
  }
  return HTTP.toEvent({ headers, body: new TextDecoder().decode(msg.data) });
}

/** Continues a W3C trace with a new span id; an invalid parent starts a new trace. */
export function childTraceparent(parent) {
  const span = randomBytes(8).toString("hex");
  return parent?.length === 55 ? `${parent.slice(0, 36)}${span}${parent.slice(52)}` : `00-${randomBytes(16).toString("hex")}-${span}-01`;
}

/**
 * An event answering request — a reply or a failure — built as the Go
 * SDK's publish builds it: the request's uc* extensions, ucrequestid, and
 * the request's trace continued.
 */
export function answer(request, meta, type, data, source) {
  const ext = {
    uccontroller: meta.controller,
    uchook: meta.hook,
    ucparentuid: meta.parentUID,
    ucnamespace: meta.namespace,
    ucname: meta.name,
    ucgeneration: meta.generation,
    ucresourceversion: meta.resourceVersion,
    ucpartition: meta.partition,
    ucobservation: meta.observation,
    ucrequestid: request.id,
  };
  if (meta.observed) ext.ucobserved = meta.observed;
  if (meta.revisions.length > 0) {
    ext.ucrevision = meta.revision || meta.revisions[0];
    ext.ucrevisions = meta.revisions.join(",");
  }
  if (meta.resource) ext.ucresource = meta.resource;
  if (meta.failures) ext.ucfailures = meta.failures;
  return new CloudEvent({
    id: randomUUID(),
    type,
    source,
    subject: request.subject,
    time: new Date().toISOString(),
    datacontenttype: "application/json",
    data,
    ...ext,
    traceparent: childTraceparent(request.traceparent),
  });
}

/** Encodes a CloudEvent as NATS headers and body, in binary mode. */
export function encode(event) {
  const { headers, body } = HTTP.binary(event);
  const h = natsHeaders();
  for (const [key, value] of Object.entries(headers)) {
    h.set(key === "content-type" ? "ce-datacontenttype" : key, String(value));
  }
  return { headers: h, body };
}
