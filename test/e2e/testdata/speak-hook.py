#!/usr/bin/env python3
"""An Echo hook for `uc worker` that speaks back: a ConfigMap holding
spec.message (from server "exec"), the message in the status, and, unless
spec.mode is "quiet", a Ready condition, True unless the message is "down".
spec.mode "warn" adds a Warning Event; "flood" sixteen identical ones, asks
for a resync in half a second, and appends a line to the file named after
the parent in the directory argv[1]; "steal" sets uc's own Synced condition.
"""
import json
import os
import sys

request = json.load(sys.stdin)
name, spec = request["parent"]["metadata"]["name"], request["parent"]["spec"]
mode, message = spec.get("mode", ""), spec.get("message", "")
reply = {
    "status": {"message": message},
    "children": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
                  "data": {"message": message, "server": "exec"}}],
}
if mode != "quiet":
    up = message != "down"
    reply["conditions"] = [{"type": "Ready", "status": "True" if up else "False",
                            "reason": "MessageUp" if up else "MessageDown", "message": "the message is %r" % message}]
if mode == "warn":
    reply["events"] = [{"type": "Warning", "reason": "LowDisk", "message": "the disk of %s is 95%% full" % name}]
elif mode == "flood":
    with open(os.path.join(sys.argv[1], name), "a") as calls:
        calls.write("flood\n")
    reply["events"] = [{"type": "Warning", "reason": "Flood", "message": "the same warning again"}] * 16
    reply["resyncAfterSeconds"] = 0.5
elif mode == "steal":
    reply["conditions"].append({"type": "Synced", "status": "True", "reason": "Mine"})
json.dump(reply, sys.stdout)
