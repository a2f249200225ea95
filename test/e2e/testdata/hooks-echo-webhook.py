#!/usr/bin/env python3
"""An unchanged Metacontroller sync webhook, on the Python standard library only.

It serves Echo parents: each gets a ConfigMap of its name holding
spec.message, and status.message. It listens on 127.0.0.1 on a free port,
prints "listening on <port>" and serves until killed.
"""
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def sync(request):
    parent = request["parent"]
    message = parent.get("spec", {}).get("message", "")
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": parent["metadata"]["name"]},
        "data": {"message": message, "server": "python"},
    }
    return {"status": {"message": message}, "children": [configmap]}


class Hook(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("Content-Length", 0))
        body = json.dumps(sync(json.loads(self.rfile.read(length)))).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


if __name__ == "__main__":
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    print("listening on", server.server_address[1], flush=True)
    server.serve_forever()
