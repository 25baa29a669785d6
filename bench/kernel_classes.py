#!/usr/bin/env python3
"""Per-kernel-class GPU time of an hpt run from Nsight Systems' kernel summary.

Usage: kernel_classes.py CSV STEPS LABEL

CSV is `nsys stats --report cuda_gpu_kern_sum --format csv` of a profiled
hpt-train run (the header row names "Total Time (ns)" and "Name"; lines
before it, nsys's own notices, are skipped). Each kernel is put in the
class of hpt-plan's memory-bound kernels (lib/plan.c, hpt_plan_kclass_name)
or beside them: gemm (cuBLAS/cuBLASLt/CUTLASS: every kernel that is not
hpt's own k_* nor NCCL's), attention, norm, rope, swiglu, cast,
cross_entropy, embedding, optimizer (AdamW, the gradient norm's sums,
scaling), comm (NCCL), other. Prints one line: the LABEL, the GPU busy time
per step (the total over STEPS; the run's start-up kernels are included),
and each class's share and milliseconds per step, largest first. Exit 1
when the CSV has no kernel row. Standard library only (the GPU machine's
python3 runs it)."""
import csv
import re
import sys

CLASSES = [  # (class, regular expression on hpt's kernel name), first match wins
    ("attention", r"k_(mma|flash|chunk|block)_|k_attention_rowdot|k_batch_ptrs|k_group_sum"),
    ("norm", r"k_rmsnorm"),
    ("rope", r"k_rope"),
    ("swiglu", r"k_swiglu"),
    ("cast", r"k_to_bf16|k_mark"),
    ("cross_entropy", r"k_ce_|k_vocab_"),
    ("embedding", r"k_embed"),
    ("optimizer", r"k_adamw|k_sum|k_scale"),
]


def kernel_class(name):
    """The class of one kernel by its (demangled) name."""
    if re.search(r"nccl", name, re.I):
        return "comm"
    m = re.search(r"\bk_[a-z0-9_]+", name)
    if not m:  # not hpt's: the GEMM libraries'
        return "gemm"
    for cls, pat in CLASSES:
        if re.search(pat, m.group(0)):
            return cls
    return "other"


def read_rows(path):
    """[(name, total_ns, instances)] of the summary's rows."""
    with open(path, newline="") as f:
        lines = f.read().splitlines()
    for i, line in enumerate(lines):
        if "Total Time" in line and "Name" in line:
            break
    else:
        return []
    rows = []
    for r in csv.DictReader(lines[i:]):
        tt = next((k for k in r if k and k.startswith("Total Time")), None)
        try:
            rows.append((r["Name"], float(r[tt]), int(float(r.get("Instances") or 0))))
        except (KeyError, TypeError, ValueError):
            continue
    return rows


def main(argv):
    if len(argv) != 4:
        sys.exit(__doc__.split("\n\n")[1])
    path, steps, label = argv[1], max(1, int(argv[2])), argv[3]
    rows = read_rows(path)
    if not rows:
        print(f"kernel classes {label}: FAIL no kernel rows in {path}")
        return 1
    total = {}
    for name, ns, _ in rows:
        c = kernel_class(name)
        total[c] = total.get(c, 0.0) + ns
    busy = sum(total.values())
    parts = ", ".join(f"{c} {100 * ns / busy:.1f} % ({ns / steps / 1e6:.2f} ms)"
                      for c, ns in sorted(total.items(), key=lambda kv: -kv[1]))
    print(f"kernel classes {label}: GPU busy {busy / steps / 1e6:.2f} ms per step over {steps} steps "
          f"(start-up included): {parts}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
