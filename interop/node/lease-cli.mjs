#!/usr/bin/env node
// lease-cli.mjs: our `lease` binary in the seat of the reference's
// lease-cli.mjs, for the suite's cross-process tests: `node lease-cli.mjs
// ARGS` runs `lease ARGS` with this process's environment and stdio and
// exits with its status. It adds nothing: the arguments are our CLI's too.
import { execAs } from "./cli.mjs";

execAs("lease");
