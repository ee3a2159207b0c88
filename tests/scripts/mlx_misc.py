"""Small MLX scripts for capture tests: python mlx_misc.py CASE [N].

raise   evaluate one graph, then raise ValueError (capture: exit 1, traceback, bundle kept)
exit N  evaluate one graph, then sys.exit(N)
reuse   evaluate y = (a * 2) + 1, then h = a * 2 itself: h was computed with y, so the second
        evaluation has no work (capture must leave the script's graph as it found it)
state   mx.compile with captured state (inputs=/outputs=), evaluated with mx.async_eval
"""
import sys
from functools import partial

import mlx.core as mx


def main():
    case = sys.argv[1]
    a = mx.arange(16, dtype=mx.float32).reshape(4, 4)
    if case == "state":
        state = [mx.zeros((4, 4))]

        @partial(mx.compile, inputs=state, outputs=state)
        def step(x):
            state[0] = state[0] * 0.5 + mx.exp(x)
            return state[0].sum()

        for _ in range(2):
            s = step(a)
            mx.async_eval(s)
            mx.eval(s)
        print(f"state sum {s.item():.3f}")
        return
    h = a * 2
    y = h + 1
    mx.eval(y)
    if case == "raise":
        raise ValueError("deliberate failure after one evaluation")
    if case == "exit":
        sys.exit(int(sys.argv[2]))
    mx.eval(h)
    print(f"reuse: y[0,0]={y[0, 0].item()} h[0,0]={h[0, 0].item()}")


if __name__ == "__main__":
    main()
