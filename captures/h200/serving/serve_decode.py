"""A toy LLM serving engine: decode served from CUDA graphs of batch sizes 1 and 8, traced as engines do.

Model: Llama-style decoder in plain PyTorch, random init (torch.manual_seed(0)), bf16: RMSNorm, RoPE
(rotate-half), GQA attention (F.scaled_dot_product_attention, enable_gqa), SwiGLU MLP, untied LM head, no
biases; module names as Hugging Face's Llama (layers.N.self_attn.q_proj, layers.N.mlp.gate_proj, lm_head).
KV cache: static and contiguous, one K and one V buffer per layer of [max_batch, kv_heads, max_len, head_dim].

Decode: every sequence sits at the same fixed position P = max_len - 1: slots 0..P-1 hold its context
(random values, as if prefilled earlier), the step writes slot P (index_copy_) and attention reads ALL
max_len slots of the sequence's K and V (no mask: every slot is <= P, so this is exact causal attention).
So one decode step of batch bs reads bs x layers x 2 x kv_heads x max_len x head_dim x 2 B of KV cache.

Serving as vLLM / SGLang do it:
- start-up: one torch.cuda.CUDAGraph per batch size (8 first, then 1, one shared memory pool; two eager
  warm-up forwards on a side stream before each capture). Each capture is recorded by its own
  torch.profiler session (record_shapes=True, with_stack=False) into capture_traces/bs_{bs}_rank0.json.gz,
  inside a `capture_{bs}_DECODE` range: SGLang's layout and range name (TraceLens's sglang_decode pair).
- an engine iteration is one call of engine_iteration(), wrapped in vLLM's per-iteration range
  `execute_context_{n_ctx_reqs}({ctx_tokens})_generation_{n_gen_reqs}({gen_tokens})` (vLLM v1
  GPUWorker.annotate_profile) holding `gpu_model_runner: preprocess / forward / sample / postprocess`
  (vLLM's model-runner ranges). Before any recording: 4 decode iterations and one prefill, unprofiled,
  then 40 decode iterations timed with CUDA events (unprofiled). Decode: copy the last tokens into the graph's static input, replay the
  graph (embedding .. LM head), argmax eagerly, tokens to the host (.tolist(): DtoH copy + sync).
  Prefill: the prompt tokens HtoD, an eager forward over the prompts (causal SDPA over the new tokens,
  K and V written to slots 0..T-1 of the prompts' cache rows, LM head on each prompt's last token only).
- serve_decode_rank0.json.gz: the steady-state window, decode iterations alternating bs 1 and bs 8.
- serve_mixed_rank0.json.gz: prefill iterations (eager) then decode iterations (graph replays).
- serve_decode_stats.json: config, bytes per step, tokens per step, CUDA-event times, copy bandwidth.

--no-profile runs the same engine without any profiler of its own (for `tracekit capture serve_decode.py
--step-fn serve_decode:engine_iteration -- --no-profile`). --device cpu runs it eagerly (no graphs).
"""
import argparse
import contextlib
import gzip
import json
import os
import shutil
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, record_function


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).type_as(x) * self.weight


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Attention(nn.Module):
    def __init__(self, d, h, hkv, max_batch, max_len, dtype):
        super().__init__()
        self.h, self.hkv, self.hd = h, hkv, d // h
        self.q_proj = nn.Linear(d, h * self.hd, bias=False)
        self.k_proj = nn.Linear(d, hkv * self.hd, bias=False)
        self.v_proj = nn.Linear(d, hkv * self.hd, bias=False)
        self.o_proj = nn.Linear(h * self.hd, d, bias=False)
        shape = (max_batch, hkv, max_len, self.hd)
        self.register_buffer("k_cache", torch.zeros(shape, dtype=dtype), persistent=False)
        self.register_buffer("v_cache", torch.zeros(shape, dtype=dtype), persistent=False)

    def forward(self, x, cos, sin, positions, rows):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.h, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.hkv, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.hkv, self.hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        kc, vc = self.k_cache[rows], self.v_cache[rows]      # a view: these sequences' cache rows
        kc.index_copy_(2, positions, k)
        vc.index_copy_(2, positions, v)
        if T == 1:        # decode: the full cache (all slots <= the fixed position P)
            y = F.scaled_dot_product_attention(q, kc, vc, enable_gqa=self.hkv != self.h)
        else:             # prefill from position 0: causal over the prompt's own K, V
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.hkv != self.h)
        return self.o_proj(y.transpose(1, 2).reshape(B, T, self.h * self.hd))


class MLP(nn.Module):
    def __init__(self, d, hidden):
        super().__init__()
        self.gate_proj = nn.Linear(d, hidden, bias=False)
        self.up_proj = nn.Linear(d, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, d, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, d, h, hkv, hidden, max_batch, max_len, dtype):
        super().__init__()
        self.input_layernorm = RMSNorm(d)
        self.self_attn = Attention(d, h, hkv, max_batch, max_len, dtype)
        self.post_attention_layernorm = RMSNorm(d)
        self.mlp = MLP(d, hidden)

    def forward(self, x, cos, sin, positions, rows):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, positions, rows)
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama(nn.Module):
    def __init__(self, vocab, d, layers, h, hkv, hidden, max_batch, max_len, dtype, theta=10000.0):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(DecoderLayer(d, h, hkv, hidden, max_batch, max_len, dtype)
                                    for _ in range(layers))
        self.norm = RMSNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        hd = d // h
        inv = 1.0 / theta ** (torch.arange(0, hd, 2).float() / hd)
        f = torch.outer(torch.arange(max_len).float(), inv)
        emb = torch.cat((f, f), dim=-1)
        self.register_buffer("cos", emb.cos().to(dtype), persistent=False)
        self.register_buffer("sin", emb.sin().to(dtype), persistent=False)

    def forward(self, input_ids, positions, rows, last_only=False):
        """input_ids [B, T] at `positions` [T] of cache rows `rows` (a slice); logits [B, T or 1, vocab]."""
        cos = self.cos[positions][None, None]             # [1, 1, T, hd]
        sin = self.sin[positions][None, None]
        x = self.embed_tokens(input_ids)
        for layer in self.layers:
            x = layer(x, cos, sin, positions, rows)
        if last_only:
            x = x[:, -1:]
        return self.lm_head(self.norm(x))


def build_model(a, dev):
    torch.manual_seed(0)
    with torch.device(dev):
        model = Llama(a.vocab, a.d, a.layers, a.heads, a.kv_heads, a.hidden, a.max_batch, a.max_len,
                      torch.bfloat16).to(torch.bfloat16)
    model.eval().requires_grad_(False)
    g = torch.Generator(device=dev).manual_seed(1)
    for layer in model.layers:                               # the sequences' earlier context
        for c in (layer.self_attn.k_cache, layer.self_attn.v_cache):
            c[:, :, :a.max_len - 1].normal_(generator=g)
    return model


def profiler(dev):
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    return torch.profiler.profile(activities=acts, record_shapes=True, with_stack=False)


def export_gz(prof, path):
    """export_chrome_trace to PATH (.json.gz): written as .json, gzipped, the .json removed."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    raw = path[:-3]
    prof.export_chrome_trace(raw)
    with open(raw, "rb") as src, gzip.open(path, "wb", compresslevel=6) as dst:
        shutil.copyfileobj(src, dst)
    os.remove(raw)
    print(f"serve_decode: wrote {path} ({os.path.getsize(path)} B)", flush=True)


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize()


class Engine:
    """Static buffers, the CUDA graphs per batch size and their output logits."""

    def __init__(self, model, a, dev):
        self.model, self.a, self.dev = model, a, dev
        self.P = a.max_len - 1
        self.input_ids = torch.zeros(a.max_batch, 1, dtype=torch.long, device=dev)
        self.next_tokens = torch.randint(0, a.vocab, (a.max_batch, 1), device=dev,
                                         generator=torch.Generator(device=dev).manual_seed(2))
        self.positions = torch.full((1,), self.P, dtype=torch.long, device=dev)
        self.graphs, self.logits = {}, {}
        self.pool = None

    def forward_decode(self, bs):
        return self.model(self.input_ids[:bs], self.positions, slice(0, bs))

    def capture(self, bs, trace_path=None):
        """Warm up twice on a side stream, then capture bs's graph (recorded into trace_path if given)."""
        dev = self.dev
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                self.forward_decode(bs)
        torch.cuda.current_stream().wait_stream(side)
        sync(dev)
        if self.pool is None:
            self.pool = torch.cuda.graph_pool_handle()
        prof = profiler(dev) if trace_path else contextlib.nullcontext()
        t0 = time.perf_counter()
        with prof:
            with record_function(f"capture_{bs}_DECODE"):
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g, pool=self.pool):
                    self.logits[bs] = self.forward_decode(bs)
            sync(dev)
        self.graphs[bs] = g
        print(f"serve_decode: captured bs {bs} in {time.perf_counter() - t0:.3f} s", flush=True)
        if trace_path:
            export_gz(prof, trace_path)


def engine_iteration(engine, work):
    """One engine iteration. work = ("decode", bs) or ("prefill", row0, prompts [n, T] on the CPU).
    Returns the new tokens (a list) once they are on the host."""
    if work[0] == "decode":
        bs = work[1]
        name = f"execute_context_0(0)_generation_{bs}({bs})"
    else:
        row0, prompts = work[1], work[2]
        n, T = prompts.shape
        name = f"execute_context_{n}({n * T})_generation_0(0)"
    with record_function(name):
        if work[0] == "decode":
            with record_function("gpu_model_runner: preprocess"):
                engine.input_ids[:bs].copy_(engine.next_tokens[:bs])
            with record_function("gpu_model_runner: forward"):
                if bs in engine.graphs:
                    engine.graphs[bs].replay()
                    logits = engine.logits[bs]
                else:                                  # CPU: no graphs, the same forward eagerly
                    logits = engine.forward_decode(bs)
            rows = slice(0, bs)
        else:
            with record_function("gpu_model_runner: preprocess"):
                ids = prompts.to(engine.dev, non_blocking=True)
                positions = torch.arange(T, device=engine.dev)
            with record_function("gpu_model_runner: forward"):
                logits = engine.model(ids, positions, slice(row0, row0 + n), last_only=True)
            rows = slice(row0, row0 + n)
        with record_function("gpu_model_runner: sample"):
            nxt = logits[:, -1].argmax(-1, keepdim=True)
            engine.next_tokens[rows].copy_(nxt)
        with record_function("gpu_model_runner: postprocess"):
            return nxt.flatten().tolist()


def timed(engine, work, dev):
    """engine_iteration under CUDA events: (tokens, GPU ms from before preprocess to after sample)."""
    if dev.type != "cuda":
        t0 = time.perf_counter()
        toks = engine_iteration(engine, work)
        return toks, (time.perf_counter() - t0) * 1e3
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    toks = engine_iteration(engine, work)          # .tolist() synchronises
    e1.record()
    e1.synchronize()
    return toks, e0.elapsed_time(e1)


def bench_replay(engine, bs, n=50):
    """Median GPU ms of one replay of bs's graph, back to back, CUDA events around each."""
    g = engine.graphs[bs]
    for _ in range(5):
        g.replay()
    ts = []
    for _ in range(n):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        g.replay()
        e1.record()
        e1.synchronize()
        ts.append(e0.elapsed_time(e1))
    return statistics.median(ts)


def copy_bandwidth(dev, nbytes=2 << 30):
    """Device-to-device copy bandwidth, bytes read + written per second (median of 10)."""
    src = torch.empty(nbytes // 2, dtype=torch.bfloat16, device=dev).normal_()
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    ts = []
    for _ in range(10):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        dst.copy_(src)
        e1.record()
        e1.synchronize()
        ts.append(e0.elapsed_time(e1))
    ms = statistics.median(ts)
    del src, dst
    torch.cuda.empty_cache()
    return {"bytes_moved": 2 * nbytes, "median_ms": ms, "bytes_per_s": 2 * nbytes / (ms * 1e-3), "runs_ms": ts}


def sizes(model, a):
    """Bytes and FLOPs a test needs, from the model's own tensors."""
    wbytes = sum(p.numel() * p.element_size() for p in model.parameters())
    emb = model.embed_tokens.weight
    emb_bytes = emb.numel() * emb.element_size()
    hd = a.d // a.heads
    per_seq_kv_read = 2 * a.layers * a.kv_heads * a.max_len * hd * 2
    per_seq_kv_written = 2 * a.layers * a.kv_heads * hd * 2
    out = {"params": sum(p.numel() for p in model.parameters()), "param_bytes": wbytes,
           "embedding_table_bytes": emb_bytes,
           "kv_cache_bytes_allocated": sum(b.numel() * b.element_size() for n, b in model.named_buffers()
                                           if n.endswith("_cache")),
           "kv_bytes_read_per_sequence_per_step": per_seq_kv_read,
           "kv_bytes_written_per_sequence_per_step": per_seq_kv_written, "per_batch_size": {}}
    for bs in (1, 8):
        row = bs * a.d * 2
        out["per_batch_size"][str(bs)] = {
            "tokens_per_step": bs,
            "weight_bytes_read_per_step": wbytes - emb_bytes + row,
            "kv_bytes_read_per_step": bs * per_seq_kv_read,
            "kv_bytes_written_per_step": bs * per_seq_kv_written,
            "weights_plus_kv_read_bytes": wbytes - emb_bytes + row + bs * per_seq_kv_read,
        }
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--d", type=int, default=2048)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--kv-heads", type=int, default=4)
    p.add_argument("--hidden", type=int, default=5632)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--max-len", type=int, default=1024)
    p.add_argument("--max-batch", type=int, default=8)
    p.add_argument("--prompt-len", type=int, default=256)
    p.add_argument("--window", type=int, default=20, help="decode iterations in the steady-state window")
    p.add_argument("--out", default="serve_out", help="folder for the traces and the stats JSON")
    p.add_argument("--no-profile", action="store_true", help="no profiler sessions of the script's own")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = p.parse_args()
    dev = torch.device(a.device)
    prof_on = not a.no_profile
    stats = {"config": {k: v for k, v in vars(a).items()}, "position_P": a.max_len - 1,
             "attention_reads": "all max_len slots of each sequence (slots 0..P-1 context, slot P written this step)",
             "torch": torch.__version__, "cuda": torch.version.cuda,
             "device_name": torch.cuda.get_device_name(0) if dev.type == "cuda" else "cpu"}
    if dev.type == "cuda":
        stats["copy_bandwidth"] = copy_bandwidth(dev)
        print(f"serve_decode: D2D copy {stats['copy_bandwidth']['bytes_per_s'] / 1e12:.3f} TB/s (read+write)", flush=True)
    model = build_model(a, dev)
    stats["sizes"] = sizes(model, a)
    print("serve_decode: " + json.dumps(stats["sizes"]), flush=True)
    engine = Engine(model, a, dev)
    g = torch.Generator().manual_seed(3)
    prompts = torch.randint(0, a.vocab, (a.max_batch, a.prompt_len), generator=g)
    if dev.type == "cuda":
        prompts = prompts.pin_memory()
    with torch.inference_mode():
        if dev.type == "cuda":                          # start-up: capture, largest batch first
            for bs in (8, 1):
                engine.capture(bs, os.path.join(a.out, "capture_traces", f"bs_{bs}_rank0.json.gz") if prof_on else None)
            stats["graph_replay_ms_median"] = {str(bs): bench_replay(engine, bs) for bs in (1, 8)}
        for i in range(4):                               # unprofiled warm iterations
            engine_iteration(engine, ("decode", (1, 8)[i % 2]))
        # one unprofiled prefill, so that the recorded ones are warm (the first one in a process loads
        # its kernels lazily and picks its GEMMs: 763 ms against 13 ms in the first H200 call)
        stats["prefill_warmup_gpu_ms"] = timed(engine, ("prefill", 0, prompts[:a.max_batch // 2]), dev)[1]
        unprof = {"1": [], "8": []}
        for i in range(40):
            bs = (1, 8)[i % 2]
            unprof[str(bs)].append(timed(engine, ("decode", bs), dev)[1])
        stats["iteration_gpu_ms_unprofiled"] = unprof
        # the steady-state window
        prof = profiler(dev) if prof_on else contextlib.nullcontext()
        window = []
        with prof:
            for i in range(a.window):
                bs = (1, 8)[i % 2]
                toks, ms = timed(engine, ("decode", bs), dev)
                window.append({"iteration": i, "phase": "decode", "bs": bs, "tokens": bs, "gpu_ms": ms})
        stats["window"] = window
        if prof_on:
            export_gz(prof, os.path.join(a.out, "serve_decode_rank0.json.gz"))
        # mixed: prefill iterations (eager), then decode iterations (graph replays)
        half = a.max_batch // 2
        plan = [("prefill", 0, prompts[:half]), ("prefill", half, prompts[half:])] + [("decode", 8)] * 6 + [("decode", 1)] * 2
        prof = profiler(dev) if prof_on else contextlib.nullcontext()
        mixed = []
        with prof:
            for i, work in enumerate(plan):
                toks, ms = timed(engine, work, dev)
                n_tok = work[2].numel() if work[0] == "prefill" else work[1]
                mixed.append({"iteration": i, "phase": work[0], "bs": len(toks), "tokens": n_tok, "gpu_ms": ms})
        stats["mixed"] = mixed
        if prof_on:
            export_gz(prof, os.path.join(a.out, "serve_mixed_rank0.json.gz"))
    for name, rows in (("window", window), ("mixed", mixed)):
        for phase, bs in sorted({(r["phase"], r["bs"]) for r in rows}):
            ms = [r["gpu_ms"] for r in rows if r["phase"] == phase and r["bs"] == bs]
            print(f"serve_decode: {name} {phase} bs {bs}: {len(ms)} iterations, median {statistics.median(ms):.3f} ms", flush=True)
    for bs, ms in unprof.items():
        print(f"serve_decode: unprofiled decode bs {bs}: median {statistics.median(ms):.3f} ms", flush=True)
    if "graph_replay_ms_median" in stats:
        print(f"serve_decode: replay alone median ms {stats['graph_replay_ms_median']}", flush=True)
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, "serve_decode_stats.json" if prof_on else "serve_decode_stats_noprofile.json")
    with open(path, "w") as f:
        json.dump(stats, f, indent=1)
    print(f"serve_decode: wrote {path}", flush=True)


if __name__ == "__main__":
    main()
