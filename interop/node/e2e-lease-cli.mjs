#!/usr/bin/env node
// e2e-lease-cli.mjs: our `pool` binary in the seat of the reference's
// e2e pool CLI, for the suite's cross-process tests: `node
// e2e-lease-cli.mjs ARGS` runs `pool ARGS --pool e2e-pool.json` with this
// process's environment and stdio and exits with its status.
import { execAs } from "./cli.mjs";
import { POOL_FILE } from "./e2e-pool.mjs";

execAs("pool", ["--pool", POOL_FILE]);
