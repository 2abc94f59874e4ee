// braid as a torch.distributed backend (torch 1.13's c10d ProcessGroup).
//
// init_process_group("braid") (after `import braid.distributed`) creates one
// per process group: it meets its peers through the group's torch Store
// (braid_init_kv) and routes all_reduce, reduce_scatter, all_gather,
// broadcast and barrier through braid's dispatcher.  CPU tensors; device
// tensors are refused until the NCCL plugin takes device buffers.
//
// Collectives run to completion in the calling thread and return a finished
// Work (with a completed Future, which DDP's communication hooks use).  One
// mutex per group: braid lets one thread at a time use a communicator, and
// torch may call from its autograd threads.
#pragma once

#include <mutex>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

extern "C" {
#include <braid/braid.h>
}

namespace braid_torch {

class ProcessGroupBraid : public c10d::ProcessGroup {
 public:
  ProcessGroupBraid(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                    int size);
  ~ProcessGroupBraid() override;

  const std::string getBackendName() const override { return "braid"; }

  c10::intrusive_ptr<c10d::Work> broadcast(
      std::vector<at::Tensor>& tensors,
      const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(
      std::vector<std::vector<at::Tensor>>& outputs,
      std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(
      at::Tensor& output, at::Tensor& input,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputs,
      std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(
      const c10d::BarrierOptions& opts) override;

  // The function torch.distributed.Backend.register_backend takes.
  static c10::intrusive_ptr<c10d::ProcessGroup> create(
      const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
      const std::chrono::duration<float>& timeout);

 private:
  braid_comm_t* comm_ = nullptr;
  std::mutex mutex_;
};

}  // namespace braid_torch
