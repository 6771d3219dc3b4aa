"""Compiled regions (python/dtrace_torch/compiled.py; docs/torch.md,
torch.compile) without bisect: a whole model compiled is named after its
class, a region's graph is recorded op by op at kernel level in
<region>/eager while the job's results stay the compiled code's, its
generated kernels one by one in <region>/inductor and its backward's in
bwd/<region>/inductor, a region's captured call keeps its arguments'
strides, and the modules import in one direction. On torch 1.13 (no
torch.compile) only what needs none runs."""
import ast
import collections
import json
import os
import sys
import tempfile
import unittest

import torch

import dtrace_torch as dt
from dtrace_torch import calls, compiled

HAS_COMPILE = hasattr(torch, "compile")
PACKAGE = os.path.dirname(os.path.abspath(compiled.__file__))


OUTPUT_CODE = '''
cpp_fused_relu_0 = async_compile.cpp_pybinding(['float*', 'const float*', 'float*', 'const int64_t'], \'\'\'
#include "/tmp/x.h"
extern "C"  void kernel(float* in_out_ptr0,
                       const float* in_ptr0,
                       float* out_ptr0,
                       const int64_t ks0)
{
}
\'\'\')

cpp_fused_sum_1 = async_compile.cpp_pybinding(['const float*', 'float*'], \'\'\'
extern "C"  void kernel(const float* in_ptr0,
                       float* out_ptr0)
{
}
\'\'\')
'''


class Net(torch.nn.Module):
    """A dropout (random numbers drawn inside the region) between two layers."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 16)
        self.drop = torch.nn.Dropout(0.5)
        self.b = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.b(self.drop(torch.relu(self.a(x))))


class GeneratedKernels(unittest.TestCase):
    def test_each_parameter_is_read_written_or_both_as_inductor_names_it(self):
        from dtrace_torch import inductor
        self.assertEqual(inductor.kernel_params(OUTPUT_CODE), {
            "cpp_fused_relu_0": [("in_out_ptr0", "inout"), ("in_ptr0", "in"), ("out_ptr0", "out"),
                                 ("ks0", "scalar")],
            "cpp_fused_sum_1": [("in_ptr0", "in"), ("out_ptr0", "out")]})


class Strides(unittest.TestCase):
    def test_a_view_argument_is_called_again_as_the_view_it_was(self):
        rows = torch.arange(30.0).reshape(3, 10)
        for view in (rows[:, :-1], rows[1:, 2:], rows.t()):
            spec = calls.encode(view, "input.0")
            again = calls.restrided(view.contiguous(), spec)
            self.assertEqual((again.stride(), again.storage_offset()), (view.stride(), view.storage_offset()))
            self.assertTrue(torch.equal(again, view))

    def test_contiguous_and_overlapping_arguments_stay_contiguous(self):
        self.assertNotIn("stride", calls.encode(torch.ones(3, 4), "x"))
        expanded = torch.ones(3, 1).expand(3, 4)
        again = calls.restrided(expanded.contiguous(), calls.encode(expanded, "x"))
        self.assertTrue(again.is_contiguous())


class Declared(unittest.TestCase):
    def test_the_regions_forward_and_backward_are_declared_with_their_parts(self):
        with tempfile.TemporaryDirectory() as d:
            path = compiled.declare(d, 3, {"blocks.0": torch.nn.Linear(2, 2), "GPT": torch.nn.Linear(2, 2)})
            self.assertEqual(path, os.path.join(d, "regions.rank3.json"))
            with open(path, encoding="utf-8") as f:
                declared = json.load(f)["regions"]
            self.assertEqual([(r["scope"], r["kind"]) for r in declared],
                             [("fwd/blocks.0", "torch.compile"), ("bwd/blocks.0", "torch.compile"),
                              ("fwd/GPT", "torch.compile"), ("bwd/GPT", "torch.compile")])
            self.assertEqual(set(declared[0]["parts"]), {compiled.EAGER, compiled.INDUCTOR})
            self.assertEqual(os.listdir(d), ["regions.rank3.json"])  # no temporary file left


class GuardsHeld(unittest.TestCase):
    def test_other_errors_pass_through_and_a_body_that_compiles_nothing_runs(self):
        with compiled.guards_held("lin"):
            pass
        with self.assertRaises(ValueError):
            with compiled.guards_held("lin"):
                raise ValueError("not dynamo's")

    @unittest.skipUnless(HAS_COMPILE, f"torch {torch.__version__} has no torch.compile")
    def test_a_region_that_would_compile_again_is_refused_with_dynamos_reason(self):
        import torch._dynamo
        torch._dynamo.reset()
        region = torch.compile(torch.nn.Linear(32, 4))
        rows = torch.randn(8, 33)
        region(rows[:, :-1])  # as the job called it: a view
        with compiled.guards_held("lin"):
            region(rows[:, :-1])  # the same strides: the code the job ran
        with self.assertRaises(dt.CaptureError) as caught:
            with compiled.guards_held("lin"):
                region(rows[:, :-1].contiguous())
        self.assertIn("compiled region lin, re-run from its captured inputs, would be compiled again", str(caught.exception))
        self.assertIn("stride mismatch", str(caught.exception))
        # Wrapped by isolation (the inputs do not fit): the recompile is its cause.
        with self.assertRaises(dt.CaptureError) as caught:
            with compiled.guards_held("lin"):
                try:
                    with torch.no_grad():
                        region(rows[:, :-1])
                except RuntimeError as err:
                    raise dt.CaptureError(f"the captured inputs do not fit: {err}") from err
        self.assertIn("grad_mode", str(caught.exception))
        self.assertIn("would be compiled again", str(caught.exception))


class Seam(unittest.TestCase):
    def imports(self, module: str):
        with open(os.path.join(PACKAGE, module + ".py"), encoding="utf-8") as f:
            tree = ast.parse(f.read())
        found = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                found.update([node.module] if node.module else [a.name for a in node.names])
        return found

    def test_hooks_and_isolation_know_regions_and_not_the_other_way(self):
        self.assertIn("compiled", self.imports("hooks"))
        self.assertIn("compiled", self.imports("isolation"))
        self.assertFalse({"hooks", "isolation", "recording"} & self.imports("compiled"))


@unittest.skipUnless(HAS_COMPILE, f"torch {torch.__version__} has no torch.compile")
class Regions(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def test_a_whole_model_is_named_after_its_class(self):
        model = torch.compile(Net())
        self.assertEqual(list(compiled.find(model)), ["Net"])
        self.assertEqual(list(compiled.hooked_modules(model, compiled.find(model))), [("Net", model)])

    def run_model(self, level=None):
        torch.manual_seed(0)
        model = torch.compile(Net())
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x = torch.randn(5, 8)
        if level is None:
            torch.manual_seed(1)
            out = model(x)
            out.sum().backward()
            return out.detach(), None
        run = os.path.join(self.dir.name, level)
        rec = dt.Recorder(model, opt, run_dir=run, level=level)
        for step in rec.steps(1):
            with rec.step(step):
                torch.manual_seed(1)
                out = model(x)
                out.sum().backward()
        rec.close()
        records = [r for r in map(json.loads, open(os.path.join(run, "rank0.jsonl"))) if "scope" in r]
        return out.detach(), records

    def test_the_graph_is_recorded_op_by_op_and_the_job_runs_as_compiled(self):
        plain, _ = self.run_model()
        out, records = self.run_model("kernel")
        ops = collections.defaultdict(list)
        for r in records:
            ops[r["scope"]].append(r["op"])
        self.assertEqual(set(ops["fwd/Net"]), {"OptimizedModule", "torch.compile"})
        self.assertIn("aten.addmm.default", ops["fwd/Net/eager"])
        self.assertTrue(any("dropout" in op or "bernoulli" in op for op in ops["fwd/Net/eager"]),
                        ops["fwd/Net/eager"])
        self.assertFalse([s for s in ops if "_orig_mod" in s])
        # The generated kernels, each an op as the output code names it,
        # between the eager graph's ops and the region's results.
        kernels = ops["fwd/Net/inductor"]
        self.assertTrue(kernels and all(op.startswith("cpp_fused_") for op in kernels), dict(ops))
        at = [r["scope"] for r in records]
        region_out = [i for i, r in enumerate(records)
                      if r["scope"] == "fwd/Net" and r["op"] == "torch.compile" and r["io"] == "out"]
        self.assertLess(len(at) - 1 - at[::-1].index("fwd/Net/eager"), at.index("fwd/Net/inductor"))
        self.assertLess(len(at) - 1 - at[::-1].index("fwd/Net/inductor"), region_out[0])
        self.assertFalse([r for r in records if r["scope"] == "fwd/Net/inductor" and r["io"] == "in"
                          and r["name"].startswith("out_ptr")])
        # The compiled backward's generated kernels too, in bwd/Net/inductor,
        # each between a compiled backward node's torch.compile in and out.
        backward = [i for i, r in enumerate(records) if r["scope"] == "bwd/Net/inductor"]
        self.assertTrue(backward and all(records[i]["op"].startswith("cpp_fused_") for i in backward), dict(ops))
        node = [(i, r["io"]) for i, r in enumerate(records) if r["scope"] == "bwd/Net" and r["op"] == "torch.compile"]
        for i in backward:
            self.assertEqual([io for j, io in node if j < i][-1], "in", (i, node))
            self.assertTrue([j for j, io in node if j > i and io == "out"], (i, node))
        self.assertFalse([i for i in backward if records[i]["io"] == "in" and records[i]["name"].startswith("out_ptr")])
        # The eager run drew its dropout mask from the RNG state the compiled
        # call then drew the same mask from: the job's results are unchanged.
        self.assertTrue(torch.equal(out, plain))


if __name__ == "__main__":
    unittest.main(verbosity=2)
