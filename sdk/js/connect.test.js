// Unit tests of the connection flags and variables: node --test
import assert from "node:assert/strict";
import { test } from "node:test";
import { connectOptions, connectionFromArgs } from "./connect.js";

test("the NATS flags and variables of the Go SDK; a flag wins over its variable", () => {
  const conn = connectionFromArgs(["--nats-user", "hook-foo", "--nats-tls-ca=ca.pem"], { NATS_USER: "other", NATS_PASSWORD: "secret", NATS_URL: "nats://bus:4222" });
  assert.deepEqual(conn, { url: "nats://bus:4222", creds: "", user: "hook-foo", password: "secret", token: "", tlsCA: "ca.pem", tlsCert: "", tlsKey: "" });
  assert.equal(connectionFromArgs([], {}).url, "nats://127.0.0.1:4222");
  assert.throws(() => connectionFromArgs(["--nats-usr", "x"], {}), /--nats-usr/);
});

test("the connection's nats.js options, checked", () => {
  assert.deepEqual(connectOptions({ user: "hook-foo", password: "pw", inboxPrefix: "_INBOX.hook_foo" }), { user: "hook-foo", pass: "pw", inboxPrefix: "_INBOX.hook_foo" });
  assert.deepEqual(connectOptions({ token: "t", tlsCA: "ca.pem", tlsCert: "c.pem", tlsKey: "k.pem" }), {
    token: "t",
    tls: { caFile: "ca.pem", certFile: "c.pem", keyFile: "k.pem" },
  });
  for (const [conn, err] of [
    [{ password: "pw" }, /--nats-password needs --nats-user/],
    [{ user: "u", token: "t" }, /give one of/],
    [{ tlsCert: "c.pem" }, /go together/],
  ]) {
    assert.throws(() => connectOptions(conn), err, JSON.stringify(conn));
  }
});
