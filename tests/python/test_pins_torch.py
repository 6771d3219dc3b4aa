"""Pinned ops (dtrace-fp(5), "Pinned ops"; issue 40) in dtrace_torch, without
dtrace bisect: the dispatch mode hands back a pinned op's captured outputs
(copied into the tensors the op returned: any dtype, strides, in-place ops
and views written through, CUDA where there is one), at every level; then by
hand, as bisect will, on the torch tests' LM with two planted causes, the
forward's custom op and the embedding's backward (--nondet combine --nondet
embed-bwd --layers 1, their scopes and ops from --print-planted): recorded by
gpt_moe.py's explicit Recorder and by `dtrace record` on plain_lm.py, a
capture of step 0 at kernel level, the pin capture of the first cause, then
of both, and replays of step 0 with DTRACE_PIN at layer level: with the first
pinned the replays first differ at the second, with both they agree, and
rank0.pins counts them. On torch 2.x, a compiled region (op
torch.compile) pinned likewise.

Run against the build's packages and libdtrace (PYTHONPATH=build/python), on
Debian's python3 (torch 1.13) or TORCH_PYTHON's (torch 2.x)."""
import ctypes
import json
import os
import subprocess
import sys
import types
import unittest

import torch

from dtrace import capi, postmortem
from dtrace_torch import records
from dtrace_torch.dispatch import OpRecorder

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pinning  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_ROOT = os.path.dirname(os.path.dirname(HERE))
GPT_MOE = os.path.join(SOURCE_ROOT, "tools", "torch", "gpt_moe.py")
PLAIN_LM = os.path.join(SOURCE_ROOT, "tools", "torch", "plain_lm.py")
TWO_CAUSES = ["--layers", "1", "--nondet", "combine", "--nondet", "embed-bwd"]
HAS_COMPILE = hasattr(torch, "compile")


def raw(t: torch.Tensor) -> bytes:
    """A tensor's logical bytes (what a capture holds)."""
    t = t.detach().resolve_conj().cpu().contiguous() if t.is_complex() else t.detach().cpu().contiguous()
    return ctypes.string_at(t.data_ptr(), t.numel() * t.element_size()) if t.numel() else b""


def sink_for(pins):
    # Kernel records not wanted: a layer-level step, where pins still apply.
    sink = records.Sink(pinning.PinningNative(pins, kernel=False))
    sink.active = sink.pins = True
    return sink


DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


class TensorPins(unittest.TestCase):
    def test_every_dtype_and_layout_takes_its_pin_in_place(self):
        cases = [("f32", lambda d: torch.zeros(3, 4, device=d)),
                 ("bf16", lambda d: torch.zeros(5, dtype=torch.bfloat16, device=d)),
                 ("i64", lambda d: torch.zeros(2, 3, dtype=torch.int64, device=d)),
                 ("bool", lambda d: torch.zeros(6, dtype=torch.bool, device=d)),
                 ("transposed", lambda d: torch.zeros(4, 3, device=d).t()),
                 ("strided view", lambda d: torch.zeros(4, 6, device=d)[:, ::2]),
                 ("conjugate", lambda d: torch.zeros(3, dtype=torch.complex64, device=d).conj()),
                 ("empty", lambda d: torch.zeros(0, 3, device=d))]
        for device in DEVICES:
            for what, make in cases:
                with self.subTest(device=device, what=what):
                    t = make(device)
                    if t.dtype == torch.bool:
                        want = torch.tensor([True, False, True, True, False, True])
                    elif t.is_complex():
                        want = torch.tensor([1 + 2j, -3j, 4], dtype=torch.complex64)
                    else:
                        want = torch.arange(t.numel(), dtype=torch.float64).reshape(t.shape).mul(1.5).to(t.dtype)
                    sink = sink_for({("op", "out.0"): raw(want)})
                    (_, got), = sink.take_pins("op", [("out.0", t)])
                    self.assertIs(got, t)
                    self.assertTrue(torch.equal(t.cpu(), want), (t, want))

    def test_an_unpinned_tensor_is_left_as_it_is(self):
        t = torch.ones(3)
        sink = sink_for({})
        sink.take_pins("op", [("out.0", t)])
        self.assertTrue(torch.equal(t, torch.ones(3)))
        self.assertEqual(sink.native.asked, [("op", "out.0")])


class DispatchPins(unittest.TestCase):
    """The dispatch mode at layer level in a step where pins apply: it records
    nothing and asks for each op's results (never a view's, never empty's)."""

    def mode(self, pins):
        sink = sink_for(pins)
        sink.set_scope = lambda scope: None
        rec = types.SimpleNamespace(sink=sink, log_call=lambda *a, **k: None)
        return OpRecorder(rec), sink

    def test_an_in_place_op_on_a_view_is_pinned_through_the_view(self):
        for device in DEVICES:
            with self.subTest(device=device):
                base = torch.zeros(3, 4, device=device)
                want = torch.tensor([7.0, 8.0, 9.0])
                mode, sink = self.mode({("aten.add_.Tensor", "out.0"): raw(want)})
                with mode:
                    column = base[:, 1]          # a view: no data moved, not asked
                    column.add_(1.0)             # in place, through the view: asked, pinned
                self.assertTrue(torch.equal(base[:, 1].cpu(), want))
                self.assertTrue(torch.equal(base[:, 0].cpu(), torch.zeros(3)))
                self.assertEqual(sink.native.asked, [("aten.add_.Tensor", "out.0")])

    def test_a_custom_op_returns_its_pinned_output_to_autograd(self):
        sys.path.insert(0, os.path.dirname(GPT_MOE))
        import gpt_moe  # registers dtrace_example::combine
        src = torch.ones(4, 2, requires_grad=True)
        index = torch.tensor([0, 1, 0, 1])
        want = torch.tensor([[5.0, 6.0], [7.0, 8.0]])
        mode, sink = self.mode({("dtrace_example.combine.default", "out.0"): raw(want)})
        with mode:
            out = gpt_moe.Combine.apply(src, index, 2, True)
            total = (out * out).sum()
        self.assertTrue(torch.equal(out.detach(), want))
        self.assertEqual(total.item(), float((want * want).sum()))


class Replays(pinning.Scratch):
    """The LM with two causes, pinned one after the other by hand."""

    def environment(self):
        return {"TORCHINDUCTOR_CACHE_DIR": os.path.join(self._dir.name, "inductor")}

    def planted(self, program, *switches):
        lines = self.run_command([sys.executable, program, "--print-planted", *switches]).splitlines()
        return [(d["scope"], d["op"]) for d in map(json.loads, lines)]

    def pinned_one_after_the_other(self, run, causes):
        """Free replays of step 0 first differ at the first cause; with it
        pinned, at the second; with both, nowhere. Each pinned replay took
        its pins (rank0.pins)."""
        (s1, op1), (s2, op2) = causes
        free = [pinning.replay(run, self.path(f"free{k}"), 0) for k in range(2)]
        self.assertEqual(pinning.first_difference(*free)[0], s1)
        cap1 = pinning.capture(run, self.path("cap1"), 0, s1)
        n1 = pinning.pin_capture([cap1], [(s1, op1)], self.path("pin1"))
        self.assertGreaterEqual(n1, 1)
        one = [pinning.replay(run, self.path(f"one{k}"), 0, DTRACE_PIN=self.path("pin1")) for k in range(2)]
        self.assertEqual(pinning.first_difference(*one)[0], s2)
        # The second cause captured with the first pinned (bisect's kernel pass does so).
        pinning.replay(run, self.path("cap2"), 0, "kernel", DTRACE_SCOPE=s2, DTRACE_PIN=self.path("pin1"),
                       DTRACE_CAPTURE=self.path("cap2.capture"))
        both = pinning.pin_capture([cap1, self.path("cap2.capture")], [(s1, op1), (s2, op2)], self.path("pin2"))
        two = [pinning.replay(run, self.path(f"two{k}"), 0, DTRACE_PIN=self.path("pin2")) for k in range(2)]
        self.assertIsNone(pinning.first_difference(*two))
        for out in one:
            self.assertEqual(pinning.pins_taken(out), [{"step": 0, "pinned": n1}])
        for out in two:
            self.assertEqual(pinning.pins_taken(out), [{"step": 0, "pinned": both}])
        # At kernel level the pinned op's out records are the captured ones.
        kernel = pinning.replay(run, self.path("kernel"), 0, "kernel", DTRACE_PIN=self.path("pin1"))
        captured = {k: v for k, v in pinning.by_identity(pinning.records(self.path("cap1")), io=["out"]).items()
                    if k[:2] == (s1, op1)}
        got = pinning.by_identity(pinning.records(kernel), io=["out"])
        self.assertTrue(captured)
        self.assertEqual({k: got.get(k) for k in captured}, captured)

    def test_explicit_recorder(self):
        causes = self.planted(GPT_MOE, *TWO_CAUSES)
        self.assertEqual(causes, [("fwd/blocks.0.moe", "dtrace_example.combine.default"),
                                  ("bwd/embed", "dtrace_example.combine.default")])
        self.run_command([sys.executable, GPT_MOE, "--run-dir", "a", "--checkpoint-dir", "ck",
                          "--checkpoint-every", "1", "--steps", "1", "--level", "layer", *TWO_CAUSES])
        self.pinned_one_after_the_other(self.path("a"), causes)

    def test_dtrace_record(self):
        binary = postmortem.find_dtrace()
        probe = subprocess.run([binary, "--version"], capture_output=True, text=True)
        if probe.returncode == 127:  # the host's build seen from the torch 2 root (tools/setup-torch2.sh)
            self.skipTest(f"{binary} cannot run beside this python: {probe.stderr.strip()} "
                          "(e2e/record_torch_* run dtrace record from the host)")
        causes = self.planted(PLAIN_LM, *TWO_CAUSES)
        env = {k: v for k, v in pinning.clean_environment().items() if k != "PYTHONPATH"}
        done = subprocess.run([binary, "record", "--out", "a", "--", sys.executable,
                               PLAIN_LM, "--steps", "1", *TWO_CAUSES], cwd=self.dir, env=env,
                              capture_output=True, text=True, timeout=900)
        self.assertEqual(done.returncode, 0, done.stderr[-4000:])
        self.pinned_one_after_the_other(self.path("a"), causes)

    def test_a_session_pins_the_requests_that_ask(self):
        """A replay session of the explicit Recorder: each request's dispatch
        mode and pins are its own, a request without DTRACE_PIN takes none."""
        self.run_command([sys.executable, GPT_MOE, "--run-dir", "a", "--checkpoint-dir", "ck",
                          "--checkpoint-every", "1", "--steps", "1", "--level", "layer", *TWO_CAUSES])
        run = self.path("a")
        (s1, op1), _ = self.planted(GPT_MOE, *TWO_CAUSES)
        cap = pinning.capture(run, self.path("cap"), 0, s1)
        n = pinning.pin_capture([cap], [(s1, op1)], self.path("pin"))
        out = [self.path(f"s{k}") for k in range(3)]
        pinned = {"DTRACE_LEVEL": "layer", "DTRACE_PIN": self.path("pin")}
        pinning.session(run, self.path("session"), 0, [(out[0], pinned), (out[1], {"DTRACE_LEVEL": "layer"}),
                                                       (out[2], pinned)])
        self.assertEqual(pinning.first_difference(out[0], out[1])[0], s1)
        self.assertEqual(pinning.first_difference(out[0], out[2])[0], "bwd/embed")  # the second cause
        self.assertEqual([pinning.pins_taken(o) for o in out], [[{"step": 0, "pinned": n}], [],
                                                                [{"step": 0, "pinned": n}]])

    def test_a_pinned_module_isolation_repeats_itself(self):
        """The layer isolation bisect's kernel pass runs with pins: each
        repetition asks for its pins (at layer level, the dispatch mode
        entered for them) and the repetitions agree."""
        switches = ["--layers", "1", "--nondet", "combine"]
        (scope, op), = self.planted(GPT_MOE, *switches)
        self.run_command([sys.executable, GPT_MOE, "--run-dir", "a", "--checkpoint-dir", "ck",
                          "--checkpoint-every", "1", "--steps", "1", "--level", "layer", *switches])
        run = self.path("a")
        cap = pinning.capture(run, self.path("cap"), 0, scope)
        n = pinning.pin_capture([cap], [(scope, op)], self.path("pin"))
        layer_out = (scope, "MoE", "out", "output", 0)

        def repetitions(out, **pin):
            pinning.replay(run, out, 0, "layer", DTRACE_ISOLATE=scope, DTRACE_INPUTS=cap, DTRACE_REPEAT="3", **pin)
            steps = {}
            for r in pinning.records(out):
                steps.setdefault(r["step"], []).append(r)
            return [pinning.by_identity(recs)[layer_out] for _, recs in sorted(steps.items())]

        self.assertGreater(len(set(repetitions(self.path("free")))), 1)
        self.assertEqual(len(set(repetitions(self.path("pinned"), DTRACE_PIN=self.path("pin")))), 1)
        self.assertEqual(pinning.pins_taken(self.path("pinned")), [{"step": k, "pinned": n} for k in range(3)])

    @unittest.skipUnless(HAS_COMPILE, f"torch {torch.__version__} has no torch.compile")
    def test_a_compiled_region_is_pinned_whole(self):
        switches = ["--layers", "1", "--compile", "--nondet", "combine"]
        scope, op = "fwd/blocks.0", "torch.compile"
        self.run_command([sys.executable, GPT_MOE, "--run-dir", "a", "--checkpoint-dir", "ck",
                          "--checkpoint-every", "1", "--steps", "1", "--level", "layer", *switches])
        run = self.path("a")
        free = [pinning.replay(run, self.path(f"free{k}"), 0) for k in range(2)]
        self.assertEqual(pinning.first_difference(*free)[0], scope)
        cap = pinning.capture(run, self.path("cap"), 0, scope)
        n = pinning.pin_capture([cap], [(scope, op)], self.path("pin"))
        pinned = [pinning.replay(run, self.path(f"pinned{k}"), 0, DTRACE_PIN=self.path("pin")) for k in range(2)]
        self.assertIsNone(pinning.first_difference(*pinned))
        self.assertEqual(pinning.pins_taken(pinned[0]), [{"step": 0, "pinned": n}])

    @unittest.skipUnless(HAS_COMPILE, f"torch {torch.__version__} has no torch.compile")
    def test_an_op_of_a_compiled_region_is_pinned(self):
        """The op named inside a region (its graph run eagerly, compiled.py):
        pinned, the region's results are the eager graph's and step replays
        agree."""
        switches = ["--layers", "1", "--compile", "--nondet", "combine"]
        (scope, op), = self.planted(GPT_MOE, *switches)
        self.assertEqual((scope, op), ("fwd/blocks.0/eager", "dtrace_example.combine.default"))
        self.run_command([sys.executable, GPT_MOE, "--run-dir", "a", "--checkpoint-dir", "ck",
                          "--checkpoint-every", "1", "--steps", "1", "--level", "layer", *switches])
        run = self.path("a")
        cap = pinning.capture(run, self.path("cap"), 0, "fwd/blocks.0")
        n = pinning.pin_capture([cap], [(scope, op)], self.path("pin"))
        self.assertGreater(n, 0)
        pinned = [pinning.replay(run, self.path(f"pinned{k}"), 0, DTRACE_PIN=self.path("pin")) for k in range(2)]
        self.assertIsNone(pinning.first_difference(*pinned))
        self.assertEqual(pinning.pins_taken(pinned[0]), [{"step": 0, "pinned": n}])


if __name__ == "__main__":
    unittest.main(verbosity=2)
