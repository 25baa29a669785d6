#!/usr/bin/env python3
"""st_check.py — check an exported Hugging Face model directory against the
safetensors format and what transformers expects, field by field, with
only the json and struct modules (no safetensors package, no numpy).

  st_check.py OUT CONFIG DTYPE [--shards N]
      OUT: the .safetensors path given to the export (single file), or the
      same path when sharded (then OUT.index.json and the shards are read).
      CONFIG: the hpt config (--print-config) the model was trained with.
      DTYPE: F32 or BF16, the dtype every tensor must have.
      --shards N: the export must be N shards with an index (N > 1), or
      exactly one file (N = 1, the default).

Checks, each failure printed as "FAIL <file>: <what>" (exit 1):
  - every file: 8-byte little-endian header length N, N % 8 == 0, N within
    the file; the header is one JSON object of UTF-8 text, space-padded;
    "__metadata__" is {"format": "pt", "hpt_export_id": ID}, one ID for all
    the shards of an export and its index; every other key has exactly
    "dtype" (the expected one), "shape" (list of ints), "data_offsets"
    ([begin, end], end - begin = prod(shape) x dtype size); the offsets,
    sorted, tile the data region exactly up to the end of the file;
  - the tensor names and shapes are exactly Hugging Face Llama's for
    CONFIG (tests/helpers/st_tool.py tensors());
  - sharded: OUT.index.json has "metadata"."total_size" (the sum of the
    tensors' bytes) and a "weight_map" naming every tensor exactly once,
    each in the shard file that holds it, shards named
    STEM-0000k-of-0000N.safetensors; no single OUT file beside them;
  - config.json beside: the Hugging Face Llama fields equal CONFIG's,
    architectures ["LlamaForCausalLM"], model_type "llama", torch_dtype
    float32/bfloat16 matching DTYPE.
"""
import json
import os
import struct
import sys

SIZES = {"F32": 4, "BF16": 2}
errors = []


def fail(where, what):
    errors.append(f"FAIL {where}: {what}")


def expected_tensors(cfg):
    C, I, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    H, KV = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    hd = C // H
    out = {"model.embed_tokens.weight": [V, C], "model.norm.weight": [C]}
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        out.update({p + "input_layernorm.weight": [C], p + "self_attn.q_proj.weight": [H * hd, C],
                    p + "self_attn.k_proj.weight": [KV * hd, C],
                    p + "self_attn.v_proj.weight": [KV * hd, C],
                    p + "self_attn.o_proj.weight": [C, H * hd],
                    p + "post_attention_layernorm.weight": [C],
                    p + "mlp.gate_proj.weight": [I, C], p + "mlp.up_proj.weight": [I, C],
                    p + "mlp.down_proj.weight": [C, I]})
    if not cfg.get("tie_word_embeddings", False):
        out["lm_head.weight"] = [V, C]
    return out


EXPORT_ID = {}  # shard path -> its __metadata__ hpt_export_id


def check_file(path, dtype):
    """The tensors of one file: {name: (shape, bytes)}."""
    blob = open(path, "rb").read()
    if len(blob) < 8:
        fail(path, f"{len(blob)} bytes, shorter than the length field")
        return {}
    (n,) = struct.unpack("<Q", blob[:8])
    if n % 8:
        fail(path, f"header length {n} is not a multiple of 8")
    if 8 + n > len(blob):
        fail(path, f"header length {n} beyond the file of {len(blob)} bytes")
        return {}
    raw = blob[8:8 + n]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        fail(path, f"header is not UTF-8: {e}")
        return {}
    body = text.rstrip(" ")
    if len(body) != len(text.strip()) or not body.startswith("{") or not body.endswith("}"):
        fail(path, "header is not one JSON object padded with trailing spaces")
    try:
        hdr = json.loads(body)
    except ValueError as e:
        fail(path, f"header is not JSON: {e}")
        return {}
    meta = dict(hdr.get("__metadata__") or {})
    EXPORT_ID[path] = meta.pop("hpt_export_id", None)
    if meta != {"format": "pt"} or not isinstance(EXPORT_ID[path], str):
        fail(path, f'__metadata__ is {hdr.get("__metadata__")!r}, want {{"format": "pt", '
                   f'"hpt_export_id": "..."}} (strings)')
    data = len(blob) - 8 - n
    out, spans = {}, []
    for name, e in hdr.items():
        if name == "__metadata__":
            continue
        if not isinstance(e, dict) or sorted(e) != ["data_offsets", "dtype", "shape"]:
            fail(path, f"{name}: entry keys {sorted(e) if isinstance(e, dict) else e!r}")
            continue
        if e["dtype"] != dtype:
            fail(path, f'{name}: dtype {e["dtype"]!r}, want {dtype!r}')
        shape, off = e["shape"], e["data_offsets"]
        if not (isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape)):
            fail(path, f"{name}: shape {shape!r}")
            continue
        if not (isinstance(off, list) and len(off) == 2 and all(isinstance(x, int) for x in off)):
            fail(path, f"{name}: data_offsets {off!r}")
            continue
        count = 1
        for d in shape:
            count *= d
        if off[1] - off[0] != count * SIZES.get(e["dtype"], 0):
            fail(path, f"{name}: data_offsets {off} hold {off[1] - off[0]} bytes, shape {shape} "
                       f"x {e['dtype']} needs {count * SIZES.get(e['dtype'], 0)}")
        spans.append((off[0], off[1], name))
        out[name] = (shape, off[1] - off[0])
    at = 0
    for b, e, name in sorted(spans):
        if b != at:
            fail(path, f"{name}: begins at {b}, the data so far ends at {at} (not tiled)")
        at = max(at, e)
    if at != data:
        fail(path, f"tensors end at byte {at} of a {data}-byte data region")
    return out


def main(argv):
    out, cfg_path, dtype = argv[0], argv[1], argv[2]
    shards = int(argv[argv.index("--shards") + 1]) if "--shards" in argv else 1
    cfg = json.load(open(cfg_path))
    d = os.path.dirname(out) or "."
    got = {}
    if shards == 1:
        if os.path.exists(out + ".index.json"):
            fail(out, "an index beside a single-file export")
        got = check_file(out, dtype)
    else:
        idx_path = out + ".index.json"
        idx = json.load(open(idx_path))
        if os.path.exists(out):
            fail(out, "a single file beside a sharded export (transformers would load it)")
        stem = os.path.basename(out)[:-len(".safetensors")]
        names = [f"{stem}-{k:05d}-of-{shards:05d}.safetensors" for k in range(1, shards + 1)]
        wm = idx.get("weight_map")
        if not isinstance(wm, dict):
            fail(idx_path, "no weight_map object")
            wm = {}
        if sorted(set(wm.values())) != names:
            fail(idx_path, f"weight_map names shards {sorted(set(wm.values()))}, want {names}")
        total = 0
        for fn in names:
            if not os.path.exists(os.path.join(d, fn)):
                fail(fn, "missing")
                continue
            part = check_file(os.path.join(d, fn), dtype)
            for name, (shape, nbytes) in part.items():
                if name in got:
                    fail(fn, f"{name} also in another shard")
                if wm.get(name) != fn:
                    fail(idx_path, f"weight_map puts {name} in {wm.get(name)!r}, it is in {fn}")
                got[name] = (shape, nbytes)
                total += nbytes
        for name in wm:
            if name not in got:
                fail(idx_path, f"weight_map names {name}, which no shard holds")
        idx_id = idx.get("metadata", {}).get("hpt_export_id")
        for fn in names:
            if EXPORT_ID.get(os.path.join(d, fn)) != idx_id:
                fail(fn, f"hpt_export_id {EXPORT_ID.get(os.path.join(d, fn))!r}, the index "
                         f"names {idx_id!r} (shards of one export carry its id)")
        if idx.get("metadata", {}).get("total_size") != total:
            fail(idx_path, f'metadata.total_size {idx.get("metadata", {}).get("total_size")!r}, '
                           f"the tensors hold {total} bytes")
    want = expected_tensors(cfg)
    for name, shape in want.items():
        if name not in got:
            fail(out, f"tensor {name} missing")
        elif got[name][0] != shape:
            fail(out, f"tensor {name} shape {got[name][0]}, Hugging Face Llama has {shape}")
    for name in got:
        if name not in want:
            fail(out, f"tensor {name} is not Hugging Face Llama's")
    hf_path = os.path.join(d, "config.json")
    hf = json.load(open(hf_path))
    for k in ["hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
              "num_key_value_heads", "vocab_size", "max_position_embeddings", "rms_norm_eps",
              "rope_theta", "tie_word_embeddings"]:
        if hf.get(k) != cfg.get(k):
            fail(hf_path, f"{k} = {hf.get(k)!r}, the model has {cfg.get(k)!r}")
    for k, v in [("architectures", ["LlamaForCausalLM"]), ("model_type", "llama"),
                 ("torch_dtype", {"F32": "float32", "BF16": "bfloat16"}[dtype])]:
        if hf.get(k) != v:
            fail(hf_path, f"{k} = {hf.get(k)!r}, want {v!r}")
    for e in errors:
        print(e)
    print(f"st_check {out}: {len(got)} tensors in {shards} file(s), {dtype}: "
          f"{'ok' if not errors else str(len(errors)) + ' problem(s)'}")
    return 1 if errors else 0


if __name__ == "__main__":
    if len(sys.argv) < 4:
        raise SystemExit(__doc__)
    sys.exit(main(sys.argv[1:]))
