#!/usr/bin/env python3
"""The Website controller's sync hook, run by `uc worker` once per request:
Metacontroller's request on stdin, the reply on stdout. Standard library only.

A Website serves spec.message from spec.replicas nginx Pods: a ConfigMap holds
the page, a Deployment mounts it; the status counts the Pods that are ready.
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
json.dump({
    "status": {"readyReplicas": deployment.get("status", {}).get("readyReplicas", 0)},
    "children": [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
         "data": {"index.html": "<h1>%s</h1>\n" % spec.get("message", "Hello")}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
         "spec": {"replicas": spec.get("replicas", 1), "selector": {"matchLabels": labels},
                  "template": {"metadata": {"labels": labels}, "spec": pod}}},
    ],
}, sys.stdout)
