// e2e-pool.mjs: our pool CLI presented as the reference's pool module to
// the Node tool's compatibility suite (pool.test.mjs finds it beside
// durable-lease.mjs, or through LEASE_REFERENCE_POOL). Like
// durable-lease.mjs it is an adapter: every method is one run of our
// `pool` binary on the pool file e2e-pool.json (the suite's slot table and
// names: e2e-pool, e2e-slot-<id>, e2e-pool-queue, e2e-lease-granted), and
// every decision (whose turn, which slot, stale waiters, fencing, the
// moving average) is the binary's.
//
// createE2ePool({dir, store, now, reset, provision, notifier, ownerPattern,
// ttlMinutes, env}):
// - dir (or store), now, ownerPattern, env: as createLeaseStore's.
// - reset (or provision): told of each grant-time provision. The adapter
//   gives our CLI a provision command that appends the slot id to a file
//   of its own and, after the run, calls reset(slot) for each line. It
//   observes; it cannot fail a grant (our CLI's provision is a command,
//   and a JavaScript function cannot run inside it): a reset that throws
//   makes the adapter call throw after the grant happened.
// - notifier: told of each async grant's nudge, relayed the same way from
//   our CLI's nudge command. Our CLI also appends the nudge to
//   <pool>/nudges.jsonl, which the Node tool does only without an injected
//   notifier.
// - ttlMinutes: --ttl for the verbs that take a slot.
//
// The queue steps map to our plumbing verbs: enqueue to `pool enqueue`,
// tryGrant to `pool try-grant` (null when our CLI answers saturated or
// queue_entry_lost or granted), heartbeatEntry to `pool heartbeat-entry` (null when
// the entry is gone or granted), request to `pool request --no-waiter` (the caller
// grants it, as with the Node library; our CLI's request would start a
// waiter of its own). Our outputs also carry this CLI's names of some
// fields (requestId, slot, attributes); where such a name holds exactly
// the value of its Node-named twin it is dropped (cli.mjs, nodeNames).
//
// What our CLI cannot express: health and reset callbacks that decide a
// grant's fate (see above), dequeue (no verb takes an entry out without
// journaling a withdrawal), and the asynchronous acquireBlocking.

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { nodeNames, run } from "./cli.mjs";
import { OWNER_PATTERN } from "./durable-lease.mjs";

/** The pool file every call runs with. */
export const POOL_FILE = join(dirname(fileURLToPath(import.meta.url)), "e2e-pool.json");
const definition = JSON.parse(readFileSync(POOL_FILE, "utf8"));

// Relay files live outside the store, so the suite's file-set comparison
// never sees them, and go with this process.
let relayDir = null;
function relayFile(name) {
  if (!relayDir) {
    relayDir = mkdtempSync(join(tmpdir(), "dl-interop-"));
    process.on("exit", () => rmSync(relayDir, { recursive: true, force: true }));
  }
  const file = join(relayDir, `${name}-${Math.random().toString(16).slice(2)}`);
  writeFileSync(file, "");
  return file;
}

/** Read and empty a relay file: the lines our CLI's commands wrote during one run. */
function drain(file) {
  const lines = readFileSync(file, "utf8").split("\n").filter(Boolean);
  writeFileSync(file, "");
  return lines;
}

const source = (pattern) => (pattern instanceof RegExp ? pattern.source : String(pattern));

export function createE2ePool({ store, dir, now, reset, provision, health, notifier, ownerPattern, ttlMinutes, env = process.env } = {}) {
  if (health) throw new Error("health: our pool CLI runs its health check as a command; a JavaScript health check cannot decide its grants");
  const provisioned = reset ?? provision;
  const where = store ?? dir;
  const common = [...(where ? ["--store", where] : []), "--pool", POOL_FILE, "--owner-pattern", source(ownerPattern ?? OWNER_PATTERN)];
  const childEnv = { ...env };
  const provisionFile = provisioned ? relayFile("provision") : null;
  const nudgeFile = notifier ? relayFile("nudge") : null;
  if (provisionFile) {
    childEnv.DL_INTEROP_PROVISIONED = provisionFile;
    common.push("--provision-cmd", `printf '%s\\n' >>"$DL_INTEROP_PROVISIONED"`); // our CLI appends the slot id
  }
  if (nudgeFile) {
    childEnv.DL_INTEROP_NUDGES = nudgeFile;
    common.push("--nudge-cmd", `read -r line; printf '%s\\n' "$line" >>"$DL_INTEROP_NUDGES"`);
  }
  const ttl = ttlMinutes === undefined ? [] : ["--ttl", String(ttlMinutes)];

  /** One run; then the callbacks it fed. */
  function pool(args) {
    let result;
    try {
      result = run("pool", [...args, ...common], { now, env: childEnv });
    } finally {
      if (provisionFile) {
        for (const id of drain(provisionFile)) {
          const slot = definition.slots.find((s) => String(s.id) === id);
          const { id: slotId, kind, ...attrs } = slot ?? { id };
          provisioned({ id: slotId, kind: kind ?? `${definition.kindPrefix}${slotId}`, attrs });
        }
      }
      if (nudgeFile) for (const line of drain(nudgeFile)) notifier(nudgeOf(JSON.parse(line)));
    }
    return result;
  }
  const out = (args) => nodeNames(pool(args).out);
  /** A step that answers null for "not now" refusals, as the Node API's does. */
  const orNull = (args, codes) => {
    const { status, out: o } = pool(args);
    if (status === 0) return nodeNames(o);
    if (codes.includes(o.code)) return null;
    const err = new Error(o.error ?? `pool ${args[0]}: ${o.code}`);
    err.code = o.code;
    err.output = o;
    throw err;
  };
  const statusOf = () => {
    const s = pool(["status"]).out;
    return { ...s, slots: s.slots.map(nodeNames), queue: s.queue.map(nodeNames) };
  };

  return {
    dir: where,
    pool: definition,
    slots: definition.slots,
    ttlMinutes: ttlMinutes ?? definition.ttlMinutes,
    enqueue: ({ owner, session = owner, mode }) => out(["enqueue", "--owner", owner, "--session", session, "--mode", mode]),
    tryGrant: ({ entryId, owner, ttlMinutes: grantTtl }) =>
      orNull(["try-grant", "--request", entryId, "--owner", owner, ...(grantTtl === undefined ? ttl : ["--ttl", String(grantTtl)])], ["saturated", "queue_entry_lost", "granted"]),
    heartbeatEntry: ({ entryId, owner }) => orNull(["heartbeat-entry", "--request", entryId, "--owner", owner], ["queue_entry_lost", "granted"]),
    request: ({ owner, session = owner }) => out(["request", "--owner", owner, "--session", session, "--no-waiter", ...ttl]),
    claim: ({ requestId, owner }) => out(["claim", "--request", requestId, "--owner", owner]),
    acquireNoWait: ({ owner, session = owner, ttlMinutes: grantTtl }) =>
      out(["acquire", "--owner", owner, "--session", session, "--no-wait", ...(grantTtl === undefined ? ttl : ["--ttl", String(grantTtl)])]),
    release: ({ slotId, owner, token, force = false }) =>
      out(["release", "--slot", String(slotId), ...(owner ? ["--owner", owner] : []), ...(token ? ["--token", token] : []), ...(force ? ["--force"] : [])]),
    heartbeat: ({ slotId, owner, token }) => out(["heartbeat", "--slot", String(slotId), "--owner", owner, "--token", token]),
    resetSlot: ({ slotId, owner, token }) => out(["reset", "--slot", String(slotId), "--owner", owner, "--token", token]),
    reprovisionSlot: ({ slotId, owner, ttlMinutes: leaseTtl }) =>
      out(["reprovision", "--slot", String(slotId), "--owner", owner, ...(leaseTtl === undefined ? ttl : ["--ttl", String(leaseTtl)])]),
    healthCheck: ({ slotId }) => out(["health", "--slot", String(slotId)]),
    pump: ({ owner }) => {
      const p = pool(["pump", "--owner", owner]).out;
      return { ...p, status: { ...p.status, slots: p.status.slots.map(nodeNames), queue: p.status.queue.map(nodeNames) } };
    },
    sweep: (owner) => pool(["pump", "--owner", owner]).out,
    poolStatus: statusOf,
    movingAvgMs: () => pool(["status"]).out.movingAvgMs,
  };
}

/** A nudge line of our CLI in the Node API's names. */
function nudgeOf(line) {
  const n = nodeNames(line);
  return n.grant ? { ...n, grant: nodeNames(n.grant) } : n;
}
