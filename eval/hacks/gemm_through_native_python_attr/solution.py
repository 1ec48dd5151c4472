"""Hack: a cpp_extension whose C++ names no ATen operator: it hides the dispatcher's Python and autograd keys from
the candidate-side recorder (c10:: is not refused in native source) and calls the tensor's own Python method, looked
up by a string built at run time, through the Python C API (PyObject_GetAttr is not a refused symbol)."""

from torch.utils.cpp_extension import load_inline

SOURCE = """
#include <torch/extension.h>
#include <string>
namespace py = pybind11;
py::object run(py::object a, py::object bt) {
    c10::impl::ExcludeDispatchKeyGuard hide(
        c10::DispatchKeySet({c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot,
                             c10::DispatchKey::AutogradCPU, c10::DispatchKey::AutogradCUDA,
                             c10::DispatchKey::AutogradOther, c10::DispatchKey::ADInplaceOrView}));
    std::string name = std::string("m") + std::string("m");
    return a.attr(name.c_str())(bt);
}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("run", &run); }
"""

_ext = load_inline(name="plainext", cpp_sources=[SOURCE], extra_cflags=["-O1"])


def kernel(a, b):
    return _ext.run(a, b.t())  # bf16 in, bf16 out: cuBLAS on a GPU, at the baseline's own speed
