#!/usr/bin/env python3
"""maint/reorg-tests.py — move hpt's tests into folders by subsystem (issue 33 part B).

Run from anywhere inside a git work tree of hpt (`python3 maint/reorg-tests.py`).
It works on whatever tree it is run in, so it can be rerun after other branches
have added tests:

  1. classifies every tracked file directly in tests/ by the RULES below (first
     match wins) and every tests/bad/ test by its subsystem prefix (BAD_PREFIXES,
     or an explicit BAD_RENAMES entry); a file no rule places is reported and
     NOTHING is changed (exit 1): add a rule here, then rerun;
  2. `git mv`s each file (and tests/cuda-emu/) and prints "moved OLD -> NEW";
  3. rewrites every reference in every tracked text file: `tests/NAME` paths
     (programs, logs, globs such as tests/gpu-*.sh, the helpers' directory on
     PYTHONPATH), the renamed bad tests' names, automake's canonical variable
     names (tests_test_ops_SOURCES -> tests_unit_test_ops_SOURCES);
  4. sorts Makefile.am's test lists: the unconditional `+=` additions to TESTS,
     CORPUS_TESTS, BAD_INPUT_TESTS, SLURM_TESTS and check_PROGRAMS, and every
     tests/ file of EXTRA_DIST, fold into the first `=` of each, one file a
     line, sorted (a comment left describing only removed lines is dropped and
     printed); conditional ones (if HAVE_CUDA ...) stay where they are;
  5. checks that every `tests/NAME` mentioned anywhere exists (a tracked file or
     folder, a glob that matches, or a program/log/object of one) and lists the
     stale ones (exit 1).

A second run on a reorganised tree is a no-op (it moves nothing and the lists
are already in their sorted form); a run after a merge places only the new
files. Options: --dry-run (print the moves, change nothing), --keep-readme
(leave README.md as it is and print the lines that would change), --check
(step 5 only), --force (run with uncommitted changes).
Not shipped (not in EXTRA_DIST): a maintainer's tool.
"""
import fnmatch
import os
import re
import subprocess
import sys

# ---------------------------------------------------------------- the layout
# folder -> what it holds (written into docs/ARCHITECTURE.md's table)
FOLDERS = [
    ("unit", "C unit tests (`test_*.c`, one program each)"),
    ("helpers", "what tests share, none a test: `lib.sh` (sourced by every shell test), "
     "`slurm-lib.sh`, `hang-lib.sh`, `expect.h`, `tmpdir.h`, helper programs (`h5maxdiff`, "
     "`ref_dump`, `attn_dump`), LD_PRELOAD shims, the PyTorch reference `torch_ref.py` and "
     "the Python checkers"),
    ("bad", "bad input, one rule broken per test, named `SUBSYSTEM-*.sh` (`BAD_INPUT_TESTS`; "
     "`.ci/run` reruns them under ASan/UBSan)"),
    ("build", "configure's output"),
    ("ckpt", "checkpoints: save, resume, async save, fallback, export, `--init-from`"),
    ("data", "hpt-data; `prepare-corpus.sh` builds the corpus the corpus tests share"),
    ("generate", "hpt-generate"),
    ("gpu", "CUDA backend and NCCL (skip without a GPU); `cuda-emu/`: the CPU emulation "
     "of `make check-cuda-emu`"),
    ("hang", "hang watchdog, flight recorder, a killed rank"),
    ("live", "hpt-live, the page (`*.js`: the browser tests' drivers), alerts, reports"),
    ("metrics", "per-rank metrics files, hpt-metrics"),
    ("model", "the model's numerics against PyTorch, presets"),
    ("parallel", "TP/PP/DP and sequence parallelism against one rank, communication"),
    ("plan", "hpt-plan"),
    ("slurm", "jobs on a local Slurm cluster, the launcher"),
    ("train", "the training loop: learning, determinism, accumulation, recomputation, stops"),
]
FOLDER_NAMES = [f for f, _ in FOLDERS]

# files directly in tests/: (folder, basename patterns); the first match wins
RULES = [
    ("helpers", ["lib.sh", "*-lib.sh", "*.py", "*.h", "*-shim.c"]),
    ("unit", ["test_*.c"]),
    ("helpers", ["*.c"]),
    ("build", ["configure-*"]),
    ("ckpt", ["ckpt-*", "async-save-*", "resume-*", "init-from*", "export-*"]),
    ("data", ["data-*", "prepare-corpus.sh"]),
    ("generate", ["generate*"]),
    ("gpu", ["gpu-*", "cuda-*", "h5maxdiff.sh"]),
    ("hang", ["hang-*", "kill-*"]),
    ("live", ["live*", "train-alert*"]),
    ("metrics", ["metrics-*"]),
    ("model", ["*-torch.sh", "torch-*", "config-*"]),
    ("parallel", ["parallel-*", "sequence-parallel*", "comm-*", "mpiexec-*"]),
    ("plan", ["plan-*"]),
    ("slurm", ["slurm-*"]),
    ("train", ["train-*", "learn*", "determinism*", "grad-accum*", "skip-nonfinite*",
               "recompute*", "max-runtime-*", "val-*", "no-val-*", "rerun-*"]),
]
# folders directly in tests/ that move whole
DIR_MOVES = {"cuda-emu": "gpu/cuda-emu"}

# tests/bad/: a test whose name starts with one of these stays; others need a rename
BAD_PREFIXES = ["ckpt-", "comm-", "config-", "data-", "generate-", "gpu-", "hang-",
                "init-from-", "live-", "metrics-", "model-", "parallel-", "plan-",
                "slurm-", "train-"]
BAD_RENAMES = {
    "adam-eps-overflow.sh": "train-adam-eps-overflow.sh",
    "async-save-no-dir.sh": "ckpt-async-save-no-dir.sh",
    "batch-nonpositive.sh": "train-batch-nonpositive.sh",
    "checkpoint-dir-unwritable.sh": "ckpt-dir-unwritable.sh",
    "checkpoint-options.sh": "ckpt-options.sh",
    "clip-underflow.sh": "train-clip-underflow.sh",
    "collective-timeout-negative.sh": "hang-collective-timeout-negative.sh",
    "collective-timeout-not-number.sh": "hang-collective-timeout-not-number.sh",
    "cpu-kernels-env.sh": "model-cpu-kernels-env.sh",
    "cuda-no-device.sh": "gpu-cuda-no-device.sh",
    "dp-data-error.sh": "parallel-dp-data-error.sh",
    "eval-batches-too-many.sh": "train-eval-batches-too-many.sh",
    "export-over-checkpoint.sh": "ckpt-export-over-checkpoint.sh",
    "export-path.sh": "ckpt-export-path.sh",
    "export-unwritable.sh": "ckpt-export-unwritable.sh",
    "fifo-data.sh": "data-fifo.sh",
    "fifo-val-data.sh": "data-fifo-val.sh",
    "fifo-model.sh": "config-fifo-model.sh",
    "flight-recorder-env.sh": "hang-flight-recorder-env.sh",
    "global-batch-too-large.sh": "train-global-batch-too-large.sh",
    "heads-not-dividing-hidden.sh": "config-heads-not-dividing-hidden.sh",
    "int-out-of-range.sh": "train-int-out-of-range.sh",
    "kv-not-dividing-heads.sh": "config-kv-not-dividing-heads.sh",
    "layout-mismatch.sh": "parallel-layout-mismatch.sh",
    "lr-nonpositive.sh": "train-lr-nonpositive.sh",
    "malformed-json.sh": "config-malformed-json.sh",
    "missing-data.sh": "data-missing.sh",
    "missing-field.sh": "config-missing-field.sh",
    "model-vocab-vs-tokenizer.sh": "data-vocab-vs-tokenizer.sh",
    "options-differ.sh": "parallel-options-differ.sh",
    "precision-cpu.sh": "model-precision-cpu.sh",
    "precision-unknown.sh": "model-precision-unknown.sh",
    "recompute-mode.sh": "train-recompute-mode.sh",
    "report-missing-file.sh": "metrics-report-missing-file.sh",
    "report-not-hpt-file.sh": "metrics-report-not-hpt-file.sh",
    "report-output-dash.sh": "metrics-report-output-dash.sh",
    "report-overwrites-input.sh": "metrics-report-overwrites-input.sh",
    "report-points.sh": "metrics-report-points.sh",
    "report-unwritable.sh": "metrics-report-unwritable.sh",
    "seq-too-long.sh": "config-seq-too-long.sh",
    "sequence-parallel-indivisible.sh": "parallel-sequence-indivisible.sh",
    "signals-empty.sh": "train-signals-empty.sh",
    "steps-nonpositive.sh": "train-steps-nonpositive.sh",
    "stop-at-negative.sh": "train-stop-at-negative.sh",
    "token-out-of-vocab.sh": "data-token-out-of-vocab.sh",
    "truncated-shard.sh": "data-truncated-shard.sh",
    "unknown-option.sh": "train-unknown-option.sh",
    "unknown-preset.sh": "config-unknown-preset.sh",
    "unsupported-config.sh": "config-unsupported.sh",
    "unwritable-run-dir.sh": "train-run-dir-unwritable.sh",
    "weight-decay-overflow.sh": "train-weight-decay-overflow.sh",
    "wrong-magic.sh": "data-wrong-magic.sh",
    "wrong-type.sh": "config-wrong-type.sh",
    "wrong-version.sh": "data-wrong-version.sh",
}
# a bad test named with one of these prefixes and not in BAD_RENAMES (one
# added later) gets the subsystem's prefix in its place
BAD_PREFIX_RENAMES = {
    "async-save-": "ckpt-async-save-", "checkpoint-": "ckpt-", "export-": "ckpt-export-",
    "collective-timeout-": "hang-collective-timeout-", "precision-": "model-precision-",
    "recompute-": "train-recompute-", "report-": "metrics-report-",
}
# literal edits that no path rule can make: (file, old, new); applied where old
# is found, reported where neither old nor new is
FIXUPS = [
    # the objects of the two unit programs the emulation relinks
    ("tests/gpu/cuda-emu/run.sh", '"$HPT_BUILD/tests/$t.o"', '"$HPT_BUILD/tests/unit/$t.o"'),
    # the Python helpers' directory on sys.path
    ("bench/torch_train.py", '"..", "tests"))', '"..", "tests", "helpers"))'),
    # SLURM_TESTS is sorted now
    ("Makefile.am", "# skipped (77) when the Slurm packages are missing. The 8-rank one first: it\n"
     "# is the longest.\n", "# skipped (77) when the Slurm packages are missing.\n"),
]
# names under tests/ that are build outputs, not files of the tree
BUILD_OUTPUTS = {"corpus", "work"}
# Makefile.am lists folded into their first `=` and sorted
LISTS = ["TESTS", "CORPUS_TESTS", "BAD_INPUT_TESTS", "SLURM_TESTS", "check_PROGRAMS"]
SELF = "maint/reorg-tests.py"


def sh(*args, **kw):
    return subprocess.run(args, check=True, text=True, capture_output=True, **kw).stdout


def tracked():
    return [p for p in sh("git", "ls-files", "-z").split("\0") if p]


def classify(name):
    """Folder of a file directly in tests/ by RULES, or None."""
    for folder, pats in RULES:
        if any(fnmatch.fnmatchcase(name, p) for p in pats):
            return folder
    return None


# ---------------------------------------------------------------- 1. the plan
def plan(files):
    """[(old, new)] moves and [str] problems for the tracked files."""
    moves, problems = [], []
    for p in files:
        parts = p.split("/")
        if parts[0] != "tests" or len(parts) < 2:
            continue
        if len(parts) == 2:
            folder = classify(parts[1])
            if folder is None:
                problems.append(f"{p}: no rule places it (add one to RULES in {SELF})")
            else:
                moves.append((p, f"tests/{folder}/{parts[1]}"))
        elif parts[1] in DIR_MOVES:
            moves.append((p, "tests/" + DIR_MOVES[parts[1]] + "/" + "/".join(parts[2:])))
        elif parts[1] == "bad" and len(parts) == 3:
            name = parts[2]
            pre = next((x for x in BAD_PREFIX_RENAMES if name.startswith(x)), None)
            if name in BAD_RENAMES:
                moves.append((p, "tests/bad/" + BAD_RENAMES[name]))
            elif pre:
                moves.append((p, "tests/bad/" + BAD_PREFIX_RENAMES[pre] + name[len(pre):]))
            elif not (any(name.startswith(x) for x in BAD_PREFIXES) and name.endswith(".sh")):
                problems.append(f"{p}: no subsystem prefix ({' '.join(BAD_PREFIXES)}) and no "
                                f"entry in BAD_RENAMES of {SELF}")
        elif parts[1] not in FOLDER_NAMES:
            problems.append(f"{p}: in tests/{parts[1]}/, not a known folder")
    news = [n for _, n in moves]
    existing = set(files) - {o for o, _ in moves}
    for n in news:
        if n in existing or news.count(n) > 1:
            problems.append(f"{n}: would be overwritten")
    return moves, problems


# --------------------------------------------------------- 3. path rewriting
TOKEN = re.compile(r"(?<![\w.$-])tests/([\w.*?+-]+)(/[\w.*?+-]+)?")
GLOB = re.compile(r"[*?]")


class Resolver:
    """Maps a first component under tests/ (a file, program, log or glob) to
    its place after the move, from the tracked files."""

    def __init__(self, files):
        self.top = set()       # names directly in tests/ (files and folders)
        self.where = {}        # basename -> [paths relative to tests/] in folders
        for p in files:
            parts = p.split("/")
            if parts[0] != "tests" or len(parts) < 2:
                continue
            self.top.add(parts[1])
            if len(parts) >= 3:
                for depth in range(2, len(parts)):  # folders, then the file
                    rel = "/".join(parts[1:depth + 1])
                    lst = self.where.setdefault(parts[depth], [])
                    if rel not in lst:
                        lst.append(rel)

    def one(self, name):
        lst = self.where.get(name, [])
        return lst[0] if len(lst) == 1 else None

    def resolve(self, name):
        """New 'folder/.../name' for tests/NAME, or None to leave it."""
        if name in self.top or name in BUILD_OUTPUTS:
            return None
        if GLOB.search(name):
            return self.resolve_glob(name)
        got = self.one(name)
        if got:
            return got
        stem, ext = os.path.splitext(name)
        prefs = {"": [".c", ".sh"], ".o": [".c"], ".log": [".sh", ".c"], ".trs": [".sh", ".c"]}
        for e in prefs.get(ext, []):
            got = self.one(stem + e)
            if got:
                return got[: -len(stem + e)] + name
        return None

    def resolve_glob(self, pat):
        def folders(match):
            out = {}
            for base, lst in self.where.items():
                if match(base):
                    for rel in lst:
                        if rel.count("/") == 1 and rel.split("/")[0] != "bad":
                            out[rel.split("/")[0]] = out.get(rel.split("/")[0], 0) + 1
            return out
        got = folders(lambda b: fnmatch.fnmatchcase(b, pat))
        if not got:  # e.g. .gitignore's !tests/test_*.h: match on the part before the *
            pre = GLOB.split(pat)[0]
            got = folders(lambda b: pre and b.startswith(pre))
        if not got:
            return None
        return max(got, key=lambda f: got[f]) + "/" + pat


def rewrite_text(text, res, bad_new):
    def sub(m):
        first, rest = m.group(1), m.group(2) or ""
        tail = ""
        while (rest or first).endswith("."):  # a sentence's full stop
            if rest:
                rest, tail = rest[:-1], "." + tail
            else:
                first, tail = first[:-1], "." + tail
        if first == "bad" and rest:
            name = rest[1:]
            stem, ext = os.path.splitext(name)
            new = bad_new.get(name) or (bad_new.get(stem + ".sh") and
                                        bad_new[stem + ".sh"][:-3] + ext)
            return f"tests/bad/{new or name}{tail}"
        new = res.resolve(first)
        return f"tests/{new or first}{rest}{tail}"
    text = TOKEN.sub(sub, text)
    for old, new in bad_new.items():  # bare names (docs: `live-alert.sh`)
        text = re.sub(r"(?<![\w/.-])" + re.escape(old) + r"(?![\w-])", new, text)
    # the helpers' directory on PYTHONPATH or sys.path ("$HPT_SRC/tests")
    text = re.sub(r'(\$HPT_SRC/tests)(?=["\':\s])', r"\1/helpers", text)
    return text


def canon(path):
    return re.sub(r"[^A-Za-z0-9_@]", "_", path)


# ------------------------------------------------------- 4. Makefile.am lists
ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*(\+?=)\s*(.*)$", re.S)


def logical_lines(text):
    """[(physical lines)] with backslash continuations joined."""
    out, cur = [], []
    for line in text.split("\n"):
        cur.append(line)
        if not line.endswith("\\"):
            out.append(cur)
            cur = []
    if cur:
        out.append(cur)
    return out


def wrap(head, words, files):
    """Lines of `HEAD words... files...`: the words filled to 100 columns, then
    one file a line (tab-indented), backslash-continued."""
    lines, cur = [], head
    for w in words:
        if len(cur) + 1 + len(w) > 98 and cur.strip():
            lines.append(cur + " \\")
            cur = "\t" + w
        else:
            cur += " " + w
    for f in files:
        lines.append(cur + " \\")
        cur = "\t" + f
    return lines + [cur]


def sort_lists(text, log):
    items = []  # dicts: lines, kind, depth, var, op, words
    depth = 0
    for lines in logical_lines(text):
        first = lines[0]
        joined = " ".join(l[:-1] if l.endswith("\\") else l for l in lines)
        it = {"lines": lines, "kind": "other", "depth": depth}
        if first.strip() == "":
            it["kind"] = "blank"
        elif first.startswith("#"):
            it["kind"] = "comment"
        elif re.match(r"^(if|else|endif)\b", first):
            word = first.split()[0]
            if word == "endif":
                depth -= 1
            it["depth"] = depth if word != "else" else depth - 1
            if word == "if":
                depth += 1
        elif not first.startswith("\t"):
            m = ASSIGN.match(joined)
            if m and not re.match(r"^[^=]*:", joined.split("=")[0] + "="):
                it.update(kind="assign", var=m.group(1), op=m.group(2), words=m.group(3).split())
        items.append(it)

    removed = set()
    for var in LISTS + ["EXTRA_DIST"]:
        top = [i for i, it in enumerate(items)
               if it["kind"] == "assign" and it["var"] == var and it["depth"] == 0]
        anchors = [i for i in top if items[i]["op"] == "="]
        if not anchors:
            continue
        a = anchors[0]
        if var == "EXTRA_DIST":
            keep, tests = [], []
            for i in top:
                rest = []
                for w in items[i]["words"]:
                    if w.startswith("tests/"):
                        tests.append(w)
                    elif i == a:
                        keep.append(w)
                    else:
                        rest.append(w)
                if i != a and len(rest) != len(items[i]["words"]):
                    if rest:
                        items[i]["lines"] = wrap(f"{var} {items[i]['op']}", rest, [])
                    else:
                        removed.add(i)
            items[a]["lines"] = wrap(f"{var} =", list(dict.fromkeys(keep)), sorted(set(tests)))
        else:
            words = []
            for i in top:
                words += items[i]["words"]
                if i != a:
                    removed.add(i)
            refs = list(dict.fromkeys(w for w in words if w.startswith("$")))
            items[a]["lines"] = wrap(f"{var} =", refs, sorted(set(w for w in words
                                                                 if not w.startswith("$"))))

    # each program's own variables (tests_unit_test_ops_SOURCES, ...) follow
    # check_PROGRAMS, in its order
    cp = [i for i, it in enumerate(items) if it["kind"] == "assign" and it["depth"] == 0
          and it["var"] == "check_PROGRAMS" and it["op"] == "="]
    progs = {}
    if cp:
        words = [w for l in items[cp[0]]["lines"] for w in l.replace("\\", " ").split()]
        progs = {canon(w): w for w in words if w.startswith("tests/")}
    moved = {}  # item index -> program
    for i, it in enumerate(items):
        if it["kind"] == "assign" and it["depth"] == 0:
            m = re.match(r"^(.*)_(SOURCES|LDADD|LIBADD|CPPFLAGS|CFLAGS|LDFLAGS|DEPENDENCIES)$",
                         it["var"])
            if m and m.group(1) in progs:
                moved[i] = progs[m.group(1)]
    gone = removed | set(moved)

    # a comment left describing only folded lines goes with the first of
    # them that moves, or is dropped
    travel = {}  # item index -> [comment item indices]
    i = 0
    while i < len(items):
        if items[i]["kind"] != "comment":
            i += 1
            continue
        j = i
        while j < len(items) and items[j]["kind"] == "comment":
            j += 1
        k = j
        while k < len(items) and k in gone:
            k += 1
        if k > j and (k == len(items) or items[k]["kind"] in ("blank", "comment")):
            to = next((x for x in range(j, k) if x in moved), None)
            if to is None:
                log("dropped a comment that described only folded list lines:\n  " +
                    "\n  ".join(l for c in items[i:j] for l in c["lines"]))
            else:
                travel[to] = list(range(i, j))
            removed.update(range(i, j))
        i = j
    lines = []
    for i, it in enumerate(items):
        if i in removed or i in moved:
            continue
        if it["kind"] == "blank" and lines and lines[-1].strip() == "":
            continue
        lines += it["lines"]
        if cp and i == cp[0]:
            for x in sorted(moved, key=lambda x: (moved[x], x)):
                for c in travel.get(x, []):
                    lines += items[c]["lines"]
                lines += items[x]["lines"]
    return "\n".join(lines)


# --------------------------------------------------------------- 5. the check
def stale(files):
    """['file:line: tests/...'] for mentions of tests/ paths that do not exist."""
    have = set(files)
    dirs = {"/".join(p.split("/")[:k]) for p in files for k in range(1, p.count("/") + 1)}
    progs = {os.path.splitext(p)[0] for p in files if p.endswith((".c", ".sh"))}
    out = []
    for f in files:
        text = read_text(f)
        if text is None or f == SELF:
            continue
        for n, line in enumerate(text.split("\n"), 1):
            for m in TOKEN.finditer(line):
                path = m.group(0).rstrip(".")
                if path.split("/")[1] in BUILD_OUTPUTS or path in have or path in dirs:
                    continue
                if GLOB.search(path):
                    if any(fnmatch.fnmatchcase(p, path) for p in have | dirs):
                        continue
                    pre = GLOB.split(path)[0]  # test_*.h in .gitignore: a pattern of the folder
                    if pre.count("/") >= 1 and any(p.startswith(pre) for p in have):
                        continue
                elif os.path.splitext(path)[0] in progs and \
                        os.path.splitext(path)[1] in ("", ".o", ".log", ".trs"):
                    continue
                out.append(f"{f}:{n}: {path}")
    return out


def read_text(path):
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except (IsADirectoryError, FileNotFoundError):
        return None
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def local_includes(text, path, files):
    """#include "expect.h" in a C file of a tests/ folder names the header's
    new place relative to it (tests/helpers/), no -I needed."""
    if not path.startswith("tests/") or not path.endswith((".c", ".h", ".cc", ".cu")):
        return text
    here = os.path.dirname(path)

    def sub(m):
        name = m.group(1)
        if f"{here}/{name}" in files or "/" in name:
            return m.group(0)
        if f"tests/helpers/{name}" in files:
            return f'#include "{os.path.relpath("tests/helpers/" + name, here)}"'
        return m.group(0)
    return re.sub(r'#include "([^"]+)"', sub, text)


def layout_docs(text, path):
    """The tests/ row of docs/ARCHITECTURE.md's table and Makefile.am's note."""
    if path == "docs/ARCHITECTURE.md":
        row = ("| `tests/` | by subsystem (`maint/reorg-tests.py` places a new file by its name): " +
               "; ".join(f"`{f}/` {d}" for f, d in FOLDERS) + " |")
        text = re.sub(r"(?m)^\| `tests/` \|.*$", lambda m: row, text, count=1)
    if path == "Makefile.am":
        note = ("# Tests by subsystem: tests/<subsystem>/ (docs/ARCHITECTURE.md), helpers in\n"
                "# tests/helpers/, C unit tests in tests/unit/; maint/reorg-tests.py places new\n"
                "# files and sorts these lists. One file a line, in order.\n")
        hdr = re.search(r"(?m)^# -+ tests\n", text)
        if hdr and note not in text:
            text = text[:hdr.end()] + note + text[hdr.end():]
    return text


def main(argv):
    opts = set(argv[1:])
    bad = opts - {"--dry-run", "--keep-readme", "--check", "--force"}
    if bad:
        sys.exit(f"{SELF}: unknown option {' '.join(sorted(bad))}; see the comment at its top")
    os.chdir(sh("git", "rev-parse", "--show-toplevel").strip())
    if not os.path.isfile("Makefile.am") or not os.path.isdir("tests"):
        sys.exit(f"{SELF}: {os.getcwd()} is not an hpt tree (no Makefile.am or tests/)")
    if "--check" in opts:
        st = stale(tracked())
        print("\n".join(st) if st else "no stale tests/ path")
        return 1 if st else 0
    if "--force" not in opts and "--dry-run" not in opts and \
            sh("git", "status", "--porcelain", "--untracked-files=no").strip():
        sys.exit(f"{SELF}: the tree has uncommitted changes; commit them first (or --force)")

    files = tracked()
    moves, problems = plan(files)
    if problems:
        print(f"{SELF}: nothing changed; files no rule places:", file=sys.stderr)
        print("\n".join("  " + p for p in problems), file=sys.stderr)
        return 1
    for old, new in moves:
        print(f"moved {old} -> {new}")
    if "--dry-run" in opts:
        print(f"{len(moves)} moves (dry run: nothing changed)")
        return 0
    progs_before = set()
    for lines in logical_lines(open("Makefile.am").read()):
        m = ASSIGN.match(" ".join(l.rstrip("\\") for l in lines))
        if m and m.group(1) == "check_PROGRAMS":
            progs_before |= {w for w in m.group(3).split() if w.startswith("tests/")}
    for old, new in moves:
        os.makedirs(os.path.dirname(new), exist_ok=True)
        sh("git", "mv", old, new)

    files = tracked()
    res = Resolver(files)
    # every rename whose new name is there (also a rerun's: a merged file may
    # still name a bad test by its old name)
    bad_new = {o: n for o, n in BAD_RENAMES.items() if f"tests/bad/{n}" in files}
    bad_new.update((os.path.basename(o), os.path.basename(n)) for o, n in moves
                   if o.startswith("tests/bad/"))
    readme = []
    for f in files:
        if f == SELF:
            continue
        text = read_text(f)
        if text is None:
            continue
        new = rewrite_text(text, res, bad_new)
        new = layout_docs(new, f)
        new = local_includes(new, f, files)
        if f == "Makefile.am":
            for old in sorted(progs_before):
                first = old.split("/")[1]
                to = res.resolve(first)
                if to:
                    new = re.sub(r"\b" + canon(old) + r"_(?=[A-Z])", canon("tests/" + to) + "_", new)
        for path, a, b in FIXUPS:
            if path == f and a in new:
                new = new.replace(a, b)
                print(f"fixed {f}: {a.strip()!r} -> {b.strip()!r}")
        if f == "Makefile.am":
            new = sort_lists(new, print)
        if new == text:
            continue
        if f == "README.md" and "--keep-readme" in opts:
            old_l, new_l = text.split("\n"), new.split("\n")
            readme = [f"README.md:{i + 1}: {b}" for i, (a, b) in enumerate(zip(old_l, new_l))
                      if a != b]
            continue
        with open(f, "w") as fh:
            fh.write(new)
        print(f"rewrote {f}")
    for path, a, b in FIXUPS:
        if os.path.exists(path) and a not in open(path).read() and b not in open(path).read():
            print(f"{SELF}: fixup not applied, check by hand: {path}: {a.strip()!r}")
    if readme:
        print("README.md left as it is (--keep-readme); its lines that would change:")
        print("\n".join("  " + r for r in readme))
    sh("git", "add", "-u")
    st = [s for s in stale(tracked()) if not (readme and s.startswith("README.md:"))]
    if st:
        print(f"{SELF}: stale tests/ paths left (fix by hand):")
        print("\n".join("  " + s for s in st))
        return 1
    print(f"{len(moves)} files moved; no stale tests/ path")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
