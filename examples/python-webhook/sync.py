#!/usr/bin/env python3
"""The Greeting controller's sync hook: a Metacontroller webhook on the
Python standard library only, as most Metacontroller users write them.

A Greeting asks for spec.copies ConfigMaps, each holding "Hello, <spec.who>!";
its status says how many exist. Run it with `python3 sync.py [PORT]` (default
8090, not uc run's metrics port 8080; 0 picks a free port); it prints "listening on <port>".
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def sync(parent, children):
    name = parent["metadata"]["name"]
    spec = parent.get("spec", {})
    greeting = "Hello, %s!" % spec.get("who", "world")
    desired = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "%s-%d" % (name, i)},
            "data": {"greeting": greeting},
        }
        for i in range(spec.get("copies", 1))
    ]
    observed = len(children.get("ConfigMap.v1", {}))
    return {"status": {"copies": observed}, "children": desired}


class Hook(BaseHTTPRequestHandler):
    def do_POST(self):
        request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        body = json.dumps(sync(request["parent"], request["children"])).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


if __name__ == "__main__":
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8090
    server = ThreadingHTTPServer(("127.0.0.1", port), Hook)
    print("listening on", server.server_address[1], flush=True)
    server.serve_forever()
