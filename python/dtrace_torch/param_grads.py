"""A module's contribution to its parameters' gradients, one use at a time.

Why not .grad: a parameter's gradient is the sum of every use of it in every
backward since it was last zeroed (tied weights: the input embedding and the
output head; gradient accumulation: every micro-batch), and under
DistributedDataParallel the sum over ranks, reduced in the reducer's buckets.
A backward that accumulates one use's contribution in a random order (an
embedding's index_add_, a bias gradient's atomics) shows in .grad, but nothing
there says which module's backward made it.

Why a node hook: the autograd engine adds the gradients of a parameter's uses in
the input buffer of its AccumulateGrad node before calling it, so a hook on that
node, or on the parameter, sees the sum too. One use's contribution exists only
as an output of the node that used the parameter: the node whose
next_functions holds the parameter's AccumulateGrad. A hook on that node
(Node.register_hook(fn(grad_inputs, grad_outputs)), torch 1.13 and 2.x) is
called once that node has run, with grad_inputs indexed like next_functions:
the contribution, before it is summed with anything (and before DDP's reducer,
whose hooks are on the AccumulateGrad nodes, sees it).

Which nodes are a module call's: those reached from the grad_fn of its outputs
without going through the grad_fn of its inputs (the tensors it was called
with), so the walk stays inside what the call computed. A node that two walks
reach (a parameter a module and its submodule both own) is claimed by the
first, which is the innermost call (forward hooks run inner modules first)."""
from __future__ import annotations

from typing import Callable, Dict, Iterable, List, Sequence, Tuple

import torch

PREFIX = "param_grad."
# A key of Node.metadata (a dict per node, torch 1.13 and 2.x): the indices of
# next_functions a module call has already claimed.
_CLAIMED = "dtrace_torch.param_grad"

Uses = List[Tuple[object, List[Tuple[int, str]]]]


def record_name(param: str, use: int) -> str:
    """param_grad.<param> for a parameter's first use in one module call,
    param_grad.<param>#<k> for its k-th (k >= 2): one name per use, so that a
    record's occurrence counts the module's calls, as its inputs' do."""
    return f"{PREFIX}{param}" if use == 1 else f"{PREFIX}{param}#{use}"


def find_uses(outputs: Iterable[torch.Tensor], params: Dict[int, str], stops: Iterable[torch.Tensor]) -> Uses:
    """The nodes one module call made that use one of `params` ({id(parameter):
    name}), each with the (index in next_functions, record name) of its uses, in
    a fixed order (depth first from the outputs, next_functions in order)."""
    if not params:
        return []
    stop = {id(t.grad_fn): t.grad_fn for t in stops if t.grad_fn is not None}
    seen: Dict[int, object] = {}  # holds the nodes, so that their ids stay theirs
    stack = [t.grad_fn for t in outputs if t.grad_fn is not None]
    stack.reverse()
    uses: Uses = []
    count: Dict[str, int] = {}
    while stack:
        node = stack.pop()
        if id(node) in seen or id(node) in stop:
            continue
        seen[id(node)] = node
        found: List[Tuple[int, str]] = []
        children = []
        for i, (child, _) in enumerate(node.next_functions):
            if child is None:
                continue
            variable = getattr(child, "variable", None)  # only AccumulateGrad has one
            if variable is None:
                children.append(child)
                continue
            name = params.get(id(variable))
            if name is None:
                continue
            claimed = node.metadata.setdefault(_CLAIMED, set())
            if i in claimed:
                continue
            claimed.add(i)
            count[name] = count.get(name, 0) + 1
            found.append((i, record_name(name, count[name])))
        if found:
            uses.append((node, found))
        stack.extend(reversed(children))
    return uses


def watch(uses: Uses, record: Callable[[List[Tuple[str, torch.Tensor]]], None]) -> None:
    """Calls record([(name, gradient)]) as each node of `uses` has run, with the
    gradients it produced for the parameters it used."""
    for node, found in uses:
        def hook(grad_inputs: Sequence, grad_outputs: Sequence, found=found):
            record([(name, grad_inputs[i]) for i, name in found if grad_inputs[i] is not None])
            return None

        node.register_hook(hook)
