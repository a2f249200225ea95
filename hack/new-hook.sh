#!/usr/bin/env bash
# new-hook.sh KIND [DIR]: writes a new controller to start a hook of your own
# from, in DIR (default: the kind in lower case):
#
#   crd.yaml         the parent kind KIND (group $GROUP, version v1, namespaced;
#                    spec and status take any field)
#   controller.yaml  its UniversalController, <kind>-controller: ConfigMaps as
#                    children, a bus-native sync hook
#   hook.py          the sync hook in Python (standard library), for
#                    uc worker --controller <kind>-controller -- python3 hook.py
#   <kind>.yaml      a parent to try it with, "hello"
#   request.json     the sync request uc sends about it, to try the hook alone:
#                    python3 hook.py < request.json
#
#   GROUP    API group of the kind (default: hooks.example.com)
#   PLURAL   its resource name (default: the kind in lower case, plus s)
set -euo pipefail

usage="usage: $0 KIND [DIR]   (KIND in CamelCase, e.g. Greeting)"
kind=${1:?$usage}
[[ $kind =~ ^[A-Z][A-Za-z0-9]*$ ]] || { echo "$usage" >&2; exit 2; }
lower=$(tr '[:upper:]' '[:lower:]' <<<"$kind")
dir=${2:-$lower}
group=${GROUP:-hooks.example.com}
plural=${PLURAL:-${lower}s}
controller=$lower-controller
if [ -e "$dir" ]; then
	echo "$dir exists: give another directory" >&2
	exit 1
fi
mkdir -p "$dir"

cat >"$dir/crd.yaml" <<YAML
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: $plural.$group
spec:
  group: $group
  scope: Namespaced
  names: {kind: $kind, plural: $plural, singular: $lower, listKind: ${kind}List}
  versions:
    - name: v1
      served: true
      storage: true
      subresources: {status: {}}
      schema:
        openAPIV3Schema:
          type: object
          properties:
            # Declare your fields here when they settle; until then any goes.
            spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
            status: {type: object, x-kubernetes-preserve-unknown-fields: true}
YAML

cat >"$dir/controller.yaml" <<YAML
# The $kind controller: its sync hook is bus-native (no webhook), served by
#   uc worker --controller $controller -- python3 $dir/hook.py
apiVersion: universalcontroller.dev/v1alpha1
kind: UniversalController
metadata:
  name: $controller
spec:
  parentResource: {apiVersion: $group/v1, resource: $plural}
  generateSelector: true
  childResources:
    # Every kind the hook may return, and how uc updates it.
    - apiVersion: v1
      resource: configmaps
      updateStrategy: {method: InPlace}
  hooks:
    sync: {}
YAML

cat >"$dir/hook.py" <<PY
#!/usr/bin/env python3
"""The $kind controller's sync hook, run by \`uc worker\` once per request:
Metacontroller's sync request on stdin, the reply on stdout. Standard library
only. Try it alone:  python3 hook.py < request.json

Print debugging output on stderr: uc worker logs it. An exception (exit
status 1) is retried, and the $kind says Synced=False/HookFailed with the end
of the traceback.
"""
import json
import sys


def sync(parent, children):
    """The desired state of one $kind: its status and its children.

    children holds the observed children, by type and name:
    children["ConfigMap.v1"]["hello"]. An observed child that is not desired
    is deleted.
    """
    name = parent["metadata"]["name"]
    spec = parent.get("spec", {})
    configmap = {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
        "data": {"message": str(spec.get("message", ""))},
    }
    status = {"configMaps": len(children["ConfigMap.v1"])}
    return status, [configmap]


request = json.load(sys.stdin)
status, desired = sync(request["parent"], request["children"])
json.dump({"status": status, "children": desired}, sys.stdout)
PY

cat >"$dir/$lower.yaml" <<YAML
apiVersion: $group/v1
kind: $kind
metadata:
  name: hello
spec:
  message: Hello from my own hook
YAML

cat >"$dir/request.json" <<JSON
{
  "controller": {"apiVersion": "universalcontroller.dev/v1alpha1", "kind": "UniversalController", "metadata": {"name": "$controller"}},
  "parent": {"apiVersion": "$group/v1", "kind": "$kind", "metadata": {"name": "hello", "namespace": "default", "uid": "00000000-0000-0000-0000-000000000001", "generation": 1},
             "spec": {"message": "Hello from my own hook"}},
  "children": {"ConfigMap.v1": {}},
  "related": {},
  "finalizing": false
}
JSON

cat <<TXT
wrote $dir/: crd.yaml controller.yaml hook.py $lower.yaml request.json

  python3 $dir/hook.py < $dir/request.json      # the hook alone
  kubectl apply -f $dir/crd.yaml -f $dir/controller.yaml
  uc worker --controller $controller -- python3 $dir/hook.py &
  kubectl apply -f $dir/$lower.yaml
  kubectl get $lower hello -o jsonpath='{.status}'; kubectl get configmap hello -o yaml
TXT
