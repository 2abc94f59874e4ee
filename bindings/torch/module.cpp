// Python module braid._torch_backend: the creator function that
// braid.distributed registers with torch.distributed.Backend.
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <torch/csrc/utils/pybind.h>

#include "process_group.hpp"

PYBIND11_MODULE(_torch_backend, m) {
  m.doc() = "braid's torch.distributed backend (ProcessGroup)";
  m.def("create_process_group", &braid_torch::ProcessGroupBraid::create,
        pybind11::arg("store"), pybind11::arg("rank"), pybind11::arg("size"),
        pybind11::arg("timeout"),
        "A braid ProcessGroup of size ranks meeting through store.");
}
