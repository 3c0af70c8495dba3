"""bench/lib/rounds.py: the hyperfine rounds the bench scripts share.

The commands take turns: ROUNDS rounds of one `hyperfine -N` run of RUNS
runs of every command, the order reversed every other round (no command
always first), the times of all rounds pooled, so drift on a loaded
machine falls on every command alike. A script's Python imports it:

    sys.path.insert(0, BENCH_LIB); import rounds
    cmds, times, per_round = rounds.run(spec, n, runs, tmp, warmup, bench, progress)

spec is a file of name|prepare|command lines; progress(r, per_round) is
called after each round with that round's medians (to print a line).
"""
import json
import statistics
import subprocess
import sys


def commands(spec):
    """The name|prepare|command lines of spec, as lists of three."""
    return [line.rstrip("\n").split("|", 2) for line in open(spec) if line.strip()]


def run(spec, rounds, runs, tmp, warmup, bench, progress):
    """Run the rounds; return the commands, each one's pooled times, and
    each round's medians."""
    cmds = commands(spec)
    times = {name: [] for name, _, _ in cmds}
    per_round = []
    for r in range(rounds):
        order = cmds if r % 2 == 0 else cmds[::-1]  # no command always first
        args = ["hyperfine", "-N", "--warmup", str(warmup), "--runs", str(runs), "--export-json", f"{tmp}/round.json"]
        for name, prep, cmd in order:
            args += ["-n", name, "-p", prep, cmd]
        done = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if done.returncode != 0:  # its warnings about outliers are noise here
            sys.exit(f"{bench}: hyperfine failed:\n{done.stderr}")
        res = {x["command"]: x["times"] for x in json.load(open(f"{tmp}/round.json"))["results"]}
        for name in res:
            times[name] += res[name]
        per_round.append({k: statistics.median(v) for k, v in res.items()})
        progress(r, per_round[-1])
    return cmds, times, per_round


def pct(t, p):
    """The p-th quantile (0 to 1) of the times t, nearest rank."""
    t = sorted(t)
    return t[min(len(t) - 1, int(p * len(t)))]
