"""Reports of every fixture and public trace, written to a folder, and two such folders compared.

    python benchmarks/same_reports.py write DIR      # JSON report of each trace into DIR
    python benchmarks/same_reports.py compare A B    # exit 1 and list the traces that differ

Used to show that a move of code changes no report: write on the commit before, write on the
commit after, compare. The traces are the recorded fixtures (tests/data/h200 and its folders),
the real-code set (tests/data/realcode/h200, its record-timed and hosts folders) and, where
present, the public traces in ../shared/traces/public (skipped when absent); the repository's
own folder is written as ``<repo>``. Each report is analyzed with the source root its tests use.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"
PUBLIC = REPO.parent / "shared" / "traces" / "public"


def traces() -> list[tuple[str, Path, Path | None]]:
    """(report name, trace, source root) for every trace the comparison covers."""
    found: list[tuple[str, Path, Path | None]] = []
    for trace in sorted((DATA / "h200").rglob("*.json.gz")):
        name = "__".join(trace.relative_to(DATA / "h200").parts)
        found.append((f"h200__{name}", trace, DATA))
    for trace in sorted((DATA / "realcode" / "h200").rglob("*.json.gz")):
        if ".truth." not in trace.name and "samples" not in trace.parts:
            name = "__".join(trace.relative_to(DATA / "realcode" / "h200").parts)
            found.append((f"realcode__{name}", trace, DATA / "realcode"))
    if PUBLIC.is_dir():
        for trace in sorted(PUBLIC.rglob("*.json*")):
            name = "public__" + "__".join(trace.relative_to(PUBLIC).parts)
            found.append((name, trace, None))
    return found


def write(folder: Path) -> int:
    sys.path.insert(0, str(REPO))
    from brrr_trace.errors import BrrrError
    from brrr_trace.options import AnalysisOptions
    from brrr_trace.pipeline import analyze
    from brrr_trace.render import json as render_json

    folder.mkdir(parents=True, exist_ok=True)
    for name, trace, root in traces():
        options = AnalysisOptions(source_root=str(root) if root else None)
        try:
            text = render_json.render(analyze(trace, options))
        except BrrrError as error:
            text = f"error: {error}\n"
        # Worktrees of two commits sit in different folders: paths compare relative to each.
        text = text.replace(str(REPO), "<repo>")
        (folder / f"{name}.json").write_text(text, encoding="utf-8")
        print(name, file=sys.stderr)
    return 0


def compare(before: Path, after: Path) -> int:
    names = {p.name for p in before.glob("*.json")} | {p.name for p in after.glob("*.json")}
    differ = []
    for name in sorted(names):
        a, b = before / name, after / name
        if not a.exists() or not b.exists() or a.read_bytes() != b.read_bytes():
            differ.append(name)
    for name in differ:
        print(f"differs: {name}")
    print(f"{len(names) - len(differ)} of {len(names)} reports identical")
    return 1 if differ else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("write").add_argument("folder", type=Path)
    both = commands.add_parser("compare")
    both.add_argument("before", type=Path)
    both.add_argument("after", type=Path)
    args = parser.parse_args()
    if args.command == "write":
        return write(args.folder)
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
