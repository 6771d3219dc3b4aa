"""dtrace record's recorder (python/dtrace_torch/auto.py and its bootstrap
sitecustomize) on small unmodified programs: where it finds the steps, what it
records of them, what it refuses and the note it leaves for dtrace record.
Each program runs in its own Python process with the variables dtrace record
sets (the recorder patches torch for the whole process), against the build's
packages (PYTHONPATH=build/python). The e2e/record_* tests run it through the
dtrace binary."""
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

BUILD_PYTHON = os.path.abspath(os.environ["PYTHONPATH"].split(os.pathsep)[0])
BOOTSTRAP = os.path.join(BUILD_PYTHON, "dtrace_torch", "bootstrap")

HEADER = """
import torch
torch.manual_seed(0)
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 8)
        self.b = torch.nn.Linear(8, 2)
    def forward(self, x):
        return self.b(torch.relu(self.a(x)))
"""


class Program(unittest.TestCase):
    def setUp(self):
        self._dir = tempfile.TemporaryDirectory()
        self.dir = self._dir.name
        self.notes = os.path.join(self.dir, "notes")
        os.mkdir(self.notes)

    def tearDown(self):
        self._dir.cleanup()

    def run_program(self, body, extra_env=None, header=HEADER, expect=0, path_before=()):
        script = os.path.join(self.dir, "train.py")
        with open(script, "w") as f:
            f.write(header + textwrap.dedent(body))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DTRACE_", "RANK", "WORLD_SIZE"))}
        env.update({"PYTHONPATH": os.pathsep.join([BOOTSTRAP, *path_before, BUILD_PYTHON]),
                    "DTRACE_RUN_DIR": os.path.join(self.dir, "run"),
                    "DTRACE_RECORD_REPLAY_ARGV": json.dumps(["/bin/dtrace", "record", "--", sys.executable, script]),
                    "DTRACE_RECORD_CWD": self.dir, "DTRACE_RECORD_NOTES": self.notes})
        for name, value in (extra_env or {}).items():
            if value is None:
                env.pop(name, None)
            else:
                env[name] = value
        done = subprocess.run([sys.executable, script], cwd=self.dir, env=env, capture_output=True, text=True,
                              timeout=300)
        self.assertEqual(done.returncode, expect, done.stderr)
        return done

    def note(self):
        names = [n for n in os.listdir(self.notes) if n.endswith(".json")]
        self.assertEqual(len(names), 1, names)
        with open(os.path.join(self.notes, names[0])) as f:
            return json.load(f)

    def records(self, path=None):
        with open(path or os.path.join(self.dir, "run", "rank0.jsonl")) as f:
            lines = [json.loads(line) for line in f]
        return lines[0], [r for r in lines[1:] if "op" in r]

    def test_gradient_accumulation_is_one_step_per_optimizer_step(self):
        self.run_program("""
            model = Net(); opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
            sched = torch.optim.lr_scheduler.StepLR(opt, 1, gamma=0.5)
            for step in range(3):
                for micro in range(2):
                    model(torch.randn(3, 4)).sum().backward()
                opt.step(); sched.step(); opt.zero_grad()
        """)
        header, records = self.records()
        self.assertEqual(sorted({r["step"] for r in records}), [0, 1, 2])
        for step in range(3):
            of = [r for r in records if r["step"] == step]
            self.assertEqual([r["name"] for r in of if r["op"] == "batch"], ["batch.0", "batch.0"])
            self.assertEqual(len([r for r in of if r["op"] == "loss" and r["io"] == "metric"]), 2)
            self.assertEqual({r["name"] for r in of if r["op"] == "grads"},
                             {"a.weight", "a.bias", "b.weight", "b.bias"})
            self.assertTrue(any(r["op"] == "optim" for r in of) or step == 0)
        self.assertEqual(header["replay"]["argv"][1:3], ["record", "--"])
        self.assertEqual(header["replay"]["cwd"], self.dir)
        self.assertEqual(header["config"]["recorded_by"], "dtrace record")
        note = self.note()
        self.assertEqual((note["steps"], note["forwards"], note["backwards"], note["recorded"], note["error"]),
                         (3, 6, 6, True, None))

    def test_evaluation_without_gradients_is_no_step_and_no_batch(self):
        self.run_program("""
            model = Net(); opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for step in range(2):
                model(torch.ones(3, 4)).sum().backward(); opt.step(); opt.zero_grad()
                with torch.no_grad():
                    model(torch.full((5, 4), 7.0))
        """)
        _, records = self.records()
        batches = [r for r in records if r["op"] == "batch"]
        self.assertEqual([(r["step"], r["shape"]) for r in batches], [(0, [3, 4]), (1, [3, 4])])

    def test_the_batch_is_what_autograd_did_not_produce(self):
        self.run_program("""
            enc, dec = Net(), torch.nn.Linear(2, 1)
            opt = torch.optim.SGD(list(enc.parameters()) + list(dec.parameters()), lr=0.1)
            for step in range(2):
                dec(enc(torch.ones(3, 4))).sum().backward(); opt.step(); opt.zero_grad()
        """)
        _, records = self.records()
        self.assertEqual([(r["step"], r["shape"]) for r in records if r["op"] == "batch"],
                         [(0, [3, 4]), (1, [3, 4])])

    def test_an_optimizer_wrapping_another_steps_once(self):
        self.run_program("""
            class Wrapper(torch.optim.Optimizer):
                def __init__(self, inner):
                    self.inner = inner
                    super().__init__(inner.param_groups, {})
                def step(self, closure=None):
                    return self.inner.step(closure)
            model = Net(); opt = Wrapper(torch.optim.SGD(model.parameters(), lr=0.1))
            for step in range(3):
                model(torch.ones(3, 4)).sum().backward(); opt.step(); opt.zero_grad()
        """)
        _, records = self.records()
        self.assertEqual(sorted({r["step"] for r in records}), [0, 1, 2])
        self.assertEqual(self.note()["steps"], 3)

    def test_a_subclass_stepping_through_its_base_class_steps_once(self):
        # Both classes' step() are hooked (an instance of each was made), and
        # the subclass's calls the base class's for the same optimizer.
        self.run_program("""
            class Mine(torch.optim.SGD):
                def step(self, closure=None):
                    return super().step(closure)
            model = Net(); unused = torch.optim.SGD(Net().parameters(), lr=0.1)
            opt = Mine(model.parameters(), lr=0.1)
            for step in range(3):
                model(torch.ones(3, 4)).sum().backward(); opt.step(); opt.zero_grad()
        """)
        self.assertEqual(self.note()["steps"], 3)
        _, records = self.records()
        for step in range(3):  # the gradients once, as the outermost step() began
            self.assertEqual(len([r for r in records if r["step"] == step and r["op"] == "grads"]), 4)

    def test_a_second_optimizer_steps_inside_the_step(self):
        self.run_program("""
            g, d = Net(), Net()
            opt_g = torch.optim.SGD(g.parameters(), lr=0.1, momentum=0.9)
            opt_d = torch.optim.SGD(d.parameters(), lr=0.1, momentum=0.9)
            for step in range(2):
                g(torch.ones(3, 4)).sum().backward(); opt_g.step(); opt_g.zero_grad()
                d(torch.ones(3, 4)).sum().backward(); opt_d.step(); opt_d.zero_grad()
        """)
        _, records = self.records()
        # Steps end at opt_g's step (the first to step): d's forward begins the next.
        self.assertEqual(self.note()["steps"], 2)
        self.assertEqual(sorted({r["step"] for r in records}), [0, 1])
        # Both models' parameters and gradients, and the other optimizer's state.
        step1 = [r for r in records if r["step"] == 1]
        self.assertEqual({r["name"] for r in step1 if r["op"] == "param"},
                         {f"{m}.{p}" for m in ("Net", "Net2") for p in ("a.weight", "a.bias", "b.weight", "b.bias")})
        # (d's gradients were zeroed by its own step, to None on torch 2.x.)
        self.assertLessEqual({f"Net.{p}" for p in ("a.weight", "a.bias", "b.weight", "b.bias")},
                             {r["name"] for r in step1 if r["op"] == "grads"})
        self.assertTrue(any(r["op"] == "optimizer1" for r in step1))

    def test_a_step_the_program_never_finished_is_dropped_but_a_crash_is_kept(self):
        body = """
            model = Net(); opt = torch.optim.SGD(model.parameters(), lr=0.1)
            model(torch.ones(3, 4)).sum().backward(); opt.step(); opt.zero_grad()
            model(torch.ones(3, 4)).sum()  # a forward with gradients on, and the program ends
            {}
        """
        self.run_program(body.format(""))
        _, records = self.records()
        self.assertEqual(sorted({r["step"] for r in records}), [0])
        os.remove(os.path.join(self.notes, os.listdir(self.notes)[0]))
        os.rename(os.path.join(self.dir, "run"), os.path.join(self.dir, "first"))
        self.run_program(body.format("raise SystemError('the program crashed')"), expect=1)
        with open(os.path.join(self.dir, "run", "rank0.jsonl")) as f:
            lines = [json.loads(line) for line in f][1:]
        self.assertTrue(any(r.get("step") == 1 and r.get("op") == "batch" for r in lines))
        self.assertFalse(any(r.get("step") == 1 and "end" in r for r in lines), "a crashed step has no end record")

    def test_a_step_without_backward_is_refused(self):
        done = self.run_program("""
            model = Net(); opt = torch.optim.SGD(model.parameters(), lr=0.1)
            loss = model(torch.ones(3, 4)).sum()
            grads = torch.autograd.grad(loss, list(model.parameters()))
            for p, g in zip(model.parameters(), grads):
                p.grad = g
            opt.step()
        """, expect=1)
        self.assertIn("RecordError: dtrace record: step 0: SGD.step() ran with no backward()", done.stderr)
        self.assertIn("with no backward()", self.note()["error"])

    def test_parameters_outside_any_module_are_refused(self):
        done = self.run_program("""
            w = torch.zeros(3, requires_grad=True); opt = torch.optim.SGD([w], lr=0.1)
            (w * 2).sum().backward(); opt.step()
        """, expect=1)
        self.assertIn("no torch.nn.Module holds the parameters it steps", done.stderr)
        self.assertFalse(self.note()["recorded"])

    def test_models_called_in_another_order_are_refused(self):
        done = self.run_program("""
            m1, m2 = Net(), torch.nn.Linear(4, 2)
            opt = torch.optim.SGD(list(m1.parameters()) + list(m2.parameters()), lr=0.1)
            for step in range(2):
                first, second = (m1, m2) if step == 0 else (m2, m1)
                (first(torch.ones(3, 4)).sum() + second(torch.ones(3, 4)).sum()).backward()
                opt.step(); opt.zero_grad()
        """, expect=1)
        self.assertIn("step 1: the modules holding SGD's parameters ran their forwards in another order", done.stderr)

    def test_a_program_without_an_optimizer_leaves_a_note_and_no_log(self):
        self.run_program("""
            print(Net()(torch.ones(1, 4)).sum().item())
        """)
        note = self.note()
        self.assertEqual((note["optimizers"], note["steps"], note["recorded"]), (0, 0, False))
        self.assertFalse(os.path.exists(os.path.join(self.dir, "run")))

    def test_a_program_with_its_own_recorder_is_recorded_by_it(self):
        self.run_program("""
            import dtrace_torch as dt
            model = Net(); opt = torch.optim.SGD(model.parameters(), lr=0.1)
            rec = dt.Recorder(model, opt, run_dir="its-own-dir")
            for step in rec.steps(2):
                with rec.step(step, batch=torch.ones(3, 4)):
                    model(torch.ones(3, 4)).sum().backward(); opt.step(); opt.zero_grad()
        """)
        header, records = self.records()
        # One log, the program's own (its config has no recorded_by), in dtrace record's directory
        # (DTRACE_RUN_DIR), replayed through dtrace record.
        self.assertNotIn("recorded_by", header["config"])
        self.assertEqual(header["replay"]["argv"][1:3], ["record", "--"])
        self.assertEqual(len([r for r in records if r["op"] == "batch"]), 2)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "its-own-dir")))
        self.assertTrue(self.note()["explicit"])

    def test_a_recorder_made_after_recording_began_is_refused(self):
        done = self.run_program("""
            import dtrace_torch as dt
            model = Net(); opt = torch.optim.SGD(model.parameters(), lr=0.1)
            model(torch.ones(3, 4)).sum().backward(); opt.step()
            dt.Recorder(model, opt, run_dir="late")
        """, expect=1)
        self.assertIn("dtrace record already records this process", done.stderr)

    def test_the_sitecustomize_it_stands_in_front_of_still_runs(self):
        site = os.path.join(self.dir, "site")
        os.mkdir(site)
        with open(os.path.join(site, "sitecustomize.py"), "w") as f:
            f.write("import os\nos.environ['SITE_RAN'] = 'yes'\n")
        done = self.run_program("""
            import os
            print("site", os.environ.get("SITE_RAN"))
        """, header="", path_before=[site])
        self.assertIn("site yes", done.stdout)

    def test_a_process_that_never_imports_torch_is_left_alone(self):
        done = self.run_program("""
            import sys
            print("torch" in sys.modules)
        """, header="")
        self.assertEqual(done.stdout.strip(), "False")
        self.assertEqual(os.listdir(self.notes), [])

    def test_a_replay_records_its_step_and_ends_the_process(self):
        out = os.path.join(self.dir, "replay")
        os.mkdir(out)
        done = self.run_program("""
            model = Net(); opt = torch.optim.SGD(model.parameters(), lr=0.1)
            for step in range(4):
                model(torch.ones(3, 4) * step).sum().backward(); opt.step(); opt.zero_grad()
            print("after the loop")
        """, extra_env={"DTRACE_REPLAY_STEP": "2", "DTRACE_LEVEL": "layer", "DTRACE_FAST_FORWARD": "step",
                        "DTRACE_OUT_DIR": out, "DTRACE_RUN_DIR": None, "DTRACE_RECORD_NOTES": None})
        self.assertNotIn("after the loop", done.stdout)
        _, records = self.records(os.path.join(out, "rank0.jsonl"))
        self.assertEqual(sorted({r["step"] for r in records}), [0, 1, 2])
        self.assertEqual({r["scope"] for r in records if r["step"] == 2 and r["scope"] != "step"},
                         {"fwd/a", "fwd/b", "bwd/a", "bwd/b", "opt"} & {r["scope"] for r in records})
        self.assertTrue(any(r["scope"] == "fwd/a" and r["step"] == 2 for r in records))
        self.assertFalse(any(r["scope"] == "fwd/a" and r["step"] < 2 for r in records))


if __name__ == "__main__":
    unittest.main()
