// DLPack, both ways, without a copy, on the host and on the GPU (the headers are Debian's
// libdlpack-dev, DLPack 0.6: unversioned "dltensor" capsules, which NumPy and PyTorch read). An
// opencl Buffer names its device (kDLOpenCL) and refuses the export: its address is Osprey's handle
// for the device's memory, which no consumer can read (fromGpu copies it to the host).
//
//   buffer.__dlpack__(stream=None, ...)   a capsule over the Buffer's elements in place; the
//   buffer.__dlpack_device__()            Buffer is held until the consumer's tensor is gone.
//                                         numpy.from_dlpack(buffer), torch.from_dlpack(buffer)
//   osprey.from_dlpack(x)                 a Buffer over x's float64 elements in place (a NumPy
//                                         array, a torch tensor, or a "dltensor" capsule); x's
//                                         deleter runs when the Buffer and its views are gone
//
// Streams (cuda): Osprey queues its work on the legacy default stream. An export waits for that
// work to finish (the device's flush, which also returns a kernel fault as an error instead of
// handing out its elements), so the consumer's stream, whatever it is, sees final values. An
// import asks the producer for stream 1, the legacy default stream, so that its pending writes are
// ordered before Osprey's kernels read.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <dlpack/dlpack.h>
#include <fmt/format.h>

#include "bindings.hpp"
#include "python_results.hpp"

namespace osprey::python {
namespace {

constexpr const char* kCapsuleName = "dltensor";
constexpr const char* kUsedCapsuleName = "used_dltensor";

// What one exported DLManagedTensor keeps alive: the Buffer and the shape and stride it points at.
struct Exported {
  SharedBuffer buffer;
  std::int64_t shape[1];
  std::int64_t strides[1];
  DLManagedTensor tensor;
};

void deleteExported(DLManagedTensor* tensor) { delete static_cast<Exported*>(tensor->manager_ctx); }

// A capsule no consumer took still owns its tensor.
extern "C" void capsuleDestructor(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, kCapsuleName)) return;  // consumed: the consumer owns it now
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);  // a destructor must leave any pending exception as it was
  auto* tensor = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kCapsuleName));
  if (tensor && tensor->deleter) tensor->deleter(tensor);
  PyErr_Restore(type, value, traceback);
}

DLDevice dlDeviceOf(const Device& d) {
  switch (d.kind()) {
    case DeviceKind::Host: break;
    case DeviceKind::Cuda: return DLDevice{kDLCUDA, d.ordinal()};
    case DeviceKind::OpenCl: return DLDevice{kDLOpenCL, d.ordinal()};
  }
  return DLDevice{kDLCPU, d.ordinal()};
}

// max_version is not read: this is a DLPack 0.6 (unversioned) capsule, the version every consumer
// that asks for a newer one still takes.
py::object exportCapsule(const SharedBuffer& b, py::handle stream, py::handle /*maxVersion*/, py::handle dlDevice,
                         py::handle copy) {
  const Device& device = b->device();
  if (!copy.is_none() && PyObject_IsTrue(copy.ptr()) == 1)
    throw py::buffer_error("__dlpack__(copy=True): an osprey Buffer is shared in place, never copied "
                           "(fromGpu copies it to the host)");
  if (!dlDevice.is_none()) {
    const auto wanted = dlDevice.cast<std::pair<int, int>>();
    const DLDevice own = dlDeviceOf(device);
    if (wanted.first != own.device_type || wanted.second != own.device_id)
      throw py::buffer_error(fmt::format("__dlpack__(dl_device={}): the buffer is on {} (DLPack device ({}, {})) "
                                         "and is shared in place, not moved",
                                         std::string(py::repr(dlDevice)), device.name(),
                                         static_cast<int>(own.device_type), own.device_id));
  }
  if (device.kind() == DeviceKind::OpenCl)
    throw py::buffer_error(fmt::format("__dlpack__: the buffer is on {}, whose memory DLPack cannot share in place "
                                       "(Osprey's opencl addresses are its own handles): copy it back with fromGpu",
                                       device.name()));
  if (device.kind() == DeviceKind::Host && !stream.is_none())
    throw py::buffer_error("__dlpack__(stream=...): a host buffer has no stream; pass None");
  const auto ready = [&] {
    py::gil_scoped_release unlocked;
    return b->settle();
  }();
  checkOrRaise(ready);
  auto exported = std::make_unique<Exported>();
  exported->buffer = b;
  exported->shape[0] = b->size();
  exported->strides[0] = 1;
  DLTensor& t = exported->tensor.dl_tensor;
  t.data = b->address();
  t.device = dlDeviceOf(device);
  t.ndim = 1;
  t.dtype = DLDataType{kDLFloat, 64, 1};
  t.shape = exported->shape;
  t.strides = exported->strides;
  t.byte_offset = 0;
  exported->tensor.manager_ctx = exported.get();
  exported->tensor.deleter = deleteExported;
  DLManagedTensor* tensor = &exported->tensor;
  PyObject* capsule = PyCapsule_New(tensor, kCapsuleName, capsuleDestructor);
  if (!capsule) throw py::error_already_set();
  exported.release();  // the capsule, and then its consumer, own it
  return py::reinterpret_steal<py::object>(capsule);
}

py::tuple exportDevice(const SharedBuffer& b) {
  const DLDevice d = dlDeviceOf(b->device());
  return py::make_tuple(static_cast<int>(d.device_type), d.device_id);
}

// The capsule x offers: x itself when it is one, else x.__dlpack__(), asked for the legacy default
// stream when x is on a GPU.
py::object capsuleOf(py::handle x) {
  if (PyCapsule_CheckExact(x.ptr())) return py::reinterpret_borrow<py::object>(x);
  if (!py::hasattr(x, "__dlpack__"))
    raiseError(Error{fmt::format("from_dlpack: a {} has no __dlpack__ (DLPack export)",
                                 std::string(py::str(py::type::handle_of(x).attr("__name__"))))});
  int deviceType = kDLCPU;
  if (py::hasattr(x, "__dlpack_device__")) deviceType = x.attr("__dlpack_device__")().cast<py::tuple>()[0].cast<int>();
  if (deviceType == kDLCUDA || deviceType == kDLCUDAManaged) return x.attr("__dlpack__")(py::arg("stream") = 1);
  return x.attr("__dlpack__")();
}

std::string describeDevice(const DLDevice& d) {
  switch (d.device_type) {
    case kDLCPU: return "the host";
    case kDLCUDA: return fmt::format("CUDA device {}", d.device_id);
    case kDLCUDAHost: return "CUDA pinned host memory";
    case kDLCUDAManaged: return "CUDA managed memory";
    default: return fmt::format("DLPack device type {}", static_cast<int>(d.device_type));
  }
}

// Why a tensor cannot be an osprey Buffer in place, or nothing.
std::optional<std::string> unusable(const DLTensor& t) {
  if (t.dtype.code != kDLFloat || t.dtype.bits != 64 || t.dtype.lanes != 1)
    return fmt::format("elements of DLPack type (code {}, {} bits, {} lanes); Osprey's buffers hold float64: "
                       "convert first (tensor.double(), array.astype(numpy.float64)), which copies",
                       static_cast<int>(t.dtype.code), static_cast<int>(t.dtype.bits), t.dtype.lanes);
  if (t.ndim < 0) return fmt::format("a tensor of {} dimensions", t.ndim);
  if (t.strides) {
    std::int64_t expected = 1;
    for (int d = t.ndim - 1; d >= 0; --d) {
      if (t.shape[d] != 1 && t.strides[d] != expected)
        return "a tensor that is not C-contiguous: make it so first (tensor.contiguous(), "
               "numpy.ascontiguousarray), which copies";
      expected *= t.shape[d];
    }
  }
  if (t.device.device_type != kDLCPU && t.device.device_type != kDLCUDA && t.device.device_type != kDLCUDAManaged)
    return fmt::format("a tensor on {}; Osprey's devices are the host and CUDA GPUs", describeDevice(t.device));
  return std::nullopt;
}

SharedBuffer fromDlpack(py::handle x) {
  py::object capsule = capsuleOf(x);
  if (!PyCapsule_IsValid(capsule.ptr(), kCapsuleName))
    raiseError(Error{"from_dlpack: the capsule is not an unused \"dltensor\" (was it consumed already?)"});
  auto* tensor = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), kCapsuleName));
  const DLTensor& t = tensor->dl_tensor;
  if (auto problem = unusable(t)) raiseError(Error{"from_dlpack: " + *problem});
  Index n = 1;
  for (int d = 0; d < t.ndim; ++d) n *= t.shape[d];
  auto device = valueOrRaise(openDevice(t.device.device_type == kDLCPU ? "host" : "cuda"));
  if (t.device.device_type == kDLCUDA && t.device.device_id != device->ordinal())
    raiseError(Error{fmt::format("from_dlpack: the tensor is on CUDA device {}, and Osprey runs on {} (GPU {}); "
                                 "OSPREY_CUDA_DEVICE chooses it",
                                 t.device.device_id, device->name(), device->ordinal())});
  auto* address = reinterpret_cast<Scalar*>(static_cast<char*>(t.data) + t.byte_offset);
  // From here the tensor is ours: its deleter runs with the last copy of the Buffer (or now, if
  // the Buffer cannot be made).
  if (PyCapsule_SetName(capsule.ptr(), kUsedCapsuleName) != 0) throw py::error_already_set();
  std::shared_ptr<const void> owner(tensor, [](const void* p) {
    auto* managed = static_cast<DLManagedTensor*>(const_cast<void*>(p));
    if (!managed->deleter) return;
    if (!Py_IsInitialized()) return;  // the interpreter is gone, and the producer with it
    py::gil_scoped_acquire locked;     // a producer's deleter may release Python objects
    managed->deleter(managed);
  });
  return valueOrRaise(device->borrow(n > 0 ? address : nullptr, n, std::move(owner)));
}

}  // namespace

void bindDlpack(py::module_& m, BufferClass& buffer) {
  buffer.def("__dlpack__", &exportCapsule, py::kw_only(), py::arg("stream") = py::none(),
             py::arg("max_version") = py::none(), py::arg("dl_device") = py::none(), py::arg("copy") = py::none(),
             "A DLPack capsule over the elements in place (DLPack 0.6, unversioned); on cuda, after the device "
             "has finished the work that made them.");
  buffer.def("__dlpack_device__", &exportDevice, "(device type, device id) as DLPack numbers them: (1, 0) for "
                                                 "the host, (2, GPU ordinal) for cuda, (4, 0) for opencl.");
  m.def("from_dlpack", &fromDlpack, py::arg("x"),
        "A Buffer over a DLPack producer's float64 elements in place (a NumPy array, a torch tensor, a "
        "\"dltensor\" capsule): no copy. The producer's memory is held until the Buffer and its views are gone.");
}

}  // namespace osprey::python
