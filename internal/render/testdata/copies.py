"""The Copies controller's hooks for render's tests: customize selects
ConfigMaps labelled copy=me in namespaces labelled team=a (or, with the
argument "bad", by names and labels at once); sync copies each into the
parent's namespace."""
import json
import os
import sys

request = json.load(sys.stdin)
if os.environ["UC_EXEC_HOOK"] == "customize":
    rule = {"apiVersion": "v1", "resource": "configmaps", "labelSelector": {"matchLabels": {"copy": "me"}},
            "namespaceSelector": {"matchLabels": {"team": "a"}}}
    if sys.argv[1:] == ["bad"]:
        rule["names"] = ["x"]
    json.dump({"relatedResources": [rule]}, sys.stdout)
    sys.exit()
json.dump({"children": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "copy-" + key.replace("/", "-")}, "data": cm.get("data", {})}
                        for key, cm in sorted(request["related"].get("ConfigMap.v1", {}).items())]}, sys.stdout)
