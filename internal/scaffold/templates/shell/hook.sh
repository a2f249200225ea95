#!/bin/sh
# The {{.Kind}} controller's sync hook, run by `uc worker` once per request:
# Metacontroller's sync request on stdin, the reply on stdout. POSIX sh and jq.
# Try it alone:  sh hook.sh < request.json (the request uc would send, written
# by uc init with uc render -o request); test it:  sh hook_test.sh
#
# Print debugging output on stderr: uc worker logs it. A non-zero exit status is
# retried, and the {{.Kind}} says Synced=False/HookFailed with the end of stderr.
set -eu

# The desired state of one {{.Kind}}: its status and its children.
# .children holds the observed children, by type and name:
# .children["ConfigMap.v1"]["hello"]. An observed child that is not desired is
# deleted.
exec jq -c '{
  status: {configMaps: (.children["ConfigMap.v1"] | length)},
  children: [{
    apiVersion: "v1", kind: "ConfigMap", metadata: {name: .parent.metadata.name},
    data: {message: (.parent.spec.message // "" | tostring)}
  }]
}'
