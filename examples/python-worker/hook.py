#!/usr/bin/env python3
"""The Website controller's sync hook, run by `uc worker` once per request:
Metacontroller's request on stdin, the reply on stdout. Standard library only.

A Website serves spec.message from spec.replicas nginx Pods: a ConfigMap holds
the page, a Deployment mounts it; the status counts the Pods that are ready,
and its Available condition says whether they all are. A change of replicas
is told as a Normal Event on the Website.
"""
import json
import sys

request = json.load(sys.stdin)
name, spec = request["parent"]["metadata"]["name"], request["parent"].get("spec", {})
deployment = request["children"]["Deployment.apps/v1"].get(name, {})
labels = {"app.kubernetes.io/name": name}
pod = {
    "containers": [{"name": "nginx", "image": "nginx:1.27",
                    "volumeMounts": [{"name": "page", "mountPath": "/usr/share/nginx/html"}]}],
    "volumes": [{"name": "page", "configMap": {"name": name}}],
}
replicas, ready = spec.get("replicas", 1), deployment.get("status", {}).get("readyReplicas", 0)
events, scaled = [], deployment.get("spec", {}).get("replicas", replicas)
if scaled != replicas:
    events.append({"type": "Normal", "reason": "Scaling", "message": "from %d to %d Pods" % (scaled, replicas)})
json.dump({
    "status": {"readyReplicas": ready},
    "conditions": [{"type": "Available", "status": "True" if ready >= replicas else "False",
                    "reason": "AllReady" if ready >= replicas else "Waiting",
                    "message": "%d of %d Pods ready" % (ready, replicas)}],
    "events": events,
    "children": [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
         "data": {"index.html": "<h1>%s</h1>\n" % spec.get("message", "Hello")}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
         "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                  "template": {"metadata": {"labels": labels}, "spec": pod}}},
    ],
}, sys.stdout)
