// The test of the {{.Kind}} controller's sync hook: it runs hook.js as uc worker
// does, on request.json (the request uc would send about {{.Lower}}.yaml), and
// checks the reply. Run it in this directory:  node --test hook.test.js
"use strict";
const assert = require("node:assert/strict");
const { spawnSync } = require("node:child_process");
const { readFileSync } = require("node:fs");
const path = require("node:path");
const test = require("node:test");

test("the hook's reply to request.json", () => {
  const run = spawnSync(process.execPath, [path.join(__dirname, "hook.js")], {
    input: readFileSync(path.join(__dirname, "request.json")),
    encoding: "utf8",
  });
  assert.equal(run.status, 0, run.stderr);
  const reply = JSON.parse(run.stdout);
  assert.deepEqual(reply.children, [{
    apiVersion: "v1", kind: "ConfigMap", metadata: { name: "{{.Parent}}" },
    data: { message: "{{.Message}}" },
  }]);
  assert.deepEqual(reply.status, { configMaps: 0 });
});
