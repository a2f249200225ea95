"""The Thing controller's hook for render's tests: a ConfigMap per name of
spec.configMaps and a Secret; the status echoes what the request holds.
Finalizing, it wants nothing and says finalized."""
import json
import sys

request = json.load(sys.stdin)
parent = request["parent"]
name = parent["metadata"]["name"]
if request["finalizing"]:
    json.dump({"children": [], "finalized": True}, sys.stdout)
    sys.exit()
print("working on", name, file=sys.stderr)
children = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "%s-%s" % (name, c)}, "data": {"name": c}}
            for c in parent["spec"].get("configMaps", [])]
children.append({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name + "-token"}, "stringData": {"token": "new"}})
json.dump({
    "status": {"observed": sorted(k for kind in request["children"].values() for k in kind),
               "kinds": sorted(request["children"])},
    "children": children,
}, sys.stdout)
