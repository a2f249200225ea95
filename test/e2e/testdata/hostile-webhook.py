#!/usr/bin/env python3
"""A hostile Metacontroller sync webhook, on the Python standard library only.

It serves Echo parents. spec.mode "" answers as hooks-echo-webhook.py does (a
ConfigMap of the parent's name holding spec.message); every other mode
answers badly, each in its own way (see MODES). It listens on 127.0.0.1 on a
free port, prints "listening on <port>" and serves until killed.
"""
import json
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def configmap(name, message, namespace=None):
    meta = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
            "data": {"message": message, "server": "python"}}


def reply(parent):
    name = parent["metadata"]["name"]
    spec = parent.get("spec", {})
    message, mode = spec.get("message", ""), spec.get("mode", "")
    own = configmap(name, message)
    if mode == "":
        return {"status": {"message": message}, "children": [own]}
    if mode == "undeclared-kind":
        secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "stringData": {"k": "v"}}
        return {"children": [own, secret]}
    if mode == "other-namespace":
        return {"children": [own, configmap(name, message, "kube-system")]}
    if mode == "cluster-scoped":
        role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": "hostile-" + name}, "rules": []}
        return {"children": [own, role]}
    if mode.startswith("take:"):  # another object's name
        return {"children": [own, configmap(mode[len("take:"):], message)]}
    if mode == "invalid-name":
        return {"children": [own, configmap("Not_A_Valid_Name!", message)]}
    if mode == "wrong-types":
        return {"status": 5, "children": "not a list"}
    if mode == "not-json":
        return b"<html>an error page, not JSON</html>"
    if mode == "deep":
        depth = 10000
        return ('{"status": {"deep": ' + '{"a": ' * depth + "1" + "}" * depth + '}, "children": []}').encode()
    if mode == "too-large":
        return {"status": {"padding": "x" * (9 << 20)}, "children": [own]}
    if mode == "many-children":
        return {"children": [configmap("%s-%d" % (name, i), message) for i in range(5000)]}
    if mode == "timeout":
        time.sleep(30)
        return {"children": [own]}
    raise ValueError("unknown mode " + mode)


class Hook(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("Content-Length", 0))
        request = json.loads(self.rfile.read(length))
        if request["parent"].get("spec", {}).get("mode") == "drop":
            self.close_connection = True
            self.connection.close()  # no response at all
            return
        body = reply(request["parent"])
        if not isinstance(body, bytes):
            body = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    print("listening on", server.server_address[1], flush=True)
    server.serve_forever()
