// durable-lease.mjs: our lease CLI presented as a reference implementation
// to the Node tool's compatibility suite (durable-lease.test.mjs, run with
// LEASE_REFERENCE_IMPL pointing here). It is an adapter, not an
// implementation: every method is one run of our `lease` binary (see
// cli.mjs), its arguments translated to flags and its JSON returned as the
// Node API shapes it; every decision (held or free, expired, fenced, the
// token check, the journal) is the binary's.
//
// createLeaseStore({dir, store, now, ownerPattern, env}) takes the options
// the suite passes:
// - dir (or store): --store; without one, our CLI resolves the store from
//   env (LEASE_STORE, then the git checkout), as the Node tool does.
// - now: a clock in milliseconds; each call passes its reading to the test
//   build in DL_TEST_NOW_MS. Without it the CLI reads the wall clock.
// - ownerPattern (a RegExp or an anchored string): --owner-pattern;
//   default OWNER_PATTERN below.
// - env: the environment of the runs (default process.env).
//
// What our CLI cannot express, and so this adapter refuses or leaves out:
// - guardWaitMs and guardStaleMs: our CLI has no flags for the guard's
//   bounds (5 s and 60 s, as the Node tool's defaults); passing another
//   value throws.
// - The records come back with their tokens because every reading call
//   passes --reveal-tokens (our CLI shows fingerprints by default).
// - Our outputs' additive fields (the fence printed beside a record) are
//   left out: the Node API has no such field (cli.mjs, nodeNames).
// - A refused reap of a live lease answers code "not_dead" (the Node tool:
//   "held"), and reconcile's reaped entries are {kind, previous} (the Node
//   tool: the whole reap result); docs/PROTOCOL.md §4.3 says why.

import { nodeNames, run } from "./cli.mjs";

/**
 * The owner fence this reference runs with, from DL_INTEROP_OWNER_PATTERN
 * when set. The suite needs a namespaced fence (its reconcile test writes a
 * record of owner "outside-the-fence" that both sides must report as
 * foreign), and derives its owners from the pattern's literal prefix.
 */
export const OWNER_PATTERN = new RegExp(process.env.DL_INTEROP_OWNER_PATTERN || "^interop-[a-z0-9][a-z0-9-]{0,62}$");

/** Our CLI's fixed kind pattern (docs/PROTOCOL.md §1). */
export const KIND_PATTERN = /^[a-z0-9][a-z0-9._-]{0,127}$/;

const source = (pattern) => (pattern instanceof RegExp ? pattern.source : String(pattern));

export function createLeaseStore({ store, dir, now, ownerPattern, env = process.env, guardWaitMs, guardStaleMs } = {}) {
  for (const [name, value, ours] of [["guardWaitMs", guardWaitMs, 5_000], ["guardStaleMs", guardStaleMs, 60_000]]) {
    if (value !== undefined && value !== ours) {
      throw new Error(`${name}: our lease CLI has no setting for it (its bound is ${ours} ms)`);
    }
  }
  const where = store ?? dir;
  const common = [...(where ? ["--store", where] : []), "--owner-pattern", source(ownerPattern ?? OWNER_PATTERN)];
  // Each result in the Node API's shape (nodeNames drops our additive
  // fields, such as the fence beside a record).
  const lease = (args) => nodeNames(run("lease", [...args, ...common], { now, env }).out);

  const payloadFlag = (payload) => (payload === undefined ? [] : ["--payload", JSON.stringify(payload)]);

  return {
    dir: where,
    ownerPattern: new RegExp(source(ownerPattern ?? OWNER_PATTERN)),
    acquire: ({ kind, owner, ttlMinutes, payload }) =>
      lease(["acquire", "--kind", kind, "--owner", owner, "--ttl", String(ttlMinutes), ...payloadFlag(payload), "--reveal-tokens"]),
    heartbeat: ({ kind, owner, token }) => lease(["heartbeat", "--kind", kind, "--owner", owner, "--token", token]),
    release: ({ kind, owner, token, force = false }) =>
      lease(["release", "--kind", kind, ...(owner ? ["--owner", owner] : []), ...(token ? ["--token", token] : []), ...(force ? ["--force"] : []), "--reveal-tokens"]),
    status: ({ kind }) => {
      const { ok, ...status } = lease(["status", "--kind", kind, "--reveal-tokens"]);
      void ok; // the CLI's envelope; the Node API's status has none
      return status;
    },
    reap: ({ kind }) => lease(["reap", "--kind", kind, "--reveal-tokens"]),
    list: () => lease(["list", "--reveal-tokens"]).leases.map(nodeNames),
    reconcile: () => lease(["reconcile", "--reveal-tokens"]),
  };
}
