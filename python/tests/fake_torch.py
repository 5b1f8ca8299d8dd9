"""A stand-in for the few torch names ktune.ops.XqaDecodeOp reads (Tensor metadata, dtypes, devices, the raw
stream, torch.empty), so the Python side of a prepared op's call can be tested and timed on a machine without
torch or a GPU (XqaDecodeOp._unprepared). Tensors hold no data: a fake address per allocation. The in-place
metadata changes torch allows on one tensor object are modelled (resize_, as_strided_, set_, the `.data`
setter), so checks that must survive them can be exercised. Not a torch: only what the op touches."""

import itertools


class dtype:
    def __init__(self, name, itemsize):
        self.name, self.itemsize = name, itemsize

    def __repr__(self):
        return f"torch.{self.name}"


bfloat16, float16, float32 = dtype("bfloat16", 2), dtype("float16", 2), dtype("float32", 4)
int32, int16, uint8, uint16, uint32 = dtype("int32", 4), dtype("int16", 2), dtype("uint8", 1), dtype("uint16", 2), \
    dtype("uint32", 4)
float8_e4m3fn = dtype("float8_e4m3fn", 1)


class device(tuple):
    """(type, index), equal by value and hashable as torch.device, and compared in C as torch's is (a
    Python-level __eq__ would make the fake's comparisons cost what torch's do not); a new object per
    `Tensor.device` read, as torch's."""
    __slots__ = ()

    def __new__(cls, spec, index=None):
        if isinstance(spec, device):
            return spec
        if ":" in spec:
            spec, index = spec.split(":")[0], int(spec.split(":")[1])
        return tuple.__new__(cls, (spec, index))

    type = property(lambda self: self[0])
    index = property(lambda self: self[1])

    def __str__(self):
        return self[0] if self[1] is None else f"{self[0]}:{self[1]}"

    def __repr__(self):
        return f"device(type='{self[0]}'" + ("" if self[1] is None else f", index={self[1]}") + ")"


class Size(tuple):
    pass


_addresses = itertools.count(1 << 32, 1 << 20)  # 1 MiB apart, 256-byte aligned


def _contiguous_strides(shape):
    st, acc = [], 1
    for n in reversed(shape):
        st.append(acc)
        acc *= max(int(n), 1)
    return tuple(reversed(st))


class Tensor:
    def __init__(self, shape, dtype_, dev, strides=None, ptr=None):
        self._shape = tuple(int(x) for x in shape)
        self._strides = _contiguous_strides(self._shape) if strides is None else tuple(strides)
        self._dtype, self._device = dtype_, device(dev)
        self._ptr = next(_addresses) if ptr is None else ptr

    shape = property(lambda self: Size(self._shape))
    dtype = property(lambda self: self._dtype)
    device = property(lambda self: tuple.__new__(device, self._device))
    is_cuda = property(lambda self: self._device.type == "cuda")

    @property
    def nbytes(self):
        n = self._dtype.itemsize
        for x in self._shape:
            n *= x
        return n

    def size(self):
        return self.shape

    def stride(self, dim=None):
        return self._strides if dim is None else self._strides[dim]

    def dim(self):
        return len(self._shape)

    def numel(self):
        n = 1
        for x in self._shape:
            n *= x
        return n

    def element_size(self):
        return self._dtype.itemsize

    def data_ptr(self):
        return self._ptr

    def is_contiguous(self):
        expect = 1
        for n, st in zip(reversed(self._shape), reversed(self._strides)):
            if n != 1 and st != expect:
                return False
            expect *= n
        return True

    # views: the same memory, other metadata
    def __getitem__(self, index):
        if not isinstance(index, slice) or index.step not in (None, 1):
            raise NotImplementedError("fake_torch: only t[a:b] on the first dimension")
        start, stop, _ = index.indices(self._shape[0])
        return Tensor((max(stop - start, 0),) + self._shape[1:], self._dtype, self._device, self._strides,
                      self._ptr + start * self._strides[0] * self._dtype.itemsize)

    def view(self, dtype_):
        if dtype_.itemsize != self._dtype.itemsize:
            raise NotImplementedError("fake_torch: view to a dtype of another size")
        return Tensor(self._shape, dtype_, self._device, self._strides, self._ptr)

    def as_strided(self, shape, strides):
        return Tensor(shape, self._dtype, self._device, strides, self._ptr)

    def expand(self, *shape):
        strides = tuple(0 if n != m else st for n, m, st in zip(shape, self._shape, self._strides))
        return Tensor(shape, self._dtype, self._device, strides, self._ptr)

    def to(self, dev):
        return Tensor(self._shape, self._dtype, dev)

    # in-place metadata changes of this very object
    def resize_(self, *shape):
        self._shape = tuple(int(x) for x in shape)
        self._strides = _contiguous_strides(self._shape)
        return self

    def as_strided_(self, shape, strides):
        self._shape, self._strides = tuple(shape), tuple(strides)
        return self

    def set_(self, source):
        self._shape, self._strides, self._ptr = source._shape, source._strides, source._ptr
        self._dtype, self._device = source._dtype, source._device
        return self

    @property
    def data(self):
        return Tensor(self._shape, self._dtype, self._device, self._strides, self._ptr)

    @data.setter
    def data(self, new):  # torch's set_data: every field of `new` but the object (and its version counter)
        self.set_(new)

    def __repr__(self):
        return f"fake_torch.Tensor({list(self._shape)}, {self._dtype}, {self._device})"


def empty(*shape, dtype=float32, device="cpu"):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return Tensor(shape, dtype, device)


class _C:
    @staticmethod
    def _cuda_getCurrentRawStream(index):
        return 0
