"""The test of the {{.Kind}} controller's sync hook: it runs hook.py as uc worker
does, on request.json (the request uc would send about {{.Lower}}.yaml), and
checks the reply. Run it in this directory:  python3 -m unittest
"""
import json
import pathlib
import subprocess
import sys
import unittest

HERE = pathlib.Path(__file__).parent


class TestSync(unittest.TestCase):
    def test_request(self):
        request = (HERE / "request.json").read_text()
        run = subprocess.run([sys.executable, str(HERE / "hook.py")], input=request,
                             capture_output=True, text=True)
        self.assertEqual(run.returncode, 0, run.stderr)
        reply = json.loads(run.stdout)
        self.assertEqual(reply["children"], [{
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "{{.Parent}}"},
            "data": {"message": "{{.Message}}"},
        }])
        self.assertEqual(reply["status"], {"configMaps": 0})


if __name__ == "__main__":
    unittest.main()
