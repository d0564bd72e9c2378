"""Zero-copy exchange with NumPy on the host: the buffer protocol and DLPack, both ways, checked by
address (the same memory, not a copy of it), by writes seen on the other side, and by lifetimes
(either side outliving the other); and every refusal."""

import gc

import numpy as np
import pytest

import osprey
from osprey import OspreyError, fromGpu, toGpu


def lifted(values):
    return toGpu(values).unwrap()


def churn():
    """Frees and reallocates blocks of every small size: a block given back too early would be
    handed out (and overwritten) here."""
    gc.collect()
    for n in range(1, 64):
        lifted(np.full(n, -1.0))


# --- Osprey -> NumPy --------------------------------------------------------------------------------

def test_asarray_is_the_buffer_in_place():
    b = lifted([1.0, 2.0, 3.0, 4.0])
    a = np.asarray(b)
    assert a.dtype == np.float64 and a.shape == (4,)
    assert a.ctypes.data == b.address == osprey.rawDevicePtr(b)
    assert a.flags.writeable
    a[2] = 30.0
    assert fromGpu(b).unwrap() == [1.0, 2.0, 30.0, 4.0], "a write through NumPy is seen by Osprey"


def test_numpys_array_conversion_is_in_place_unless_a_copy_is_asked():
    b = lifted([1.0, 2.0, 3.0])
    a = b.__array__()
    assert a.ctypes.data == b.address and a.flags.writeable
    c = b.__array__(copy=True)
    assert c.ctypes.data != b.address and c.tolist() == [1.0, 2.0, 3.0]
    assert b.__array__(np.float32).dtype == np.float32
    assert np.array(b, copy=True).ctypes.data != b.address


def test_the_array_keeps_the_buffer_alive():
    a = np.asarray(lifted([1.0, 2.0, 3.0, 4.0]))
    address = a.ctypes.data
    churn()
    assert a.tolist() == [1.0, 2.0, 3.0, 4.0]
    assert a.ctypes.data == address


def test_memoryview_and_empty_buffers():
    view = memoryview(lifted([1.5, 2.5]))
    assert view.format == "d" and view.itemsize == 8 and view.shape == (2,) and view.tolist() == [1.5, 2.5]
    assert np.asarray(lifted([])).shape == (0,)


def test_numpy_from_dlpack_is_the_buffer_in_place():
    b = lifted([1.0, 2.0, 3.0])
    assert b.__dlpack_device__() == (1, 0)
    a = np.from_dlpack(b)
    assert a.ctypes.data == b.address
    del b
    churn()
    assert a.tolist() == [1.0, 2.0, 3.0], "the consumer's array holds the buffer"


def test_an_unconsumed_capsule_is_freed():
    b = lifted([1.0])
    for _ in range(100):
        b.__dlpack__()  # dropped at once: its destructor releases the hold on b
    assert fromGpu(b).unwrap() == [1.0]


def test_dlpack_requests_that_cannot_be_met():
    b = lifted([1.0])
    with pytest.raises(BufferError, match="shared in place, never copied"):
        b.__dlpack__(copy=True)
    with pytest.raises(BufferError, match="a host buffer has no stream"):
        b.__dlpack__(stream=1)
    with pytest.raises(BufferError, match="is shared in place, not moved"):
        b.__dlpack__(dl_device=(2, 0))
    assert b.__dlpack__(dl_device=(1, 0), copy=False, max_version=(1, 0)) is not None


# --- NumPy -> Osprey --------------------------------------------------------------------------------

@pytest.mark.parametrize("share", [osprey.from_buffer, osprey.from_dlpack])
def test_an_array_becomes_a_buffer_in_place(share):
    a = np.array([1.0, 2.0, 3.0, 4.0])
    b = share(a)
    assert b.address == a.ctypes.data and b.device == "host" and len(b) == 4
    a[0] = 10.0
    assert osprey.gpuGet(b, 0).unwrap() == 10.0, "a write through NumPy is seen by Osprey"
    product = osprey.gpuMatMul(b, b, 2, 2, 2).unwrap()
    assert fromGpu(product).unwrap() == [10 * 10 + 2 * 3, 10 * 2 + 2 * 4, 3 * 10 + 4 * 3, 3 * 2 + 4 * 4]


@pytest.mark.parametrize("share", [osprey.from_buffer, osprey.from_dlpack])
def test_the_buffer_keeps_the_array_alive(share):
    a = np.arange(8, dtype=np.float64)
    address = a.ctypes.data
    b = share(a)
    del a
    churn()
    assert b.address == address
    assert fromGpu(b).unwrap() == [float(i) for i in range(8)]


@pytest.mark.parametrize("share", [osprey.from_buffer, osprey.from_dlpack])
def test_a_round_trip_is_one_memory(share):
    a = np.array([1.0, 2.0, 3.0])
    back = np.asarray(share(a))
    assert back.ctypes.data == a.ctypes.data
    assert np.from_dlpack(share(a)).ctypes.data == a.ctypes.data
    assert np.shares_memory(back, a)


def test_arrays_of_any_shape_are_their_elements_in_order():
    a = np.arange(6, dtype=np.float64).reshape(2, 3)
    for b in (osprey.from_buffer(a), osprey.from_dlpack(a)):
        assert b.address == a.ctypes.data
        assert fromGpu(b).unwrap() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]


def test_read_only_arrays_are_shared_too():
    a = np.array([1.0, 2.0])
    a.setflags(write=False)
    assert osprey.from_buffer(a).address == a.ctypes.data


def test_a_legacy_capsule_is_taken_once():
    a = np.array([1.0, 2.0])
    capsule = a.__dlpack__()
    assert osprey.from_dlpack(capsule).address == a.ctypes.data
    with pytest.raises(OspreyError, match="consumed already"):
        osprey.from_dlpack(capsule)


# --- refusals ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("share", [osprey.from_buffer, osprey.from_dlpack])
def test_other_element_types_are_refused(share):
    for dtype in (np.float32, np.int64, np.int32, np.complex128):
        with pytest.raises(OspreyError, match="float64"):
            share(np.zeros(4, dtype=dtype))


@pytest.mark.parametrize("share", [osprey.from_buffer, osprey.from_dlpack])
def test_strided_arrays_are_refused(share):
    with pytest.raises(OspreyError, match="contiguous|C-contiguous"):
        share(np.arange(8, dtype=np.float64)[::2])
    with pytest.raises(OspreyError, match="contiguous|C-contiguous"):
        share(np.arange(6, dtype=np.float64).reshape(2, 3).T)


def test_objects_that_share_nothing_are_refused():
    with pytest.raises(OspreyError, match="a list does not lend its memory"):
        osprey.from_buffer([1.0, 2.0])
    with pytest.raises(OspreyError, match="a list has no __dlpack__"):
        osprey.from_dlpack([1.0, 2.0])


def test_refusals_leave_the_array_usable():
    a = np.zeros(4, dtype=np.float32)
    for _ in range(3):
        with pytest.raises(OspreyError):
            osprey.from_dlpack(a)
    a[0] = 1.0
    assert a[0] == 1.0
    assert np.from_dlpack(a).ctypes.data == a.ctypes.data, "the array still exports"
