// cli.mjs: how the adapter runs our binaries. Each adapter call is one run
// of `lease` or `pool`, and the run's JSON is the answer; nothing is
// decided here.
//
// The binaries come from the directory named by DL_INTEROP_BIN and must be
// test builds (`go build -tags dltestclock`), the only builds that honour
// DL_TEST_NOW_MS: a call made with a clock passes its reading there, so the
// suite's injected clock drives our CLIs too. interop/node/run.sh builds
// them and sets the variable.

import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { constants } from "node:os";
import { join } from "node:path";

export const BIN_ENV = "DL_INTEROP_BIN";
export const NOW_ENV = "DL_TEST_NOW_MS";

/** Binaries already checked to be test builds. */
const checked = new Set();

/**
 * The path of one of our binaries; with testBuild (calls that may pass a
 * clock), checked once to be a test build.
 */
export function binary(name, { testBuild = true } = {}) {
  const dir = process.env[BIN_ENV];
  if (!dir) {
    throw new Error(`${BIN_ENV} is not set: it must name a directory holding lease and pool built with -tags dltestclock (interop/node/run.sh builds them)`);
  }
  const path = join(dir, name);
  if (!existsSync(path)) throw new Error(`${BIN_ENV}=${dir} holds no ${name} binary`);
  if (testBuild && !checked.has(path)) {
    const res = spawnSync(path, ["--version"], { encoding: "utf8" });
    if (res.status !== 0 || !/\btags[ =]\S*\bdltestclock\b/.test(res.stdout)) {
      throw new Error(`${path} is not a test build (its --version says ${JSON.stringify(res.stdout.trim())}): build it with -tags dltestclock, or it ignores ${NOW_ENV}`);
    }
    checked.add(path);
  }
  return path;
}

/** An error our CLI reported with exit status 2 (usage) or 3 (internal). */
export class CliError extends Error {
  constructor(name, args, status, out, stderr) {
    super(`${name} ${args[0]}: ${out?.error || stderr.trim() || `exit status ${status}`}`);
    this.name = status === 2 ? "LeaseUsageError" : "CliError";
    this.code = out?.code;
    this.exitStatus = status;
    this.output = out;
  }
}

/**
 * Run `name args...` once and return {status, out}: the exit status (0
 * success, 1 refusal) and the one JSON object it printed. Exit status 2 or
 * 3 throws a CliError. With `now`, its reading (milliseconds since the
 * epoch, as the suite's clock gives it) is passed in DL_TEST_NOW_MS;
 * without, the variable is removed and the CLI reads the wall clock.
 */
export function run(name, args, { now, env = process.env } = {}) {
  const childEnv = { ...env };
  delete childEnv[NOW_ENV];
  if (now) childEnv[NOW_ENV] = String(now());
  const res = spawnSync(binary(name), args, { env: childEnv, encoding: "utf8", maxBuffer: 64 << 20 });
  if (res.error) throw res.error;
  let out = null;
  try {
    out = JSON.parse(res.stdout);
  } catch {
    /* reported below */
  }
  if (out === null || typeof out !== "object" || Array.isArray(out)) {
    throw new CliError(name, args, res.status, null, `printed no JSON object (exit status ${res.status}): ${res.stdout}${res.stderr}`);
  }
  if (res.status === 0 || res.status === 1) return { status: res.status, out };
  throw new CliError(name, args, res.status, out, res.stderr);
}

/**
 * Run one of our binaries with this process's arguments, environment and
 * stdio, and exit with its status: a CLI in the reference's seat. It
 * passes no clock (the suite's CLI tests run on the wall clock), so any
 * build will do.
 */
export function execAs(name, extraArgs = []) {
  const res = spawnSync(binary(name, { testBuild: false }), [...process.argv.slice(2), ...extraArgs], { stdio: "inherit" });
  if (res.error) throw res.error;
  process.exit(res.status ?? 128 + (constants.signals[res.signal] ?? 0));
}

/**
 * Our pool outputs carry this CLI's names beside the Node tool's
 * (requestId/request_id, slot/slot_id, attributes/attrs; docs/PROTOCOL.md
 * §6.5). The Node API has only the second names, so a twin is dropped where
 * it holds exactly the value of its Node-named partner, and kept (for the
 * suite to see) where it does not.
 */
const TWINS = [["requestId", "request_id"], ["slot", "slot_id"], ["attributes", "attrs"]];

/**
 * Fields our outputs have and the Node API has not at all: the fence
 * printed beside a record and on grants (docs/PROTOCOL.md §2.4). The Node
 * API's shapes are returned without them; the suite's "superset" and
 * deep-equality checks are about the Node API's fields.
 */
const ADDITIVE = ["fence"];

export function nodeNames(o) {
  if (o === null || typeof o !== "object" || Array.isArray(o)) return o;
  const out = { ...o };
  for (const [ours, theirs] of TWINS) {
    if (ours in out && theirs in out && JSON.stringify(out[ours]) === JSON.stringify(out[theirs])) delete out[ours];
  }
  for (const k of ADDITIVE) delete out[k];
  return out;
}
