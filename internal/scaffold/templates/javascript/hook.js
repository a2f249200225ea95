// The {{.Kind}} controller's sync hook, run by `uc worker` once per request:
// Metacontroller's sync request on stdin, the reply on stdout. Plain Node.js,
// no dependency. Try it alone:  node hook.js < request.json (the request uc
// would send, written by uc init with uc render -o request); test it:
// node --test hook.test.js
//
// Print debugging output on stderr (console.error): uc worker logs it. An
// exception (exit status 1) is retried, and the {{.Kind}} says
// Synced=False/HookFailed with the end of the stack trace.
"use strict";

// The desired state of one {{.Kind}}: its status and its children. children
// holds the observed children, by type and name: children["ConfigMap.v1"]["hello"].
// An observed child that is not desired is deleted.
function sync(parent, children) {
  const configMap = {
    apiVersion: "v1", kind: "ConfigMap", metadata: { name: parent.metadata.name },
    data: { message: String(parent.spec?.message ?? "") },
  };
  const status = { configMaps: Object.keys(children["ConfigMap.v1"]).length };
  return { status, children: [configMap] };
}

const request = JSON.parse(require("node:fs").readFileSync(0, "utf8"));
process.stdout.write(JSON.stringify(sync(request.parent, request.children)));
