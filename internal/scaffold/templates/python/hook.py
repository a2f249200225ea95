#!/usr/bin/env python3
"""The {{.Kind}} controller's sync hook, run by `uc worker` once per request:
Metacontroller's sync request on stdin, the reply on stdout. Standard library
only. Try it alone:  python3 hook.py < request.json (the request uc would send,
written by uc init with uc render -o request); test it:  python3 -m unittest

Print debugging output on stderr: uc worker logs it. An exception (exit
status 1) is retried, and the {{.Kind}} says Synced=False/HookFailed with the end
of the traceback.
"""
import json
import sys


def sync(parent, children):
    """The desired state of one {{.Kind}}: its status and its children.

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
