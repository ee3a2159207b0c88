"""The step of a script without a step function: each top-level call of its root ``nn.Module``."""

from __future__ import annotations


def hook_root_module(torch, is_mine, on_root, on_enter, on_exit) -> list:
    """Global nn.Module hooks that find the step as the first root module called: ``on_root(mod,
    label)`` once, when it is found; ``on_enter(mod)`` / ``on_exit(mod)`` around each top-level call
    of it. Calls inside torch.compile tracing or where ``is_mine()`` is false are ignored. Returns the
    hook handles (``.remove()`` them)."""
    from torch.nn.modules import module as nn_module

    state = {"depth": 0, "root": None}

    def pre(mod, args):
        if torch.compiler.is_compiling() or not is_mine():
            return
        state["depth"] += 1
        if state["depth"] != 1:
            return
        if state["root"] is None:
            state["root"] = mod
            inner = getattr(mod, "_orig_mod", None)
            on_root(mod, type(mod).__name__ + (f"({type(inner).__name__})" if inner is not None else ""))
        if mod is state["root"]:
            on_enter(mod)

    def post(mod, args, output):
        if torch.compiler.is_compiling() or not is_mine():
            return
        state["depth"] = max(0, state["depth"] - 1)
        if state["depth"] == 0 and mod is state["root"]:
            on_exit(mod)

    return [nn_module.register_module_forward_pre_hook(pre),
            nn_module.register_module_forward_hook(post, always_call=True)]
