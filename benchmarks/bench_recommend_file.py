"""``crabrec recommend --input FILE --output FILE`` on files of up to a million histories: seconds and peak memory of
the whole command, against another version of crabrec given as a source tree (``--against``), the answers checked
byte for byte equal.

    git worktree add /tmp/crabrec-old REV
    python benchmarks/bench_recommend_file.py [--runs runs] [--rows 100000,1000000] [--methods pop,sasrec]
        [--formats csv,jsonl,parquet] [--against /tmp/crabrec-old]

A quick-preset run of the embedded Office data (trained into ``--runs``/office-quick unless it is there). The input
files hold the run's test histories (item ids, oldest first), repeated until there are ``--rows`` of them, one
history a row. Each command runs in its own process (top 10, the history's own items excluded, the defaults);
printed per method, format and size: its seconds and peak resident memory, and with ``--against`` the same for the
other version, the ratios (theirs / ours) and whether the two answer files are the same bytes.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

STAGES = ["sasrec-eval", "pop-eval", "evaluate"]


def histories_file(path: Path, histories: list[list[str]], rows: int) -> Path:
    """``rows`` histories (``histories`` repeated) written in ``path``'s format."""
    picked = [histories[r % len(histories)] for r in range(rows)]
    if path.suffix == ".parquet":
        import pandas as pd

        pd.DataFrame({"history": picked}).to_parquet(path)
    elif path.suffix == ".jsonl":
        path.write_text("".join(json.dumps({"history": h}) + "\n" for h in picked))
    else:
        path.write_text("history\n" + "".join(" ".join(h) + "\n" for h in picked))
    return path


def command(run: Path, method: str, source: Path, output: Path, src: Path | None) -> tuple[float, float]:
    """Seconds and peak resident memory (MB) of one ``crabrec recommend`` process (``src``: the crabrec package's
    folder to import instead of the installed one)."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(src), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    cmd = [sys.executable, "-m", "crabrec", "-q", "recommend", str(run), "--method", method, "--input", str(source),
           "--output", str(output)]  # fmt: skip
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr.read().decode()}")
    proc.stderr.close()
    return seconds, usage.ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", default="runs", help="where the quick run is kept")
    ap.add_argument("--rows", default="100000,1000000", help="histories per file, comma-separated")
    ap.add_argument("--methods", default="pop,sasrec", help="methods, comma-separated")
    ap.add_argument("--formats", default="csv,jsonl,parquet", help="input and output formats, comma-separated")
    ap.add_argument("--against", type=Path, help="another version's source tree (a git worktree) to compare with")
    args = ap.parse_args()
    import crabrec
    from crabrec.runfiles import RunFiles

    run = crabrec.run(preset="quick", until=STAGES, overrides={"runs_dir": str(Path(args.runs))})
    ids = crabrec.load(run, "pop").item_ids
    histories = [[ids[i] for i in row] for row in RunFiles(run).load_splits().test.rows()]
    other = None if args.against is None else args.against / "src"
    print(f"{run}: files of its {len(histories)} test histories repeated; top 10, the history's items excluded\n")
    head = "| method | format | histories | seconds | peak MB |"
    if other is not None:
        head += f" {args.against} (s) | its peak MB | time ratio | memory ratio | same answers |"
    print(head + "\n|" + "---|" * head.count(" | ") + "---|")
    with tempfile.TemporaryDirectory() as tmp:
        for rows in map(int, args.rows.split(",")):
            for fmt in args.formats.split(","):
                source = histories_file(Path(tmp, f"in-{rows}.{fmt}"), histories, rows)
                for method in args.methods.split(","):
                    ours, theirs = Path(tmp, f"ours.{fmt}"), Path(tmp, f"theirs.{fmt}")
                    seconds, peak = command(run, method, source, ours, None)
                    line = f"| {method} | {fmt} | {rows:,} | {seconds:.1f} | {peak:,.0f} |"
                    if other is not None:
                        s2, p2 = command(run, method, source, theirs, other)
                        same = "yes" if filecmp.cmp(ours, theirs, shallow=False) else "no"
                        line += f" {s2:.1f} | {p2:,.0f} | {s2 / seconds:.2f} | {p2 / peak:.2f} | {same} |"
                    print(line, flush=True)
                source.unlink()


if __name__ == "__main__":
    main()
