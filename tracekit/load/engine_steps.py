"""Serving engines' own per-iteration annotations: which events are engine iterations, and what each
says about its batch (prefill and decode requests, their query tokens, the keys they attend where stated).

Recorded as ``user_annotation`` ranges around one engine iteration (one scheduler step):

- vLLM (``--profiler-config`` annotations, vLLM PR 37524; TraceLens's patches before it):
  ``execute_{tokens}_context_{n}(sq{Σq}sk{Σk}sqsq{Σq²}sqsk{Σqk})_generation_{n}(sq..sk..sqsq..sqsk..)``,
  the older ``execute_context_{n}({Σq})_generation_{n}({Σq})``;
- SGLang: ``step[DECODE bs=32]``, ``step[EXTEND bs=2 toks=14721 ...]``, ``step[MIXED bs=2 c=1 g=1 c_sq=5 ...]``;
- ATOM: ``prefill[bs=2 tok=14721 ...]``, ``decode[bs=64 tok=64 ...]``.

One trace may hold two families around the same iteration (SGLang with vLLM-style annotations): the
first family in ``FAMILIES`` with a match is the step rule, the others are ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

VLLM_DETAILED = re.compile(r"^execute_(\d+)_context_(\d+)\(sq(\d+)sk(\d+)sqsq\d+sqsk\d+\)"     # sk: keys in all
                           r"_generation_(\d+)\(sq(\d+)sk(\d+)sqsq\d+sqsk\d+\)")
VLLM_NATIVE = re.compile(r"^execute_context_(\d+)\((\d+)\)_generation_(\d+)\((\d+)\)")
SGLANG = re.compile(r"^step\[(EXTEND|DECODE|MIXED|PREFILL|IDLE)\b([^\]]*)\]")
ATOM = re.compile(r"^(prefill|decode)\[(.*)\]$")
FAMILIES = (("vLLM", (VLLM_DETAILED, VLLM_NATIVE)), ("SGLang", (SGLANG,)), ("ATOM", (ATOM,)))
ITERATION = re.compile("|".join(p.pattern for _, ps in FAMILIES for p in ps))


@dataclass(frozen=True)
class EngineStep:
    """What one iteration annotation says: requests and query tokens of prefill (context) and decode
    (generation) sequences. ``tokens`` is the batch's token count, the size a graph was captured for."""

    family: str
    prefill_requests: int
    prefill_tokens: int
    decode_requests: int
    decode_tokens: int
    prefill_keys: int | None = None     # keys the prefill requests attend in all (vLLM's ``sk``, SGLang's ``c_sk``)
    decode_keys: int | None = None      # the same for the decode requests (``sk``, ``g_sk``); None: not annotated

    def keys_for(self, query_tokens: int) -> int | None:
        """The keys an attention call over ``query_tokens`` query tokens reads in all, where the annotation
        says: the step's total for a call over the whole batch, one phase's for a call over that phase's
        tokens only (SGLang's separate prefill and decode attention of a mixed batch); else None."""
        total = None if self.prefill_keys is None and self.decode_keys is None else \
            (self.prefill_keys or 0) + (self.decode_keys or 0)
        if query_tokens == self.tokens and (self.prefill_tokens == 0 or self.prefill_keys is not None) \
                and (self.decode_tokens == 0 or self.decode_keys is not None):
            return total
        if self.prefill_tokens == self.decode_tokens:      # a call over one phase, but which: not told
            return None
        if query_tokens == self.decode_tokens:
            return self.decode_keys
        return self.prefill_keys if query_tokens == self.prefill_tokens else None

    @property
    def tokens(self) -> int:
        return self.prefill_tokens + self.decode_tokens

    @property
    def phase(self) -> str | None:
        """prefill, decode or mixed (both in one batch); None for an idle step."""
        if self.prefill_requests and self.decode_requests:
            return "mixed"
        return "prefill" if self.prefill_requests else "decode" if self.decode_requests else None


def is_iteration(name: str) -> bool:
    return ITERATION.match(name) is not None


def family_of(name: str) -> str | None:
    for family, patterns in FAMILIES:
        if any(p.match(name) for p in patterns):
            return family
    return None


def parse(name: str) -> EngineStep | None:
    """The annotation's batch, or None when ``name`` is no engine iteration."""
    if m := VLLM_DETAILED.match(name):
        _, pr, pq, pk, dr, dq, dk = (int(g) for g in m.groups())
        return EngineStep("vLLM", pr, pq, dr, dq, pk, dk)
    if m := VLLM_NATIVE.match(name):
        pr, pq, dr, dq = (int(g) for g in m.groups())
        return EngineStep("vLLM", pr, pq, dr, dq)
    if m := SGLANG.match(name):
        kind, kv = m.group(1), {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2))}
        bs, ck, gk = kv.get("bs", 0), kv.get("c_sk"), kv.get("g_sk")
        if kind == "DECODE":
            return EngineStep("SGLang", 0, 0, bs, kv.get("g_sq", bs), None, gk)
        if kind in ("EXTEND", "PREFILL"):
            return EngineStep("SGLang", bs, kv.get("c_sq", kv.get("toks", 0)), 0, 0, ck)
        if kind == "MIXED":
            return EngineStep("SGLang", kv.get("c", 0), kv.get("c_sq", 0), kv.get("g", 0), kv.get("g_sq", 0), ck, gk)
        return EngineStep("SGLang", 0, 0, 0, 0)
    if m := ATOM.match(name):
        kv = dict(re.findall(r"(\w+)=(\d+)", m.group(2)))
        bs, tok = int(kv.get("bs", 0)), int(kv.get("tok", 0))
        return EngineStep("ATOM", bs, tok, 0, 0) if m.group(1) == "prefill" else EngineStep("ATOM", 0, 0, bs, tok)
    return None


def annotated_steps(steps) -> dict[int, EngineStep]:
    """Step index → what its engine annotation says, for the steps that are engine iterations."""
    return {s.index: e for s in steps or [] if (e := parse(s.name)) is not None}
