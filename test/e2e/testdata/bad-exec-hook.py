#!/usr/bin/env python3
"""An Echo hook for `uc worker` that misbehaves as the Echo's spec.mode says:
"garbage" prints what is not JSON, "exit1" exits 1 saying why on stderr,
"hang" starts a process (its pid is written as a file name into the
directory argv[1]) and never ends, "flood" writes 100 MB to stdout. Any
other mode answers: a ConfigMap holding spec.message, from server "exec".
"""
import json
import os
import subprocess
import sys
import time

request = json.load(sys.stdin)
echo = request["parent"]
mode = echo["spec"].get("mode", "")
if mode == "garbage":
    print("this is not JSON")
elif mode == "exit1":
    sys.exit("the hook broke")
elif mode == "hang":
    child = subprocess.Popen(["sleep", "3600"])
    open(os.path.join(sys.argv[1], str(child.pid)), "w").close()
    time.sleep(3600)
elif mode == "flood":
    chunk = "x" * (1 << 20)
    for _ in range(100):
        sys.stdout.write(chunk)
else:
    json.dump({"children": [{
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": echo["metadata"]["name"]},
        "data": {"message": echo["spec"]["message"], "server": "exec"},
    }]}, sys.stdout)
