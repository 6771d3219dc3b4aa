"""The dtrace package's recorder (python/dtrace: recording, records,
checkpoints, generators), on its own: what it hands libdtrace for arrays and
numbers, the names it gives state, checkpoints and the generators they hold,
the launcher's rank, the replay command, scopes. Run against the build's
libdtrace (PYTHONPATH=build/python); e2e/python_recorder runs the NumPy example
through dtrace itself."""
import ctypes
import json
import os
import random
import struct
import sys
import tempfile
import unittest
from array import array
from unittest import mock

import numpy as np

import dtrace
from dtrace import capi, checkpoints, generators, records
from dtrace.recording import launcher_rank


def log(run_dir):
    with open(os.path.join(run_dir, "rank0.jsonl")) as f:
        return [json.loads(line) for line in f]


class Scratch(unittest.TestCase):
    def setUp(self):
        self._dir = tempfile.TemporaryDirectory()
        self.dir = self._dir.name
        # No workflow or replay variable of the caller's reaches these tests.
        self._env = mock.patch.dict(os.environ, {k: v for k, v in os.environ.items()
                                                 if not k.startswith(("DTRACE_", "PYTHON_DTRACE_", "RANK",
                                                                      "WORLD_SIZE", "OMPI_", "PMI_", "SLURM_"))},
                                    clear=True)
        self._env.start()

    def tearDown(self):
        self._env.stop()
        self._dir.cleanup()


class Numbers(unittest.TestCase):
    def test_python_numbers_are_0d_of_their_exact_type(self):
        for value, dtype, raw in ((True, "bool", b"\x01"), (-3, "i64", struct.pack("<q", -3)),
                                  (0.1, "f64", struct.pack("<d", 0.1))):
            v = records.number_view(value)
            self.assertEqual((v.dtype, v.shape, v.nbytes), (dtype, (), len(raw)), value)
            self.assertEqual(ctypes.string_at(v.address, v.nbytes), raw, value)

    def test_an_integer_outside_int64_is_refused(self):
        with self.assertRaisesRegex(dtrace.RecorderError, "outside int64"):
            records.number_view(1 << 63)
        records.number_view(-(1 << 63))  # the smallest int64 is one

    def test_state_values_name_leaves_by_path(self):
        state = {"w": np.zeros(2, np.float32), "opt": {"lr": 0.1, "moments": [np.ones(1), None]}, "tag": ("x",)}
        got = list(records.state_values("m", state))
        self.assertEqual([n for n, _ in got], ["m.w", "m.opt.lr", "m.opt.moments.0", "m.tag.0"])
        self.assertEqual(got[1][1], 0.1)
        self.assertEqual(got[3][1], repr("x").encode())  # not an array: its repr's bytes, u8

    def test_flatten_names_arrays_in_nested_containers(self):
        x, y = np.zeros(1), array("f", [1.0])
        got = records.flatten("batch", {"x": x, "pair": (y, "label")})
        self.assertEqual([n for n, _ in got], ["batch.x", "batch.pair.0"])
        self.assertIs(got[0][1], x)


class FakeNative:
    """What Sink calls of libdtrace's recorder, remembered."""

    def __init__(self):
        self.scalars, self.tensors, self.scopes = [], [], []

    def wants(self, level): return True
    def captures(self): return False
    def scalar(self, *args): self.scalars.append(args)
    def tensor(self, *args): self.tensors.append(args)

    def tensor_batch(self, level, records, addresses):  # as libdtrace's dtrace_recorder_tensors: one by one
        for (op, io, name, dtype, shape, nbytes), address in zip(records, addresses):
            self.tensor(level, op, io, name, dtype, shape, address, nbytes)

    def push_scope(self, s): self.scopes.append(("push", s))
    def pop_scope(self): self.scopes.append(("pop",))


class Scalars(unittest.TestCase):
    def sink(self):
        native = FakeNative()
        sink = records.Sink(native)
        sink.active = True
        return sink, native

    def test_one_element_arrays_keep_their_dtype_and_bits(self):
        sink, native = self.sink()
        sink.scalar(0, "loss", capi.IO_METRIC, "loss", np.float32(0.1))
        sink.scalar(0, "loss", capi.IO_METRIC, "half", np.array([1.5], np.float16))
        sink.scalar(0, "loss", capi.IO_METRIC, "count", np.array(7, np.int32))
        sink.scalar(0, "loss", capi.IO_METRIC, "f", 0.1)
        f32 = struct.unpack("<I", struct.pack("<f", 0.1))[0]
        self.assertEqual(native.scalars[0][4:6], ("f32", f32))
        self.assertAlmostEqual(native.scalars[0][6], 0.1, places=6)
        self.assertEqual(native.scalars[1][4:7], ("f16", 0x3E00, 1.5))
        self.assertEqual(native.scalars[2][4:7], ("i64", 7, 7.0))
        self.assertEqual(native.scalars[3][4:6], ("f64", struct.unpack("<Q", struct.pack("<d", 0.1))[0]))
        # NumPy float scalars of a type met before: the same record (their type is remembered).
        sink.scalar(0, "loss", capi.IO_METRIC, "again", np.float32(0.1))
        sink.scalar(0, "loss", capi.IO_METRIC, "h", np.float16(-2.5))
        sink.scalar(0, "loss", capi.IO_METRIC, "h", np.float16(-2.5))
        self.assertEqual(native.scalars[4][4:7], native.scalars[0][4:7])
        self.assertEqual(native.scalars[5][4:7], ("f16", 0xC100, -2.5))
        self.assertEqual(native.scalars[6][4:7], ("f16", 0xC100, -2.5))

    def test_more_than_one_element_is_not_a_scalar(self):
        sink, _ = self.sink()
        with self.assertRaisesRegex(dtrace.RecorderError, "2 elements"):
            sink.scalar(0, "m", capi.IO_METRIC, "m", np.zeros(2, np.float32))

    def test_inactive_sink_records_nothing(self):
        sink, native = self.sink()
        sink.active = False
        sink.scalar(0, "m", capi.IO_METRIC, "m", 1.0)
        sink.tensors_(0, "m", capi.IO_OUT, [("x", np.zeros(1))])
        self.assertEqual((native.scalars, native.tensors), ([], []))

    def test_tensors_hand_over_logical_bytes(self):
        sink, native = self.sink()
        a = np.arange(6, dtype=np.float32).reshape(2, 3)
        sink.tensors_(1, "gemm", capi.IO_IN, [("x", a), ("n", 3)])
        (lvl, op, io, name, dtype, shape, address, nbytes), = [t[:8] for t in native.tensors[:1]]
        self.assertEqual((lvl, op, io, name, dtype, tuple(shape), nbytes), (1, "gemm", capi.IO_IN, "x", "f32", (2, 3), 24))
        self.assertEqual(ctypes.string_at(address, nbytes), a.tobytes())
        self.assertEqual(native.tensors[1][3:6], ("n", "i64", ()))


    def test_a_device_array_among_host_ones_keeps_their_order(self):
        """Host arrays go to libdtrace together (tensor_batch), a device
        array by its digest on its device: in a gathered step start and in
        one call mixing both, every record keeps its place."""

        class Device:  # device memory never read: hashed by the sink's device_batch
            __cuda_array_interface__ = {"shape": (2,), "strides": None, "typestr": "<f4",
                                        "data": (0x7F0000000000, False), "version": 3, "stream": None}

        class DeviceSink(records.Sink):
            def device_batch(self, device, addresses, sizes, stream):
                return [0xD0 + i for i in range(len(addresses))]

        native = FakeNative()
        sink = DeviceSink(native)
        sink.active = True
        a, b = np.zeros(2, np.float32), np.ones(3, np.float32)
        sink.gather()
        sink.tensors_(0, "param", capi.IO_STATE, [("a", a)])
        sink.tensors_(0, "param", capi.IO_STATE, [("b", b), ("d", Device()), ("a2", a)])
        sink.tensors_(0, "batch", capi.IO_IN, [("x", b)])
        sink.flush()
        self.assertEqual([(t[1], t[3]) for t in native.tensors],
                         [("param", "a"), ("param", "b"), ("param", "d"), ("param", "a2"), ("batch", "x")])
        self.assertEqual(native.tensors[2][8:], (0xD0,))  # the device array by its digest
        self.assertEqual([len(t) for t in native.tensors], [8, 8, 9, 8, 8])

    def test_a_value_that_is_not_an_array_is_refused_naming_its_record(self):
        sink, native = self.sink()
        with self.assertRaisesRegex(TypeError, r"^gemm record 'w': list is not an array"):
            sink.tensors_(1, "gemm", capi.IO_IN, [("x", np.zeros(2)), ("w", [1.0, 2.0])])
        with self.assertRaisesRegex(ValueError, r"^gemm record 'x': .*big-endian"):
            sink.tensors_(1, "gemm", capi.IO_IN, [("x", np.zeros(2, ">f4"))])
        self.assertEqual(native.tensors, [])


class Checkpoints(Scratch):
    class Params:
        def __init__(self): self.w = np.arange(4, dtype=np.float32)
        def state_dict(self): return {"w": self.w}
        def load_state_dict(self, d): self.w = d["w"]

    def test_save_load_restores_state_and_host_generators(self):
        p, data = self.Params(), {"position": 3}
        random.seed(1)
        np.random.seed(2)
        path = checkpoints.save(self.dir, 5, {"param": p, "data": data})
        self.assertEqual(path, os.path.join(self.dir, "step-5.pkl"))
        want_py, want_np = random.random(), np.random.random()
        p.w[:] = 9
        data["position"] = 99
        checkpoints.load(self.dir, 5, {"param": p, "data": data})
        self.assertEqual(p.w.tolist(), [0, 1, 2, 3])
        self.assertEqual(data, {"position": 3})
        self.assertEqual((random.random(), np.random.random()), (want_py, want_np))

    def test_restored_arrays_are_copies(self):
        p = self.Params()
        snap = checkpoints.snapshot(0, {"param": p})
        checkpoints.restore_snapshot(snap, {"param": p})
        p.w[0] = 42  # a step changes its parameters in place
        checkpoints.restore_snapshot(snap, {"param": p})
        self.assertEqual(p.w[0], 0)

    def test_other_state_is_refused_naming_the_file_and_difference(self):
        p = self.Params()
        checkpoints.save(self.dir, 0, {"param": p})
        p.w = np.zeros(5, np.float32)
        with self.assertRaisesRegex(dtrace.CheckpointError, r"step-0\.pkl: written for other state.*param\.w"):
            checkpoints.load(self.dir, 0, {"param": p})
        with self.assertRaisesRegex(dtrace.CheckpointError, r"step-3\.pkl: no checkpoint of step 3.*\[0\]"):
            checkpoints.load(self.dir, 3, {"param": p})
        with open(os.path.join(self.dir, "step-1.pkl"), "wb") as f:
            f.write(b"torn")
        with self.assertRaisesRegex(dtrace.CheckpointError, r"step-1\.pkl: not a readable checkpoint"):
            checkpoints.load(self.dir, 1, {"param": p})

    def test_a_value_kept_by_its_repr_restores_whatever_its_length(self):
        # A schedule's phase string grows between checkpoints: still the same state.
        sched = {"phase": "train", "lr": 0.1}
        checkpoints.save(self.dir, 2, {"sched": sched})
        sched["phase"] = "warmup"
        checkpoints.load(self.dir, 2, {"sched": sched})
        self.assertEqual(sched["phase"], "train")
        sched["lr"] = "0.1"  # a number become a string is other state
        with self.assertRaisesRegex(dtrace.CheckpointError, r"dtype or shape changed \['sched\.lr'\]"):
            checkpoints.load(self.dir, 2, {"sched": sched})

    def test_a_numpy_generators_own_state_is_recorded_and_restored(self):
        # The state_dict a program writes for its own np.random.Generator holds
        # 128-bit integers (PCG64): recorded by their repr, restored whole.
        class Gen:
            def __init__(self, seed): self.g = np.random.default_rng(seed)
            def state_dict(self): return self.g.bit_generator.state
            def load_state_dict(self, d): self.g.bit_generator.state = d
        gen, run = Gen(1), os.path.join(self.dir, "run")
        rec = dtrace.Recorder({"gen": gen}, run_dir=run, checkpoint_dir=os.path.join(self.dir, "ck"),
                              checkpoint_every=1)
        for step in rec.steps(2):
            with rec.step(step):
                gen.g.random()
        states = [r for r in log(run)[1:] if r.get("op") == "gen" and r["name"] == "gen.state.state"]
        self.assertEqual([(r["step"], r["dtype"]) for r in states], [(0, "u8"), (1, "u8")])
        self.assertNotEqual(states[0]["hash"], states[1]["hash"])
        want = gen.g.random()
        other = Gen(2)
        checkpoints.load(os.path.join(self.dir, "ck"), 1, {"gen": other})
        other.g.random()  # step 1's draw
        self.assertEqual(other.g.random(), want)

    def test_nearest_is_the_newest_at_or_before(self):
        for s in (0, 4, 8):
            checkpoints.save(self.dir, s, {})
        open(os.path.join(self.dir, "step-6.pt"), "w").close()  # another recorder's
        self.assertEqual(checkpoints.steps_in(self.dir), [0, 4, 8])
        self.assertEqual([checkpoints.nearest(self.dir, s) for s in (0, 3, 7, 9)], [0, 0, 4, 8])
        self.assertEqual(checkpoints.nearest(self.dir, 6, ".pt"), 6)
        # A name is a checkpoint's whole: a half-written or set-aside file
        # beside one is not a later step's checkpoint (dtrace_torch's .pt too).
        for junk in ("step-9.pkl.tmp.123", "step-9.pkl.bak", "step-8.pt.tmp", "step-8.pt.bak", "step-7.pt~"):
            open(os.path.join(self.dir, junk), "w").close()
        self.assertEqual(checkpoints.steps_in(self.dir), [0, 4, 8])
        self.assertEqual(checkpoints.steps_in(self.dir, ".pt"), [6])
        self.assertEqual((checkpoints.nearest(self.dir, 9), checkpoints.nearest(self.dir, 9, ".pt")), (8, 6))

    def test_a_failed_write_leaves_nothing(self):
        def boom(f):
            f.write(b"half")
            raise OSError("disk full")
        with self.assertRaises(OSError):
            checkpoints.write_atomically(os.path.join(self.dir, "step-0.pkl"), boom)
        self.assertEqual(os.listdir(self.dir), [])


class Generators(unittest.TestCase):
    def test_only_the_generators_a_step_advanced(self):
        d = generators.Drawn()
        d.take()
        self.assertEqual(d.drawn(), [])
        start = random.getstate()
        random.random()
        got = dict(d.drawn())
        self.assertEqual(list(got), ["python"])
        self.assertEqual(list(got["python"]), list(start[1]))
        d.take()
        np_start = np.random.get_state()
        np.random.random()
        got = dict(d.drawn())
        self.assertEqual(list(got), ["numpy"])
        self.assertEqual(list(got["numpy"]), [int(k) for k in np_start[1]] + [np_start[2]])

    def test_a_draw_that_leaves_the_words_as_they_were_is_seen(self):
        # NumPy's legacy normal draws two and caches one; the next takes the
        # cached one without advancing the generator's words. Python's gauss()
        # keeps its second in gauss_next the same way.
        d = generators.Drawn()
        np.random.seed(3)
        for draw, name in ((np.random.standard_normal, "numpy"), (lambda: random.gauss(0, 1), "python")):
            d.take()
            draw()                        # advances the words, caches the second value
            self.assertEqual([n for n, _ in d.drawn()], [name])
            d.take()
            start = np.random.get_state() if name == "numpy" else random.getstate()
            draw()                        # the cached value: the words unchanged
            got = dict(d.drawn())
            self.assertEqual(list(got), [name])
            words = [int(k) for k in start[1]] + [start[2]] if name == "numpy" else list(start[1])
            self.assertEqual(list(got[name]), words)
            d.take()
            self.assertEqual(d.drawn(), [])


class Launcher(Scratch):
    def test_rank_from_the_launchers_variables(self):
        self.assertEqual(launcher_rank(), (0, 1))
        os.environ.update(SLURM_PROCID="2", SLURM_NTASKS="4")
        self.assertEqual(launcher_rank(), (2, 4))
        os.environ.update(RANK="1", WORLD_SIZE="3")  # RANK first
        self.assertEqual(launcher_rank(), (1, 3))
        os.environ["RANK"] = "one"
        with self.assertRaisesRegex(dtrace.Error, "RANK='one'"):
            launcher_rank()


class Recording(Scratch):
    def test_records_reach_the_log_with_their_fingerprints(self):
        run = os.path.join(self.dir, "run")
        w = np.arange(12, dtype=np.float32).reshape(3, 4)
        rec = dtrace.Recorder({"param": {"w": w}}, run_dir=run, level="layer", config={"lr": 0.5})
        for step in rec.steps(1):
            with rec.step(step, batch=np.ones(2, np.int64)):
                with rec.scope("fwd"), rec.scope("layer.0") as scope:
                    self.assertEqual(scope, "fwd/layer.0")
                    rec.record("layer.0", {"x": w.T}, io="in", level="layer")
                    rec.record("gemm", {"y": w}, io="out", level="kernel")  # above the level: not recorded
                rec.metric("loss", np.float32(0.25))
        lines = log(run)
        self.assertEqual(lines[0]["config"]["lr"], 0.5)
        self.assertEqual(lines[0]["config"]["framework"], "python")
        self.assertEqual(lines[0]["replay"]["protocol"], "dtrace-replay/1.3")  # sessions and pins
        by = {(r.get("scope"), r.get("op"), r.get("name")): r for r in lines[1:]}
        state = by[("step", "param", "param.w")]
        self.assertEqual((state["io"], state["dtype"], state["shape"]), ("state", "f32", [3, 4]))
        self.assertEqual(state["hash"], "%016x" % capi.fingerprint_host(w.ctypes.data, w.nbytes))
        x = by[("fwd/layer.0", "layer.0", "x")]
        t = np.ascontiguousarray(w.T)  # a transposed view: recorded in its logical order
        self.assertEqual((x["io"], x["shape"], x["hash"]),
                         ("in", [4, 3], "%016x" % capi.fingerprint_host(t.ctypes.data, t.nbytes)))
        self.assertIn(("step", "batch", "batch"), by)
        self.assertNotIn(("fwd/layer.0", "gemm", "y"), by)
        self.assertEqual(by[("step", "loss", "loss")]["dtype"], "f32")

    def test_integer_metrics_keep_their_sign(self):
        # A one-element integer array is recorded as i64 by its value: an
        # unsigned one whose top bit is set is a large positive number, a
        # signed one a negative one, though their bytes are the same.
        run = os.path.join(self.dir, "run")
        values = {"u8": np.uint8(200), "u16": np.array([0x8001], np.uint16), "u64": np.uint64((1 << 63) + 1),
                  "i8": np.int8(-1), "i32": np.array(-2, np.int32), "i64": np.int64(-(1 << 63)), "bool": np.bool_(1)}
        rec = dtrace.Recorder({}, run_dir=run)
        for step in rec.steps(1):
            with rec.step(step):
                for name, value in values.items():
                    rec.metric(name, value)
        got = {r["name"]: r for r in log(run)[1:] if r.get("io") == "metric"}
        for name, value in values.items():
            number = int(np.asarray(value).item())
            with self.subTest(name):
                self.assertEqual((got[name]["dtype"], got[name]["bits"], got[name]["value"]),
                                 ("i64", "%016x" % (number & ((1 << 64) - 1)), float(number)))

    def test_a_replay_restores_only_a_whole_checkpoint(self):
        # A half-written checkpoint of step 3 (a crash mid-write leaves
        # step-3.pkl.tmp.<pid>) or one set aside (.bak) is no checkpoint: a
        # replay of step 3 restores step 2's and runs step 2 to get there.
        run, ck = os.path.join(self.dir, "run"), os.path.join(self.dir, "ck")

        class Program:  # its state counts the steps run; `ran` says which ran from what
            def __init__(self):
                self.w, self.ran = {"w": np.zeros(2)}, []
                self.rec = dtrace.Recorder({"p": self.w}, run_dir=run, checkpoint_dir=ck, checkpoint_every=2)

            def run(self):
                for step in self.rec.steps(4):
                    self.ran.append((step, int(self.w["w"][0])))
                    with self.rec.step(step):
                        self.w["w"] = self.w["w"] + 1

        first = Program()
        first.run()
        self.assertEqual(first.ran, [(0, 0), (1, 1), (2, 2), (3, 3)])
        self.assertEqual(sorted(os.listdir(ck)), ["step-0.pkl", "step-2.pkl"])
        for junk in ("step-3.pkl.tmp.999", "step-3.pkl.bak"):
            with open(os.path.join(ck, junk), "wb") as f:
                f.write(b"half a pickle")
        os.environ.update(DTRACE_REPLAY_STEP="3", DTRACE_OUT=os.path.join(self.dir, "replay.jsonl"))
        replay = Program()
        with self.assertRaises(SystemExit) as exited:
            replay.run()
        self.assertEqual((exited.exception.code, replay.rec.restored_at, replay.ran), (0, 2, [(2, 2), (3, 3)]))

    def test_a_batch_of_python_lists_and_numbers_is_recorded(self):
        # A pure-Python program's batch: token ids in a list, a label. Two runs
        # fed different tokens must differ in their batch records (verdict data).
        def run(name, tokens):
            rec = dtrace.Recorder({}, run_dir=os.path.join(self.dir, name))
            for step in rec.steps(1):
                with rec.step(step, batch={"tokens": tokens, "label": 3, "text": "a b", "none": None}):
                    pass
            return {r["name"]: r for r in log(os.path.join(self.dir, name))[1:] if r.get("op") == "batch"}
        a, b = run("a", [5, 7]), run("b", [5, 8])
        self.assertEqual(sorted(a), ["batch.label", "batch.text", "batch.tokens.0", "batch.tokens.1"])
        self.assertEqual((a["batch.tokens.1"]["io"], a["batch.tokens.1"]["dtype"]), ("in", "i64"))
        self.assertEqual(a["batch.tokens.0"]["hash"], b["batch.tokens.0"]["hash"])
        self.assertNotEqual(a["batch.tokens.1"]["hash"], b["batch.tokens.1"]["hash"])

    def test_a_loop_that_never_enters_a_step_is_warned_of(self):
        rec = dtrace.Recorder({}, run_dir=os.path.join(self.dir, "a"))
        with self.assertWarnsRegex(RuntimeWarning, r"steps\(\) yielded steps 0-2, but no `with rec.step"):
            for step in rec.steps(3):
                rec.metric("loss", 1.0)  # outside a step: dropped
        import warnings
        rec = dtrace.Recorder({}, run_dir=os.path.join(self.dir, "b"))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for step in rec.steps(3):
                if step == 2:  # one step recorded is enough
                    with rec.step(step):
                        pass

    def test_replay_argv_carries_the_launcher_and_workflow_variables(self):
        os.environ.update(DTRACE_PYTHON_LAUNCHER="mpirun -n 3", DTRACE_CHECKPOINT_DIR=os.path.join(self.dir, "ck"),
                          DTRACE_DETERMINISTIC="1")
        rec = dtrace.Recorder({}, run_dir=os.path.join(self.dir, "run"))
        self.assertIs(rec.deterministic, True)
        rec.close()
        argv = log(os.path.join(self.dir, "run"))[0]["replay"]["argv"]
        env = argv[0]
        self.assertTrue(env.endswith("env"), argv)
        self.assertIn(f"PYTHON_DTRACE_CHECKPOINT_DIR={os.path.join(self.dir, 'ck')}", argv)
        self.assertIn("PYTHON_DTRACE_DETERMINISTIC=1", argv)
        launcher = argv.index("-n")
        self.assertTrue(argv[launcher - 1].endswith("mpirun"), argv)
        self.assertEqual(argv[launcher + 1:launcher + 3], ["3", sys.executable])

    def test_several_processes_without_a_launcher_are_warned_of(self):
        # The replay command of a rank with no launcher restarts that process
        # alone: said when recording, not only when bisect's replays fail.
        os.environ.update(RANK="1", WORLD_SIZE="2")
        with self.assertWarnsRegex(RuntimeWarning, "rank 1 of 2, but no launcher is named "
                                                   r"\(DTRACE_PYTHON_LAUNCHER or launcher=\)"):
            dtrace.Recorder({}, run_dir=os.path.join(self.dir, "a")).close()
        import warnings
        for env, kw in (({"DTRACE_PYTHON_LAUNCHER": "python3 launch.py 2"}, {}), ({}, {"launcher": "mpirun -n 2"}),
                        ({}, {"replay_argv": ["./job.sh"]}), ({"WORLD_SIZE": "1", "RANK": "0"}, {}),
                        # a replay's ranks, started by the launcher: nothing to say there
                        ({"DTRACE_REPLAY_STEP": "0", "DTRACE_OUT_DIR": os.path.join(self.dir, "out")}, {})):
            with mock.patch.dict(os.environ, env), warnings.catch_warnings():
                warnings.simplefilter("error")
                dtrace.Recorder({}, run_dir=os.path.join(self.dir, f"b{len(os.listdir(self.dir))}"), **kw).close()

    def test_a_replay_without_its_rank_names_the_missing_launcher(self):
        ckpt = os.path.join(self.dir, "ck")
        os.environ["DTRACE_PYTHON_LAUNCHER"] = "python3 launch.py 2"
        for r in (0, 1):
            with mock.patch.dict(os.environ, RANK=str(r), WORLD_SIZE="2"):
                rec = dtrace.Recorder({"w": {"w": 1.0}}, run_dir=os.path.join(self.dir, "run"), checkpoint_dir=ckpt)
                for step in rec.steps(1):
                    with rec.step(step):
                        pass
        self.assertEqual(sorted(os.listdir(ckpt)), ["rank0", "rank1"])
        # The replay a launcher-less replay command runs: one process, no RANK.
        del os.environ["DTRACE_PYTHON_LAUNCHER"]
        os.environ.update(DTRACE_REPLAY_STEP="0", DTRACE_OUT=os.path.join(self.dir, "replay.jsonl"))
        rec = dtrace.Recorder({"w": {"w": 1.0}}, checkpoint_dir=ckpt)
        with self.assertRaisesRegex(dtrace.CheckpointError, "it holds rank0, rank1, a job of several processes' "
                                    ".* no launcher in its replay command .*DTRACE_PYTHON_LAUNCHER"):
            for step in rec.steps(1):
                pass
        rec.close()

    def test_bad_arguments_are_named(self):
        with self.assertRaisesRegex(ValueError, "level='steps'"):
            dtrace.Recorder({}, level="steps")
        with self.assertRaisesRegex(TypeError, r"state\['model'\]: object"):
            dtrace.Recorder({"model": object()})
        with self.assertRaisesRegex(ValueError, "scope part 'a/b'"):
            rec = dtrace.Recorder({}, run_dir=os.path.join(self.dir, "r"))
            with rec.scope("a/b"):
                pass

    def test_isolation_without_an_isolate_function_is_refused(self):
        rec = dtrace.Recorder({}, run_dir=os.path.join(self.dir, "r"))
        rec.close()
        rec.native = mock.Mock(isolate_scope=lambda: "fwd/layer.1")
        with self.assertRaisesRegex(dtrace.CaptureError, "DTRACE_ISOLATE=fwd/layer.1: this program cannot"):
            rec._isolate(0)


class Loading(unittest.TestCase):
    def test_an_older_libdtrace_is_refused_naming_what_it_lacks(self):
        class Old:  # a libdtrace of before DTRACE_1.5: the recorder, no batched records
            dtrace_recorder_open = object()

        with mock.patch.dict(os.environ, {"DTRACE_LIBRARY": "/old/libdtrace.so"}), \
                mock.patch.object(capi.ctypes, "CDLL", lambda path: Old()):
            with self.assertRaisesRegex(dtrace.LibraryNotFound, r"/old/libdtrace.so \(a libdtrace older than "
                                        r"this package: no dtrace_recorder_tensors, symbol version DTRACE_1.5\)"):
                capi._load()


class CountingLibrary:
    """libdtrace as a Native calls it, each function call remembered by name
    (the cost the issue counts: a call into C per scope, per record)."""

    def __init__(self, lib):
        self.lib, self.calls = lib, []

    def __getattr__(self, name):
        fn = getattr(self.lib, name)

        def call(*args):
            self.calls.append(name)
            return fn(*args)
        return call


class CostPerCall(Scratch):
    """What a step costs in calls into libdtrace and generator states built
    (issue 41): a scope inside which nothing is written at the level in force,
    and a record above that level, cost none; a scope is pushed to libdtrace
    when a record is written in it, and is then right."""

    def recorder(self, level):
        rec = dtrace.Recorder({"param": {"w": np.ones(4, np.float32)}},
                              run_dir=os.path.join(self.dir, f"run-{level}"), level=level)
        counting = CountingLibrary(rec.native._lib)
        rec.native._lib = counting
        return rec, counting

    @staticmethod
    def layers(rec, x, step_record=None):
        """Nested scopes, each with layer- and kernel-level records (and a
        step-level one where `step_record` names the layer)."""
        for group in ("fwd", "bwd"):
            for i in range(3):
                with rec.scope(group), rec.scope(f"layer.{i}"):
                    rec.record(f"layer.{i}", {"x": x}, io="in", level="layer")
                    with rec.scope("mlp"):
                        rec.record("gemm", {"a": x}, io="in", level="kernel")
                        rec.record("gemm", {"y": x}, io="out", level="kernel")
                        rec.wants("kernel")
                    if step_record == (group, i):
                        rec.record("probe", {"p": x}, io="out", level="step")
                    rec.record(f"layer.{i}", {"y": x}, io="out", level="layer")

    def test_a_step_level_step_calls_nothing_for_scopes_that_record_nothing(self):
        rec, lib = self.recorder("step")
        x = np.arange(3, dtype=np.float32)
        for step in rec.steps(2):
            with rec.step(step):
                lib.calls.clear()
                self.layers(rec, x)
                self.assertEqual(lib.calls, [], "scopes and records above the level in force")
                rec.metric("loss", 0.5)
                self.assertEqual(lib.calls, ["dtrace_recorder_scalar"], "the step's scope, already libdtrace's")
        lines = log(os.path.join(self.dir, "run-step"))
        self.assertEqual({r.get("scope") for r in lines[1:] if "op" in r}, {"step"})

    def test_a_record_written_in_a_scope_pushes_it_first(self):
        rec, lib = self.recorder("step")
        x = np.arange(3, dtype=np.float32)
        for step in rec.steps(1):
            with rec.step(step):
                lib.calls.clear()
                self.layers(rec, x, step_record=("bwd", 1))
                # wants(step) was asked at the step's start: its answer holds for the
                # step; a record given for the first time goes as one call.
                self.assertEqual(lib.calls, ["dtrace_recorder_pop_scope", "dtrace_recorder_push_scope",
                                             "dtrace_recorder_tensor"])
                lib.calls.clear()
                self.assertEqual(rec.native.current_scope(), "step")  # read: libdtrace's is made right first
                self.assertEqual(lib.calls, ["dtrace_recorder_pop_scope", "dtrace_recorder_push_scope",
                                             "dtrace_recorder_current_scope"])
                lib.calls.clear()
                rec.metric("loss", 0.5)
                self.assertEqual(lib.calls, ["dtrace_recorder_scalar"])
        by = {(r.get("scope"), r.get("op")) for r in log(os.path.join(self.dir, "run-step"))[1:]}
        self.assertIn(("bwd/layer.1", "probe"), by)
        self.assertIn(("step", "loss"), by)

    def test_layer_level_records_in_the_scopes_they_were_made_in(self):
        rec, lib = self.recorder("layer")
        x = np.arange(3, dtype=np.float32)
        for step in rec.steps(1):
            with rec.step(step):
                self.layers(rec, x, step_record=("fwd", 2))
                rec.metric("loss", 0.5)
        lines = log(os.path.join(self.dir, "run-layer"))
        got = [(r["scope"], r["op"], r["name"]) for r in lines[1:] if "op" in r and r["scope"] != "step"]
        want = []
        for group in ("fwd", "bwd"):
            for i in range(3):
                scope = f"{group}/layer.{i}"
                want += [(scope, f"layer.{i}", "x")] + ([(scope, "probe", "p")] if (group, i) == ("fwd", 2) else [])
                want += [(scope, f"layer.{i}", "y")]
        self.assertEqual(got, want)
        self.assertNotIn("dtrace_recorder_captures", lib.calls)  # nothing captured: never asked

    def test_a_scope_entered_inside_itself_and_again_records_where_it_is(self):
        """rec.scope(part) is one object per part (made once): entered inside
        itself, and again after, each record lands in the scope it was made in."""
        rec, _ = self.recorder("layer")
        x = np.arange(3, dtype=np.float32)
        for step in rec.steps(1):
            with rec.step(step):
                block = rec.scope("blk")
                self.assertIs(rec.scope("blk"), block)
                with block as outer:
                    with rec.scope("blk") as inner:
                        rec.record("a", {"x": x}, io="in", level="layer")
                    rec.record("b", {"x": x}, io="in", level="layer")
                with block:
                    rec.record("c", {"x": x}, io="in", level="layer")
                rec.record("d", {"x": x}, io="in", level="step")
        self.assertEqual((outer, inner), ("blk", "blk/blk"))
        got = [(r["scope"], r["op"]) for r in log(os.path.join(self.dir, "run-layer"))[1:]
               if r.get("op") in ("a", "b", "c", "d")]
        self.assertEqual(got, [("blk/blk", "a"), ("blk", "b"), ("blk", "c"), ("step", "d")])

    def test_wants_at_step_and_layer_level_is_asked_once_a_step(self):
        """Their answer depends on the step alone (recorder.h): asked of
        libdtrace once per level and step, and again in the next step, where
        a fast-forward may have ended."""
        rec, lib = self.recorder("layer")
        n = rec.native
        n.fast_forward(2)
        answers = []
        for step in range(4):
            n.wants(capi.LEVEL_STEP)  # between steps: asked, not kept into the next step
            n.begin_step(step)
            lib.calls.clear()
            answers.append((n.wants(capi.LEVEL_STEP), n.wants(capi.LEVEL_LAYER), n.wants(capi.LEVEL_STEP),
                            n.wants(capi.LEVEL_LAYER)))
            self.assertEqual(lib.calls, ["dtrace_recorder_wants"] * 2, step)
            n.end_step()
        self.assertEqual(answers, [(False,) * 4] * 2 + [(True,) * 4] * 2)
        rec.close()

    def test_a_steps_state_and_batch_go_to_libdtrace_in_one_call(self):
        """dtrace_recorder_tensors (DTRACE_1.5): the state's arrays and numbers
        and the batch, in one call at the step's start, written as the calls
        one by one would: every record, in order, each with its own bytes,
        also when a later step's arrays are others of the same shapes (the
        call's C arrays are kept, its addresses not) or of another shape.
        Records given for the first time go one call each (a plan is made for
        those that come again)."""
        w, b = np.arange(4, dtype=np.float32), np.array([-1.5, 2.0])
        state = {"param": {"w": w, "b": b, "lr": 0.25}, "other": {"count": 3}}
        rec = dtrace.Recorder(state, run_dir=os.path.join(self.dir, "run"), level="step")
        counting = CountingLibrary(rec.native._lib)
        rec.native._lib = counting
        batches = []
        for step in rec.steps(5):
            x = np.full((2, 3) if step < 2 else (5,), step, np.int32)
            y = np.array([step * 0.5], np.float32)
            batches.append((x, y))
            counting.calls.clear()
            with rec.step(step, batch={"x": x, "y": y}):
                calls = [c for c in counting.calls if c.startswith("dtrace_recorder_tensor")]
                if step in (0, 2):  # new records: one call each, remembered
                    self.assertEqual(calls, ["dtrace_recorder_tensor"] * 6, step)
                else:
                    self.assertEqual(calls, ["dtrace_recorder_tensors"], "one call for the state and the batch")
                # Step level is wanted but in a fast-forwarded step, whose host
                # records libdtrace drops unhashed: not asked.
                self.assertNotIn("dtrace_recorder_wants", counting.calls, step)
            state["param"]["w"] = w = w * 2  # another array of the same shape, elsewhere
        lines = [r for r in log(os.path.join(self.dir, "run"))[1:] if r.get("op") in ("param", "other", "batch")]
        names = [(r["step"], r["op"], r["name"]) for r in lines]
        self.assertEqual(names, [(s, op, n) for s in range(5) for op, n in (
            ("param", "param.w"), ("param", "param.b"), ("param", "param.lr"), ("other", "other.count"),
            ("batch", "batch.x"), ("batch", "batch.y"))])
        digest = lambda a: f"{capi.fingerprint_host(a.ctypes.data, a.nbytes):016x}"  # noqa: E731
        by = {(r["step"], r["name"]): r for r in lines}
        w0 = np.arange(4, dtype=np.float32)
        for s in range(5):
            self.assertEqual(by[s, "param.w"]["hash"], digest(w0 * 2 ** s), s)
            self.assertEqual(by[s, "param.b"]["hash"], digest(b), s)
            self.assertEqual(by[s, "param.lr"]["hash"], digest(np.array(0.25)), s)
            self.assertEqual(by[s, "other.count"]["hash"], digest(np.array(3, np.int64)), s)
            self.assertEqual(by[s, "batch.x"]["hash"], digest(batches[s][0]), s)
            self.assertEqual(by[s, "batch.x"]["shape"], list(batches[s][0].shape), s)
            self.assertEqual(by[s, "batch.y"]["hash"], digest(batches[s][1]), s)

    def test_a_value_refused_in_a_gathered_step_start_hands_over_nothing_of_its_record(self):
        rec = dtrace.Recorder({"param": {"w": np.ones(2, np.float32)}}, run_dir=os.path.join(self.dir, "run"))
        with self.assertRaisesRegex(ValueError, "big-endian"):
            with rec.step(0, batch={"x": np.zeros(2, np.float32), "z": np.zeros(2, ">f4")}):
                pass
        rec.native.end_step()  # the step as far as it got, written
        rec.close()
        got = [(r["op"], r["name"]) for r in log(os.path.join(self.dir, "run"))[1:] if "op" in r]
        self.assertEqual(got, [("param", "param.w")], "the state before the refused batch, none of the batch")

    def test_generator_states_are_built_only_when_a_step_may_have_drawn(self):
        np.random.seed(5)  # no cached gaussian: NumPy's words tell every draw
        built = []
        with mock.patch.object(random, "getstate", side_effect=lambda real=random.getstate: (
                built.append("python"), real())[1]), \
                mock.patch.object(np.random, "get_state", side_effect=lambda *a, real=np.random.get_state: (
                    built.append("numpy"), real(*a))[1]):
            rec, _ = self.recorder("step")
            built.clear()
            for step in rec.steps(4):
                with rec.step(step):
                    if step == 2:
                        random.random()
                        np.random.random()
        self.assertEqual(built, ["numpy",    # step 0: its words' reader checked (no gaussian cached)
                                 "numpy"],   # step 3: NumPy's words changed since: asked again
                         "a step that draws nothing builds no state tuple")
        rngs = [(r["step"], r["name"]) for r in log(os.path.join(self.dir, "run-step"))[1:] if r.get("op") == "rng"]
        self.assertEqual(rngs, [(2, "python"), (2, "numpy")])


class Captures(unittest.TestCase):
    def test_a_missing_input_is_named_not_replaced(self):
        from dtrace import isolation
        native = mock.Mock(captured_find=lambda *a: None, inputs_dir=lambda: "/cap")
        rec = mock.Mock(native=native, rank=2)
        with self.assertRaisesRegex(dtrace.CaptureError,
                                    r"/cap: no captured in record 'x' of fwd/layer.1 gemm, call 2 for rank 2"):
            isolation.find(rec, "fwd/layer.1", "gemm", capi.IO_IN, "x", 1)
        native.captured_find = lambda scope, op, io, name, occ: 5 if (scope, op, io, name, occ) == (
            "fwd/layer.1", "gemm", capi.IO_IN, "x", 1) else None
        self.assertEqual(isolation.find(rec, "fwd/layer.1", "gemm", capi.IO_IN, "x", 1), 5)

    def test_a_captured_record_names_its_numpy_dtype(self):
        fields = dict(index=0, scope="fwd", op="gemm", io=capi.IO_IN, occurrence=0, name="x", shape=(2, 3),
                      bytes=6, step=0, seq=1, file="cap/x.bin")
        for dtype, want in (("f32", np.float32), ("u8", np.uint8), ("i64", np.int64), ("bool", np.bool_)):
            c = dtrace.Captured(dtype=dtype, **fields)
            self.assertEqual(np.empty(c.shape, c.numpy_dtype).dtype, np.dtype(want), dtype)
        with self.assertRaisesRegex(ValueError, "bf16: NumPy has no type"):
            dtrace.Captured(dtype="bf16", **fields).numpy_dtype


if __name__ == "__main__":
    unittest.main()
