"""dtrace.arrays (python/dtrace/arrays.py): the same values in every container
give the same (dtype, shape, bytes), which is what libdtrace fingerprints.

Run by meson as python/arrays (suite 'python'): Debian 12's python3 (NumPy 1.24,
torch 1.13), and in tools/test.sh's second pass TORCH_PYTHON (Python 3.13,
NumPy 2, torch 2). Needs NumPy; torch's cases are skipped without torch.
Device memory is never touched: the CUDA cases are fake objects describing
pointers that are never read."""
import ctypes
import gc
import os
import subprocess
import sys
import unittest
import weakref
from array import array

import numpy as np

from dtrace import arrays

try:
    import torch
except ImportError:  # the torch cases say so
    torch = None



def exports(producer):
    """Whether the producer's __dlpack__ exports this array (what it holds may
    be one its version cannot export)."""
    try:
        producer.__dlpack__()
        return True
    except Exception:
        return False


def content(view):
    """(dtype, shape, bytes) of a view: what libdtrace records."""
    return view.dtype, view.shape, ctypes.string_at(view.address, view.nbytes)


def expected(a, dtype):
    """What an array's values should be recorded as: its C-order copy's bytes."""
    c = np.array(a, order="C", copy=True)  # not ascontiguousarray: it makes 0-d arrays 1-d
    return dtype, tuple(c.shape), c.tobytes()


class InterfaceOnly:
    """An object mimicking NumPy through __array_interface__ alone."""

    def __init__(self, a, dtype=None):
        self.a = a
        self.__array_interface__ = a.__array_interface__
        if dtype is not None:
            self.dtype = dtype


class DLPackOnly:
    """A NumPy array seen only through DLPack: NumPy's own capsule."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, **kwargs):
        return self.a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


class FakeCuda:
    """A __cuda_array_interface__ (version 3) naming device memory never read."""

    def __init__(self, shape, strides=None, typestr="<f4", stream=None, device=None, ptr=0x7F0000000000):
        self.__cuda_array_interface__ = {"shape": shape, "strides": strides, "typestr": typestr,
                                         "data": (ptr, False), "version": 3, "stream": stream}
        if device is not None:
            self.__dlpack_device__ = lambda: (2, device)


# A DLPack producer in ctypes (dlpack.h's layout, written here independently of
# the module's), so that device capsules are tested without a GPU.
class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)(
    ("PyCapsule_New", ctypes.pythonapi))
_DLTENSOR = b"dltensor"  # lives as long as the module: the capsule keeps its address


class FakeDLPack:
    """A DLPack producer of any device, dtype and layout (no deleter: the
    memory is this object's or never read)."""

    def __init__(self, device_type, device_id, shape, strides=None, code=2, bits=32, lanes=1,
                 data=0x7F0000000000, byte_offset=0):
        self.shape = (ctypes.c_int64 * len(shape))(*shape)
        self.strides = (ctypes.c_int64 * len(shape))(*strides) if strides is not None else None
        t = DLTensor(data, DLDevice(device_type, device_id), len(shape), DLDataType(code, bits, lanes),
                     ctypes.cast(self.shape, ctypes.POINTER(ctypes.c_int64)),
                     ctypes.cast(self.strides, ctypes.POINTER(ctypes.c_int64)) if self.strides else None,
                     byte_offset)
        self.managed = DLManagedTensor(t, None, None)
        self.device = (device_type, device_id)

    def __dlpack__(self, stream=None):
        return _capsule_new(ctypes.addressof(self.managed), _DLTENSOR, None)

    def __dlpack_device__(self):
        return self.device


def values():
    return np.arange(12, dtype=np.float32).reshape(3, 4) * np.float32(0.37) - np.float32(1.5)


class SameValuesEveryContainer(unittest.TestCase):
    def test_float32_in_every_protocol(self):
        a = values()
        want = expected(a, "f32")
        mv2d = memoryview(array("f", a.ravel().tolist())).cast("B").cast("f", (3, 4))
        for label, obj in [("numpy", a), ("__array_interface__ only", InterfaceOnly(a)),
                           ("__dlpack__ only (NumPy's capsule)", DLPackOnly(a)),
                           ("memoryview 2-d", mv2d), ("memoryview of numpy", memoryview(a)),
                           ("bytearray-backed memoryview",
                            memoryview(bytearray(a.tobytes())).cast("f", (3, 4)))]:
            with self.subTest(label):
                self.assertTrue(arrays.is_array(obj))
                view = arrays.describe(obj)
                self.assertEqual(content(view), want)
                self.assertIsNone(view.device)
        flat = expected(a.ravel(), "f32")
        for label, obj in [("array('f')", array("f", a.ravel().tolist())),
                           ("memoryview of array('f')", memoryview(array("f", a.ravel().tolist()))),
                           ("bytes cast", memoryview(a.tobytes()).cast("f"))]:
            with self.subTest(label):
                self.assertEqual(content(arrays.describe(obj)), flat)

    @unittest.skipIf(torch is None, "no torch")
    def test_torch_cpu_tensor_through_dlpack(self):
        a = values()
        t = torch.from_numpy(a.copy())
        # torch CPU tensors have neither interface: this is the DLPack path.
        self.assertFalse(hasattr(t, "__array_interface__"))
        self.assertFalse(hasattr(t, "__cuda_array_interface__"))
        self.assertEqual(content(arrays.describe(t)), expected(a, "f32"))
        self.assertEqual(content(arrays.describe(t.T)), expected(a.T, "f32"))
        self.assertEqual(content(arrays.describe(t[:, 1::2])), expected(a[:, 1::2], "f32"))
        b = torch.arange(6, dtype=torch.float32).to(torch.bfloat16)
        self.assertEqual(content(arrays.describe(b)), ("bf16", (6,), b.view(torch.int16).numpy().tobytes()))
        self.assertEqual(content(arrays.describe(torch.tensor(2.5, dtype=torch.float64))),
                         expected(np.array(2.5), "f64"))
        c = np.array([1 + 2j, -3.5j], dtype=np.complex64)
        self.assertEqual(content(arrays.describe(torch.from_numpy(c))), expected(c, "c64"))
        flags = np.array([True, False, True])
        if exports(torch.from_numpy(flags)):  # torch 1.x exports no bool through DLPack
            self.assertEqual(content(arrays.describe(torch.from_numpy(flags))), expected(flags, "bool"))
        else:
            with self.assertRaisesRegex(ValueError, r"torch\.Tensor: its __dlpack__\(\) failed: Bool"):
                arrays.describe(torch.from_numpy(flags))

    @unittest.skipIf(torch is None, "no torch")
    def test_torch_refusal_names_the_type_and_why(self):
        with self.assertRaisesRegex(ValueError, r"torch\.Tensor: .*__dlpack__.*gradient"):
            arrays.describe(torch.ones(2, requires_grad=True))


class Layouts(unittest.TestCase):
    def test_non_contiguous_host_arrays_are_copied_in_c_order(self):
        a = values()
        for label, sub in [("a[:, ::2]", a[:, ::2]), ("a.T", a.T), ("a[::-1, 1:3]", a[::-1, 1:3]),
                           ("a[:, ::-2]", a[:, ::-2]), ("a[1:, None, 1]", a[1:, None, 1])]:
            self.assertFalse(sub.flags.c_contiguous, label)
            for kind, obj in [("numpy", sub), ("__array_interface__", InterfaceOnly(sub)),
                              ("memoryview", memoryview(sub))]:
                with self.subTest(label + " " + kind):
                    self.assertEqual(content(arrays.describe(obj)), expected(sub, "f32"))
            if not any(s < 0 for s in sub.strides):  # NumPy exports no negative strides
                with self.subTest(label + " DLPack"):
                    self.assertEqual(content(arrays.describe(DLPackOnly(sub))), expected(sub, "f32"))

    def test_array_interface_over_the_objects_own_buffer(self):
        # __array_interface__'s data None: the object's buffer, from 'offset'.
        a = values()

        class Buffer(bytearray):
            __array_interface__ = {"data": None, "offset": 8, "typestr": "<f4", "shape": (2, 3),
                                   "strides": (16, 4), "version": 3}
        want = a.ravel()[[2, 3, 4, 6, 7, 8]].reshape(2, 3)  # from element 2, rows 4 elements apart
        self.assertEqual(content(arrays.describe(Buffer(a.tobytes()))), expected(want, "f32"))
        fake = InterfaceOnly(a)
        fake.__array_interface__ = dict(fake.__array_interface__, data=None)
        with self.assertRaisesRegex(ValueError, "InterfaceOnly: its __array_interface__ has no data"):
            arrays.describe(fake)

    def test_the_copy_without_numpy_is_the_same(self):
        # The per-run walker the module uses when the program has no NumPy loaded.
        a = np.arange(2 * 3 * 5, dtype=np.int16).reshape(2, 3, 5)
        for sub in [a[:, ::2], a.transpose(2, 0, 1), a[::-1, :, 1:4], a[:, :, ::-3]]:
            i = sub.__array_interface__
            got = arrays._gather(i["data"][0], sub.shape, sub.strides, 2, use_numpy=False)
            self.assertEqual(bytes(got), np.array(sub, order="C").tobytes())

    def test_contiguous_arrays_are_not_copied(self):
        a = values()
        self.assertEqual(arrays.describe(a).address, a.__array_interface__["data"][0])
        self.assertEqual(arrays.describe(a[1:]).address, a[1:].__array_interface__["data"][0])
        self.assertEqual(arrays.describe(DLPackOnly(a)).address, a.__array_interface__["data"][0])
        b = bytearray(16)
        self.assertEqual(arrays.describe(b).address, ctypes.addressof((ctypes.c_char * 16).from_buffer(b)))

    def test_zero_dimensional(self):
        for obj in [np.float32(2.5), np.array(2.5, dtype=np.float32), InterfaceOnly(np.array(2.5, np.float32)),
                    DLPackOnly(np.array(2.5, dtype=np.float32))]:
            with self.subTest(type(obj).__name__):
                self.assertEqual(content(arrays.describe(obj)), ("f32", (), np.float32(2.5).tobytes()))

    def test_empty(self):
        for obj, shape in [(np.zeros((0, 3), np.float32), (0, 3)), (np.zeros((3, 0), np.float32).T, (0, 3)),
                           (array("f"), (0,)), (bytearray(), (0,)), (b"", (0,)),
                           (DLPackOnly(np.zeros((2, 0), np.float32)), (2, 0))]:
            with self.subTest(repr(obj)):
                view = arrays.describe(obj)
                self.assertEqual((view.dtype, view.shape, view.address, view.nbytes),
                                 ("f32" if not isinstance(obj, (bytes, bytearray)) else "u8", shape, 0, 0))


class Dtypes(unittest.TestCase):
    def test_bool(self):
        a = np.array([[True, False, True], [False, False, True]])
        self.assertEqual(content(arrays.describe(a)), expected(a, "bool"))
        self.assertEqual(content(arrays.describe(memoryview(a))), expected(a, "bool"))
        self.assertEqual(content(arrays.describe(a.T)), expected(a.T, "bool"))
        # NumPy 2 exports bool through DLPack (kDLBool), 1.x refuses: then so does describe.
        if exports(a):
            self.assertEqual(content(arrays.describe(DLPackOnly(a))), expected(a, "bool"))
        else:
            with self.assertRaisesRegex(ValueError, "DLPackOnly: its __dlpack__"):
                arrays.describe(DLPackOnly(a))

    def test_f16(self):
        a = np.linspace(-2, 2, 7).astype(np.float16)
        for obj in [a, memoryview(a), DLPackOnly(a), InterfaceOnly(a)]:
            with self.subTest(type(obj).__name__):
                self.assertEqual(content(arrays.describe(obj)), expected(a, "f16"))

    def test_integers_by_size_and_sign(self):
        for np_type, code, name in [(np.int64, "q", "i64"), (np.int32, "i", "i32"), (np.int16, "h", "i16"),
                                    (np.int8, "b", "i8"), (np.uint64, "Q", "u64"), (np.uint32, "I", "u32"),
                                    (np.uint16, "H", "u16"), (np.uint8, "B", "u8")]:
            a = np.array([1, 2, 100, 7], dtype=np_type)
            for obj in [a, memoryview(a), DLPackOnly(a), array(code, a.tolist())]:
                with self.subTest(name + " " + type(obj).__name__):
                    self.assertEqual(content(arrays.describe(obj)), expected(a, name))
        # 'l' and 'L' are C long: their size (8 here) says which.
        self.assertEqual(arrays.describe(array("l", [1])).dtype, "i%d" % (8 * array("l").itemsize))

    def test_complex_and_f64(self):
        c = np.array([1 + 2j, 3 - 4j], dtype=np.complex128)
        for obj in [c, memoryview(c), DLPackOnly(c)]:
            self.assertEqual(content(arrays.describe(obj)), expected(c, "c128"))
        m = (np.arange(6) + 1j * np.arange(6)[:, None]).T[::-1, 1::2]  # c128 elements, strided
        for obj in [m, InterfaceOnly(m), memoryview(m)]:
            self.assertEqual(content(arrays.describe(obj)), expected(m, "c128"))
        odd = np.frombuffer(bytes(1) + np.arange(12, dtype=np.float32).tobytes(), np.uint8)[1:]
        odd = odd.view(np.float32).reshape(3, 4).T  # an unaligned address, strided
        self.assertEqual(content(arrays.describe(odd)), expected(odd, "f32"))
        d = np.array([0.1, -0.0])
        self.assertEqual(content(arrays.describe(array("d", d.tolist()))), expected(d, "f64"))

    def test_bfloat16_and_float8_as_ml_dtypes_show_them(self):
        # ml_dtypes (JAX's host arrays) shows bfloat16 as '<V2' with the dtype named.
        raw = np.array([0x3F80, 0x4000], dtype=np.uint16)
        fake = InterfaceOnly(raw, dtype=type("DT", (), {"name": "bfloat16"})())
        fake.__array_interface__ = dict(raw.__array_interface__, typestr="<V2", descr=[("", "<V2")])
        self.assertEqual(content(arrays.describe(fake)), ("bf16", (2,), raw.tobytes()))
        fake.dtype.name = "something_else"
        with self.assertRaisesRegex(ValueError, "opaque elements"):
            arrays.describe(fake)

    def test_numpy_dtype_makes_the_array_of_each_dtype(self):
        # An array made with numpy_dtype(name) is what describe() calls name,
        # and holds the values a capture of that dtype holds (docs/python.md,
        # Isolation: np.empty(c.shape, c.numpy_dtype)).
        values = {"f16": [1.5, -2], "f32": [0.5, 2.0 ** 100], "f64": [0.1, 1e300], "c64": [1 + 2j, 3],
                  "c128": [1 - 1e-300j, 0], "i8": [-128, 127], "i16": [-1, 2], "i32": [-7, 1 << 30],
                  "i64": [-1, 1 << 62], "u8": [255, 1], "u16": [65535, 2], "u32": [1 << 31, 3],
                  "u64": [(1 << 64) - 1, 4], "bool": [True, False]}
        for name, numbers in values.items():
            with self.subTest(name):
                typestr = arrays.numpy_dtype(name)
                a = np.array(numbers, dtype=typestr)
                self.assertEqual(np.dtype(typestr).str, typestr)
                self.assertEqual(a.tolist(), numbers)
                self.assertEqual(arrays.describe(a).dtype, name)
        self.assertEqual(set(values) | {"bf16", "f8e4m3", "f8e5m2"}, set(arrays._ITEMSIZE))
        for name in ("bf16", "f8e4m3", "f8e5m2"):
            with self.assertRaisesRegex(ValueError, f"dtype {name}: NumPy has no type for it"):
                arrays.numpy_dtype(name)
        with self.assertRaisesRegex(ValueError, "'float32': not a dtrace-fp.5. dtype name"):
            arrays.numpy_dtype("float32")

    def test_refused_dtypes_name_the_type_and_why(self):
        for obj, pattern in [
                (np.arange(3, dtype=">f4"), r"numpy\.ndarray: big-endian elements \(typestr '>f4'\)"),
                (memoryview(np.arange(3, dtype=">i4")), r"memoryview: big-endian elements \(format '>i'\)"),
                (InterfaceOnly(np.arange(3, dtype=">f8")), r"InterfaceOnly: big-endian"),
                (np.zeros(2, dtype=[("x", "<f4"), ("y", "<i4")]), r"numpy\.ndarray: a structured dtype"),
                (np.array([None, 1]), r"numpy\.ndarray: .*'\|O'.* no dtrace-fp\(5\) dtype"),
                (np.array(["ab"]), r"numpy\.ndarray: .*'<U2'"),
                (np.array([1], dtype="datetime64[s]"), r"numpy\.ndarray: .*'<M8\[s\]'"),
                (memoryview(b"abcd").cast("c"), r"memoryview: buffer elements of format 'c'")]:
            with self.subTest(pattern):
                with self.assertRaisesRegex(ValueError, pattern):
                    arrays.describe(obj)

    def test_not_an_array(self):
        for obj, name in [(object(), "object"), (3.5, "float"), ("abc", "str"), ([1, 2], "list"),
                          (np.ndarray, "ndarray")]:
            with self.subTest(name):
                self.assertFalse(arrays.is_array(obj))
                with self.assertRaisesRegex(TypeError, name):
                    arrays.describe(obj)
        with self.assertRaisesRegex(TypeError, r"^object is not an array: it has no __cuda_array_interface__, "
                                               r"__array_interface__ or __dlpack__, and not the buffer protocol"):
            arrays.describe(object())


class Devices(unittest.TestCase):
    def test_cuda_interface_is_described_not_read(self):
        view = arrays.describe(FakeCuda((3, 4), None, stream=7))
        self.assertEqual((view.dtype, view.shape, view.address, view.nbytes, view.device, view.stream),
                         ("f32", (3, 4), 0x7F0000000000, 48, 0, 7))
        self.assertEqual(arrays.describe(FakeCuda((3, 4), (16, 4), device=2)).device, 2)
        self.assertIsNone(arrays.describe(FakeCuda((2,), typestr="<f2")).stream)
        # An extent of 1 may have any stride.
        self.assertEqual(arrays.describe(FakeCuda((2, 1), (2, 99), typestr="<f2")).nbytes, 4)

    def test_cuda_interface_not_contiguous_is_refused(self):
        for shape, strides in [((3, 4), (4, 12)), ((3, 2), (16, 8)), ((4,), (-4,))]:
            with self.subTest(strides):
                with self.assertRaisesRegex(ValueError, r"FakeCuda: device memory that is not C-contiguous"):
                    arrays.describe(FakeCuda(shape, strides))
        with self.assertRaisesRegex(TypeError, "FakeCuda: cannot read bytes into it: it is in device memory"):
            arrays.read_into(FakeCuda((1,)), b"\0" * 4)

    def test_dlpack_device_capsules(self):
        view = arrays.describe(FakeDLPack(2, 3, (4, 5), byte_offset=64))
        self.assertEqual((view.dtype, view.shape, view.address, view.nbytes, view.device),
                         ("f32", (4, 5), 0x7F0000000000 + 64, 80, 3))
        self.assertEqual(arrays.describe(FakeDLPack(2, 0, (4, 5), strides=(5, 1))).device, 0)
        with self.assertRaisesRegex(ValueError, r"FakeDLPack: device memory that is not C-contiguous"):
            arrays.describe(FakeDLPack(2, 0, (4, 5), strides=(1, 4)))
        with self.assertRaisesRegex(ValueError, "DLPack device type 4 "):
            arrays.describe(FakeDLPack(4, 0, (4,)))
        with self.assertRaisesRegex(ValueError, "4 lanes"):
            arrays.describe(FakeDLPack(1, 0, (4,), lanes=4))

    def test_a_failing_cuda_interface_leaves_dlpack(self):
        # torch's __cuda_array_interface__ refuses bfloat16, which its DLPack exports.
        class Bf16Cuda(FakeDLPack):
            @property
            def __cuda_array_interface__(self):
                raise TypeError("dtype torch.bfloat16 is not supported by __cuda_array_interface__")
        view = arrays.describe(Bf16Cuda(2, 1, (8,), code=4, bits=16))
        self.assertEqual((view.dtype, view.shape, view.nbytes, view.device), ("bf16", (8,), 16, 1))
        self.assertTrue(arrays.is_array(Bf16Cuda(2, 1, (8,))))

        class Refusing:  # and without another protocol, its error is the one reported
            @property
            def __cuda_array_interface__(self):
                raise RuntimeError("Can't get __cuda_array_interface__ on Variable that requires grad")
        with self.assertRaisesRegex(ValueError, r"Refusing: its __cuda_array_interface__ failed: .*requires grad"):
            arrays.describe(Refusing())

    def test_dlpack_host_capsule_with_element_strides(self):
        buf = (ctypes.c_double * 12)(*range(12))
        fake = FakeDLPack(1, 0, (3, 2), strides=(4, 2), code=2, bits=64, data=ctypes.addressof(buf),
                          byte_offset=8)
        # Elements 1 + 4i + 2j (element strides, from byte_offset 8).
        want = np.arange(12, dtype=np.float64)[1::2].reshape(3, 2)
        self.assertEqual(content(arrays.describe(fake)), expected(want, "f64"))

    def test_dlpack_mappings(self):
        self.assertIsNone(arrays.dlpack_device(1, 0))
        self.assertIsNone(arrays.dlpack_device(3, 0))  # pinned host memory
        self.assertEqual(arrays.dlpack_device(2, 5), 5)
        for device_type in (4, 10, 13):
            with self.assertRaises(ValueError):
                arrays.dlpack_device(device_type, 0)
        table = {(0, 8): "i8", (0, 16): "i16", (0, 32): "i32", (0, 64): "i64", (1, 8): "u8", (1, 16): "u16",
                 (1, 32): "u32", (1, 64): "u64", (2, 16): "f16", (2, 32): "f32", (2, 64): "f64",
                 (4, 16): "bf16", (5, 64): "c64", (5, 128): "c128", (6, 8): "bool",
                 (10, 8): "f8e4m3", (12, 8): "f8e5m2"}
        for (code, bits), name in table.items():
            self.assertEqual(arrays.dlpack_dtype(code, bits, 1), name)
        for code, bits, lanes in [(2, 32, 4), (3, 64, 1), (2, 8, 1), (8, 8, 1), (4, 32, 1)]:
            with self.assertRaises(ValueError):
                arrays.dlpack_dtype(code, bits, lanes)


class Lifetimes(unittest.TestCase):
    def test_dlpack_capsule_keeps_and_then_releases_the_array(self):
        a = values()
        want = expected(a, "f32")
        b = a.copy()
        alive = weakref.ref(b)
        view = arrays.describe(DLPackOnly(b))
        del b
        gc.collect()
        # The view's capsule holds the array (its deleter not yet run)...
        self.assertIsNotNone(alive())
        self.assertEqual(content(view), want)
        del view
        gc.collect()
        # ... and releasing the capsule ran the deleter (an unconsumed capsule's destructor does).
        self.assertIsNone(alive())

    def test_the_capsule_alone_keeps_an_exported_copy(self):
        # A producer exporting a temporary (a copy only its capsule holds): the
        # memory must live as long as the view, through the capsule it keeps.
        class DLPackCopy(DLPackOnly):
            def __dlpack__(self, **kwargs):
                c = self.a.copy()
                self.exported = weakref.ref(c)
                return c.__dlpack__(**kwargs)
        producer = DLPackCopy(values())
        view = arrays.describe(producer)
        gc.collect()
        self.assertIsNotNone(producer.exported())
        self.assertEqual(content(view), expected(values(), "f32"))
        del view
        gc.collect()
        self.assertIsNone(producer.exported())

    def test_numpy_scalars_memory_lives_as_long_as_the_view(self):
        # A NumPy scalar's __array_interface__ names a temporary array (the
        # dict's '__ref'), a new one at each access: the view must keep it.
        views = [arrays.describe(np.float32(i)) for i in range(200)]
        gc.collect()
        scratch = [np.full(1, -1.0, np.float32) for _ in range(2000)]
        self.assertEqual([content(v) for v in views],
                         [("f32", (), np.float32(i).tobytes()) for i in range(200)])
        del scratch

    def test_copies_live_as_long_as_the_view(self):
        a = values()
        view = arrays.describe(a.T[::2])
        want = expected(a.T[::2], "f32")
        del a
        gc.collect()
        np.ones(10000)  # reuse freed memory if the copy were freed
        self.assertEqual(content(view), want)
        ro = arrays.describe(bytes(range(200)))
        gc.collect()
        self.assertEqual(content(ro), ("u8", (200,), bytes(range(200))))


class ReadInto(unittest.TestCase):
    def test_into_writable_host_arrays(self):
        src = values()
        data = src.tobytes()
        for label, make, read_back in [
                ("numpy", lambda: np.zeros((3, 4), np.float32), lambda t: t),
                ("array('f')", lambda: array("f", [0.0] * 12), lambda t: np.frombuffer(t, np.float32).reshape(3, 4)),
                ("bytearray", lambda: bytearray(48), lambda t: np.frombuffer(t, np.float32).reshape(3, 4))]:
            with self.subTest(label):
                target = make()
                arrays.read_into(target, data)
                np.testing.assert_array_equal(read_back(target), src)

    def test_into_a_strided_view_writes_the_base(self):
        base = np.zeros((3, 8), np.float32)
        sub = base[:, ::2]  # (3, 4), non-contiguous
        arrays.read_into(sub, values().tobytes())
        np.testing.assert_array_equal(base[:, ::2], values())
        np.testing.assert_array_equal(base[:, 1::2], 0)
        t = np.zeros((4, 3), np.float32).T
        arrays.read_into(InterfaceOnly(t), values().tobytes())
        np.testing.assert_array_equal(t, values())

    def test_scatter_without_numpy_is_the_same(self):
        base = np.zeros((3, 8), np.int32)
        sub = base[::-1, 1::2]
        data = np.arange(12, dtype=np.int32).tobytes()
        arrays._scatter(sub.__array_interface__["data"][0], sub.shape, sub.strides, 4, data, use_numpy=False)
        np.testing.assert_array_equal(sub, np.arange(12).reshape(3, 4))

    def test_refusals(self):
        ro = values()
        ro.setflags(write=False)
        for obj, error, pattern in [
                (ro, TypeError, "read-only"), (b"\0" * 48, TypeError, "bytes: .*read-only"),
                (DLPackOnly(values()), TypeError, "DLPack does not say"),
                (np.zeros(11, np.float32), ValueError, r"48 bytes for an array of 44 \(f32, shape \[11\]\)"),
                (object(), TypeError, "object is not an array")]:
            with self.subTest(pattern):
                with self.assertRaisesRegex(error, pattern):
                    arrays.read_into(obj, values().tobytes())
        if torch is not None:
            with self.assertRaisesRegex(TypeError, r"torch\.Tensor: .*DLPack"):
                arrays.read_into(torch.zeros(12), values().tobytes())


class WithoutNumpy(unittest.TestCase):
    def test_no_numpy_import_and_the_walker_in_use(self):
        # A program without NumPy: importing and using the module loads none,
        # and a strided __array_interface__ is copied by the per-run walker.
        code = r"""
import ctypes, sys
from array import array
from dtrace import arrays
buf = (ctypes.c_int32 * 6)(*range(6))
class Strided:  # 2x3 stored as its transpose
    __array_interface__ = {"data": (ctypes.addressof(buf), False), "typestr": "<i4",
                           "shape": (2, 3), "strides": (4, 8), "version": 3}
v = arrays.describe(Strided())
assert ctypes.string_at(v.address, v.nbytes) == bytes(array("i", [0, 2, 4, 1, 3, 5])), "walker"
assert arrays.describe(array("f", [1, 2])).dtype == "f32"
assert arrays.describe(memoryview(bytearray(8)).cast("d")).dtype == "f64"
assert "numpy" not in sys.modules, "numpy imported"
"""
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=os.environ)
        self.assertEqual(r.returncode, 0, r.stderr)


if __name__ == "__main__":
    unittest.main()
