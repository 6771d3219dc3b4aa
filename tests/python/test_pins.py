"""Pinned ops (dtrace-fp(5), "Pinned ops"; issue 40) in the dtrace package,
without dtrace bisect: a kernel's outputs recorded with rec.record(...,
io="out", level="kernel") take the pinned bytes before the program reads them
(in place for a writable NumPy array, in what record returns otherwise), asked
once per output, at every level, and never when no pin can apply. Then by
hand, as bisect will: a capture of step N at kernel level, the pin capture of
one op from it, and replays of step N with DTRACE_PIN, on a small program
(tests/python/pin_program.py) and on the NumPy example with its two plants
(examples/numpy/numpytrain.py --nondet fwd-gemm,bwd-gemm): the pinned op's
outputs and everything downstream agree between pinned replays, and differ
without the pin; rank0.pins counts the pins taken.

Run against the build's packages and libdtrace (PYTHONPATH=build/python)."""
import ctypes
import json
import os
import sys
import unittest
from unittest import mock

import numpy as np

import dtrace
from dtrace import capi, records

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pinning  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_ROOT = os.path.dirname(os.path.dirname(HERE))
PROGRAM = os.path.join(HERE, "pin_program.py")
NUMPYTRAIN = os.path.join(SOURCE_ROOT, "examples", "numpy", "numpytrain.py")


Scratch = pinning.Scratch


PinningNative = pinning.PinningNative


class SinkPins(unittest.TestCase):
    def sink(self, pins):
        sink = records.Sink(PinningNative(pins))
        sink.active = sink.pins = True
        return sink

    def test_a_writable_array_takes_its_pin_in_place_through_its_strides(self):
        base = np.arange(12, dtype=np.float32).reshape(3, 4)
        y = base.T  # not C-contiguous: written through its own strides
        pinned = np.full((4, 3), 7.5, np.float32)
        pinned[1, 2] = -1.0
        sink = self.sink({("k", "y"): pinned.tobytes()})
        (name, got), = sink.take_pins("k", [("y", y)])
        self.assertIs(got, y)
        np.testing.assert_array_equal(y, pinned)
        np.testing.assert_array_equal(base, pinned.T)  # the array's own memory holds it

    def test_numbers_and_read_only_arrays_are_replaced_not_written(self):
        frozen = np.ones(3, np.float64)
        frozen.setflags(write=False)
        sink = self.sink({("k", "s"): bytes(ctypes.c_double(2.5)), ("k", "n"): bytes(ctypes.c_int64(-4)),
                          ("k", "f"): np.array([1, 2, 3], np.float64).tobytes()})
        got = dict(sink.take_pins("k", [("s", 1.0), ("n", 3), ("f", frozen), ("u", 9.0)]))
        self.assertEqual((got["s"], type(got["s"])), (2.5, float))
        self.assertEqual((got["n"], type(got["n"])), (-4, int))
        np.testing.assert_array_equal(got["f"], [1, 2, 3])
        self.assertIsNot(got["f"], frozen)
        np.testing.assert_array_equal(frozen, [1, 1, 1])  # the read-only array is not written
        self.assertEqual(got["u"], 9.0)  # not pinned: as it was
        self.assertEqual(sink.native.asked, [("k", "s"), ("k", "n"), ("k", "f"), ("k", "u")])

    def test_a_pin_of_another_size_is_an_error_naming_the_output(self):
        class Refusing(PinningNative):
            def pinned(self, op, name, address, nbytes):
                raise dtrace.RecorderError(f"DTRACE_PIN: fwd k '{name}' is pinned to 8 bytes, but its output "
                                           f"here has {nbytes}")
        sink = records.Sink(Refusing({}))
        sink.active = sink.pins = True
        with self.assertRaisesRegex(dtrace.RecorderError, "'y' is pinned to 8 bytes, but its output here has 12"):
            sink.take_pins("k", [("y", np.zeros(3, np.float32))])


class RecordPins(Scratch):
    """Recorder.record against the real libdtrace, no replay: no pin can apply."""

    def test_no_pin_is_asked_for_outside_a_pinned_replay(self):
        rec = dtrace.Recorder({}, run_dir=self.path("run"), level="kernel")
        asked = {"pins": 0, "pinned": 0}
        native = rec.native
        pins, pinned = native.pins, native.pinned

        def count_pins():
            asked["pins"] += 1
            return pins()

        def count_pinned(*a):
            asked["pinned"] += 1
            return pinned(*a)

        with mock.patch.object(native, "pins", count_pins), mock.patch.object(native, "pinned", count_pinned):
            for step in rec.steps(2):
                with rec.step(step):
                    for _ in range(50):
                        y = np.ones(4, np.float32)
                        values = {"y": y}
                        self.assertIs(rec.record("k", values, io="out", level="kernel"), values)
        # Never per output: a record costs no C call for pins; and a training
        # run (not a replay, where alone DTRACE_PIN is allowed) asks not even
        # once a step. A replay asks once a step (the pinned replays below need it).
        self.assertEqual(asked, {"pins": 0, "pinned": 0})

    def test_the_header_announces_pins(self):
        rec = dtrace.Recorder({}, run_dir=self.path("run"))
        rec.close()
        self.assertEqual(pinning.header(self.path("run"))["replay"]["protocol"], "dtrace-replay/1.3")


class Program(Scratch):
    """tests/python/pin_program.py: one cause, os.urandom's, in fwd/noise add_noise."""

    def test_a_pinned_kernel_and_everything_downstream_agree(self):
        self.run_program(PROGRAM, "run", "ck")
        run = self.path("run")
        # Without pins every replay of step 1 differs, from add_noise on.
        free = [pinning.replay(run, self.path(f"free{k}"), 1) for k in range(2)]
        self.assertEqual(pinning.first_difference(*free)[:3], ("fwd/noise", "noise", "out"))
        # The capture of step 1 (kernel level, fwd/noise) gives the pins: add_noise's three outputs.
        cap = pinning.capture(run, self.path("cap"), 1, "fwd/noise")
        pins = self.path("pins")
        self.assertEqual(pinning.pin_capture([cap], [("fwd/noise", "add_noise")], pins), 3)
        pinned = [pinning.replay(run, self.path(f"pinned{k}"), 1, DTRACE_PIN=pins) for k in range(2)]
        self.assertIsNone(pinning.first_difference(*pinned))
        for out in pinned:
            self.assertEqual(pinning.pins_taken(out), [{"step": 1, "pinned": 3}])
        # The pinned outputs are the captured ones, and the layer records agree at kernel level too.
        kernel = pinning.replay(run, self.path("kernel"), 1, "kernel", DTRACE_PIN=pins)
        captured = pinning.by_identity(pinning.records(self.path("cap")), io=["out"])
        got = pinning.by_identity(pinning.records(kernel), io=["out"])
        for name in ("y", "scale", "frozen"):
            identity = ("fwd/noise", "add_noise", "out", name, 0)
            self.assertEqual(got[identity], captured[identity], name)
        layer = pinning.by_identity(pinning.records(pinned[0]))
        self.assertEqual({k: v for k, v in pinning.by_identity(pinning.records(kernel)).items() if k in layer},
                         layer)
        self.assertEqual(pinning.pins_taken(kernel), [{"step": 1, "pinned": 3}])


    def test_a_session_pins_the_requests_that_ask(self):
        """Replay sessions (the recorder serves them): each request's pins are
        its own, a request without DTRACE_PIN takes none."""
        self.run_program(PROGRAM, "run", "ck")
        run = self.path("run")
        cap = pinning.capture(run, self.path("cap"), 1, "fwd/noise")
        pins = self.path("pins")
        pinning.pin_capture([cap], [("fwd/noise", "add_noise")], pins)
        out = [self.path(f"s{k}") for k in range(3)]
        pinning.session(run, self.path("session"), 1, [(out[0], {"DTRACE_LEVEL": "layer", "DTRACE_PIN": pins}),
                                                        (out[1], {"DTRACE_LEVEL": "layer"}),
                                                        (out[2], {"DTRACE_LEVEL": "layer", "DTRACE_PIN": pins})])
        launch = pinning.replay(run, self.path("launch"), 1, DTRACE_PIN=pins)
        self.assertIsNone(pinning.first_difference(out[0], out[2]))
        self.assertIsNone(pinning.first_difference(out[0], launch))
        self.assertEqual(pinning.first_difference(out[0], out[1])[:2], ("fwd/noise", "noise"))
        self.assertEqual([pinning.pins_taken(o) for o in out], [[{"step": 1, "pinned": 3}], [],
                                                                [{"step": 1, "pinned": 3}]])


class NumpyExample(Scratch):
    """examples/numpy/numpytrain.py with its two plants, runs A and B with
    different chaos seeds (what makes their reductions' orders differ)."""

    def train(self, name, plants, seed):
        self.run_program(NUMPYTRAIN, "--run-dir", name, "--checkpoint-dir", name + ".ck", "--steps", "2",
                         "--level", "layer", "--nondet", plants, "--chaos-seed", str(seed))
        return self.path(name)

    def planted(self, plants):
        return [(d["scope"], d["op"]) for d in
                map(json.loads, self.run_program(NUMPYTRAIN, "--print-planted", "--nondet", plants).splitlines())]

    def test_two_plants_pinned_one_after_the_other(self):
        plants = "fwd-gemm,bwd-gemm"
        (s1, op1), (s2, op2) = self.planted(plants)
        self.assertEqual([(s1, op1), (s2, op2)], [("fwd/layer.1", "gemm"), ("bwd/layer.0", "gemm_dw")])
        a, b = self.train("a", plants, 1), self.train("b", plants, 2)
        free = [pinning.replay(a, self.path("free-a"), 0), pinning.replay(b, self.path("free-b"), 0)]
        self.assertEqual(pinning.first_difference(*free)[:2], (s1, s1.rsplit("/", 1)[1]))
        # The first plant pinned (A's capture): the difference moves to the second.
        first = pinning.pin_capture([pinning.capture(a, self.path("cap1"), 0, s1)], [(s1, op1)], self.path("pin1"))
        one = [pinning.replay(r, self.path(f"one-{n}"), 0, DTRACE_PIN=self.path("pin1")) for n, r in (("a", a), ("b", b))]
        self.assertEqual(pinning.first_difference(*one)[:2], (s2, s2.rsplit("/", 1)[1]))
        for out in one:
            self.assertEqual(pinning.pins_taken(out), [{"step": 0, "pinned": first}])
        # The second captured with the first pinned, as bisect's kernel pass does; both pinned: nothing differs.
        pinning.replay(a, self.path("cap2"), 0, "kernel", DTRACE_SCOPE=s2, DTRACE_CAPTURE=self.path("cap2.capture"),
                       DTRACE_PIN=self.path("pin1"))
        both = pinning.pin_capture([self.path("cap1.capture"), self.path("cap2.capture")], [(s1, op1), (s2, op2)],
                                   self.path("pin2"))
        self.assertEqual(both, 2)
        two = [pinning.replay(r, self.path(f"two-{n}"), 0, DTRACE_PIN=self.path("pin2")) for n, r in (("a", a), ("b", b))]
        self.assertIsNone(pinning.first_difference(*two))
        for out in two:
            self.assertEqual(pinning.pins_taken(out), [{"step": 0, "pinned": 2}])

    def test_a_pinned_layer_isolation_repeats_itself(self):
        a = self.train("a", "fwd-gemm", 1)
        cap = pinning.capture(a, self.path("cap"), 0, "fwd/layer.1")
        pinning.pin_capture([cap], [("fwd/layer.1", "gemm")], self.path("pin"))
        layer_out = ("fwd/layer.1", "layer.1", "out", "y", 0)

        def repetitions(out, **pin):
            pinning.replay(a, out, 0, "kernel", DTRACE_ISOLATE="fwd/layer.1", DTRACE_INPUTS=cap, DTRACE_REPEAT="3",
                           **pin)
            steps = {}
            for r in pinning.records(out):
                steps.setdefault(r["step"], []).append(r)
            return [pinning.by_identity(recs)[layer_out] for _, recs in sorted(steps.items())]

        self.assertGreater(len(set(repetitions(self.path("free")))), 1)  # each repetition its own order
        self.assertEqual(len(set(repetitions(self.path("pinned"), DTRACE_PIN=self.path("pin")))), 1)
        self.assertEqual(pinning.pins_taken(self.path("pinned")),
                         [{"step": k, "pinned": 1} for k in range(3)])


if __name__ == "__main__":
    unittest.main(verbosity=2)
